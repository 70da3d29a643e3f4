#include "gateway/access/auth.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "gateway/access/http_auth.h"
#include "providers/cloud/sigv4.h"

namespace llmgate::gateway {
namespace {

ApiError unauthorized(std::string message) {
  return ApiError{401,          "invalid_request_error", std::move(message),
                  std::nullopt, "invalid_api_key",       std::nullopt};
}

// "$5.02", "$0.0031": enough digits to see a small spend move.
std::string usd(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, v >= 1 ? "$%.2f" : "$%.4f", v);
  return buf;
}

ApiError out_of_budget(const config::GatewayKey& key, const char* period, double spent,
                       double budget, int left_s, const char* resets) {
  return ApiError{429,
                  "insufficient_quota",
                  "The key \"" + key.name + "\" has used its " + period + " budget: " + usd(spent) +
                      " of " + usd(budget) + " (resets " + resets + " UTC).",
                  std::nullopt,
                  "insufficient_quota",
                  std::max(1, left_s)};
}

}  // namespace

SpendPeriods SpendPeriods::at(std::chrono::system_clock::time_point wall) {
  using namespace std::chrono;
  const auto today = floor<days>(wall);
  const year_month_day ymd{today};
  const auto next_month = sys_days{ymd.year() / ymd.month() / 1 + months{1}};
  SpendPeriods p;
  p.day = today.time_since_epoch().count();
  p.month = static_cast<int>(ymd.year()) * 12 + static_cast<int>(unsigned(ymd.month())) - 1;
  p.day_left_s = static_cast<int>(ceil<seconds>(today + days{1} - wall).count());
  p.month_left_s = static_cast<int>(ceil<seconds>(next_month - wall).count());
  return p;
}

std::optional<ApiError> usage_refusal(const config::GatewayKey& key, const KeyUsage& u,
                                      const SpendPeriods& periods) {
  if (key.budget_usd_per_month && u.month_usd >= *key.budget_usd_per_month) {
    return out_of_budget(key, "monthly", u.month_usd, *key.budget_usd_per_month,
                         periods.month_left_s, "on the 1st at 00:00");
  }
  if (key.budget_usd_per_day && u.day_usd >= *key.budget_usd_per_day) {
    return out_of_budget(key, "daily", u.day_usd, *key.budget_usd_per_day, periods.day_left_s,
                         "at 00:00");
  }
  if (key.tokens_per_minute && u.token_level <= 0) {
    return ApiError{429,
                    "tokens",
                    "Rate limit reached for key \"" + key.name + "\" on tokens per minute: limit " +
                        std::to_string(static_cast<long long>(*key.tokens_per_minute)) + ".",
                    std::nullopt,
                    "rate_limit_exceeded",
                    std::max(1, u.token_wait_s)};
  }
  return std::nullopt;
}

AuthRejection rejection_of(const ApiError& refusal) {
  if (refusal.status == 403) return AuthRejection::kModelNotAllowed;
  if (refusal.code == "insufficient_quota") return AuthRejection::kBudgetExhausted;
  return AuthRejection::kRateLimited;
}

void KeyStore::Spend::roll(const SpendPeriods& p) {
  if (day != p.day) {
    day = p.day;
    day_usd = 0;
  }
  if (month != p.month) {
    month = p.month;
    month_usd = 0;
  }
}

std::string sha256_hex(std::string_view text) { return providers::cloud::sha256_hex(text); }

void KeyStore::Bucket::refill(Clock::time_point now) {
  if (capacity <= 0) return;
  if (now > at) {
    const double s = std::chrono::duration<double>(now - at).count();
    level = std::min(capacity, level + s * capacity / 60.0);
  }
  at = now;
}

int KeyStore::Bucket::wait_s(double need) const {
  if (capacity <= 0 || level >= need) return 0;
  return static_cast<int>(std::ceil((need - level) / (capacity / 60.0)));
}

KeyStore::KeyStore(const config::Auth& auth, const KeyStore* previous, Clock::time_point now)
    : admin_sha256_(auth.admin_key_sha256) {
  for (const auto& k : auth.keys) {
    keys_.emplace(k.sha256, k);
    State s;
    s.requests = Bucket{k.requests_per_minute.value_or(0), k.requests_per_minute.value_or(0), now};
    s.tokens = Bucket{k.tokens_per_minute.value_or(0), k.tokens_per_minute.value_or(0), now};
    if (previous) {
      std::lock_guard lock(previous->mu_);
      if (auto it = previous->state_.find(k.name); it != previous->state_.end()) {
        // What the key has used carries over; a new limit applies at once.
        s.requests.level = std::min(s.requests.capacity, it->second.requests.level);
        s.tokens.level = std::min(s.tokens.capacity, it->second.tokens.level);
        s.requests.at = it->second.requests.at;
        s.tokens.at = it->second.tokens.at;
        s.spend = it->second.spend;  // a new budget applies to what was spent
      }
    }
    state_.emplace(k.name, s);
  }
}

