// GET /admin/routes: the live table the router works from, per public model
// and deployment — what the gateway has measured, each deployment's health
// state and its current score and rank under the model's policy — so a
// routing decision can be explained. JSON, or (?format=text) an aligned table
// that reads like an LLM speed leaderboard. Beast-free.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "config/config.h"
#include "routing/routing_state.h"

namespace llmgate::gateway {

// One deployment of a model with the rank and score the model's own policy
// gives it now (no exploration, no probe taken).
struct RankedDeployment {
  const config::Deployment* d;
  const config::Provider* p;
  routing::DeploymentStats s;
  routing::Availability health;
  std::optional<std::size_t> rank;  // 1-based position in the plan
  double score = 0;
  std::string skipped;  // why it would not be planned
};
std::vector<RankedDeployment> rank_deployments(const config::Config& cfg, const config::Model& m,
                                               routing::RoutingState& state,
                                               routing::Clock::time_point now);

std::string routes_json(const config::Config& cfg, routing::RoutingState& state);
std::string routes_text(const config::Config& cfg, routing::RoutingState& state);

}  // namespace llmgate::gateway
