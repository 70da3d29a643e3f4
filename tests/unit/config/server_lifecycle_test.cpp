// server.admin_listener and server.drain: parsing, defaults and errors.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "config/config.h"
#include "tests/unit/config/config_test_support.h"

namespace llmgate::config {
namespace {

using std::chrono::milliseconds;
using testing::config_error;
using ::testing::HasSubstr;
using testing::parse;

std::string with_server(const std::string& server) {
  return "server:\n" + server + R"yaml(
providers:
  - name: p
    base_url: http://127.0.0.1:9000/v1
models:
  - name: m
    deployments:
      - provider: p
        model: up
)yaml";
}

TEST(ServerLifecycleConfig, DefaultsToNoAdminListenerAndAThirtySecondDrain) {
  auto cfg = parse(with_server("  workers: 1\n"));
  EXPECT_FALSE(cfg->server.admin_listener.has_value());
  EXPECT_EQ(cfg->server.drain.delay, milliseconds(0));
  EXPECT_EQ(cfg->server.drain.timeout, milliseconds(30'000));
}

TEST(ServerLifecycleConfig, ReadsAdminListenerAndDrain) {
  auto cfg = parse(with_server(R"yaml(
  listeners: [{address: 127.0.0.1, port: 8080}]
  admin_listener: {address: 0.0.0.0, port: 8081}
  drain: {delay: 5s, timeout: 25s}
)yaml"));
  ASSERT_TRUE(cfg->server.admin_listener.has_value());
  EXPECT_EQ(cfg->server.admin_listener->address, "0.0.0.0");
  EXPECT_EQ(cfg->server.admin_listener->port, 8081);
  EXPECT_EQ(cfg->server.drain.delay, milliseconds(5'000));
  EXPECT_EQ(cfg->server.drain.timeout, milliseconds(25'000));
}

TEST(ServerLifecycleConfig, ADrainDelayMayBeZeroButTheTimeoutMayNot) {
  EXPECT_EQ(parse(with_server("  drain: {delay: 0s}\n"))->server.drain.delay, milliseconds(0));
  EXPECT_THAT(config_error(with_server("  drain: {timeout: 0s}\n")),
              HasSubstr("server.drain.timeout: must be greater than zero"));
}

TEST(ServerLifecycleConfig, RejectsAnAdminListenerThatIsAlsoAnApiListener) {
  EXPECT_THAT(config_error(with_server(R"yaml(
  listeners: [{address: 127.0.0.1, port: 8080}]
  admin_listener: {address: 127.0.0.1, port: 8080}
)yaml")),
              HasSubstr("server: admin_listener 127.0.0.1:8080 is also in listeners"));
}

TEST(ServerLifecycleConfig, RejectsUnknownDrainKeysWithTheirPath) {
  EXPECT_THAT(config_error(with_server("  drain: {grace: 5s}\n")),
              HasSubstr("server.drain: unknown key \"grace\""));
  EXPECT_THAT(config_error(with_server("  admin_listener: {address: localhost, port: 1}\n")),
              HasSubstr("server.admin_listener.address: expected an IP address"));
}

TEST(ServerLifecycleConfig, ProvidersCompareEqualOnlyWhenEverySettingMatches) {
  auto a = parse(with_server("  workers: 1\n"));
  auto b = parse(with_server("  workers: 1\n"));
  EXPECT_EQ(a->providers[0], b->providers[0]);
  config::Provider changed = b->providers[0];
  changed.base_url.port = 9001;
  EXPECT_NE(a->providers[0], changed);
  changed = b->providers[0];
  changed.timeouts.ttft = milliseconds(5);
  EXPECT_NE(a->providers[0], changed);
}

}  // namespace
}  // namespace llmgate::config

namespace llmgate::config {
namespace {

std::string with_deployment(const std::string& deployment_extra) {
  return R"yaml(
providers:
  - name: p
    base_url: http://127.0.0.1:9000/v1
models:
  - name: m
    deployments:
      - {provider: p, model: up)yaml" +
         deployment_extra + R"yaml(}
)yaml";
}

TEST(LimitsConfig, DeploymentsAreUnlimitedUnlessTheySayOtherwise) {
  auto cfg = testing::parse(with_deployment(""));
  EXPECT_FALSE(cfg->models[0].deployments[0].max_concurrent.has_value());
  EXPECT_EQ(cfg->models[0].deployments[0].max_queue, 0u);
  EXPECT_EQ(cfg->server.limits.max_connections, 10'000u);
}

TEST(LimitsConfig, ReadsMaxConcurrentAndMaxQueue) {
  auto cfg = testing::parse(with_deployment(", max_concurrent: 8, max_queue: 16"));
  EXPECT_EQ(cfg->models[0].deployments[0].max_concurrent, 8u);
  EXPECT_EQ(cfg->models[0].deployments[0].max_queue, 16u);
}

TEST(LimitsConfig, AQueueWithoutALimitIsAMistake) {
  EXPECT_THAT(testing::config_error(with_deployment(", max_queue: 4")),
              ::testing::HasSubstr("models[0].deployments[0]: max_queue needs max_concurrent"));
  EXPECT_THAT(testing::config_error(with_deployment(", max_concurrent: 0")),
              ::testing::HasSubstr("max_concurrent: must be between 1 and 1000000"));
}

TEST(LimitsConfig, ReadsMaxConnections) {
  auto cfg = testing::parse("server: {limits: {max_connections: 64}}\n" + with_deployment(""));
  EXPECT_EQ(cfg->server.limits.max_connections, 64u);
}

}  // namespace
}  // namespace llmgate::config

namespace llmgate::config {
namespace {

const std::string kModels = R"yaml(
providers:
  - {name: p, base_url: "http://127.0.0.1:9000/v1"}
models:
  - name: chat
    deployments: [{provider: p, model: up}]
)yaml";
const std::string kHash(64, 'a');

TEST(AuthConfig, IsOffUnlessKeysAreListed) {
  EXPECT_FALSE(testing::parse(kModels)->auth.enabled());
}

TEST(AuthConfig, ReadsKeysWithTheirModelsAndRates) {
  auto cfg =
      testing::parse(kModels + "auth:\n  admin_key_sha256: " + std::string(64, 'B') +
                     "\n  keys:\n    - {name: app, sha256: " + kHash +
                     ", models: [chat], requests_per_minute: 60, tokens_per_minute: 1000}\n");
  ASSERT_TRUE(cfg->auth.enabled());
  const auto& k = cfg->auth.keys[0];
  EXPECT_EQ(k.name, "app");
  EXPECT_EQ(k.sha256, kHash);
  EXPECT_EQ(k.models, std::vector<std::string>{"chat"});
  EXPECT_EQ(k.requests_per_minute, 60);
  EXPECT_EQ(k.tokens_per_minute, 1000);
  EXPECT_EQ(cfg->auth.admin_key_sha256, std::string(64, 'b'));  // normalised to lowercase
}

TEST(AuthConfig, ReadsSpendBudgets) {
  auto cfg = testing::parse(kModels + "auth:\n  keys:\n    - {name: app, sha256: " + kHash +
                            ", budget: {usd_per_day: 5, usd_per_month: 100.5}}\n    - {name: b, "
                            "sha256: " +
                            std::string(64, 'c') + ", budget: {usd_per_month: 1}}\n");
  const auto& k = cfg->auth.keys[0];
  EXPECT_EQ(k.budget_usd_per_day, 5);
  EXPECT_EQ(k.budget_usd_per_month, 100.5);
  EXPECT_TRUE(k.has_usage_limits());
  EXPECT_FALSE(cfg->auth.keys[1].budget_usd_per_day.has_value());
  EXPECT_THAT(testing::config_error(kModels + "auth:\n  keys:\n    - {name: app, sha256: " + kHash +
                                    ", budget: {usd_per_day: 0}}\n"),
              HasSubstr("usd_per_day: must be greater than 0"));
  EXPECT_THAT(testing::config_error(kModels + "auth:\n  keys:\n    - {name: app, sha256: " + kHash +
                                    ", budget: {usd_per_week: 3}}\n"),
              HasSubstr("usd_per_week"));
}

TEST(AuthConfig, ReadsPermissionsAndExplicitOpenness) {
  auto cfg = testing::parse(kModels + "auth:\n  keys:\n    - {name: ops, sha256: " + kHash +
                            ", allow_overrides: true, explain: true}\n    - {name: app, sha256: " +
                            std::string(64, 'c') + "}\n");
  EXPECT_TRUE(cfg->auth.keys[0].allow_overrides);
  EXPECT_TRUE(cfg->auth.keys[0].explain);
  EXPECT_FALSE(cfg->auth.keys[1].allow_overrides);
  EXPECT_FALSE(cfg->auth.keys[1].explain);
  EXPECT_EQ(cfg->explain(), Explain::kKeys);  // keys configured: explanations for explain keys only
  EXPECT_FALSE(cfg->auth.declared_open);
  EXPECT_EQ(testing::parse(kModels)->explain(), Explain::kAll);
  EXPECT_EQ(testing::parse(kModels + "server: {explain: keys}\n")->explain(), Explain::kKeys);

  auto open = testing::parse(kModels + "auth: {enabled: false}\n");
  EXPECT_FALSE(open->auth.enabled());
  EXPECT_TRUE(open->auth.declared_open);
  EXPECT_TRUE(open->auth.admin_declared_open);
  EXPECT_TRUE(testing::parse(kModels + "auth: {admin_open: true}\n")->auth.admin_declared_open);

  using ::testing::HasSubstr;
  EXPECT_THAT(testing::config_error(
                  kModels + "auth: {enabled: false, keys: [{name: a, sha256: " + kHash + "}]}\n"),
              HasSubstr("auth: enabled: false, yet keys are configured"));
  EXPECT_THAT(testing::config_error(kModels + "auth: {enabled: true}\n"),
              HasSubstr("auth: enabled: true needs at least one key"));
  EXPECT_THAT(testing::config_error(kModels +
                                    "auth: {admin_open: true, admin_key_sha256: " + kHash + "}\n"),
              HasSubstr("admin_open: true, yet admin_key_sha256 is set"));
  EXPECT_THAT(testing::config_error(kModels + "server: {explain: some}\n"),
              HasSubstr("server.explain: expected \"all\" or \"keys\""));
}

TEST(AuthConfig, RejectsPlainKeysUnknownModelsAndDuplicates) {
  using ::testing::HasSubstr;
  EXPECT_THAT(testing::config_error(kModels + "auth: {keys: [{name: a, sha256: sk-live-123}]}\n"),
              HasSubstr("auth.keys[0].sha256: expected the key's SHA-256 as 64 hex digits"));
  EXPECT_EQ(testing::config_error(kModels + "auth: {keys: [{name: a, sha256: sk-live-123}]}\n")
                .find("sk-live"),
            std::string::npos)
      << "the error echoed what may be a key";
  EXPECT_THAT(testing::config_error(kModels + "auth: {keys: [{name: a, sha256: " + kHash +
                                    ", models: [gpt]}]}\n"),
              HasSubstr("auth.keys[0].models[0]: unknown model \"gpt\""));
  EXPECT_THAT(testing::config_error(kModels + "auth: {keys: [{name: a, sha256: " + kHash +
                                    "}, {name: a, sha256: " + std::string(64, 'c') + "}]}\n"),
              HasSubstr("duplicate key name \"a\""));
  EXPECT_THAT(testing::config_error(kModels + "auth: {keys: [{name: a, sha256: " + kHash +
                                    ", requests_per_minute: 0}]}\n"),
              HasSubstr("requests_per_minute: must be greater than 0"));
}

}  // namespace
}  // namespace llmgate::config
