#include "gateway/observe/metrics.h"

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdint>
#include <limits>
#include <map>
#include <mutex>
#include <set>
#include <sstream>
#include <tuple>
#include <vector>

#include "gateway/observe/sharded_histogram.h"
#include "routing/ranking.h"

namespace llmgate::gateway {
namespace {

using prometheus::Counter;
using prometheus::Family;
using prometheus::Gauge;
using prometheus::Histogram;

constexpr const char* kVersion = "0.1";

// OpenTelemetry's GenAI TTFT buckets, with a tail to 80 s for slow reasoning models.
const Histogram::BucketBoundaries kTtftBuckets = {0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08,
                                                  0.1,   0.25,  0.5,  0.75, 1.0,  2.5,  5.0,
                                                  7.5,   10.0,  20.0, 40.0, 80.0};
// OpenTelemetry's GenAI time-per-output-token buckets, with a head down to
// 1 ms: hosted models stream at 100-1000 tokens/s.
const Histogram::BucketBoundaries kTpotBuckets = {
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5};
// OpenTelemetry's GenAI operation-duration buckets, with a tail to 300 s for long generations.
const Histogram::BucketBoundaries kDurationBuckets = {0.01,  0.02,  0.04,  0.08, 0.16,  0.32,
                                                      0.64,  1.28,  2.56,  5.12, 10.24, 20.48,
                                                      40.96, 81.92, 150.0, 300.0};
// The gateway's own cost: tens of microseconds when all is well.
const Histogram::BucketBoundaries kOverheadBuckets = {0.00001, 0.000025, 0.00005, 0.0001, 0.00025,
                                                      0.0005,  0.001,    0.0025,  0.005,  0.01,
                                                      0.025,   0.05,     0.1};
// OpenTelemetry's GenAI token-usage buckets.
const Histogram::BucketBoundaries kTokenBuckets = {
    1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216, 67108864};

constexpr std::array kOutcomes = {
    routing::AttemptOutcome::kSuccess,        routing::AttemptOutcome::kConnectError,
    routing::AttemptOutcome::kUpstreamStatus, routing::AttemptOutcome::kClientError,
    routing::AttemptOutcome::kTtftTimeout,    routing::AttemptOutcome::kIdleTimeout,
    routing::AttemptOutcome::kTruncated,      routing::AttemptOutcome::kMalformed,
    routing::AttemptOutcome::kClientGone,     routing::AttemptOutcome::kTotalTimeout,
    routing::AttemptOutcome::kHedgeLost};
constexpr std::array kStates = {routing::HealthState::kHealthy, routing::HealthState::kEjected,
                                routing::HealthState::kProbing, routing::HealthState::kCoolingDown};
constexpr std::array kWindowPercentiles = {"p50", "p95", "p99"};

// Series arrays are indexed with index_of (vocabulary.h): the kXxx arrays
// they are built from list every value in declaration order.
template <typename Enum, std::size_t N>
constexpr bool in_declaration_order(const std::array<Enum, N>& all) {
  for (std::size_t i = 0; i < N; ++i) {
    if (index_of(all[i]) != i) return false;
  }
  return true;
}
static_assert(in_declaration_order(kOutcomes) &&
              kOutcomes.back() == routing::AttemptOutcome::kHedgeLost);
static_assert(in_declaration_order(kSharedOps) && kSharedOps.back() == SharedOp::kAffinityWrite);
static_assert(in_declaration_order(kSharedResults) &&
              kSharedResults.back() == SharedResult::kUnavailable);
static_assert(in_declaration_order(config::kAllPolicies) &&
              config::kAllPolicies.back() == config::Policy::kRandom);

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

template <typename T, typename Builder>
Family<T>& family(Builder builder, prometheus::Registry& r, const char* name, const char* help) {
  return builder.Name(name).Help(help).Register(r);
}

// The series of `family` with `labels`, observed through a ShardedHistogram:
// the bucket bounds given once, for both (they must agree).
std::unique_ptr<ShardedHistogram> sharded_series(Family<Histogram>& family,
                                                 const prometheus::Labels& labels,
                                                 const Histogram::BucketBoundaries& bounds,
                                                 HistogramFolder& folder) {
  return std::make_unique<ShardedHistogram>(family.Add(labels, bounds), bounds, folder);
}

}  // namespace

struct MetricsRegistry::Impl {
  prometheus::Registry registry;
  // Every histogram the request path observes is a ShardedHistogram over
  // its prometheus-cpp series (no lock per observation), folded into it at
  // scrape. Declared before them all: they leave it as they go.
  HistogramFolder folder;

