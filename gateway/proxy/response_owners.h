// Which provider stored a response (Responses API): a conversation continued
// with previous_response_id, and a GET of a background response, must go to
// the provider that holds it — no other can know the id. Bounded in memory
// (capacity, oldest first out) and in time (ttl). Thread-safe (one mutex,
// taken once per stored response and once per request that names one).
// Beast-free. Also: the paths that name a stored response.
#pragma once

#include <chrono>
#include <cstddef>
#include <deque>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
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

  // Where a response lives and whose it is: the provider's name in the
  // config, and the model it was created for (the public name, for the caller's key, and the
  // deployment's upstream name, for a path such as Azure's that names it).
  struct Owner {
    std::string provider;
    std::string model;
    std::string upstream_model;
    // The gateway key that created it (its name; empty without keys): the
    // provider sees one account for every tenant, so the gateway keeps a
    // key's responses to that key.
    std::string key;
    bool operator==(const Owner&) const = default;
  };

  // `id` was created at `owner.provider`.
  void remember(const std::string& id, Owner owner, Clock::time_point now);
  // Where `id` lives, if this gateway saw it created within the ttl.
  std::optional<Owner> owner_of(const std::string& id, Clock::time_point now);
  // `id` was deleted at its provider.
  void forget(const std::string& id);
  std::size_t size() const;

 private:
  void expire(Clock::time_point now);  // mu_ held

  struct Entry {
    Owner owner;
    Clock::time_point at;
  };
  const std::size_t capacity_;
  const Clock::duration ttl_;
  mutable std::mutex mu_;
  std::unordered_map<std::string, Entry> owners_;
  std::deque<std::pair<std::string, Clock::time_point>> order_;  // oldest first
};

// A path that names a stored response (with or without "/v1"):
// /responses/{id} (GET retrieves, DELETE deletes), /responses/{id}/input_items
// (GET) and /responses/{id}/cancel (POST, a background response). An id is
// 1..kMaxIdBytes of [A-Za-z0-9_.:-] (what providers issue); else nullopt.
struct ResponsePath {
  enum class Part { kResponse, kInputItems, kCancel };
  std::string id;
  Part part = Part::kResponse;
};
std::optional<ResponsePath> response_path(std::string_view path);
// The part as a path suffix: "", "/input_items" or "/cancel".
std::string_view part_path(ResponsePath::Part part);

// The query of `target` that goes on to the provider: only the parameters of
// the Responses API's GETs (retrieve: stream, starting_after, include;
// input_items: after, before, limit, order, include), in the client's order
// and as the client wrote them; any other is dropped, so that a client
// cannot put a parameter of the provider's own (Azure's api-version) ahead
// of the one the provider's config sets. "" when none is left.
std::string responses_query(std::string_view target);

}  // namespace llmgate::gateway
