#include "routing/health.h"

#include <gtest/gtest.h>

#include <atomic>
#include <random>
#include <string>
#include <thread>
#include <vector>

namespace llmgate::routing {
namespace {

using namespace std::chrono_literals;
const Clock::time_point t0{std::chrono::seconds(5000)};

config::Ejection options() {
  config::Ejection o;
  o.consecutive_failures = 3;
  o.error_rate = 0.5;
  o.min_requests = 10;
  o.base_duration = 5s;
  o.max_duration = 60s;
  o.jitter = 0;  // exact times; jitter has its own tests
  o.max_ejected_fraction = 0.5;
  o.probe_interval = 0s;  // probes only when half-open; probing while ejected has its own tests
  return o;
}

void fail(HealthTracker& h, const std::string& id, int times, Clock::time_point now) {
  for (int i = 0; i < times; ++i) h.on_attempt(id, true, 0, 1, now);
}
void succeed(HealthTracker& h, const std::string& id, Clock::time_point now) {
  h.on_attempt(id, false, 0, 1, now);
}

// `id` checked next to a healthy partner, so that neither the cap (1 of 2)
// nor panic mode touches it.
Availability alone(HealthTracker& h, const std::string& id, Clock::time_point now) {
  return h.check({id, "healthy/partner"}, now)[0];
}

TEST(HealthTracker, EjectsAfterConsecutiveFailuresForTheBaseDuration) {
  HealthTracker h(options());
  fail(h, "a/m", 2, t0);
  EXPECT_TRUE(alone(h, "a/m", t0).routable);
  fail(h, "a/m", 1, t0);
  Availability a = alone(h, "a/m", t0 + 1800ms);
  EXPECT_EQ(a.state, HealthState::kEjected);
  EXPECT_FALSE(a.routable);
  EXPECT_FALSE(a.panic);
  EXPECT_EQ(a.until, t0 + 5s);
  EXPECT_EQ(a.reason, "ejected: 3 consecutive failures, 3.2s left");
  EXPECT_EQ(h.ejections_total("a/m"), 1u);
  EXPECT_EQ(h.ejections_total("other/m"), 0u);
}

TEST(HealthTracker, ASuccessResetsTheConsecutiveFailures) {
  HealthTracker h(options());
  fail(h, "a/m", 2, t0);
  succeed(h, "a/m", t0);
  fail(h, "a/m", 2, t0);
  EXPECT_EQ(alone(h, "a/m", t0).state, HealthState::kHealthy);
  EXPECT_EQ(alone(h, "a/m", t0).reason, "");
}

TEST(HealthTracker, EjectsOnTheErrorRateOnlyOverEnoughAttempts) {
  HealthTracker h(options());
  h.on_attempt("a/m", true, 0.62, 9, t0);  // 9 < min_requests
  EXPECT_TRUE(alone(h, "a/m", t0).routable);
  h.on_attempt("a/m", false, 0.62, 10, t0);  // a success never ejects
  EXPECT_TRUE(alone(h, "a/m", t0).routable);
  h.on_attempt("a/m", true, 0.49, 10, t0);  // under the threshold
  EXPECT_TRUE(alone(h, "a/m", t0).routable);
  h.on_attempt("a/m", true, 0.62, 10, t0);
  Availability a = alone(h, "a/m", t0);
  EXPECT_EQ(a.state, HealthState::kEjected);
  EXPECT_EQ(a.reason, "ejected: error rate 62%, 5.0s left");
}

TEST(HealthTracker, HalfOpenLetsExactlyOneProbeThrough) {
  HealthTracker h(options());
  fail(h, "a/m", 3, t0);
  EXPECT_FALSE(alone(h, "a/m", t0 + 5s - 1ns).routable);

  Availability probe = alone(h, "a/m", t0 + 5s);
  EXPECT_EQ(probe.state, HealthState::kProbing);
  EXPECT_TRUE(probe.routable);
  EXPECT_TRUE(probe.probe);
  EXPECT_FALSE(probe.until.has_value());

  Availability other = alone(h, "a/m", t0 + 5s);
  EXPECT_EQ(other.state, HealthState::kProbing);
  EXPECT_FALSE(other.routable);
  EXPECT_FALSE(other.probe);
  EXPECT_EQ(other.reason, "half-open: probe in flight");
}

TEST(HealthTracker, ARepeatedIdInOneCheckGetsOneProbe) {
  HealthTracker h(options());
  fail(h, "a/m", 3, t0);
  auto out = h.check({"a/m", "a/m", "b/m", "c/m"}, t0 + 5s);
  EXPECT_TRUE(out[0].probe);
  EXPECT_FALSE(out[1].probe);
  EXPECT_FALSE(out[1].routable);
}

TEST(HealthTracker, ASuccessfulProbeMakesTheDeploymentHealthy) {
  HealthTracker h(options());
  fail(h, "a/m", 3, t0);
  ASSERT_TRUE(alone(h, "a/m", t0 + 5s).probe);
  succeed(h, "a/m", t0 + 5s + 300ms);
  Availability a = alone(h, "a/m", t0 + 5s + 300ms);
  EXPECT_EQ(a.state, HealthState::kHealthy);
  EXPECT_TRUE(a.routable);
  EXPECT_EQ(a.reason, "");
  // Consecutive failures start over: two more are not enough.
  fail(h, "a/m", 2, t0 + 6s);
  EXPECT_TRUE(alone(h, "a/m", t0 + 6s).routable);
}

TEST(HealthTracker, AFailedProbeEjectsAgainForTwiceAsLong) {
  HealthTracker h(options());
  fail(h, "a/m", 3, t0);
  ASSERT_TRUE(alone(h, "a/m", t0 + 5s).probe);
  fail(h, "a/m", 1, t0 + 6s);
  Availability a = alone(h, "a/m", t0 + 6s);
  EXPECT_EQ(a.state, HealthState::kEjected);
  EXPECT_EQ(a.until, t0 + 16s);
  EXPECT_EQ(a.reason, "ejected: probe failed, 10s left");
  EXPECT_EQ(h.ejections_total("a/m"), 2u);
}

TEST(HealthTracker, BackoffDoublesPerEjectionAndIsCappedAtTheMaximum) {
  config::Ejection o = options();
  o.base_duration = 1s;
  o.max_duration = 5s;
  HealthTracker h(o);
  Clock::time_point now = t0;
  fail(h, "a/m", 3, now);
  std::vector<Clock::duration> times;
  for (int k = 1; k <= 5; ++k) {
    Availability a = alone(h, "a/m", now);
    ASSERT_EQ(a.state, HealthState::kEjected);
    times.push_back(*a.until - now);
    now = *a.until;
    ASSERT_TRUE(alone(h, "a/m", now).probe);
    fail(h, "a/m", 1, now);  // the probe fails
  }
  EXPECT_EQ(times, (std::vector<Clock::duration>{1s, 2s, 4s, 5s, 5s}));
}

TEST(HealthTracker, TheBackoffStartsOverOnlyAfterMaxDurationHealthy) {
  config::Ejection o = options();
  o.consecutive_failures = 1;
  o.base_duration = 1s;
  o.max_duration = 10s;
  for (auto healthy_for : {9999ms, 10000ms}) {
    HealthTracker h(o);
    fail(h, "a/m", 1, t0);  // k=1: 1 s
    ASSERT_TRUE(alone(h, "a/m", t0 + 1s).probe);
    fail(h, "a/m", 1, t0 + 1s);  // k=2: 2 s
    ASSERT_TRUE(alone(h, "a/m", t0 + 3s).probe);
    succeed(h, "a/m", t0 + 3s);  // back in
    fail(h, "a/m", 1, t0 + 3s + healthy_for);
    Availability a = alone(h, "a/m", t0 + 3s + healthy_for);
    // A flapping deployment keeps its long backoff (k=3: 4 s); one that
    // stayed up for max_duration starts over (k=1: 1 s).
    EXPECT_EQ(*a.until - (t0 + 3s + healthy_for), healthy_for < 10s ? 4s : 1s)
        << healthy_for.count();
  }
}

TEST(HealthTracker, ResultsWhileEjectedChangeNothing) {
  HealthTracker h(options());
  fail(h, "a/m", 3, t0);
  succeed(h, "a/m", t0 + 1s);   // an attempt that was already in flight
  fail(h, "a/m", 10, t0 + 2s);  // or routed anyway by the cap
  Availability a = alone(h, "a/m", t0 + 2s);
  EXPECT_EQ(a.state, HealthState::kEjected);
  EXPECT_EQ(a.until, t0 + 5s);
  EXPECT_EQ(h.ejections_total("a/m"), 1u);
}

TEST(HealthTracker, JitterIsDrawnFromTheSeededRng) {
  config::Ejection o = options();
  o.jitter = 0.2;
  o.consecutive_failures = 1;
  HealthTracker h(o, 42);
  fail(h, "a/m", 1, t0);
  // The same draw as the tracker's: the top 53 bits of mt19937_64(42).
  std::mt19937_64 rng(42);
  const double u = static_cast<double>(rng() >> 11) * 0x1.0p-53;
  const double expected_ms = 5000 * (0.8 + 0.4 * u);
  const auto until = *alone(h, "a/m", t0).until;
  const double actual_ms = std::chrono::duration<double, std::milli>(until - t0).count();
  EXPECT_NEAR(actual_ms, expected_ms, 1e-6);
  EXPECT_NE(until, t0 + 5s);

  HealthTracker same(o, 42), other(o, 43);
  fail(same, "a/m", 1, t0);
  fail(other, "a/m", 1, t0);
  EXPECT_EQ(*alone(same, "a/m", t0).until, until);
  EXPECT_NE(*alone(other, "a/m", t0).until, until);
}

TEST(HealthTracker, JitterStaysWithinItsBoundsAndSpreadsOverThem) {
  config::Ejection o = options();
  o.jitter = 0.2;
  o.consecutive_failures = 1;
  HealthTracker h(o, 7);
  double lo = 1e9, hi = 0;
  for (int i = 0; i < 2000; ++i) {
    const std::string id = "p/m" + std::to_string(i);
    fail(h, id, 1, t0);
    const double ms = std::chrono::duration<double, std::milli>(*h.peek(id, t0).until - t0).count();
    lo = std::min(lo, ms);
    hi = std::max(hi, ms);
  }
  EXPECT_GE(lo, 4000);
  EXPECT_LE(hi, 6000);
  // 2000 uniform draws: the extremes land within 1% of the bounds (P(miss) ~ e^-40).
  EXPECT_LT(lo, 4040);
  EXPECT_GT(hi, 5960);
}

TEST(HealthTracker, ReleasingTheProbeLetsTheNextRequestProbe) {
  HealthTracker h(options());
  fail(h, "a/m", 3, t0);
  ASSERT_TRUE(alone(h, "a/m", t0 + 5s).probe);
  EXPECT_FALSE(alone(h, "a/m", t0 + 5s).routable);
  h.release_probe("a/m");
  EXPECT_TRUE(alone(h, "a/m", t0 + 5s).probe);
}

TEST(HealthTracker, AnUnresolvedProbeSlotIsFreedAfterThirtySecondsOrTheBaseDuration) {
  HealthTracker h(options());  // base 5 s: the slot times out after 30 s
  fail(h, "a/m", 3, t0);
  ASSERT_TRUE(alone(h, "a/m", t0 + 5s).probe);
  EXPECT_FALSE(alone(h, "a/m", t0 + 35s - 1ns).routable);
  EXPECT_TRUE(alone(h, "a/m", t0 + 35s).probe);

  config::Ejection o = options();
  o.base_duration = 45s;  // longer than 30 s: the slot times out after 45 s
  HealthTracker slow(o);
  fail(slow, "a/m", 3, t0);
  ASSERT_TRUE(alone(slow, "a/m", t0 + 45s).probe);
  EXPECT_FALSE(alone(slow, "a/m", t0 + 90s - 1ns).routable);
  EXPECT_TRUE(alone(slow, "a/m", t0 + 90s).probe);
}

TEST(HealthTracker, TheCapKeepsTheEarliestEjectedOutAndRoutesTheRest) {
  HealthTracker h(options());  // at most floor(0.5 x 4) = 2 of 4 kept out
  fail(h, "c/m", 3, t0);
  fail(h, "a/m", 3, t0 + 1s);
  fail(h, "b/m", 3, t0 + 2s);
  auto out = h.check({"a/m", "b/m", "c/m", "d/m"}, t0 + 3s);
  EXPECT_FALSE(out[0].routable);  // ejected second
  EXPECT_TRUE(out[1].routable);   // ejected last: over the cap
  EXPECT_EQ(out[1].state, HealthState::kEjected);
  EXPECT_EQ(out[1].reason, "ejection cap: routed anyway");
  EXPECT_FALSE(out[1].panic);
  EXPECT_FALSE(out[2].routable);  // ejected first
  EXPECT_TRUE(out[3].routable);
  EXPECT_EQ(out[3].state, HealthState::kHealthy);
}

// check_model(): the model's deployments by their ids, as check(ids) answers
// for the same ids (cap, probe and order included).
TEST(HealthTracker, AModelIsCheckedAsItsDeploymentIds) {
  config::Model model;
  std::vector<std::string> ids;
  for (const char* provider : {"a", "b", "c", "d"}) {
    config::Deployment d;
    d.provider = provider;
    d.model = "m";
    d.set_id();
    ids.push_back(d.id());
    model.deployments.push_back(d);
  }
  HealthTracker by_model(options()), by_ids(options());
  for (HealthTracker* h : {&by_model, &by_ids}) {
    fail(*h, "c/m", 3, t0);
    fail(*h, "a/m", 3, t0 + 1s);
    fail(*h, "b/m", 3, t0 + 2s);
  }
  // A caller's kept vector, of another size and with an earlier answer in
  // it: every element is the new answer's.
  std::vector<Availability> got(7);
  for (Availability& a : got) {
    a.probe = true;
    a.routable = false;
    a.reason = "an earlier request's";
  }
  for (const auto at : {t0 + 3s, t0 + 8s}) {  // ejected (the cap), then half-open (a probe)
    by_model.check_model(model, at, got);
    const auto want = by_ids.check(ids, at);
    ASSERT_EQ(got.size(), want.size());
    for (std::size_t i = 0; i < got.size(); ++i) {
      EXPECT_EQ(got[i].state, want[i].state);
      EXPECT_EQ(got[i].routable, want[i].routable);
      EXPECT_EQ(got[i].probe, want[i].probe);
      EXPECT_EQ(got[i].reason, want[i].reason);
    }
  }
  // All healthy (no entry at all): the same vector, every element healthy.
  HealthTracker clean(options());
  clean.check_model(model, t0, got);
  ASSERT_EQ(got.size(), 4u);
  for (const Availability& a : got) {
    EXPECT_EQ(a.state, HealthState::kHealthy);
    EXPECT_TRUE(a.routable);
    EXPECT_FALSE(a.probe);
    EXPECT_EQ(a.reason, "");
  }
}

TEST(HealthTracker, TheCapCountsAProbeInFlightAsEjected) {
  HealthTracker h(options());
  fail(h, "a/m", 3, t0);
  fail(h, "b/m", 3, t0 + 1s);
  ASSERT_TRUE(h.check({"a/m"}, t0 + 5s)[0].probe);                   // a/m's probe is now in flight
  auto out = h.check({"a/m", "b/m", "c/m", "d/m", "e/m"}, t0 + 5s);  // cap 2
  EXPECT_FALSE(out[0].routable);
  EXPECT_FALSE(out[1].routable);
  out = h.check({"a/m", "b/m", "c/m"}, t0 + 5s);  // cap 1: b/m, ejected later, goes anyway
  EXPECT_FALSE(out[0].routable);
  EXPECT_EQ(out[0].reason, "half-open: probe in flight");
  EXPECT_TRUE(out[1].routable);
  EXPECT_EQ(out[1].reason, "ejection cap: routed anyway");
}

TEST(HealthTracker, ASingleDeploymentIsNeverKeptOutByEjection) {
  HealthTracker h(options());  // floor(0.5 x 1) = 0
  fail(h, "a/m", 3, t0);
  Availability a = h.check({"a/m"}, t0)[0];
  EXPECT_TRUE(a.routable);
  EXPECT_EQ(a.state, HealthState::kEjected);
  EXPECT_EQ(a.reason, "ejection cap: routed anyway");
}

TEST(HealthTracker, PanicRoutesEveryEjectedOneWhenNothingElseIsRoutable) {
  config::Ejection o = options();
  o.max_ejected_fraction = 1.0;
  HealthTracker h(o);
  fail(h, "a/m", 3, t0);
  fail(h, "b/m", 3, t0);
  auto out = h.check({"a/m", "b/m"}, t0 + 1s);
  for (const auto& a : out) {
    EXPECT_TRUE(a.routable);
    EXPECT_TRUE(a.panic);
    EXPECT_EQ(a.state, HealthState::kEjected);
    EXPECT_EQ(a.reason, "panic: all candidates ejected");
  }
  // With one healthy candidate there is no panic.
  out = h.check({"a/m", "b/m", "c/m"}, t0 + 1s);
  EXPECT_FALSE(out[0].routable);
  EXPECT_FALSE(out[1].routable);
  EXPECT_FALSE(out[0].panic);
}

TEST(HealthTracker, PanicNeverRoutesACoolingDownDeployment) {
  HealthTracker h(options());  // cap 1 of 2: a/m stays out
  fail(h, "a/m", 3, t0);
  h.on_retry_after("b/m", 20s, t0);
  auto out = h.check({"a/m", "b/m"}, t0 + 1s);
  EXPECT_TRUE(out[0].routable);
  EXPECT_TRUE(out[0].panic);
  EXPECT_FALSE(out[1].routable);
  EXPECT_FALSE(out[1].panic);
  EXPECT_EQ(out[1].state, HealthState::kCoolingDown);
  // Only cooling-down candidates: nothing is routable.
  out = h.check({"b/m"}, t0 + 1s);
  EXPECT_FALSE(out[0].routable);
}

TEST(HealthTracker, RetryAfterIsAHardCooldownAndNotAnEjection) {
  HealthTracker h(options());
  h.on_retry_after("a/m", 27s, t0);
  Availability a = alone(h, "a/m", t0);
  EXPECT_EQ(a.state, HealthState::kCoolingDown);
  EXPECT_FALSE(a.routable);
  EXPECT_EQ(a.until, t0 + 27s);
  EXPECT_EQ(a.reason, "cooling down: upstream Retry-After, 27s left");
  EXPECT_EQ(h.ejections_total("a/m"), 0u);
  EXPECT_EQ(alone(h, "a/m", t0 + 27s).state, HealthState::kHealthy);
  // The backoff did not grow: the first ejection still lasts the base duration.
  fail(h, "a/m", 3, t0 + 30s);
  EXPECT_EQ(alone(h, "a/m", t0 + 30s).until, t0 + 35s);
}

TEST(HealthTracker, RetryAfterIsCappedAndNeverShortened) {
  HealthTracker h(options());  // max_duration 60 s
  h.on_retry_after("a/m", 24h, t0);
  EXPECT_EQ(alone(h, "a/m", t0).until, t0 + 60s);
  h.on_retry_after("a/m", 1s, t0 + 10s);
  EXPECT_EQ(alone(h, "a/m", t0 + 10s).until, t0 + 60s);
  h.on_retry_after("a/m", 0ms, t0 + 10s);
  h.on_retry_after("b/m", -5s, t0);
  EXPECT_EQ(alone(h, "b/m", t0).state, HealthState::kHealthy);
}

TEST(HealthTracker, ACooldownHoldsBackTheProbe) {
  HealthTracker h(options());
  fail(h, "a/m", 3, t0);
  h.on_retry_after("a/m", 10s, t0 + 4s);
  Availability a = alone(h, "a/m", t0 + 6s);  // ejection over, cooldown not
  EXPECT_EQ(a.state, HealthState::kCoolingDown);
  EXPECT_FALSE(a.probe);
  EXPECT_TRUE(alone(h, "a/m", t0 + 14s).probe);
}

TEST(HealthTracker, TheErrorRateThatCausedAnEjectionCannotCauseTheNextAlone) {
  config::Ejection o = options();
  o.consecutive_failures = 5;
  HealthTracker h(o);
  h.on_attempt("a/m", true, 0.6, 20, t0);
  ASSERT_EQ(alone(h, "a/m", t0).state, HealthState::kEjected);
  ASSERT_TRUE(alone(h, "a/m", t0 + 5s).probe);
  h.on_attempt("a/m", false, 0.55, 21, t0 + 5s);  // the probe succeeds
  // The decayed rate is still high, but there are no fresh attempts yet.
  h.on_attempt("a/m", true, 0.56, 22, t0 + 6s);
  EXPECT_EQ(alone(h, "a/m", t0 + 6s).state, HealthState::kHealthy);
  for (int i = 0; i < 8; ++i) h.on_attempt("a/m", false, 0.5, 23 + i, t0 + 7s);
  h.on_attempt("a/m", true, 0.52, 31, t0 + 8s);  // the 10th since the probe
  EXPECT_EQ(alone(h, "a/m", t0 + 8s).state, HealthState::kEjected);
}

TEST(HealthTracker, PeekShowsStateWithoutTakingTheProbe) {
  HealthTracker h(options());
  EXPECT_EQ(h.peek("unknown/m", t0).state, HealthState::kHealthy);
  fail(h, "a/m", 3, t0);
  Availability ejected = h.peek("a/m", t0 + 4950ms);
  EXPECT_EQ(ejected.state, HealthState::kEjected);
  EXPECT_EQ(ejected.reason, "ejected: 3 consecutive failures, 0.1s left");
  EXPECT_FALSE(ejected.routable);  // no cap in peek

  Availability half_open = h.peek("a/m", t0 + 5s);
  EXPECT_EQ(half_open.state, HealthState::kProbing);
  EXPECT_TRUE(half_open.routable);
  EXPECT_FALSE(half_open.probe);
  EXPECT_EQ(half_open.reason, "half-open: next request probes");
  EXPECT_TRUE(alone(h, "a/m", t0 + 5s).probe);  // still free for a request
  EXPECT_EQ(h.peek("a/m", t0 + 5s).reason, "half-open: probe in flight");
}

TEST(HealthTracker, ConcurrentChecksHandOutExactlyOneProbe) {
  HealthTracker h(options());
  fail(h, "a/m", 3, t0);
  std::atomic<int> probes{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 500; ++i) {
        if (h.check({"a/m", "b/m"}, t0 + 5s)[0].probe) ++probes;
        h.on_attempt("b/m", false, 0, 1, t0 + 5s);
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(probes.load(), 1);
}

TEST(HealthTracker, AnEjectedDeploymentIsProbedEveryProbeInterval) {
  config::Ejection o = options();
  o.probe_interval = 1s;
  HealthTracker h(o);
  fail(h, "a/m", 3, t0);  // ejected for 5 s
  EXPECT_FALSE(alone(h, "a/m", t0 + 999ms).routable);
  Availability p = alone(h, "a/m", t0 + 1s);
  EXPECT_TRUE(p.probe);
  EXPECT_EQ(p.state, HealthState::kProbing);
  EXPECT_FALSE(alone(h, "a/m", t0 + 1s).routable) << "one probe at a time";
  // A failed probe leaves the ejection as it was; the next one a second later.
  h.on_attempt("a/m", true, 0, 1, t0 + 1200ms, /*probe=*/true);
  EXPECT_FALSE(alone(h, "a/m", t0 + 1900ms).routable);
  EXPECT_EQ(alone(h, "a/m", t0 + 1900ms).until, t0 + 5s);
  ASSERT_TRUE(alone(h, "a/m", t0 + 2s).probe);
  // A late result of an ordinary attempt changes nothing; a probe's success
  // ends the ejection at once.
  succeed(h, "a/m", t0 + 2100ms);
  EXPECT_EQ(alone(h, "a/m", t0 + 2100ms).state, HealthState::kEjected);
  h.on_attempt("a/m", false, 0, 1, t0 + 2200ms, /*probe=*/true);
  EXPECT_EQ(alone(h, "a/m", t0 + 2200ms).state, HealthState::kHealthy);
  EXPECT_EQ(h.ejections_total("a/m"), 1u);
}

TEST(HealthTracker, OnlyAProbeThatExercisedWhatFailedEndsTheEjection) {
  config::Ejection o = options();
  o.probe_interval = 1s;
  HealthTracker h(o);
  const unsigned chat = config::operation_bit(config::Operation::kChat);
  const unsigned embeddings = config::operation_bit(config::Operation::kEmbeddings);
  for (int i = 0; i < 3; ++i) h.on_attempt("a/m", true, 0, 1, t0, false, chat);  // ejected
  ASSERT_TRUE(alone(h, "a/m", t0 + 1s).probe);
  // An embeddings answer says nothing of the chat streams that failed: the
  // slot is freed, the ejection stays.
  h.on_attempt("a/m", false, 0, 1, t0 + 1100ms, /*probe=*/true, embeddings);
  EXPECT_EQ(alone(h, "a/m", t0 + 1100ms).state, HealthState::kEjected);
  ASSERT_TRUE(alone(h, "a/m", t0 + 2s).probe);
  h.on_attempt("a/m", false, 0, 1, t0 + 2100ms, /*probe=*/true, chat);
  EXPECT_EQ(alone(h, "a/m", t0 + 2100ms).state, HealthState::kHealthy);
  // Half-open, the same: only what failed proves it.
  for (int i = 0; i < 3; ++i) h.on_attempt("a/m", true, 0, 1, t0 + 3s, false, chat);
  ASSERT_TRUE(alone(h, "a/m", t0 + 30s).probe);  // past the ejection: half-open
  h.on_attempt("a/m", false, 0, 1, t0 + 30s, /*probe=*/true, embeddings);
  EXPECT_NE(alone(h, "a/m", t0 + 30s).state, HealthState::kHealthy);
  h.on_attempt("a/m", false, 0, 1, t0 + 30s, /*probe=*/true, chat | embeddings);
  EXPECT_EQ(alone(h, "a/m", t0 + 30s).state, HealthState::kHealthy);
  // Results that say nothing of what they exercised (0) prove as before.
  for (int i = 0; i < 3; ++i) h.on_attempt("a/m", true, 0, 1, t0 + 31s, false, chat);
  ASSERT_TRUE(alone(h, "a/m", t0 + 32s).probe);
  h.on_attempt("a/m", false, 0, 1, t0 + 32s, /*probe=*/true);
  EXPECT_EQ(alone(h, "a/m", t0 + 32s).state, HealthState::kHealthy);
}

TEST(HealthTracker, OnAttemptSaysWhenAndForHowLongItEjected) {
  HealthTracker h(options());
  EXPECT_FALSE(h.on_attempt("a/x", true, 0, 1, t0).has_value());
  EXPECT_FALSE(h.on_attempt("a/x", true, 0, 1, t0).has_value());
  EXPECT_EQ(h.on_attempt("a/x", true, 0, 1, t0), std::optional<Clock::duration>(5s));
  // Results while ejected eject nothing more; a failed probe ejects for twice as long.
  EXPECT_FALSE(h.on_attempt("a/x", true, 0, 1, t0 + 1s).has_value());
  ASSERT_TRUE(alone(h, "a/x", t0 + 5s).probe);
  EXPECT_EQ(h.on_attempt("a/x", true, 0, 1, t0 + 5s, true), std::optional<Clock::duration>(10s));
}

TEST(HealthTracker, ASharedEjectionKeepsTheDeploymentOutThenProbesIt) {
  HealthTracker h(options());
  h.on_shared_ejection("a/x", 7000ms, t0);
  auto a = alone(h, "a/x", t0 + 6s);
  EXPECT_EQ(a.state, HealthState::kEjected);
  EXPECT_FALSE(a.routable);
  EXPECT_NE(a.reason.find("by another replica"), std::string::npos) << a.reason;
  EXPECT_EQ(h.ejections_total("a/x"), 0u);  // not this replica's own
  a = alone(h, "a/x", t0 + 7s);
  EXPECT_TRUE(a.probe);
  h.on_attempt("a/x", false, 0, 1, t0 + 7s, true);
  EXPECT_EQ(alone(h, "a/x", t0 + 7s).state, HealthState::kHealthy);
  // The backoff did not grow: an ejection of its own afterwards is the base one.
  fail(h, "a/x", 3, t0 + 8s);
  EXPECT_EQ(*alone(h, "a/x", t0 + 8s).until, t0 + 8s + 5s);
}

TEST(HealthTracker, ASharedEjectionNeverShortensARunningOne) {
  HealthTracker h(options());
  fail(h, "a/x", 3, t0);  // ejected until t0 + 5s
  h.on_shared_ejection("a/x", 2000ms, t0 + 1s);
  EXPECT_EQ(*alone(h, "a/x", t0 + 1s).until, t0 + 5s);
  h.on_shared_ejection("a/x", 9000ms, t0 + 1s);  // a longer one extends it
  EXPECT_EQ(*alone(h, "a/x", t0 + 1s).until, t0 + 10s);
  h.on_shared_ejection("a/x", 3600s, t0 + 1s);  // capped at max_duration
  EXPECT_EQ(*alone(h, "a/x", t0 + 1s).until, t0 + 61s);
}

TEST(HealthTracker, ASuccessEndsAFailureRunWhileEverythingElseIsHealthy) {
  // A success on a deployment with failures in a row resets the run, even
  // though successes elsewhere take no lock (every deployment clean).
  HealthTracker h(options());
  succeed(h, "b/m", t0);
  fail(h, "a/m", 2, t0);
  succeed(h, "a/m", t0);
  fail(h, "a/m", 2, t0);
  EXPECT_EQ(alone(h, "a/m", t0).state, HealthState::kHealthy);
  fail(h, "a/m", 1, t0);
  EXPECT_EQ(alone(h, "a/m", t0).state, HealthState::kEjected);
}

TEST(HealthTracker, ACheckReadsWhatEachDeploymentsOwnStateSays) {
  // check() skips the lock while every deployment is clean. Through random
  // failures, successes, probes, cooldowns, ejections shared by other
  // replicas and forgotten deployments, each deployment's state in check()
  // must be what peek() (which always reads the entry) says of it.
  config::Ejection o = options();
  o.probe_interval = 1s;
  o.min_requests = 4;
  HealthTracker h(o);
  const std::vector<std::string> ids{"a/m", "b/m", "c/m"};
  std::mt19937_64 rng(11);
  Clock::time_point now = t0;
  std::size_t not_healthy = 0, healthy_again = 0;
  for (int step = 0; step < 3000; ++step) {
    now += std::chrono::milliseconds(rng() % 1500);
    const std::string& id = ids[rng() % ids.size()];
    switch (rng() % 10) {
      case 0:
      case 1:
      case 2:
        h.on_attempt(id, true, 0.6, 20, now);
        break;
      case 3:
        h.on_retry_after(id, std::chrono::milliseconds(500 + rng() % 4000), now);
        break;
      case 4:
        h.on_shared_ejection(id, std::chrono::milliseconds(500 + rng() % 4000), now);
        break;
      case 5:
        h.release_probe(id);
        break;
      case 6:
        if (rng() % 8 == 0) h.forget(id);
        break;
      default:
        h.on_attempt(id, false, 0.1, 20, now);
        break;
    }
    std::vector<Availability> own;
    for (const auto& i : ids) own.push_back(h.peek(i, now));
    const auto checked = h.check(ids, now);
    for (std::size_t i = 0; i < ids.size(); ++i) {
      ASSERT_EQ(checked[i].state, own[i].state) << "step " << step << " " << ids[i];
      ASSERT_EQ(checked[i].until, own[i].until) << "step " << step << " " << ids[i];
      // A probe handed out is tried: its result counts as the probe's.
      if (checked[i].probe) h.on_attempt(ids[i], rng() % 2 == 0, 0.1, 20, now, true);
    }
    const bool all_healthy = std::all_of(own.begin(), own.end(), [](const Availability& a) {
      return a.state == HealthState::kHealthy;
    });
    (all_healthy ? healthy_again : not_healthy) += 1;
  }
  // Both kinds of step happened many times.
  EXPECT_GT(not_healthy, 300u);
  EXPECT_GT(healthy_again, 300u);
}

TEST(HealthTracker, StatesHaveStableNames) {
  EXPECT_STREQ(to_string(HealthState::kHealthy), "healthy");
  EXPECT_STREQ(to_string(HealthState::kEjected), "ejected");
  EXPECT_STREQ(to_string(HealthState::kProbing), "probing");
  EXPECT_STREQ(to_string(HealthState::kCoolingDown), "cooling_down");
}

}  // namespace
}  // namespace llmgate::routing
