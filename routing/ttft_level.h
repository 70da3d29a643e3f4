// The TTFT level the router decides on: an estimate of a deployment's
// typical (median) first-token time that is robust to its spread and still
// follows a change within a few answers.
//
// TTFT is right-skewed (roughly lognormal: queueing, batching, prefill), so
// the level is kept in log space, where a sample's spread is symmetric and an
// outlier is one more point, not a new maximum:
//   - the level is a time-decayed mean of ln(sample) (weight 1 - exp(-dt/tau)
//     per sample, dt the time since the previous one, against the level's
//     mass since its start: the first samples after a start are averaged,
//     and samples in one instant weigh nothing), each sample's pull
//     clipped at kClip spreads (Huber), so for lognormal TTFT it reads the
//     median, and a rare 4x outlier moves it by a few percent at most;
//   - the spread is the time-decayed mean absolute deviation of ln(sample)
//     (scaled to a standard deviation) from the median of the newest
//     samples, from a prior of kPriorSpread, never under kMinSpread; a
//     sample the change detector capped (an outlier, or a change) is not
//     part of it, nor does a slow first answer that the level keeps for a
//     while make every answer after it a deviation (Spread);
//   - a change is detected by a two-sided CUSUM in spreads (allowance
//     kDrift, alarm at kAlarm, one sample's part capped at kMaxStep): a 5x
//     slowdown of a steady deployment alarms at its second slow sample (one
//     is an outlier; the PeakEWMA of Finagle/linkerd this replaced took the
//     first, and read a wide deployment at about its p95), a 30% step
//     within ~10, and noise about once in 10^4 samples. An alarm restarts
//     the level at the mean of the samples since the change point (the
//     start of the run's suffix most unlike the level: an outlier long
//     before the change is not part of it). A fall restarts it only when
//     kRecoveryRun samples since its change point span at least tau/20, so
//     a burst of fast answers in one instant cannot erase a recent slow one;
//   - with no samples at all the estimate is the prior (never "no data =
//     fast"); while none arrive it relaxes, with its own time constant,
//     toward a value the caller gives -- what the deployment's window of
//     samples still says, or the prior once that is empty (StatsRegistry) --
//     applied when the estimate is read, never stored (a deployment measured
//     steadily at s reads s).
// Evidence that must take effect at once whatever the noise — lower bounds
// (an attempt waited this long), failures in a row — raises the level
// directly (observe_at_least).
//
// Pure value type: time is passed in, nothing here reads a clock.
#pragma once

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <optional>

#include "routing/decay.h"

namespace llmgate::routing {

class TtftLevel {
 public:
  using TimePoint = std::chrono::steady_clock::time_point;
  using Seconds = std::chrono::duration<double>;

  TtftLevel(double prior, Seconds tau, Seconds relax_tau)
      : prior_(prior), tau_(tau.count()), relax_tau_(relax_tau.count()) {}

  // CUSUM allowance and alarm, in spreads (k = 0.5, h = 8: for normal noise
  // an average run of some 10^4 samples between false alarms; a shift of 1.5
  // spreads is seen in ~9 samples). One sample's part is capped at
  // kMaxStep, so no single answer alarms alone: two in a row do.
  static constexpr double kDrift = 0.5;
  static constexpr double kAlarm = 8.0;
  static constexpr double kMaxStep = 4.6;
  // The weight a level starts with, in time constants (as if its first
  // sample had been the mean of tau/200 of answers: 50 ms at the default
  // tau, so the answers that follow it within a second outweigh a slow
  // first one).
  static constexpr double kStartMass = 0.005;
  static constexpr double kClip = 2.0;         // a sample's pull on the level, in spreads
  static constexpr double kPriorSpread = 0.3;  // of ln(TTFT), before any deviation is seen
  static constexpr double kMinSpread = 0.05;   // a fixed-latency upstream is not noiseless
  // A fall needs this many samples in its run, spread over tau/20.
  static constexpr int kRecoveryRun = 3;
  // A fresh first token under this share of a level made of penalties, lower
  // bounds or stale samples restarts it (StatsRegistry).
  static constexpr double kRecoveryRatio = 0.5;

  void observe(double sample, TimePoint now) {
    const double lx = log_of(sample);
    if (!measured_) {
      spread_.add(lx, 0, spread(), /*counts=*/true);
      return start(lx, now);
    }
    const double sigma = spread();
    const double z = (lx - log_) / sigma;
    // The change detector, on the level as it was before this sample.
    if (track(hi_, hi_run_, std::min(z, kMaxStep), lx, now) && hi_ > kAlarm)
      return start(hi_run_, change(hi_run_, +1, sigma), now);
    if (track(lo_, lo_run_, std::min(-z, kMaxStep), lx, now) && lo_ > kAlarm) {
      const Change fall = change(lo_run_, -1, sigma);
      if (fall.n >= kRecoveryRun && Seconds(now - fall.since).count() >= tau_ / 20)
        return start(lo_run_, fall, now);
    }
    log_ += weight(now) * std::clamp(z, -kClip, kClip) * sigma;
    spread_.add(lx, decay(now), sigma, /*counts=*/std::abs(z) < kMaxStep);
    mark(now);
  }

