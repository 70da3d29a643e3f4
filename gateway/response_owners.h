// Which provider stored a response (Responses API): a conversation continued
// with previous_response_id, and a GET of a background response, must go to
// the provider that holds it — no other can know the id. Bounded in memory
// (capacity, oldest first out) and in time (ttl). Thread-safe (one mutex,
// taken once per stored response and once per request that names one).
// Beast-free.
#pragma once

#include <chrono>
#include <cstddef>
#include <deque>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>

namespace llmgate::gateway {

class ResponseOwners {
 public:
  using Clock = std::chrono::steady_clock;
  static constexpr std::size_t kDefaultCapacity = 100'000;
  static constexpr Clock::duration kDefaultTtl = std::chrono::hours(24);
  static constexpr std::size_t kMaxIdBytes = 256;  // longer ids are not kept

  explicit ResponseOwners(std::size_t capacity = kDefaultCapacity,
                          Clock::duration ttl = kDefaultTtl)
      : capacity_(capacity), ttl_(ttl) {}

  // `id` was created at `provider` (a provider's name in the config).
  void remember(const std::string& id, const std::string& provider, Clock::time_point now);
  // The provider that holds `id`, if this gateway saw it created within the ttl.
  std::optional<std::string> provider_of(const std::string& id, Clock::time_point now);
  std::size_t size() const;

 private:
  void expire(Clock::time_point now);  // mu_ held

  struct Entry {
    std::string provider;
    Clock::time_point at;
  };
  const std::size_t capacity_;
  const Clock::duration ttl_;
  mutable std::mutex mu_;
  std::unordered_map<std::string, Entry> owners_;
  std::deque<std::pair<std::string, Clock::time_point>> order_;  // oldest first
};

}  // namespace llmgate::gateway