  // Config-labelled families (children resolved per snapshot by Metrics).
  Family<Histogram>& ttft = family<Histogram>(
      prometheus::BuildHistogram(), registry, "gen_ai_server_time_to_first_token_seconds",
      "Time from the request written upstream to the first output token, per attempt");
  Family<Histogram>& tpot = family<Histogram>(
      prometheus::BuildHistogram(), registry, "gen_ai_server_time_per_output_token_seconds",
      "Time per output token after the first, per successful attempt");
  Family<Histogram>& duration = family<Histogram>(
      prometheus::BuildHistogram(), registry, "gen_ai_server_request_duration_seconds",
      "Upstream request written to response end, per successful attempt");
  Family<Histogram>& usage =
      family<Histogram>(prometheus::BuildHistogram(), registry, "gen_ai_client_token_usage",
                        "Tokens per successful request (OpenTelemetry GenAI)");
  Family<Counter>& attempts =
      family<Counter>(prometheus::BuildCounter(), registry, "llmgate_upstream_attempts_total",
                      "Upstream attempts by deployment and outcome");
  Family<Counter>& upstream_requests = family<Counter>(
      prometheus::BuildCounter(), registry, "llmgate_upstream_requests_total",
      "Requests written upstream, by deployment and connection (new or reused from the pool)");
  Family<Counter>& requests = family<Counter>(
      prometheus::BuildCounter(), registry, "llmgate_requests_total",
      "Client API requests by public model, outcome and operation (gen_ai_operation_name: "
      "chat, responses, embeddings, text_completion); refusals before any upstream attempt "
      "have their reason as outcome (unauthenticated, model_not_allowed, rate_limited, "
      "budget_exhausted, shared_state_unavailable, invalid_request, not_found, loop_detected), "
      "model=\"\" when none was named");
  Family<Counter>& saturated = family<Counter>(
      prometheus::BuildCounter(), registry, "llmgate_deployment_saturated_total",
      "Candidates skipped as saturated, not attempted: at their max_concurrent (queue_full, "
      "queue_timeout), this gateway's connection pool full (pool_full), or a max_concurrent "
      "shared through a shared state that is unavailable under on_failure: closed "
      "(shared_state_unavailable)");
  Family<Counter>& continuations = family<Counter>(
      prometheus::BuildCounter(), registry, "llmgate_stream_continuations_total",
      "Streams that broke off after their first token, by the deployment they broke on, for "
      "models with a deployment that can continue (continuation:): continued (another "
      "deployment finished the answer), failed (none did: the client got the error event), "
      "not_continuable (a tool call, refusal, audio or several choices were under way)");
  Family<Counter>& routes =
      family<Counter>(prometheus::BuildCounter(), registry, "llmgate_route_decisions_total",
                      "The router's first choice per request, by model, deployment and policy");

  // Process-wide series.
  Family<Gauge>& in_flight_family =
      family<Gauge>(prometheus::BuildGauge(), registry, "llmgate_requests_in_flight",
                    "Client API requests being served (every operation)");
  Family<Gauge>& build_info = family<Gauge>(
      prometheus::BuildGauge(), registry, "llmgate_build_info", "Always 1; the version as a label");
  Family<Counter>& fallbacks =
      family<Counter>(prometheus::BuildCounter(), registry, "llmgate_fallbacks_total",
                      "Attempts on a next candidate, by the failure that caused them");
  Family<Counter>& hedges =
      family<Counter>(prometheus::BuildCounter(), registry, "llmgate_hedges_total",
                      "Hedged attempts by result (won, lost, denied by the budget)");
  Family<Counter>& tokens =
      family<Counter>(prometheus::BuildCounter(), registry, "llmgate_tokens_total",
                      "Tokens of successful attempts, from upstream usage");
  Family<Counter>& affinity = family<Counter>(
      prometheus::BuildCounter(), registry, "llmgate_prompt_affinity_total",
      "Requests with a conversation by prompt-cache affinity: hit (the first choice holds a "
      "prefix), broken (another deployment holds one), miss (none does)");
  Family<Counter>& lessons = family<Counter>(
      prometheus::BuildCounter(), registry, "llmgate_lessons_total",
      "Attempts made to learn about a deployment (kind: recheck, exploration, size_race) by what "
      "they taught: learnt (a first token: a sample), missed (stopped before one), failed");
  Family<Counter>& lesson_extra = family<Counter>(
      prometheus::BuildCounter(), registry, "llmgate_lesson_extra_requests_total",
      "Upstream requests added by races that learnt about a deployment (each spends the model's "
      "routing.learning_budget)");
  Family<Counter>& deployment_input = family<Counter>(
      prometheus::BuildCounter(), registry, "llmgate_deployment_input_tokens_total",
      "Input tokens of successful attempts, by whether the provider read them from its prompt "
      "cache (usage cached_tokens)");
  Family<Counter>& cost =
      family<Counter>(prometheus::BuildCounter(), registry, "llmgate_cost_usd_total",
                      "USD of successful attempts at the configured prices");
  Family<Histogram>& overhead = family<Histogram>(
      prometheus::BuildHistogram(), registry, "llmgate_gateway_overhead_seconds",
      "Time the gateway itself adds: admission (request read to upstream request sent, less "
      "connect) and first_token (first token read upstream to written to the client)");
  Family<Counter>& reloads =
      family<Counter>(prometheus::BuildCounter(), registry, "llmgate_config_reloads_total",
                      "Config reloads by result (success, failure, rejected)");
  Family<Gauge>& reload_ok = family<Gauge>(
      prometheus::BuildGauge(), registry, "llmgate_config_last_reload_successful",
      "1 if the last config reload succeeded (or none was tried), 0 if it was rejected");
  Family<Gauge>& reload_time = family<Gauge>(
      prometheus::BuildGauge(), registry, "llmgate_config_last_reload_success_timestamp_seconds",
      "Unix time of the config now in force (start-up or last successful reload)");
  Family<Counter>& auth_rejections = family<Counter>(
      prometheus::BuildCounter(), registry, "llmgate_auth_rejections_total",
      "Requests refused by gateway-key auth, by reason (unauthenticated, admin_unauthenticated, "
      "model_not_allowed, rate_limited)");
  Family<Gauge>& shared_up_family = family<Gauge>(
      prometheus::BuildGauge(), registry, "llmgate_shared_state_up",
      "1 while the shared-state backend (Redis) is connected; absent when not configured");
  Family<Counter>& shared_ops = family<Counter>(
      prometheus::BuildCounter(), registry, "llmgate_shared_state_operations_total",
      "Operations on the shared-state backend, by op (rate_lease, slot_acquire, slot_release, "
      "slot_renew, publish, usage_read, usage_charge, health_read) and result (ok, error, "
      "timeout, unavailable)");
  Family<Histogram>& shared_latency = family<Histogram>(
      prometheus::BuildHistogram(), registry, "llmgate_shared_state_latency_seconds",
      "Round trip of answered shared-state operations, by op");
  Family<Counter>& shared_fallbacks = family<Counter>(
      prometheus::BuildCounter(), registry, "llmgate_shared_state_fallbacks_total",
      "Decisions taken without the shared-state backend, by op and mode (open: this replica's "
      "own limits; closed: refused)");
  Family<Counter>& shared_events = family<Counter>(
      prometheus::BuildCounter(), registry, "llmgate_shared_state_events_applied_total",
      "Cooldowns and ejections published by other replicas and applied here");
  Family<Counter>& trace_exported =
      family<Counter>(prometheus::BuildCounter(), registry, "llmgate_trace_spans_exported_total",
                      "Spans the OTLP collector accepted; absent when tracing is not configured");
  Family<Counter>& trace_dropped = family<Counter>(
      prometheus::BuildCounter(), registry, "llmgate_trace_spans_dropped_total",
      "Spans dropped, by reason: queue_full (the buffer was full: the collector is slow or "
      "down) or export_failed (refused, failed or timed out)");
  Family<Gauge>& draining_family =
      family<Gauge>(prometheus::BuildGauge(), registry, "llmgate_draining",
                    "1 while the gateway drains for shutdown");

