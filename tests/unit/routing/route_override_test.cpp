#include "routing/route_override.h"

#include <gtest/gtest.h>

#include <map>

namespace llmgate::routing {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;
using Names = std::vector<std::string>;

HeaderLookup headers(std::map<std::string, std::string> values) {
  return [values = std::move(values)](std::string_view name) -> std::optional<std::string> {
    auto it = values.find(std::string(name));
    if (it == values.end()) return std::nullopt;
    return it->second;
  };
}
const HeaderLookup kNoHeaders = headers({});

RouteOverride parsed(const json& route, const HeaderLookup& h = kNoHeaders) {
  auto result = parse_route_override(route, h);
  if (auto* message = std::get_if<std::string>(&result)) {
    ADD_FAILURE() << "unexpected error: " << *message;
    return {};
  }
  return std::get<RouteOverride>(result);
}

std::string error(const json& route, const HeaderLookup& h = kNoHeaders) {
  auto result = parse_route_override(route, h);
  if (auto* message = std::get_if<std::string>(&result)) return *message;
  return "(no error)";
}

TEST(RouteOverride, NothingGivenIsEmpty) {
  EXPECT_TRUE(parsed(nullptr).empty());
  EXPECT_TRUE(parsed(json::object()).empty());
  EXPECT_TRUE(parsed(nullptr, HeaderLookup()).empty());
  EXPECT_TRUE(parsed(nullptr, headers({{"x-other", "1"}})).empty());
}

TEST(RouteOverride, ReadsEveryBodyField) {
  RouteOverride o = parsed(json::parse(R"({
    "policy": "cost", "max_ttft_ms": 800, "ttft_percentile": "p99",
    "max_output_price_per_1m": 2.5, "min_tps": 40, "regions": ["eu-west"],
    "providers": ["groq", "together"], "deny_providers": ["openai"],
    "order": ["together/llama", "groq"], "allow_fallbacks": false, "hedge": true,
    "max_attempts": 2})"));
  EXPECT_EQ(o.policy, config::Policy::kCost);
  EXPECT_EQ(o.max_ttft, 800ms);
  EXPECT_EQ(o.ttft_percentile, config::Percentile::kP99);
  EXPECT_EQ(o.max_output_price_per_1m, 2.5);
  EXPECT_EQ(o.min_tps, 40.0);
  EXPECT_EQ(o.regions, Names{"eu-west"});
  EXPECT_EQ(o.providers, (Names{"groq", "together"}));
  EXPECT_EQ(o.deny_providers, Names{"openai"});
  EXPECT_EQ(o.order, (Names{"together/llama", "groq"}));
  EXPECT_EQ(o.allow_fallbacks, false);
  EXPECT_EQ(o.hedge, true);
  EXPECT_EQ(o.max_attempts, 2u);
  EXPECT_FALSE(o.empty());
}

TEST(RouteOverride, ReadsEveryHeader) {
  RouteOverride o = parsed(nullptr, headers({
                                        {"x-llmgate-policy", "round_robin"},
                                        {"x-llmgate-max-ttft-ms", " 1500 "},
                                        {"x-llmgate-ttft-percentile", "P50"},
                                        {"x-llmgate-max-price", "0.6"},
                                        {"x-llmgate-min-tps", "100"},
                                        {"x-llmgate-regions", "us-east"},
                                        {"x-llmgate-providers", " groq ,together"},
                                        {"x-llmgate-deny-providers", "openai"},
                                        {"x-llmgate-order", "together, groq/llama"},
                                        {"x-llmgate-allow-fallbacks", "TRUE"},
                                        {"x-llmgate-hedge", "false"},
                                        {"x-llmgate-max-attempts", "10"},
                                    }));
  EXPECT_EQ(o.policy, config::Policy::kRoundRobin);
  EXPECT_EQ(o.max_ttft, 1500ms);
  EXPECT_EQ(o.ttft_percentile, config::Percentile::kP50);
  EXPECT_EQ(o.max_output_price_per_1m, 0.6);
  EXPECT_EQ(o.min_tps, 100.0);
  EXPECT_EQ(o.regions, Names{"us-east"});
  EXPECT_EQ(o.providers, (Names{"groq", "together"}));
  EXPECT_EQ(o.deny_providers, Names{"openai"});
  EXPECT_EQ(o.order, (Names{"together", "groq/llama"}));
  EXPECT_EQ(o.allow_fallbacks, true);
  EXPECT_EQ(o.hedge, false);
  EXPECT_EQ(o.max_attempts, 10u);
}

TEST(RouteOverride, HeadersWinOverTheBodyFieldByField) {
  RouteOverride o =
      parsed(json{{"policy", "cost"}, {"max_attempts", 2}, {"order", json::array({"groq"})}},
             headers({{"x-llmgate-policy", "latency"}, {"x-llmgate-order", "together"}}));
  EXPECT_EQ(o.policy, config::Policy::kLatency);
  EXPECT_EQ(o.order, Names{"together"});
  EXPECT_EQ(o.max_attempts, 2u);  // no header: the body's value
}

TEST(RouteOverride, AcceptsEveryPercentileSpelling) {
  EXPECT_EQ(parsed(json{{"ttft_percentile", 50}}).ttft_percentile, config::Percentile::kP50);
  EXPECT_EQ(parsed(json{{"ttft_percentile", "p95"}}).ttft_percentile, config::Percentile::kP95);
  EXPECT_EQ(parsed(nullptr, headers({{"x-llmgate-ttft-percentile", "99"}})).ttft_percentile,
            config::Percentile::kP99);
}

TEST(RouteOverride, AcceptsTheLimitsOfEachRange) {
  EXPECT_EQ(parsed(json{{"max_ttft_ms", 1}}).max_ttft, 1ms);
  EXPECT_EQ(parsed(json{{"max_ttft_ms", 600000}}).max_ttft, 600000ms);
  EXPECT_EQ(parsed(json{{"max_attempts", 1}}).max_attempts, 1u);
  EXPECT_EQ(parsed(json{{"max_output_price_per_1m", 0}}).max_output_price_per_1m, 0.0);
  EXPECT_EQ(parsed(json{{"min_tps", 0.5}}).min_tps, 0.5);
  Names many(32, "x");
  EXPECT_EQ(parsed(json{{"regions", many}}).regions, many);
  Names longest{std::string(200, 'r')};
  EXPECT_EQ(parsed(json{{"order", longest}}).order, longest);
}

struct BadBody {
  const char* route;  // JSON text
  const char* message;
};
void PrintTo(const BadBody& b, std::ostream* os) { *os << b.route; }

class RouteOverrideBadBody : public testing::TestWithParam<BadBody> {};

TEST_P(RouteOverrideBadBody, IsRejectedWithTheFieldNamed) {
  EXPECT_EQ(error(json::parse(GetParam().route)), GetParam().message);
}

const std::string kBadPolicy =
    "route.policy: unknown policy \"fastest\" (expected one of latency, throughput, e2e, cost, "
    "balanced, ordered, round_robin, random)";
const std::string kNames = "must be an array of 1 to 32 names";
const std::string kName = "must be a non-empty string of at most 200 characters";

INSTANTIATE_TEST_SUITE_P(
    Matrix, RouteOverrideBadBody,
    testing::Values(
        BadBody{R"("cost")", "route: must be an object"},
        BadBody{R"([1])", "route: must be an object"},
        BadBody{R"({"polcy": "cost"})", R"(route: unknown key "polcy" (did you mean "policy"?))"},
        BadBody{R"({"zzz": 1})", R"(route: unknown key "zzz")"},
        BadBody{R"({"policy": "fastest"})", kBadPolicy.c_str()},
        BadBody{R"({"policy": 1})",
                "route.policy: must be one of latency, throughput, e2e, cost, balanced, ordered, "
                "round_robin, random"},
        BadBody{R"({"max_ttft_ms": 0})",
                "route.max_ttft_ms: must be a positive integer (milliseconds)"},
        BadBody{R"({"max_ttft_ms": -5})",
                "route.max_ttft_ms: must be a positive integer (milliseconds)"},
        BadBody{R"({"max_ttft_ms": 1.5})",
                "route.max_ttft_ms: must be a positive integer (milliseconds)"},
        BadBody{R"({"max_ttft_ms": "800"})",
                "route.max_ttft_ms: must be a positive integer (milliseconds)"},
        BadBody{R"({"max_ttft_ms": 600001})",
                "route.max_ttft_ms: must be at most 600000 (milliseconds)"},
        BadBody{R"({"max_ttft_ms": 18446744073709551615})",
                "route.max_ttft_ms: must be at most 600000 (milliseconds)"},
        BadBody{R"({"ttft_percentile": 90})",
                R"(route.ttft_percentile: must be "p50", "p95" or "p99")"},
        BadBody{R"({"ttft_percentile": "95"})",
                R"(route.ttft_percentile: must be "p50", "p95" or "p99")"},
        BadBody{R"({"ttft_percentile": "p9"})",
                R"(route.ttft_percentile: must be "p50", "p95" or "p99")"},
        BadBody{R"({"max_output_price_per_1m": -1})",
                "route.max_output_price_per_1m: must be a number >= 0 (USD per 1M output tokens)"},
        BadBody{R"({"max_output_price_per_1m": "1"})",
                "route.max_output_price_per_1m: must be a number >= 0 (USD per 1M output tokens)"},
        BadBody{R"({"min_tps": true})", "route.min_tps: must be a number >= 0 (tokens per second)"},
        BadBody{R"({"regions": "eu"})", "route.regions: must be an array of 1 to 32 names"},
        BadBody{R"({"providers": []})", "route.providers: must be an array of 1 to 32 names"},
        BadBody{R"({"deny_providers": ["a", ""]})",
                "route.deny_providers[1]: must be a non-empty string of at most 200 characters"},
        BadBody{R"({"order": ["a", 1]})",
                "route.order[1]: must be a non-empty string of at most 200 characters"},
        BadBody{R"({"allow_fallbacks": "false"})", "route.allow_fallbacks: must be true or false"},
        BadBody{R"({"hedge": 1})", "route.hedge: must be true or false"},
        BadBody{R"({"max_attempts": 0})", "route.max_attempts: must be an integer from 1 to 10"},
        BadBody{R"({"max_attempts": 11})", "route.max_attempts: must be an integer from 1 to 10"},
        BadBody{R"({"max_attempts": 2.0})",
                "route.max_attempts: must be an integer from 1 to 10"}));

TEST(RouteOverride, RejectsListsThatAreTooLongOrHaveLongNames) {
  EXPECT_EQ(error(json{{"regions", Names(33, "x")}}), "route.regions: " + kNames);
  EXPECT_EQ(error(json{{"order", Names{"a", std::string(201, 'x')}}}), "route.order[1]: " + kName);
}

struct BadHeader {
  const char* name;
  const char* value;
  const char* message;
};
void PrintTo(const BadHeader& h, std::ostream* os) { *os << h.name << ": " << h.value; }

class RouteOverrideBadHeader : public testing::TestWithParam<BadHeader> {};

TEST_P(RouteOverrideBadHeader, IsRejectedWithTheHeaderNamed) {
  const BadHeader& p = GetParam();
  EXPECT_EQ(error(nullptr, headers({{p.name, p.value}})),
            "header " + std::string(p.name) + ": " + p.message);
}

INSTANTIATE_TEST_SUITE_P(
    Matrix, RouteOverrideBadHeader,
    testing::Values(
        BadHeader{"x-llmgate-policy", "",
                  "unknown policy \"\" (expected one of latency, throughput, e2e, cost, balanced, "
                  "ordered, round_robin, random)"},
        BadHeader{"x-llmgate-max-ttft-ms", "+5", "must be a positive integer (milliseconds)"},
        BadHeader{"x-llmgate-max-ttft-ms", "-5", "must be a positive integer (milliseconds)"},
        BadHeader{"x-llmgate-max-ttft-ms", "800ms", "must be a positive integer (milliseconds)"},
        BadHeader{"x-llmgate-max-ttft-ms", "1 000", "must be a positive integer (milliseconds)"},
        BadHeader{"x-llmgate-max-ttft-ms", "99999999999999999999999",
                  "must be at most 600000 (milliseconds)"},
        BadHeader{"x-llmgate-ttft-percentile", "p90", R"(must be "p50", "p95" or "p99")"},
        BadHeader{"x-llmgate-ttft-percentile", "p", R"(must be "p50", "p95" or "p99")"},
        BadHeader{"x-llmgate-max-price", "cheap",
                  "must be a number >= 0 (USD per 1M output tokens)"},
        BadHeader{"x-llmgate-max-price", "-0.5",
                  "must be a number >= 0 (USD per 1M output tokens)"},
        BadHeader{"x-llmgate-max-price", "inf", "must be a number >= 0 (USD per 1M output tokens)"},
        BadHeader{"x-llmgate-max-price", "nan", "must be a number >= 0 (USD per 1M output tokens)"},
        BadHeader{"x-llmgate-min-tps", "1e999", "must be a number >= 0 (tokens per second)"},
        BadHeader{"x-llmgate-regions", "", "must be a comma-separated list of names"},
        BadHeader{"x-llmgate-regions", "eu,,us", "must be a comma-separated list of names"},
        BadHeader{"x-llmgate-providers", "groq,", "must be a comma-separated list of names"},
        BadHeader{"x-llmgate-deny-providers", " , ", "must be a comma-separated list of names"},
        BadHeader{"x-llmgate-allow-fallbacks", "yes", "must be true or false"},
        BadHeader{"x-llmgate-hedge", "1", "must be true or false"},
        BadHeader{"x-llmgate-max-attempts", "0", "must be an integer from 1 to 10"},
        BadHeader{"x-llmgate-max-attempts", "3.0", "must be an integer from 1 to 10"}));

TEST(RouteOverride, RejectsHeaderListsThatAreTooLongOrHaveLongNames) {
  std::string many = "x";
  for (int i = 1; i < 32; ++i) many += ",x";
  EXPECT_EQ(parsed(nullptr, headers({{"x-llmgate-order", many}})).order.size(), 32u);
  EXPECT_EQ(error(nullptr, headers({{"x-llmgate-order", many + ",x"}})),
            "header x-llmgate-order: must be a comma-separated list of names");
  EXPECT_EQ(error(nullptr, headers({{"x-llmgate-order", "a," + std::string(201, 'b')}})),
            "header x-llmgate-order: must be a comma-separated list of names");
}

TEST(RouteOverride, MessagesEchoLittleAndNoControlBytesOfTheClientsText) {
  const std::string key = "k\r\nx-injected: 1" + std::string(5000, 'k');
  const std::string message = error(json{{key, 1}});
  EXPECT_LT(message.size(), 120u) << message;
  EXPECT_EQ(message.find('\n'), std::string::npos);
  EXPECT_NE(message.find("k\\x0d\\x0ax-injected"), std::string::npos) << message;

  const std::string policy =
      error(nullptr, headers({{"x-llmgate-policy", std::string(5000, 'p')}}));
  EXPECT_LT(policy.size(), 250u) << policy;
}

TEST(RouteOverride, BodyErrorsComeBeforeHeaderErrors) {
  EXPECT_EQ(error(json{{"hedge", "x"}}, headers({{"x-llmgate-hedge", "x"}})),
            "route.hedge: must be true or false");
}

// ---- apply_override ----------------------------------------------------------

config::RoutingPolicy base_policy() {
  config::RoutingPolicy p;
  p.policy = config::Policy::kLatency;
  p.constraints.max_output_price_per_1m = 10;
  p.constraints.regions = {"us-east", "eu-west"};
  p.constraints.deny_providers = {"openai"};
  p.hedging.delay = 300ms;
  p.max_attempts = 3;
  p.typical_output_tokens = 512;
  return p;
}

TEST(RouteOverride, AnEmptyOverrideChangesNothing) {
  const config::RoutingPolicy base = base_policy();
  const config::RoutingPolicy p = apply_override(base, RouteOverride{});
  EXPECT_EQ(p.policy, base.policy);
  EXPECT_EQ(p.constraints.max_output_price_per_1m, 10.0);
  EXPECT_EQ(p.constraints.regions, base.constraints.regions);
  EXPECT_EQ(p.constraints.deny_providers, base.constraints.deny_providers);
  EXPECT_FALSE(p.hedging.enabled);
  EXPECT_EQ(p.max_attempts, 3u);
  EXPECT_TRUE(p.allow_fallbacks);
}

RouteOverride every_field() {
  RouteOverride o;
  o.policy = config::Policy::kThroughput;
  o.max_ttft = 700ms;
  o.ttft_percentile = config::Percentile::kP50;
  o.min_tps = 80;
  o.max_output_price_per_1m = 500;
  o.regions = Names{"eu-west"};
  o.providers = Names{"groq"};
  o.deny_providers = Names{"together", "openai"};
  o.allow_fallbacks = false;
  o.hedge = true;
  o.max_attempts = 5;
  return o;
}

TEST(RouteOverride, AKeyAllowedToWidenReplacesEachField) {
  const config::RoutingPolicy p =
      apply_override(base_policy(), every_field(), routing::OverrideScope::kWiden);
  EXPECT_EQ(p.policy, config::Policy::kThroughput);
  EXPECT_EQ(p.constraints.max_ttft, 700ms);
  EXPECT_EQ(p.constraints.max_ttft_percentile, config::Percentile::kP50);
  EXPECT_EQ(p.constraints.max_output_price_per_1m, 500.0);
  EXPECT_EQ(p.constraints.min_tps, 80.0);
  EXPECT_EQ(p.constraints.regions, Names{"eu-west"});
  EXPECT_EQ(p.constraints.allow_providers, Names{"groq"});
  // Denials add up even then: a request cannot let a denied provider back in.
  EXPECT_EQ(p.constraints.deny_providers, (Names{"openai", "together"}));
  EXPECT_FALSE(p.allow_fallbacks);
  EXPECT_TRUE(p.hedging.enabled);
  EXPECT_EQ(p.hedging.delay, 300ms);
  EXPECT_EQ(p.max_attempts, 5u);
  EXPECT_EQ(p.typical_output_tokens, 512);
}

TEST(RouteOverride, ARequestCannotLoosenTheConfiguredLimits) {
  config::RoutingPolicy base = base_policy();
  base.max_attempts = 1;
  base.constraints.min_tps = 100;
  const config::RoutingPolicy p = apply_override(base, every_field());
  EXPECT_EQ(p.constraints.max_output_price_per_1m, 10.0) << "a $500/M cap must not replace $10/M";
  EXPECT_EQ(p.max_attempts, 1u) << "max_attempts: 5 must not raise a configured 1";
  EXPECT_FALSE(p.hedging.enabled) << "hedge: true must not turn on hedging the operator left off";
  EXPECT_EQ(p.constraints.min_tps, 100.0);
  // Narrowing requests do narrow.
  EXPECT_FALSE(p.allow_fallbacks);
  EXPECT_EQ(p.constraints.regions, Names{"eu-west"});
  EXPECT_EQ(p.constraints.deny_providers, (Names{"openai", "together"}));
  EXPECT_EQ(p.policy, config::Policy::kThroughput);  // a preference, not a limit
}

TEST(RouteOverride, ARequestTightensTheConfiguredLimits) {
  config::RoutingPolicy base = base_policy();
  base.hedging.enabled = true;
  RouteOverride o;
  o.max_output_price_per_1m = 2;
  o.min_tps = 40;
  o.max_attempts = 2;
  o.hedge = false;
  const config::RoutingPolicy p = apply_override(base, o);
  EXPECT_EQ(p.constraints.max_output_price_per_1m, 2.0);
  EXPECT_EQ(p.constraints.min_tps, 40.0);
  EXPECT_EQ(p.max_attempts, 2u);
  EXPECT_FALSE(p.hedging.enabled);
  EXPECT_FALSE(p.hedging.on_stall) << "hedge: false means no hedge at all, not even on a stall";
  EXPECT_TRUE(apply_override(base, RouteOverride{}).hedging.on_stall);
  EXPECT_FALSE(apply_override(base, o, routing::OverrideScope::kWiden).hedging.on_stall);
}

TEST(RouteOverride, TtftLimitsCombineToTheStricter) {
  config::RoutingPolicy base = base_policy();
  base.constraints.max_ttft = 800ms;
  base.constraints.max_ttft_percentile = config::Percentile::kP95;
  auto with = [&](std::optional<std::chrono::milliseconds> ms,
                  std::optional<config::Percentile> at) {
    RouteOverride o;
    o.max_ttft = ms;
    o.ttft_percentile = at;
    return apply_override(base, o).constraints;
  };
  // Same percentile: the lower limit.
  EXPECT_EQ(with(2000ms, std::nullopt).max_ttft, 800ms);
  EXPECT_EQ(with(500ms, std::nullopt).max_ttft, 500ms);
  // A higher percentile with a limit no higher is stricter on both counts.
  auto c = with(700ms, config::Percentile::kP99);
  EXPECT_EQ(c.max_ttft, 700ms);
  EXPECT_EQ(c.max_ttft_percentile, config::Percentile::kP99);
  EXPECT_FALSE(c.extra_max_ttft);
  // A lower percentile with a limit no lower is looser: the configured one stays.
  c = with(900ms, config::Percentile::kP50);
  EXPECT_EQ(c.max_ttft, 800ms);
  EXPECT_EQ(c.max_ttft_percentile, config::Percentile::kP95);
  EXPECT_FALSE(c.extra_max_ttft);
  // Neither stricter (p50 under 300 ms vs p95 under 800 ms): both hold.
  c = with(300ms, config::Percentile::kP50);
  EXPECT_EQ(c.max_ttft, 800ms);
  EXPECT_EQ(c.extra_max_ttft, 300ms);
  EXPECT_EQ(c.extra_max_ttft_percentile, config::Percentile::kP50);
  // A percentile alone only moves the configured limit up the tail.
  EXPECT_EQ(with(std::nullopt, config::Percentile::kP50).max_ttft_percentile,
            config::Percentile::kP95);
  EXPECT_EQ(with(std::nullopt, config::Percentile::kP99).max_ttft_percentile,
            config::Percentile::kP99);
  // No configured limit: the request's applies.
  base.constraints.max_ttft.reset();
  c = with(300ms, config::Percentile::kP50);
  EXPECT_EQ(c.max_ttft, 300ms);
  EXPECT_EQ(c.max_ttft_percentile, config::Percentile::kP50);
}

// ---- check_override ----------------------------------------------------------

config::Model chat_model() {
  config::Model m;
  m.name = "chat";
  for (auto [provider, model] :
       {std::pair{"groq", "llama"}, {"together", "llama"}, {"openai", "gpt"}}) {
    config::Deployment d;
    d.provider = provider;
    d.model = model;
    d.set_id();
    m.deployments.push_back(d);
  }
  return m;
}

TEST(RouteOverride, AcceptsNamesOfTheModelsDeployments) {
  RouteOverride o;
  o.providers = Names{"groq", "together"};
  o.deny_providers = Names{"openai"};
  o.order = {"together/llama", "groq", "openai/gpt"};
  EXPECT_EQ(check_override(o, chat_model()), std::nullopt);
}

TEST(RouteOverride, NamesTheFirstUnknownProviderOrDeployment) {
  RouteOverride o;
  o.order = {"groq", "grok"};
  EXPECT_EQ(
      check_override(o, chat_model()),
      R"(route.order[1]: model "chat" has no deployment on provider "grok" (did you mean "groq"?))");
  o.order = {"groq/gpt"};
  EXPECT_EQ(check_override(o, chat_model()),
            R"(route.order[0]: model "chat" has no deployment "groq/gpt")");
  o.order = {"together/lama"};
  EXPECT_EQ(
      check_override(o, chat_model()),
      R"(route.order[0]: model "chat" has no deployment "together/lama" (did you mean "together/llama"?))");
  o.order = {"llama"};  // a model name is neither
  EXPECT_EQ(check_override(o, chat_model()),
            R"(route.order[0]: model "chat" has no deployment on provider "llama")");

  RouteOverride p;
  p.providers = Names{"groq", "azure"};
  EXPECT_EQ(check_override(p, chat_model()),
            R"(route.providers[1]: model "chat" has no deployment on provider "azure")");
  p.providers = Names{"groq/llama"};  // a deployment id is not a provider
  EXPECT_EQ(check_override(p, chat_model()),
            R"(route.providers[0]: model "chat" has no deployment on provider "groq/llama")");

  RouteOverride d;
  d.deny_providers = Names{"togther"};
  EXPECT_EQ(
      check_override(d, chat_model()),
      R"(route.deny_providers[0]: model "chat" has no deployment on provider "togther" (did you mean "together"?))");
}

TEST(RouteOverride, CannotWidenTheModelsConfiguredFilters) {
  config::Model m = chat_model();
  m.routing.constraints.allow_providers = {"groq", "together"};
  m.routing.constraints.regions = {"us-east", "eu-west"};
  m.routing.constraints.deny_providers = {"together"};

  RouteOverride o;
  o.providers = Names{"openai"};
  EXPECT_EQ(check_override(o, m),
            R"(route.providers[0]: model "chat" only routes to providers "groq", "together")");
  o.providers = Names{"together"};
  EXPECT_EQ(check_override(o, m),
            R"(route.providers[0]: provider "together" is denied for model "chat")");
  o.providers = Names{"groq"};
  EXPECT_EQ(check_override(o, m), std::nullopt);

  RouteOverride r;
  r.regions = Names{"eu-west", "ap-south"};
  EXPECT_EQ(check_override(r, m),
            R"(route.regions[1]: model "chat" only routes to regions "us-east", "eu-west")");
  r.regions = Names{"eu-west"};
  EXPECT_EQ(check_override(r, m), std::nullopt);
  // Without configured regions any region may be asked for.
  r.regions = Names{"ap-south"};
  EXPECT_EQ(check_override(r, chat_model()), std::nullopt);
}

}  // namespace
}  // namespace llmgate::routing
