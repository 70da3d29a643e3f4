#include "gateway/metrics.h"

#include <array>
#include <limits>
#include <algorithm>
#include <sstream>
#include <tuple>
#include <vector>

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>

namespace llmgate::gateway {
namespace {

using prometheus::Counter;
using prometheus::Gauge;
using prometheus::Histogram;

constexpr const char* kVersion = "0.1";

// OpenTelemetry's GenAI TTFT buckets, with a tail to 80 s for slow reasoning models.
const Histogram::BucketBoundaries kTtftBuckets = {0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08,
                                                  0.1,   0.25,  0.5,  0.75, 1.0,  2.5,  5.0,
                                                  7.5,   10.0,  20.0, 40.0, 80.0};

constexpr std::array kOutcomes = {
    routing::AttemptOutcome::kSuccess,     routing::AttemptOutcome::kConnectError,
    routing::AttemptOutcome::kUpstreamStatus, routing::AttemptOutcome::kClientError,
    routing::AttemptOutcome::kTtftTimeout, routing::AttemptOutcome::kIdleTimeout,
    routing::AttemptOutcome::kTruncated,   routing::AttemptOutcome::kMalformed,
    routing::AttemptOutcome::kClientGone,  routing::AttemptOutcome::kTotalTimeout,
    routing::AttemptOutcome::kHedgeLost};
constexpr std::array kRequestOutcomes = {"success", "error", "rejected", "client_gone"};
constexpr std::array kHedgeResults = {"won", "lost", "denied"};
// OpenTelemetry's GenAI token-usage buckets.
const Histogram::BucketBoundaries kTokenBuckets = {1,      4,       16,      64,       256,
                                                   1024,   4096,    16384,   65536,    262144,
                                                   1048576, 4194304, 16777216, 67108864};
constexpr std::array kStates = {routing::HealthState::kHealthy, routing::HealthState::kEjected,
                                routing::HealthState::kProbing, routing::HealthState::kCoolingDown};

}  // namespace

struct Metrics::Impl {
  std::shared_ptr<prometheus::Registry> registry = std::make_shared<prometheus::Registry>();
  const config::Config& cfg;

  prometheus::Family<Histogram>& ttft = prometheus::BuildHistogram()
                                            .Name("gen_ai_server_time_to_first_token_seconds")
                                            .Help("Time from the request written upstream to the first output token")
                                            .Register(*registry);
  prometheus::Family<Counter>& attempts = prometheus::BuildCounter()
                                              .Name("llmgate_upstream_attempts_total")
                                              .Help("Upstream attempts by deployment and outcome")
                                              .Register(*registry);
  prometheus::Family<Counter>& requests = prometheus::BuildCounter()
                                              .Name("llmgate_requests_total")
                                              .Help("Chat completion requests by public model and outcome")
                                              .Register(*registry);
  prometheus::Family<Gauge>& in_flight = prometheus::BuildGauge()
                                             .Name("llmgate_requests_in_flight")
                                             .Help("Chat completion requests being served")
                                             .Register(*registry);
  prometheus::Family<Gauge>& build_info = prometheus::BuildGauge()
                                              .Name("llmgate_build_info")
                                              .Help("Always 1; the version as a label")
                                              .Register(*registry);
  prometheus::Family<Counter>& routes = prometheus::BuildCounter()
                                            .Name("llmgate_route_decisions_total")
                                            .Help("The router's first choice per request, by model, deployment and policy")
                                            .Register(*registry);
  prometheus::Family<Counter>& fallbacks = prometheus::BuildCounter()
                                               .Name("llmgate_fallbacks_total")
                                               .Help("Attempts on a next candidate, by the failure that caused them")
                                               .Register(*registry);
  prometheus::Family<Counter>& hedges = prometheus::BuildCounter()
                                            .Name("llmgate_hedges_total")
                                            .Help("Hedged attempts by result (won, lost, denied by the budget)")
                                            .Register(*registry);
  prometheus::Family<Counter>& tokens = prometheus::BuildCounter()
                                            .Name("llmgate_tokens_total")
                                            .Help("Tokens of successful attempts, from upstream usage")
                                            .Register(*registry);
  prometheus::Family<Counter>& cost = prometheus::BuildCounter()
                                          .Name("llmgate_cost_usd_total")
                                          .Help("USD of successful attempts at the configured prices")
                                          .Register(*registry);
  prometheus::Family<Histogram>& usage = prometheus::BuildHistogram()
                                             .Name("gen_ai_client_token_usage")
                                             .Help("Tokens per successful request (OpenTelemetry GenAI)")
                                             .Register(*registry);
  prometheus::Family<Gauge>& est = prometheus::BuildGauge()
                                       .Name("llmgate_router_ttft_estimate_seconds")
                                       .Help("The router's TTFT estimate (PeakEWMA) per deployment")
                                       .Register(*registry);
  prometheus::Family<Gauge>& quant = prometheus::BuildGauge()
                                         .Name("llmgate_router_ttft_window_seconds")
                                         .Help("Live TTFT percentiles over the router's window per deployment")
                                         .Register(*registry);
  prometheus::Family<Gauge>& tps = prometheus::BuildGauge()
                                       .Name("llmgate_router_output_tokens_per_second")
                                       .Help("The router's output speed estimate per deployment")
                                       .Register(*registry);
  prometheus::Family<Gauge>& state = prometheus::BuildGauge()
                                         .Name("llmgate_router_deployment_state")
                                         .Help("1 for the deployment's current health state, else 0")
                                         .Register(*registry);

