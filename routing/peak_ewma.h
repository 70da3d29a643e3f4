// A peak-sensitive, time-decayed moving average (Finagle/linkerd "PeakEWMA").
//
// Used for the TTFT estimate the router decides on:
//   - a sample above the current value takes effect at once (a provider that
//     just got slow looks slow on the very next decision);
//   - a sample below it decays in with weight 1 - exp(-dt/tau), where dt is
//     the time since the previous sample (so a burst of fast samples in one
//     instant cannot erase a recent slow one);
//   - a few samples in a row far below it (a recovery) restart it from them;
//   - with no samples at all the estimate is the prior (never "no data = fast");
//   - while no samples arrive the estimate relaxes toward the prior with its
//     own time constant, so a deployment that was slow an hour ago is tried
//     again instead of being judged on stale data forever. The relaxation is
//     applied only when the estimate is read, never stored: a new sample
//     decays in from the value the samples made, so a deployment measured
//     steadily at s reads s, not s pulled toward the prior on every sample.
//
// Pure value type: time is passed in, nothing here reads a clock.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>

#include "routing/decay.h"

namespace llmgate::routing {

class PeakEwma {
 public:
  using TimePoint = std::chrono::steady_clock::time_point;
  using Seconds = std::chrono::duration<double>;

  PeakEwma(double prior, Seconds tau, Seconds relax_tau)
      : prior_(prior), tau_(tau.count()), relax_tau_(relax_tau.count()) {}

  void observe(double sample, TimePoint now) {
    // Above what is read now (the peak rule): replaces it. Below: decays in,
    // unless it is the kRecoveryRun-th sample in a row under half the
    // estimate: a deployment that recovered (900 ms, then 150, 150, 150)
    // reads as it is now after a few answers, not after tau of decay.
    const double current = estimate(now);
    if (measured_ && sample < current) {
      if (sample < current * kRecoveryRatio) {
        if (low_run_ == 0) low_since_ = now;
        low_sum_ += sample;
        // Spread over time (tau / 20), so that a burst of answers in one
        // instant still cannot erase a recent slow one.
        const double span = std::chrono::duration<double>(now - low_since_).count();
        if (++low_run_ >= kRecoveryRun && span >= tau_ / 20) {
          restart(low_sum_ / low_run_, now);
          return;
        }
      } else {
        reset_run();
      }
      return observe_decayed(sample, now);
    }
    reset_run();
    value_ = sample;
    mark(now);
  }

  // Samples in a row under kRecoveryRatio x the estimate that restart it.
  static constexpr int kRecoveryRun = 3;
  static constexpr double kRecoveryRatio = 0.5;

  // A sample that decays in whichever side of the estimate it falls (no peak
  // rule): for evidence that should move the estimate gradually. It mixes
  // with the stored value, not the relaxed one (after a long silence its
  // weight is close to 1 anyway: exp(-dt/tau)).
  void observe_decayed(double sample, TimePoint now) {
    if (!measured_) {
      value_ = sample;
    } else {
      double w = decay_weight(last_, now, tau_);
      value_ = value_ * w + sample * (1 - w);
    }
    mark(now);
  }

  // Starts over from `sample`, as if it were the first: for a deployment
  // whose estimate holds only the penalties of its latest failures, not a
  // measurement of what it is now.
  void restart(double sample, TimePoint now) {
    reset_run();
    value_ = sample;
    mark(now);
  }

  // A lower bound (the attempt waited this long without a first token): may
  // raise the estimate, at once, never lower it. True when it did.
  bool observe_at_least(double bound, TimePoint now) {
    if (bound <= estimate(now)) return false;
    value_ = bound;
    mark(now);
    return true;
  }

  // The estimate at `now`: the prior with no samples, otherwise the value
  // relaxed toward the prior by how long ago the last sample was.
  double estimate(TimePoint now) const {
    if (!measured_) return prior_;
    double keep = decay_weight(last_, now, relax_tau_);
    return prior_ + (value_ - prior_) * keep;
  }

  double prior() const { return prior_; }
  void set_prior(double prior) { prior_ = prior; }
  std::uint64_t samples() const { return samples_; }
  std::optional<TimePoint> last_sample() const {
    return measured_ ? std::optional<TimePoint>(last_) : std::nullopt;
  }

 private:
  double prior_;
  double tau_;        // seconds
  double relax_tau_;  // seconds
  void reset_run() {
    low_run_ = 0;
    low_sum_ = 0;
  }
  void mark(TimePoint now) {
    last_ = now;
    measured_ = true;
    ++samples_;
  }

  double value_ = 0;
  // A plain time and a flag, not an optional: GCC 12 warns of a "maybe
  // uninitialized" optional once the estimator is inlined into a loop.
  TimePoint last_{};
  bool measured_ = false;
  std::uint64_t samples_ = 0;
  int low_run_ = 0;  // consecutive samples under kRecoveryRatio x the estimate
  double low_sum_ = 0;
  TimePoint low_since_{};  // the first of them
};

}  // namespace llmgate::routing
