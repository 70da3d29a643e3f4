// The catalogue of llmgate's metrics as served on GET /metrics: type and labels.
// A label's value list is null when the values come from the configuration
// (model, deployment, provider names), else the complete set of values the
// gateway uses (see gateway/observe/metrics.cpp).
//
// Shared by the deployment-artifact tests: metric_names.test.mjs checks it
// against the real binary; grafana.test.mjs and prometheus_rules.test.mjs check
// the queries of deploy/ against it (through lib/promql.mjs).
const ATTEMPT_OUTCOMES = ["success", "connect_error", "upstream_status", "client_error", "ttft_timeout", "idle_timeout",
  "truncated", "malformed", "client_gone", "total_timeout", "hedge_lost"];
const POLICIES = ["latency", "throughput", "e2e", "cost", "balanced", "ordered", "round_robin", "random"];
const OPERATIONS = ["chat", "responses", "embeddings", "text_completion"];
const SHARED_OPS = ["rate_lease", "slot_acquire", "slot_release", "slot_renew", "publish", "usage_read", "usage_charge",
  "health_read"];
const UPSTREAM = { gen_ai_request_model: null, gen_ai_provider_name: null, gen_ai_operation_name: OPERATIONS, deployment: null };
export const GATEWAY_METRICS = {
  gen_ai_server_time_to_first_token_seconds: { type: "histogram", labels: UPSTREAM },
  gen_ai_server_time_per_output_token_seconds: { type: "histogram", labels: UPSTREAM },
  gen_ai_server_request_duration_seconds: { type: "histogram", labels: UPSTREAM },
  gen_ai_client_token_usage: { type: "histogram", labels: { gen_ai_request_model: null, gen_ai_operation_name: OPERATIONS, gen_ai_token_type: ["input", "output"] } },
  llmgate_gateway_overhead_seconds: { type: "histogram", labels: { phase: ["admission", "first_token"] } },
  // client_error: an upstream 4xx caused by the client's request, returned to it
  // as is (neither a gateway nor an upstream failure).
  // Refusals before any attempt have their reason as outcome (gateway/observe/vocabulary.h, Refused).
  llmgate_requests_total: { type: "counter", labels: { model: null, outcome: ["success", "error", "rejected", "client_error", "client_gone",
    "unauthenticated", "model_not_allowed", "rate_limited", "budget_exhausted", "shared_state_unavailable", "invalid_request", "not_found",
    "loop_detected"], gen_ai_operation_name: OPERATIONS } },
  llmgate_upstream_attempts_total: { type: "counter", labels: { deployment: null, outcome: ATTEMPT_OUTCOMES } },
  llmgate_fallbacks_total: { type: "counter", labels: { reason: ATTEMPT_OUTCOMES } },
  llmgate_hedges_total: { type: "counter", labels: { result: ["won", "lost", "denied"] } },
  llmgate_route_decisions_total: { type: "counter", labels: { model: null, deployment: null, policy: POLICIES } },
  llmgate_tokens_total: { type: "counter", labels: { type: ["input", "output"] } },
  llmgate_cost_usd_total: { type: "counter", labels: {} },
  llmgate_config_reloads_total: { type: "counter", labels: { result: ["success", "failure", "rejected"] } },
  llmgate_router_ejections_total: { type: "counter", labels: { deployment: null } },
  llmgate_requests_in_flight: { type: "gauge", labels: {} },
  llmgate_build_info: { type: "gauge", labels: { version: null } },
  llmgate_draining: { type: "gauge", labels: {} },
  llmgate_config_last_reload_successful: { type: "gauge", labels: {} },
  llmgate_config_last_reload_success_timestamp_seconds: { type: "gauge", labels: {} },
  llmgate_router_ttft_estimate_seconds: { type: "gauge", labels: { deployment: null } },
  llmgate_router_ttft_window_seconds: { type: "gauge", labels: { deployment: null, percentile: ["p50", "p95", "p99"] } },
  llmgate_router_output_tokens_per_second: { type: "gauge", labels: { deployment: null } },
  llmgate_router_deployment_state: { type: "gauge", labels: { deployment: null, state: ["healthy", "ejected", "probing", "cooling_down"] } },
  llmgate_router_score: { type: "gauge", labels: { model: null, deployment: null } },
  llmgate_router_rank: { type: "gauge", labels: { model: null, deployment: null } },
  llmgate_router_in_flight: { type: "gauge", labels: { deployment: null } },
  llmgate_router_error_rate: { type: "gauge", labels: { deployment: null } },
  // Only with shared_state: (docs/scale-out.md).
  llmgate_shared_state_up: { type: "gauge", labels: {} },
  llmgate_shared_state_operations_total: { type: "counter", labels: { op: SHARED_OPS, result: ["ok", "error", "timeout", "unavailable"] } },
  llmgate_shared_state_latency_seconds: { type: "histogram", labels: { op: SHARED_OPS } },
  llmgate_shared_state_fallbacks_total: { type: "counter", labels: { op: SHARED_OPS, mode: ["open", "closed"] } },
  llmgate_shared_state_events_applied_total: { type: "counter", labels: {} },
  // Only with tracing: (docs/tracing.md).
  llmgate_trace_spans_exported_total: { type: "counter", labels: {} },
  llmgate_trace_spans_dropped_total: { type: "counter", labels: { reason: ["queue_full", "export_failed"] } },
};
// Added by Prometheus to every series of a target (Kubernetes service discovery
// adds namespace and pod).
export const SCRAPE_LABELS = ["namespace", "pod", "job", "instance"];

// A sample name -> its family in GATEWAY_METRICS: {family, spec, suffix}; null if unknown.
// A histogram is only readable through its _bucket, _sum and _count series.
export function resolveMetric(name) {
  const spec = GATEWAY_METRICS[name];
  if (spec) return spec.type === "histogram" ? null : { family: name, spec, suffix: "" };
  const m = /^(.*)_(bucket|sum|count)$/.exec(name);
  if (m && GATEWAY_METRICS[m[1]]?.type === "histogram") return { family: m[1], spec: GATEWAY_METRICS[m[1]], suffix: m[2] };
  return null;
}