  // Pre-resolved children.
  std::map<std::pair<std::string, std::string>, Histogram*> ttft_by;  // (model, deployment)
  std::map<std::pair<std::string, routing::AttemptOutcome>, Counter*> attempts_by;
  std::map<std::pair<std::string, std::string>, Counter*> requests_by;
  Gauge* in_flight_gauge = nullptr;
  std::map<std::tuple<std::string, std::string, config::Policy>, Counter*> routes_by;
  std::map<routing::AttemptOutcome, Counter*> fallbacks_by;
  std::map<std::string, Counter*> hedges_by;
  Counter* input_tokens = nullptr;
  Counter* output_tokens = nullptr;
  Counter* cost_total = nullptr;
  std::map<std::pair<std::string, std::string>, Histogram*> usage_by;  // (model, input|output)
  std::map<std::string, config::Price> price_by;  // deployment id
  struct RouterGauges {
    Gauge* estimate;
    std::array<Gauge*, 3> quantiles;
    Gauge* tps;
    std::array<Gauge*, kStates.size()> states;
  };
  std::map<std::string, RouterGauges> router_by;  // deployment id

  explicit Impl(const config::Config& c) : cfg(c) {
    in_flight_gauge = &in_flight.Add({});
    for (auto o : kOutcomes) fallbacks_by[o] = &fallbacks.Add({{"reason", routing::to_string(o)}});
    for (const char* r : kHedgeResults) hedges_by[r] = &hedges.Add({{"result", r}});
    input_tokens = &tokens.Add({{"type", "input"}});
    output_tokens = &tokens.Add({{"type", "output"}});
    cost_total = &cost.Add({});
    build_info.Add({{"version", kVersion}}).Set(1);
    for (const auto& m : cfg.models) {
      for (const char* o : kRequestOutcomes) requests_by[{m.name, o}] = &requests.Add({{"model", m.name}, {"outcome", o}});
      for (const char* type : {"input", "output"}) {
        usage_by[{m.name, type}] =
            &usage.Add({{"gen_ai_request_model", m.name}, {"gen_ai_token_type", type}}, kTokenBuckets);
      }
      for (const auto& d : m.deployments) {
        const std::string id = d.id();
        price_by[id] = d.price;
        for (auto p : config::kAllPolicies) {
          routes_by[{m.name, id, p}] = &routes.Add(
              {{"model", m.name}, {"deployment", id}, {"policy", config::to_string(p)}});
        }
        ttft_by[{m.name, id}] = &ttft.Add(
            {{"gen_ai_request_model", m.name}, {"gen_ai_provider_name", d.provider}, {"deployment", id}},
            kTtftBuckets);
        for (auto o : kOutcomes) {
          if (!attempts_by.count({id, o})) {
            attempts_by[{id, o}] = &attempts.Add({{"deployment", id}, {"outcome", routing::to_string(o)}});
          }
        }
        if (!router_by.count(id)) {
          RouterGauges g{};
          g.estimate = &est.Add({{"deployment", id}});
          const char* qs[] = {"p50", "p95", "p99"};
          for (int i = 0; i < 3; ++i) g.quantiles[i] = &quant.Add({{"deployment", id}, {"percentile", qs[i]}});
          g.tps = &tps.Add({{"deployment", id}});
          for (std::size_t i = 0; i < kStates.size(); ++i) {
            g.states[i] = &state.Add({{"deployment", id}, {"state", routing::to_string(kStates[i])}});
          }
          router_by[id] = g;
        }
      }
    }
  }
};

Metrics::Metrics(const config::Config& cfg) : impl_(std::make_unique<Impl>(cfg)) {}
Metrics::~Metrics() = default;

void Metrics::on_attempt(const std::string& model, const routing::AttemptRecord& rec) {
  if (auto it = impl_->attempts_by.find({rec.deployment, rec.outcome}); it != impl_->attempts_by.end()) {
    it->second->Increment();
  }
  if (auto t = rec.ttft()) {
    if (auto it = impl_->ttft_by.find({model, rec.deployment}); it != impl_->ttft_by.end()) {
      it->second->Observe(std::chrono::duration<double>(*t).count());
    }
  }
  if (rec.outcome != routing::AttemptOutcome::kSuccess) return;
  const double in = static_cast<double>(std::max<std::int64_t>(0, rec.input_tokens.value_or(0)));
  const double out = static_cast<double>(std::max<std::int64_t>(0, rec.output_tokens.value_or(0)));
  impl_->input_tokens->Increment(in);
  impl_->output_tokens->Increment(out);
  if (auto it = impl_->usage_by.find({model, "input"}); it != impl_->usage_by.end() && rec.input_tokens) {
    it->second->Observe(in);
  }
  if (auto it = impl_->usage_by.find({model, "output"}); it != impl_->usage_by.end() && rec.output_tokens) {
    it->second->Observe(out);
  }
  if (auto it = impl_->price_by.find(rec.deployment); it != impl_->price_by.end()) {
    impl_->cost_total->Increment((in * it->second.input_per_1m + out * it->second.output_per_1m) / 1e6);
  }
}

void Metrics::on_route(const std::string& model, const std::string& deployment,
                       config::Policy policy) {
  if (auto it = impl_->routes_by.find({model, deployment, policy}); it != impl_->routes_by.end()) {
    it->second->Increment();
  }
}

void Metrics::on_fallback(routing::AttemptOutcome reason) {
  if (auto it = impl_->fallbacks_by.find(reason); it != impl_->fallbacks_by.end()) it->second->Increment();
}

void Metrics::on_hedge(const char* result) {
  if (auto it = impl_->hedges_by.find(result); it != impl_->hedges_by.end()) it->second->Increment();
}

void Metrics::on_request(const std::string& model, const char* outcome) {
  if (auto it = impl_->requests_by.find({model, outcome}); it != impl_->requests_by.end()) {
    it->second->Increment();
  }
}

void Metrics::request_started() { impl_->in_flight_gauge->Increment(); }
void Metrics::request_finished() { impl_->in_flight_gauge->Decrement(); }

std::string Metrics::scrape(routing::RoutingState& state) {
  const auto now = routing::Clock::now();
  for (auto& [id, g] : impl_->router_by) {
    auto s = state.stats.get_or_prior(id, now);
    g.estimate->Set(s.ttft_estimate_ms / 1000.0);
    const std::optional<double> qs[] = {s.ttft_p50_ms, s.ttft_p95_ms, s.ttft_p99_ms};
    // NaN, not 0, while the window is empty: "no data" must not read as "instant".
    for (int i = 0; i < 3; ++i) {
      g.quantiles[i]->Set(qs[i] ? *qs[i] / 1000.0 : std::numeric_limits<double>::quiet_NaN());
    }
    g.tps->Set(s.tps_estimate);
    auto h = state.health.peek(id, now);
    for (std::size_t i = 0; i < kStates.size(); ++i) g.states[i]->Set(h.state == kStates[i] ? 1 : 0);
  }
  std::ostringstream out;
  prometheus::TextSerializer().Serialize(out, impl_->registry->Collect());
  return out.str();
}

}  // namespace llmgate::gateway
