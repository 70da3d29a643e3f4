// Fuzzes per-request routing overrides: routing::parse_route_override (the
// body's "route" object and x-llmgate-* headers), then check_override and
// apply_override against a model of a fixed configuration.
//
// Input: the route JSON, optionally followed by a line "---" and then header
// lines "name: value" (names are lowercased, the first of a name wins, as
// Beast's find does). Text that is not JSON means "no route object" (null), so
// header-only inputs are still exercised. A pseudo-header "model: <name>"
// picks the configured model ("chat" by default).
#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "config/ascii.h"
#include "config/config.h"
#include "routing/route_override.h"
#include "tests/fuzz/fuzz_check.h"

namespace {

namespace config = llmgate::config;
namespace routing = llmgate::routing;
using nlohmann::json;

// "chat" has configured allow/deny lists and regions; "open" has none.
constexpr const char* kConfig = R"yaml(
providers:
  - name: groq
    base_url: https://api.groq.com/openai/v1
    region: us-east
  - name: together
    base_url: https://api.together.xyz/v1
    region: us-west
  - name: openai
    base_url: https://api.openai.com/v1
    region: us-east
  - name: euro
    base_url: http://127.0.0.1:9103/v1
    region: eu-west
models:
  - name: chat
    routing:
      policy: cost
      constraints:
        providers: [groq, together, euro]
        deny_providers: [together]
        regions: [us-east, eu-west]
    deployments:
      - { provider: groq, model: llama }
      - { provider: together, model: llama }
      - { provider: openai, model: gpt }
      - { provider: euro, model: llama-3.3-70b-instruct }
  - name: open
    deployments:
      - { provider: groq, model: llama-3.3-70b-versatile }
      - { provider: openai, model: gpt-4o-mini }
)yaml";

// LLMGATE_FUZZ_VERBOSE=1: print each input's outcome (for triage and seeds).
bool g_verbose = false;

std::optional<std::string> no_env(const std::string&) { return std::nullopt; }

const config::Config& fixed_config() {
  static const std::shared_ptr<const config::Config> cfg =
      config::parse_config(kConfig, "fuzz_route_override.yaml", &no_env);
  return *cfg;
}

bool contains(const std::vector<std::string>& names, std::string_view name) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

// Messages go into a 400 body and logs: printable ASCII only, bounded.
void check_message(const std::string& m) {
  FUZZ_CHECK(!m.empty());
  FUZZ_CHECK(m.size() < 1024);
  for (unsigned char c : m) FUZZ_CHECK(c >= 0x20 && c < 0x7f);
}

void check_names(const std::vector<std::string>& names) {
  FUZZ_CHECK(!names.empty() && names.size() <= routing::kMaxOverrideNames);
  for (const auto& n : names) FUZZ_CHECK(!n.empty() && n.size() <= routing::kMaxOverrideNameChars);
}

void check_parsed(const routing::RouteOverride& o) {
  if (o.max_ttft) {
    FUZZ_CHECK(o.max_ttft->count() >= 1 && o.max_ttft->count() <= routing::kMaxOverrideTtftMs);
  }
  if (o.ttft_percentile) {
    FUZZ_CHECK(*o.ttft_percentile == config::Percentile::kP50 ||
               *o.ttft_percentile == config::Percentile::kP95 ||
               *o.ttft_percentile == config::Percentile::kP99);
  }
  for (const auto& v : {o.max_output_price_per_1m, o.min_tps}) {
    if (v) FUZZ_CHECK(std::isfinite(*v) && *v >= 0);
  }
  if (o.max_attempts) {
    FUZZ_CHECK(*o.max_attempts >= 1 && *o.max_attempts <= routing::kMaxOverrideAttempts);
  }
  if (o.regions) check_names(*o.regions);
  if (o.providers) check_names(*o.providers);
  if (o.deny_providers) check_names(*o.deny_providers);
  if (!o.order.empty()) check_names(o.order);
}

