#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <deque>
#include <optional>
#include <random>
#include <tuple>
#include <utility>
#include <vector>

#include "routing/failure_tracker.h"
#include "routing/prefill_fit.h"
#include "routing/ttft_level.h"
#include "routing/windowed_quantiles.h"

namespace llmgate::routing {
namespace {

using namespace std::chrono_literals;
using TimePoint = std::chrono::steady_clock::time_point;
const TimePoint t0{std::chrono::seconds(1000)};

TtftLevel ttft() { return TtftLevel(/*prior=*/500, /*tau=*/10s, /*relax_tau=*/60s); }

// Samples of a lognormal TTFT with median `median` and log-spread `sigma`,
// every `dt`, from a seeded generator.
struct LogNormalTtft {
  double median;
  double sigma;
  std::mt19937_64 rng{7};
  double next() { return median * std::exp(sigma * std::normal_distribution<double>()(rng)); }
};

TEST(TtftLevel, StartsAtThePriorNotAtZero) {
  auto e = ttft();
  EXPECT_DOUBLE_EQ(e.estimate(t0), 500);
  EXPECT_EQ(e.samples(), 0u);
}

TEST(TtftLevel, FirstSampleReplacesThePrior) {
  auto e = ttft();
  e.observe(120, t0);
  EXPECT_NEAR(e.estimate(t0), 120, 1e-9);
}

TEST(TtftLevel, ASteadyDeploymentThatSlowsDownFiveTimesReadsSlowAtItsSecondSlowAnswer) {
  // One answer is noise (an outlier); two in a row are a change.
  auto e = ttft();
  TimePoint t = t0;
  for (int i = 0; i < 200; ++i, t += 100ms) e.observe(i % 2 ? 95 : 105, t);
  e.observe(500, t);
  EXPECT_LT(e.estimate(t), 110);
  e.observe(520, t + 50ms);
  EXPECT_NEAR(e.estimate(t + 50ms), std::sqrt(500.0 * 520), 1e-6);
}

TEST(TtftLevel, AnOutlierLongBeforeASlowdownIsNotPartOfTheNewLevel) {
  // The failing integration run's sequence: one early outlier (2x) holds
  // the CUSUM above zero through the steady answers after it; the level
  // after the change is the slow answers', not the mean since that outlier.
  auto e = ttft();
  TimePoint t = t0;
  for (double ms : {4.2, 10.3, 4.2}) e.observe(ms, t += 10ms);
  t += 200ms;
  for (double ms : {4.2, 4.2, 4.2}) e.observe(ms, t += 10ms);
  e.observe(149, t += 150ms);
  EXPECT_LT(e.estimate(t), 10);
  e.observe(149, t += 150ms);
  EXPECT_NEAR(e.estimate(t), 149, 1);
}

TEST(TtftLevel, AChangeAfterNoiseReadsTheNewLevelNotTheRunsMean) {
  // Whatever noise held the CUSUM up before it, a 5x slowdown of a steady
  // deployment (sigma 0.05) reads as the slow answers at the second of
  // them; of a wider one (sigma 0.2, the slowdown 8 spreads) at the third
  // in most cases. (Before the change point was the run's best split, an
  // early outlier made the new level the mean of the whole run.)
  for (const auto& [sigma, slow_answers, share] :
       {std::tuple{0.05, 2, 1.0}, std::tuple{0.2, 3, 0.9}}) {
    std::mt19937 rng(7);
    int read = 0;
    const int trials = 500;
    for (int trial = 0; trial < trials; ++trial) {
      auto e = ttft();
      LogNormalTtft before{100, sigma};
      before.rng.seed(static_cast<unsigned>(trial));
      TimePoint t = t0;
      const int n = 5 + static_cast<int>(rng() % 20);
      for (int i = 0; i < n; ++i) e.observe(before.next(), t += 20ms);
      for (int i = 0; i < slow_answers; ++i) e.observe(500, t += 100ms);
      if (e.estimate(t) > 400) ++read;
    }
    EXPECT_GE(read, share * trials) << "sigma " << sigma;
  }
}

TEST(TtftLevel, AStepOfAThirdIsFollowedWithinAFewAnswers) {
  auto e = ttft();
  LogNormalTtft before{300, 0.15};
  TimePoint t = t0;
  for (int i = 0; i < 400; ++i, t += 50ms) e.observe(before.next(), t);
  EXPECT_NEAR(e.estimate(t), 300, 300 * 0.05);
  LogNormalTtft after{400, 0.15};
  int answers = 0;
  while (e.estimate(t) < 370 && answers < 100) {
    t += 50ms;
    e.observe(after.next(), t);
    ++answers;
  }
  EXPECT_LE(answers, 12);  // the decay alone would take tau (200 answers)
}

TEST(TtftLevel, ReadsTheMedianOfALognormalTtftNotItsPeaks) {
  // The independent check's case: a median of 300 ms with a wide spread
  // read ~640 ms (about its p95) under the PeakEWMA this replaced.
  for (double sigma : {0.25, 0.5, 0.8}) {
    auto e = ttft();
    LogNormalTtft d{300, sigma};
    TimePoint t = t0;
    double worst = 0;
    for (int i = 0; i < 3000; ++i, t += 100ms) {
      e.observe(d.next(), t);
      if (i >= 200) worst = std::max(worst, std::abs(e.estimate(t) / 300 - 1));
    }
    EXPECT_LT(worst, 0.25) << "sigma " << sigma;
    EXPECT_NEAR(e.estimate(t), 300, 300 * 0.1) << "sigma " << sigma;
    EXPECT_NEAR(e.spread(), sigma, sigma * 0.25) << "sigma " << sigma;
  }
}

TEST(TtftLevel, AnOutlierMovesTheLevelByAFewPercentAtMost) {
  auto e = ttft();
  LogNormalTtft d{300, 0.3};
  TimePoint t = t0;
  for (int i = 0; i < 600; ++i, t += 100ms) e.observe(d.next(), t);
  const double before = e.estimate(t);
  t += 100ms;
  e.observe(4000, t);  // 13x: one sample, not a change
  EXPECT_LT(e.estimate(t), before * 1.05);
  EXPECT_GT(e.estimate(t), before);
}

TEST(TtftLevel, ConstantSamplesReadTheirValueWhateverThePrior) {
  // Relaxation toward the prior is applied when the estimate is read, never
  // stored: otherwise every sample would store a little drift, and a 150 ms
  // deployment would settle at 150 + (1000 - 150) x tau / (tau + relax_tau).
  for (double prior : {1000.0, 20.0}) {
    TtftLevel e(prior, 10s, 60s);
    TimePoint t = t0;
    for (int i = 0; i < 2400; ++i, t += 50ms) {
      e.observe(150, t);
      (void)e.estimate(t + 25ms);  // reads in between change nothing
    }
    EXPECT_NEAR(e.estimate(t), 150, 1.5) << "prior " << prior;
  }
}

TEST(TtftLevel, ARestartForgetsThePenalties) {
  auto e = ttft();
  e.observe(4000, t0);
  e.restart(150, t0 + 1s);
  EXPECT_NEAR(e.estimate(t0 + 1s), 150, 1e-9);
}

TEST(TtftLevel, ALowerBoundOnlyRaises) {
  auto e = ttft();
  e.observe(200, t0);
  const double before = e.estimate(t0 + 1s);
  EXPECT_FALSE(e.observe_at_least(100, t0 + 1s));
  EXPECT_DOUBLE_EQ(e.estimate(t0 + 1s), before);
  EXPECT_TRUE(e.observe_at_least(800, t0 + 2s));
  EXPECT_NEAR(e.estimate(t0 + 2s), 800, 1e-9);
}

TEST(TtftLevel, ADecayedSampleMovesTheLevelByItsTimeWeight) {
  auto e = ttft();
  e.observe(100, t0);
  e.observe_decayed(1000, t0 + 10s);  // dt = tau: the old level keeps e^-1
  const double w = std::exp(-1.0);
  EXPECT_NEAR(e.estimate(t0 + 10s), std::exp(std::log(100) * w + std::log(1000) * (1 - w)), 1e-6);
}

TEST(TtftLevel, ABurstOfFastSamplesInOneInstantDoesNotEraseASlowOne) {
  auto e = ttft();
  e.observe(1000, t0);
  for (int i = 0; i < 100; ++i) e.observe(10, t0);
  EXPECT_GT(e.estimate(t0), 500);
}

TEST(TtftLevel, ARecoveryReadsAsItIsAfterAFewAnswersNotAfterTau) {
  auto e = ttft();
  TimePoint t = t0;
  for (int i = 0; i < 50; ++i, t += 100ms) e.observe(i % 2 ? 880 : 920, t);
  e.observe(150, t + 1s);  // slow, then recovered: 150 ms answers a second apart
  e.observe(150, t + 2s);
  EXPECT_GT(e.estimate(t + 2s), 300);  // two are not yet a recovery
  e.observe(160, t + 3s);
  EXPECT_NEAR(e.estimate(t + 3s), std::cbrt(150.0 * 150 * 160), 1e-6);
}

TEST(TtftLevel, StaleEstimatesRelaxTowardThePrior) {
  auto e = ttft();
  e.observe(2000, t0);
  EXPECT_NEAR(e.estimate(t0 + 60s), 500 + 1500 * std::exp(-1.0), 1e-6);
  EXPECT_NEAR(e.estimate(t0 + 3600s), 500, 1e-6);
  auto fast = ttft();
  fast.observe(50, t0);
  EXPECT_NEAR(fast.estimate(t0 + 3600s), 500, 1e-6);  // and a fast one is re-checked too
}

TEST(WindowedQuantiles, NearestRankOverTheWindow) {
  WindowedQuantiles w(60s, 1000);
  for (int i = 1; i <= 100; ++i) w.add(i, t0);
  EXPECT_EQ(*w.quantile(0.5, t0), 50);
  EXPECT_EQ(*w.quantile(0.95, t0), 95);
  EXPECT_EQ(*w.quantile(0.99, t0), 99);
  EXPECT_EQ(*w.quantile(1.0, t0), 100);
  EXPECT_EQ(*w.quantile(0.0, t0), 1);
}

TEST(WindowedQuantiles, ForgetsSamplesOlderThanTheWindow) {
  WindowedQuantiles w(60s, 1000);
  w.add(5000, t0);
  w.add(100, t0 + 30s);
  EXPECT_EQ(*w.quantile(1.0, t0 + 59s), 5000);
  EXPECT_EQ(*w.quantile(1.0, t0 + 60s), 100);
  EXPECT_EQ(w.count(t0 + 60s), 1u);
  EXPECT_FALSE(w.quantile(0.5, t0 + 90s).has_value());
}

TEST(WindowedQuantiles, KeepsTheMostRecentSamplesWhenFull) {
  WindowedQuantiles w(60s, 3);
  for (double v : {1000.0, 1.0, 2.0, 3.0}) w.add(v, t0);
  EXPECT_EQ(w.count(t0), 3u);
  EXPECT_EQ(*w.quantile(1.0, t0), 3);
}

TEST(WindowedQuantiles, AnswersSeveralQuantilesAtOnce) {
  WindowedQuantiles w(60s, 100);
  for (int i = 1; i <= 10; ++i) w.add(i * 10, t0);
  auto qs = w.quantiles({0.5, 0.9, 0.99}, t0);
  EXPECT_EQ(*qs[0], 50);
  EXPECT_EQ(*qs[1], 90);
  EXPECT_EQ(*qs[2], 100);
}

TEST(WindowedQuantiles, CensoredSamplesAreKaplanMeier) {
  // 90 answers at 100 ms and 10 attempts that gave up at 450 ms without one:
  // the median is known, the p95 only to be beyond 450 ms.
  WindowedQuantiles w(60s, 1000);
  for (int i = 0; i < 90; ++i) w.add(100, t0);
  for (int i = 0; i < 10; ++i) w.add_censored(450, t0);
  bool bound = false;
  auto qs = w.quantiles({0.5, 0.95}, t0, &bound);
  EXPECT_EQ(*qs[0], 100);
  EXPECT_EQ(*qs[1], 450);
  EXPECT_TRUE(bound);
  EXPECT_EQ(w.censored(t0), 10u);
  // A censored sample below later answers leaves the risk set only: the
  // answers above it share its mass (1..4 x 100 ms, one gave up at 50 ms).
  WindowedQuantiles k(60s, 1000);
  k.add_censored(50, t0);
  for (int v : {100, 200, 300, 400}) k.add(v, t0);
  EXPECT_EQ(*k.quantiles({0.25}, t0, &bound)[0], 100);
  EXPECT_EQ(*k.quantile(0.5, t0), 200);
  EXPECT_EQ(*k.quantile(1.0, t0), 400);
  EXPECT_FALSE(bound);
  // Once the censored samples leave the window, plain nearest rank again.
  EXPECT_EQ(w.censored(t0 + 60s), 0u);
}

TEST(WindowedQuantiles, LostRacesAreCountedApartFromTimeouts) {
  // Censored either way; the console and /admin/routes say which is which.
  WindowedQuantiles w(60s, 4);
  w.add(100, t0);
  w.add_censored(450, t0 + 1s);                // timed out
  w.add_censored(30, t0 + 2s, /*race=*/true);  // a hedge answered first
  w.add_censored(40, t0 + 3s, /*race=*/true);
  EXPECT_EQ(w.censored(t0 + 3s), 3u);
  EXPECT_EQ(w.lost_races(t0 + 3s), 2u);
  // Full (4): the oldest answer goes first, then the timeout.
  w.add(90, t0 + 4s);
  w.add(95, t0 + 5s);
  EXPECT_EQ(w.censored(t0 + 5s), 2u);
  EXPECT_EQ(w.lost_races(t0 + 5s), 2u);
  // And the window's end takes the races with it.
  EXPECT_EQ(w.lost_races(t0 + 62s), 1u);
  EXPECT_EQ(w.lost_races(t0 + 63s), 0u);
  EXPECT_EQ(w.censored(t0 + 63s), 0u);
}

TEST(WindowedQuantiles, WithoutCensoringKaplanMeierIsTheNearestRank) {
  // A sample censored above every answer is still at risk for each of them:
  // below it, the estimate is the nearest rank among all 101 samples.
  WindowedQuantiles plain(60s, 1000), km(60s, 1000);
  for (int i = 1; i <= 100; ++i) {
    plain.add(i, t0);
    km.add(i, t0);
  }
  plain.add(1000, t0);
  km.add_censored(1000, t0);  // forces the Kaplan-Meier pass
  for (double q : {0.0, 0.1, 0.5, 0.9, 0.95, 0.99}) {
    EXPECT_EQ(*km.quantile(q, t0), *plain.quantile(q, t0)) << q;
  }
}

// The nearest rank of `values` (sorted here), as a reference.
std::optional<double> nearest_rank(std::vector<double> values, double q) {
  if (values.empty()) return std::nullopt;
  std::sort(values.begin(), values.end());
  auto rank = static_cast<std::size_t>(std::ceil(q * static_cast<double>(values.size())));
  return values[rank == 0 ? 0 : rank - 1];
}

TEST(WindowedQuantiles, ObservedQuantilesAreTheNearestRankOfTheAnsweredSamples) {
  // Random windows with and without censored samples, against a reference
  // that keeps only the answered ones and sorts them.
  std::mt19937_64 rng(7);
  for (int round = 0; round < 200; ++round) {
    WindowedQuantiles w(60s, 1000);
    std::vector<double> answered;
    const int n = static_cast<int>(rng() % 40);
    for (int i = 0; i < n; ++i) {
      const double v = static_cast<double>(rng() % 50);  // ties on purpose
      if (rng() % 3 == 0) {
        w.add_censored(v, t0);
      } else {
        w.add(v, t0);
        answered.push_back(v);
      }
    }
    const std::vector<double> qs{0.0, 0.5, 0.9, 0.95, 0.99, 1.0};
    const auto got = w.observed_quantiles(qs, t0);
    ASSERT_EQ(got.size(), qs.size());
    for (std::size_t i = 0; i < qs.size(); ++i) {
      EXPECT_EQ(got[i], nearest_rank(answered, qs[i])) << "round " << round << " q " << qs[i];
    }
  }
}

TEST(WindowedQuantiles, RecentQuantilesReadOnlyTheLastSamples) {
  std::mt19937_64 rng(11);
  for (std::size_t last : {std::size_t{1}, std::size_t{20}, std::size_t{100}}) {
    WindowedQuantiles w(60s, 1000);
    std::vector<double> all;
    for (int i = 0; i < 90; ++i) {
      const double v = static_cast<double>(rng() % 1000);
      w.add(v, t0 + std::chrono::milliseconds(i));
      all.push_back(v);
    }
    const std::vector<double> tail(
        all.end() - static_cast<std::ptrdiff_t>(std::min(last, all.size())), all.end());
    const std::vector<double> qs{0.5, 0.9, 0.99};
    bool lower_bound = true;
    const auto got = w.recent_quantiles(qs, t0 + 100ms, last, &lower_bound);
    EXPECT_FALSE(lower_bound);
    for (std::size_t i = 0; i < qs.size(); ++i) {
      EXPECT_EQ(got[i], nearest_rank(tail, qs[i])) << last << " q " << qs[i];
    }
  }
  // Censored among the recent ones: the estimate may only be a lower bound.
  WindowedQuantiles w(60s, 1000);
  for (int i = 0; i < 30; ++i) w.add(10, t0);
  for (int i = 0; i < 5; ++i) w.add_censored(500, t0);
  bool lower_bound = false;
  const auto got = w.recent_quantiles({0.5, 0.99}, t0, 5, &lower_bound);
  EXPECT_TRUE(lower_bound);
  EXPECT_EQ(got[1], 500);
}

// The Kaplan-Meier estimate of `points` (value, censored), as a reference:
// the quantile the product-limit estimate first reaches, else the largest
// value (a lower bound).
std::optional<double> kaplan_meier(std::vector<std::pair<double, bool>> points, double q) {
  if (points.empty()) return std::nullopt;
  std::sort(points.begin(), points.end());  // equal values: observed (false) first
  double survival = 1;
  auto at_risk = static_cast<double>(points.size());
  for (const auto& [value, censored] : points) {
    if (!censored) {
      survival *= 1 - 1 / at_risk;
      if (1 - survival >= q - 1e-12) return value;
    }
    at_risk -= 1;
  }
  return points.back().first;
}

TEST(WindowedQuantiles, AnswersHoldUntilASampleComesOrTheOldestExpires) {
  WindowedQuantiles w(10s, 3);
  EXPECT_EQ(w.expires_at(), TimePoint::max());
  const auto v0 = w.version();
  w.add(100, t0);
  w.add(200, t0 + 2s);
  EXPECT_NE(w.version(), v0);
  // The oldest sample leaves the window 10 s after it came.
  EXPECT_EQ(w.expires_at(), t0 + 10s);
  const auto v1 = w.version();
  EXPECT_EQ(w.quantile(0.5, t0 + 9999ms), 100);
  EXPECT_EQ(w.version(), v1);  // a query before the expiry changes nothing
  EXPECT_EQ(w.quantile(0.5, t0 + 10s), 200);
  EXPECT_NE(w.version(), v1);  // the eviction did
  EXPECT_EQ(w.expires_at(), t0 + 12s);
  // A sample that pushes out the oldest of a full window changes it too.
  w.add(300, t0 + 10s);
  w.add(400, t0 + 10s);
  const auto v2 = w.version();
  w.add(500, t0 + 10s);
  EXPECT_NE(w.version(), v2);
  EXPECT_EQ(w.expires_at(), t0 + 20s);
  EXPECT_EQ(w.count(t0 + 10s), 3u);
}

TEST(WindowedQuantiles, ManySamplesComingAndGoingKeepTheQuantilesExact) {
  // Thousands of samples through a full window (the oldest leave as new ones
  // come, and a time window drops runs of them), with ties and censored
  // ones: every query agrees with a reference that sorts the window's
  // samples each time. The blocks split, empty and merge along the way.
  std::mt19937_64 rng(23);
  for (const std::size_t capacity : {std::size_t{1}, std::size_t{100}, std::size_t{1000}}) {
    WindowedQuantiles w(10s, capacity);
    std::deque<std::tuple<TimePoint, double, bool>> window;  // the reference
    TimePoint now = t0;
    for (int i = 0; i < 6000; ++i) {
      now += std::chrono::milliseconds(rng() % 6);  // ~2,000 in a 10 s window
      // Mostly spread values, sometimes a run of equal ones.
      const double v =
          rng() % 4 == 0 ? 100.0 : static_cast<double>(rng() % (i % 500 < 250 ? 30 : 5000));
      const bool censored = rng() % 5 == 0;
      censored ? w.add_censored(v, now) : w.add(v, now);
      while (!window.empty() && now - std::get<0>(window.front()) >= 10s) window.pop_front();
      if (window.size() == capacity) window.pop_front();
      window.emplace_back(now, v, censored);
      if (i % 7 != 0) continue;
      std::vector<std::pair<double, bool>> points;
      std::vector<double> answered;
      for (const auto& [at, value, c] : window) {
        points.emplace_back(value, c);
        if (!c) answered.push_back(value);
      }
      ASSERT_EQ(w.count(now), window.size());
      ASSERT_EQ(w.censored(now), points.size() - answered.size());
      const std::vector<double> qs{0.0, 0.01, 0.5, 0.9, 0.95, 0.99, 1.0};
      const auto got = w.quantiles(qs, now);
      const auto observed = w.observed_quantiles(qs, now);
      for (std::size_t k = 0; k < qs.size(); ++k) {
        ASSERT_EQ(got[k], kaplan_meier(points, qs[k])) << "sample " << i << " q " << qs[k];
        ASSERT_EQ(observed[k], nearest_rank(answered, qs[k])) << "sample " << i << " q " << qs[k];
      }
    }
  }
}

}  // namespace
}  // namespace llmgate::routing

