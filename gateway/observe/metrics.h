// Prometheus metrics (prometheus-cpp core, served as text on GET /metrics).
//
// Label values come only from config (model names, provider names, deployment
// ids) or from fixed enums (outcomes, states, phases), never from requests, so
// series cardinality is bounded by the config. Two layers:
//   - MetricsRegistry: one per process, for its whole life (so counters survive
//     hot reloads): the registry, every family, and the series that do not
//     depend on config (in-flight, fallbacks, hedges, tokens, cost, gateway
//     overhead, reloads, draining). Its router gauges are refreshed at scrape
//     time from the current config and RoutingState: the router's beliefs.
//   - Metrics: the config-labelled series of one config snapshot, resolved
//     once when the snapshot is built, so the hot path only increments
//     pre-resolved pointers (atomics). Requests keep the snapshot they started
//     with; a reload builds a new Metrics over the same registry (prometheus-cpp
//     returns the existing child for the same labels, so counts continue).
// Beast-free.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "config/config.h"
#include "gateway/observe/vocabulary.h"
#include "routing/attempt_record.h"
#include "routing/routing_state.h"

namespace llmgate::gateway {

// Where the gateway's own time goes (llmgate_gateway_overhead_seconds).
enum class OverheadPhase {
  kAdmission,   // client request read -> upstream request sent, less upstream connect
  kFirstToken,  // first token read from upstream -> written to the client
};

// How a config reload ended (llmgate_config_reloads_total{result}).
enum class ReloadResult {
  kSuccess,
  kFailure,   // the new config does not load or cannot be applied (bad YAML, a bad CA file)
  kRejected,  // it loads, but would weaken security without saying so (config/reload_guard.h)
};
const char* to_string(ReloadResult r);

class MetricsRegistry {
 public:
  MetricsRegistry();
  ~MetricsRegistry();
  MetricsRegistry(const MetricsRegistry&) = delete;
  MetricsRegistry& operator=(const MetricsRegistry&) = delete;

  void request_started();
  void request_finished();
  // An attempt beyond the first, after a failure of `reason`.
  void on_fallback(routing::AttemptOutcome reason);
  void on_hedge(HedgeResult result);
  void on_overhead(OverheadPhase phase, std::chrono::nanoseconds d);
  // A config reload attempt; `unix_seconds` is when it happened.
  void on_reload(ReloadResult result, double unix_seconds);
  void set_draining(bool draining);
  void on_auth_rejected(AuthRejection reason);
  // A provider's upstream credential fetched (`ok`: until `expires_unix`)
  // or not (gateway/proxy/credential_refresher.h).
  void on_credential_refresh(std::string_view provider, bool ok, double expires_unix);
  // A request refused before any upstream attempt: llmgate_requests_total
  // with the reason as its outcome, for the model it named when known (else
  // model=""). Not per snapshot: refusals come before a model is resolved.
  void on_refused(config::Operation op, std::string_view model, Refused reason,
                  std::string_view api = {});

  // shared_state: (gateway/shared/shared_limits.h). The series exist once
  // enable_shared_state() is called (when it is configured).
  void enable_shared_state();
  void set_shared_up(bool up);
  void on_shared_op(SharedOp op, SharedResult result, double seconds);
  // A decision taken without the backend: `open` = by this replica's own limits.
  void on_shared_fallback(SharedOp op, bool open);
  void on_shared_event_applied();  // another replica's cooldown or ejection, applied here

  // tracing: (gateway/observe/tracer.h). The series exist once enable_tracing() is
  // called (when it is configured).
  void enable_tracing();
  void on_trace_spans(TraceSpanResult result, std::uint64_t n);

  // The text exposition format, with the router gauges refreshed first for
  // the deployments of `cfg` (gauges of deployments no longer configured are
  // removed).
  std::string scrape(const config::Config& cfg, routing::RoutingState& state);

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
  friend class Metrics;
};

class Metrics {
 public:
  Metrics(MetricsRegistry& registry, const config::Config& cfg);
  ~Metrics();
  Metrics(const Metrics&) = delete;
  Metrics& operator=(const Metrics&) = delete;

  // Models and deployments are those of the config this object was built
  // for (by address: each series is resolved once, when the snapshot is
  // built, never looked up by name per request); others are ignored.
  //
  // One finished upstream attempt on `d` for a request of `model` (its
  // TTFT, time per token, duration and usage are per operation).
  void on_attempt(const config::Model& model, const config::Deployment& d,
                  const routing::AttemptRecord& rec,
                  config::Operation op = config::Operation::kChat);
  // One finished request of a configured model.
  // `api`: the client API when it is not the operation's own OpenAI endpoint
  // ("messages": Anthropic's, serving chat), else empty; its own label.
  void on_request(const config::Model& model, RequestOutcome outcome,
                  config::Operation op = config::Operation::kChat, std::string_view api = {});
  // The router's first choice for a request.
  void on_route(const config::Model& model, const config::Deployment& d, config::Policy policy);
  // Prompt-cache affinity for a request with a conversation: its first
  // choice holds a prefix of it (hit), another deployment does but was not
  // chosen (broken: health, load or a faster one won), or none does (miss).
  enum class Affinity { kHit, kMiss, kBroken };
  void on_affinity(const config::Model& model, Affinity result);
  // An attempt made to learn about a deployment ended (llmgate_lessons_total),
  // and a learning race added an upstream request
  // (llmgate_lesson_extra_requests_total): docs/routing.md, "What learning costs".
  void on_lesson(const config::Model& model, routing::RoutingState::LessonKind kind,
                 routing::RoutingState::LessonResult result);
  void on_lesson_extra_request(const config::Model& model);
  // A candidate passed over without an attempt.
  void on_saturated(const config::Model& model, const config::Deployment& d, Saturation reason);
  // A stream of `model` that broke off on `broken` after its first token
  // (docs/failure-semantics.md, "Continuation"): continued to its end,
  // not (every continuation failed, or it broke too often), or not
  // continuable (a tool call, a refusal, audio, several choices).
  enum class Continued { kContinued, kFailed, kNotContinuable };
  void on_continuation(const config::Model& model, const config::Deployment& broken,
                       Continued result);

  MetricsRegistry& shared() { return registry_; }

 private:
  struct Impl;
  MetricsRegistry& registry_;
  std::unique_ptr<Impl> impl_;
};

}  // namespace llmgate::gateway
