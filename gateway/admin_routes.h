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
#include "providers/wire_quirks.h"
#include "routing/routing_state.h"

namespace llmgate::gateway {

// `quirks`: what the gateway learnt of each deployment's wire format (none: nothing).
std::string routes_json(const config::Config& cfg, routing::RoutingState& state,
                        const providers::WireQuirks* quirks = nullptr);
std::string routes_text(const config::Config& cfg, routing::RoutingState& state,
                        const providers::WireQuirks* quirks = nullptr);

}  // namespace llmgate::gateway
