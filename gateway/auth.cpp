#include "gateway/auth.h"

#include <openssl/evp.h>

#include <algorithm>
#include <cmath>

namespace llmgate::gateway {
namespace {

// "Bearer <key>" (scheme case-insensitive), else "".
std::string_view bearer(std::string_view authorization) {
  constexpr std::string_view kScheme = "bearer ";
  if (authorization.size() <= kScheme.size()) return {};
  for (std::size_t i = 0; i < kScheme.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(authorization[i])) != kScheme[i]) return {};
  }
  std::string_view key = authorization.substr(kScheme.size());
  while (!key.empty() && key.front() == ' ') key.remove_prefix(1);
  while (!key.empty() && key.back() == ' ') key.remove_suffix(1);
  return key;
}

ApiError unauthorized(std::string message) {
  return ApiError{401,          "invalid_request_error", std::move(message),
                  std::nullopt, "invalid_api_key",       std::nullopt};
}

}  // namespace

std::string sha256_hex(std::string_view text) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_Digest(text.data(), text.size(), digest, &len, EVP_sha256(), nullptr);
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(2 * len);
  for (unsigned int i = 0; i < len; ++i) {
    out.push_back(kHex[digest[i] >> 4]);
    out.push_back(kHex[digest[i] & 0xf]);
  }
  return out;
}

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
      }
    }
    state_.emplace(k.name, s);
  }
}

std::variant<const config::GatewayKey*, ApiError> KeyStore::authenticate(
    std::string_view authorization) const {
  std::string_view key = bearer(authorization);
  if (key.empty()) {
    return unauthorized(
        "You didn't provide an API key. Send it as 'Authorization: Bearer <key>' (this gateway "
        "requires one of its own keys).");
  }
  auto it = keys_.find(sha256_hex(key));
  if (it == keys_.end()) return unauthorized("Incorrect API key provided.");
  return &it->second;
}

bool key_allows(const config::GatewayKey* key, const std::string& model) {
  return !key || key->models.empty() ||
         std::find(key->models.begin(), key->models.end(), model) != key->models.end();
}

std::optional<ApiError> KeyStore::authorize(const config::GatewayKey& key, const std::string& model,
                                            Clock::time_point now) {
  if (!key_allows(&key, model)) {
    return ApiError{
        403,
        "invalid_request_error",
        "The key \"" + key.name + "\" may not use model `" + model.substr(0, 200) + "`.",
        "model",
        "model_not_allowed",
        std::nullopt};
  }
  std::lock_guard lock(mu_);
  State& s = state_[key.name];
  s.requests.refill(now);
  s.tokens.refill(now);
  if (s.tokens.capacity > 0 && s.tokens.level <= 0) {
    return ApiError{429,
                    "tokens",
                    "Rate limit reached for key \"" + key.name + "\" on tokens per minute: limit " +
                        std::to_string(static_cast<long long>(s.tokens.capacity)) + ".",
                    std::nullopt,
                    "rate_limit_exceeded",
                    std::max(1, s.tokens.wait_s(1))};
  }
  if (requests_shared_) return std::nullopt;
  return take_request(key, s);
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

void KeyStore::charge_tokens(const config::GatewayKey& key, std::int64_t tokens,
                             Clock::time_point now) {
  if (tokens <= 0) return;
  std::lock_guard lock(mu_);
  auto it = state_.find(key.name);
  if (it == state_.end() || it->second.tokens.capacity <= 0) return;
  it->second.tokens.refill(now);
  // May go below zero: a long answer is never cut for the rate; the key
  // waits until it has paid it back.
  it->second.tokens.level -= static_cast<double>(tokens);
}

bool KeyStore::admin_allowed(std::string_view authorization) const {
  if (admin_sha256_.empty()) return true;
  std::string_view key = bearer(authorization);
  return !key.empty() && sha256_hex(key) == admin_sha256_;
}

}  // namespace llmgate::gateway
