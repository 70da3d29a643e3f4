#include "routing/latency_plan.h"

#include <map>

#include <gtest/gtest.h>

namespace llmgate::routing {
namespace {

using namespace std::chrono_literals;

struct Fixture {
  std::vector<config::Deployment> deployments;
  config::Provider provider;
  RoutePlan plan;
  std::vector<DeploymentStats> stats;

  explicit Fixture(std::vector<double> estimates) {
    provider.name = "p";
    deployments.reserve(estimates.size());
    for (std::size_t i = 0; i < estimates.size(); ++i) {
      deployments.push_back({"p", "m" + std::to_string(i), {}});
    }
    for (std::size_t i = 0; i < estimates.size(); ++i) {
      config::Timeouts t;
      t.ttft = 10s;
      plan.candidates.push_back({&deployments[i], &provider, t});
      DeploymentStats s;
      s.ttft_estimate_ms = estimates[i];
      stats.push_back(s);
    }
  }
  std::vector<std::string> order(const LatencyPolicyOptions& o, std::mt19937_64& rng) const {
    std::vector<std::string> out;
    for (const auto& c : latency_order(plan, stats, o, rng)) out.push_back(c.candidate.deployment->model);
    return out;
  }
};

LatencyPolicyOptions no_exploration() {
  LatencyPolicyOptions o;
  o.exploration = 0;
  return o;
}

TEST(LatencyPlan, OrdersByExpectedTtftAndKeepsConfigOrderOnTies) {
  Fixture f({300, 100, 300, 50});
  std::mt19937_64 rng(1);
  EXPECT_EQ(f.order(no_exploration(), rng), (std::vector<std::string>{"m3", "m1", "m0", "m2"}));
}

TEST(LatencyPlan, LoadMultipliesTheEstimate) {
  Fixture f({100, 150});
  f.stats[0].in_flight = 1;  // 100 x 2 = 200 > 150
  std::mt19937_64 rng(1);
  EXPECT_EQ(f.order(no_exploration(), rng), (std::vector<std::string>{"m1", "m0"}));
}

TEST(LatencyPlan, DerivesTheTtftDeadlineFromTheLiveP95) {
  Fixture f({100, 100, 100});
  f.stats[0].ttft_p95_ms = 150;    // 450 ms
  f.stats[1].ttft_p95_ms = 20;     // 60 ms, raised to the 250 ms floor
  f.stats[2].ttft_p95_ms = 9000;   // 27 s, capped at the configured 10 s
  std::mt19937_64 rng(1);
  auto out = latency_order(f.plan, f.stats, no_exploration(), rng);
  EXPECT_EQ(out[0].candidate.timeouts.ttft, 450ms);
  EXPECT_EQ(out[1].candidate.timeouts.ttft, 250ms);
  EXPECT_EQ(out[2].candidate.timeouts.ttft, 10s);
}

TEST(LatencyPlan, WithoutAP95TheConfiguredDeadlineStands) {
  Fixture f({100});
  std::mt19937_64 rng(1);
  EXPECT_EQ(latency_order(f.plan, f.stats, no_exploration(), rng)[0].candidate.timeouts.ttft, 10s);
}

TEST(LatencyPlan, ExploresOtherCandidatesAtTheConfiguredShare) {
  Fixture f({50, 100, 200});
  LatencyPolicyOptions o;
  o.exploration = 0.1;
  std::mt19937_64 rng(42);
  std::map<std::string, int> first;
  const int n = 20000;
  for (int i = 0; i < n; ++i) ++first[f.order(o, rng).front()];
  // Expected: m0 90%, m1 5%, m2 5%; tolerance about 5 standard deviations.
  EXPECT_NEAR(first["m0"] / double(n), 0.90, 0.011);
  EXPECT_NEAR(first["m1"] / double(n), 0.05, 0.008);
  EXPECT_NEAR(first["m2"] / double(n), 0.05, 0.008);
  // An explored candidate goes first; the rest keep their order behind it.
  std::mt19937_64 rng2(7);
  o.exploration = 1.0;
  auto out = latency_order(f.plan, f.stats, o, rng2);
  EXPECT_TRUE(out[0].explored);
  EXPECT_NE(out[0].candidate.deployment->model, "m0");
  EXPECT_EQ(out[1].candidate.deployment->model, "m0");
}

}  // namespace
}  // namespace llmgate::routing
