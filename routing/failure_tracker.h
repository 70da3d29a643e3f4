// Failure signals per deployment, for ejection and for the error rate shown
// on the routes table: a time-decayed error rate and the count of consecutive
// failures.
//
// The rate is a ratio of two exponentially decayed counters (failures and
// attempts, time constant `tau`), so it reads "the share of recent attempts
// that failed", forgets at the same speed whatever the traffic, and is 0 with
// no history. Pure value type: time is passed in.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>

#include "routing/decay.h"

namespace llmgate::routing {

class FailureTracker {
 public:
  using TimePoint = std::chrono::steady_clock::time_point;
  using Seconds = std::chrono::duration<double>;

  explicit FailureTracker(Seconds tau) : tau_(tau.count()) {}

  void record(bool failed, TimePoint now) {
    decay_to(now);
    attempts_ += 1;
    if (failed) {
      failures_ += 1;
      ++consecutive_failures_;
    } else {
      consecutive_failures_ = 0;
    }
  }

  double error_rate(TimePoint now) const {
    double k = decay_factor(now);
    double attempts = attempts_ * k;
    return attempts > 0 ? (failures_ * k) / attempts : 0.0;
  }
  std::uint32_t consecutive_failures() const { return consecutive_failures_; }

 private:
  double decay_factor(TimePoint now) const { return last_ ? decay_weight(*last_, now, tau_) : 1.0; }
  void decay_to(TimePoint now) {
    double k = decay_factor(now);
    attempts_ *= k;
    failures_ *= k;
    if (!last_ || now > *last_) last_ = now;
  }

  double tau_;
  double attempts_ = 0;
  double failures_ = 0;
  std::uint32_t consecutive_failures_ = 0;
  std::optional<TimePoint> last_;
};

}  // namespace llmgate::routing
