// Per-request routing overrides: a `route` object in the request body and
// x-llmgate-* headers, validated into one RouteOverride and applied over the
// model's configured RoutingPolicy.
//
//   {"model": "chat", "messages": [...],
//    "route": {"policy": "cost", "max_ttft_ms": 800, "order": ["groq"]}}
//   x-llmgate-policy: cost          x-llmgate-order: groq, together
//
// A header wins over the same field in the body. Every problem becomes one
// message for an OpenAI-shaped 400 that names the field ("route.max_ttft_ms:
// ...", "header x-llmgate-regions: ..."); client text in messages is quoted,
// escaped and cut to 64 characters.
//
// A request can only narrow what the operator configured: check_override()
// rejects providers or regions outside the model's configured allow lists,
// and apply_override() combines every limit so that the stricter wins (unless
// the caller's key may widen them: OverrideScope::kWiden).
#pragma once

#include <chrono>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "config/config.h"

namespace llmgate::routing {

struct RouteOverride {
  std::optional<config::Policy> policy;
  std::optional<std::chrono::milliseconds> max_ttft;
  std::optional<config::Percentile> ttft_percentile;
  std::optional<double> max_output_price_per_1m;
  std::optional<double> min_tps;
  std::optional<std::vector<std::string>> regions, providers, deny_providers;
  // Preferred providers or deployment ids ("groq" or "groq/llama-3.3-70b"),
  // first = most preferred. Empty = no preference.
  std::vector<std::string> order;
  std::optional<bool> allow_fallbacks;
  std::optional<bool> hedge;
  std::optional<unsigned> max_attempts;

  bool empty() const;
};

// Limits on what a request may ask for.
inline constexpr std::int64_t kMaxOverrideTtftMs = 600'000;
inline constexpr unsigned kMaxOverrideAttempts = 10;
inline constexpr std::size_t kMaxOverrideNames = 32;
inline constexpr std::size_t kMaxOverrideNameChars = 200;

// Looks a request header up by its lowercase name; nullopt if absent.
using HeaderLookup = std::function<std::optional<std::string>(std::string_view lowercase_name)>;

// `route` is the value of the body's "route" key (nullptr if absent). Returns
// the override, or the message for a 400, e.g.
//   route.policy: unknown policy "fastest" (expected one of latency, ...)
//   route.max_ttft_ms: must be a positive integer (milliseconds)
//   route: unknown key "polcy" (did you mean "policy"?)
//   header x-llmgate-regions: must be a comma-separated list of names
std::variant<RouteOverride, std::string> parse_route_override(const nlohmann::json& route,
                                                              const HeaderLookup& headers);

// How a request's limits combine with the model's configured ones.
enum class OverrideScope {
  kNarrow,  // the stricter wins, field by field (the default for every caller)
  kWiden,   // the request's value replaces the configured one (a key with
            // allow_overrides: true); regions and providers still stay inside
            // the configured lists (check_override), deny lists still add up
};

// The model's policy with the override applied, field by field (the table in
// docs/routing.md, "Per-request overrides"). Narrowing: price cap and
// max_attempts take the lower, min_tps the higher, a TTFT limit the stricter
// (or both, at different percentiles), hedging and fallbacks stay on only if
// both say so, deny_providers add up, regions and providers replace empty
// configured lists (check_override keeps them inside non-empty ones). The
// policy itself is a preference, not a limit: the request's replaces the
// configured one. `order` is not part of a RoutingPolicy: the caller applies
// it to the plan.
config::RoutingPolicy apply_override(const config::RoutingPolicy& base, const RouteOverride& o,
                                     OverrideScope scope = OverrideScope::kNarrow);

// Names in providers / deny_providers must be providers of this model's
// deployments, names in order providers or deployment ids; providers and
// regions must lie within the model's configured allow lists (when it has
// them). Returns a message such as
//   route.order[0]: model "chat" has no deployment on provider "grok" (did you mean "groq"?)
// or nullopt.
std::optional<std::string> check_override(const RouteOverride& o, const config::Model& model);

}  // namespace llmgate::routing
