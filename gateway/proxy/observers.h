// Observation as one phase (observers.cpp), after Pingora's `logging` phase
// and Envoy's access log: a routed request's lifecycle is told as events --
// each attempt as it ends, the request as it concludes (its answer and what
// a learning race taught) and as it ends -- and the observers make of them
// what they keep: the attempt's metrics and CLIENT span, the log line, the
// console's route event and the continuation metric, the request's metrics,
// key charge and SERVER span; and the routing decisions as they are made
// (the route, cache affinity, fail-overs, hedges, saturation, lessons) for
// their metrics. ChatProxy routes; it does not write any of these itself.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>

#include "gateway/access/auth.h"
#include "gateway/apis/chat_request.h"
#include "gateway/apis/client_api.h"
#include "gateway/observe/metrics.h"
#include "gateway/observe/tracer.h"
#include "gateway/observe/vocabulary.h"
#include "gateway/proxy/attempt_context.h"
#include "gateway/proxy/continuation.h"
#include "gateway/proxy/response_owners.h"
#include "gateway/proxy/snapshot.h"
#include "routing/attempt_record.h"
#include "routing/router.h"

namespace llmgate::gateway {

class RouteHistory;

// An attempt is over (its statistics and health already updated).
struct AttemptEnded {
  const routing::PlannedCandidate& pc;
  const routing::AttemptRecord& rec;
  int branch;          // the side of a hedge race, else 0
  const SpanId& span;  // its CLIENT span's id (tracing)
  std::chrono::steady_clock::time_point end;
};

// The request as its observers see it: what was asked, how it was routed,
// who answered, what failed. Views into the proxy, valid during the call.
struct RequestView {
  const RequestContext& rc;
  const ClientApi& api;
  const ChatRequest& req;
  const config::Model& model;
  const config::GatewayKey* key;
  const RouteTrace& trace;
  RequestOutcome outcome;
  const routing::AttemptRecord* answered;     // the attempt that answered, if one did
  const routing::Candidate* answered_by;      // ... and its candidate
  const routing::AttemptRecord* last_failed;  // the last attempt that failed, if any
  const StreamContinuation* continuation;     // when the stream may be continued
  std::chrono::steady_clock::time_point start;
  const RequestTrace* request_trace;  // traced: the request's trace
};

// A stored response's call (response_resource.h) as its observers see it:
// forwarded to the provider that created the response, or refused. Views
// into the exchange, valid during the call.
struct ResourceView {
  const RequestContext& rc;
  std::string_view method;
  const ResponsePath& path;
  const config::GatewayKey* key;
  int status;                        // what the client got (0: nothing, e.g. it hung up)
  std::string_view refusal;          // the message of the error it got, if one
  const config::Provider* upstream;  // where it was forwarded (null: nowhere)
  // The upstream exchange, when there was one: its span id (traced), start,
  // end, and the provider's status (0: none).
  SpanId upstream_span;
  std::optional<std::chrono::steady_clock::time_point> upstream_start, upstream_end;
  int upstream_status;
  std::chrono::steady_clock::time_point start;
  const RequestTrace* request_trace;  // traced: the request's trace
};

class RequestObservers {
 public:
  RequestObservers(const Snapshot& snapshot, RouteHistory* history)
      : snapshot_(snapshot), history_(history) {}

  // The request begins (after admission): it is in flight until ended().
  void started() const;
  // Every attempt, as it ends: its metrics; traced, its CLIENT span.
  void attempt_ended(const RequestView& r, const AttemptEnded& a) const;
  // The request's answer is settled (and what a learning race taught with
  // it): the log line about `final` (the attempt the line describes, if
  // any), the continuation metric, and for the console a route event when
  // it failed over, was hedged or failed.
  void concluded(const RequestView& r, const routing::AttemptRecord* final,
                 std::chrono::steady_clock::time_point end) const;
  // The request is over: no longer in flight; its metrics, the key's charge (`used`: the tokens
  // and cost of the attempt its client was given) and, traced, its SERVER
  // span.
  void ended(const RequestView& r, const KeyStore::Charge& used,
             std::chrono::steady_clock::time_point end) const;

  // Routing decisions, as they are made.
  // The plan: its first choice (by `d.policy`); for a request that continues
  // a conversation (`conversation`), whether that choice holds its prompt
  // cache (a hit), another candidate does (broken), or none (a miss).
  void routed(const config::Model& model, const routing::RouteDecision& d, bool conversation) const;
  // Another candidate is tried after an attempt that ended so.
  void failing_over(routing::AttemptOutcome after) const;
  void hedged(HedgeResult h) const;
  // A candidate was passed over for local saturation (never an attempt).
  void saturated(const config::Model& model, const config::Deployment& d, Saturation why) const;
  // The shared state could not be reached for `op` (`fail_open`: went on
  // without it).
  void shared_state_unreachable(SharedOp op, bool fail_open) const;
  // A lesson (re-check, exploration, size race) ended so; `extra_request`:
  // its race started both sides (an upstream request a static choice would
  // not have made).
  void lesson(const config::Model& model, routing::RoutingState::LessonKind kind,
              routing::RoutingState::LessonResult result) const;
  void lesson_extra_request(const config::Model& model) const;

  // A stored response's call is over: its log line; traced, its SERVER span
  // and the CLIENT span of its upstream exchange.
  void resource_ended(const ResourceView& r, std::chrono::steady_clock::time_point end) const;

  // The SERVER span (tests, and ended()).
  static SpanData server_span(const RequestView& r, const RequestTrace& t,
                              std::chrono::steady_clock::time_point end);

 private:
  void log_line(const RequestView& r, const routing::AttemptRecord* final,
                std::chrono::steady_clock::time_point end) const;
  void route_event(const RequestView& r, const routing::AttemptRecord* final) const;
  void attempt_span(const RequestView& r, const AttemptEnded& a) const;
  void resource_spans(const ResourceView& r, std::chrono::steady_clock::time_point end) const;

  const Snapshot& snapshot_;
  RouteHistory* history_;  // the console's (null: none)
};

}  // namespace llmgate::gateway
