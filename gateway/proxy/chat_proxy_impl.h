// Private to the proxy: ChatProxy, one routed request (chat_proxy.cpp: the
// plan walked, races, the final answers; chat_proxy_attempt.cpp: one attempt
// and its bookkeeping; api_request.cpp: the request's entry, admission to
// the proxy's end). Includes Beast: include only from those files.
#pragma once

#include <algorithm>
#include <boost/container/small_vector.hpp>
#include <chrono>
#include <optional>
#include <span>
#include <string>
#include <variant>
#include <vector>

#include "gateway/access/admission.h"
#include "gateway/apis/chat_request.h"
#include "gateway/apis/client_api.h"
#include "gateway/observe/log.h"
#include "gateway/observe/redact.h"
#include "gateway/observe/route_history.h"
#include "gateway/observe/tracer.h"
#include "gateway/proxy/attempt_context.h"
#include "gateway/proxy/attempt_result.h"
#include "gateway/proxy/chat_proxy.h"
#include "gateway/proxy/client_stream.h"
#include "gateway/proxy/failover_policy.h"
#include "gateway/proxy/observers.h"
#include "gateway/proxy/race.h"
#include "gateway/proxy/relay_state.h"
#include "gateway/proxy/response_resource.h"
#include "gateway/proxy/upstream_attempt.h"
#include "gateway/shared/shared_limits.h"
#include "routing/route_override.h"
#include "routing/router.h"

namespace llmgate::gateway {

// A half-open probe slot handed out for a deployment that is not tried
// (skipped, or planned but not reached) is given back when the request ends,
// on every path.
class ProbeSlots {
 public:
  ProbeSlots(routing::HealthTracker& tracker, const config::Model& model)
      : tracker_(tracker), model_(model) {}
  ProbeSlots(const ProbeSlots&) = delete;
  ProbeSlots& operator=(const ProbeSlots&) = delete;
  ~ProbeSlots() {
    for (std::size_t i = 0; i < probe_.size(); ++i) {
      if (probe_[i] && !tried_[i]) tracker_.release_probe(model_.deployments[i].id());
    }
  }
  // The health check's answer for the model's deployments, in their order:
  // the probe slots it handed out are this request's.
  void taken(std::span<const routing::Availability> health) {
    probe_.clear();
    for (const routing::Availability& a : health) probe_.push_back(a.probe);
    tried_.assign(health.size(), false);
  }
  void tried(const routing::PlannedCandidate& pc) {
    tried_[static_cast<std::size_t>(pc.candidate.deployment - model_.deployments.data())] = true;
  }

 private:
  routing::HealthTracker& tracker_;
  const config::Model& model_;
  boost::container::small_vector<bool, 8> probe_, tried_;
};

// The candidate's deployment declares how it continues a broken stream.
inline bool continues(const routing::PlannedCandidate& pc) {
  return pc.candidate.deployment->continuation != config::Continuation::kNone;
}

inline RequestOutcome to_request_outcome(routing::AttemptOutcome o) {
  switch (o) {
    case routing::AttemptOutcome::kSuccess:
      return RequestOutcome::kSuccess;
    case routing::AttemptOutcome::kClientError:
      return RequestOutcome::kClientError;
    case routing::AttemptOutcome::kClientGone:
      return RequestOutcome::kClientGone;
    default:
      return RequestOutcome::kError;
  }
}

class ChatProxy {
 public:
  using AttemptOutcome = routing::AttemptOutcome;
  using AttemptRecord = routing::AttemptRecord;
  using Clock = std::chrono::steady_clock;

  ChatProxy(Worker& worker, const Snapshot& snapshot, beast::tcp_stream& client,
            const Request& client_request, const RequestContext& rc, const ClientApi& api,
            ChatRequest req, routing::RouteOverride route, const config::GatewayKey* key,
            std::optional<std::string> stored_at, const RequestTrace* request_trace)
      : snapshot_(snapshot),
        observers_(snapshot, worker.history),
        cfg_(*snapshot.config),
        rs_(*snapshot.routing),
        key_(key),
        stored_at_(std::move(stored_at)),
        req_(std::move(req)),
        route_(std::move(route)),
        ctx_{worker, snapshot, cfg_, client, client_request, rc, api, req_, trace_} {
    trace_.explain = may_explain(cfg_, key);
    ctx_.key = key;
    ctx_.request_trace = request_trace;
  }

  net::awaitable<bool> run(const config::Model& model);
  // The request begins and is over (on every path, cancellation included):
  // its observers count it in flight, then end it -- metrics, the key's
  // charge, the SERVER span.
  void observe_start() const { observers_.started(); }
  void observe_end(const config::Model& model) const {
    observers_.ended(view(model), used_, Clock::now());
  }
  // The drain ran out of time while this request was in flight (its run()
  // was cancelled): end it explicitly — an error event on a committed
  // stream (never [DONE]), else a 503 — unless a write was cut part-way,
  // when only closing is safe. The connection is not reused.
  net::awaitable<void> end_for_shutdown();

