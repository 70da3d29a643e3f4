#include <gtest/gtest.h>

#include "config/config.h"
#include "config_test_support.h"

namespace llmgate::config {
namespace {

using testing::config_error;
using testing::fake_env;
using testing::parse;

class SharedStateConfigTest : public ::testing::Test {
 protected:
  void SetUp() override { fake_env().clear(); }
};

TEST_F(SharedStateConfigTest, OffByDefault) {
  EXPECT_FALSE(parse("models: []\n")->shared_state.enabled());
}

TEST_F(SharedStateConfigTest, ReadsEverySetting) {
  fake_env()["REDIS_PW"] = " s3cret \n";
  auto cfg = parse(R"(
shared_state:
  url: rediss://redis.llm.svc:6380/2
  username: llmgate
  password_env: REDIS_PW
  tls: {verify: false}
  key_prefix: fleet-a
  on_failure: closed
  timeout: 20ms
  connect_timeout: 2s
  lease_window: 250ms
  slot_ttl: 30s
  share_ejections: false
)");
  const SharedState& s = cfg->shared_state;
  EXPECT_TRUE(s.enabled());
  EXPECT_EQ(s.host, "redis.llm.svc");
  EXPECT_EQ(s.port, 6380);
  EXPECT_EQ(s.db, 2);
  EXPECT_TRUE(s.tls);
  EXPECT_FALSE(s.tls_settings.verify);
  EXPECT_EQ(s.username, "llmgate");
  EXPECT_EQ(s.password, "s3cret");
  EXPECT_EQ(s.password_source, "env:REDIS_PW");
  EXPECT_EQ(s.key_prefix, "fleet-a");
  EXPECT_EQ(s.on_failure, SharedState::OnFailure::kClosed);
  EXPECT_EQ(s.timeout, Duration{20});
  EXPECT_EQ(s.connect_timeout, Duration{2000});
  EXPECT_EQ(s.lease_window, Duration{250});
  EXPECT_EQ(s.slot_ttl, Duration{30000});
  EXPECT_FALSE(s.share_ejections);
}

TEST_F(SharedStateConfigTest, DefaultsAndIpv6) {
  auto s = parse("shared_state: {url: \"redis://[::1]\"}\n")->shared_state;
  EXPECT_EQ(s.host, "::1");
  EXPECT_EQ(s.port, 6379);
  EXPECT_EQ(s.db, 0);
  EXPECT_FALSE(s.tls);
  EXPECT_EQ(s.on_failure, SharedState::OnFailure::kOpen);
  EXPECT_EQ(s.timeout, Duration{50});
  EXPECT_EQ(s.key_prefix, "llmgate");
  EXPECT_TRUE(s.share_ejections);
}

TEST_F(SharedStateConfigTest, MayComeFromTheEnvironmentWhenTheFileHasNone) {
  fake_env()["LLMGATE_SHARED_STATE"] =
      "{url: \"redis://llmgate-redis:6379\", password_env: REDIS_PASSWORD, on_failure: closed}";
  fake_env()["REDIS_PASSWORD"] = "pw";
  const SharedState s = parse("models: []\n")->shared_state;
  EXPECT_EQ(s.host, "llmgate-redis");
  EXPECT_EQ(s.password, "pw");
  EXPECT_EQ(s.on_failure, SharedState::OnFailure::kClosed);
  // Validated as the section is, and named as where it came from.
  fake_env()["LLMGATE_SHARED_STATE"] = "{url: \"redis://r\", timeout: 10s}";
  const std::string bad = config_error("models: []\n");
  EXPECT_NE(bad.find("$LLMGATE_SHARED_STATE"), std::string::npos) << bad;
  EXPECT_NE(bad.find("timeout"), std::string::npos) << bad;
  // Both: which one was meant is not guessed.
  fake_env()["LLMGATE_SHARED_STATE"] = "{url: \"redis://r\"}";
  EXPECT_NE(config_error("shared_state: {url: \"redis://q\"}\n").find("keep one"),
            std::string::npos);
}

TEST_F(SharedStateConfigTest, RefusesWhatWouldGoWrongLater) {
  EXPECT_NE(config_error("shared_state: {url: \"http://r:6379\"}\n").find("redis://"),
            std::string::npos);
  EXPECT_NE(config_error("shared_state: {url: \"redis://u:pw@r:6379\"}\n").find("credentials"),
            std::string::npos);
  EXPECT_NE(config_error("shared_state: {url: \"redis://r:0\"}\n").find("bad port"),
            std::string::npos);
  EXPECT_NE(config_error("shared_state: {url: \"redis://r/x\"}\n").find("database"),
            std::string::npos);
  EXPECT_NE(
      config_error("shared_state: {url: \"redis://r\", tls: {verify: false}}\n").find("rediss://"),
      std::string::npos);
  EXPECT_NE(config_error("shared_state: {url: \"redis://r\", on_failure: maybe}\n").find("open"),
            std::string::npos);
  EXPECT_NE(config_error("shared_state: {url: \"redis://r\", username: u}\n").find("password"),
            std::string::npos);
  EXPECT_NE(config_error("shared_state: {url: \"redis://r\", timeout: 10s}\n").find("timeout"),
            std::string::npos);
  EXPECT_NE(
      config_error("shared_state: {url: \"redis://r\", key_prefix: \"a b\"}\n").find("key_prefix"),
      std::string::npos);
  EXPECT_NE(config_error("shared_state: {url: \"redis://r\", password_env: MISSING}\n")
                .find("is not set"),
            std::string::npos);
  EXPECT_NE(config_error("shared_state: {}\n").find("url"), std::string::npos);
}

}  // namespace
}  // namespace llmgate::config
