// Private to gateway/observe/: the process-wide metric families
// (MetricsRegistry::Impl) and what their series are built from, shared by
// metrics_registry.cpp (the registry: process-wide series, scrape) and
// metrics.cpp (a snapshot's series, resolved per config).
#pragma once

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

#include "gateway/observe/metrics.h"
#include "gateway/observe/sharded_histogram.h"
#include "routing/ranking.h"

namespace llmgate::gateway {

using prometheus::Counter;
using prometheus::Family;
using prometheus::Gauge;
using prometheus::Histogram;

inline constexpr const char* kVersion = "0.1";

// OpenTelemetry's GenAI TTFT buckets, with a tail to 80 s for slow reasoning models.
inline const Histogram::BucketBoundaries kTtftBuckets = {0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08,
                                                         0.1,   0.25,  0.5,  0.75, 1.0,  2.5,  5.0,
                                                         7.5,   10.0,  20.0, 40.0, 80.0};
// OpenTelemetry's GenAI time-per-output-token buckets, with a head down to
// 1 ms: hosted models stream at 100-1000 tokens/s.
inline const Histogram::BucketBoundaries kTpotBuckets = {
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5};
// OpenTelemetry's GenAI operation-duration buckets, with a tail to 300 s for long generations.
inline const Histogram::BucketBoundaries kDurationBuckets = {
    0.01, 0.02, 0.04,  0.08,  0.16,  0.32,  0.64,  1.28,
    2.56, 5.12, 10.24, 20.48, 40.96, 81.92, 150.0, 300.0};
// The gateway's own cost: tens of microseconds when all is well.
inline const Histogram::BucketBoundaries kOverheadBuckets = {
    0.00001, 0.000025, 0.00005, 0.0001, 0.00025, 0.0005, 0.001,
    0.0025,  0.005,    0.01,    0.025,  0.05,    0.1};
// OpenTelemetry's GenAI token-usage buckets.
inline const Histogram::BucketBoundaries kTokenBuckets = {
    1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216, 67108864};

inline constexpr std::array kOutcomes = {
    routing::AttemptOutcome::kSuccess,        routing::AttemptOutcome::kConnectError,
    routing::AttemptOutcome::kUpstreamStatus, routing::AttemptOutcome::kClientError,
    routing::AttemptOutcome::kTtftTimeout,    routing::AttemptOutcome::kIdleTimeout,
    routing::AttemptOutcome::kTruncated,      routing::AttemptOutcome::kMalformed,
    routing::AttemptOutcome::kClientGone,     routing::AttemptOutcome::kTotalTimeout,
    routing::AttemptOutcome::kHedgeLost,      routing::AttemptOutcome::kCredentialError};
inline constexpr std::array kStates = {
    routing::HealthState::kHealthy, routing::HealthState::kEjected, routing::HealthState::kProbing,
    routing::HealthState::kCoolingDown};
inline constexpr std::array kWindowPercentiles = {"p50", "p95", "p99"};

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
              kOutcomes.back() == routing::AttemptOutcome::kCredentialError);
static_assert(in_declaration_order(kSharedOps) && kSharedOps.back() == SharedOp::kAffinityWrite);
static_assert(in_declaration_order(kSharedResults) &&
              kSharedResults.back() == SharedResult::kUnavailable);
static_assert(in_declaration_order(config::kAllPolicies) &&
              config::kAllPolicies.back() == config::Policy::kRandom);

inline constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

template <typename T, typename Builder>
Family<T>& family(Builder builder, prometheus::Registry& r, const char* name, const char* help) {
  return builder.Name(name).Help(help).Register(r);
}

// The series of `family` with `labels`, observed through a ShardedHistogram:
// the bucket bounds given once, for both (they must agree).
inline std::unique_ptr<ShardedHistogram> sharded_series(Family<Histogram>& family,
                                                        const prometheus::Labels& labels,
                                                        const Histogram::BucketBoundaries& bounds,
                                                        HistogramFolder& folder) {
  return std::make_unique<ShardedHistogram>(family.Add(labels, bounds), bounds, folder);
}

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
  Family<Counter>& credential_refreshes = family<Counter>(
      prometheus::BuildCounter(), registry, "llmgate_credential_refreshes_total",
      "Upstream credentials fetched from token endpoints (Google, Entra ID, AWS STS) by provider "
      "and result (success, failure)");
  Family<Gauge>& credential_expiry = family<Gauge>(
      prometheus::BuildGauge(), registry, "llmgate_credential_expiry_timestamp_seconds",
      "Unix time the provider's current upstream credential expires");
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

}  // namespace llmgate::gateway
