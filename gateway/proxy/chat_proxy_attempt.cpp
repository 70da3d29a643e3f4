// One attempt of a routed request (chat_proxy_impl.h): a slot of the
// deployment's max_concurrent and room in the pool, the attempt itself
// (upstream_attempt.h), and its bookkeeping on every path -- statistics,
// health, what a lesson taught, the observers.
#include "gateway/proxy/chat_proxy_impl.h"

namespace llmgate::gateway {

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
  if (!reserved_at_once(c) && !co_await reserve(c, slot, shared_slot)) co_return AttemptResult{};
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

bool ChatProxy::reserved_at_once(const routing::Candidate& c) const {
  return !snapshot_.limiters.contains(c.deployment->id()) &&
         ctx_.worker.pools->get(*c.provider, snapshot_.tls).has_room();
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
      observers_.saturated(*model_, *c.deployment,
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
          observers_.shared_state_unreachable(SharedOp::kSlotAcquire, shared->fail_open());
          if (shared->fail_open()) break;
          if (LLMGATE_CANCELLED()) co_return false;
          trace_.failures.shared_state_unavailable(c.deployment->id());
          observers_.saturated(*model_, *c.deployment, Saturation::kSharedStateUnavailable);
          co_return false;
        case SharedLimits::Verdict::kLimited:
          if (LLMGATE_CANCELLED()) co_return false;
          trace_.failures.saturated(c.deployment->id(),
                                    "at its max_concurrent across the gateway's replicas "
                                    "(shared_state), no slot within the connect timeout");
          observers_.saturated(*model_, *c.deployment, Saturation::kQueueTimeout);
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
  observers_.saturated(*model_, *c.deployment, Saturation::kPoolFull);
  co_return false;
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
  observers_.lesson(*model_, kind, result);
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

}  // namespace llmgate::gateway
