// Gateway keys: hashing, authentication, model permissions, rate limits.
#include "gateway/auth.h"

#include <gtest/gtest.h>

namespace llmgate::gateway {
namespace {

using namespace std::chrono_literals;
using Clock = KeyStore::Clock;

config::Auth auth_with(std::optional<double> rpm = std::nullopt,
                       std::optional<double> tpm = std::nullopt) {
  config::Auth a;
  a.keys.push_back({"team-a", sha256_hex("sk-team-a"), {"chat"}, rpm, tpm});
  a.keys.push_back({"team-b", sha256_hex("sk-team-b"), {}, std::nullopt, std::nullopt});
  return a;
}

TEST(Sha256, MatchesTheStandardTestVector) {
  EXPECT_EQ(sha256_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

TEST(KeyStore, IsDisabledWithoutKeys) {
  EXPECT_FALSE(KeyStore(config::Auth{}).enabled());
  EXPECT_TRUE(KeyStore(auth_with()).enabled());
}

TEST(KeyStore, AuthenticatesBearerKeysByTheirHash) {
  KeyStore ks(auth_with());
  auto ok = ks.authenticate("Bearer sk-team-a");
  ASSERT_TRUE(std::holds_alternative<const config::GatewayKey*>(ok));
  EXPECT_EQ(std::get<const config::GatewayKey*>(ok)->name, "team-a");
  EXPECT_TRUE(
      std::holds_alternative<const config::GatewayKey*>(ks.authenticate("bearer  sk-team-b ")));
  for (const char* bad : {"", "Bearer ", "Basic c2stdGVhbS1h", "Bearer sk-team-c", "sk-team-a"}) {
    auto r = ks.authenticate(bad);
    ASSERT_TRUE(std::holds_alternative<ApiError>(r)) << bad;
    EXPECT_EQ(std::get<ApiError>(r).status, 401);
    EXPECT_EQ(std::get<ApiError>(r).code, "invalid_api_key");
    EXPECT_EQ(std::get<ApiError>(r).message.find("sk-"), std::string::npos)
        << "an error echoed the key";
  }
}

TEST(KeyStore, AKeyMayUseOnlyItsModels) {
  KeyStore ks(auth_with());
  const auto& a = *std::get<const config::GatewayKey*>(ks.authenticate("Bearer sk-team-a"));
  const auto& b = *std::get<const config::GatewayKey*>(ks.authenticate("Bearer sk-team-b"));
  EXPECT_FALSE(ks.authorize(a, "chat").has_value());
  auto denied = ks.authorize(a, "other");
  ASSERT_TRUE(denied.has_value());
  EXPECT_EQ(denied->status, 403);
  EXPECT_EQ(denied->code, "model_not_allowed");
  EXPECT_FALSE(ks.authorize(b, "other").has_value());  // no list: every model
}

TEST(KeyStore, RequestsPerMinuteIsATokenBucketThatRefills) {
  const auto t0 = Clock::now();
  KeyStore ks(auth_with(2), nullptr, t0);
  const auto& a = *std::get<const config::GatewayKey*>(ks.authenticate("Bearer sk-team-a"));
  EXPECT_FALSE(ks.authorize(a, "chat", t0).has_value());
  EXPECT_FALSE(ks.authorize(a, "chat", t0).has_value());
  auto limited = ks.authorize(a, "chat", t0);
  ASSERT_TRUE(limited.has_value());
  EXPECT_EQ(limited->status, 429);
  EXPECT_EQ(limited->type, "requests");
  EXPECT_EQ(limited->code, "rate_limit_exceeded");
  EXPECT_EQ(limited->retry_after_s, 30);  // 2 per minute: one every 30 s
  EXPECT_TRUE(ks.authorize(a, "chat", t0 + 29s).has_value());
  EXPECT_FALSE(ks.authorize(a, "chat", t0 + 30s).has_value());
}

TEST(KeyStore, TokensPerMinuteAreChargedAfterTheAnswerAndWaitedOff) {
  const auto t0 = Clock::now();
  KeyStore ks(auth_with(std::nullopt, 600), nullptr, t0);
  const auto& a = *std::get<const config::GatewayKey*>(ks.authenticate("Bearer sk-team-a"));
  EXPECT_FALSE(ks.authorize(a, "chat", t0).has_value());
  ks.charge_tokens(a, 900, t0);  // a long answer is never cut: the bucket goes below zero
  auto limited = ks.authorize(a, "chat", t0);
  ASSERT_TRUE(limited.has_value());
  EXPECT_EQ(limited->type, "tokens");
  EXPECT_EQ(limited->retry_after_s, 31);  // 300 tokens owed at 10/s, then one more
  EXPECT_FALSE(ks.authorize(a, "chat", t0 + 31s).has_value());
}

TEST(KeyStore, AReloadKeepsWhatAKeyHasUsed) {
  const auto t0 = Clock::now();
  KeyStore old(auth_with(1), nullptr, t0);
  const auto& a = *std::get<const config::GatewayKey*>(old.authenticate("Bearer sk-team-a"));
  EXPECT_FALSE(old.authorize(a, "chat", t0).has_value());
  KeyStore fresh(auth_with(1), &old, t0);
  const auto& a2 = *std::get<const config::GatewayKey*>(fresh.authenticate("Bearer sk-team-a"));
  EXPECT_TRUE(fresh.authorize(a2, "chat", t0).has_value());
}

TEST(KeyStore, TheAdminKeyGuardsOnlyWhenConfigured) {
  config::Auth open;
  EXPECT_TRUE(KeyStore(open).admin_allowed(""));
  config::Auth guarded;
  guarded.admin_key_sha256 = sha256_hex("admin-secret");
  KeyStore ks(guarded);
  EXPECT_FALSE(ks.admin_allowed(""));
  EXPECT_FALSE(ks.admin_allowed("Bearer wrong"));
  EXPECT_TRUE(ks.admin_allowed("Bearer admin-secret"));
}

}  // namespace
}  // namespace llmgate::gateway