  // The router's beliefs, refreshed at scrape time.
  Family<Gauge>& est =
      family<Gauge>(prometheus::BuildGauge(), registry, "llmgate_router_ttft_estimate_seconds",
                    "The router's TTFT estimate (of the median) per deployment");
  Family<Gauge>& quant = family<Gauge>(
      prometheus::BuildGauge(), registry, "llmgate_router_ttft_window_seconds",
      "Live TTFT percentiles over the router's window per deployment (NaN while empty)");
  Family<Gauge>& tps =
      family<Gauge>(prometheus::BuildGauge(), registry, "llmgate_router_output_tokens_per_second",
                    "The router's output speed estimate per deployment");
  Family<Gauge>& state =
      family<Gauge>(prometheus::BuildGauge(), registry, "llmgate_router_deployment_state",
                    "1 for the deployment's current health state, else 0");
  Family<Gauge>& dep_in_flight =
      family<Gauge>(prometheus::BuildGauge(), registry, "llmgate_router_in_flight",
                    "Upstream attempts in flight per deployment (all worker threads)");
  Family<Gauge>& error_rate =
      family<Gauge>(prometheus::BuildGauge(), registry, "llmgate_router_error_rate",
                    "The router's time-decayed error ratio per deployment (0 to 1)");
  Family<Counter>& ejections =
      family<Counter>(prometheus::BuildCounter(), registry, "llmgate_router_ejections_total",
                      "Outlier ejections per deployment");
  Family<Gauge>& score = family<Gauge>(
      prometheus::BuildGauge(), registry, "llmgate_router_score",
      "The score the model's policy gives the deployment now (lower is better; NaN if skipped)");
  Family<Gauge>& rank = family<Gauge>(
      prometheus::BuildGauge(), registry, "llmgate_router_rank",
      "The deployment's 1-based place in the model's plan now (0 if it would be skipped)");

  Gauge& in_flight = in_flight_family.Add({});
  Gauge& draining = draining_family.Add({});
  std::array<Counter*, kOutcomes.size()> fallbacks_by{};   // by AttemptOutcome (kOutcomes)
  std::array<Counter*, kHedgeResults.size()> hedges_by{};  // by HedgeResult
  Counter& input_tokens = tokens.Add({{"type", "input"}});
  Counter& output_tokens = tokens.Add({{"type", "output"}});
  Counter& cost_total = cost.Add({});
  std::array<std::unique_ptr<ShardedHistogram>, 2> overhead_by{};
  std::array<Counter*, kAuthRejections.size()> auth_by{};  // by AuthRejection
  struct SharedSeries {
    Gauge* up = nullptr;
    std::array<std::array<Counter*, kSharedResults.size()>, kSharedOps.size()> ops{};
    std::array<std::unique_ptr<ShardedHistogram>, kSharedOps.size()> latency{};
    std::array<std::array<Counter*, 2>, kSharedOps.size()> fallbacks{};  // [op][open]
    Counter* events = nullptr;
  };
  std::atomic<SharedSeries*> shared_series{nullptr};
  struct TraceSeries {
    std::array<Counter*, 3> by{};  // by TraceSpanResult
  };
  std::atomic<TraceSeries*> trace_series{nullptr};
  std::unique_ptr<TraceSeries> trace_storage;
  std::unique_ptr<SharedSeries> shared_storage;
  std::array<Counter*, 3> reloads_by = {
      &reloads.Add({{"result", to_string(ReloadResult::kSuccess)}}),
      &reloads.Add({{"result", to_string(ReloadResult::kFailure)}}),
      &reloads.Add({{"result", to_string(ReloadResult::kRejected)}})};

