// Gateway keys: hashing, authentication, model permissions, rate limits.
#include "gateway/access/auth.h"

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
  ks.charge(a, {900, 0}, t0);  // a long answer is never cut: the bucket goes below zero
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

config::Auth auth_with_budget(std::optional<double> per_day, std::optional<double> per_month) {
  config::Auth a = auth_with();
  a.keys[0].budget_usd_per_day = per_day;
  a.keys[0].budget_usd_per_month = per_month;
  return a;
}

std::chrono::system_clock::time_point utc(std::chrono::year_month_day d, std::chrono::seconds s) {
  return std::chrono::sys_days{d} + s;
}

// The budget tests' steady clock (buckets) and wall clock (periods).
const Clock::time_point t0{std::chrono::hours(1)};
const auto noon = utc(std::chrono::year{2026} / std::chrono::November / 27, std::chrono::hours(12));

const config::GatewayKey& key_named(const KeyStore& ks, const char* key) {
  return *std::get<const config::GatewayKey*>(ks.authenticate(std::string("Bearer ") + key));
}

TEST(SpendPeriods, CountUtcDaysAndMonthsAndTheTimeLeftInThem) {
  using namespace std::chrono;
  const auto p = SpendPeriods::at(utc(2026y / November / 27, 23h + 59min + 30s));
  EXPECT_EQ(p.day_left_s, 30);
  EXPECT_EQ(p.month_left_s, 3 * 86400 + 30);  // to 2026-12-01T00:00Z
  EXPECT_EQ(p.month, 2026 * 12 + 10);
  const auto dec = SpendPeriods::at(utc(2026y / December / 31, 0s));
  EXPECT_EQ(dec.day, p.day + 34);
  EXPECT_EQ(dec.month_left_s, 86400);  // the year turns
  EXPECT_EQ(dec.month, p.month + 1);
}

TEST(KeyStore, ADailyBudgetRefusesOnceSpentUntilTheDayEnds) {
  using namespace std::chrono;
  KeyStore ks(auth_with_budget(1.0, std::nullopt), nullptr, t0);
  const auto& a = key_named(ks, "sk-team-a");
  EXPECT_FALSE(ks.authorize(a, "chat", t0, noon).has_value());
  ks.charge(a, {1000, 0.6}, t0, noon);
  EXPECT_FALSE(ks.authorize(a, "chat", t0, noon).has_value());  // $0.60 of $1.00
  ks.charge(a, {1000, 0.45}, t0, noon);  // an answer is never cut: the spend passes the budget
  auto no = ks.authorize(a, "chat", t0, noon);
  ASSERT_TRUE(no.has_value());
  EXPECT_EQ(no->status, 429);
  EXPECT_EQ(no->type, "insufficient_quota");
  EXPECT_EQ(no->code, "insufficient_quota");
  EXPECT_EQ(no->retry_after_s, 12 * 3600);
  EXPECT_NE(no->message.find("$1.05 of $1.00"), std::string::npos) << no->message;
  EXPECT_EQ(rejection_of(*no), AuthRejection::kBudgetExhausted);
  // Other keys are not affected; the next UTC day starts from zero.
  const auto& b = key_named(ks, "sk-team-b");
  EXPECT_FALSE(ks.authorize(b, "chat", t0, noon).has_value());
  EXPECT_FALSE(ks.authorize(a, "chat", t0, noon + 12h).has_value());
  EXPECT_DOUBLE_EQ(ks.usage(a, t0, noon + 12h).month_usd, 1.05);
}

TEST(KeyStore, AMonthlyBudgetSpansDaysAndRetriesAfterTheMonth) {
  using namespace std::chrono;
  KeyStore ks(auth_with_budget(10.0, 2.0), nullptr, t0);
  const auto& a = key_named(ks, "sk-team-a");
  ks.charge(a, {0, 1.5}, t0, utc(2026y / November / 3, 0s));
  ks.charge(a, {0, 0.5}, t0, utc(2026y / November / 20, 0s));
  const auto late = utc(2026y / November / 30, 23h);
  auto no = ks.authorize(a, "chat", t0, late);
  ASSERT_TRUE(no.has_value());
  EXPECT_EQ(no->type, "insufficient_quota");
  EXPECT_EQ(no->retry_after_s, 3600);
  EXPECT_NE(no->message.find("monthly"), std::string::npos);
  EXPECT_FALSE(ks.authorize(a, "chat", t0, utc(2026y / December / 1, 0s)).has_value());
}

TEST(KeyStore, AReloadKeepsWhatAKeyHasSpent) {
  using namespace std::chrono;
  KeyStore old(auth_with_budget(1.0, std::nullopt), nullptr, t0);
  const auto& a = key_named(old, "sk-team-a");
  old.charge(a, {0, 0.75}, t0, noon);
  KeyStore fresh(auth_with_budget(0.5, std::nullopt), &old, t0);  // a lower budget applies at once
  const auto& a2 = key_named(fresh, "sk-team-a");
  EXPECT_TRUE(fresh.authorize(a2, "chat", t0, noon).has_value());
}

TEST(KeyStore, SharedLimitsLeaveOnlyTheModelCheckToAuthorize) {
  using namespace std::chrono;
  KeyStore ks(auth_with_budget(1.0, std::nullopt), nullptr, t0);
  const auto& a = key_named(ks, "sk-team-a");
  ks.set_shared(true);
  ks.charge(a, {0, 5.0}, t0, noon);
  EXPECT_FALSE(ks.authorize(a, "chat", t0, noon).has_value());
  ASSERT_TRUE(ks.authorize(a, "other", t0, noon).has_value());
  // ... and what was charged is there for the fallback.
  EXPECT_TRUE(ks.check_local_usage(a, t0, noon).has_value());
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

TEST(KeyStore, TheAdminKeyMayComeAsABasicPassword) {
  // What a browser sends for the console once asked (RFC 7617): base64 of
  // "user:password"; the user name is not checked.
  config::Auth guarded;
  guarded.admin_key_sha256 = sha256_hex("admin-secret");
  KeyStore ks(guarded);
  EXPECT_TRUE(ks.admin_allowed("Basic YWRtaW46YWRtaW4tc2VjcmV0"));  // admin:admin-secret
  EXPECT_TRUE(ks.admin_allowed("basic OmFkbWluLXNlY3JldA=="));      // :admin-secret
  EXPECT_TRUE(ks.admin_allowed("Basic OmFkbWluLXNlY3JldA"));        // unpadded
  EXPECT_FALSE(ks.admin_allowed("Basic YWRtaW46d3Jvbmc="));         // admin:wrong
  EXPECT_FALSE(ks.admin_allowed("Basic YWRtaW4tc2VjcmV0"));         // admin-secret: no colon
  EXPECT_FALSE(ks.admin_allowed("Basic YWRtaW46"));                 // admin: (empty password)
  EXPECT_FALSE(ks.admin_allowed("Basic OmFkbWluLXNlY3JldA==x"));    // data after padding
  EXPECT_FALSE(ks.admin_allowed("Basic OmFkbWlu*XNlY3JldA=="));     // not base64
  EXPECT_FALSE(ks.admin_allowed("Basic "));
  EXPECT_FALSE(ks.admin_allowed("Basic " + std::string(2000, 'A')));
  EXPECT_FALSE(ks.admin_allowed("Digest OmFkbWluLXNlY3JldA=="));
}

}  // namespace
}  // namespace llmgate::gateway
