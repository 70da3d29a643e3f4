// Gateway keys (config::Auth): who may call the API, which models each key
// may use, per-key request and token rate limits (in-process token buckets,
// refilled continuously: a minute's allowance is the burst) and spend
// budgets (USD per UTC day and month; the running totals carry over a
// reload, not a restart — shared_state keeps them in Redis).
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
#include "gateway/http/api_error.h"
#include "gateway/observe/vocabulary.h"

namespace llmgate::gateway {

// Lowercase hex SHA-256 of `text`.
std::string sha256_hex(std::string_view text);

// Whether `key` may use `model` (no key: the API is open; no model list: all).
bool key_allows(const config::GatewayKey* key, const std::string& model);
// The caller may see how requests are routed: deployments, providers,
// prices, exclusions (server.explain; a key's `explain`).
bool may_explain(const config::Config& cfg, const config::GatewayKey* key);
// 403 model_not_allowed when `key` may not use `model`, on every endpoint
// and before anything about the model's operations is said.
std::optional<ApiError> model_refusal(const config::GatewayKey& key, const std::string& model);

// Calendar periods of spend budgets, in UTC.
struct SpendPeriods {
  std::int64_t day = 0;    // days since 1970-01-01
  std::int64_t month = 0;  // year x 12 + month - 1
  int day_left_s = 0;      // seconds until the next day (and budget) starts
  int month_left_s = 0;
  static SpendPeriods at(std::chrono::system_clock::time_point wall);
};

// What a key has used that its limits bound, as this replica (or, with
// shared_state, the fleet) knows it.
struct KeyUsage {
  double token_level = 0;  // tokens left in the minute's bucket; <= 0: none
  int token_wait_s = 0;    // until there is one again
  double day_usd = 0;      // spent in the current UTC day / month
  double month_usd = 0;
};

// The refusal for `key` given `u`, if any: 429 tokens (rate_limit_exceeded)
// or 429 insufficient_quota for a spent budget, retry after the period ends.
std::optional<ApiError> usage_refusal(const config::GatewayKey& key, const KeyUsage& u,
                                      const SpendPeriods& periods);

// How a refusal from authorize() / usage_refusal() is counted
// (llmgate_auth_rejected_total{reason}).
AuthRejection rejection_of(const ApiError& refusal);

class KeyStore {
 public:
  using Clock = std::chrono::steady_clock;
  using Wall = std::chrono::system_clock;
  // `previous` (a reload): buckets of keys that keep their name carry over.
  explicit KeyStore(const config::Auth& auth, const KeyStore* previous = nullptr,
                    Clock::time_point now = Clock::now());

  bool enabled() const { return !keys_.empty(); }

  // The key in `authorization` ("Bearer <key>"), else in `x_api_key` (the
  // header Anthropic's clients send it in), or a 401. Only when enabled().
  std::variant<const config::GatewayKey*, ApiError> authenticate(
      std::string_view authorization, std::string_view x_api_key = {}) const;
  // May `key` use `model` now? 403 for a model it may not use, 429 (with
  // Retry-After) when over its request or token rate or out of budget. Takes
  // one request from the request bucket when allowed.
  std::optional<ApiError> authorize(const config::GatewayKey& key, const std::string& model,
                                    Clock::time_point now = Clock::now(),
                                    Wall::time_point wall = Wall::now());
  // shared_state: request and token rates and budgets are then enforced
  // fleet-wide (SharedLimits) and authorize() checks only the model;
  // take_local_request() and check_local_usage() are the fallback when the
  // shared state is unavailable (on_failure: open). Usage is still charged
  // here too, so that the fallback knows this replica's part.
  void set_shared(bool shared) { shared_ = shared; }
  std::optional<ApiError> take_local_request(const config::GatewayKey& key,
                                             Clock::time_point now = Clock::now());
  std::optional<ApiError> check_local_usage(const config::GatewayKey& key,
                                            Clock::time_point now = Clock::now(),
                                            Wall::time_point wall = Wall::now());
  // The 429 for `key` over its requests per minute, retry after `wait_s`.
  static ApiError requests_limited(const config::GatewayKey& key, int wait_s);

  // What a finished request of `key` used: input + output tokens, and its
  // cost at the answering deployment's price.
  struct Charge {
    std::int64_t tokens = 0;
    double usd = 0;
  };
  void charge(const config::GatewayKey& key, Charge used, Clock::time_point now = Clock::now(),
              Wall::time_point wall = Wall::now());
  // This replica's view of `key` (tests, /admin).
  KeyUsage usage(const config::GatewayKey& key, Clock::time_point now = Clock::now(),
                 Wall::time_point wall = Wall::now());

  // /admin/*: allowed unless an admin key is configured and not presented
  // ('Authorization: Bearer <key>', or Basic with the key as the password).
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
  // Spent in the current day and month (a new period starts from 0).
  struct Spend {
    std::int64_t day = -1;
    std::int64_t month = -1;
    double day_usd = 0;
    double month_usd = 0;
    void roll(const SpendPeriods& p);
  };
  struct State {
    Bucket requests;
    Bucket tokens;
    Spend spend;
  };

  std::optional<ApiError> take_request(const config::GatewayKey& key, State& s);  // mu_ held
  KeyUsage usage_of(State& s, Clock::time_point now, const SpendPeriods& p);      // mu_ held

  std::map<std::string, config::GatewayKey> keys_;  // by sha256
  bool shared_ = false;
  std::string admin_sha256_;
  mutable std::mutex mu_;
  std::map<std::string, State> state_;  // by key name; mu_
};

}  // namespace llmgate::gateway