  // A sample that moves the level by its time weight alone, outside the
  // change detector and unclipped: for evidence that should move it
  // gradually (an isolated failure's penalty, a first token that is mostly
  // prefill).
  void observe_decayed(double sample, TimePoint now) {
    const double lx = log_of(sample);
    if (!measured_) return start(lx, now);
    log_ += decay(now) * (lx - log_);
    mark(now);
  }

  // Starts over from `sample`, as if it were the first (the spread is kept:
  // it is the deployment's, not the level's).
  void restart(double sample, TimePoint now) {
    spread_.add(log_of(sample), 0, spread(), /*counts=*/true);
    start(log_of(sample), now);
  }

  // A lower bound (the attempt waited this long without a first token): may
  // raise the estimate (relaxed toward `toward`, as estimate()), at once,
  // never lower it. True when it did.
  bool observe_at_least(double bound, TimePoint now) {
    return observe_at_least(bound, now, prior_);
  }
  bool observe_at_least(double bound, TimePoint now, double toward) {
    if (bound <= estimate(now, toward)) return false;
    start(log_of(bound), now);
    return true;
  }

  // The estimate at `now`: the prior with no samples, otherwise the level
  // relaxed toward `toward` (by default the prior) by how long ago the last
  // sample was.
  double estimate(TimePoint now) const { return estimate(now, prior_); }
  double estimate(TimePoint now, double toward) const {
    if (!measured_) return prior_;
    const double keep = decay_weight(last_, now, relax_tau_);
    return toward + (std::exp(log_) - toward) * keep;
  }

  // The spread of ln(TTFT) (a standard deviation's worth).
  double spread() const { return spread_.value(); }

  // One attempt's TTFT known to exceed `wait` says the median is at least
  // the wait shortened by kBoundSpreads spreads (about its p98): a steady
  // deployment's almost the wait, a wide one's (sigma 0.5) 0.37 of it.
  static constexpr double kBoundSpreads = 2.0;
  static double median_bound(double wait, double spread) {
    return quantile(wait, spread, -kBoundSpreads);
  }

  // The quantile `spreads` spreads above a median of `median` (lognormal):
  // kP99Spreads gives the p99 (median_bound reads it at -kBoundSpreads).
  static constexpr double kP99Spreads = 2.326;
  static double quantile(double median, double spread, double spreads) {
    return median * std::exp(spreads * spread);
  }

  double prior() const { return prior_; }
  void set_prior(double prior) { prior_ = prior; }
  std::uint64_t samples() const { return samples_; }
  std::optional<TimePoint> last_sample() const {
    return measured_ ? std::optional<TimePoint>(last_) : std::nullopt;
  }

 private:
  // The spread: a time-decayed mean absolute deviation of ln(sample)
  // (scaled to a standard deviation) from a prior of kPriorSpread that
  // counts as one sample. Deviations are from the median of the newest
  // kCentreWindow samples, not from the level: after a slow first answer
  // (a cold start) the level keeps it for a while by its time weight, and
  // every answer after it would otherwise read as a deviation; they count
  // only once kMinCentreSamples make the median, each clipped at
  // kMaxDeviation spreads. A sample the change detector capped is an
  // outlier or a change, not the deployment's noise: it does not count.
  class Spread {
   public:
    double value() const { return std::max(kMinSpread, kMeanToSigma * deviation_); }
    // `decay` is the sample's time weight, `sigma` the spread before it.
    void add(double lx, double decay, double sigma, bool counts) {
      if (count_ >= kMinCentreSamples && counts) {
        const double dev = std::min(std::abs(lx - centre()), kMaxDeviation * sigma);
        const double w = std::max(decay, 1.0 / (static_cast<double>(deviations_) + 2));
        deviation_ += w * (dev - deviation_);
        ++deviations_;
      }
      window_[count_ % kCentreWindow] = lx;
      ++count_;
    }
    // After a change the centre is measured anew (the spread is kept: it
    // is the deployment's).
    void recentre() { count_ = 0; }

