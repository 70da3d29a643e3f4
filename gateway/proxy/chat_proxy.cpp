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
//
// This file: the plan walked -- candidates in order, hedged in pairs --, and
// the request's final answers. One attempt: chat_proxy_attempt.cpp.
#include "gateway/proxy/chat_proxy_impl.h"

namespace llmgate::gateway {

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
  ProbeSlots probes(rs_.health, model);
  trace_.decision = decide_route(rq, probes, now);
  // Room for every reserve candidate, so that promoting one never moves the
  // candidates a running attempt refers to.
  trace_.decision.candidates.reserve(trace_.decision.candidates.size() +
                                     trace_.decision.reserve.size());
  rs_.retries.deposit(now);
  if (trace_.decision.candidates.empty()) co_return co_await respond_no_route();

  observers_.routed(model, trace_.decision, conversation());
  ctx_.start = start_;
  commit_after_ = rq.policy.commit_after;
  if (wants_continuation()) ctx_.continuation = &continuation_.emplace();
  std::optional<bool> answered = co_await try_candidates(probes, rq.policy.hedging);
  if (answered) co_return *answered;
  if (LLMGATE_CANCELLED()) co_return false;
  if (continuation_ && continuation_->broken) co_return co_await end_broken_stream();
  co_return co_await respond_all_failed();
}

routing::RouteDecision ChatProxy::decide_route(const routing::RouteRequest& rq, ProbeSlots& probes,
                                               Clock::time_point now) {
  const config::Model& model = *rq.model;
  // Only for the decision, not held for as long as the answer streams: the
  // thread's, kept with their strings from one request to the next (a plain
  // function: nothing suspends between the fill and decide()).
  thread_local std::vector<routing::Availability> health;
  thread_local std::vector<routing::DeploymentView> views;
  rs_.health.check_model(model, now, health);
  probes.taken(health);
  views.resize(model.deployments.size());
  for (std::size_t i = 0; i < model.deployments.size(); ++i) {
    // Measured as this request's kind of traffic (its reasoning effort;
    // without one, the deployment's own entry: no key to build).
    const std::string& id = model.deployments[i].id();
    if (req_.reasoning_effort.empty()) {
      rs_.stats.get_or_prior(id, now, views[i].stats);
    } else {
      rs_.stats.get_or_prior(routing::stats_key(id, req_.reasoning_effort), now, views[i].stats);
    }
    views[i].health = health[i];
  }
  return routing::decide(rq, views, rs_.options, now, rs_.next_round_robin(model.name),
                         ctx_.worker.rng);
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
      observers_.failing_over(trace_.failures.outcomes().back());
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
        observers_.hedged(h);
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
    observers_.lesson_extra_request(*model_);
  }
  if (pending_conclusion_) {
    conclude(&*pending_conclusion_);
    pending_conclusion_.reset();
  }
  trace_.race = nullptr;
  co_return r;
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

}  // namespace llmgate::gateway