std::variant<const config::GatewayKey*, ApiError> KeyStore::authenticate(
    std::string_view authorization, std::string_view x_api_key) const {
  std::string_view key = bearer(authorization);
  if (key.empty() && authorization.empty()) {
    key = x_api_key;
    while (!key.empty() && (key.front() == ' ' || key.front() == '\t')) key.remove_prefix(1);
    while (!key.empty() && (key.back() == ' ' || key.back() == '\t')) key.remove_suffix(1);
  }
  if (key.empty()) {
    return unauthorized(
        "You didn't provide an API key. Send it as 'Authorization: Bearer <key>' or 'x-api-key: "
        "<key>' (this gateway requires one of its own keys).");
  }
  auto it = keys_.find(sha256_hex(key));
  if (it == keys_.end()) return unauthorized("Incorrect API key provided.");
  return &it->second;
}

bool key_allows(const config::GatewayKey* key, const std::string& model) {
  return !key || key->models.empty() ||
         std::find(key->models.begin(), key->models.end(), model) != key->models.end();
}

bool may_explain(const config::Config& cfg, const config::GatewayKey* key) {
  return cfg.explain() == config::Explain::kAll || (key && key->explain);
}

std::optional<ApiError> model_refusal(const config::GatewayKey& key, const std::string& model) {
  if (key_allows(&key, model)) return std::nullopt;
  return ApiError{403,
                  "invalid_request_error",
                  "The key \"" + key.name + "\" may not use model `" + model.substr(0, 200) + "`.",
                  "model",
                  "model_not_allowed",
                  std::nullopt};
}

std::optional<ApiError> KeyStore::authorize(const config::GatewayKey& key, const std::string& model,
                                            Clock::time_point now, Wall::time_point wall) {
  if (auto no = model_refusal(key, model)) return no;
  if (shared_) return std::nullopt;
  std::lock_guard lock(mu_);
  State& s = state_[key.name];
  s.requests.refill(now);
  const SpendPeriods p = SpendPeriods::at(wall);
  if (auto no = usage_refusal(key, usage_of(s, now, p), p)) return no;
  return take_request(key, s);
}

KeyUsage KeyStore::usage_of(State& s, Clock::time_point now, const SpendPeriods& p) {
  s.tokens.refill(now);
  s.spend.roll(p);
  return KeyUsage{s.tokens.level, s.tokens.wait_s(1), s.spend.day_usd, s.spend.month_usd};
}

std::optional<ApiError> KeyStore::check_local_usage(const config::GatewayKey& key,
                                                    Clock::time_point now, Wall::time_point wall) {
  const SpendPeriods p = SpendPeriods::at(wall);
  std::lock_guard lock(mu_);
  return usage_refusal(key, usage_of(state_[key.name], now, p), p);
}

KeyUsage KeyStore::usage(const config::GatewayKey& key, Clock::time_point now,
                         Wall::time_point wall) {
  const SpendPeriods p = SpendPeriods::at(wall);
  std::lock_guard lock(mu_);
  return usage_of(state_[key.name], now, p);
}

ApiError KeyStore::requests_limited(const config::GatewayKey& key, int wait_s) {
  return ApiError{429,
                  "requests",
                  "Rate limit reached for key \"" + key.name + "\" on requests per minute: limit " +
                      std::to_string(static_cast<long long>(key.requests_per_minute.value_or(0))) +
                      ".",
                  std::nullopt,
                  "rate_limit_exceeded",
                  std::max(1, wait_s)};
}

std::optional<ApiError> KeyStore::take_request(const config::GatewayKey& key, State& s) {
  if (s.requests.capacity > 0) {
    if (s.requests.level < 1) return requests_limited(key, s.requests.wait_s(1));
    s.requests.level -= 1;
  }
  return std::nullopt;
}

std::optional<ApiError> KeyStore::take_local_request(const config::GatewayKey& key,
                                                     Clock::time_point now) {
  std::lock_guard lock(mu_);
  State& s = state_[key.name];
  s.requests.refill(now);
  return take_request(key, s);
}

void KeyStore::charge(const config::GatewayKey& key, Charge used, Clock::time_point now,
                      Wall::time_point wall) {
  if (used.tokens <= 0 && !(used.usd > 0)) return;
  const SpendPeriods p = SpendPeriods::at(wall);
  std::lock_guard lock(mu_);
  auto it = state_.find(key.name);
  if (it == state_.end()) return;
  State& s = it->second;
  if (s.tokens.capacity > 0 && used.tokens > 0) {
    s.tokens.refill(now);
    // May go below zero: a long answer is never cut for the rate; the key
    // waits until it has paid it back.
    s.tokens.level -= static_cast<double>(used.tokens);
  }
  if (used.usd > 0) {
    s.spend.roll(p);
    s.spend.day_usd += used.usd;
    s.spend.month_usd += used.usd;
  }
}

bool KeyStore::admin_allowed(std::string_view authorization) const {
  if (admin_sha256_.empty()) return true;
  std::string_view key = bearer(authorization);
  if (!key.empty()) return sha256_hex(key) == admin_sha256_;
  // A browser (the console) sends the key as a Basic password.
  auto password = basic_password(authorization);
  return password && !password->empty() && sha256_hex(*password) == admin_sha256_;
}

}  // namespace llmgate::gateway
