// The relay of one attempt (relay.h): upstream reads into the protocol's framer
// (SSE, event-stream), each frame through RelayState (hold, commit, strip, assemble), the
// committed stream to the client as gathered writes.
#include "gateway/proxy/relay.h"

#include <boost/asio/this_coro.hpp>
#include <chrono>
#include <optional>
#include <span>
#include <string>

#include "gateway/apis/client_api.h"
#include "gateway/observe/redact.h"
#include "gateway/proxy/client_stream.h"
#include "gateway/proxy/relay_state.h"
#include "gateway/proxy/upstream_body.h"
#include "providers/framer.h"
#include "providers/upstream_protocol.h"

namespace llmgate::gateway {
namespace {

using routing::AttemptOutcome;
using Clock = std::chrono::steady_clock;

constexpr auto kDrainForReuse = std::chrono::milliseconds(500);
// How long a deferred side of a race reads on for its speed sample at most
// (RelayState takes it after kSpeedSampleEvents events and kSpeedSampleAfter).
constexpr auto kDeferredRead = std::chrono::seconds(2);

class Relay {
 public:
  Relay(AttemptContext& ctx, const RelayUpstream& up)
      : ctx_(ctx),
        up_(up),
        state_(ctx.api, up.protocol, ctx.req, up.rec, &up.request),
        out_(ctx.client, ctx.rc, up.c.timeouts.idle, ctx.client_write_failed),
        frames_(up.protocol.framing(), ctx.cfg.server.limits.max_event_bytes),
        body_(up.lease, up.parser,
              ctx.req.stream ? UpstreamBody::Use::kStream : UpstreamBody::Use::kWhole) {
    // A stream that may be continued keeps what its client is told; a
    // continuation's events are spliced into the stream it continues.
    if (StreamContinuation* k = ctx.continuation) {
      if (k->broken && k->splice)
        state_.splice_into(&*k->splice);
      else
        state_.keep_transcript();
    }
  }
  Relay(const Relay&) = delete;
  Relay& operator=(const Relay&) = delete;

  net::awaitable<AttemptResult> run();

 private:
  // What ended the loop of reads: a fault (then `fault_` is set), the end of
  // the stream, or a response already given (client gone, hedge lost).
  std::optional<AttemptResult> on_read();
  // The read failed (after its events were relayed): a cut or a stall.
  std::optional<AttemptResult> on_read_error(beast::error_code ec);
  // One read, in the steps around run()'s socket read (see begin_read).
  bool begin_read(beast::error_code& ec, net::mutable_buffer& into);
  beast::error_code deliver(beast::error_code ec);
  // The client has seen nothing of this attempt, or what it saw another
  // deployment can continue: a stall is cut at the stall deadline, not the
  // idle one.
  bool replaceable() {
    if (!state_.committed()) return true;
    const StreamContinuation* k = ctx_.continuation;
    if (k == nullptr || k->breaks >= StreamContinuation::kMaxBreaks || state_.complete())
      return false;
    // A race whose hedge started has used up its pair: what follows is after it.
    const bool pair_used = up_.branch == 1 || (ctx_.trace.race && ctx_.trace.race->hedge_started());
    if (!(pair_used ? k->continuer_follows_pair : k->continuer_follows)) return false;
    const auto& own = state_.transcript();
    return (own ? own->why_not() : k->transcript.why_not()) == nullptr;
  }
  // The speed guard holds the commit: the first output has come, fewer than
  // commit_after.tokens outputs so far, the answer not over.
  bool guarding() const {
    const config::CommitAfter& g = ctx_.commit_after;
    return g.tokens > 0 && up_.branch == 0 && !state_.committed() && ctx_.req.stream &&
           up_.rec.first_token && state_.outputs() < g.tokens && !state_.complete();
  }
  Clock::time_point guard_deadline() const {
    return *up_.rec.first_token + ctx_.commit_after.within;
  }
  // What the reads made of the committed stream is due to the client (with
  // the head, the first events).
  bool flush_due() {
    return state_.committed() && (!state_.outbox().empty() || !first_token_relayed_);
  }
  net::awaitable<AttemptResult> finish();
  net::awaitable<AttemptResult> end_with_error(const ApiError& error);
  // The committed stream broke off: may another deployment continue it?
  // (The transcript becomes the request's.)
  bool may_continue();
  // It may: what was read before the break goes to the client, the break
  // is recorded, and the attempt ends without ending the client's stream.
  net::awaitable<AttemptResult> break_off(failover::FaultReport report);
  net::awaitable<void> drain_for_reuse();
  void commit();
  // What the first output found: the client is this attempt's, another's,
  // or declined for now (a deferred side of a race: Race::set_may_claim).
  enum class Claim { kOk, kLost, kDeferred };
  Claim claim_output();
  void note_first_token_relayed();
  // A deferred side stops (the race ended, or it has its speed sample).
  AttemptResult declined() {
    up_.rec.outcome = AttemptOutcome::kHedgeLost;
    up_.rec.detail =
        "declined the client at its first token (the other side was expected to finish "
        "sooner) and read on to measure its speed";
    return AttemptResult{};
  }
  // A probe that declined a streaming client read on without a fault to its
  // speed sample or its end (or kDeferredRead): its deployment streams
  // again -- a success for its health.
  AttemptResult proved() {
    up_.rec.outcome = AttemptOutcome::kSuccess;
    up_.rec.detail = "probe: declined the client (a probe's stream may still break) and streamed " +
                     std::to_string(state_.outputs()) + " output events without a fault";
    return AttemptResult{};
  }
  AttemptResult client_gone(const char* detail) {
    up_.rec.outcome = AttemptOutcome::kClientGone;
    up_.rec.detail = detail;
    return AttemptResult{true, false};
  }

