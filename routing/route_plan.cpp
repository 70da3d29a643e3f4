#include "routing/route_plan.h"

namespace llmgate::routing {

RoutePlan make_plan(const config::Config& cfg, const config::Model& model) {
  RoutePlan plan;
  plan.candidates.reserve(model.deployments.size());
  for (const auto& d : model.deployments) {
    const config::Provider* p = cfg.find_provider(d.provider);
    if (p == nullptr) continue;  // config validation guarantees this does not happen
    plan.candidates.push_back(Candidate{&d, p, cfg.timeouts_for(*p)});
  }
  return plan;
}

}  // namespace llmgate::routing
