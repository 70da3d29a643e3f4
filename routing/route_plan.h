// A plan: the ordered candidates for one request, each with its deadlines.
//
// Today the plan is the model's deployments in configured order. The
// latency-aware router replaces make_plan() — the choice — and leaves the
// attempt machinery in gateway/ untouched.
#pragma once

#include <vector>

#include "config/config.h"

namespace llmgate::routing {

struct Candidate {
  const config::Deployment* deployment = nullptr;
  const config::Provider* provider = nullptr;
  config::Timeouts timeouts;  // provider overrides merged over defaults
};

struct RoutePlan {
  std::vector<Candidate> candidates;
};

// `model` must belong to `cfg`; pointers in the plan live as long as `cfg`.
RoutePlan make_plan(const config::Config& cfg, const config::Model& model);

}  // namespace llmgate::routing
