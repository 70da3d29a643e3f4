// Each stage of routing::decide on its own (routing/decide_stages.h): the
// filters and health of `eligible`, the timeout charge, the soft
// constraints' relaxation and re-check, and the cut of `order`.
#include "routing/decide_stages.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace llmgate::routing::stages {
namespace {

using namespace std::chrono_literals;

// A model with deployments on providers p0, p1, ... (regions as given).
struct Model {
  config::Config cfg;
  std::vector<DeploymentView> views;
  Clock::time_point now = Clock::time_point{} + 1h;

  explicit Model(std::vector<std::string> regions) {
    cfg.timeouts.ttft = 10s;
    cfg.models.push_back(config::Model{"chat", {}, {}});
    for (std::size_t i = 0; i < regions.size(); ++i) {
      config::Provider p;
      p.name = "p" + std::to_string(i);
      p.region = regions[i];
      cfg.providers.push_back(p);
      config::Deployment d;
      d.provider = p.name;
      d.model = "m";
      d.set_id();
      d.price.output_per_1m = 1.0 + static_cast<double>(i);
      cfg.models.back().deployments.push_back(d);
      DeploymentView v;
      v.stats.deployment = d.id();
      v.stats.ttft_estimate_ms = 100;
      v.stats.tps_estimate = 50;
      v.stats.last_sample = now;
      v.stats.last_attempt_start = now;
      views.push_back(v);
    }
  }
  RouteRequest request() const {
    RouteRequest r{&cfg, &cfg.models.back(), cfg.models.back().routing, {}, std::nullopt};
    r.policy.max_attempts = 10;
    return r;
  }
  static std::vector<std::string> providers(const std::vector<Working>& ws) {
    std::vector<std::string> out;
    for (const auto& w : ws) out.push_back(w.pc.candidate.deployment->provider);
    return out;
  }
};
using Names = std::vector<std::string>;

TEST(DecideStages, EligibleAppliesTheFiltersAndSaysWhyEachWasLeftOut) {
  Model m({"us-east", "eu-west", "us-east"});
  auto rq = m.request();
  rq.policy.constraints.deny_providers = {"p2"};
  rq.policy.constraints.regions = {"us-east"};
  RouteDecision out;
  auto ws = eligible(rq, m.views, m.now, out);
  EXPECT_EQ(Model::providers(ws), (Names{"p0"}));
  ASSERT_EQ(out.skipped.size(), 2u);
  EXPECT_EQ(out.skipped[0].reason, "region eu-west not allowed");
  EXPECT_EQ(out.skipped[1].reason, "provider denied");
  EXPECT_EQ(out.error_status, 0);
}

TEST(DecideStages, EligibleIsA429WhenOnlyCooldownsStandInTheWay) {
  Model m({"us-east", "us-east"});
  for (auto& v : m.views) {
    v.health.routable = false;
    v.health.state = HealthState::kCoolingDown;
    v.health.until = m.now + 2500ms;
    v.health.reason = "cooling down";
  }
  RouteDecision out;
  EXPECT_TRUE(eligible(m.request(), m.views, m.now, out).empty());
  EXPECT_EQ(out.error_status, 429);
  EXPECT_EQ(out.retry_after_s, 3);  // rounded up

  m.views[1].health.state = HealthState::kEjected;  // one is down for another reason
  RouteDecision out2;
  EXPECT_TRUE(eligible(m.request(), m.views, m.now, out2).empty());
  EXPECT_EQ(out2.error_status, 503);
}

Working working(Model& m, std::size_t i, double estimate_ms, std::chrono::milliseconds deadline) {
  Working w{};
  w.view = &m.views[i];
  w.pc.candidate =
      Candidate{&m.cfg.models.back().deployments[i], &m.cfg.providers[i], m.cfg.timeouts};
  w.pc.candidate.timeouts.ttft = deadline;
  w.pc.estimate_ms = estimate_ms;
  w.pc.expected_ttft_ms = estimate_ms;
  return w;
}

TEST(DecideStages, ChargeTimeoutsAddsTheDeadlineAndTheBestOtherToOneThatWillTimeOut) {
  Model m({"us-east", "us-east", "us-east"});
  std::vector<Working> ws{working(m, 0, 1200, 1000ms), working(m, 1, 300, 1000ms),
                          working(m, 2, 500, 1000ms)};
  charge_timeouts(ws);
  EXPECT_TRUE(ws[0].pc.times_out);
  EXPECT_DOUBLE_EQ(ws[0].pc.expected_ttft_ms, 1000 + 300);
  EXPECT_FALSE(ws[1].pc.times_out);
  EXPECT_DOUBLE_EQ(ws[1].pc.expected_ttft_ms, 300);

  std::vector<Working> alone{working(m, 0, 1200, 1000ms)};  // nothing to fall back to
  charge_timeouts(alone);
  EXPECT_FALSE(alone[0].pc.times_out);
  EXPECT_DOUBLE_EQ(alone[0].pc.expected_ttft_ms, 1200);
}

TEST(DecideStages, SoftConstraintsLeaveOutTheSlowAndRelaxWhenNoneMeetsThem) {
  Model m({"us-east", "us-east"});
  m.views[0].stats.tps_estimate = 20;
  m.views[0].stats.tps_p50 = 20;
  m.views[1].stats.tps_p50 = 50;
  std::vector<Working> ws{working(m, 0, 100, 10s), working(m, 1, 100, 10s)};
  config::Constraints cons;
  cons.min_tps = 30;
  RouteDecision out;
  SoftResult r = soft_constraints(ws, cons, m.now, out);
  EXPECT_EQ(Model::providers(r.cands), (Names{"p1"}));
  EXPECT_FALSE(out.relaxed);
  ASSERT_EQ(out.skipped.size(), 1u);
  EXPECT_EQ(out.skipped[0].deployment, m.views[0].stats.deployment);

  cons.min_tps = 100;  // no one meets it: all stay, and the decision says so
  RouteDecision out2;
  SoftResult all = soft_constraints(ws, cons, m.now, out2);
  EXPECT_EQ(Model::providers(all.cands), (Names{"p0", "p1"}));
  EXPECT_TRUE(out2.relaxed);
}

TEST(DecideStages, SoftConstraintsReCheckOneLeftOutOnceItIsDue) {
  Model m({"us-east", "us-east"});
  m.views[0].stats.tps_estimate = 20;
  m.views[0].stats.tps_p50 = 20;
  m.views[0].stats.last_sample = m.now - 1h;  // long unmeasured: a re-check is due
  m.views[0].stats.last_attempt_start = m.now - 1h;
  std::vector<Working> ws{working(m, 0, 100, 10s), working(m, 1, 100, 10s)};
  config::Constraints cons;
  cons.min_tps = 30;
  RouteDecision out;
  SoftResult r = soft_constraints(ws, cons, m.now, out);
  ASSERT_TRUE(r.recheck.has_value());
  EXPECT_EQ(r.recheck->pc.candidate.deployment->provider, "p0");
  EXPECT_TRUE(r.recheck_skip.has_value());  // its reason goes with it, not to skipped
  EXPECT_TRUE(out.skipped.empty());
}

TEST(DecideStages, OrderCutsToMaxAttemptsAndTheLastKeepsTheConfiguredTimeout) {
  Model m({"us-east", "us-east", "us-east"});
  std::vector<Working> ws{working(m, 0, 300, 900ms), working(m, 1, 100, 900ms),
                          working(m, 2, 200, 900ms)};
  for (auto& w : ws) w.pc.score = w.pc.estimate_ms;
  auto rq = m.request();
  rq.policy.max_attempts = 2;
  RouterOptions options{0.0, 3.0, 250ms, 0.25};
  std::mt19937_64 rng(1);
  RouteDecision out;
  order(ws, std::nullopt, std::nullopt, std::nullopt, rq, options, rng, out);
  ASSERT_EQ(out.candidates.size(), 2u);
  EXPECT_EQ(out.candidates[0].candidate.deployment->provider, "p1");
  EXPECT_EQ(out.candidates[1].candidate.deployment->provider, "p2");
  EXPECT_EQ(out.candidates[0].candidate.timeouts.ttft, 900ms);
  EXPECT_EQ(out.candidates[1].candidate.timeouts.ttft, 10s);  // nothing after it to try
}

}  // namespace
}  // namespace llmgate::routing::stages