   private:
    static constexpr std::size_t kCentreWindow = 16;
    static constexpr std::size_t kMinCentreSamples = 3;
    static constexpr double kMaxDeviation = 2.5;
    // For normal noise the mean absolute deviation is sigma x sqrt(2/pi).
    static constexpr double kMeanToSigma = 1.2533141373155001;
    double centre() const {
      const std::size_t n = std::min(count_, kCentreWindow);
      std::array<double, kCentreWindow> v;
      std::copy_n(window_.begin(), n, v.begin());
      std::nth_element(v.begin(), v.begin() + n / 2, v.begin() + n);
      const double upper = v[n / 2];
      if (n % 2) return upper;
      return (upper + *std::max_element(v.begin(), v.begin() + n / 2)) / 2;
    }
    std::array<double, kCentreWindow> window_{};
    std::size_t count_ = 0;
    double deviation_ = kPriorSpread / kMeanToSigma;
    std::uint64_t deviations_ = 0;
  };
  // The samples since one side of the CUSUM left zero (the newest
  // kRunMemory of them: a change is in the recent ones).
  static constexpr int kRunMemory = 32;
  struct Run {
    struct Sample {
      double lx = 0;
      TimePoint at{};
    };
    std::array<Sample, kRunMemory> recent{};
    int n = 0;
    // The i-th newest stored sample (1: the newest).
    const Sample& at(int i) const { return recent[static_cast<std::size_t>((n - i) % kRunMemory)]; }
  };
  // Where a change began, and the level after it.
  struct Change {
    double lx = 0;  // mean of ln(sample) since the change
    int n = 0;      // samples since the change
    TimePoint since{};
  };

  static double log_of(double sample) { return std::log(std::max(sample, 1e-3)); }
  double decay(TimePoint now) const { return 1 - decay_weight(last_, now, tau_); }
  // A sample's share of the level: its time weight against the level's
  // mass (the decayed time weight of the samples in it since its start), so
  // that the first samples after a start are averaged, not decayed in, and
  // samples in one instant weigh nothing.
  double weight(TimePoint now) {
    const double a = decay(now);
    mass_ = mass_ * (1 - a) + a;
    return a / mass_;
  }
  // One side of the CUSUM: s = max(0, s + z - kDrift), and the run of
  // samples since it left zero. True while it is above zero.
  static bool track(double& s, Run& run, double z, double lx, TimePoint now) {
    s = std::max(0.0, s + z - kDrift);
    if (s <= 0) {
      run.n = 0;
      return false;
    }
    run.recent[static_cast<std::size_t>(run.n % kRunMemory)] = {lx, now};
    ++run.n;
    return true;
  }
  // The change point in a run that alarmed: not where the CUSUM left zero
  // (its steps are capped, so an earlier outlier and the small steps of the
  // samples after it can hold it above zero long before the change, and
  // their mean would be the new level) but the start of the run's suffix
  // most unlike the level (the largest n x mean^2 of its deviations): the
  // maximum-likelihood split for a shift of a known level. No older
  // sample's deviation counts for more than the newest's (or a CUSUM
  // step's), so an outlier cannot pull the split back to itself. `sign` is
  // +1 for a rise, -1 for a fall.
  Change change(const Run& run, double sign, double sigma) const {
    const int stored = std::min(run.n, kRunMemory);
    auto deviation = [&](int i) { return sign * (run.at(i).lx - log_); };
    const double cap = std::max(kMaxStep * sigma, deviation(1));
    Change best;
    double best_score = -1, deviations = 0, logs = 0;
    for (int i = 1; i <= stored; ++i) {
      const auto& sample = run.at(i);
      deviations += std::min(deviation(i), cap);
      logs += sample.lx;
      const double score = deviations > 0 ? deviations * deviations / i : 0;
      if (score > best_score) {
        best_score = score;
        best = {logs / i, i, sample.at};
      }
    }
    return best;
  }
  void start(double lx, TimePoint now, double mass = kStartMass) {
    log_ = lx;
    mass_ = mass;
    reset_runs();
    mark(now);
  }
  // A change: the level is the mean of the samples since it, with the
  // weight of the time they span; the spread's centre is the median of
  // them (the samples before it are of another level).
  void start(const Run& run, const Change& c, TimePoint now) {
    const double span = std::max(Seconds(now - c.since).count(), tau_ * kStartMass);
    spread_.recentre();
    for (int i = c.n; i >= 1; --i) spread_.add(run.at(i).lx, 0, 0, /*counts=*/false);
    start(c.lx, now, 1 - std::exp(-span / tau_));
  }
  // (A run is its count: the samples past it are never read.)
  void reset_runs() {
    hi_ = lo_ = 0;
    hi_run_.n = lo_run_.n = 0;
  }
  void mark(TimePoint now) {
    last_ = now;
    measured_ = true;
    ++samples_;
  }

  double prior_;
  double tau_;        // seconds
  double relax_tau_;  // seconds
  double log_ = 0;    // ln of the level
  double mass_ = 0;   // its weight, in (0, 1]: 1 - exp(-(time since its start) / tau)
  Spread spread_;
  double hi_ = 0, lo_ = 0;  // the CUSUM's two sides, in spreads
  Run hi_run_, lo_run_;
  // A plain time and a flag, not an optional: GCC 12 warns of a "maybe
  // uninitialized" optional once the estimator is inlined into a loop.
  TimePoint last_{};
  bool measured_ = false;
  std::uint64_t samples_ = 0;
};

}  // namespace llmgate::routing
