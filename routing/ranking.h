// The deployments of a model ranked as the model's own policy would plan
// them now (no exploration, no probe taken): the table /admin/routes shows
// and the llmgate_route_score / _rank gauges export, so a routing decision
// can be explained. Pure: a function of the config, the live state and the time.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "config/config.h"
#include "routing/routing_state.h"

namespace llmgate::routing {

struct RankedDeployment {
  const config::Deployment* d;
  const config::Provider* p;
  DeploymentStats s;
  Availability health;
  std::optional<std::size_t> rank;  // 1-based position in the plan
  double score = 0;
  std::string skipped;  // why it would not be planned
  std::string why;      // ranked: what the policy compared (explain_candidate)
};
std::vector<RankedDeployment> rank_deployments(const config::Config& cfg, const config::Model& m,
                                               RoutingState& state, Clock::time_point now);

}  // namespace llmgate::routing
