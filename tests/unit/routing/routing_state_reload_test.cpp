// RoutingState across a hot reload: what the router has learnt carries over
// for unchanged deployments, and only for them.
#include <gtest/gtest.h>

#include <string>

#include "config/config.h"
#include "routing/routing_state.h"

namespace llmgate::routing {
namespace {

using namespace std::chrono_literals;

std::shared_ptr<const config::Config> cfg(const std::string& b_url, const std::string& tau = "10s",
                                          unsigned eject_after = 5) {
  return config::parse_config(
      R"(
routing: {estimator: {ttft_tau: )" +
          tau + "}, ejection: {consecutive_failures: " + std::to_string(eject_after) + R"(}}
providers:
  - {name: a, base_url: "http://127.0.0.1:9001/v1"}
  - {name: b, base_url: ")" +
          b_url + R"("}
models:
  - name: m
    deployments: [{provider: a, model: x}, {provider: b, model: y}]
)",
      "test.yaml");
}

AttemptRecord ok(const std::string& id, Clock::time_point t0) {
  AttemptRecord r;
  r.deployment = id;
  r.outcome = AttemptOutcome::kSuccess;
  r.request_sent = t0;
  r.first_token = t0 + 100ms;
  return r;
}

TEST(RoutingStateReload, KeepsStatisticsAndHealthOfUnchangedDeployments) {
  auto c1 = cfg("http://127.0.0.1:9002/v1");
  RoutingState s1(*c1);
  const auto t0 = Clock::now();
  s1.stats.record(ok("a/x", t0), t0 + 1s);
  s1.stats.record(ok("b/y", t0), t0 + 1s);
  RoutingState s2(*cfg("http://127.0.0.1:9002/v1"), *c1, s1);
  EXPECT_EQ(s2.stats.get_or_prior("a/x", t0 + 1s).ttft_samples, 1u);
  EXPECT_EQ(s2.stats.get_or_prior("b/y", t0 + 1s).ttft_samples, 1u);
  // One registry: an attempt still recording into the old state is seen by the new.
  s1.stats.record(ok("a/x", t0), t0 + 2s);
  EXPECT_EQ(s2.stats.get_or_prior("a/x", t0 + 2s).ttft_samples, 2u);
}

TEST(RoutingStateReload, PromptCacheAffinityCarriesOverUnlessItsSettingsChanged) {
  auto c1 = cfg("http://127.0.0.1:9002/v1");
  RoutingState s1(*c1);
  const auto t0 = Clock::now();
  const config::PrefixCut cut{77, 8000, 0};
  s1.affinity.remember(std::span(&cut, 1), 0, cut, 0xa, t0);
  RoutingState s2(*cfg("http://127.0.0.1:9002/v1"), *c1, s1);
  EXPECT_EQ(s2.affinity.find(std::span(&cut, 1), 0, cut, t0).count, 1u);
  auto c3 = config::parse_config(R"(
routing: {affinity: {ttl: 1m}}
providers:
  - {name: a, base_url: "http://127.0.0.1:9001/v1"}
models:
  - {name: m, deployments: [{provider: a, model: x}]}
)",
                                 "test.yaml");
  RoutingState s3(*c3, *c1, s1);
  EXPECT_EQ(s3.affinity.ttl(), 60s);
  EXPECT_EQ(s3.affinity.find(std::span(&cut, 1), 0, cut, t0).count, 0u);
}

TEST(RoutingStateReload, ADeploymentWhoseProviderChangedStartsAfreshButKeepsItsInFlightCount) {
  auto c1 = cfg("http://127.0.0.1:9002/v1");
  RoutingState s1(*c1);
  const auto t0 = Clock::now();
  s1.stats.record(ok("a/x", t0), t0 + 1s);
  s1.stats.record(ok("b/y", t0), t0 + 1s);
  for (int i = 0; i < 5; ++i) s1.health.on_attempt("b/y", true, 1.0, 10, t0 + 1s);
  ASSERT_EQ(s1.health.peek("b/y", t0 + 1s).state, HealthState::kEjected);
  StatsRegistry::InFlight running(s1.stats, "b/y");
  RoutingState s2(*cfg("http://127.0.0.1:9003/v1"), *c1, s1);
  EXPECT_EQ(s2.stats.get_or_prior("a/x", t0 + 1s).ttft_samples, 1u);
  EXPECT_EQ(s2.stats.get_or_prior("b/y", t0 + 1s).ttft_samples, 0u);
  EXPECT_EQ(s2.stats.get_or_prior("b/y", t0 + 1s).in_flight, 1);
  EXPECT_EQ(s2.health.peek("b/y", t0 + 1s).state, HealthState::kHealthy);
}

TEST(RoutingStateReload, ADeploymentNoLongerListedLosesItsHealthStateAndTheOthersKeepTheirs) {
  auto c1 = cfg("http://127.0.0.1:9002/v1");
  RoutingState s1(*c1);
  const auto t0 = Clock::now();
  for (int i = 0; i < 5; ++i) {
    s1.health.on_attempt("a/x", true, 1.0, 10, t0);
    s1.health.on_attempt("b/y", true, 1.0, 10, t0);
  }
  ASSERT_EQ(s1.health.peek("b/y", t0).state, HealthState::kEjected);
  // b/y is gone from the new config (its provider stays); a/x is unchanged.
  auto c2 = config::parse_config(R"(
routing: {ejection: {consecutive_failures: 5}}
providers:
  - {name: a, base_url: "http://127.0.0.1:9001/v1"}
  - {name: b, base_url: "http://127.0.0.1:9002/v1"}
models:
  - name: m
    deployments: [{provider: a, model: x}]
)",
                                 "test.yaml");
  RoutingState s2(*c2, *c1, s1);
  EXPECT_EQ(s2.health.peek("a/x", t0).state, HealthState::kEjected);
  EXPECT_EQ(s2.health.peek("b/y", t0).state, HealthState::kHealthy);
  EXPECT_EQ(s2.health.ejections_total("b/y"), 0u);
  // Back in a later config, it starts healthy.
  RoutingState s3(*c1, *c2, s2);
  EXPECT_EQ(s3.health.peek("b/y", t0).state, HealthState::kHealthy);
  EXPECT_EQ(s3.health.peek("a/x", t0).state, HealthState::kEjected);
}

TEST(RoutingStateReload, NewEstimatorSettingsStartEveryDeploymentAfresh) {
  auto c1 = cfg("http://127.0.0.1:9002/v1");
  RoutingState s1(*c1);
  const auto t0 = Clock::now();
  s1.stats.record(ok("a/x", t0), t0 + 1s);
  RoutingState s2(*cfg("http://127.0.0.1:9002/v1", "3s"), *c1, s1);
  EXPECT_EQ(s2.stats.get_or_prior("a/x", t0 + 1s).ttft_samples, 0u);
  EXPECT_EQ(s2.stats.options().ttft_tau, 3000ms);
}

TEST(RoutingStateReload, NewEjectionThresholdsApplyToTheCarriedOverHealth) {
  auto c1 = cfg("http://127.0.0.1:9002/v1", "10s", 5);
  RoutingState s1(*c1);
  RoutingState s2(*cfg("http://127.0.0.1:9002/v1", "10s", 2), *c1, s1);
  const auto t0 = Clock::now();
  s2.health.on_attempt("a/x", true, 0.0, 1, t0);
  s2.health.on_attempt("a/x", true, 0.0, 2, t0);
  EXPECT_EQ(s2.health.peek("a/x", t0).state, HealthState::kEjected);
}

}  // namespace
}  // namespace llmgate::routing
