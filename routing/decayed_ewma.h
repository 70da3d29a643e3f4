// A plain time-decayed moving average: each sample enters with weight
// 1 - exp(-dt/tau), dt being the time since the previous sample. Used for
// output speed, where (unlike TTFT) there is no reason to favour either side.
// Pure value type: time is passed in.
#pragma once

#include <chrono>
#include <optional>

#include "routing/decay.h"

namespace llmgate::routing {

class DecayedEwma {
 public:
  using TimePoint = std::chrono::steady_clock::time_point;
  using Seconds = std::chrono::duration<double>;

  explicit DecayedEwma(Seconds tau) : tau_(tau.count()) {}

  void observe(double sample, TimePoint now) {
    if (!value_) {
      value_ = sample;
    } else {
      double w = decay_weight(last_, now, tau_);
      *value_ = *value_ * w + sample * (1 - w);
    }
    if (now > last_) last_ = now;
  }
  std::optional<double> value() const { return value_; }

 private:
  double tau_;
  std::optional<double> value_;
  TimePoint last_{};
};

}  // namespace llmgate::routing
