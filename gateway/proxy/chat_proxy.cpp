// POST /v1/chat/completions: admit, plan, attempt, commit, relay, account.
//
// The request lifecycle (docs/ARCHITECTURE.md):
//   - Every attempt is streamed upstream, whatever the client asked for, so the
//     gateway can time the first token and count tokens exactly.
//   - Before the first output token an attempt may fail for any reason
//     (connect, status, malformed event, TTFT deadline) and the next candidate
//     is tried: nothing of a failed attempt has reached the client.
//   - At the first output token a streaming attempt commits: the client gets
//     the response head and every event held so far, then each event as it
//     completes. A failure after that ends the stream with an explicit
//     `data: {"error":...}` event and no [DONE].
//   - A non-streaming client gets one chat.completion assembled from the
//     events; since nothing is sent before the end, any upstream failure can
//     still fail over.
//   - The client connection is watched while all this runs: a disconnect
//     cancels the attempt, which closes the upstream connection.
#include "gateway/proxy/chat_proxy.h"

#include <algorithm>
#include <boost/container/small_vector.hpp>
#include <chrono>
#include <optional>
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
namespace {

using routing::AttemptOutcome;
using routing::AttemptRecord;
using Clock = std::chrono::steady_clock;

// A half-open probe slot handed out for a deployment that is not tried
// (skipped, or planned but not reached) is given back when the request ends,
// on every path.
class ProbeSlots {
 public:
  // `health`: the model's deployments', in their order.
  ProbeSlots(routing::HealthTracker& tracker, const config::Model& model,
             const std::vector<routing::Availability>& health)
      : tracker_(tracker), model_(model), health_(health), tried_(health.size(), false) {}
  ProbeSlots(const ProbeSlots&) = delete;
  ProbeSlots& operator=(const ProbeSlots&) = delete;
  ~ProbeSlots() {
    for (std::size_t i = 0; i < health_.size(); ++i) {
      if (health_[i].probe && !tried_[i]) tracker_.release_probe(model_.deployments[i].id());
    }
  }
  void tried(const routing::PlannedCandidate& pc) {
    tried_[static_cast<std::size_t>(pc.candidate.deployment - model_.deployments.data())] = true;
  }