 private:
  // The candidates in order, one by one or hedged in pairs, until one
  // answers the client (whether the connection may be kept alive).
  net::awaitable<std::optional<bool>> try_candidates(ProbeSlots& probes,
                                                     const config::Hedging& hedging);
  // One attempt with its bookkeeping (in-flight count, statistics, health),
  // recorded on every path including cancellation.
  net::awaitable<AttemptResult> run_attempt(const routing::PlannedCandidate& pc, int branch);
  // Whether reserve() would answer true at once: no max_concurrent, room in
  // the worker's pool (the usual case, without reserve()'s coroutine frame).
  bool reserved_at_once(const routing::Candidate& c) const;
  // A slot of the deployment's max_concurrent (when it has one) and room in
  // the worker's pool: false when saturated (recorded, no attempt made).
  net::awaitable<bool> reserve(const routing::Candidate& c, ConcurrencyLimiter::Slot& slot,
                               SharedLimits::Slot& shared_slot);
  // Why a pair of candidates races.
  enum class HedgeKind {
    kBudget,    // hedging is on: at the hedge delay, if the model's hedge budget allows
    kLearning,  // the first is explored, re-checked or probed: always, outside the budget
    kStall,     // hedging is off: only once another attempt at the first's deployment
                // has waited as long (hedging.on_stall), from the retry budget
  };
  // Two attempts, the second started after the first's hedge delay.
  net::awaitable<AttemptResult> hedged(const routing::PlannedCandidate& first,
                                       const routing::PlannedCandidate& second, HedgeKind kind,
                                       bool& second_started);
  // The attempt is over: ends `in_flight` and records the attempt (one lock
  // of the statistics), then what it means for health, metrics and traces.
  void finish_attempt(const routing::PlannedCandidate& pc, AttemptRecord& rec, int branch,
                      const SpanId& span, routing::StatsRegistry::InFlight& in_flight);
  // The next candidate beyond max_attempts joins the end of the plan (the
  // plan's capacity was reserved for it: references into it stay valid).
  void promote_reserve();
  void on_attempt_failed(const AttemptRecord& rec);
  // The fleet's affinity entries of this request's prefixes and key
  // (shared_state), into this replica's table.
  net::awaitable<void> learn_fleet_affinity(Clock::time_point now);
  // The route: the model's deployments as measured now, through the router.
  // The probe slots the health check hands out are `probes`'.
  routing::RouteDecision decide_route(const routing::RouteRequest& rq, ProbeSlots& probes,
                                      Clock::time_point now);
  // Under e2e the client waits for the whole answer: the first side of a
  // race learning about a deployment may decline it (hedged()).
  bool may_decline(HedgeKind kind) const {
    return kind == HedgeKind::kLearning && trace_.decision.policy == config::Policy::kE2e;
  }
  // A streaming client is never given a probe's stream (it may break after
  // its first token, as what ejected the deployment did): the probe declines
  // it for the other side and reads on to prove itself (docs/routing.md,
  // "Health").
  bool probe_declines(const routing::PlannedCandidate& pc) const { return pc.probe && req_.stream; }
  // A conversation: prefixes or a conversation key (prompt-cache affinity).
  bool conversation() const { return req_.prefixes.count > 0 || req_.conversation_key != 0; }
  // The request's whole prompt as a prefix (what its conversation key names).
  config::PrefixCut whole_prompt() const {
    if (const config::PrefixCut* w = req_.prefixes.whole()) return *w;
    return {req_.conversation_key, req_.prompt.bytes, req_.prompt.media};
  }
  routing::PromptAffinity::Found find_affinity(Clock::time_point now) const {
    return rs_.affinity.find(req_.prefixes.view(), req_.conversation_key, whole_prompt(), now);
  }
  // Continuation (continuation.h): whether this request's stream may be
  // continued after a break, the next continuation's request, and the end
  // of a broken stream none continued (the break's error event).
  bool wants_continuation() const;
  // A candidate from the plan's i-th on, or one in reserve, can continue.
  bool continuer_from(std::size_t i) const;
  void prepare_continuation(const routing::Candidate& c);
  net::awaitable<bool> end_broken_stream();
  // Tokens and cost of an attempt the client was given (key limits, budgets).
  void charge(const AttemptRecord& rec, const routing::Candidate& c);
  // The answer when no deployment could be planned, or every attempt failed.
  net::awaitable<bool> respond_no_route();
  net::awaitable<bool> respond_all_failed();
  // The request's answer is settled: its observers conclude it (the log
  // line, the console's route event).
  void conclude(const AttemptRecord* final) const;
  // The request as its observers see it.
  RequestView view(const config::Model& model) const;
  // The attempt tried to learn about its deployment is over: what it
  // taught, for the metrics, /admin/routes and the request's log line.
  void note_lesson(const routing::PlannedCandidate& pc, const AttemptRecord& rec,
                   Clock::time_point end);

  const Snapshot& snapshot_;
  const RequestObservers observers_;
  const config::Config& cfg_;
  routing::RoutingState& rs_;
  const config::GatewayKey* key_;  // the caller's gateway key, if keys are configured
  // The provider that stored the response previous_response_id names, when
  // this gateway saw it created.
  std::optional<std::string> stored_at_;
  const config::Model* model_ = nullptr;  // the requested model, once run() starts
  ChatRequest req_;
  routing::RouteOverride route_;
  RouteTrace trace_;
  AttemptContext ctx_;
  Clock::time_point start_ = Clock::now();
  std::optional<AttemptRecord> last_failed_;
  bool total_expired_ = false;  // a candidate was passed over for its timeouts.total
  // Input + output tokens of the attempt that answered and their cost (key
  // rate limits and budgets).
  KeyStore::Charge used_;
  // The attempt that answered: deployment, provider and tokens (tracing).
  std::optional<AttemptRecord> answered_;
  const routing::Candidate* answered_by_ = nullptr;
  RequestOutcome outcome_ = RequestOutcome::kClientGone;
  std::optional<StreamContinuation> continuation_;
  config::CommitAfter commit_after_;  // the model's speed guard (routing commit_after)
  // The answer came while the other side of a learning race still runs on
  // to its first token: the request is concluded (log line, route event)
  // when the race ends, with what that side taught, but its time is the
  // answer's.
  std::optional<AttemptRecord> pending_conclusion_;
  std::optional<Clock::time_point> ended_at_;
};

}  // namespace llmgate::gateway