  AttemptContext& ctx_;
  RelayUpstream up_;  // references into the attempt
  RelayState state_;
  ClientStream out_;
  providers::Framer frames_;  // the protocol's framing of the body
  std::optional<failover::Fault> fault_;
  std::string fault_text_;
  bool claimed_ = false;
  bool deferred_ = false;             // declined the client; reads on, unclaimed
  bool speed_measured_ = false;       // the mid-stream speed sample went to the statistics
  bool first_token_relayed_ = false;  // for the gateway-overhead metric
  Clock::time_point last_data_at_{};  // the last read with data, from the first token on
  Clock::duration longest_pause_{};   // the longest wait between two such reads
  int pauses_ = 0;                    // how many such waits
  UpstreamBody body_;                 // the reads of the body
};

// One read from the upstream into the framer, its frames fed to the
// relay's state, in the steps of UpstreamBody around the socket read that
// run() makes itself (a coroutine per read would cost a frame and a
// resumption per event). begin_read: the read's deadline, and the framer's
// free space for the body's bytes; true when what the connection's buffer
// held gave nothing and a socket read into `into` is due.
bool Relay::begin_read(beast::error_code& ec, net::mutable_buffer& into) {
  Clock::time_point deadline = ctx_.deadlines(up_.c).next_read(
      Clock::now(), up_.rec.request_sent, up_.rec.first_token.has_value(), replaceable());
  if (guarding()) deadline = std::min(deadline, guard_deadline());
  state_.outbox().hold();  // views into the parser's buffer must not outlive the next prepare()
  if (body_.settle()) {    // a quiet stream: its buffers shrink back
    frames_.shrink();
    state_.outbox().shrink();
  }
  // All the framer's free space, at least a read's room. Before the commit
  // the events go one chunk at a time: the first output is committed (and
  // relayed) before what comes after it is looked at.
  return body_.begin(deadline, frames_.prepare(body_.room()), ec, into,
                     /*one_chunk=*/!state_.committed());
}

// What this read put into the body space, to the relay's state. Returns the
// read's error.
beast::error_code Relay::deliver(beast::error_code ec) {
  if (std::size_t got = body_.delivered(); got > 0) {
    frames_.commit(got);
    const auto now = Clock::now();
    auto on_frame = [&](const providers::Frame& f) { state_.on_event(f, now); };
    switch (frames_.drain(on_frame)) {
      case providers::FrameStatus::kOk:
        break;
      case providers::FrameStatus::kTooLarge:
        state_.on_event_too_large();
        break;
      case providers::FrameStatus::kMalformed:
        state_.on_malformed_frame(frames_.error());
        break;
    }
    // The stream's pauses after its first token (AttemptRecord::longest_pause).
    if (up_.rec.first_token) {
      if (last_data_at_ != Clock::time_point{}) {
        longest_pause_ = std::max(longest_pause_, now - last_data_at_);
        ++pauses_;
      }
      last_data_at_ = now;
    }
    if (std::string id = state_.take_response_id(); !id.empty()) ctx_.remember_response(id, up_.c);
    if (auto speed = state_.take_speed_sample()) {
      ctx_.snapshot.routing->stats.record_speed(up_.rec.stats_id(), *speed, now);
      speed_measured_ = true;
    }
  }
  return ec;
}

// After a read: the fault its events revealed, the claim and the commit at
// the first output. A result when the attempt is over before its end.
std::optional<AttemptResult> Relay::on_read() {
  if (auto f = state_.fault()) {
    fault_ = f;
    fault_text_ = *f == failover::Fault::kInBandError
                      ? redact_secrets(state_.fault_text(), ctx_.provider_keys())
                      : state_.fault_text();
  }
  // Before the commit any fault fails the attempt over: nothing was sent.
  if (fault_ && !state_.committed()) {
    ctx_.judge(up_.c, up_.rec, *fault_, fault_text_, replaceable());
    return AttemptResult{};
  }
  switch (claim_output()) {
    case Claim::kLost:
      up_.rec.outcome = AttemptOutcome::kHedgeLost;
      up_.rec.detail = "a hedge produced output first";
      return AttemptResult{};
    case Claim::kDeferred:
      // Declined: it reads on, keeping what it has for the client in case
      // the other side fails, until its speed is measured (or kDeferredRead
      // has passed without, or its answer ended and the other side has the
      // client), then stops.
      if (speed_measured_ || state_.done() ||
          Clock::now() - *up_.rec.first_token >= kDeferredRead) {
        // A probe reads on until the other side has the client: its proven
        // stream stays the client's in case that side fails, and its whole
        // answer, if it comes first, takes the client.
        if (!up_.rec.probe) return declined();
        if (ctx_.trace.race && ctx_.trace.race->lost(up_.branch)) return proved();
      }
      return std::nullopt;
    case Claim::kOk:
      break;
  }
  if (state_.should_commit() && !guarding()) commit();
  return std::nullopt;
}

std::optional<AttemptResult> Relay::on_read_error(beast::error_code ec) {
  // Silence after the finish, from a protocol whose end marker is the end of
  // the body (Gemini): the answer is whole and nothing more was due but that
  // end, so it completes as the body's end would have, rather than failing a
  // complete answer at the idle deadline. A protocol with a marker of its
  // own ([DONE], message_stop) is not completed by its translator here: a
  // stall before that marker stays a stall.
  if (ec == beast::error::timeout && state_.complete()) {
    state_.on_body_end(Clock::now());
    if (state_.done()) return std::nullopt;
  }
  fault_ = ec == beast::error::timeout ? failover::Fault::kReadTimeout : failover::Fault::kCut;
  fault_text_ = ec.message();
  if (state_.committed()) return std::nullopt;  // the client gets an error event
  const bool too_slow =
      ec == beast::error::timeout && guarding() && Clock::now() >= guard_deadline();
  ctx_.judge(up_.c, up_.rec, *fault_, fault_text_, replaceable());
  if (too_slow) {
    // The speed guard's deadline, tighter than any configured one: slow,
    // not broken (as a stall deadline's).
    up_.rec.stall_derived = true;
    up_.rec.detail = std::to_string(state_.outputs()) + " of " +
                     std::to_string(ctx_.commit_after.tokens) + " output events within " +
                     std::to_string(ctx_.commit_after.within.count()) +
                     " ms of the first (routing commit_after: too slow to commit)";
  }
  return AttemptResult{};
}

net::awaitable<AttemptResult> Relay::run() {
  while (!up_.parser.is_done()) {
    beast::error_code ec;
    net::mutable_buffer into;
    if (begin_read(ec, into)) {
      auto [rec, got] = co_await body_.read_socket(into);
      ec = body_.end(rec, got, frames_.capacity());
    }
    ec = deliver(ec);
    // (A deferred side is cancelled when the race ends: not the client.)
    if (LLMGATE_CANCELLED()) co_return deferred_ ? declined() : client_gone("client disconnected");
    if (std::optional<AttemptResult> over = on_read()) co_return *over;
    // The end of the stream goes out with its last events, in one write.
    if (state_.done() || fault_) break;
    if (flush_due()) {
      // Most writes go at once: no coroutine for them (out_.write's would
      // cost one per event).
      bool ok = out_.write_now(state_.outbox().pieces()) && !out_.failed();
      if (!ok && !out_.failed()) ok = co_await out_.write_rest();
      if (!ok) co_return client_gone("client went away mid-stream");
      state_.outbox().clear();
      note_first_token_relayed();
    }
    if (ec) {
      if (std::optional<AttemptResult> over = on_read_error(ec)) co_return *over;
      break;
    }
  }
  // Never the client's: a deferred side whose body ended unclaimed -- a
  // probe's whole answer (a protocol whose end is the body's) proves it.
  if (deferred_ && !claimed_) {
    if (up_.rec.probe && !fault_ && up_.parser.is_done()) {
      state_.on_body_end(Clock::now());
      if (state_.complete() && !state_.fault()) co_return proved();
    }
    co_return declined();
  }
  // A body that ended cleanly completes a protocol without an end marker.
  if (!fault_ && up_.parser.is_done()) {
    state_.on_body_end(Clock::now());
    if (auto f = state_.fault()) {
      fault_ = f;
      fault_text_ = state_.fault_text();
    }
  }
  if (!fault_ && !state_.complete()) fault_ = failover::Fault::kEndedWithoutFinish;
  if (fault_) {
    failover::FaultReport r = ctx_.judge(up_.c, up_.rec, *fault_, fault_text_, replaceable());
    if (!state_.committed()) co_return AttemptResult{};
    if (may_continue()) co_return co_await break_off(std::move(r));
    co_return co_await end_with_error(r.client_error);
  }
  co_return co_await finish();
}

// Ends a committed stream: what was relayed before the failure, the error
// as an event, then a clean chunked end, and no [DONE] — a client can never
// mistake it for a complete answer.
net::awaitable<AttemptResult> Relay::end_with_error(const ApiError& error) {
  if (!state_.outbox().empty() && !co_await out_.write(state_.outbox().pieces())) {
    co_return AttemptResult{true, false};
  }
  const std::string event = ctx_.api.error_event(error, state_.next_sequence());
  const bool ok = co_await out_.write(event, /*last=*/true);
  co_return AttemptResult{true, ok && out_.chunked() && ctx_.rc.keep_alive};
}

bool Relay::may_continue() {
  StreamContinuation* k = ctx_.continuation;
  // (An answer that finished and was cut before its end marker is whole:
  // nothing to continue.)
  if (k == nullptr || !ctx_.req.stream || state_.complete()) return false;
  if (auto& own = state_.transcript()) {
    k->transcript = std::move(*own);
    own.reset();
  }
  if (const char* why = k->transcript.why_not()) {
    k->not_continuable = why;
    if (!k->first_broken) k->first_broken = up_.c.deployment;
    return false;
  }
  return k->breaks < StreamContinuation::kMaxBreaks;
}

net::awaitable<AttemptResult> Relay::break_off(failover::FaultReport report) {
  body_.stop();
  if (!state_.outbox().empty() && !co_await out_.write(state_.outbox().pieces()))
    co_return AttemptResult{true, false};
  state_.outbox().clear();
  StreamContinuation& k = *ctx_.continuation;
  if (k.breaks++ == 0) {
    k.first_broken = up_.c.deployment;
    k.first_fault = routing::to_string(up_.rec.outcome);
    k.broken_after = k.transcript.text_chunks();
  }
  k.broken = std::move(report.client_error);
  k.spent.prompt_tokens += std::max<std::int64_t>(0, up_.rec.input_tokens.value_or(0));
  k.spent.completion_tokens += std::max<std::int64_t>(0, up_.rec.output_tokens.value_or(0));
  co_return AttemptResult{false, ctx_.rc.keep_alive};
}

void Relay::commit() {
  state_.mark_committed();
  StreamContinuation* k = ctx_.continuation;
  if (k && k->broken) {
    // A continuation: the client has the head and the stream so far.
    k->broken.reset();
    k->by.push_back(up_.c.deployment->id());
    return;
  }
  ctx_.stream_committed = true;
  // No other attempt will be made: the client's document, kept to build
  // each attempt's upstream body, goes now rather than at the end of a
  // stream that may last minutes (an agent's conversation is tens of KiB)
  // -- unless a continuation may need it. The loser of a hedge race may
  // still be unwinding: then it stays. (Moved out, not assigned over: a
  // string assigned an empty one keeps its buffer.)
  if (ctx_.trace.race == nullptr) {
    providers::RequestBody gone = std::move(ctx_.req.body);
    // (An Anthropic client's own document too: `native` stays set, its
    // text gone, for what asks whether the request was one.)
    providers::RequestBody gone_native =
        ctx_.req.native ? std::move(*ctx_.req.native) : providers::RequestBody();
    if (k) {
      k->original = std::move(gone);
      k->original_kept = true;
    }
  }
  // Sent with the first events, in one write.
  HeadLines h = out_.start_head(http::status::ok);
  h.set("Content-Type", "text/event-stream");
  h.set("Cache-Control", "no-cache");
  h.set("x-accel-buffering", "no");
  ctx_.trace.add_headers(h, ctx_.rc.request_id, &up_.rec);
  relay_upstream_headers(up_.parser.get(), h);
  if (out_.chunked())
    h.set("Trailer", k ? "x-llmgate-output-tokens, x-llmgate-tps, x-llmgate-continued"
                       : "x-llmgate-output-tokens, x-llmgate-tps");
  out_.end_head(h);
}

// The first output: this attempt takes the client (a hedge race ends here).
// False when the other branch already has.
Relay::Claim Relay::claim_output() {
  if (claimed_ || !state_.has_output()) return Claim::kOk;
  const bool ok = ctx_.claim(up_.branch, /*whole=*/state_.done());
  if (!ok && !ctx_.deferred(up_.branch)) return Claim::kLost;
  if (!deferred_) {
    // (The TTFT sample with its first output, under one lock of the
    // statistics -- a deferred side's too: it is a real first token.)
    const auto t = up_.rec.ttft();
    up_.in_flight.first_token(t);
    if (t) up_.rec.ttft_recorded = true;
  }
  if (!ok) {
    deferred_ = true;
    return Claim::kDeferred;
  }
  claimed_ = true;
  return Claim::kOk;
}

void Relay::note_first_token_relayed() {
  if (first_token_relayed_ || !up_.rec.first_token) return;
  first_token_relayed_ = true;
  ctx_.snapshot.metrics->shared().on_overhead(OverheadPhase::kFirstToken,
                                              Clock::now() - *up_.rec.first_token);
}

// A complete answer: the stream's last bytes and trailers, or the assembled
// non-streamed body; then the upstream connection is kept if it can be.
net::awaitable<AttemptResult> Relay::finish() {
  up_.rec.outcome = AttemptOutcome::kSuccess;
  if (pauses_ >= routing::AttemptRecord::kMinPauseReads)
    up_.rec.longest_pause = std::chrono::duration_cast<std::chrono::microseconds>(longest_pause_);
  AttemptResult result{true, ctx_.rc.keep_alive};
  if (ctx_.req.stream) {
    state_.end_stream();
    if (!state_.committed()) commit();
    std::string trailers = state_.trailers();
    if (const StreamContinuation* k = ctx_.continuation; k && !k->by.empty())
      trailers.append("x-llmgate-continued: ").append(k->describe()).append("\r\n");
    // As write() would, without a coroutine frame when the socket takes it all.
    bool ok = out_.write_now(state_.outbox().pieces(), /*last=*/true, trailers) && !out_.failed();
    if (!ok && !out_.failed()) ok = co_await out_.write_rest();
    state_.outbox().clear();
    if (ok) note_first_token_relayed();
    result.keep_alive = ok && out_.chunked() && ctx_.rc.keep_alive;
  } else {
    // As make_json_response would, without Beast's fields.
    const std::string body = state_.completion();
    std::string head;
    head.reserve(512);
    HeadLines h(head);
    h.start(ctx_.rc.version, http::status::ok);
    h.set("Content-Type", "application/json");
    ctx_.trace.add_headers(h, ctx_.rc.request_id, &up_.rec);
    relay_upstream_headers(up_.parser.get(), h);
    if (up_.rec.output_tokens)
      h.set("x-llmgate-output-tokens", std::to_string(*up_.rec.output_tokens));
    if (auto tps = up_.rec.tps()) h.set("x-llmgate-tps", format_decimal(*tps));
    h.end(ctx_.rc.version, ctx_.rc.keep_alive, body.size());
    // As write_whole would, without a coroutine frame when the socket takes it all.
    GatheredWrite w(head, body);
    std::optional<bool> ok = write_whole_now(ctx_.client, w);
    if (!ok) ok = co_await write_whole_rest(ctx_.client, w, up_.c.timeouts.idle);
    result.keep_alive = *ok && ctx_.rc.keep_alive;
  }
  // Most responses are read to their end with [DONE]: no drain to wait for.
  if (!up_.parser.is_done()) co_await drain_for_reuse();
  if (up_.parser.is_done() && up_.parser.keep_alive()) {
    up_.lease->stream.tcp().expires_never();
    up_.lease.give_back();
  }
  co_return result;
}

// Reads what is left of the response after [DONE], for a short while: one
// that ends promptly keeps its connection (finish() gives it back).
net::awaitable<void> Relay::drain_for_reuse() {
  const auto until = Clock::now() + kDrainForReuse;
  while (!up_.parser.is_done()) {
    // Discarded: after [DONE].
    if (co_await body_.read(until, frames_.prepare(body_.room()))) break;
  }
}

}  // namespace

net::awaitable<AttemptResult> relay(AttemptContext& ctx, RelayUpstream up) {
  Relay r(ctx, up);
  co_return co_await r.run();
}

}  // namespace llmgate::gateway