  // Scrape-time state: written only under scrape_mu.
  std::mutex scrape_mu;
  struct DeploymentGauges {
    Gauge* estimate;
    std::array<Gauge*, kWindowPercentiles.size()> quantiles;
    Gauge* tps;
    std::array<Gauge*, kStates.size()> states;
    Gauge* in_flight;
    Gauge* error_rate;
    Counter* ejections;
    std::uint64_t ejections_seen = 0;
  };
  std::map<std::string, DeploymentGauges> deployment_gauges;  // deployment id
  struct RankGauges {
    Gauge* score;
    Gauge* rank;
  };
  std::map<std::pair<std::string, std::string>, RankGauges> rank_gauges;  // (model, deployment)

  Impl() {
    for (std::size_t i = 0; i < kOutcomes.size(); ++i)
      fallbacks_by[i] = &fallbacks.Add({{"reason", routing::to_string(kOutcomes[i])}});
    for (auto r : kHedgeResults) hedges_by[index_of(r)] = &hedges.Add({{"result", to_string(r)}});
    overhead_by[static_cast<int>(OverheadPhase::kAdmission)] =
        sharded_series(overhead, {{"phase", "admission"}}, kOverheadBuckets, folder);
    overhead_by[static_cast<int>(OverheadPhase::kFirstToken)] =
        sharded_series(overhead, {{"phase", "first_token"}}, kOverheadBuckets, folder);
    build_info.Add({{"version", kVersion}}).Set(1);
    for (auto r : kAuthRejections)
      auth_by[index_of(r)] = &auth_rejections.Add({{"reason", to_string(r)}});
    reload_ok.Add({}).Set(1);
    reload_time.Add({}).Set(
        static_cast<double>(std::chrono::duration_cast<std::chrono::seconds>(
                                std::chrono::system_clock::now().time_since_epoch())
                                .count()));
  }

  DeploymentGauges add_deployment(const std::string& id) {
    DeploymentGauges g{};
    g.estimate = &est.Add({{"deployment", id}});
    for (std::size_t i = 0; i < kWindowPercentiles.size(); ++i) {
      g.quantiles[i] = &quant.Add({{"deployment", id}, {"percentile", kWindowPercentiles[i]}});
    }
    g.tps = &tps.Add({{"deployment", id}});
    for (std::size_t i = 0; i < kStates.size(); ++i) {
      g.states[i] = &state.Add({{"deployment", id}, {"state", routing::to_string(kStates[i])}});
    }
    g.in_flight = &dep_in_flight.Add({{"deployment", id}});
    g.error_rate = &error_rate.Add({{"deployment", id}});
    g.ejections = &ejections.Add({{"deployment", id}});
    return g;
  }

  void remove_deployment(const DeploymentGauges& g) {
    est.Remove(g.estimate);
    for (auto* q : g.quantiles) quant.Remove(q);
    tps.Remove(g.tps);
    for (auto* s : g.states) state.Remove(s);
    dep_in_flight.Remove(g.in_flight);
    error_rate.Remove(g.error_rate);
    ejections.Remove(g.ejections);
  }

