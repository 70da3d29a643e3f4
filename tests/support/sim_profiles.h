// Simulator profiles the gateway tests share. Header-only.
#pragma once

#include "tools/sim/sim_profile.h"

namespace llmgate::testing {

// Answers at once: a 2 ms first token, `tokens` tokens at 5,000/s.
inline sim::Profile quick_profile(int tokens = 5) {
  sim::Profile p;
  p.ttft = {sim::Distribution::Kind::kFixed, 2, 0};
  p.tps = {sim::Distribution::Kind::kFixed, 5000, 0};
  p.output_tokens_min = p.output_tokens_max = tokens;
  return p;
}

}  // namespace llmgate::testing
