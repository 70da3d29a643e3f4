// GET /admin/routes: the live table the router works from, per public model
// and deployment — what the gateway has measured, each deployment's health
// state and its current score and rank under the model's policy — so a
// routing decision can be explained. JSON, or (?format=text) an aligned table
// that reads like an LLM speed leaderboard. Beast-free.
#pragma once

#include <optional>
#include <string>
#include <string_view>
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

// `s` in a column `width` bytes wide: as it is when it fits, else cut (at a
// UTF-8 character boundary) and ended with "...", so a long name never reads
// as a shorter one.
std::string fit_column(std::string_view s, std::size_t width);

// What the text table's columns mean (its last lines).
extern const char* const kRoutesTextLegend;

}  // namespace llmgate::gateway
