#include "routing/router.h"

#include <gtest/gtest.h>

#include <map>

namespace llmgate::routing {
namespace {

using namespace std::chrono_literals;
using config::Policy;

// A model with one deployment per provider p0, p1, ... and the live view of
// each, all editable before decide().
struct Fixture {
  config::Config cfg;
  config::Model* model;
  std::vector<DeploymentView> views;
  RouterOptions options{0.0, 3.0, 250ms, 0.25};
  Clock::time_point now = Clock::time_point{} + 1h;

  explicit Fixture(std::vector<double> ttft_estimates) {
    cfg.timeouts.ttft = 10s;
    cfg.models.push_back(config::Model{"chat", {}, {}});
    model = &cfg.models.back();
    for (std::size_t i = 0; i < ttft_estimates.size(); ++i) {
      config::Provider p;
      p.name = "p" + std::to_string(i);
      p.region = "us-east";
      cfg.providers.push_back(p);
      config::Deployment d;
      d.provider = p.name;
      d.model = "m";
      d.set_id();
      model->deployments.push_back(d);
      DeploymentView v;
      v.stats.deployment = d.id();
      v.stats.ttft_estimate_ms = ttft_estimates[i];
      v.stats.tps_estimate = 50;
      v.stats.last_sample = now;  // just measured: no re-check is due
      v.stats.last_attempt_start = now;
      views.push_back(v);
    }
  }
  RouteRequest request() const {
    RouteRequest r{&cfg, model, model->routing, {}, std::nullopt};
    r.policy.max_attempts = 10;
    return r;
  }
  RouteDecision decide(const RouteRequest& r, std::uint64_t rr = 0, std::uint64_t seed = 1) {
    std::mt19937_64 rng(seed);
    return routing::decide(r, views, options, now, rr, rng);
  }
  RouteDecision decide(Policy p) {
    auto r = request();
    r.policy.policy = p;
    return decide(r);
  }
  static std::vector<std::string> order(const RouteDecision& d) {
    std::vector<std::string> out;
    for (const auto& c : d.candidates) out.push_back(c.candidate.deployment->provider);
    return out;
  }
  using Names = std::vector<std::string>;
};
using Names = Fixture::Names;

TEST(Router, LatencyOrdersByExpectedTtftAndKeepsConfigOrderOnTies) {
  Fixture f({300, 100, 300, 50});
  EXPECT_EQ(Fixture::order(f.decide(Policy::kLatency)), (Names{"p3", "p1", "p0", "p2"}));
}

TEST(Router, LatencyWeighsInTheAttemptsStillAwaitingAFirstToken) {
  Fixture f({100, 150});
  f.views[0].stats.in_flight = 9;             // decoding streams do not count
  f.views[0].stats.awaiting_first_token = 1;  // 100 x (1 + 0.25) = 125 < 150
  auto d = f.decide(Policy::kLatency);
  EXPECT_EQ(Fixture::order(d), (Names{"p0", "p1"}));
  EXPECT_DOUBLE_EQ(d.candidates[0].expected_ttft_ms, 125);
  f.views[0].stats.awaiting_first_token = 3;  // 100 x 1.75 = 175 > 150
  EXPECT_EQ(Fixture::order(f.decide(Policy::kLatency)), (Names{"p1", "p0"}));
  f.options.load_factor = 1;  // the PeakEWMA cost of linkerd: estimate x (pending + 1)
  EXPECT_DOUBLE_EQ(f.decide(Policy::kLatency).candidates[1].expected_ttft_ms, 400);
}

TEST(Router, OnlyTheQueueBeyondTheUsualOneIsCharged) {
  // p0 carries the traffic: 8 attempts awaiting is its usual queue, which
  // its measured 100 ms already includes. Charging it again would hand
  // the traffic to a slower deployment for Little's law alone.
  Fixture f({100, 150});
  f.views[0].stats.awaiting_first_token = 8;
  f.views[0].stats.usual_awaiting = 8;
  auto d = f.decide(Policy::kLatency);
  EXPECT_EQ(Fixture::order(d), (Names{"p0", "p1"}));
  EXPECT_DOUBLE_EQ(d.candidates[0].load_multiplier, 1.0);
  // Within one standard deviation of it (sqrt 8 = 2.8), arrivals are
  // random: not charged. A burst beyond is: 100 x (1 + 0.25 x 3.2) > 150.
  f.views[0].stats.awaiting_first_token = 10;
  EXPECT_DOUBLE_EQ(f.decide(Policy::kLatency).candidates[0].load_multiplier, 1.0);
  f.views[0].stats.awaiting_first_token = 14;
  EXPECT_EQ(Fixture::order(f.decide(Policy::kLatency)), (Names{"p1", "p0"}));
}

TEST(Router, DerivesTheTtftDeadlineFromTheLiveP95) {
  Fixture f({100, 100, 100, 100, 100});
  f.views[0].stats.ttft_p95_ms = 150;             // 450 ms
  f.views[1].stats.ttft_p95_ms = 20;              // 60 ms, raised to the 250 ms floor
  f.views[2].stats.ttft_p95_ms = 9000;            // 27 s, capped at the configured 10 s
  f.model->deployments[3].expected_ttft = 200ms;  // no p95 yet: 600 ms from the expectation
  auto d = f.decide(Policy::kOrdered);
  EXPECT_EQ(d.candidates[0].candidate.timeouts.ttft, 450ms);
  EXPECT_EQ(d.candidates[1].candidate.timeouts.ttft, 250ms);
  EXPECT_EQ(d.candidates[2].candidate.timeouts.ttft, 10s);
  EXPECT_EQ(d.candidates[3].candidate.timeouts.ttft, 600ms);
  EXPECT_EQ(d.candidates[4].candidate.timeouts.ttft, 10s);  // nothing known: configured
  // A p95 known only as a lower bound (attempts gave up at 450 ms): the
  // deadline stays at that wait instead of growing x3 per round of misses.
  f.views[0].stats.ttft_p95_ms = 450;
  f.views[0].stats.ttft_p95_lower_bound = true;
  EXPECT_EQ(f.decide(Policy::kOrdered).candidates[0].candidate.timeouts.ttft, 450ms);
  // Nor when the estimate took those waits in (a miss is what the client
  // paid): a deadline from it would be 1350 ms, then 4 s, ...
  f.views[0].stats.ttft_estimate_ms = 450;
  EXPECT_EQ(f.decide(Policy::kOrdered).candidates[0].candidate.timeouts.ttft, 450ms);
}

TEST(Router, TheLastCandidateWaitsTheConfiguredTimeoutNotTheDerivedDeadline) {
  // Nothing to fail over to: cutting it at 3 x p95 would only make an error.
  Fixture f({100, 100});
  for (auto& v : f.views) v.stats.ttft_p95_ms = 150;
  auto d = f.decide(Policy::kOrdered);
  EXPECT_EQ(d.candidates[0].candidate.timeouts.ttft, 450ms);
  EXPECT_EQ(d.candidates[1].candidate.timeouts.ttft, 10s);
  auto r = f.request();
  r.policy.policy = Policy::kOrdered;
  r.policy.allow_fallbacks = false;
  d = f.decide(r);
  ASSERT_EQ(d.candidates.size(), 1u);
  EXPECT_EQ(d.candidates[0].candidate.timeouts.ttft, 10s);
}

TEST(Router, HedgeDelayIsALivePercentileOrTheFixedDelayWithAFloor) {
  Fixture f({400, 400, 400});
  // The percentiles of the attempts that answered: with timeouts among them,
  // the p99 of all would be "beyond the deadline" and no hedge would start.
  f.views[0].stats.ttft_answered_p99_ms = 180.2;
  f.views[0].stats.ttft_answered_p90_ms = 150;
  f.views[0].stats.ttft_p99_ms = 2000;         // Kaplan-Meier, with stalls
  f.views[1].stats.ttft_answered_p99_ms = 10;  // under the 50 ms floor
  auto d = f.decide(Policy::kOrdered);         // default: the live p99
  EXPECT_EQ(d.candidates[0].hedge_delay, 181ms);
  EXPECT_EQ(d.candidates[1].hedge_delay, 50ms);
  EXPECT_EQ(d.candidates[2].hedge_delay, 400ms);  // no p99: the estimate
  auto r = f.request();
  r.policy.policy = Policy::kOrdered;
  r.policy.hedging.delay_percentile = config::Percentile::kP90;
  EXPECT_EQ(f.decide(r).candidates[0].hedge_delay, 150ms);
  r.policy.hedging.delay = 120ms;
  EXPECT_EQ(f.decide(r).candidates[0].hedge_delay, 120ms);
}

TEST(Router, ExplorationSendsTheLeastRecentlyMeasuredFirstAtTheConfiguredShare) {
  Fixture f({50, 100, 200});
  f.views[0].stats.last_sample = f.now - 1s;
  f.views[1].stats.last_sample = f.now - 2s;
  f.views[2].stats.last_sample = f.now - 30s;  // the stalest
  f.options.exploration = 0.1;
  std::mt19937_64 rng(42);
  std::map<std::string, int> first;
  const int n = 20000;
  auto r = f.request();
  for (int i = 0; i < n; ++i) {
    auto d = decide(r, f.views, f.options, f.now, 0, rng);
    ++first[d.candidates.front().candidate.deployment->provider];
    if (d.candidates.front().explored) {
      // The rest keep their order behind it.
      ASSERT_EQ(Fixture::order(d), (Names{"p2", "p0", "p1"}));
    }
  }
  // Expected 90% / 0% / 10%; the tolerance is about 5 standard deviations.
  EXPECT_NEAR(first["p0"] / double(n), 0.90, 0.011);
  EXPECT_EQ(first["p1"], 0);
  EXPECT_NEAR(first["p2"] / double(n), 0.10, 0.011);
}

TEST(Router, ExplorationNeverOverridesACostOrOrderedPolicy) {
  Fixture f({50, 100});
  f.options.exploration = 1.0;
  EXPECT_EQ(Fixture::order(f.decide(Policy::kOrdered)), (Names{"p0", "p1"}));
  EXPECT_FALSE(f.decide(Policy::kCost).candidates[0].explored);
  EXPECT_TRUE(f.decide(Policy::kLatency).candidates[0].explored);
}

TEST(Router, RandomPicksUniformly) {
  Fixture f({50, 100, 200});
  auto r = f.request();
  r.policy.policy = Policy::kRandom;
  std::mt19937_64 rng(3);
  std::map<std::string, int> first;
  const int n = 30000;
  for (int i = 0; i < n; ++i) {
    ++first[decide(r, f.views, f.options, f.now, 0, rng)
                .candidates.front()
                .candidate.deployment->provider];
  }
  for (const char* p : {"p0", "p1", "p2"}) EXPECT_NEAR(first[p] / double(n), 1.0 / 3, 0.014) << p;
}

TEST(Router, RoundRobinRotatesWithTheCounter) {
  Fixture f({50, 100, 200});
  auto r = f.request();
  r.policy.policy = Policy::kRoundRobin;
  EXPECT_EQ(Fixture::order(f.decide(r, 0)), (Names{"p0", "p1", "p2"}));
  EXPECT_EQ(Fixture::order(f.decide(r, 1)), (Names{"p1", "p2", "p0"}));
  EXPECT_EQ(Fixture::order(f.decide(r, 5)), (Names{"p2", "p0", "p1"}));
}

TEST(Router, ThroughputComparesTokensWithinOneModelAndCharactersAcrossModels) {
  Fixture f({100, 100});
  f.views[0].stats.tps_estimate = 100;
  f.views[0].stats.chars_per_s_estimate = 200;  // a chatty tokenizer: 2 chars per token
  f.views[1].stats.tps_estimate = 60;
  f.views[1].stats.chars_per_s_estimate = 300;
  auto same = f.decide(Policy::kThroughput);
  EXPECT_EQ(Fixture::order(same), (Names{"p0", "p1"}));
  EXPECT_FALSE(same.candidates[0].speed_is_chars);
  f.model->deployments[1].model = "other-model";
  auto across = f.decide(Policy::kThroughput);
  EXPECT_EQ(Fixture::order(across), (Names{"p1", "p0"}));
  EXPECT_TRUE(across.candidates[0].speed_is_chars);
  EXPECT_DOUBLE_EQ(across.candidates[0].speed, 300);
  // Without a character measurement: 4 characters per token.
  f.views[1].stats.chars_per_s_estimate.reset();
  EXPECT_DOUBLE_EQ(f.decide(Policy::kThroughput).candidates[0].speed, 240);
}

TEST(Router, E2eAddsTheExpectedGenerationTime) {
  Fixture f({100, 500});
  f.views[0].stats.tps_estimate = 10;
  f.views[1].stats.tps_estimate = 100;
  auto r = f.request();
  r.policy.policy = Policy::kE2e;
  r.max_tokens = 100;  // p0: 100 + 10000 ms; p1: 500 + 1000 ms
  auto d = f.decide(r);
  EXPECT_EQ(Fixture::order(d), (Names{"p1", "p0"}));
  EXPECT_DOUBLE_EQ(d.candidates[0].score, 1500);
  r.max_tokens = 1;  // p0: 200 ms; p1: 510 ms
  EXPECT_EQ(Fixture::order(f.decide(r)), (Names{"p0", "p1"}));
  r.max_tokens.reset();
  r.policy.typical_output_tokens = 2;  // p0: 300 ms; p1: 520 ms
  EXPECT_DOUBLE_EQ(f.decide(r).candidates[0].score, 300);
}

TEST(Router, CostPicksTheCheapestThatMeetsTheTtftLimit) {
  Fixture f({900, 150, 300});
  f.model->deployments[0].price.output_per_1m = 0.5;  // cheapest, but slow
  f.model->deployments[1].price.output_per_1m = 8;
  f.model->deployments[2].price.output_per_1m = 2;
  f.views[0].stats.ttft_p95_ms = 1200;
  f.views[1].stats.ttft_p95_ms = 200;
  f.views[2].stats.ttft_p95_ms = 700;
  auto r = f.request();
  r.policy.policy = Policy::kCost;
  EXPECT_EQ(Fixture::order(f.decide(r)), (Names{"p0", "p2", "p1"}));
  r.policy.constraints.max_ttft = 800ms;
  auto d = f.decide(r);
  EXPECT_EQ(Fixture::order(d), (Names{"p2", "p1"}));
  ASSERT_EQ(d.skipped.size(), 1u);
  EXPECT_EQ(d.skipped[0].deployment, "p0/m");
  EXPECT_EQ(d.skipped[0].reason, "ttft p95 1200ms over the limit of 800ms");
  EXPECT_FALSE(d.relaxed);
  // Nobody meets it: the soft constraint is relaxed, not a failure.
  r.policy.constraints.max_ttft = 100ms;
  auto relaxed = f.decide(r);
  EXPECT_TRUE(relaxed.relaxed);
  EXPECT_EQ(Fixture::order(relaxed), (Names{"p0", "p2", "p1"}));
  // The percentile is selectable; without samples the estimate stands in.
  r.policy.constraints.max_ttft = 800ms;
  r.policy.constraints.max_ttft_percentile = config::Percentile::kP50;
  f.views[0].stats.ttft_p50_ms = 600;
  EXPECT_EQ(Fixture::order(f.decide(r)), (Names{"p0", "p2", "p1"}));
}

TEST(Router, ARequestsTtftLimitAtAnotherPercentileHoldsBesideTheConfiguredOne) {
  Fixture f({100, 300, 200});
  f.views[0].stats.ttft_p95_ms = 1200;  // fails the configured p95 limit
  f.views[1].stats.ttft_p95_ms = 500;
  f.views[2].stats.ttft_p95_ms = 700;
  f.views[1].stats.ttft_p50_ms = 400;  // fails the request's p50 limit
  f.views[2].stats.ttft_p50_ms = 150;
  auto r = f.request();
  r.policy.constraints.max_ttft = 800ms;
  r.policy.constraints.extra_max_ttft = 300ms;
  r.policy.constraints.extra_max_ttft_percentile = config::Percentile::kP50;
  auto d = f.decide(r);
  EXPECT_EQ(Fixture::order(d), (Names{"p2"}));
  ASSERT_EQ(d.skipped.size(), 2u);
  EXPECT_EQ(d.skipped[1].reason, "ttft p50 400ms over the limit of 300ms");
}

TEST(Router, BalancedIsTheDocumentedWeightedScore) {
  Fixture f({100, 300, 200});
  f.views[0].stats.tps_estimate = 20;  // fastest TTFT, slowest output, priciest
  f.views[1].stats.tps_estimate = 120;
  f.views[2].stats.tps_estimate = 70;
  f.model->deployments[0].price.output_per_1m = 10;
  f.model->deployments[1].price.output_per_1m = 0;
  f.model->deployments[2].price.output_per_1m = 5;
  auto r = f.request();
  r.policy.policy = Policy::kBalanced;
  r.policy.weights = {0.5, 0.25, 0.25};
  auto d = f.decide(r);
  // p0: 0.5*0 + 0.25*1 + 0.25*1 = 0.5; p1: 0.5*1 + 0 + 0 = 0.5; p2: 0.25 + 0.125 + 0.125 = 0.5.
  // All equal: config order. Now favour TTFT:
  EXPECT_EQ(Fixture::order(d), (Names{"p0", "p1", "p2"}));
  r.policy.weights = {1, 0, 0};
  d = f.decide(r);
  EXPECT_EQ(Fixture::order(d), (Names{"p0", "p2", "p1"}));
  EXPECT_DOUBLE_EQ(d.candidates[1].score, 0.5);
  r.policy.weights = {0.2, 0.4, 0.4};  // p0 0.8, p1 0.2, p2 0.5
  d = f.decide(r);
  EXPECT_EQ(Fixture::order(d), (Names{"p1", "p2", "p0"}));
  EXPECT_NEAR(d.candidates[2].score, 0.8, 1e-12);
}

TEST(Router, RegionsAreAHardFilterThatIsNeverRelaxed) {
  Fixture f({100, 200});
  f.cfg.providers[1].region = "eu-west";
  auto r = f.request();
  r.policy.constraints.regions = {"eu-west"};
  auto d = f.decide(r);
  EXPECT_EQ(Fixture::order(d), (Names{"p1"}));
  EXPECT_EQ(d.skipped[0].reason, "region us-east not allowed");
  r.policy.constraints.regions = {"ap-south"};
  d = f.decide(r);
  EXPECT_TRUE(d.candidates.empty());
  EXPECT_EQ(d.error_status, 503);
  EXPECT_NE(
      d.error_message.find("p0/m: region us-east not allowed; p1/m: region eu-west not allowed"),
      std::string::npos)
      << d.error_message;
}

TEST(Router, ProviderListsAndThePriceCapAreHardFilters) {
  Fixture f({100, 200, 300});
  f.model->deployments[2].price.output_per_1m = 15;
  auto r = f.request();
  r.policy.constraints.allow_providers = {"p1", "p2"};
  EXPECT_EQ(Fixture::order(f.decide(r)), (Names{"p1", "p2"}));
  r.policy.constraints.deny_providers = {"p1"};
  EXPECT_EQ(Fixture::order(f.decide(r)), (Names{"p2"}));
  r.policy.constraints.max_output_price_per_1m = 10;
  auto d = f.decide(r);
  EXPECT_TRUE(d.candidates.empty());
  EXPECT_EQ(d.skipped[2].reason, "price $15.00/M out over the cap of $10.00");
}

TEST(Router, UnroutableHealthIsSkippedAndAllCoolingDownIsA429) {
  Fixture f({100, 200});
  f.views[0].health.routable = false;
  f.views[0].health.state = HealthState::kEjected;
  f.views[0].health.reason = "ejected: 5 consecutive failures, 3.2s left";
  auto d = f.decide(Policy::kLatency);
  EXPECT_EQ(Fixture::order(d), (Names{"p1"}));
  EXPECT_EQ(d.skipped[0].reason, "ejected: 5 consecutive failures, 3.2s left");
  for (auto& v : f.views) {
    v.health.routable = false;
    v.health.state = HealthState::kCoolingDown;
  }
  f.views[0].health.until = f.now + 2500ms;
  f.views[1].health.until = f.now + 30s;
  d = f.decide(Policy::kLatency);
  EXPECT_EQ(d.error_status, 429);
  EXPECT_EQ(d.retry_after_s, 3);
}

TEST(Router, RouteOrderGoesFirstAndWithoutFallbacksAlone) {
  Fixture f({100, 200, 300});
  auto r = f.request();
  r.order = {"p2", "p1/m"};
  auto d = f.decide(r);
  EXPECT_EQ(Fixture::order(d), (Names{"p2", "p1", "p0"}));
  EXPECT_TRUE(d.candidates[0].preferred);
  EXPECT_FALSE(d.candidates[2].preferred);
  r.policy.allow_fallbacks = false;
  d = f.decide(r);
  EXPECT_EQ(Fixture::order(d), (Names{"p2"}));
  EXPECT_EQ(d.skipped.size(), 2u);
}

TEST(Router, MaxAttemptsTruncatesThePlan) {
  Fixture f({100, 200, 300});
  auto r = f.request();
  r.policy.max_attempts = 2;
  auto d = f.decide(r);
  EXPECT_EQ(Fixture::order(d), (Names{"p0", "p1"}));
  EXPECT_EQ(d.skipped.back().reason, "beyond max_attempts");
}

TEST(Router, PriorsComeFromTheExpectationOrTheRegionDistance) {
  config::Deployment d;
  config::Provider p;
  p.region = "eu-west";
  EXPECT_DOUBLE_EQ(ttft_prior_ms(d, p, "eu-west", 1000ms), 1000);
  EXPECT_DOUBLE_EQ(ttft_prior_ms(d, p, "eu-central", 1000ms), 1030);
  EXPECT_DOUBLE_EQ(ttft_prior_ms(d, p, "us-east", 1000ms), 1120);
  EXPECT_DOUBLE_EQ(ttft_prior_ms(d, p, "", 1000ms), 1060);
  d.expected_ttft = 180ms;
  EXPECT_DOUBLE_EQ(ttft_prior_ms(d, p, "us-east", 1000ms), 180);
}

TEST(Router, ExplainNamesEveryCandidateAndSkip) {
  Fixture f({143, 200});
  f.views[1].health.routable = false;
  f.views[1].health.reason = "half-open: probe in flight";
  EXPECT_EQ(explain(f.decide(Policy::kLatency)),
            "p0/m=#1(score 143ms = est 143ms), p1/m=skip(half-open: probe in flight)");
}

TEST(Router, ExplainShowsTheScoreTheLoadAndTheMeasuredMedian) {
  Fixture f({100, 300});
  f.views[0].stats.awaiting_first_token = 2;  // x1.5 with load_factor 0.25
  f.views[0].stats.ttft_p50_ms = 90;
  EXPECT_EQ(
      explain(f.decide(Policy::kLatency)),
      "p0/m=#1(score 150ms = est 100ms x1.50 load; p50 90ms), p1/m=#2(score 300ms = est 300ms)");
  // e2e: the score, and the speed in the unit the score used.
  f.views[0].stats.awaiting_first_token = 0;
  f.views[1].stats.tps_estimate = 100;
  auto r = f.request();
  r.policy.policy = Policy::kE2e;
  r.policy.typical_output_tokens = 100;
  EXPECT_EQ(explain(f.decide(r)),
            "p1/m=#1(score 1300ms = ttft 300ms + 100 tokens at 100t/s), "
            "p0/m=#2(score 2100ms = ttft 100ms + 100 tokens at 50t/s; p50 90ms)");
}

TEST(Router, ADeploymentPastItsDeadlineIsChargedWhatTryingItCosts) {
  // p1 is estimated at 700 ms against a 600 ms deadline (3 x its p95): it
  // will time out, and the client then pays 600 ms plus p0's TTFT. p0 carries
  // the traffic (10 attempts awaiting: x3.5), which alone would make p1 look
  // better.
  Fixture f({400, 700});
  f.views[0].stats.awaiting_first_token = 10;
  f.views[1].stats.ttft_p95_ms = 200;
  auto d = f.decide(Policy::kLatency);
  ASSERT_EQ(Fixture::order(d), (Names{"p0", "p1"}));
  EXPECT_TRUE(d.candidates[1].times_out);
  EXPECT_DOUBLE_EQ(d.candidates[1].expected_ttft_ms, 600 + 1400);
  EXPECT_FALSE(d.candidates[0].times_out);
}

TEST(Router, ADeploymentWhoseBoundsReachedItsDeadlineIsChargedAsTimingOut) {
  // p0 timed out on its last attempts: each waited its whole 601 ms deadline
  // (3 x a 200.3 ms p95, rounded up) -- and a little more, or a little less
  // once decayed: its estimate of 598 ms is a lower bound at its deadline.
  // Tried first it costs the deadline and then p1's 450 ms, not a hedge's wait.
  Fixture f({598, 450});
  f.views[0].stats.ttft_bounded = true;
  f.views[0].stats.ttft_p95_ms = 200.3;
  f.views[0].stats.last_attempt_start = f.now;  // no re-check due
  auto d = f.decide(Policy::kLatency);
  ASSERT_EQ(Fixture::order(d), (Names{"p1", "p0"}));
  EXPECT_TRUE(d.candidates[1].times_out);
  EXPECT_FALSE(d.candidates[1].bounded);
  EXPECT_DOUBLE_EQ(d.candidates[1].expected_ttft_ms, 601 + 450);
  EXPECT_NE(explain(d).find("past its deadline"), std::string::npos) << explain(d);
  // A long prompt: the deadline's prefill allowance (twice the prefill) is
  // not room under it -- the base is compared with the base.
  auto r = f.request();
  r.prompt_bytes = 40'000;  // 10k tokens: 500 ms of prefill at the prior
  d = f.decide(r);
  ASSERT_EQ(Fixture::order(d), (Names{"p1", "p0"}));
  EXPECT_TRUE(d.candidates[1].times_out);
}

TEST(Router, AttemptsWaitingLongerThanTheEstimateRaiseIt) {
  Fixture f({150, 400});
  f.views[0].stats.awaiting_first_token = 2;
  f.views[0].stats.ttft_answered_p99_ms = 300;
  f.views[0].stats.awaiting_lower_bound_ms = 250;  // past the estimate, within the usual tail
  f.options.load_factor = 0;
  auto d = f.decide(Policy::kLatency);
  EXPECT_EQ(Fixture::order(d), (Names{"p0", "p1"}));
  EXPECT_FALSE(d.candidates[0].stalled);
  EXPECT_DOUBLE_EQ(d.candidates[0].estimate_ms, 250);
}

TEST(Router, TwoAttemptsWaitingPastTheUsualTailAreAStallChargedAsATimeout) {
  Fixture f({150, 400});
  f.views[0].stats.awaiting_first_token = 2;
  f.views[0].stats.ttft_answered_p99_ms = 300;
  f.views[0].stats.awaiting_lower_bound_ms = 320;  // stalled: no timeout yet, and under p1's
  f.options.load_factor = 0;
  auto d = f.decide(Policy::kLatency);
  EXPECT_EQ(Fixture::order(d), (Names{"p1", "p0"}));
  EXPECT_TRUE(d.candidates[1].stalled);
  EXPECT_TRUE(d.candidates[1].times_out);
  // Trying it costs its deadline and then the next candidate's first token.
  EXPECT_DOUBLE_EQ(d.candidates[1].expected_ttft_ms,
                   static_cast<double>(d.candidates[1].candidate.timeouts.ttft.count()) + 400);
}

TEST(Router, AWideDeploymentsTailIsNotAStallUntilPastItsSpreadsP99) {
  // Median 150 ms with a log-spread of 0.5 puts its p99 at ~480 ms: two
  // attempts at 320 ms are its tail, though its window's p99 (its few
  // largest answers) says 300. A steady one (0.05) is stalled there.
  for (const auto& [spread, stalled] : {std::pair{0.5, false}, std::pair{0.05, true}}) {
    Fixture f({150, 400});
    f.views[0].stats.awaiting_first_token = 2;
    f.views[0].stats.ttft_spread = spread;
    f.views[0].stats.ttft_answered_p99_ms = 300;
    f.views[0].stats.awaiting_lower_bound_ms = 320;
    f.options.load_factor = 0;
    auto d = f.decide(Policy::kLatency);
    const auto& p0 = d.candidates[d.candidates[0].candidate.deployment->provider == "p0" ? 0 : 1];
    EXPECT_EQ(p0.stalled, stalled) << "spread " << spread;
  }
}

TEST(Router, AHalfOpenProbeGoesFirstForEveryPolicyWithACappedWait) {
  for (Policy p : config::kAllPolicies) {
    Fixture f({100, 900});
    f.views[0].stats.ttft_answered_p50_ms = 120;
    f.views[1].health.state = HealthState::kProbing;
    f.views[1].health.probe = true;
    auto d = f.decide(p);
    ASSERT_EQ(Fixture::order(d), (Names{"p1", "p0"})) << config::to_string(p);
    EXPECT_TRUE(d.candidates[0].capped);
    // The best other candidate starts beside it: at once under the latency
    // policy (the first token answers: a probe costs the client nothing),
    // after its median TTFT under the others.
    EXPECT_EQ(d.candidates[0].hedge_delay, p == Policy::kLatency ? 0ms : 120ms)
        << config::to_string(p);
    EXPECT_EQ(d.candidates[0].candidate.timeouts.connect,
              std::min(f.cfg.timeouts.connect, kMinCappedConnect));
  }
  // A single-attempt plan does not probe first: the client would pay alone.
  Fixture f({100, 900});
  f.views[1].health.probe = true;
  auto r = f.request();
  r.policy.max_attempts = 1;
  EXPECT_EQ(Fixture::order(f.decide(r)), (Names{"p0"}));
}

TEST(Router, ADeploymentKnownOnlyFromItsFailuresIsRecheckedByEveryPolicy) {
  // Its estimate holds penalties; "cost" never explores, so without a
  // re-check it would never learn that the deployment came back.
  for (Policy p : {Policy::kCost, Policy::kLatency, Policy::kOrdered}) {
    Fixture f({400, 2000});
    f.views[1].stats.ttft_penalized = true;
    EXPECT_EQ(Fixture::order(f.decide(p)).front(), "p0");  // just measured: not due
    f.views[1].stats.last_sample = f.now - kRecheckInterval;
    f.views[1].stats.last_attempt_start = f.now - kRecheckInterval;
    auto d = f.decide(p);
    ASSERT_EQ(Fixture::order(d), (Names{"p1", "p0"})) << config::to_string(p);
    EXPECT_TRUE(d.candidates[0].recheck);
    EXPECT_TRUE(d.candidates[0].capped);
  }
}

TEST(Router, ADeploymentHeldBackByLowerBoundsIsRecheckedBesideTheBestAtOnce) {
  // Its attempts gave up waiting (a slow spell): the estimate rests on lower
  // bounds. Re-checked when due, with the best started beside it at once,
  // so finding out whether it came back costs the client nothing.
  for (Policy p : {Policy::kLatency, Policy::kThroughput, Policy::kE2e, Policy::kBalanced}) {
    Fixture f({400, 900});
    f.views[1].stats.ttft_bounded = true;
    f.views[1].stats.last_sample = f.now - kRecheckInterval;
    f.views[1].stats.last_attempt_start = f.now - kRecheckInterval;
    f.views[1].stats.last_attempt_start = f.now - 100ms;  // an attempt just started: not due
    EXPECT_FALSE(f.decide(p).candidates[0].recheck) << config::to_string(p);
    f.views[1].stats.last_attempt_start = f.now - kRecheckInterval;
    auto d = f.decide(p);
    ASSERT_EQ(Fixture::order(d), (Names{"p1", "p0"})) << config::to_string(p);
    EXPECT_TRUE(d.candidates[0].recheck);
    EXPECT_TRUE(d.candidates[0].capped);
    // At once for latency; for the speed-aware policies after the best's
    // typical TTFT (its estimate here: 400 ms).
    EXPECT_EQ(d.candidates[0].hedge_delay, p == Policy::kLatency ? 0ms : 400ms)
        << config::to_string(p);
  }
}

TEST(Router, ReChecksTakeTurnsSoOneThatOnlyLosesItsRacesStarvesNoOther) {
  // Both left out by a TTFT limit; "budget" was re-checked last (it lost its
  // race: no new sample), so "value" is next although its sample is newer.
  Fixture f({150, 900, 1500});
  for (auto& v : f.views) v.stats.ttft_p95_ms = 0;
  f.views[0].stats.ttft_p95_ms = 200;
  f.views[1].stats.ttft_p95_ms = 1000;
  f.views[2].stats.ttft_p95_ms = 2000;
  f.views[1].stats.last_sample = f.now - 3s;
  f.views[1].stats.last_attempt_start = f.now - 3s;
  f.views[2].stats.last_sample = f.now - 10s;
  f.views[2].stats.last_attempt_start = f.now - 600ms;
  auto r = f.request();
  r.policy.policy = Policy::kCost;
  r.policy.constraints.max_ttft = 800ms;
  auto d = f.decide(r);
  ASSERT_FALSE(d.candidates.empty());
  EXPECT_EQ(d.candidates[0].candidate.deployment->provider, "p1");
  EXPECT_TRUE(d.candidates[0].recheck);
  // A re-checked one whose last answer met the limit again goes before
  // the others' turns: its next answers may bring it back.
  f.views[1].stats.last_sample = f.now - 600ms;
  f.views[1].stats.last_attempt_start = f.now - 600ms;
  f.views[2].stats.last_attempt_start = f.now - 5s;
  f.views[1].stats.last_ttft_ms = 450;
  EXPECT_EQ(f.decide(r).candidates[0].candidate.deployment->provider, "p1");
  f.views[1].stats.last_ttft_ms = 950;  // not promising: budget's turn
  EXPECT_EQ(f.decide(r).candidates[0].candidate.deployment->provider, "p2");
}

TEST(Router, ADeadlineIsNeverCutBelowTheEstimateByLowerBounds) {
  // Its only samples are races it lost at ~130 ms: a p95 "over 130 ms".
  Fixture f({150, 1000, 200});
  f.views[1].stats.ttft_p95_ms = 130;
  f.views[1].stats.ttft_p95_lower_bound = true;
  auto d = f.decide(Policy::kOrdered);
  ASSERT_EQ(d.candidates.size(), 3u);
  EXPECT_EQ(d.candidates[1].candidate.timeouts.ttft, 3000ms);  // 3 x its 1000 ms estimate
}

TEST(Router, PoliciesThatDoNotCompareMeasurementsRecheckNoLowerBoundsOrPriors) {
  for (Policy p : {Policy::kCost, Policy::kOrdered, Policy::kRoundRobin, Policy::kRandom}) {
    Fixture f({400, 900, 900});
    f.views[1].stats.ttft_bounded = true;
    f.views[1].stats.last_sample = f.now - kRecheckInterval;
    f.views[1].stats.last_attempt_start = f.now - kRecheckInterval;
    f.views[2].stats.last_sample.reset();
    for (const auto& c : f.decide(p).candidates) EXPECT_FALSE(c.recheck) << config::to_string(p);
  }
}

TEST(Router, ANeverMeasuredDeploymentIsMeasuredBesideTheBest) {
  Fixture f({400, 1000});
  f.views[1].stats.last_sample.reset();  // never measured: the prior is a guess
  f.views[1].stats.last_attempt_start.reset();
  auto d = f.decide(Policy::kLatency);
  ASSERT_EQ(Fixture::order(d), (Names{"p1", "p0"}));
  EXPECT_TRUE(d.candidates[0].recheck);
  EXPECT_EQ(d.candidates[0].hedge_delay, 0ms);
  // One at a time: with an attempt awaiting its first token there, the
  // best goes alone.
  f.views[1].stats.in_flight = 1;
  f.views[1].stats.awaiting_first_token = 1;
  EXPECT_EQ(Fixture::order(f.decide(Policy::kLatency)), (Names{"p0", "p1"}));
}

// --- What learning costs (docs/routing.md)

TEST(Router, ALessonSaysWhyAndMayRunOnToTwiceItsEstimate) {
  Fixture f({400, 1000});
  f.views[1].stats.last_sample.reset();
  f.views[1].stats.last_attempt_start.reset();
  auto d = f.decide(Policy::kLatency);
  ASSERT_EQ(Fixture::order(d), (Names{"p1", "p0"}));
  ASSERT_NE(d.candidates[0].learn_reason, nullptr);
  EXPECT_STREQ(d.candidates[0].learn_reason, "never answered");
  EXPECT_NE(explain(d).find("recheck hedge@0ms (never answered)"), std::string::npos) << explain(d);
  // 2 x its estimate, within its TTFT deadline.
  EXPECT_EQ(d.candidates[0].learn_wait, std::min(2000ms, d.candidates[0].candidate.timeouts.ttft));
  // The best it races learns nothing: it has no lesson.
  EXPECT_EQ(d.candidates[1].learn_reason, nullptr);
  EXPECT_EQ(d.candidates[1].learn_wait, 0ms);

  // Its estimate a lower bound after lost races, and explored ones:
  Fixture g({400, 900});
  g.views[1].stats.ttft_bounded = true;
  g.views[1].stats.last_attempt_start = g.now - kRecheckInterval;
  EXPECT_STREQ(g.decide(Policy::kLatency).candidates[0].learn_reason, "estimate a lower bound");
  g.views[1].stats.ttft_bounded = false;
  g.options.exploration = 1.0;
  auto e = g.decide(Policy::kLatency);
  ASSERT_TRUE(e.candidates[0].explored);
  EXPECT_STREQ(e.candidates[0].learn_reason, "least recently measured");
}

TEST(Router, LessonsThatTaughtNothingWaitLongerForADeploymentNeverAnswered) {
  // Never answered, and two lessons in a row stopped before a first token:
  // the next waits 4 x kRecheckInterval.
  Fixture f({400, 1000});
  f.views[1].stats.last_sample.reset();
  f.views[1].stats.lessons_missed = 2;
  f.views[1].stats.last_attempt_start = f.now - 3 * kRecheckInterval;
  EXPECT_FALSE(f.decide(Policy::kLatency).candidates[0].recheck);
  f.views[1].stats.last_attempt_start = f.now - 4 * kRecheckInterval;
  EXPECT_TRUE(f.decide(Policy::kLatency).candidates[0].recheck);
  // At most 2^kMaxRecheckBackoff times.
  f.views[1].stats.lessons_missed = 40;
  f.views[1].stats.last_attempt_start = f.now - kRecheckInterval * (1u << kMaxRecheckBackoff) + 1ms;
  EXPECT_FALSE(f.decide(Policy::kLatency).candidates[0].recheck);
  f.views[1].stats.last_attempt_start = f.now - kRecheckInterval * (1u << kMaxRecheckBackoff);
  EXPECT_TRUE(f.decide(Policy::kLatency).candidates[0].recheck);
  // Known from its failures: its recovery is the question, every interval.
  Fixture g({400, 1000});
  g.views[1].stats.ttft_penalized = true;
  g.views[1].stats.lessons_missed = 5;
  g.views[1].stats.last_attempt_start = g.now - kRecheckInterval;
  auto d = g.decide(Policy::kLatency);
  EXPECT_TRUE(d.candidates[0].recheck);
  EXPECT_STREQ(d.candidates[0].learn_reason, "known from failures");
  // Held by lower bounds (a slowdown): whether it is over, every interval.
  g.views[1].stats.ttft_penalized = false;
  g.views[1].stats.ttft_bounded = true;
  d = g.decide(Policy::kLatency);
  EXPECT_TRUE(d.candidates[0].recheck);
  EXPECT_STREQ(d.candidates[0].learn_reason, "estimate a lower bound");
}

TEST(Router, WithTheLearningBudgetSpentNothingIsLearntButAProbeStillGoesFirst) {
  Fixture f({400, 1000, 900});
  f.views[1].stats.last_sample.reset();  // due a re-check
  f.views[1].stats.last_attempt_start.reset();
  f.options.exploration = 1.0;
  auto r = f.request();
  r.policy.policy = Policy::kLatency;
  r.may_learn = false;
  auto d = f.decide(r);
  EXPECT_EQ(Fixture::order(d), (Names{"p0", "p2", "p1"}));
  for (const auto& c : d.candidates) {
    EXPECT_FALSE(c.explored);
    EXPECT_EQ(c.learn_reason, nullptr);
  }
  f.views[2].health.state = HealthState::kProbing;
  f.views[2].health.probe = true;
  d = f.decide(r);
  ASSERT_EQ(Fixture::order(d).front(), "p2");
  EXPECT_TRUE(d.candidates[0].probe);
  EXPECT_EQ(d.candidates[0].learn_reason, nullptr);
}

TEST(Router, ADeploymentHeldByLowerBoundsIsChargedItsHedgeDelayPlusTheNext) {
  // Its last attempts were given up or lost hedges at about 600 ms: the
  // estimate says "600 or more". Tried first it would most likely cost its
  // hedge delay and then the next one's first token.
  Fixture f({600, 450});
  f.views[0].stats.ttft_bounded = true;
  f.views[0].stats.ttft_answered_p99_ms = 200;  // its hedge delay when hedged
  f.views[0].stats.last_attempt_start = f.now;  // no re-check due
  auto r = f.request();
  r.policy.hedging.delay_percentile = config::Percentile::kP99;
  auto d = f.decide(r);
  EXPECT_EQ(Fixture::order(d), (Names{"p1", "p0"}));
  EXPECT_TRUE(d.candidates[1].bounded);
  EXPECT_DOUBLE_EQ(d.candidates[1].expected_ttft_ms, 200 + 450);
  EXPECT_NE(explain(d).find("est 600ms or more"), std::string::npos) << explain(d);
}

TEST(Router, ADeploymentLeftDuringASlowSpellIsRecheckedOnceItsEstimateIsStale) {
  // p1 answered in 150 ms for most of the window, then slowed down and was
  // left: its estimate (750 ms) is old news after 2 s without a sample.
  Fixture f({400, 750});
  f.views[1].stats.ttft_p50_ms = 150;
  f.views[1].stats.last_sample = f.now - 1s;
  f.views[1].stats.last_attempt_start = f.now - 1s;
  EXPECT_FALSE(f.decide(Policy::kLatency).candidates[0].recheck);  // not stale yet
  f.views[1].stats.last_sample = f.now - kStaleRecheck;
  auto d = f.decide(Policy::kLatency);
  ASSERT_EQ(Fixture::order(d), (Names{"p1", "p0"}));
  EXPECT_TRUE(d.candidates[0].recheck);
  EXPECT_EQ(d.candidates[0].hedge_delay, 0ms);
  // One whose median never beat the best is not re-checked for staleness.
  f.views[1].stats.ttft_p50_ms = 800;
  EXPECT_FALSE(f.decide(Policy::kLatency).candidates[0].recheck);
}

TEST(Router, MayBeBackIsJudgedInThePolicysOwnMeasure) {
  // p1's first token is fast (150 ms) but it streams at 20 tokens/s; p0
  // answers at 500 ms at 150 tokens/s. For e2e (400 tokens: 20 s against
  // 3.2 s) p1 is never "back", however stale: re-checking it would cost the
  // client the whole slow answer (bench/routing `speed`: 10% of traffic).
  Fixture f({500, 150});
  f.views[0].stats.tps_estimate = 150;
  f.views[1].stats.tps_estimate = 20;
  f.views[1].stats.tps_p50 = 20;
  f.views[1].stats.ttft_p50_ms = 150;
  f.views[1].stats.last_sample = f.now - kStaleRecheck;
  f.views[1].stats.last_attempt_start = f.now - kStaleRecheck;
  auto r = f.request();
  r.policy.policy = Policy::kE2e;
  r.max_tokens = 400;
  r.policy.typical_output_tokens = 400;
  auto d = f.decide(r);
  ASSERT_EQ(Fixture::order(d), (Names{"p0", "p1"}));
  EXPECT_FALSE(d.candidates[0].recheck);
  // Its speed measured fast in the window again (150 tokens/s then): it
  // may be back, and is re-checked.
  f.views[1].stats.tps_p50 = 150;
  d = f.decide(r);
  ASSERT_EQ(Fixture::order(d), (Names{"p1", "p0"}));
  EXPECT_TRUE(d.candidates[0].recheck);
}

TEST(Router, ARecheckOfTheBestIsNoRecheck) {
  // It goes first anyway: nothing to set apart, no hedge beside it.
  Fixture f({300, 900});
  f.views[0].stats.ttft_penalized = true;
  f.views[0].stats.last_sample = f.now - kRecheckInterval;
  f.views[0].stats.last_attempt_start = f.now - kRecheckInterval;
  auto d = f.decide(Policy::kLatency);
  EXPECT_EQ(Fixture::order(d), (Names{"p0", "p1"}));
  EXPECT_FALSE(d.candidates[0].recheck);
  EXPECT_FALSE(d.candidates[0].capped);
}

TEST(Router, ExplorationStartsTheBestBesideTheExploredAtOnce) {
  Fixture f({50, 100});
  f.options.exploration = 1.0;
  auto d = f.decide(Policy::kLatency);
  ASSERT_TRUE(d.candidates[0].explored);
  EXPECT_EQ(d.candidates[0].hedge_delay, 0ms);
}

TEST(Router, ADeploymentLeftOutByASoftConstraintIsRecheckedWhenDue) {
  Fixture f({900, 150});
  f.model->deployments[0].price.output_per_1m = 1;  // cheap, was slow
  f.model->deployments[1].price.output_per_1m = 8;
  for (auto& v : f.views) v.stats.ttft_p95_ms = 0;
  f.views[0].stats.ttft_p95_ms = 1200;
  f.views[1].stats.ttft_p95_ms = 200;
  f.views[1].stats.ttft_p50_ms = 150;
  auto r = f.request();
  r.policy.policy = Policy::kCost;
  r.policy.constraints.max_ttft = 800ms;
  // Measured just now: out.
  EXPECT_EQ(Fixture::order(f.decide(r)), (Names{"p1"}));
  // Nothing measured for kRecheckInterval and nothing in flight: re-checked
  // first, with the best candidate started beside it once it has had the
  // limit it missed (800 ms) to show that it meets it again.
  f.views[0].stats.last_sample = f.now - kRecheckInterval;
  f.views[0].stats.last_attempt_start = f.now - kRecheckInterval;
  auto d = f.decide(r);
  ASSERT_EQ(Fixture::order(d), (Names{"p0", "p1"}));
  EXPECT_TRUE(d.candidates[0].recheck);
  EXPECT_EQ(d.candidates[0].hedge_delay, 800ms);
  // One re-check at a time (one still awaiting its first token).
  f.views[0].stats.in_flight = 1;
  f.views[0].stats.awaiting_first_token = 1;
  EXPECT_EQ(Fixture::order(f.decide(r)), (Names{"p1"}));
  // Its last few answers all met the limit: it is back in, cheapest first.
  f.views[0].stats.in_flight = 0;
  f.views[0].stats.awaiting_first_token = 0;
  f.views[0].stats.last_sample = f.now;
  f.views[0].stats.ttft_last_few_max_ms = 300;
  EXPECT_EQ(Fixture::order(f.decide(r)), (Names{"p0", "p1"}));
  EXPECT_FALSE(f.decide(r).candidates[0].recheck);
}

TEST(Router, ADeploymentWithoutMeasurementsPassesSoftConstraintsSoItGetsMeasured) {
  Fixture f({1000, 1000, 1000});  // priors only: no window percentiles, no TPS samples
  f.model->deployments[0].price.output_per_1m = 0.5;
  f.model->deployments[1].price.output_per_1m = 2;
  f.model->deployments[2].price.output_per_1m = 8;
  auto r = f.request();
  r.policy.policy = Policy::kCost;
  r.policy.constraints.max_ttft = 800ms;
  r.policy.constraints.min_tps = 100;  // the 50 tokens/s prior is a guess, not a measurement
  auto d = f.decide(r);
  EXPECT_FALSE(d.relaxed);
  EXPECT_EQ(Fixture::order(d), (Names{"p0", "p1", "p2"}));
  // A configured expectation is a statement, and is judged.
  f.model->deployments[0].expected_ttft = 1200ms;
  f.model->deployments[1].expected_tps = 60;
  d = f.decide(r);
  EXPECT_EQ(Fixture::order(d), (Names{"p2"}));
  EXPECT_EQ(d.skipped[0].reason, "ttft p95 1200ms over the limit of 800ms");
  // Once measured, the measurement decides.
  f.views[2].stats.ttft_p95_ms = 900;
  EXPECT_TRUE(f.decide(r).relaxed);
}

}  // namespace
}  // namespace llmgate::routing

