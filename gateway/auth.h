// Gateway keys (config::Auth): who may call the API, which models each key
// may use, and per-key request and token rate limits (in-process token
// buckets, refilled continuously: a minute's allowance is the burst).
//
// Keys are configured by SHA-256 only; a presented key is hashed and looked
// up, and never stored, logged or forwarded (the client's Authorization never
// goes upstream: each provider gets its own key). Beast-free; thread-safe.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <variant>

#include "config/config.h"
#include "gateway/api_error.h"

namespace llmgate::gateway {

// Lowercase hex SHA-256 of `text`.
std::string sha256_hex(std::string_view text);

// Whether `key` may use `model` (no key: the API is open; no model list: all).
bool key_allows(const config::GatewayKey* key, const std::string& model);

class KeyStore {
 public:
  using Clock = std::chrono::steady_clock;
  // `previous` (a reload): buckets of keys that keep their name carry over.
  explicit KeyStore(const config::Auth& auth, const KeyStore* previous = nullptr,
                    Clock::time_point now = Clock::now());

  bool enabled() const { return !keys_.empty(); }

  // The key in `authorization` ("Bearer <key>"), or a 401. Only when enabled().
  std::variant<const config::GatewayKey*, ApiError> authenticate(
      std::string_view authorization) const;
  // May `key` use `model` now? 403 for a model it may not use, 429 (with
  // Retry-After) when over its request or token rate. Takes one request from
  // the request bucket when allowed.
  std::optional<ApiError> authorize(const config::GatewayKey& key, const std::string& model,
                                    Clock::time_point now = Clock::now());
  // shared_state: request rates are then enforced fleet-wide (SharedLimits)
  // and authorize() leaves the request bucket alone; take_local_request() is
  // the fallback when the shared state is unavailable (on_failure: open).
  void set_requests_shared(bool shared) { requests_shared_ = shared; }
  std::optional<ApiError> take_local_request(const config::GatewayKey& key,
                                             Clock::time_point now = Clock::now());
  // The 429 for `key` over its requests per minute, retry after `wait_s`.
  static ApiError requests_limited(const config::GatewayKey& key, int wait_s);

  // Tokens a finished request of `key` used (input + output).
  void charge_tokens(const config::GatewayKey& key, std::int64_t tokens,
                     Clock::time_point now = Clock::now());

  // /admin/*: allowed unless an admin key is configured and not presented.
  bool admin_allowed(std::string_view authorization) const;

 private:
  struct Bucket {
    double capacity = 0;  // per minute; 0 = no limit
    double level = 0;
    Clock::time_point at{};
    void refill(Clock::time_point now);
    // Seconds until `need` is available (0 if it is now).
    int wait_s(double need) const;
  };
  struct State {
    Bucket requests;
    Bucket tokens;
  };

  std::optional<ApiError> take_request(const config::GatewayKey& key, State& s);  // mu_ held

  std::map<std::string, config::GatewayKey> keys_;  // by sha256
  bool requests_shared_ = false;
  std::string admin_sha256_;
  mutable std::mutex mu_;
  std::map<std::string, State> state_;  // by key name; mu_
};

}  // namespace llmgate::gateway
