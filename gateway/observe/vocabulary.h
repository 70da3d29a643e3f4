// The gateway's fixed vocabularies: how a request ended, how a hedge ended,
// why a request was refused by auth, why a candidate was passed over, what
// was asked of the shared state and how it went. Each is
// an enum with one to_string, used alike by the request log, the metric
// labels (series indexed by the enum, resolved once) and response headers.
// Attempt outcomes are routing's (routing/attempt_record.h). Beast-free.
#pragma once

#include <array>
#include <cstddef>

namespace llmgate::gateway {

// How a request of a configured model ended (llmgate_requests_total{outcome}).
enum class RequestOutcome {
  kSuccess,
  kError,        // every attempt failed, or the stream failed after it started
  kRejected,     // no route (503/429 from the plan), or refused before any attempt
  kClientError,  // an upstream 4xx caused by the request, returned as is
  kClientGone,   // the client disconnected first
};
inline constexpr std::array kRequestOutcomes = {
    RequestOutcome::kSuccess, RequestOutcome::kError, RequestOutcome::kRejected,
    RequestOutcome::kClientError, RequestOutcome::kClientGone};
const char* to_string(RequestOutcome o);

// Why a request was refused before any upstream attempt: its outcome in
// llmgate_requests_total and the `reason` of its log line (docs/operations.md,
// "Refusals"). The first four are the key's (llmgate_auth_rejections_total's
// reasons); shared_state_unavailable is the gateway's own failure (a closed-mode
// Redis outage), counted as an error by the recording rules.
enum class Refused {
  kUnauthenticated,
  kModelNotAllowed,
  kRateLimited,
  kBudgetExhausted,
  kSharedStateUnavailable,
  kInvalidRequest,  // the body, the model's endpoint, a routing override
  kNotFound,        // an unknown model, another key's stored conversation
  kLoopDetected,    // our own Via name came back
};
const char* to_string(Refused r);

// How a started hedge ended, or why it did not start (llmgate_hedges_total{result}).
enum class HedgeResult {
  kWon,     // the hedge produced the first token first
  kLost,    // the primary did
  kDenied,  // due, but the model's hedge budget was spent
};
inline constexpr std::array kHedgeResults = {HedgeResult::kWon, HedgeResult::kLost,
                                             HedgeResult::kDenied};
const char* to_string(HedgeResult r);

// Why gateway-key auth refused a request (llmgate_auth_rejections_total{reason}).
enum class AuthRejection {
  kUnauthenticated,       // /v1/*: no key, or not a configured one
  kAdminUnauthenticated,  // /admin/*: not the admin key
  kModelNotAllowed,       // the key may not use the model
  kRateLimited,           // the key's request or token rate
  kBudgetExhausted,       // the key's daily or monthly spend budget
};
inline constexpr std::array kAuthRejections = {
    AuthRejection::kUnauthenticated, AuthRejection::kAdminUnauthenticated,
    AuthRejection::kModelNotAllowed, AuthRejection::kRateLimited, AuthRejection::kBudgetExhausted};
const char* to_string(AuthRejection r);

// Why a candidate was passed over without an attempt: local saturation
// (llmgate_deployment_saturated_total{reason}). Never an upstream failure.
enum class Saturation {
  kQueueFull,     // at max_concurrent, its wait queue full
  kQueueTimeout,  // at max_concurrent, no slot within the connect timeout
  kPoolFull,      // this worker's connection pool to the provider is full
  // Its max_concurrent is shared (shared_state:) and the shared state is
  // unavailable under on_failure: closed: not saturated, but not tried either.
  kSharedStateUnavailable,
};
inline constexpr std::array kSaturations = {Saturation::kQueueFull, Saturation::kQueueTimeout,
                                            Saturation::kPoolFull,
                                            Saturation::kSharedStateUnavailable};
const char* to_string(Saturation s);

// An operation on the shared-state backend, shared_state:
// (llmgate_shared_state_operations_total{op}, ..._fallbacks_total{op}).
enum class SharedOp {
  kRateLease,    // a key's request tokens leased from the shared bucket
  kSlotAcquire,  // a deployment's max_concurrent slot taken
  kSlotRelease,
  kSlotRenew,      // held slots' expiry pushed back
  kPublish,        // a cooldown or ejection told to the other replicas
  kUsageRead,      // a key's shared token level and spend, refreshed
  kUsageCharge,    // an answer's tokens and cost added to them
  kHealthRead,     // running cooldowns and ejections, read on (re)connect
  kAffinityRead,   // where a conversation's prefixes were served (prompt-cache affinity)
  kAffinityWrite,  // where a request's prefixes were served, told to the fleet
};
inline constexpr std::array kSharedOps = {
    SharedOp::kRateLease,    SharedOp::kSlotAcquire,  SharedOp::kSlotRelease, SharedOp::kSlotRenew,
    SharedOp::kPublish,      SharedOp::kUsageRead,    SharedOp::kUsageCharge, SharedOp::kHealthRead,
    SharedOp::kAffinityRead, SharedOp::kAffinityWrite};
const char* to_string(SharedOp op);

// How one ended (llmgate_shared_state_operations_total{result}).
enum class SharedResult {
  kOk,
  kError,        // Redis answered with an error
  kTimeout,      // no answer within shared_state.timeout
  kUnavailable,  // not connected
};
inline constexpr std::array kSharedResults = {SharedResult::kOk, SharedResult::kError,
                                              SharedResult::kTimeout, SharedResult::kUnavailable};
const char* to_string(SharedResult r);

// What became of a finished span (llmgate_trace_spans_exported_total and
// llmgate_trace_spans_dropped_total{reason}).
enum class TraceSpanResult {
  kExported,
  kQueueFull,     // dropped: the buffer was full (the collector is slow or down)
  kExportFailed,  // dropped: its batch was refused, or the export failed or timed out
};

// The index of an enum value in its kXxx array (they are listed in order).
template <class E>
constexpr std::size_t index_of(E e) {
  return static_cast<std::size_t>(e);
}

}  // namespace llmgate::gateway