namespace llmgate::routing {
namespace {

// Routing III: the request's prompt in each deployment's tokens, and the
// deployments whose context window cannot hold it.
TEST(RouterContextWindows, ADeploymentTooSmallForThePromptIsSkippedWithTheReason) {
  Fixture f({100, 300});
  f.model->deployments[0].context_window = 8'000;
  f.model->deployments[1].context_window = 128'000;
  auto r = f.request();
  r.prompt_bytes = 40'000;  // 10k tokens at the prior's 4 bytes per token
  r.max_tokens = 1'000;
  auto d = f.decide(r);
  ASSERT_EQ(Fixture::order(d), (Names{"p1"}));
  EXPECT_EQ(d.candidates[0].input_tokens, 10'000);
  ASSERT_EQ(d.skipped.size(), 1u);
  EXPECT_EQ(d.skipped[0].deployment, "p0/m");
  EXPECT_EQ(d.skipped[0].reason, "prompt ~10.0k + max_tokens 1000 over its context window of 8.0k");
  EXPECT_NE(explain(d).find("p1/m=#1("), std::string::npos) << explain(d);
  EXPECT_NE(explain(d).find("in ~10.0k tok"), std::string::npos) << explain(d);
  // A short prompt fits both; the faster goes first, and no size is shown.
  r.prompt_bytes = 400;
  r.max_tokens.reset();
  d = f.decide(r);
  EXPECT_EQ(Fixture::order(d), (Names{"p0", "p1"}));
  EXPECT_EQ(explain(d).find(" tok"), std::string::npos) << explain(d);
}

TEST(RouterContextWindows, APromptNoDeploymentCanHoldIsTheClientsA400) {
  Fixture f({100, 300});
  f.model->deployments[0].context_window = 8'000;
  f.model->deployments[1].context_window = 32'000;
  auto r = f.request();
  r.prompt_bytes = 200'000;  // 50k tokens
  auto d = f.decide(r);
  EXPECT_TRUE(d.candidates.empty());
  EXPECT_EQ(d.error_status, 400);
  EXPECT_NE(d.error_message.find("~50.0k tokens"), std::string::npos) << d.error_message;
  EXPECT_NE(d.error_message.find("the largest holds 32.0k"), std::string::npos) << d.error_message;
  // Without a window configured, nothing is skipped (the provider's 400
  // still fails over at run time).
  f.model->deployments[1].context_window.reset();
  d = f.decide(r);
  EXPECT_EQ(Fixture::order(d), (Names{"p1"}));
}

TEST(RouterContextWindows, EachDeploymentCountsThePromptInItsOwnTokens) {
  Fixture f({100, 100});
  f.views[0].stats.calibration_tokens = 100'000;               // learnt: 3 bytes per token
  f.views[0].stats.calibration_bytes = 300'000 - 2'000 * 1.0;  // (with the prior's 2,000 x 4)
  auto r = f.request();
  r.prompt_bytes = 30'000;
  r.prompt_media = 1;
  auto d = f.decide(r);
  ASSERT_EQ(d.candidates.size(), 2u);
  EXPECT_NEAR(f.views[0].stats.bytes_per_input_token(), 3.0, 0.05);
  // The same prompt is more of p0's tokens: more prefill, so p1 goes first.
  EXPECT_EQ(Fixture::order(d), (Names{"p1", "p0"}));
  EXPECT_NEAR(static_cast<double>(d.candidates[1].input_tokens), 10'000 + 1'000, 120);
  EXPECT_EQ(d.candidates[0].input_tokens, 7'500 + 1'000);
}

}  // namespace
}  // namespace llmgate::routing

namespace llmgate::routing {
namespace {

// Routing III: time to first token as a function of the request's prompt.
TEST(RouterPrefill, ALongPromptExpectsItsPrefillAndGetsItInItsDeadlineAndHedgeDelay) {
  Fixture f({200, 260});
  for (auto& v : f.views) {
    v.stats.ttft_p95_ms = 250;  // a short prompt's: a 750 ms deadline at x3
    v.stats.prefill_ms_per_1k = 100;
    v.stats.prefill_prior_ms_per_1k = 50;
  }
  f.views[1].stats.prefill_ms_per_1k = 20;  // p1 reads prompts five times faster
  auto r = f.request();
  r.policy.hedging.min_delay = 0ms;
  r.prompt_bytes = 400;  // 100 tokens: prefill 10 ms and 2 ms -- p0 first
  auto d = f.decide(r);
  EXPECT_EQ(Fixture::order(d), (Names{"p0", "p1"}));
  EXPECT_DOUBLE_EQ(d.candidates[0].estimate_ms, 200 + 10);
  EXPECT_EQ(d.candidates[0].candidate.timeouts.ttft, 750ms + 20ms);
  r.prompt_bytes = 200'000;  // 50k tokens: prefill 5 s on p0, 1 s on p1
  d = f.decide(r);
  ASSERT_EQ(Fixture::order(d), (Names{"p1", "p0"}));
  EXPECT_DOUBLE_EQ(d.candidates[0].prefill_ms, 1000);
  EXPECT_DOUBLE_EQ(d.candidates[0].estimate_ms, 260 + 1000);
  // The deadline: a short prompt's, plus twice the larger of fit and prior.
  EXPECT_EQ(d.candidates[0].candidate.timeouts.ttft, 750ms + 5000ms);
  // (The last candidate waits the configured 10 s, and its prefill on top.)
  EXPECT_EQ(d.candidates[1].candidate.timeouts.ttft, 10s + 10000ms);
  // The hedge delay too: a long prompt is not hedged at a short one's p99.
  EXPECT_GE(d.candidates[0].hedge_delay, 1000ms);
  EXPECT_NE(explain(d).find("in ~50.0k tok prefill ~1000ms"), std::string::npos) << explain(d);
}

// Exploring a prompt size: two deployments that have answered short
// prompts only (150 and 250 ms), the prior's 50 ms per 1k tokens on both.
struct SizeRaceFixture : Fixture {
  SizeRaceFixture() : Fixture({150, 250}) {
    for (auto& v : views) {
      v.stats.prefill_ms_per_1k = v.stats.prefill_prior_ms_per_1k = 50;
      v.stats.prefill_mean_k = 0.1;
    }
  }
  RouteRequest long_prompt() const {
    auto r = request();
    r.prompt_bytes = 100'000;  // 25k tokens: 1.25 s at the prior, a guess
    return r;
  }
};

// Failover III: the stall deadline from the deployment's streams' pauses.
TEST(RouterStall, TheStallDeadlineIsThreeTimesThePausesP95BetweenTwoSecondsAndIdle) {
  Fixture f({100, 150, 200});
  f.cfg.timeouts.idle = 30s;
  auto stall_of = [&](std::size_t i) {
    const auto d = f.decide(f.request());
    for (const auto& c : d.candidates)
      if (c.candidate.deployment == &f.model->deployments[i]) return c.candidate.stall;
    return -1ms;
  };
  EXPECT_EQ(stall_of(0), 0ms);  // nothing measured: the idle timeout
  f.views[0].stats.pause_p95_ms = 1500;
  f.views[0].stats.pause_samples = kMinPauseSamples - 1;
  EXPECT_EQ(stall_of(0), 0ms);  // too few streams
  f.views[0].stats.pause_samples = kMinPauseSamples;
  EXPECT_EQ(stall_of(0), 4500ms);
  f.views[0].stats.pause_p95_ms = 40;
  EXPECT_EQ(stall_of(0), kMinStallDeadline);
  f.views[0].stats.pause_p95_ms = 20'000;
  EXPECT_EQ(stall_of(0), 30s);
  // The last candidate has nothing to fail over to: its pauses are not cut short.
  f.views[2].stats.pause_p95_ms = 40;
  f.views[2].stats.pause_samples = kMinPauseSamples;
  EXPECT_EQ(stall_of(2), 0ms);
}

TEST(RouterPrefill, ALongPromptWhoseTtftIsAGuessRacesTheNextCandidateFromTheStart) {
  SizeRaceFixture f;
  auto d = f.decide(f.long_prompt());
  ASSERT_EQ(Fixture::order(d), (Names{"p0", "p1"}));
  EXPECT_TRUE(d.candidates[0].size_race);
  EXPECT_TRUE(d.candidates[0].explored);
  EXPECT_TRUE(d.candidates[0].capped);
  EXPECT_EQ(d.candidates[0].hedge_delay, 0ms);  // latency: both from the start
  EXPECT_FALSE(d.candidates[1].explored);
  EXPECT_NE(explain(d).find("explore-size hedge@0ms"), std::string::npos) << explain(d);
  // A short prompt is no guess: no race.
  auto short_prompt = f.request();
  short_prompt.prompt_bytes = 2'000;
  d = f.decide(short_prompt);
  EXPECT_FALSE(d.candidates[0].size_race);
  EXPECT_FALSE(d.candidates[0].explored);
  // Nor under a policy that does not score the first token.
  auto cheapest = f.long_prompt();
  cheapest.policy.policy = Policy::kCost;
  EXPECT_FALSE(f.decide(cheapest).candidates[0].size_race);
}

TEST(RouterPrefill, NoSizeRaceWhereTheFirstChoiceIsKnownOrWasRacedOrTheNextCannotWin) {
  {
    SizeRaceFixture f;  // the first choice has answered prompts of many sizes
    f.views[0].stats.prefill_spread = 600;
    EXPECT_FALSE(f.decide(f.long_prompt()).candidates[0].size_race);
  }
  {
    SizeRaceFixture f;  // ...or of this size
    f.views[0].stats.prefill_mean_k = 25;
    EXPECT_FALSE(f.decide(f.long_prompt()).candidates[0].size_race);
  }
  {
    SizeRaceFixture f;  // it lost such a race: its slope has a floor
    f.views[0].stats.prefill_floor_ms_per_1k = 24;
    EXPECT_FALSE(f.decide(f.long_prompt()).candidates[0].size_race);
  }
  {
    SizeRaceFixture f;  // kMaxSizeRaces of them are in flight there
    f.views[0].stats.awaiting_guessed = kMaxSizeRaces;
    EXPECT_FALSE(f.decide(f.long_prompt()).candidates[0].size_race);
    f.views[0].stats.awaiting_guessed = kMaxSizeRaces - 1;
    EXPECT_TRUE(f.decide(f.long_prompt()).candidates[0].size_race);
  }
  {
    SizeRaceFixture f;  // the next one is slower than any slope could make the first
    f.views[1].stats.ttft_estimate_ms = 3'000;
    EXPECT_FALSE(f.decide(f.long_prompt()).candidates[0].size_race);
  }
  {
    SizeRaceFixture f;  // a single-attempt plan learns nothing
    auto r = f.long_prompt();
    r.policy.max_attempts = 1;
    EXPECT_FALSE(f.decide(r).candidates[0].size_race);
  }
}

}  // namespace
}  // namespace llmgate::routing

namespace llmgate::routing {
namespace {

// Routing III: prompt-cache affinity, in the policy's own measure.
struct AffinityFixture : Fixture {
  AffinityFixture() : Fixture({200, 220}) {
    for (auto& v : views) {
      v.stats.prefill_ms_per_1k = 50;
      v.stats.reports_cached = true;  // both report cached tokens
    }
  }
  // A 20k-token prompt (80 KB at 4 bytes a token); p1 holds `held_bytes` of it.
  RouteRequest request_held_by_p1(std::size_t held_bytes) const {
    auto r = request();
    r.prompt_bytes = 80'000;
    r.cached.held[0] = {model->deployments[1].id_hash(), {7, held_bytes, 0}, false};
    r.cached.count = 1;
    return r;
  }
};

TEST(RouterAffinity, ADeploymentHoldingTheConversationsPrefixExpectsOnlyTheRestsPrefill) {
  AffinityFixture f;
  // Without affinity: p0 (200 + 1000 ms prefill) beats p1 (220 + 1000).
  auto plain = f.request();
  plain.prompt_bytes = 80'000;
  EXPECT_EQ(Fixture::order(f.decide(plain)), (Names{"p0", "p1"}));
  // p1 holds 76 KB (19k tokens): it prefills 1k tokens, 50 ms.
  auto d = f.decide(f.request_held_by_p1(76'000));
  ASSERT_EQ(Fixture::order(d), (Names{"p1", "p0"}));
  const auto& c = d.candidates[0];
  EXPECT_EQ(c.cache_held_tokens, 19'000);
  EXPECT_EQ(c.cached_tokens, 19'000);
  EXPECT_DOUBLE_EQ(c.prefill_ms, 50);
  EXPECT_DOUBLE_EQ(c.estimate_ms, 220 + 50);
  // The deadline still has the whole prompt's prefill: a provider may have
  // dropped the prefix, and reading it again is no stall.
  EXPECT_EQ(c.prefill_allowance, 2000ms);
  EXPECT_NE(explain(d).find("cached ~19.0k prefill ~50ms"), std::string::npos) << explain(d);
  EXPECT_NE(explain(d).find("affinity hit"), std::string::npos) << explain(d);
}

TEST(RouterAffinity, AffinityGivesWayToAMuchFasterDeploymentAndToLoad) {
  AffinityFixture f;
  f.views[1].stats.ttft_estimate_ms = 2000;  // p1 degraded: 2000 + 50 > 200 + 1000
  EXPECT_EQ(Fixture::order(f.decide(f.request_held_by_p1(76'000))), (Names{"p0", "p1"}));
  f.views[1].stats.ttft_estimate_ms = 220;
  f.views[1].stats.awaiting_first_token = 30;  // queued: 270 x (1 + 0.25 x 30)
  EXPECT_EQ(Fixture::order(f.decide(f.request_held_by_p1(76'000))), (Names{"p0", "p1"}));
}

TEST(RouterAffinity, ADeploymentThatNeverReportsCachedTokensEarnsNoBonus) {
  AffinityFixture f;
  f.views[1].stats.reports_cached = false;
  auto d = f.decide(f.request_held_by_p1(76'000));
  EXPECT_EQ(Fixture::order(d), (Names{"p0", "p1"}));
  EXPECT_EQ(d.candidates[1].cache_held_tokens, 19'000);  // known held...
  EXPECT_EQ(d.candidates[1].cached_tokens, 0);           // ...but worth nothing
  // One that reports them for half of what it was expected to hold: half.
  f.views[1].stats.reports_cached = true;
  f.views[1].stats.cache_share_measured = 0.5;
  d = f.decide(f.request_held_by_p1(76'000));
  EXPECT_EQ(d.candidates[0].cached_tokens, 9'500);
}

TEST(RouterAffinity, APrefixUnderWhatProvidersCacheCountsForNothing) {
  AffinityFixture f;
  auto d = f.decide(f.request_held_by_p1(4'000));  // 1,000 tokens < 1,024
  EXPECT_EQ(Fixture::order(d), (Names{"p0", "p1"}));
  EXPECT_EQ(d.candidates[1].cache_held_tokens, 0);
}

TEST(RouterAffinity, ARequestWithACachedPrefixIsNotExplored) {
  AffinityFixture f;
  f.options.exploration = 1.0;  // every request explores...
  auto plain = f.request();
  EXPECT_TRUE(f.decide(plain).candidates[0].explored);
  // ...but one that would pay its whole prefill elsewhere.
  auto d = f.decide(f.request_held_by_p1(76'000));
  EXPECT_FALSE(d.candidates[0].explored);
  EXPECT_EQ(Fixture::order(d), (Names{"p1", "p0"}));
}

}  // namespace
}  // namespace llmgate::routing
