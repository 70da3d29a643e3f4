#include <chrono>
#include <cmath>

#include <gtest/gtest.h>

#include "routing/failure_tracker.h"
#include "routing/peak_ewma.h"
#include "routing/windowed_quantiles.h"

namespace llmgate::routing {
namespace {

using namespace std::chrono_literals;
using TimePoint = std::chrono::steady_clock::time_point;
const TimePoint t0{std::chrono::seconds(1000)};

PeakEwma ttft() { return PeakEwma(/*prior=*/500, /*tau=*/10s, /*relax_tau=*/60s); }

TEST(PeakEwma, StartsAtThePriorNotAtZero) {
  auto e = ttft();
  EXPECT_DOUBLE_EQ(e.estimate(t0), 500);
  EXPECT_EQ(e.samples(), 0u);
}

TEST(PeakEwma, FirstSampleReplacesThePrior) {
  auto e = ttft();
  e.observe(120, t0);
  EXPECT_DOUBLE_EQ(e.estimate(t0), 120);
}

TEST(PeakEwma, ASlowerSampleTakesEffectAtOnce) {
  auto e = ttft();
  e.observe(100, t0);
  e.observe(900, t0 + 1s);
  EXPECT_DOUBLE_EQ(e.estimate(t0 + 1s), 900);
}

TEST(PeakEwma, FasterSamplesDecayInWithTau) {
  auto e = ttft();
  e.observe(1000, t0);
  e.observe(100, t0 + 10s);  // dt = tau: weight on the old value is e^-1
  // The old value first relaxes toward the prior for 10 s (relax tau 60 s).
  double relaxed = 500 + (1000 - 500) * std::exp(-10.0 / 60.0);
  double w = std::exp(-1.0);
  EXPECT_NEAR(e.estimate(t0 + 10s), relaxed * w + 100 * (1 - w), 1e-9);
}

TEST(PeakEwma, ABurstOfFastSamplesInOneInstantDoesNotEraseASlowOne) {
  auto e = ttft();
  e.observe(1000, t0);
  for (int i = 0; i < 100; ++i) e.observe(10, t0);
  EXPECT_DOUBLE_EQ(e.estimate(t0), 1000);
}

TEST(PeakEwma, StaleEstimatesRelaxTowardThePrior) {
  auto e = ttft();
  e.observe(2000, t0);
  EXPECT_NEAR(e.estimate(t0 + 60s), 500 + 1500 * std::exp(-1.0), 1e-9);
  EXPECT_NEAR(e.estimate(t0 + 3600s), 500, 1e-9);
  auto fast = ttft();
  fast.observe(50, t0);
  EXPECT_NEAR(fast.estimate(t0 + 3600s), 500, 1e-9);  // and a fast one is re-checked too
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