void check_applied(const config::Model& model, const routing::RouteOverride& o) {
  const config::RoutingPolicy& base = model.routing;
  const config::Constraints& bc = base.constraints;
  for (auto scope : {routing::OverrideScope::kNarrow, routing::OverrideScope::kWiden}) {
    const config::RoutingPolicy p = routing::apply_override(base, o, scope);
    const config::Constraints& pc = p.constraints;
    // Denials only add up, whatever the scope.
    for (const auto& d : bc.deny_providers) FUZZ_CHECK(contains(pc.deny_providers, d));
    if (o.deny_providers) {
      for (const auto& d : *o.deny_providers) FUZZ_CHECK(contains(pc.deny_providers, d));
    }
    FUZZ_CHECK(p.policy == o.policy.value_or(base.policy));
    FUZZ_CHECK(pc.regions == o.regions.value_or(bc.regions));
    FUZZ_CHECK(pc.allow_providers == o.providers.value_or(bc.allow_providers));
    if (o.empty()) {
      FUZZ_CHECK(pc.deny_providers == bc.deny_providers);
      FUZZ_CHECK(pc.max_ttft == bc.max_ttft);
      FUZZ_CHECK(!pc.extra_max_ttft);
    }
    if (scope == routing::OverrideScope::kWiden) {
      FUZZ_CHECK(p.max_attempts == o.max_attempts.value_or(base.max_attempts));
      FUZZ_CHECK(p.allow_fallbacks == o.allow_fallbacks.value_or(base.allow_fallbacks));
      FUZZ_CHECK(p.hedging.enabled == o.hedge.value_or(base.hedging.enabled));
      continue;
    }
    // Narrow: nothing the operator limited is loosened.
    FUZZ_CHECK(p.max_attempts <= base.max_attempts);
    FUZZ_CHECK(!p.allow_fallbacks || base.allow_fallbacks);
    FUZZ_CHECK(!p.hedging.enabled || base.hedging.enabled);
    if (bc.max_output_price_per_1m) {
      FUZZ_CHECK(pc.max_output_price_per_1m &&
                 *pc.max_output_price_per_1m <= *bc.max_output_price_per_1m);
    }
    if (bc.min_tps) FUZZ_CHECK(pc.min_tps && *pc.min_tps >= *bc.min_tps);
    if (bc.max_ttft) {
      // The configured limit still holds: as it was, or a stricter one at a
      // percentile at least as high, or kept beside the request's.
      FUZZ_CHECK(pc.max_ttft);
      FUZZ_CHECK(*pc.max_ttft <= *bc.max_ttft);
      FUZZ_CHECK(static_cast<int>(pc.max_ttft_percentile) >=
                 static_cast<int>(bc.max_ttft_percentile));
    }
  }
}

void check_checked(const config::Model& model, const routing::RouteOverride& o) {
  const std::optional<std::string> problem = routing::check_override(o, model);
  if (g_verbose) std::fprintf(stderr, "%s\n", problem ? problem->c_str() : "accepted");
  if (problem) {
    check_message(*problem);
    FUZZ_CHECK(problem->rfind("route.", 0) == 0);
    return;
  }
  // Accepted: it names only this model's providers and deployments and stays
  // within the configured allow lists.
  std::vector<std::string> providers, ids;
  for (const auto& d : model.deployments) {
    providers.push_back(d.provider);
    ids.push_back(d.id());
  }
  const config::Constraints& c = model.routing.constraints;
  if (o.providers) {
    for (const auto& name : *o.providers) {
      FUZZ_CHECK(contains(providers, name));
      FUZZ_CHECK(c.allow_providers.empty() || contains(c.allow_providers, name));
      FUZZ_CHECK(!contains(c.deny_providers, name));
    }
  }
  if (o.deny_providers) {
    for (const auto& name : *o.deny_providers) FUZZ_CHECK(contains(providers, name));
  }
  for (const auto& name : o.order) FUZZ_CHECK(contains(providers, name) || contains(ids, name));
  if (o.regions && !c.regions.empty()) {
    for (const auto& r : *o.regions) FUZZ_CHECK(contains(c.regions, r));
  }
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  g_verbose = std::getenv("LLMGATE_FUZZ_VERBOSE") != nullptr;
  fixed_config();  // a bad fixed config aborts here, before any input
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  std::string_view route_text = input, header_text;
  if (auto sep = input.find("\n---\n"); sep != std::string_view::npos) {
    route_text = input.substr(0, sep);
    header_text = input.substr(sep + 5);
  }

  json route = json::parse(route_text, nullptr, /*allow_exceptions=*/false);
  if (route.is_discarded()) route = nullptr;

  std::map<std::string, std::string, std::less<>> headers;
  while (!header_text.empty()) {
    const auto nl = header_text.find('\n');
    const std::string_view line = header_text.substr(0, nl);
    header_text = nl == std::string_view::npos ? std::string_view() : header_text.substr(nl + 1);
    const auto colon = line.find(':');
    if (colon == std::string_view::npos) continue;
    std::string name(line.substr(0, colon));
    std::transform(name.begin(), name.end(), name.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    headers.emplace(std::move(name), std::string(line.substr(colon + 1)));  // first one wins
  }
  const routing::HeaderLookup lookup =
      [&headers](std::string_view name) -> std::optional<std::string> {
    if (auto it = headers.find(name); it != headers.end()) return it->second;
    return std::nullopt;
  };

  const config::Config& cfg = fixed_config();
  const config::Model* model = &cfg.models.front();
  if (auto it = headers.find("model"); it != headers.end()) {
    const std::string name(config::trim_whitespace(it->second));
    if (const config::Model* m = cfg.find_model(name)) model = m;
  }

  const auto parsed = routing::parse_route_override(route, lookup);
  if (const auto* message = std::get_if<std::string>(&parsed)) {
    if (g_verbose) std::fprintf(stderr, "rejected: %s\n", message->c_str());
    check_message(*message);
    FUZZ_CHECK(message->rfind("route", 0) == 0 || message->rfind("header x-llmgate-", 0) == 0);
    return 0;
  }
  const routing::RouteOverride& o = std::get<routing::RouteOverride>(parsed);
  check_parsed(o);
  check_applied(*model, o);
  check_checked(*model, o);
  return 0;
}
