// routing: and the routing keys of models and deployments: what is read, how
// models[].routing overrides routing.defaults, and the exact errors.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "config/config.h"
#include "tests/unit/config/config_test_support.h"

namespace llmgate::config {
namespace {

using std::chrono::milliseconds;
using testing::config_error;
using testing::fake_env;
using testing::parse;

const std::string kProviders = R"yaml(
providers:
  - {name: groq, base_url: "http://groq"}
  - {name: openai, base_url: "http://openai"}
  - {name: local, base_url: "http://local"}
)yaml";

// Every routing key, none at its default.
const std::string kFullRouting = kProviders + R"yaml(
routing:
  region: eu-west
  exploration: 0.05
  learning_budget: 0.02
  deadline_factor: 4
  min_ttft_deadline: 300ms
  priors: {ttft: 2s, tps: 40}
  estimator: {ttft_tau: 5s, relax_tau: 2m, window: 30s, error_tau: 20s, min_tokens_for_tps: 16}
  ejection:
    consecutive_failures: 3
    error_rate: 0.4
    min_requests: 20
    base_duration: 2s
    max_duration: 1m
    jitter: 0.1
    max_ejected_fraction: 0.25
  retry_budget: {ratio: 0.1, min_per_second: 5}
  affinity: {ttl: 10m, max_entries: 5000}
  defaults:
    policy: balanced
    typical_output_tokens: 512
    allow_fallbacks: false
    max_attempts: 2
    constraints:
      max_output_price_per_1m: 10
      min_tps: 20
      max_ttft: 800ms
      max_ttft_percentile: p99
      providers: [groq, openai]
      deny_providers: [local]
      regions: [eu-west, eu-central]
    weights: {ttft: 0.6, tps: 0.3, price: 0.1}
    hedging:
      enabled: true
      delay: 300ms
      min_delay: 40ms
      max_extra_ratio: 0.05
      on_stall: false
    commit_after: {tokens: 8, within: 400ms}
)yaml";

class RoutingConfigTest : public ::testing::Test {
 protected:
  void SetUp() override { fake_env().clear(); }
};

void expect_default_policy(const RoutingPolicy& p) {
  EXPECT_EQ(p.policy, Policy::kLatency);
  EXPECT_EQ(p.typical_output_tokens, 256);
  EXPECT_TRUE(p.allow_fallbacks);
  EXPECT_EQ(p.max_attempts, 3u);
  EXPECT_FALSE(p.constraints.max_output_price_per_1m.has_value());
  EXPECT_FALSE(p.constraints.min_tps.has_value());
  EXPECT_FALSE(p.constraints.max_ttft.has_value());
  EXPECT_EQ(p.constraints.max_ttft_percentile, Percentile::kP95);
  EXPECT_TRUE(p.constraints.allow_providers.empty());
  EXPECT_TRUE(p.constraints.deny_providers.empty());
  EXPECT_TRUE(p.constraints.regions.empty());
  EXPECT_DOUBLE_EQ(p.weights.ttft, 0.5);
  EXPECT_DOUBLE_EQ(p.weights.tps, 0.25);
  EXPECT_DOUBLE_EQ(p.weights.price, 0.25);
  EXPECT_FALSE(p.hedging.enabled);
  EXPECT_FALSE(p.hedging.delay.has_value());
  EXPECT_EQ(p.hedging.delay_percentile, Percentile::kP99);
  EXPECT_EQ(p.hedging.min_delay, milliseconds(50));
  EXPECT_DOUBLE_EQ(p.hedging.max_extra_ratio, 0.1);
  EXPECT_TRUE(p.hedging.on_stall);
  EXPECT_EQ(p.commit_after.tokens, 0u);  // the speed guard is off
}