 private:
  routing::HealthTracker& tracker_;
  const config::Model& model_;
  const std::vector<routing::Availability>& health_;
  boost::container::small_vector<bool, 8> tried_;
};

// The candidate's deployment declares how it continues a broken stream.
bool continues(const routing::PlannedCandidate& pc) {
  return pc.candidate.deployment->continuation != config::Continuation::kNone;
}

RequestOutcome to_request_outcome(AttemptOutcome o) {
  switch (o) {
    case AttemptOutcome::kSuccess:
      return RequestOutcome::kSuccess;
    case AttemptOutcome::kClientError:
      return RequestOutcome::kClientError;
    case AttemptOutcome::kClientGone:
      return RequestOutcome::kClientGone;
    default:
      return RequestOutcome::kError;
  }
}

class ChatProxy {
 public:
  ChatProxy(Worker& worker, const Snapshot& snapshot, beast::tcp_stream& client,
            const Request& client_request, const RequestContext& rc, const ClientApi& api,
            ChatRequest req, routing::RouteOverride route, const config::GatewayKey* key,
            std::optional<std::string> stored_at, const RequestTrace* request_trace)
      : snapshot_(snapshot),
        observers_(snapshot, worker.history),
        cfg_(*snapshot.config),
        rs_(*snapshot.routing),
        metrics_(*snapshot.metrics),
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
  // The request is over (on every path, cancellation included): its
  // observers end it -- metrics, the key's charge, the SERVER span.
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
  Metrics& metrics_;
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

net::awaitable<bool> ChatProxy::run(const config::Model& model) {
  model_ = &model;
  const auto now = Clock::now();
  const auto scope = key_ && key_->allow_overrides ? routing::OverrideScope::kWiden
                                                   : routing::OverrideScope::kNarrow;
  routing::RouteRequest rq{&cfg_, &model, routing::apply_override(model.routing, route_, scope),
                           route_.order, req_.max_tokens};
  rq.operation = req_.operation;
  // What learning may still cost this model (docs/routing.md, "What
  // learning costs"): a re-check or exploration only while it has room.
  routing::RoutingState::Learning& learning = rs_.learning(model.name);
  learning.budget.deposit(now);
  learning.requests.fetch_add(1, std::memory_order_relaxed);
  rq.may_learn = cfg_.routing.learning_budget > 0 && learning.budget.has_room();
  if (!rq.may_learn) learning.without_budget.fetch_add(1, std::memory_order_relaxed);
  rq.prompt_bytes = req_.prompt.bytes;
  rq.prompt_media = req_.prompt.media;
  // Where a prefix of this conversation is cached (docs/routing.md,
  // "Prompt-cache affinity").
  if (conversation()) {
    rq.cached = find_affinity(now);
    // Another replica may have served it (shared_state): the fleet's entries.
    if (rq.cached.count == 0 && snapshot_.shared && rs_.affinity.ttl().count() > 0) {
      co_await learn_fleet_affinity(now);
      rq.cached = find_affinity(now);
    }
  }
  // A conversation stored at a provider continues there, and only there.
  if (stored_at_) {
    rq.pinned_provider = *stored_at_;
    rq.pinned_because = "previous_response_id is stored at provider " + *stored_at_;
  }
  auto health = rs_.health.check_model(model, now);
  {
    // Only for the decision: not held for as long as the answer streams.
    std::vector<routing::DeploymentView> views;
    views.reserve(model.deployments.size());
    for (std::size_t i = 0; i < model.deployments.size(); ++i) {
      // Measured as this request's kind of traffic (its reasoning effort;
      // without one, the deployment's own entry: no key to build).
      const std::string& id = model.deployments[i].id();
      views.push_back(
          {req_.reasoning_effort.empty()
               ? rs_.stats.get_or_prior(id, now)
               : rs_.stats.get_or_prior(routing::stats_key(id, req_.reasoning_effort), now),
           health[i]});
    }
    trace_.decision = routing::decide(rq, views, rs_.options, now, rs_.next_round_robin(model.name),
                                      ctx_.worker.rng);
  }
  // Room for every reserve candidate, so that promoting one never moves the
  // candidates a running attempt refers to.
  trace_.decision.candidates.reserve(trace_.decision.candidates.size() +
                                     trace_.decision.reserve.size());
  ProbeSlots probes(rs_.health, model, health);
  rs_.retries.deposit(now);
  if (trace_.decision.candidates.empty()) co_return co_await respond_no_route();

  metrics_.on_route(model, *trace_.decision.candidates.front().candidate.deployment,
                    trace_.decision.policy);
  if (conversation()) {
    const auto holds = [](const routing::PlannedCandidate& pc) { return pc.cache_held_tokens > 0; };
    const auto& d = trace_.decision;
    metrics_.on_affinity(model, holds(d.candidates.front()) ? Metrics::Affinity::kHit
                                : std::any_of(d.candidates.begin(), d.candidates.end(), holds) ||
                                        std::any_of(d.reserve.begin(), d.reserve.end(), holds)
                                    ? Metrics::Affinity::kBroken
                                    : Metrics::Affinity::kMiss);
  }
  ctx_.start = start_;
  commit_after_ = rq.policy.commit_after;
  if (wants_continuation()) ctx_.continuation = &continuation_.emplace();
  std::optional<bool> answered = co_await try_candidates(probes, rq.policy.hedging);
  if (answered) co_return *answered;
  if (LLMGATE_CANCELLED()) co_return false;
  if (continuation_ && continuation_->broken) co_return co_await end_broken_stream();
  co_return co_await respond_all_failed();
}

net::awaitable<void> ChatProxy::learn_fleet_affinity(Clock::time_point now) {
  std::vector<std::uint64_t> hashes;
  hashes.reserve(req_.prefixes.count + 1);
  for (const config::PrefixCut& c : req_.prefixes.view()) hashes.push_back(c.hash);
  if (req_.conversation_key != 0) hashes.push_back(req_.conversation_key);
  for (const auto& e : co_await snapshot_.shared->find_affinity(std::move(hashes))) {
    const config::PrefixCut prefix{e.hash, e.bytes, e.media};
    if (e.hash == req_.conversation_key) {
      rs_.affinity.remember({}, e.hash, prefix, e.deployment, now);
    } else {
      rs_.affinity.remember(std::span(&prefix, 1), 0, prefix, e.deployment, now);
    }
  }
}

net::awaitable<std::optional<bool>> ChatProxy::try_candidates(ProbeSlots& probes,
                                                              const config::Hedging& hedging) {
  const auto& candidates = trace_.decision.candidates;
  // Each request with hedging on adds max_extra_ratio to the model's budget.
  if (hedging.enabled) rs_.hedges(req_.model).deposit(Clock::now());
  std::size_t next = 0;
  while (true) {
    // A broken stream is continued by a deployment that declares it can,
    // beyond max_attempts if need be (the reserve), one at a time.
    const bool continuing = continuation_ && continuation_->broken;
    if (next >= candidates.size()) {
      if (!continuing || trace_.decision.reserve.empty()) break;
      promote_reserve();
    }
    const auto& pc = candidates[next];
    if (continuing && !continues(pc)) {
      ++next;
      continue;
    }
    // After a context-length refusal, a deployment whose window is no
    // larger than the refusing one's would refuse too.
    if (const auto& refused = ctx_.context_refusal;
        refused && refused->window && pc.candidate.deployment->context_window &&
        *pc.candidate.deployment->context_window <= *refused->window) {
      ++next;
      continue;
    }
    if (Clock::now() >= ctx_.total_deadline(pc.candidate)) {
      total_expired_ = true;  // this provider's timeouts.total; another's may be longer
      ++next;
      continue;
    }
    if (trace_.attempts > 0 && !rs_.retries.try_spend(Clock::now())) {
      // Retries would multiply an outage: stop here (docs/routing.md).
      trace_.failures.budget_exhausted();
      break;
    }
    if (!trace_.failures.outcomes().empty())
      metrics_.shared().on_fallback(trace_.failures.outcomes().back());
    AttemptResult r;
    // A capped candidate (explored, re-checked, probed) is always hedged by
    // the next one: learning about it costs a client at most its hedge delay.
    const HedgeKind kind = pc.capped         ? HedgeKind::kLearning
                           : hedging.enabled ? HedgeKind::kBudget
                                             : HedgeKind::kStall;
    // (A non-streamed attempt waits for its whole answer: no stall to see.)
    const bool stall_hedge = hedging.on_stall && ctx_.streams(pc.candidate);
    // A hedge due only after the deadline is none -- except for a race in
    // which the first side may decline a slow stream (hedged()). A
    // continuation is never raced.
    const bool race =
        !continuing && (kind != HedgeKind::kStall || stall_hedge) && next + 1 < candidates.size() &&
        (pc.hedge_delay < pc.candidate.timeouts.ttft || may_decline(kind) || probe_declines(pc));
    // The speed guard holds a commit only where another candidate follows,
    // and only for a first side (relay.cpp: never a hedge's): in a race whose
    // hedge starts at once (budget, learning) the first output claims the
    // client and cancels the other side, so a guard giving it up then would
    // waste both -- a stall race's hedge starts only on evidence.
    ctx_.commit_after = (!race || kind == HedgeKind::kStall) && next + 1 < candidates.size()
                            ? commit_after_
                            : config::CommitAfter{};
    std::optional<StreamTranscript> told;  // a continuation's, until it commits
    std::size_t continued_before = 0;
    if (continuing) {
      prepare_continuation(pc.candidate);
      told = continuation_->transcript;
      continued_before = continuation_->by.size();
    }
    if (continuation_) {
      continuation_->continuer_follows = continuer_from(next + 1);
      continuation_->continuer_follows_pair = continuer_from(next + 2);
    }
    if (race) {
      const auto& second = candidates[next + 1];
      bool second_started = false;
      probes.tried(pc);
      r = co_await hedged(pc, second, kind, second_started);
      if (second_started) probes.tried(second);
      next += second_started ? 2 : 1;
    } else {
      probes.tried(pc);
      r = co_await run_attempt(pc, 0);
      next += 1;
    }
    // A continuation that failed before its commit: what it rendered never
    // reached the client, so the next is asked to continue what did.
    if (told && continuation_->by.size() == continued_before)
      continuation_->transcript = std::move(*told);
    if (continuing) continuation_->splice.reset();
    if (r.responded) co_return r.keep_alive;
    if (LLMGATE_CANCELLED()) co_return false;
  }
  co_return std::nullopt;
}

bool ChatProxy::wants_continuation() const {
  // (Chat's own stream: an Anthropic client's is not spliced.)
  return req_.operation == config::Operation::kChat && !req_.native && req_.stream &&
         continuable_request(req_.body) && continuer_from(0);
}

bool ChatProxy::continuer_from(std::size_t i) const {
  const auto& d = trace_.decision;
  return std::any_of(
             d.candidates.begin() + static_cast<std::ptrdiff_t>(std::min(i, d.candidates.size())),
             d.candidates.end(), continues) ||
         std::any_of(d.reserve.begin(), d.reserve.end(), continues);
}

void ChatProxy::prepare_continuation(const routing::Candidate& c) {
  StreamContinuation& k = *continuation_;
  if (!k.original_kept) {  // (a hedge race's winner leaves it for the loser)
    k.original = std::move(req_.body);
    k.original_kept = true;
  }
  std::string trimmed, sent;
  if (auto body =
          continuation_body(k.original, k.transcript.text(), c.deployment->continuation, trimmed)) {
    req_.body = std::move(*body);
    // What the continuer was given as its prefix: an echo of it is dropped.
    sent = k.transcript.text().substr(0, k.transcript.text().size() - trimmed.size());
  } else {
    req_.body = k.original;  // an answer anew: the stream broke before any text
  }
  k.splice.emplace(k.transcript, std::move(sent), std::move(trimmed), req_.include_usage, k.spent);
}

net::awaitable<bool> ChatProxy::end_broken_stream() {
  outcome_ = RequestOutcome::kError;
  StreamContinuation& k = *continuation_;
  log_line(LogLevel::kWarn, "request " + ctx_.rc.request_id +
                                ": no deployment continued the broken stream: " +
                                redact_secrets(trace_.failures.detail(), ctx_.provider_keys()));
  conclude(last_failed_ ? &*last_failed_ : nullptr);
  if (ctx_.client_write_failed) co_return false;
  ClientStream out(ctx_.client, ctx_.rc, cfg_.timeouts.idle, ctx_.client_write_failed);
  const std::string event = ctx_.api.error_event(*k.broken, 0);
  const bool ok = co_await out.write(event, /*last=*/true);
  co_return ok&& out.chunked() && ctx_.rc.keep_alive;
}

void ChatProxy::charge(const AttemptRecord& rec, const routing::Candidate& c) {
  used_.tokens += std::max<std::int64_t>(0, rec.input_tokens.value_or(0)) +
                  std::max<std::int64_t>(0, rec.output_tokens.value_or(0));
  used_.usd += c.deployment->price.cost_usd(rec.input_tokens.value_or(0), rec.cached_input_tokens,
                                            rec.output_tokens.value_or(0));
}

net::awaitable<bool> ChatProxy::respond_no_route() {
  const routing::RouteDecision& d = trace_.decision;
  outcome_ = RequestOutcome::kRejected;
  const bool limited = d.error_status == 429;
  // Why each deployment was left out names prices and providers: for the
  // log, and for clients allowed to see route explanations.
  log_line(LogLevel::kInfo, "request " + ctx_.rc.request_id + ": " + d.error_message);
  if (d.error_status == 400) {
    // The prompt is larger than every deployment's context window: the
    // caller's to change (the message names sizes, no deployment).
    ApiError e = invalid_request(d.error_message, "messages", "context_length_exceeded");
    outcome_ = RequestOutcome::kRejected;
    Response res = make_error_response(ctx_.rc, e);
    trace_.add_headers(res, ctx_.rc.request_id, nullptr);
    conclude(nullptr);
    const bool ok = co_await write_response(ctx_.client, res, cfg_.timeouts.idle);
    co_return ok&& ctx_.rc.keep_alive;
  }
  std::string message = trace_.explain ? d.error_message
                        : limited
                            ? "every deployment of model \"" + req_.model +
                                  "\" is rate limited upstream; retry after the Retry-After delay"
                            : "no deployment of model \"" + req_.model +
                                  "\" can serve this request under its routing constraints";
  ApiError e{
      d.error_status, limited ? "rate_limit_error" : "service_unavailable", std::move(message),
      std::nullopt,   limited ? "upstream_rate_limited" : "no_route",       d.retry_after_s};
  Response res = make_error_response(ctx_.rc, e);
  trace_.add_headers(res, ctx_.rc.request_id, nullptr);
  conclude(nullptr);
  const bool ok = co_await write_response(ctx_.client, res, cfg_.timeouts.idle);
  co_return ok&& ctx_.rc.keep_alive;
}

net::awaitable<bool> ChatProxy::respond_all_failed() {
  if (const auto& refused = ctx_.context_refusal) {
    // A deployment refused the prompt as too long and none after it
    // answered: its refusal is the client's answer, as it would have been
    // without the failover (never a 5xx an SDK retries).
    outcome_ = RequestOutcome::kRejected;
    log_line(LogLevel::kInfo, "request " + ctx_.rc.request_id +
                                  ": the prompt is too long for every deployment tried (" +
                                  redact_secrets(trace_.failures.detail(), ctx_.provider_keys()) +
                                  ")");
    Response res =
        refused->body.empty()
            ? make_error_response(
                  ctx_.rc,
                  invalid_request(
                      "the prompt is too long for the model's context window: " + refused->detail,
                      "messages", "context_length_exceeded"))
            : make_json_response(ctx_.rc, static_cast<http::status>(refused->status),
                                 error_text_in(ctx_.rc.error_shape,
                                               redact_secrets(refused->body, ctx_.provider_keys()),
                                               refused->status));
    trace_.add_headers(res, ctx_.rc.request_id, nullptr);
    res.set("x-should-retry", "false");
    conclude(nullptr);
    const bool ok = co_await write_response(ctx_.client, res, cfg_.timeouts.idle);
    co_return ok&& ctx_.rc.keep_alive;
  }
  outcome_ = RequestOutcome::kError;
  ApiError e =
      trace_.failures.final_error(req_.model, trace_.attempts, trace_.explain,
                                  total_expired_ || Clock::now() >= start_ + cfg_.timeouts.total);
  log_line(LogLevel::kWarn, "request " + ctx_.rc.request_id + ": every attempt failed: " +
                                redact_secrets(trace_.failures.detail(), ctx_.provider_keys()));
  Response res = make_error_response(ctx_.rc, e);
  trace_.add_headers(res, ctx_.rc.request_id, nullptr);
  // Every candidate was tried: the SDK's own retries (2 by default) would
  // only repeat them. Unless the answer names a wait (saturation, limits).
  if (!e.retry_after_s) res.set("x-should-retry", "false");
  conclude(last_failed_ ? &*last_failed_ : nullptr);
  const bool ok = co_await write_response(ctx_.client, res, cfg_.timeouts.idle);
  co_return ok&& ctx_.rc.keep_alive;
}

net::awaitable<void> ChatProxy::end_for_shutdown() {
  outcome_ = RequestOutcome::kError;
  if (ctx_.client_write_failed) co_return;
  const ApiError e{503,
                   "server_error",
                   "the gateway is shutting down and its drain timeout ran out before this "
                   "request finished; retry it",
                   std::nullopt,
                   "gateway_shutdown",
                   1};
  if (!ctx_.stream_committed) {
    Response res = make_error_response(ctx_.rc, e);
    res.keep_alive(false);
    co_await write_response(ctx_.client, res, cfg_.timeouts.idle);
    co_return;
  }
  ClientStream out(ctx_.client, ctx_.rc, cfg_.timeouts.idle, ctx_.client_write_failed);
  const std::string event = ctx_.api.error_event(e, 0);
  co_await out.write(event, /*last=*/true);
}

void ChatProxy::promote_reserve() {
  auto& d = trace_.decision;
  if (d.reserve.empty()) return;
  routing::PlannedCandidate pc = d.reserve.front();
  d.reserve.erase(d.reserve.begin());
  const config::Deployment* dep = pc.candidate.deployment;
  std::erase_if(d.skipped, [&](const routing::Skipped& s) { return s.deployment == dep->id(); });
  // The last candidate waits its configured TTFT timeout (docs/routing.md).
  pc.candidate.timeouts.ttft =
      cfg_.timeouts_for(*pc.candidate.provider, *dep).ttft + pc.prefill_allowance;
  d.candidates.push_back(std::move(pc));
  trace_.plan_changed();
}

void ChatProxy::finish_attempt(const routing::PlannedCandidate& pc, AttemptRecord& rec, int branch,
                               const SpanId& span, routing::StatsRegistry::InFlight& in_flight) {
  auto now = Clock::now();
  if (trace_.race && trace_.race->lost(branch) && !rec.first_token) {
    rec.outcome = AttemptOutcome::kHedgeLost;
    rec.detail = trace_.race->ran_on(branch)
                     ? "lost the race; ran on to learn, and stopped before its first token"
                     : "a hedge produced the first token first";
    // It waited for its first token until the race was decided, not until
    // its cancellation was noticed (a lower bound taken later would claim a
    // slower deployment than the one measured) -- or, running on to learn,
    // until it stopped.
    if (!trace_.race->ran_on(branch))
      now = std::min(now, std::max(trace_.race->decided_at(), rec.request_sent));
  }
  if (rec.learning && rec.outcome != AttemptOutcome::kClientGone) note_lesson(pc, rec, now);
  // It read the prompt: its provider holds it in its prompt cache now
  // (remembered before the statistics take the record: a caller that sees
  // the attempt recorded sees this too).
  if ((rec.first_token || rec.outcome == AttemptOutcome::kSuccess) && conversation()) {
    providers::PromptPrefixes::Remembered cuts;
    const auto remembered = req_.prefixes.remembered(cuts);
    const std::uint64_t deployment = pc.candidate.deployment->id_hash();
    rs_.affinity.remember(remembered, req_.conversation_key, whole_prompt(), deployment, now);
    if (snapshot_.shared) {
      std::vector<SharedLimits::AffinityEntry> fleet;
      for (const config::PrefixCut& c : remembered)
        fleet.push_back({c.hash, deployment, c.bytes, c.media});
      if (req_.conversation_key != 0) {
        const config::PrefixCut whole = whole_prompt();
        fleet.push_back({req_.conversation_key, deployment, whole.bytes, whole.media});
      }
      snapshot_.shared->remember_affinity(fleet, rs_.affinity.ttl());
    }
  }
  const auto recorded = in_flight.finish(rec, now);  // no longer in flight, recorded
  observers_.attempt_ended(view(*model_), AttemptEnded{pc, rec, branch, span, now});
  // What the outcome does to health is the failover policy's (merely slow,
  // the client's doing, a lost hedge: nothing).
  const failover::Effects fx = failover::effects_of(
      rec, pc.candidate.timeouts.ttft,
      cfg_.timeouts_for(*pc.candidate.provider, *pc.candidate.deployment).ttft);
  if (fx.health == failover::HealthEffect::kNone) {
    if (pc.probe) rs_.health.release_probe(rec.deployment);
  } else {
    const auto ejected = rs_.health.on_attempt(
        rec.deployment, fx.health == failover::HealthEffect::kFailure, recorded.error_rate,
        recorded.attempts, now, pc.probe, config::operation_bit(req_.operation));
    if (ejected && snapshot_.shared) {
      snapshot_.shared->publish(HealthEvent::kEjection, rec.deployment,
                                std::chrono::duration_cast<std::chrono::milliseconds>(*ejected));
    }
  }
  if (fx.cooldown) {
    rs_.health.on_retry_after(rec.deployment, std::chrono::seconds(*rec.retry_after_s), now);
    if (snapshot_.shared) {
      snapshot_.shared->publish(HealthEvent::kCooldown, rec.deployment,
                                std::chrono::seconds(*rec.retry_after_s));
    }
  }
}

net::awaitable<bool> ChatProxy::reserve(const routing::Candidate& c, ConcurrencyLimiter::Slot& slot,
                                        SharedLimits::Slot& shared_slot) {
  // A deployment at its max_concurrent: wait in its queue (bounded by the
  // connect timeout), or move on without contacting it — not an attempt.
  if (auto it = snapshot_.limiters.find(c.deployment->id()); it != snapshot_.limiters.end()) {
    ConcurrencyLimiter::Acquired got =
        co_await it->second->acquire(ctx_.deadlines(c).connect(Clock::now()));
    if (got.result != ConcurrencyLimiter::Result::kGranted) {
      if (LLMGATE_CANCELLED()) co_return false;
      const bool full = got.result == ConcurrencyLimiter::Result::kQueueFull;
      trace_.failures.saturated(
          c.deployment->id(),
          "at its max_concurrent (" + std::to_string(it->second->in_use()) + " in flight), " +
              (full ? "wait queue full" : "no slot within the connect timeout"));
      metrics_.on_saturated(*model_, *c.deployment,
                            full ? Saturation::kQueueFull : Saturation::kQueueTimeout);
      co_return false;
    }
    slot = std::move(got.slot);
    // Fleet-wide: every replica's requests to the deployment count against
    // its max_concurrent (shared_state:), waited for within the same bound.
    if (SharedLimits* shared = snapshot_.shared.get()) {
      SharedLimits::SlotResult s =
          co_await shared->acquire_slot(c.deployment->id(), *c.deployment->max_concurrent,
                                        ctx_.deadlines(c).connect(Clock::now()));
      switch (s.verdict) {
        case SharedLimits::Verdict::kAllowed:
          shared_slot = std::move(s.slot);
          break;
        case SharedLimits::Verdict::kUnavailable:
          metrics_.shared().on_shared_fallback(SharedOp::kSlotAcquire, shared->fail_open());
          if (shared->fail_open()) break;
          if (LLMGATE_CANCELLED()) co_return false;
          trace_.failures.shared_state_unavailable(c.deployment->id());
          metrics_.on_saturated(*model_, *c.deployment, Saturation::kSharedStateUnavailable);
          co_return false;
        case SharedLimits::Verdict::kLimited:
          if (LLMGATE_CANCELLED()) co_return false;
          trace_.failures.saturated(c.deployment->id(),
                                    "at its max_concurrent across the gateway's replicas "
                                    "(shared_state), no slot within the connect timeout");
          metrics_.on_saturated(*model_, *c.deployment, Saturation::kQueueTimeout);
          co_return false;
      }
    }
  }
  // The same for this worker's connection pool to the provider: waiting for
  // a slot is local saturation, never an upstream failure — no attempt, no
  // effect on health or statistics; bounded by the connect timeout, then the
  // next candidate (then 503 + Retry-After when every one was saturated).
  auto& pool = ctx_.worker.pools->get(*c.provider, snapshot_.tls);
  if (pool.has_room()) co_return true;
  const bool room = co_await pool.wait_for_room(ctx_.deadlines(c).connect(Clock::now()));
  if (room || LLMGATE_CANCELLED()) co_return room;
  trace_.failures.saturated(c.deployment->id(),
                            "this gateway's connection pool to provider \"" + c.provider->name +
                                "\" is full (" + std::to_string(c.provider->pool.max_connections) +
                                " connections per worker, pool.max_connections)");
  metrics_.on_saturated(*model_, *c.deployment, Saturation::kPoolFull);
  co_return false;
}

net::awaitable<AttemptResult> ChatProxy::run_attempt(const routing::PlannedCandidate& pc,
                                                     int branch) {
  const routing::Candidate& c = pc.candidate;
  // The upstream body first: a request the deployment's protocol cannot
  // express is passed over (never sent with a part of it dropped).
  const providers::UpstreamRequest request = ctx_.upstream_request(c);
  const providers::UpstreamProtocol* protocol = ctx_.api.protocol_for(*c.provider);
  if (protocol == nullptr) {  // the config allows none (deployments[].operations)
    trace_.failures.untranslatable(c.deployment->id(),
                                   std::string("provider protocol ") +
                                       config::to_string(c.provider->protocol) +
                                       " does not serve " + config::endpoint_of(req_.operation),
                                   "model");
    promote_reserve();
    co_return AttemptResult{};
  }
  auto body = ctx_.api.upstream_body(*protocol, req_, request);
  if (auto* no = std::get_if<providers::Untranslatable>(&body)) {
    trace_.failures.untranslatable(c.deployment->id(), std::move(no->message),
                                   std::move(no->param));
    promote_reserve();  // no attempt was made: max_attempts still has room
    co_return AttemptResult{};
  }
  ConcurrencyLimiter::Slot slot;
  SharedLimits::Slot shared_slot;  // released before `slot`: the local one is the wider bound
  if (!co_await reserve(c, slot, shared_slot)) co_return AttemptResult{};
  ++trace_.attempts;
  AttemptRecord rec;
  rec.deployment = c.deployment->id();
  rec.probe = pc.probe;
  rec.learning = pc.learn_reason != nullptr;
  rec.prompt_bytes = req_.prompt.bytes;
  rec.prompt_media = req_.prompt.media;
  rec.input_tokens_est = pc.input_tokens;
  // (A hold known by a conversation key alone is a guess: it does not
  // teach the deployment's cache share.)
  rec.cache_held_tokens = pc.affinity_by_key ? 0 : pc.cache_held_tokens;
  rec.cached_tokens_est = pc.cached_tokens;
  // A continued Responses conversation (or a stored prompt): the provider
  // counts what this body does not hold.
  rec.calibrates = !(req_.operation == config::Operation::kResponses &&
                     (!req_.previous_response_id.empty() || req_.body.contains("conversation") ||
                      req_.body.contains("prompt")));
  if (!req_.reasoning_effort.empty())
    rec.stats_key = routing::stats_key(rec.deployment, req_.reasoning_effort);
  rec.started = Clock::now();
  rec.outcome = AttemptOutcome::kClientGone;  // what it is if this frame is cancelled
  // Traced: the attempt's span is the upstream's parent.
  SpanId span;
  std::string traceparent;
  if (const RequestTrace* t = ctx_.request_trace) {
    rec.keep_meta = true;  // the answer's id and finish reasons, for the spans
    span = snapshot_.tracer->new_span_id();
    traceparent = t->child_traceparent(span);
  }
  // (Its wait is read against the prefill of what its cache does not hold.)
  routing::StatsRegistry::InFlight in_flight(rs_.stats, rec.stats_id(), Clock::now(),
                                             pc.input_tokens - pc.cached_tokens);
  struct Report {
    ChatProxy& self;
    const routing::PlannedCandidate& pc;
    AttemptRecord& rec;
    int branch;
    const SpanId& span;
    routing::StatsRegistry::InFlight& in_flight;
    ~Report() { self.finish_attempt(pc, rec, branch, span, in_flight); }
  } report{*this, pc, rec, branch, span, in_flight};

  AttemptResult r =
      co_await run_upstream_attempt(ctx_, c, rec, branch, in_flight, request,
                                    std::move(std::get<std::string>(body)), traceparent);
  if (trace_.race && trace_.race->lost(branch)) co_return AttemptResult{};  // lost
  if (r.responded) {
    charge(rec, c);
    outcome_ = to_request_outcome(rec.outcome);
    if (ctx_.request_trace) {
      answered_ = rec;
      answered_by_ = &c;
    }
    // The outcome stands even if the client hung up after its response
    // (the watcher may then cancel the post-response drain).
    if (trace_.race && trace_.race->ran_on(1 - branch) && trace_.race->running(1 - branch)) {
      // The other side runs on to learn: concluded when it stops (hedged()).
      pending_conclusion_ = rec;
      ended_at_ = Clock::now();
    } else {
      conclude(&rec);
    }
    co_return r;
  }
  if (LLMGATE_CANCELLED()) {
    rec.outcome = AttemptOutcome::kClientGone;
    co_return r;
  }
  // A stream that broke off after the client's first token, to be
  // continued: what it cost counts.
  if (rec.first_token && ctx_.stream_committed && continuation_ && continuation_->broken)
    charge(rec, c);
  // (A probe that proved itself while declining the client did not fail.)
  if (rec.outcome != AttemptOutcome::kHedgeLost && rec.outcome != AttemptOutcome::kSuccess)
    on_attempt_failed(rec);
  co_return r;
}

void ChatProxy::note_lesson(const routing::PlannedCandidate& pc, const AttemptRecord& rec,
                            Clock::time_point end) {
  using Kind = routing::RoutingState::LessonKind;
  using Result = routing::RoutingState::LessonResult;
  const Kind kind = pc.recheck     ? Kind::kRecheck
                    : pc.size_race ? Kind::kSizeRace
                                   : Kind::kExploration;
  const Result result = rec.first_token                             ? Result::kLearnt
                        : rec.outcome == AttemptOutcome::kHedgeLost ? Result::kMissed
                                                                    : Result::kFailed;
  rs_.learning(req_.model)
      .lessons[static_cast<std::size_t>(kind)][static_cast<std::size_t>(result)]
      .fetch_add(1, std::memory_order_relaxed);
  metrics_.on_lesson(*model_, kind, result);
  // "recheck groq/llama (never answered): learnt 321ms", "... missed >450ms".
  static constexpr const char* kKinds[] = {"recheck", "explore", "explore-size"};
  std::string& text = trace_.lesson;
  text = kKinds[static_cast<std::size_t>(kind)];
  text += ' ';
  text += rec.deployment;
  text += " (";
  text += pc.learn_reason;
  text += "): ";
  const auto waited = [&](Clock::time_point to) {
    const Clock::time_point from =
        rec.request_sent != Clock::time_point{} ? rec.request_sent : rec.started;
    text +=
        std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(to - from).count());
    text += "ms";
  };
  if (result == Result::kLearnt) {
    text += "learnt ";
    waited(*rec.first_token);
  } else if (result == Result::kMissed) {
    text += "missed, no first token in ";
    waited(end);
  } else {
    text += "failed (";
    text += routing::to_string(rec.outcome);
    text += ')';
  }
}

void ChatProxy::on_attempt_failed(const AttemptRecord& rec) {
  last_failed_ = rec;
  trace_.failures.failed(rec);
  log_line(LogLevel::kDebug, "request " + ctx_.rc.request_id + " attempt " +
                                 std::to_string(trace_.attempts) + " on " + rec.deployment +
                                 " failed (" + routing::to_string(rec.outcome) +
                                 "): " + rec.detail);
}

net::awaitable<AttemptResult> ChatProxy::hedged(const routing::PlannedCandidate& first,
                                                const routing::PlannedCandidate& second,
                                                HedgeKind kind, bool& second_started) {
  using Gate = Race::Gate;
  const std::string first_id =
      routing::stats_key(first.candidate.deployment->id(), req_.reasoning_effort);
  Race race(
      [&](int branch) -> net::awaitable<AttemptResult> {
        if (branch == 1) {
          second_started = true;
          ++rs_.hedges_started;
        }
        co_return co_await run_attempt(branch == 0 ? first : second, branch);
      },
      [&] {
        const auto now = Clock::now();
        switch (kind) {
          case HedgeKind::kLearning:  // few: they do not spend the model's hedge budget
            return Gate::kStart;
          case HedgeKind::kBudget:
            return rs_.hedges(req_.model).try_spend(now) ? Gate::kStart : Gate::kDenied;
          case HedgeKind::kStall:
            // This attempt has waited the hedge delay; one more that has too
            // is a stall or a slowdown, not one slow answer in the tail.
            if (rs_.stats.waited_at_least(first_id, first.hedge_delay, now) < 2)
              return Gate::kNotYet;
            return rs_.retries.try_spend(now) ? Gate::kStart : Gate::kDenied;
        }
        return Gate::kDenied;
      },
      [&](HedgeResult h) {
        if (h == HedgeResult::kWon) ++rs_.hedges_won;
        if (h == HedgeResult::kWon || h == HedgeResult::kLost) {
          trace_.race_lost = (h == HedgeResult::kWon ? first : second).candidate.deployment->id();
          trace_.race_learning = kind == HedgeKind::kLearning;
        }
        metrics_.shared().on_hedge(h);
      });
  // Under e2e the client waits for the whole answer: a deployment being
  // learnt about whose first token comes first does not take the client if,
  // at the speed it was last measured at, it would finish after the other
  // side is expected to (its expected end-to-end time, from its start, or
  // from now when it has not started: it then starts at once). It reads on
  // to measure its speed instead (Race::set_may_claim).
  if (may_decline(kind) || probe_declines(first)) {
    race.set_may_claim([&](int branch) {
      if (branch != 0) return true;
      if (probe_declines(first)) return false;
      const double rest_ms = trace_.decision.e2e_tokens / std::max(0.1, first.speed) * 1000;
      // (A hedge not started yet starts now if this side declines.)
      const double ran_ms =
          race.hedge_started()
              ? std::chrono::duration<double, std::milli>(Clock::now() - race.hedge_started_at())
                    .count()
              : 0.0;
      const double theirs_ms = second.score - ran_ms;
      return rest_ms <= theirs_ms;
    });
  }
  trace_.race = &race;
  // Learning about the first side: if it loses, it runs on to its own first
  // token, for at most its learn_wait from now (Race::learn_until).
  if (kind == HedgeKind::kLearning && first.learn_wait.count() > 0)
    race.learn_until(0, Clock::now() + first.learn_wait);
  // A stall is evidence about the deployment, not this attempt: once two
  // attempts at it have waited the hedge delay, every attempt there is
  // hedged, the young ones too. So it is looked for a few times per hedge
  // delay from early on.
  AttemptResult r;
  if (kind == HedgeKind::kStall) {
    const auto every = std::max(std::chrono::milliseconds(10), first.hedge_delay / 4);
    r = co_await race.run(std::min(first.hedge_delay, every), every);
  } else {
    r = co_await race.run(first.hedge_delay);
  }
  // A lesson's race that started both sides added an upstream request.
  if (kind == HedgeKind::kLearning && first.learn_reason != nullptr && second_started) {
    routing::RoutingState::Learning& learning = rs_.learning(req_.model);
    learning.extra_requests.fetch_add(1, std::memory_order_relaxed);
    learning.budget.try_spend(Clock::now());
    metrics_.on_lesson_extra_request(*model_);
  }
  if (pending_conclusion_) {
    conclude(&*pending_conclusion_);
    pending_conclusion_.reset();
  }
  trace_.race = nullptr;
  co_return r;
}

void ChatProxy::conclude(const AttemptRecord* rec) const {
  observers_.concluded(view(*model_), rec, ended_at_.value_or(Clock::now()));
}

RequestView ChatProxy::view(const config::Model& model) const {
  return RequestView{ctx_.rc,
                     ctx_.api,
                     req_,
                     model,
                     key_,
                     trace_,
                     outcome_,
                     answered_ ? &*answered_ : nullptr,
                     answered_by_,
                     last_failed_ ? &*last_failed_ : nullptr,
                     continuation_ ? &*continuation_ : nullptr,
                     start_,
                     ctx_.request_trace};
}

}  // namespace