  // Brings the scrape-time gauges in line with `cfg`: adds the new
  // deployments', removes those of deployments no longer configured.
  void reconcile(const config::Config& cfg) {
    std::set<std::string> ids;
    std::set<std::pair<std::string, std::string>> pairs;
    for (const auto& m : cfg.models) {
      for (const auto& d : m.deployments) {
        ids.insert(d.id());
        pairs.insert({m.name, d.id()});
      }
    }
    for (auto it = deployment_gauges.begin(); it != deployment_gauges.end();) {
      if (ids.count(it->first)) {
        ++it;
        continue;
      }
      remove_deployment(it->second);
      it = deployment_gauges.erase(it);
    }
    for (const auto& id : ids) {
      if (!deployment_gauges.count(id)) deployment_gauges.emplace(id, add_deployment(id));
    }
    for (auto it = rank_gauges.begin(); it != rank_gauges.end();) {
      if (pairs.count(it->first)) {
        ++it;
        continue;
      }
      score.Remove(it->second.score);
      rank.Remove(it->second.rank);
      it = rank_gauges.erase(it);
    }
    for (const auto& [model, id] : pairs) {
      if (rank_gauges.count({model, id})) continue;
      rank_gauges[{model, id}] = RankGauges{&score.Add({{"model", model}, {"deployment", id}}),
                                            &rank.Add({{"model", model}, {"deployment", id}})};
    }
  }
};

MetricsRegistry::MetricsRegistry() : impl_(std::make_unique<Impl>()) {}
MetricsRegistry::~MetricsRegistry() = default;

void MetricsRegistry::request_started() { impl_->in_flight.Increment(); }
void MetricsRegistry::request_finished() { impl_->in_flight.Decrement(); }

void MetricsRegistry::on_fallback(routing::AttemptOutcome reason) {
  impl_->fallbacks_by[index_of(reason)]->Increment();
}

void MetricsRegistry::on_hedge(HedgeResult result) {
  impl_->hedges_by[index_of(result)]->Increment();
}

void MetricsRegistry::on_overhead(OverheadPhase phase, std::chrono::nanoseconds d) {
  impl_->overhead_by[static_cast<int>(phase)]->observe(std::chrono::duration<double>(d).count());
}

const char* to_string(ReloadResult r) {
  switch (r) {
    case ReloadResult::kSuccess:
      return "success";
    case ReloadResult::kFailure:
      return "failure";
    case ReloadResult::kRejected:
      return "rejected";
  }
  return "failure";
}

void MetricsRegistry::on_reload(ReloadResult result, double unix_seconds) {
  const bool ok = result == ReloadResult::kSuccess;
  impl_->reloads_by[static_cast<std::size_t>(result)]->Increment();
  impl_->reload_ok.Add({}).Set(ok ? 1 : 0);
  if (ok) impl_->reload_time.Add({}).Set(unix_seconds);
}

void MetricsRegistry::enable_shared_state() {
  if (impl_->shared_series.load()) return;
  static const Histogram::BucketBoundaries kSharedBuckets = {
      0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25};
  auto s = std::make_unique<Impl::SharedSeries>();
  s->up = &impl_->shared_up_family.Add({});
  for (auto op : kSharedOps) {
    const std::size_t o = index_of(op);
    for (auto r : kSharedResults) {
      s->ops[o][index_of(r)] =
          &impl_->shared_ops.Add({{"op", to_string(op)}, {"result", to_string(r)}});
    }
    s->latency[o] = sharded_series(impl_->shared_latency, {{"op", to_string(op)}}, kSharedBuckets,
                                   impl_->folder);
    s->fallbacks[o][0] = &impl_->shared_fallbacks.Add({{"op", to_string(op)}, {"mode", "closed"}});
    s->fallbacks[o][1] = &impl_->shared_fallbacks.Add({{"op", to_string(op)}, {"mode", "open"}});
  }
  s->events = &impl_->shared_events.Add({});
  impl_->shared_storage = std::move(s);
  impl_->shared_series.store(impl_->shared_storage.get());
}

void MetricsRegistry::set_shared_up(bool up) {
  if (auto* s = impl_->shared_series.load()) s->up->Set(up ? 1 : 0);
}

void MetricsRegistry::on_shared_op(SharedOp op, SharedResult result, double seconds) {
  auto* s = impl_->shared_series.load();
  if (!s) return;
  s->ops[index_of(op)][index_of(result)]->Increment();
  if (result == SharedResult::kOk || result == SharedResult::kError)
    s->latency[index_of(op)]->observe(seconds);
}

void MetricsRegistry::on_shared_fallback(SharedOp op, bool open) {
  if (auto* s = impl_->shared_series.load()) s->fallbacks[index_of(op)][open ? 1 : 0]->Increment();
}

void MetricsRegistry::on_shared_event_applied() {
  if (auto* s = impl_->shared_series.load()) s->events->Increment();
}

void MetricsRegistry::enable_tracing() {
  if (impl_->trace_series.load()) return;
  auto t = std::make_unique<Impl::TraceSeries>();
  t->by[0] = &impl_->trace_exported.Add({});
  t->by[1] = &impl_->trace_dropped.Add({{"reason", "queue_full"}});
  t->by[2] = &impl_->trace_dropped.Add({{"reason", "export_failed"}});
  impl_->trace_storage = std::move(t);
  impl_->trace_series.store(impl_->trace_storage.get());
}

void MetricsRegistry::on_trace_spans(TraceSpanResult result, std::uint64_t n) {
  if (auto* t = impl_->trace_series.load())
    t->by[static_cast<std::size_t>(result)]->Increment(static_cast<double>(n));
}

void MetricsRegistry::set_draining(bool draining) { impl_->draining.Set(draining ? 1 : 0); }

void MetricsRegistry::on_auth_rejected(AuthRejection reason) {
  impl_->auth_by[index_of(reason)]->Increment();
}

void MetricsRegistry::on_refused(config::Operation op, std::string_view model, Refused reason,
                                 std::string_view api) {
  // (Family::Add finds the series when it exists: refusals are not the hot path.)
  prometheus::Labels labels{{"model", std::string(model)},
                            {"outcome", to_string(reason)},
                            {"gen_ai_operation_name", config::gen_ai_name(op)}};
  if (!api.empty()) labels.emplace("api", std::string(api));
  impl_->requests.Add(labels).Increment();
}

std::string MetricsRegistry::scrape(const config::Config& cfg, routing::RoutingState& state) {
  const auto now = routing::Clock::now();
  std::lock_guard lock(impl_->scrape_mu);
  impl_->reconcile(cfg);
  for (auto& [id, g] : impl_->deployment_gauges) {
    auto s = state.stats.get_or_prior(id, now);
    g.estimate->Set(s.ttft_estimate_ms / 1000.0);
    const std::optional<double> qs[] = {s.ttft_p50_ms, s.ttft_p95_ms, s.ttft_p99_ms};
    // NaN, not 0, while the window is empty: "no data" must not read as "instant".
    for (std::size_t i = 0; i < g.quantiles.size(); ++i) {
      g.quantiles[i]->Set(qs[i] ? *qs[i] / 1000.0 : kNaN);
    }
    g.tps->Set(s.tps_estimate);
    g.in_flight->Set(static_cast<double>(s.in_flight));
    g.error_rate->Set(s.error_rate);
    auto h = state.health.peek(id, now);
    for (std::size_t i = 0; i < kStates.size(); ++i)
      g.states[i]->Set(h.state == kStates[i] ? 1 : 0);
    // The tracker counts ejections itself; the counter follows it. (A
    // deployment whose upstream changed on a reload restarts at 0: the
    // counter then stays where it was, as counters must.)
    const std::uint64_t total = state.health.ejections_total(id);
    if (total > g.ejections_seen)
      g.ejections->Increment(static_cast<double>(total - g.ejections_seen));
    g.ejections_seen = total;
  }
  for (const auto& m : cfg.models) {
    for (const auto& r : routing::rank_deployments(cfg, m, state, now)) {
      auto& g = impl_->rank_gauges.at({m.name, r.d->id()});
      g.score->Set(r.rank ? r.score : kNaN);
      g.rank->Set(r.rank ? static_cast<double>(*r.rank) : 0);
    }
  }
  impl_->folder.fold_all();
  std::ostringstream out;
  prometheus::TextSerializer().Serialize(out, impl_->registry.Collect());
  return out.str();
}

// ---- Metrics: one config snapshot's series ------------------------------------

// Every series a request touches, resolved when the snapshot is built and
// indexed as the config is (models, then each model's deployments) and by
// the vocabularies' enums: nothing on the request path looks a name up.
constexpr std::size_t kOperations = std::size(config::kAllOperations);
static_assert(config::kAllOperations[kOperations - 1] == config::Operation::kCompletions);

struct DeploymentSeries {
  // By config::Operation; null for an operation the deployment does not serve.
  std::array<ShardedHistogram*, kOperations> ttft{};
  std::array<ShardedHistogram*, kOperations> tpot{};
  std::array<ShardedHistogram*, kOperations> duration{};
  std::array<Counter*, kOutcomes.size()> attempts{};           // by AttemptOutcome
  std::array<Counter*, 2> upstream_requests{};                 // new, reused connection
  std::array<Counter*, config::kAllPolicies.size()> routes{};  // by Policy
  std::array<Counter*, kSaturations.size()> saturated{};       // by Saturation (null: n/a)
  std::array<Counter*, 2> input_tokens{};                      // uncached, cached
  std::array<Counter*, 3> continuations{};  // by Metrics::Continued (null: none can continue)
  config::Price price;
};

struct ModelSeries {
  // By config::Operation, then RequestOutcome: every operation, so each
  // model shows under each operation label (at 0 where it serves none;
  // admission refuses those before any request is counted).
  std::array<std::array<Counter*, kRequestOutcomes.size()>, kOperations> requests{};
  // By config::Operation; null for one no deployment of the model serves.
  std::array<ShardedHistogram*, kOperations> input_usage{};
  std::array<ShardedHistogram*, kOperations> output_usage{};
  std::array<Counter*, 3> affinity{};  // by Metrics::Affinity
  // By RoutingState::LessonKind, then LessonResult.
  std::array<std::array<Counter*, routing::RoutingState::kLessonResults>,
             routing::RoutingState::kLessonKinds>
      lessons{};
  Counter* lesson_extra = nullptr;
  std::vector<DeploymentSeries> deployments;  // as config::Model::deployments
};

struct Metrics::Impl {
  const config::Config* cfg = nullptr;
  std::vector<ModelSeries> models;  // as config::Config::models
  // The histograms of models' and deployments' series (folded into the
  // registry's series as they go: a reload loses no observation).
  std::vector<std::unique_ptr<ShardedHistogram>> histograms;