namespace llmgate::routing {
namespace {

TEST(FailureTracker, IsZeroWithNoHistory) {
  FailureTracker f(30s);
  EXPECT_DOUBLE_EQ(f.error_rate(t0), 0);
  EXPECT_EQ(f.consecutive_failures(), 0u);
}

TEST(FailureTracker, IsTheShareOfRecentAttemptsThatFailed) {
  FailureTracker f(30s);
  for (int i = 0; i < 3; ++i) f.record(true, t0);
  f.record(false, t0);
  EXPECT_DOUBLE_EQ(f.error_rate(t0), 0.75);
  EXPECT_EQ(f.consecutive_failures(), 0u);
}

TEST(FailureTracker, OldFailuresWeighLessThanNewSuccesses) {
  FailureTracker f(30s);
  f.record(true, t0);
  f.record(false, t0 + 30s);  // the failure now weighs e^-1
  double k = std::exp(-1.0);
  EXPECT_NEAR(f.error_rate(t0 + 30s), k / (k + 1), 1e-12);
  // With no new attempts the ratio stays what it was: both counters decay.
  EXPECT_NEAR(f.error_rate(t0 + 300s), k / (k + 1), 1e-12);
}

TEST(FailureTracker, CountsConsecutiveFailuresUntilASuccess) {
  FailureTracker f(30s);
  f.record(true, t0);
  f.record(true, t0 + 1s);
  f.record(true, t0 + 2s);
  EXPECT_EQ(f.consecutive_failures(), 3u);
  f.record(false, t0 + 3s);
  EXPECT_EQ(f.consecutive_failures(), 0u);
}

}  // namespace
}  // namespace llmgate::routing