RequestHead request_head(const Request& request) {
  RequestHead head{request[http::field::authorization],
                   request[http::field::content_type],
                   {},
                   {},
                   request["x-api-key"]};
  bool routed = false;  // an x-llmgate-* header (most requests have none: no lookups)
  for (const auto& f : request) {
    if (f.name() == http::field::via) head.via.push_back(f.value());
    const beast::string_view name = f.name_string();
    if (!routed && name.size() > 10 && beast::iequals(name.substr(0, 10), "x-llmgate-"))
      routed = true;
  }
  if (routed) {
    head.header = [&request](std::string_view name) -> std::optional<std::string> {
      auto it = request.find(beast::string_view(name.data(), name.size()));
      if (it == request.end()) return std::nullopt;
      return std::string(it->value());
    };
  }
  return head;
}

net::awaitable<bool> handle_api_request(Worker& worker, beast::tcp_stream& client, Request& request,
                                        const RequestContext& rc, const ClientApi& api) {
  // The snapshot this request lives on, whatever reloads happen meanwhile.
  const std::shared_ptr<const Snapshot> snapshot = worker.snapshot;
  const config::Config& cfg = *snapshot->config;
  // Admission (admission.cpp): the key, a request loop, the body, the model,
  // the key's permissions and rates, the routing override.
  auto admitted =
      admit(api, request_head(request), request.body(), cfg, *snapshot->keys, worker.via_name);
  // Admission keeps the body it read (indexed, for every attempt's upstream
  // body): the HTTP message's copy goes now, not at the end of a stream that
  // may last minutes (an agent's conversation is tens of KiB a request).
  std::string().swap(request.body());
  // A refusal before any attempt has its request line and its outcome in
  // llmgate_requests_total, as every answered request (docs/operations.md,
  // "Refusals").
  const auto refused = [&](Refused why, const config::Model* m, const config::GatewayKey* k,
                           int status) {
    const std::string_view model_name = m ? std::string_view(m->name) : std::string_view();
    snapshot->metrics->shared().on_refused(api.operation(), model_name, why, api.api_label());
    log_refused_request(rc.request_id, config::gen_ai_name(api.operation()), model_name,
                        k ? std::string_view(k->name) : std::string_view(), to_string(why), status);
  };
  if (auto* no = std::get_if<Refusal>(&admitted)) {
    if (no->auth) snapshot->metrics->shared().on_auth_rejected(*no->auth);
    if (!no->log.empty()) log_line(LogLevel::kWarn, "request " + rc.request_id + ": " + no->log);
    refused(refused_as(*no), no->model, nullptr, no->error.status);
    Response res = make_error_response(rc, no->error);
    co_return co_await write_response(client, res, cfg.timeouts.idle) && rc.keep_alive;
  }
  Admitted& a = std::get<Admitted>(admitted);
  const config::Model* model = a.model;
  const config::GatewayKey* key = a.key;
  if (key && snapshot->shared) {
    if (auto no = co_await admit_shared_request(*snapshot->shared, *snapshot->keys, *key,
                                                snapshot->metrics->shared())) {
      refused(refused_as(*no, rejection_of(*no)), model, key, no->status);
      Response res = make_error_response(rc, *no);
      co_return co_await write_response(client, res, cfg.timeouts.idle) && rc.keep_alive;
    }
  }
  // A stored conversation continues at the provider that stored it; one
  // another gateway key stored is not this one's to continue (the provider,
  // with one account for every tenant, would allow it).
  std::optional<std::string> stored_at;
  if (!a.req.previous_response_id.empty() && worker.responses) {
    if (auto owner = worker.responses->owner_of(a.req.previous_response_id, Clock::now())) {
      if (owner->key != (key ? key->name : std::string())) {
        refused(Refused::kNotFound, model, key, 404);
        Response res = make_error_response(rc, response_not_found(a.req.previous_response_id));
        co_return co_await write_response(client, res, cfg.timeouts.idle) && rc.keep_alive;
      }
      stored_at = std::move(owner->provider);
    }
  }
  std::optional<RequestTrace> request_trace = begin_trace(*snapshot, request, rc);
  ChatProxy proxy(worker, *snapshot, client, request, rc, api, std::move(a.req), std::move(a.route),
                  key, std::move(stored_at), request_trace ? &*request_trace : nullptr);
  snapshot->metrics->shared().request_started();
  // Observed as ended on every path out of here, cancellation included.
  struct Ended {
    const ChatProxy& proxy;
    const config::Model& model;
    ~Ended() { proxy.observe_end(model); }
  } ended{proxy, *model};
  // Race the whole exchange against the client hanging up: a disconnect
  // cancels the attempt, which closes the upstream connection and records it.
  // And against the end of a graceful drain: at drain.timeout the worker's
  // shutdown signal fires and requests still running are ended explicitly.
  net::awaitable<bool> exchange = proxy.run(*model);
  const Watched r = co_await run_watched(worker, client, *rc.session_cancel, std::move(exchange));
  if (r.why == Interrupt::kClientGone) {
    log_line(LogLevel::kDebug,
             "request " + rc.request_id + ": client disconnected, upstream cancelled");
    co_return false;
  }
  if (r.why == Interrupt::kShutdown) {
    log_line(LogLevel::kWarn, "request " + rc.request_id + ": cut by the end of the drain timeout");
    co_await proxy.end_for_shutdown();
    co_return false;
  }
  co_return r.result;
}

}  // namespace llmgate::gateway
