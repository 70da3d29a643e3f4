// The one exponential-decay rule the estimators share: how much of a value
// observed at `then` is left at `now` with time constant `tau` — exp(-dt/tau),
// 1 when no time has passed (or the clock went backwards).
#pragma once

#include <chrono>
#include <cmath>

namespace llmgate::routing {

inline double decay_weight(std::chrono::steady_clock::time_point then,
                           std::chrono::steady_clock::time_point now, double tau_seconds) {
  if (now <= then) return 1.0;
  return std::exp(-std::chrono::duration<double>(now - then).count() / tau_seconds);
}

}  // namespace llmgate::routing