namespace llmgate::routing {
namespace {

TEST(PrefillFit, KeepsThePriorUntilItSeesSizesThenLearnsTheSlope) {
  PrefillFit fit;
  EXPECT_DOUBLE_EQ(fit.slope(50), 50);
  // One size only (short prompts): no evidence of a slope, the prior holds.
  for (int i = 0; i < 50; ++i) fit.add(0.2, 300, 50);
  EXPECT_NEAR(fit.slope(50), 50, 1e-9);
  // Prompts from 1k to 40k tokens on a 100 ms/1k line: the fit's own slope.
  for (int i = 0; i < 200; ++i) {
    const double k = 1 + (i % 40);
    fit.add(k, 300 + 100 * k, 50);
  }
  EXPECT_NEAR(fit.slope(50), 100, 2);
  EXPECT_NEAR(fit.base(50), 300, 40);
  // A constant TTFT whatever the size (a provider with no prefill cost to
  // speak of): the slope goes to it, never below zero.
  PrefillFit flat;
  for (int i = 0; i < 300; ++i) flat.add(1 + (i % 30), 400, 50);
  EXPECT_LT(flat.slope(50), 2);
  EXPECT_GE(flat.slope(50), 0);
}

TEST(PrefillFit, ItsDoubtIsThePriorsShareOfAPredictionAwayFromTheSizesSeen) {
  PrefillFit fit;
  // Nothing seen: a 25k-token prompt's whole prefill at the prior is a guess.
  EXPECT_DOUBLE_EQ(fit.doubt_ms(25, 50), 25 * 50);
  EXPECT_TRUE(PrefillFit::guess(fit.doubt_ms(25, 50), 150));
  // Short prompts only: their size is known, a long one's prefill is not.
  for (int i = 0; i < 100; ++i) fit.add(0.1, 150, 50);
  EXPECT_NEAR(fit.doubt_ms(0.1, 50), 0, 1e-9);
  EXPECT_NEAR(fit.doubt_ms(25, 50), 24.9 * 50, 1e-6);
  EXPECT_FALSE(PrefillFit::guess(fit.doubt_ms(1, 50), 150));  // 45 ms: no guess
  // One answer at 25k tokens: the slope is the fit's own, the doubt small.
  fit.add(25, 2150, 50);
  EXPECT_NEAR(fit.slope(50), 80, 1);
  EXPECT_LT(fit.doubt_ms(25, 50), 50);
  EXPECT_FALSE(PrefillFit::guess(fit.doubt_ms(25, 50), 150));
  // Long prompts of one size only: the slope is the prior's, but the line
  // passes through their answers -- no doubt at that size.
  PrefillFit one_size;
  for (int i = 0; i < 20; ++i) one_size.add(25, 2150, 50);
  EXPECT_NEAR(one_size.doubt_ms(25, 50), 0, 1e-9);
  EXPECT_NEAR(one_size.base(50) + one_size.slope(50) * 25, 2150, 1e-6);
}

TEST(PrefillFit, AQueueingSpikeIsClippedNotTakenForPrefill) {
  PrefillFit fit;
  for (int i = 0; i < 200; ++i) fit.add(1 + (i % 20), 200 + 50 * (1 + (i % 20)), 50);
  const double before = fit.slope(50);
  fit.add(20, 60'000, 50);  // one 60 s first token at 20k tokens
  EXPECT_LT(fit.slope(50), before * 1.5);
  EXPECT_NEAR(before, 50, 2);
}

}  // namespace
}  // namespace llmgate::routing
