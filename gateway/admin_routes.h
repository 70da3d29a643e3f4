// GET /admin/routes: the live table the router works from, per public model
// and deployment — what the gateway has measured, so a routing decision can be
// explained. Beast-free.
#pragma once

#include <string>

#include "config/config.h"
#include "routing/stats_registry.h"

namespace llmgate::gateway {

std::string routes_json(const config::Config& cfg, const routing::StatsRegistry& stats);

}  // namespace llmgate::gateway