  // The position of `x` in `v` (v.size() when it is not an element of `v`:
  // compared as addresses, never subtracted across arrays).
  template <typename T>
  static std::size_t position(const T& x, const std::vector<T>& v) {
    const auto at = reinterpret_cast<std::uintptr_t>(&x);
    const auto begin = reinterpret_cast<std::uintptr_t>(v.data());
    if (at < begin || at >= begin + v.size() * sizeof(T)) return v.size();
    return (at - begin) / sizeof(T);
  }
  ModelSeries* model(const config::Model& m) {
    const std::size_t i = position(m, cfg->models);
    return i < models.size() ? &models[i] : nullptr;  // a model of another config: none
  }
  DeploymentSeries* deployment(const config::Model& m, const config::Deployment& d) {
    ModelSeries* ms = model(m);
    if (!ms) return nullptr;
    const std::size_t i = position(d, m.deployments);
    return i < ms->deployments.size() ? &ms->deployments[i] : nullptr;
  }
};

namespace {

// sharded_series(), kept in `owned`.
ShardedHistogram* sharded(std::vector<std::unique_ptr<ShardedHistogram>>& owned,
                          Family<Histogram>& family, const prometheus::Labels& labels,
                          const Histogram::BucketBoundaries& bounds, HistogramFolder& folder) {
  return owned.emplace_back(sharded_series(family, labels, bounds, folder)).get();
}

DeploymentSeries deployment_series(MetricsRegistry::Impl& f,
                                   std::vector<std::unique_ptr<ShardedHistogram>>& owned,
                                   const config::Model& m, const config::Deployment& d) {
  DeploymentSeries s;
  const std::string id = d.id();
  s.price = d.price;
  for (std::size_t i = 0; i < config::kAllPolicies.size(); ++i) {
    const auto p = config::kAllPolicies[i];
    s.routes[i] =
        &f.routes.Add({{"model", m.name}, {"deployment", id}, {"policy", config::to_string(p)}});
  }
  for (auto op : config::kAllOperations) {
    if (!d.serves(op)) continue;
    const prometheus::Labels genai{{"gen_ai_request_model", m.name},
                                   {"gen_ai_provider_name", d.provider},
                                   {"gen_ai_operation_name", config::gen_ai_name(op)},
                                   {"deployment", id}};
    const auto i = static_cast<std::size_t>(op);
    s.ttft[i] = sharded(owned, f.ttft, genai, kTtftBuckets, f.folder);
    s.tpot[i] = sharded(owned, f.tpot, genai, kTpotBuckets, f.folder);
    s.duration[i] = sharded(owned, f.duration, genai, kDurationBuckets, f.folder);
  }
  // pool_full: this worker's connection pool to the provider stayed full
  // (any deployment); queue_* and shared_state_unavailable: the deployment's
  // own max_concurrent.
  for (auto r : kSaturations) {
    if (r != Saturation::kPoolFull && !d.max_concurrent) continue;
    s.saturated[index_of(r)] = &f.saturated.Add({{"deployment", id}, {"reason", to_string(r)}});
  }
  // Only where a stream can be continued: a model with a deployment that
  // declares how.
  if (std::any_of(m.deployments.begin(), m.deployments.end(), [](const config::Deployment& x) {
        return x.continuation != config::Continuation::kNone;
      })) {
    static constexpr const char* kResults[] = {"continued", "failed", "not_continuable"};
    for (std::size_t i = 0; i < 3; ++i) {
      s.continuations[i] =
          &f.continuations.Add({{"model", m.name}, {"deployment", id}, {"result", kResults[i]}});
    }
  }
  for (bool reused : {false, true}) {
    s.upstream_requests[reused ? 1 : 0] =
        &f.upstream_requests.Add({{"deployment", id}, {"connection", reused ? "reused" : "new"}});
  }
  for (bool cached : {false, true}) {
    s.input_tokens[cached ? 1 : 0] = &f.deployment_input.Add(
        {{"model", m.name}, {"deployment", id}, {"cached", cached ? "true" : "false"}});
  }
  for (std::size_t i = 0; i < kOutcomes.size(); ++i) {
    s.attempts[i] =
        &f.attempts.Add({{"deployment", id}, {"outcome", routing::to_string(kOutcomes[i])}});
  }
  return s;
}

}  // namespace

Metrics::Metrics(MetricsRegistry& registry, const config::Config& cfg)
    : registry_(registry), impl_(std::make_unique<Impl>()) {
  auto& f = *registry.impl_;
  impl_->cfg = &cfg;
  for (const auto& m : cfg.models) {
    ModelSeries& ms = impl_->models.emplace_back();
    for (auto op : config::kAllOperations) {
      const auto i = static_cast<std::size_t>(op);
      const std::string name = config::gen_ai_name(op);
      for (auto o : kRequestOutcomes) {
        ms.requests[i][index_of(o)] = &f.requests.Add(
            {{"model", m.name}, {"outcome", to_string(o)}, {"gen_ai_operation_name", name}});
      }
      const bool served = std::any_of(m.deployments.begin(), m.deployments.end(),
                                      [&](const config::Deployment& d) { return d.serves(op); });
      if (!served) continue;
      auto usage = [&](const char* type) {
        return sharded(impl_->histograms, f.usage,
                       {{"gen_ai_request_model", m.name},
                        {"gen_ai_operation_name", name},
                        {"gen_ai_token_type", type}},
                       kTokenBuckets, f.folder);
      };
      ms.input_usage[i] = usage("input");
      ms.output_usage[i] = usage("output");
    }
    // (In Metrics::Affinity's order.)
    constexpr const char* kAffinityResults[] = {"hit", "miss", "broken"};
    for (std::size_t i = 0; i < ms.affinity.size(); ++i)
      ms.affinity[i] = &f.affinity.Add({{"model", m.name}, {"result", kAffinityResults[i]}});
    // (In RoutingState::LessonKind's and LessonResult's orders.)
    constexpr const char* kLessonKinds[] = {"recheck", "exploration", "size_race"};
    constexpr const char* kLessonResults[] = {"learnt", "missed", "failed"};
    for (std::size_t k = 0; k < ms.lessons.size(); ++k) {
      for (std::size_t r = 0; r < ms.lessons[k].size(); ++r) {
        ms.lessons[k][r] = &f.lessons.Add(
            {{"model", m.name}, {"kind", kLessonKinds[k]}, {"result", kLessonResults[r]}});
      }
    }
    ms.lesson_extra = &f.lesson_extra.Add({{"model", m.name}});
    for (const auto& d : m.deployments)
      ms.deployments.push_back(deployment_series(f, impl_->histograms, m, d));
  }
}

Metrics::~Metrics() = default;

void Metrics::on_attempt(const config::Model& model, const config::Deployment& d,
                         const routing::AttemptRecord& rec, config::Operation op) {
  ModelSeries* ms = impl_->model(model);
  DeploymentSeries* s = impl_->deployment(model, d);
  if (!ms || !s) return;
  const auto i = static_cast<std::size_t>(op);
  s->attempts[index_of(rec.outcome)]->Increment();
  if (rec.request_sent != routing::Clock::time_point{}) {
    s->upstream_requests[rec.reused_connection ? 1 : 0]->Increment();
  }
  if (auto t = rec.ttft(); t && s->ttft[i])
    s->ttft[i]->observe(std::chrono::duration<double>(*t).count());
  if (rec.outcome != routing::AttemptOutcome::kSuccess) return;
  if (auto tps = rec.tps(); tps && *tps > 0 && s->tpot[i]) s->tpot[i]->observe(1.0 / *tps);
  if (rec.request_sent != routing::Clock::time_point{} && s->duration[i]) {
    s->duration[i]->observe(
        std::chrono::duration<double>(routing::Clock::now() - rec.request_sent).count());
  }
  auto& f = *registry_.impl_;
  const double in = static_cast<double>(std::max<std::int64_t>(0, rec.input_tokens.value_or(0)));
  const double out = static_cast<double>(std::max<std::int64_t>(0, rec.output_tokens.value_or(0)));
  f.input_tokens.Increment(in);
  f.output_tokens.Increment(out);
  if (rec.input_tokens && ms->input_usage[i]) ms->input_usage[i]->observe(in);
  if (rec.output_tokens && ms->output_usage[i]) ms->output_usage[i]->observe(out);
  const double cached = std::clamp(static_cast<double>(rec.cached_input_tokens), 0.0, in);
  s->input_tokens[0]->Increment(in - cached);
  s->input_tokens[1]->Increment(cached);
  f.cost_total.Increment(s->price.cost_usd(rec.input_tokens.value_or(0), rec.cached_input_tokens,
                                           rec.output_tokens.value_or(0)));
}

void Metrics::on_route(const config::Model& model, const config::Deployment& d,
                       config::Policy policy) {
  if (DeploymentSeries* s = impl_->deployment(model, d)) s->routes[index_of(policy)]->Increment();
}

void Metrics::on_affinity(const config::Model& model, Affinity result) {
  if (ModelSeries* ms = impl_->model(model))
    ms->affinity[static_cast<std::size_t>(result)]->Increment();
}

void Metrics::on_lesson(const config::Model& model, routing::RoutingState::LessonKind kind,
                        routing::RoutingState::LessonResult result) {
  if (ModelSeries* ms = impl_->model(model))
    ms->lessons[static_cast<std::size_t>(kind)][static_cast<std::size_t>(result)]->Increment();
}

void Metrics::on_lesson_extra_request(const config::Model& model) {
  if (ModelSeries* ms = impl_->model(model)) ms->lesson_extra->Increment();
}

void Metrics::on_saturated(const config::Model& model, const config::Deployment& d,
                           Saturation reason) {
  if (DeploymentSeries* s = impl_->deployment(model, d)) {
    if (Counter* c = s->saturated[index_of(reason)]) c->Increment();
  }
}

void Metrics::on_continuation(const config::Model& model, const config::Deployment& broken,
                              Continued result) {
  if (DeploymentSeries* s = impl_->deployment(model, broken)) {
    if (Counter* c = s->continuations[static_cast<std::size_t>(result)]) c->Increment();
  }
}

void Metrics::on_request(const config::Model& model, RequestOutcome outcome, config::Operation op,
                         std::string_view api) {
  ModelSeries* ms = impl_->model(model);
  if (!ms) return;
  if (api.empty()) {
    ms->requests[static_cast<std::size_t>(op)][index_of(outcome)]->Increment();
    return;
  }
  // Another client API's series exist once it is used (a gateway whose
  // clients speak OpenAI only shows none): Family::Add finds them.
  registry_.impl_->requests
      .Add({{"model", model.name},
            {"outcome", to_string(outcome)},
            {"gen_ai_operation_name", config::gen_ai_name(op)},
            {"api", std::string(api)}})
      .Increment();
}

}  // namespace llmgate::gateway