TEST_F(RoutingConfigTest, WithoutARoutingSectionEveryDefaultApplies) {
  const auto config =
      parse(kProviders + "models: [{name: m, deployments: [{provider: groq, model: x}]}]\n");
  const Routing& r = config->routing;
  EXPECT_EQ(r.region, "");
  EXPECT_DOUBLE_EQ(r.exploration, 0.01);
  EXPECT_DOUBLE_EQ(r.learning_budget, 0.05);
  EXPECT_DOUBLE_EQ(r.deadline_factor, 3.0);
  EXPECT_DOUBLE_EQ(r.load_factor, 0.05);
  EXPECT_EQ(r.min_ttft_deadline, milliseconds(250));
  EXPECT_EQ(r.ttft_prior, milliseconds(1'000));
  EXPECT_DOUBLE_EQ(r.tps_prior, 50);
  EXPECT_EQ(r.ttft_tau, milliseconds(10'000));
  EXPECT_EQ(r.relax_tau, milliseconds(60'000));
  EXPECT_EQ(r.window, milliseconds(60'000));
  EXPECT_EQ(r.error_tau, milliseconds(30'000));
  EXPECT_EQ(r.min_tokens_for_tps, 10);
  EXPECT_EQ(r.ejection.consecutive_failures, 5u);
  EXPECT_DOUBLE_EQ(r.ejection.error_rate, 0.5);
  EXPECT_EQ(r.ejection.min_requests, 10u);
  EXPECT_EQ(r.ejection.base_duration, milliseconds(5'000));
  EXPECT_EQ(r.ejection.max_duration, milliseconds(300'000));
  EXPECT_DOUBLE_EQ(r.ejection.jitter, 0.2);
  EXPECT_DOUBLE_EQ(r.ejection.max_ejected_fraction, 0.5);
  EXPECT_DOUBLE_EQ(r.retry_budget.ratio, 0.2);
  EXPECT_DOUBLE_EQ(r.retry_budget.min_per_second, 10);
  EXPECT_EQ(r.affinity.ttl, milliseconds(300'000));
  EXPECT_EQ(r.affinity.max_entries, 100'000u);
  expect_default_policy(r.defaults);

  const Model& m = config->models.at(0);
  expect_default_policy(m.routing);
  EXPECT_FALSE(m.deployments.at(0).expected_ttft.has_value());
  EXPECT_FALSE(m.deployments.at(0).expected_tps.has_value());
}

TEST_F(RoutingConfigTest, AnEmptyRoutingSectionMeansTheDefaults) {
  const auto config = parse("routing: {}\n");
  EXPECT_DOUBLE_EQ(config->routing.exploration, 0.01);
  expect_default_policy(config->routing.defaults);
}

TEST_F(RoutingConfigTest, ReadsEveryRoutingKey) {
  const auto config = parse(kFullRouting);
  const Routing& r = config->routing;
  EXPECT_EQ(r.region, "eu-west");
  EXPECT_DOUBLE_EQ(r.exploration, 0.05);
  EXPECT_DOUBLE_EQ(r.learning_budget, 0.02);
  EXPECT_DOUBLE_EQ(r.deadline_factor, 4.0);
  EXPECT_EQ(r.min_ttft_deadline, milliseconds(300));
  EXPECT_EQ(r.ttft_prior, milliseconds(2'000));
  EXPECT_DOUBLE_EQ(r.tps_prior, 40);
  EXPECT_EQ(r.ttft_tau, milliseconds(5'000));
  EXPECT_EQ(r.relax_tau, milliseconds(120'000));
  EXPECT_EQ(r.window, milliseconds(30'000));
  EXPECT_EQ(r.error_tau, milliseconds(20'000));
  EXPECT_EQ(r.min_tokens_for_tps, 16);
  EXPECT_EQ(r.ejection.consecutive_failures, 3u);
  EXPECT_DOUBLE_EQ(r.ejection.error_rate, 0.4);
  EXPECT_EQ(r.ejection.min_requests, 20u);
  EXPECT_EQ(r.ejection.base_duration, milliseconds(2'000));
  EXPECT_EQ(r.ejection.max_duration, milliseconds(60'000));
  EXPECT_DOUBLE_EQ(r.ejection.jitter, 0.1);
  EXPECT_DOUBLE_EQ(r.ejection.max_ejected_fraction, 0.25);
  EXPECT_DOUBLE_EQ(r.retry_budget.ratio, 0.1);
  EXPECT_DOUBLE_EQ(r.retry_budget.min_per_second, 5);
  EXPECT_EQ(r.affinity.ttl, milliseconds(600'000));
  EXPECT_EQ(r.affinity.max_entries, 5'000u);
  EXPECT_EQ(parse("routing: {affinity: {ttl: 0s}}\n")->routing.affinity.ttl, milliseconds(0));

  const RoutingPolicy& d = r.defaults;
  EXPECT_EQ(d.policy, Policy::kBalanced);
  EXPECT_EQ(d.typical_output_tokens, 512);
  EXPECT_FALSE(d.allow_fallbacks);
  EXPECT_EQ(d.max_attempts, 2u);
  EXPECT_EQ(d.constraints.max_output_price_per_1m, 10.0);
  EXPECT_EQ(d.constraints.min_tps, 20.0);
  EXPECT_EQ(d.constraints.max_ttft, milliseconds(800));
  EXPECT_EQ(d.constraints.max_ttft_percentile, Percentile::kP99);
  EXPECT_EQ(d.constraints.allow_providers, (std::vector<std::string>{"groq", "openai"}));
  EXPECT_EQ(d.constraints.deny_providers, (std::vector<std::string>{"local"}));
  EXPECT_EQ(d.constraints.regions, (std::vector<std::string>{"eu-west", "eu-central"}));
  EXPECT_DOUBLE_EQ(d.weights.ttft, 0.6);
  EXPECT_DOUBLE_EQ(d.weights.tps, 0.3);
  EXPECT_DOUBLE_EQ(d.weights.price, 0.1);
  EXPECT_TRUE(d.hedging.enabled);
  EXPECT_EQ(d.hedging.delay, milliseconds(300));
  EXPECT_EQ(d.hedging.min_delay, milliseconds(40));
  EXPECT_DOUBLE_EQ(d.hedging.max_extra_ratio, 0.05);
  EXPECT_FALSE(d.hedging.on_stall);
  EXPECT_EQ(d.commit_after.tokens, 8u);
  EXPECT_EQ(d.commit_after.within, milliseconds(400));
}

TEST_F(RoutingConfigTest, AModelWithoutRoutingGetsExactlyTheDefaults) {
  const auto config =
      parse(kFullRouting + "models: [{name: m, deployments: [{provider: groq, model: x}]}]\n");
  const RoutingPolicy& d = config->routing.defaults;
  const RoutingPolicy& m = config->models.at(0).routing;
  EXPECT_EQ(m.policy, Policy::kBalanced);
  EXPECT_EQ(m.typical_output_tokens, d.typical_output_tokens);
  EXPECT_EQ(m.allow_fallbacks, d.allow_fallbacks);
  EXPECT_EQ(m.max_attempts, d.max_attempts);
  EXPECT_EQ(m.constraints.max_output_price_per_1m, d.constraints.max_output_price_per_1m);
  EXPECT_EQ(m.constraints.min_tps, d.constraints.min_tps);
  EXPECT_EQ(m.constraints.max_ttft, d.constraints.max_ttft);
  EXPECT_EQ(m.constraints.max_ttft_percentile, d.constraints.max_ttft_percentile);
  EXPECT_EQ(m.constraints.allow_providers, d.constraints.allow_providers);
  EXPECT_EQ(m.constraints.deny_providers, d.constraints.deny_providers);
  EXPECT_EQ(m.constraints.regions, d.constraints.regions);
  EXPECT_EQ(m.weights.ttft, d.weights.ttft);
  EXPECT_EQ(m.weights.tps, d.weights.tps);
  EXPECT_EQ(m.weights.price, d.weights.price);
  EXPECT_EQ(m.hedging.enabled, d.hedging.enabled);
  EXPECT_EQ(m.hedging.delay, d.hedging.delay);
  EXPECT_EQ(m.hedging.min_delay, d.hedging.min_delay);
  EXPECT_EQ(m.hedging.max_extra_ratio, d.hedging.max_extra_ratio);
}

TEST_F(RoutingConfigTest, AModelOverridesTheDefaultsKeyByKey) {
  const auto config = parse(kFullRouting + R"yaml(
models:
  - name: chat
    routing:
      policy: cost
      max_attempts: 5
      constraints:
        max_ttft: 2s
        providers: [local]
      weights: {price: 0}
      hedging: {delay: p90, max_extra_ratio: 0.2}
    deployments: [{provider: groq, model: x}]
  - name: plain
    deployments: [{provider: groq, model: x}]
)yaml");
  const RoutingPolicy& chat = config->find_model("chat")->routing;
  EXPECT_EQ(chat.policy, Policy::kCost);
  EXPECT_EQ(chat.max_attempts, 5u);
  EXPECT_EQ(chat.typical_output_tokens, 512);  // from the defaults
  EXPECT_FALSE(chat.allow_fallbacks);          // from the defaults
  // constraints: only max_ttft and the allow list change; a list replaces the default list.
  EXPECT_EQ(chat.constraints.max_ttft, milliseconds(2'000));
  EXPECT_EQ(chat.constraints.allow_providers, (std::vector<std::string>{"local"}));
  EXPECT_EQ(chat.constraints.max_output_price_per_1m, 10.0);
  EXPECT_EQ(chat.constraints.min_tps, 20.0);
  EXPECT_EQ(chat.constraints.max_ttft_percentile, Percentile::kP99);
  EXPECT_EQ(chat.constraints.deny_providers, (std::vector<std::string>{"local"}));
  EXPECT_EQ(chat.constraints.regions, (std::vector<std::string>{"eu-west", "eu-central"}));
  // weights: price zeroed, the others kept.
  EXPECT_DOUBLE_EQ(chat.weights.ttft, 0.6);
  EXPECT_DOUBLE_EQ(chat.weights.tps, 0.3);
  EXPECT_DOUBLE_EQ(chat.weights.price, 0.0);
  // hedging: "p90" unsets the default fixed delay; the rest is kept.
  EXPECT_TRUE(chat.hedging.enabled);
  EXPECT_FALSE(chat.hedging.delay.has_value());
  EXPECT_EQ(chat.hedging.min_delay, milliseconds(40));
  EXPECT_DOUBLE_EQ(chat.hedging.max_extra_ratio, 0.2);

  // The override does not leak into the defaults or into other models.
  const RoutingPolicy& plain = config->find_model("plain")->routing;
  EXPECT_EQ(plain.policy, Policy::kBalanced);
  EXPECT_EQ(plain.max_attempts, 2u);
  EXPECT_EQ(plain.constraints.max_ttft, milliseconds(800));
  EXPECT_EQ(plain.constraints.allow_providers, (std::vector<std::string>{"groq", "openai"}));
  EXPECT_EQ(plain.hedging.delay, milliseconds(300));
  EXPECT_EQ(config->routing.defaults.policy, Policy::kBalanced);
}

TEST_F(RoutingConfigTest, AModelMayOverrideWithoutAnyRoutingSection) {
  const auto config = parse(kProviders + R"yaml(
models:
  - name: m
    routing: {constraints: {min_tps: 30}, hedging: {enabled: true}}
    deployments: [{provider: groq, model: x}]
)yaml");
  const RoutingPolicy& m = config->models.at(0).routing;
  EXPECT_EQ(m.policy, Policy::kLatency);
  EXPECT_EQ(m.constraints.min_tps, 30.0);
  EXPECT_FALSE(m.constraints.max_ttft.has_value());
  EXPECT_TRUE(m.hedging.enabled);
  EXPECT_EQ(m.hedging.min_delay, milliseconds(50));
}

TEST_F(RoutingConfigTest, AnEmptyProviderListInAModelClearsTheDefaultList) {
  const auto config = parse(kProviders + R"yaml(
routing: {defaults: {constraints: {providers: [groq]}}}
models:
  - {name: m, routing: {constraints: {providers: []}}, deployments: [{provider: groq, model: x}]}
)yaml");
  EXPECT_TRUE(config->models.at(0).routing.constraints.allow_providers.empty());
}

TEST_F(RoutingConfigTest, TheRegionFallsBackToTheEnvironment) {
  fake_env()["LLMGATE_REGION"] = "us-east";
  EXPECT_EQ(parse("")->routing.region, "us-east");
  EXPECT_EQ(parse("routing: {exploration: 0.1}\n")->routing.region, "us-east");
  EXPECT_EQ(parse("routing: {region: ''}\n")->routing.region, "us-east");
  EXPECT_EQ(parse("routing: {region: eu-west}\n")->routing.region, "eu-west");
  fake_env().clear();
  EXPECT_EQ(parse("")->routing.region, "");
}

TEST_F(RoutingConfigTest, ReadsDeploymentPriors) {
  const auto config = parse(kProviders + R"yaml(
models:
  - name: m
    deployments:
      - {provider: groq, model: a, expected_ttft: 200ms, expected_tps: 300}
      - {provider: openai, model: b, expected_tps: 42.5}
)yaml");
  const auto& d = config->models.at(0).deployments;
  EXPECT_EQ(d.at(0).expected_ttft, milliseconds(200));
  EXPECT_EQ(d.at(0).expected_tps, 300.0);
  EXPECT_FALSE(d.at(1).expected_ttft.has_value());
  EXPECT_EQ(d.at(1).expected_tps, 42.5);
}

TEST_F(RoutingConfigTest, EveryPolicyNameRoundTrips) {
  const std::pair<Policy, const char*> kNames[] = {
      {Policy::kLatency, "latency"},
      {Policy::kThroughput, "throughput"},
      {Policy::kE2e, "e2e"},
      {Policy::kCost, "cost"},
      {Policy::kBalanced, "balanced"},
      {Policy::kOrdered, "ordered"},
      {Policy::kRoundRobin, "round_robin"},
      {Policy::kRandom, "random"},
  };
  for (const auto& [policy, name] : kNames) {
    EXPECT_STREQ(to_string(policy), name);
    EXPECT_EQ(parse_policy(name), policy) << name;
    EXPECT_EQ(parse("routing: {defaults: {policy: " + std::string(name) + "}}\n")
                  ->routing.defaults.policy,
              policy)
        << name;
  }
  EXPECT_EQ(parse_policy("Latency"), std::nullopt);
  EXPECT_EQ(parse_policy("round-robin"), std::nullopt);
  EXPECT_EQ(parse_policy(""), std::nullopt);
}

TEST_F(RoutingConfigTest, AcceptsTheBoundsOfEveryRange) {
  const auto low = parse(R"yaml(
routing:
  exploration: 0
  deadline_factor: 1
  estimator: {min_tokens_for_tps: 1}
  ejection: {consecutive_failures: 1, error_rate: 1, min_requests: 1, jitter: 0,
             max_ejected_fraction: 0, base_duration: 1s, max_duration: 1s}
  retry_budget: {ratio: 0, min_per_second: 0}
  defaults: {typical_output_tokens: 1, max_attempts: 1, weights: {ttft: 0, tps: 0, price: 1},
             hedging: {max_extra_ratio: 0}}
)yaml");
  EXPECT_DOUBLE_EQ(low->routing.exploration, 0);
  EXPECT_EQ(low->routing.ejection.max_duration, low->routing.ejection.base_duration);
  const auto high = parse(R"yaml(
routing:
  exploration: 0.5
  deadline_factor: 100
  estimator: {min_tokens_for_tps: 100000}
  ejection: {consecutive_failures: 1000, min_requests: 1000000, jitter: 0.99,
             max_ejected_fraction: 1}
  retry_budget: {ratio: 1}
  defaults: {typical_output_tokens: 1000000, max_attempts: 10, hedging: {max_extra_ratio: 1}}
)yaml");
  EXPECT_DOUBLE_EQ(high->routing.deadline_factor, 100);
  EXPECT_EQ(high->routing.defaults.max_attempts, 10u);
}

// --- errors -------------------------------------------------------------------

struct ErrorCase {
  const char* name;
  std::string yaml;
  std::string message;
};

std::string model_with_routing(const std::string& routing) {
  return kProviders + "models:\n  - name: chat\n    deployments: [{provider: groq, model: x}]\n" +
         "    routing: " + routing + "\n";
}

const ErrorCase kErrors[] = {
    {"UnknownPolicyWithAHint", model_with_routing("{policy: round-robin}"),
     R"(cfg.yaml: models[0].routing.policy: unknown policy "round-robin" (did you mean "round_robin"?))"},
    {"UnknownPolicyListsTheValidNames", model_with_routing("{policy: fastest}"),
     R"(cfg.yaml: models[0].routing.policy: unknown policy "fastest" (expected one of: latency, throughput, e2e, cost, balanced, ordered, round_robin, random))"},
    {"UnknownPolicyInTheDefaults", "routing: {defaults: {policy: latancy}}\n",
     R"(cfg.yaml: routing.defaults.policy: unknown policy "latancy" (did you mean "latency"?))"},
    {"UnknownKeyUnderRouting", "routing: {exploraton: 0.1}\n",
     R"(cfg.yaml: routing: unknown key "exploraton" (did you mean "exploration"?))"},
    {"UnknownKeyUnderRoutingListsTheKeys", "routing: {colour: red}\n",
     R"(cfg.yaml: routing: unknown key "colour" (expected one of: region, exploration, learning_budget, deadline_factor, load_factor, min_ttft_deadline, priors, estimator, ejection, retry_budget, affinity, defaults))"},
    {"UnknownKeyInAModelsRouting", model_with_routing("{constraints: {max_tft: 1s}}"),
     R"(cfg.yaml: models[0].routing.constraints: unknown key "max_tft" (did you mean "max_ttft"?))"},
    {"UnknownKeyInHedging", "routing: {defaults: {hedging: {enable: true}}}\n",
     R"(cfg.yaml: routing.defaults.hedging: unknown key "enable" (did you mean "enabled"?))"},
    {"BadPercentile", "routing: {defaults: {constraints: {max_ttft_percentile: p75}}}\n",
     R"(cfg.yaml: routing.defaults.constraints.max_ttft_percentile: unknown percentile "p75" (expected one of: p50, p90, p95, p99))"},
    {"UnknownProviderInConstraints",
     kProviders + "routing: {defaults: {constraints: {providers: [groq, grok]}}}\n",
     R"(cfg.yaml: routing.defaults.constraints.providers[1]: unknown provider "grok" (did you mean "groq"?))"},
    {"UnknownProviderInAModelsDenyList",
     model_with_routing("{constraints: {deny_providers: [azure]}}"),
     R"(cfg.yaml: models[0].routing.constraints.deny_providers[0]: unknown provider "azure")"},
    {"ConstraintsNameProvidersEvenWithoutAProvidersSection",
     "routing: {defaults: {constraints: {providers: [groq]}}}\n",
     R"(cfg.yaml: routing.defaults.constraints.providers[0]: unknown provider "groq")"},
    {"EmptyRegion", "routing: {defaults: {constraints: {regions: [eu-west, '']}}}\n",
     R"(cfg.yaml: routing.defaults.constraints.regions[1]: must not be empty)"},
    {"AllWeightsZero", "routing: {defaults: {weights: {ttft: 0, tps: 0, price: 0}}}\n",
     R"(cfg.yaml: routing.defaults.weights: ttft, tps and price must not all be zero)"},
    {"AllWeightsZeroAfterTheOverride",
     "routing: {defaults: {weights: {ttft: 1, tps: 0, price: 0}}}\n" +
         model_with_routing("{weights: {ttft: 0}}"),
     R"(cfg.yaml: models[0].routing.weights: ttft, tps and price must not all be zero)"},
    {"NegativeWeight", "routing: {defaults: {weights: {tps: -1}}}\n",
     R"(cfg.yaml: routing.defaults.weights.tps: must not be negative)"},
    {"MaxDurationBelowBaseDuration",
     "routing: {ejection: {base_duration: 10s, max_duration: 5s}}\n",
     R"(cfg.yaml: routing.ejection.max_duration: must be at least base_duration (10s), got 5s)"},
    {"MaxDurationBelowTheDefaultBaseDuration", "routing: {ejection: {max_duration: 2s}}\n",
     R"(cfg.yaml: routing.ejection.max_duration: must be at least base_duration (5s), got 2s)"},
    {"BaseDurationAboveTheDefaultMaxDuration", "routing: {ejection: {base_duration: 10m}}\n",
     R"(cfg.yaml: routing.ejection.base_duration: must be at most max_duration (5m), got 10m)"},
    {"ExplorationAboveRange", "routing: {exploration: 0.7}\n",
     R"(cfg.yaml: routing.exploration: must be between 0 and 0.5, got 0.7)"},
    {"ExplorationBelowRange", "routing: {exploration: -0.1}\n",
     R"(cfg.yaml: routing.exploration: must be between 0 and 0.5, got -0.1)"},
    {"DeadlineFactorBelowOne", "routing: {deadline_factor: 0.5}\n",
     R"(cfg.yaml: routing.deadline_factor: must be between 1 and 100, got 0.5)"},
    {"ZeroErrorRate", "routing: {ejection: {error_rate: 0}}\n",
     R"(cfg.yaml: routing.ejection.error_rate: must be greater than 0 and at most 1, got 0)"},
    {"JitterOfOne", "routing: {ejection: {jitter: 1}}\n",
     R"(cfg.yaml: routing.ejection.jitter: must be at least 0 and less than 1, got 1)"},
    {"ZeroConsecutiveFailures", "routing: {ejection: {consecutive_failures: 0}}\n",
     R"(cfg.yaml: routing.ejection.consecutive_failures: must be between 1 and 1000, got 0)"},
    {"TooManyAttempts", model_with_routing("{max_attempts: 11}"),
     R"(cfg.yaml: models[0].routing.max_attempts: must be between 1 and 10, got 11)"},
    {"FractionalTokens", "routing: {defaults: {typical_output_tokens: 2.5}}\n",
     R"(cfg.yaml: routing.defaults.typical_output_tokens: expected a whole number, got 2.5)"},
    {"ZeroTpsPrior", "routing: {priors: {tps: 0}}\n",
     R"(cfg.yaml: routing.priors.tps: must be greater than zero)"},
    {"NoAffinityEntries", "routing: {affinity: {max_entries: 0}}\n",
     R"(cfg.yaml: routing.affinity.max_entries: must be between 1 and 10000000, got 0)"},
    {"LearningBudgetAboveOne", "routing: {learning_budget: 1.5}\n",
     R"(cfg.yaml: routing.learning_budget: must be between 0 and 1, got 1.5)"},
    {"RetryRatioAboveOne", "routing: {retry_budget: {ratio: 1.5}}\n",
     R"(cfg.yaml: routing.retry_budget.ratio: must be between 0 and 1, got 1.5)"},
    {"HedgingDelayNeitherDurationNorPercentile", "routing: {defaults: {hedging: {delay: soon}}}\n",
     R"(cfg.yaml: routing.defaults.hedging.delay: invalid duration "soon" (expected e.g. 250ms, 2s, 1m))"},
    {"HedgingDelayUnknownPercentile", "routing: {defaults: {hedging: {delay: p75}}}\n",
     R"(cfg.yaml: routing.defaults.hedging.delay: unknown percentile "p75" (expected one of: p50, p90, p95, p99))"},
    {"ZeroExpectedTps",
     kProviders +
         "models: [{name: m, deployments: [{provider: groq, model: x, expected_tps: 0}]}]\n",
     R"(cfg.yaml: models[0].deployments[0].expected_tps: must be greater than zero)"},
    {"BadExpectedTtft",
     kProviders +
         "models: [{name: m, deployments: [{provider: groq, model: x, expected_ttft: 200}]}]\n",
     R"(cfg.yaml: models[0].deployments[0].expected_ttft: invalid duration "200" (expected e.g. 250ms, 2s, 1m))"},
    {"SpeedGuardWithinZero", "routing: {defaults: {commit_after: {tokens: 4, within: 0s}}}\n",
     R"(cfg.yaml: routing.defaults.commit_after.within: must be greater than zero)"},
    {"SpeedGuardTooManyTokens", model_with_routing("{commit_after: {tokens: 5000}}"),
     R"(cfg.yaml: models[0].routing.commit_after.tokens: must be between 0 and 1000, got 5000)"},
    {"RoutingNotAMapping", "routing: [latency]\n",
     R"(cfg.yaml: routing: expected a mapping, got a list)"},
    {"MisspeltRoutingSection", "routin: {}\n",
     R"(cfg.yaml: unknown key "routin" (did you mean "routing"?))"},
};

class RoutingConfigErrorTest : public ::testing::TestWithParam<ErrorCase> {
 protected:
  void SetUp() override { fake_env().clear(); }
};

TEST_P(RoutingConfigErrorTest, ReportsTheExactMessage) {
  EXPECT_EQ(config_error(GetParam().yaml), GetParam().message) << "config:\n" << GetParam().yaml;
}

INSTANTIATE_TEST_SUITE_P(Matrix, RoutingConfigErrorTest, ::testing::ValuesIn(kErrors),
                         [](const auto& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace llmgate::config
