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
#include "gateway/chat_proxy.h"

#include <sys/socket.h>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/http.hpp>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <optional>
#include <span>
#include <sstream>
#include <string>
#include <variant>

#include "gateway/admission.h"
#include "gateway/attempt_result.h"
#include "gateway/chat_request.h"
#include "gateway/client_stream.h"
#include "gateway/failover_policy.h"
#include "gateway/headers.h"
#include "gateway/log.h"
#include "gateway/outbox.h"
#include "gateway/race.h"
#include "gateway/redact.h"
#include "gateway/relay_state.h"
#include "providers/chat_chunk.h"
#include "providers/completion_assembler.h"
#include "providers/sse_parser.h"
#include "providers/upstream_protocol.h"
#include "routing/route_override.h"
#include "routing/router.h"

namespace llmgate::gateway {
namespace {

using namespace net::experimental::awaitable_operators;
using routing::AttemptOutcome;
using routing::AttemptRecord;
using Clock = std::chrono::steady_clock;
constexpr auto kUseTuple = net::as_tuple(net::use_awaitable);

// Upstream body bytes per read (the SSE parser's buffer grows past it only
// for an event that does not fit).
constexpr std::size_t kReadChunk = 4096;
constexpr std::size_t kMaxErrorBody = 64 * 1024;
constexpr std::uint32_t kMaxUpstreamHeader = 64 * 1024;
constexpr auto kDrainForReuse = std::chrono::milliseconds(500);

using UpstreamParser = http::response_parser<http::buffer_body>;

double ms_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

class ChatProxy {
 public:
  ChatProxy(Worker& worker, const Snapshot& snapshot, beast::tcp_stream& client,
            const Request& client_request, const RequestContext& rc, ChatRequest req,
            routing::RouteOverride route, const config::GatewayKey* key)
      : worker_(worker),
        snapshot_(snapshot),
        cfg_(*snapshot.config),
        rs_(*snapshot.routing),
        metrics_(*snapshot.metrics),
        key_(key),
        client_(client),
        client_request_(client_request),
        rc_(rc),
        req_(std::move(req)),
        route_(std::move(route)),
        explain_(cfg_.explain() == config::Explain::kAll || (key && key->explain)) {}

  net::awaitable<bool> run(const config::Model& model);
  RequestOutcome outcome() const { return outcome_; }
  // Input + output tokens of the attempt that answered (for key rate limits).
  std::int64_t tokens_used() const { return tokens_used_; }
  // The drain ran out of time while this request was in flight (its run()
  // was cancelled): end it explicitly — an error event on a committed
  // stream (never [DONE]), else a 503 — unless a write was cut part-way,
  // when only closing is safe. The connection is not reused.
  net::awaitable<void> end_for_shutdown();

 private:
  // One attempt with its bookkeeping (in-flight count, statistics, health),
  // recorded on every path including cancellation.
  net::awaitable<AttemptResult> run_attempt(const routing::PlannedCandidate& pc, int branch);
  // Two attempts, the second started after the first's hedge delay.
  net::awaitable<AttemptResult> hedged(const routing::PlannedCandidate& first,
                                       const routing::PlannedCandidate& second,
                                       bool& second_started);
  // The attempt has output and takes the client; false when the other side
  // of a hedge race already has.
  bool claim(int branch) { return race_ == nullptr || race_->claim(branch); }

  net::awaitable<AttemptResult> attempt(const routing::Candidate& c, AttemptRecord& rec,
                                        int branch);
  net::awaitable<AttemptResult> relay(const routing::Candidate& c, AttemptRecord& rec,
                                      providers::Lease& lease, UpstreamParser& parser, int branch);
  net::awaitable<AttemptResult> pass_through_status(AttemptRecord& rec, providers::Lease& lease,
                                                    UpstreamParser& parser,
                                                    Clock::time_point deadline, int branch);
  // One relay: the attempt's upstream, its state and the client's stream.
  struct RelayIo {
    const routing::Candidate& c;
    AttemptRecord& rec;
    providers::Lease& lease;
    UpstreamParser& parser;
    int branch;
    RelayState state;
    ClientStream out;
    providers::SseParser sse;
    bool claimed = false;
    bool first_token_relayed = false;  // for the gateway-overhead metric
  };
  net::awaitable<beast::error_code> read_events(RelayIo& io);
  net::awaitable<AttemptResult> finish_relay(RelayIo& io);
  net::awaitable<AttemptResult> end_with_error(RelayIo& io, const ApiError& error);
  // Records what `f` makes of the attempt in `rec` (outcome, detail) and
  // returns the judgement (failover_policy.h).
  failover::FaultReport judge(const routing::Candidate& c, AttemptRecord& rec, failover::Fault f,
                              std::string_view text) const;
  void commit(RelayIo& io);
  bool claim_output(RelayIo& io);
  void note_first_token_relayed(RelayIo& io);
  http::request<http::string_body> upstream_request(const routing::Candidate& c);
  void add_route_headers(http::fields& h, const AttemptRecord* rec) const;
  void finish_attempt(const routing::PlannedCandidate& pc, AttemptRecord& rec, int branch);
  static AttemptResult fail(AttemptRecord& rec, AttemptOutcome o, std::string detail);
  // The configured provider keys, for redact_secrets (failure paths only).
  std::vector<std::string> provider_keys() const {
    std::vector<std::string> keys;
    for (const auto& p : cfg_.providers) {
      if (!p.api_key.empty()) keys.push_back(p.api_key);
    }
    return keys;
  }
  void log_request(const AttemptRecord* final) const;

  Worker& worker_;
  const Snapshot& snapshot_;
  const config::Config& cfg_;
  routing::RoutingState& rs_;
  Metrics& metrics_;
  const config::GatewayKey* key_;  // the caller's gateway key, if keys are configured
  beast::tcp_stream& client_;
  const Request& client_request_;
  const RequestContext& rc_;
  ChatRequest req_;
  routing::RouteOverride route_;
  // The client may see how it was routed: deployments, prices, exclusions
  // (server.explain). The log always has it.
  const bool explain_;
  routing::RouteDecision decision_;
  Clock::time_point start_ = Clock::now();
  Clock::time_point total_deadline_{};
  int attempt_no_ = 0;
  Race* race_ = nullptr;
  routing::StatsRegistry::InFlight* in_flight_[2] = {nullptr, nullptr};  // per race branch
  failover::FailureSummary failures_;  // what went wrong, for the final error and headers
  std::optional<AttemptRecord> last_failed_;
  bool admission_measured_ = false;
  bool stream_committed_ = false;     // a streaming response head went to the client
  bool client_write_failed_ = false;  // a client write failed or was cut part-way
  std::int64_t tokens_used_ = 0;
  RequestOutcome outcome_ = RequestOutcome::kClientGone;
};

net::awaitable<bool> ChatProxy::run(const config::Model& model) {
  const auto now = Clock::now();
  const auto scope = key_ && key_->allow_overrides ? routing::OverrideScope::kWiden
                                                   : routing::OverrideScope::kNarrow;
  routing::RouteRequest rq{&cfg_, &model, routing::apply_override(model.routing, route_, scope),
                           route_.order, req_.max_tokens};
  std::vector<std::string> ids;
  for (const auto& d : model.deployments) ids.push_back(d.id());
  auto health = rs_.health.check(ids, now);
  std::vector<routing::DeploymentView> views;
  for (std::size_t i = 0; i < ids.size(); ++i) {
    views.push_back({rs_.stats.get_or_prior(ids[i], now), health[i]});
  }
  decision_ =
      routing::decide(rq, views, rs_.options, now, rs_.next_round_robin(model.name), worker_.rng);
  // A half-open probe slot handed out for a deployment that is not tried
  // (skipped, or planned but not reached) is given back when the request ends,
  // on every path.
  struct ReleaseUntriedProbes {
    routing::HealthTracker& tracker;
    const std::vector<std::string>& ids;
    const std::vector<routing::Availability>& health;
    std::vector<bool> tried;
    ~ReleaseUntriedProbes() {
      for (std::size_t i = 0; i < ids.size(); ++i) {
        if (health[i].probe && !tried[i]) tracker.release_probe(ids[i]);
      }
    }
  } probes{rs_.health, ids, health, std::vector<bool>(ids.size(), false)};
  auto mark_tried = [&](const routing::PlannedCandidate& pc) {
    probes.tried[static_cast<std::size_t>(pc.candidate.deployment - model.deployments.data())] =
        true;
  };
  rs_.retries.deposit(now);

  if (decision_.candidates.empty()) {
    outcome_ = RequestOutcome::kRejected;
    const bool limited = decision_.error_status == 429;
    // Why each deployment was left out names prices and providers: for the
    // log, and for clients allowed to see route explanations.
    log_line(LogLevel::kInfo, "request " + rc_.request_id + ": " + decision_.error_message);
    std::string message = explain_ ? decision_.error_message
                          : limited
                              ? "every deployment of model \"" + req_.model +
                                    "\" is rate limited upstream; retry after the Retry-After delay"
                              : "no deployment of model \"" + req_.model +
                                    "\" can serve this request under its routing constraints";
    ApiError e{decision_.error_status,
               limited ? "rate_limit_error" : "service_unavailable",
               std::move(message),
               std::nullopt,
               limited ? "upstream_rate_limited" : "no_route",
               decision_.retry_after_s};
    Response res = make_error_response(rc_, e);
    add_route_headers(res, nullptr);
    log_request(nullptr);
    co_return co_await write_response(client_, res, cfg_.timeouts.idle) && rc_.keep_alive;
  }

  metrics_.on_route(model.name, decision_.candidates.front().candidate.deployment->id(),
                    decision_.policy);
  const bool hedging = rq.policy.hedging.enabled;
  total_deadline_ = start_ + cfg_.timeouts.total;
  std::size_t next = 0;
  while (next < decision_.candidates.size()) {
    if (Clock::now() >= total_deadline_) break;
    if (attempt_no_ > 0 && !rs_.retries.try_spend(Clock::now())) {
      // Retries would multiply an outage: stop here (docs/routing.md).
      failures_.budget_exhausted();
      break;
    }
    const auto& pc = decision_.candidates[next];
    if (!failures_.outcomes().empty()) metrics_.shared().on_fallback(failures_.outcomes().back());
    AttemptResult r;
    // A capped candidate (explored, re-checked, probed) is always hedged by
    // the next one: learning about it costs a client at most its hedge delay.
    if ((hedging || pc.capped) && next + 1 < decision_.candidates.size() &&
        pc.hedge_delay < pc.candidate.timeouts.ttft) {
      const auto& second = decision_.candidates[next + 1];
      bool second_started = false;
      mark_tried(pc);
      r = co_await hedged(pc, second, second_started);
      if (second_started) mark_tried(second);
      next += second_started ? 2 : 1;
    } else {
      mark_tried(pc);
      r = co_await run_attempt(pc, 0);
      next += 1;
    }
    if (r.responded) co_return r.keep_alive;
    if (LLMGATE_CANCELLED()) co_return false;
  }
  outcome_ = RequestOutcome::kError;
  ApiError e =
      failures_.final_error(req_.model, attempt_no_, explain_, Clock::now() >= total_deadline_);
  log_line(LogLevel::kWarn, "request " + rc_.request_id + ": every attempt failed: " +
                                redact_secrets(failures_.detail(), provider_keys()));
  Response res = make_error_response(rc_, e);
  add_route_headers(res, nullptr);
  log_request(last_failed_ ? &*last_failed_ : nullptr);
  co_return co_await write_response(client_, res, cfg_.timeouts.idle) && rc_.keep_alive;
}

net::awaitable<void> ChatProxy::end_for_shutdown() {
  outcome_ = RequestOutcome::kError;
  if (client_write_failed_) co_return;
  const ApiError e{503,
                   "server_error",
                   "the gateway is shutting down and its drain timeout ran out before this "
                   "request finished; retry it",
                   std::nullopt,
                   "gateway_shutdown",
                   1};
  if (!stream_committed_) {
    Response res = make_error_response(rc_, e);
    res.keep_alive(false);
    co_await write_response(client_, res, cfg_.timeouts.idle);
    co_return;
  }
  ClientStream out(client_, rc_, cfg_.timeouts.idle, client_write_failed_);
  const std::string event = e.sse_event();
  co_await out.write(event, /*last=*/true);
}

void ChatProxy::finish_attempt(const routing::PlannedCandidate& pc, AttemptRecord& rec,
                               int branch) {
  if (race_ && race_->lost(branch) && !rec.first_token) {
    rec.outcome = AttemptOutcome::kHedgeLost;
    rec.detail = "a hedge produced the first token first";
  }
  const auto now = Clock::now();
  const auto recorded = rs_.stats.record(rec, now);
  metrics_.on_attempt(req_.model, rec);
  // What the outcome does to health is the failover policy's (merely slow,
  // the client's doing, a lost hedge: nothing).
  const failover::Effects fx = failover::effects_of(rec, pc.candidate.timeouts.ttft,
                                                    cfg_.timeouts_for(*pc.candidate.provider).ttft);
  if (fx.health == failover::HealthEffect::kNone) {
    if (pc.probe) rs_.health.release_probe(rec.deployment);
  } else {
    rs_.health.on_attempt(rec.deployment, fx.health == failover::HealthEffect::kFailure,
                          recorded.error_rate, recorded.attempts, now, pc.probe);
  }
  if (fx.cooldown)
    rs_.health.on_retry_after(rec.deployment, std::chrono::seconds(*rec.retry_after_s), now);
}

net::awaitable<AttemptResult> ChatProxy::run_attempt(const routing::PlannedCandidate& pc,
                                                     int branch) {
  const routing::Candidate& c = pc.candidate;
  // A deployment at its max_concurrent: wait in its queue (bounded by the
  // connect timeout), or move on without contacting it — not an attempt.
  ConcurrencyLimiter::Slot slot;
  if (auto it = snapshot_.limiters.find(c.deployment->id()); it != snapshot_.limiters.end()) {
    ConcurrencyLimiter::Acquired got = co_await it->second->acquire(
        failover::Deadlines(c.timeouts, total_deadline_).connect(Clock::now()));
    if (got.result != ConcurrencyLimiter::Result::kGranted) {
      if (LLMGATE_CANCELLED()) co_return AttemptResult{};
      const bool full = got.result == ConcurrencyLimiter::Result::kQueueFull;
      failures_.saturated(c.deployment->id(),
                          "at its max_concurrent (" + std::to_string(it->second->in_use()) +
                              " in flight), " +
                              (full ? "wait queue full" : "no slot within the connect timeout"));
      metrics_.on_saturated(c.deployment->id(),
                            full ? Saturation::kQueueFull : Saturation::kQueueTimeout);
      co_return AttemptResult{};
    }
    slot = std::move(got.slot);
  }
  // The same for this worker's connection pool to the provider: waiting for
  // a slot is local saturation, never an upstream failure — no attempt, no
  // effect on health or statistics; bounded by the connect timeout, then the
  // next candidate (then 503 + Retry-After when every one was saturated).
  auto& pool = worker_.pools->get(*c.provider, snapshot_.tls);
  if (!pool.has_room()) {
    const bool room = co_await pool.wait_for_room(
        failover::Deadlines(c.timeouts, total_deadline_).connect(Clock::now()));
    if (!room) {
      if (LLMGATE_CANCELLED()) co_return AttemptResult{};
      failures_.saturated(c.deployment->id(), "this gateway's connection pool to provider \"" +
                                                  c.provider->name + "\" is full (" +
                                                  std::to_string(c.provider->pool.max_connections) +
                                                  " connections per worker, pool.max_connections)");
      metrics_.on_saturated(c.deployment->id(), Saturation::kPoolFull);
      co_return AttemptResult{};
    }
  }
  ++attempt_no_;
  AttemptRecord rec;
  rec.deployment = c.deployment->id();
  rec.started = Clock::now();
  rec.outcome = AttemptOutcome::kClientGone;  // what it is if this frame is cancelled
  struct Report {
    ChatProxy& self;
    const routing::PlannedCandidate& pc;
    AttemptRecord& rec;
    int branch;
    ~Report() { self.finish_attempt(pc, rec, branch); }
  } report{*this, pc, rec, branch};
  routing::StatsRegistry::InFlight in_flight(rs_.stats, rec.deployment);
  in_flight_[branch] = &in_flight;
  struct Unset {
    routing::StatsRegistry::InFlight*& slot;
    ~Unset() { slot = nullptr; }
  } unset{in_flight_[branch]};

  AttemptResult r = co_await attempt(c, rec, branch);
  if (race_ && race_->lost(branch)) co_return AttemptResult{};  // lost
  if (r.responded) {
    tokens_used_ = std::max<std::int64_t>(0, rec.input_tokens.value_or(0)) +
                   std::max<std::int64_t>(0, rec.output_tokens.value_or(0));
    outcome_ = rec.outcome == AttemptOutcome::kSuccess       ? RequestOutcome::kSuccess
               : rec.outcome == AttemptOutcome::kClientError ? RequestOutcome::kClientError
               : rec.outcome == AttemptOutcome::kClientGone  ? RequestOutcome::kClientGone
                                                             : RequestOutcome::kError;
    // The outcome stands even if the client hung up after its response
    // (the watcher may then cancel the post-response drain).
    log_request(&rec);
    co_return r;
  }
  if (LLMGATE_CANCELLED()) {
    rec.outcome = AttemptOutcome::kClientGone;
    co_return r;
  }
  if (rec.outcome == AttemptOutcome::kHedgeLost) co_return r;
  last_failed_ = rec;
  failures_.failed(rec);
  log_line(LogLevel::kDebug,
           "request " + rc_.request_id + " attempt " + std::to_string(attempt_no_) + " on " +
               rec.deployment + " failed (" + routing::to_string(rec.outcome) + "): " + rec.detail);
  co_return r;
}

net::awaitable<AttemptResult> ChatProxy::hedged(const routing::PlannedCandidate& first,
                                                const routing::PlannedCandidate& second,
                                                bool& second_started) {
  Race race(
      [&](int branch) -> net::awaitable<AttemptResult> {
        if (branch == 1) {
          second_started = true;
          ++rs_.hedges_started;
        }
        co_return co_await run_attempt(branch == 0 ? first : second, branch);
      },
      // Capped candidates are few (exploration, re-checks, probes): their
      // hedges do not spend the model's hedge budget.
      [&] { return first.capped || rs_.hedges(req_.model).try_spend(Clock::now()); },
      [&](HedgeResult h) {
        if (h == HedgeResult::kWon) ++rs_.hedges_won;
        metrics_.shared().on_hedge(h);
      });
  race_ = &race;
  rs_.hedges(req_.model).deposit(Clock::now());
  AttemptResult r = co_await race.run(first.hedge_delay);
  race_ = nullptr;
  co_return r;
}

AttemptResult ChatProxy::fail(AttemptRecord& rec, AttemptOutcome o, std::string detail) {
  rec.outcome = o;
  rec.detail = std::move(detail);
  return AttemptResult{};
}

http::request<http::string_body> ChatProxy::upstream_request(const routing::Candidate& c) {
  const auto& url = c.provider->base_url;
  const auto& protocol = providers::openai_chat_protocol();
  http::request<http::string_body> up{http::verb::post,
                                      url.path_prefix + std::string(protocol.path()), 11};
  // End-to-end client headers pass through (RFC 9110 §7.6); hop-by-hop ones,
  // those the Connection header names, and the client's credentials do not.
  // Every Connection line counts (a second one must not smuggle a header
  // past the hop-by-hop filter), and so does every Via line.
  std::vector<std::string> hop;
  std::string via;
  for (const auto& f : client_request_) {
    if (f.name() == http::field::connection) {
      for (auto& t : connection_tokens(f.value())) hop.push_back(std::move(t));
    } else if (f.name() == http::field::via) {
      via.append(via.empty() ? "" : ", ").append(f.value());
    }
  }
  for (const auto& f : client_request_) {
    if (is_hop_by_hop(f.name_string(), hop) || is_gateway_owned(f.name_string()) ||
        f.name() == http::field::via) {
      continue;
    }
    up.insert(f.name_string(), f.value());
  }
  up.set(http::field::via, via.append(via.empty() ? "" : ", ")
                               .append(rc_.version == 10 ? "1.0 " : "1.1 ")
                               .append(worker_.via_name));
  up.set(http::field::host, url.authority());
  up.set(http::field::content_type, "application/json");
  up.set(http::field::accept, "text/event-stream");
  up.set(http::field::user_agent, "llmgate/0.1");
  up.set("x-request-id", rc_.request_id);  // the client's own, or the one we made
  if (!c.provider->api_key.empty()) {
    auto [name, value] = protocol.credential(c.provider->api_key);
    up.set(beast::string_view(name.data(), name.size()), value);
  }
  for (const auto& [name, value] : c.provider->headers) up.set(name, value);
  up.keep_alive(true);
  up.body() = protocol.body(req_.body, c.deployment->model);
  up.prepare_payload();
  return up;
}

void ChatProxy::add_route_headers(http::fields& h, const AttemptRecord* rec) const {
  h.set("x-request-id", rc_.request_id);
  h.set("x-llmgate-policy", config::to_string(decision_.policy));
  h.set("x-llmgate-attempts", std::to_string(attempt_no_));
  if (race_ && race_->hedge_started()) {
    h.set("x-llmgate-hedged", race_->winner() == 1 ? "hedge-won" : "primary-won");
  }
  if (rec) {
    if (auto t = rec->ttft()) {
      h.set("x-llmgate-ttft-ms",
            format_decimal(std::chrono::duration<double, std::milli>(*t).count()));
    }
  }
  if (!explain_) return;  // which deployments, prices and exclusions: not for this client
  if (auto route = routing::explain(decision_); !route.empty()) h.set("x-llmgate-route", route);
  if (rec) h.set("x-llmgate-deployment", rec->deployment);
  if (!failures_.empty()) h.set("x-llmgate-failed", failures_.header());
}

net::awaitable<AttemptResult> ChatProxy::attempt(const routing::Candidate& c, AttemptRecord& rec,
                                                 int branch) {
  auto& pool = worker_.pools->get(*c.provider, snapshot_.tls);
  auto up = upstream_request(c);

  // A reused keep-alive connection may have been closed by the peer just as we
  // took it; that failure says nothing about the deployment, so the request
  // is sent once more on a fresh connection. Only while no response byte came.
  const failover::Deadlines deadlines(c.timeouts, total_deadline_);
  for (int round = 0; round < 2; ++round) {
    const auto acquire_start = Clock::now();
    providers::AcquireResult acq =
        co_await pool.acquire(deadlines.connect(acquire_start), /*allow_reuse=*/round == 0);
    const auto acquire_time = Clock::now() - acquire_start;
    if (!acq.lease) co_return fail(rec, AttemptOutcome::kConnectError, acq.error);
    providers::Lease& lease = acq.lease;
    rec.reused_connection = lease.reused();
    auto& tcp = lease->stream.tcp();

    tcp.expires_at(deadlines.write(Clock::now()));
    auto [wec, wn] = co_await http::async_write(lease->stream, up, kUseTuple);
    if (wec) {
      if (lease.reused() && round == 0) continue;
      co_return fail(rec, AttemptOutcome::kConnectError, "cannot send request: " + wec.message());
    }
    rec.request_sent = Clock::now();
    if (!admission_measured_ && rc_.received != Clock::time_point{}) {
      // The gateway's own share of getting the request out: parsing,
      // routing, building the upstream request — not the upstream connect.
      admission_measured_ = true;
      metrics_.shared().on_overhead(OverheadPhase::kAdmission,
                                    rec.request_sent - rc_.received - acquire_time);
    }
    auto ttft_deadline = deadlines.first_token(rec.request_sent);

    UpstreamParser parser;
    parser.body_limit(boost::none);  // events are bounded one by one instead
    parser.header_limit(kMaxUpstreamHeader);
    tcp.expires_at(ttft_deadline);
    std::size_t buffered_before = lease->buffer.size();
    auto [hec, hn] =
        co_await http::async_read_header(lease->stream, lease->buffer, parser, kUseTuple);
    if (LLMGATE_CANCELLED()) {
      rec.detail = "client disconnected";
      co_return AttemptResult{true, false};
    }
    if (hec) {
      bool stale = lease.reused() && round == 0 && buffered_before == 0 && hn == 0 &&
                   (hec == http::error::end_of_stream || hec == net::error::connection_reset ||
                    hec == net::error::eof);
      if (stale) continue;
      judge(
          c, rec,
          hec == beast::error::timeout ? failover::Fault::kHeadTimeout : failover::Fault::kHeadCut,
          hec.message());
      co_return AttemptResult{};
    }
    rec.http_status = static_cast<int>(parser.get().result_int());
    if (rec.http_status != 200) {
      co_return co_await pass_through_status(rec, lease, parser, ttft_deadline, branch);
    }
    auto ct = parser.get()[http::field::content_type];
    if (ct.substr(0, 17) != "text/event-stream") {
      judge(c, rec, failover::Fault::kNotEventStream, std::string_view(ct.data(), ct.size()));
      co_return AttemptResult{};
    }
    co_return co_await relay(c, rec, lease, parser, branch);
  }
  co_return fail(rec, AttemptOutcome::kConnectError, "connection closed by upstream");
}

net::awaitable<AttemptResult> ChatProxy::pass_through_status(AttemptRecord& rec,
                                                             providers::Lease& lease,
                                                             UpstreamParser& parser,
                                                             Clock::time_point deadline,
                                                             int branch) {
  const int status = rec.http_status;
  auto ra = parser.get()[http::field::retry_after];
  if (!ra.empty()) {
    int s = parse_retry_after(ra, std::chrono::duration_cast<std::chrono::seconds>(
                                      std::chrono::system_clock::now().time_since_epoch())
                                      .count());
    if (s >= 0) rec.retry_after_s = s;
  }
  // Read the (small) error body so the message can be reported or returned.
  std::string body;
  char buf[4096];
  lease->stream.tcp().expires_at(deadline);
  while (!parser.is_done() && body.size() < kMaxErrorBody) {
    parser.get().body().data = buf;
    parser.get().body().size = sizeof buf;
    auto [ec, n] = co_await http::async_read_some(lease->stream, lease->buffer, parser, kUseTuple);
    body.append(buf, sizeof buf - parser.get().body().size);
    if (ec && ec != http::error::need_buffer) break;
  }
  if (parser.is_done() && parser.keep_alive()) lease.give_back();

  // Whatever an upstream says is scrubbed of anything that looks like a key
  // before it is kept anywhere: a provider's 401 quotes the operator's key.
  body = redact_secrets(body, provider_keys());
  std::string upstream_message;
  auto j = nlohmann::json::parse(body, nullptr, false);
  if (j.is_object() && j.contains("error") && j["error"].is_object() &&
      j["error"].contains("message") && j["error"]["message"].is_string()) {
    upstream_message = j["error"]["message"].get<std::string>();
  } else {
    upstream_message = body.substr(0, 200);
  }
  std::string detail =
      "HTTP " + std::to_string(status) + (upstream_message.empty() ? "" : ": " + upstream_message);

  if (failover::judge_status(status) == failover::StatusVerdict::kFailOver) {
    // A provider refusing our own key or config needs the operator.
    log_line(failover::needs_operator(status) ? LogLevel::kWarn : LogLevel::kDebug,
             "request " + rc_.request_id + ": " + rec.deployment + " answered " + detail);
    co_return fail(rec, AttemptOutcome::kUpstreamStatus, detail);
  }
  // The caller's fault (400, 413, 422...): the next deployment would say the
  // same. Return it as the upstream said it (scrubbed), in OpenAI's shape.
  if (!claim(branch)) co_return fail(rec, AttemptOutcome::kHedgeLost, "a hedge answered first");
  rec.outcome = AttemptOutcome::kClientError;
  rec.detail = detail;
  Response res;
  if (j.is_object() && j.contains("error") && j["error"].is_object()) {
    res = make_json_response(rc_, static_cast<http::status>(status), body);
  } else {
    res = make_error_response(rc_, ApiError{status, "invalid_request_error", detail, std::nullopt,
                                            "upstream_rejected_request", std::nullopt});
  }
  add_route_headers(res, &rec);
  AttemptResult r;
  r.responded = true;
  r.keep_alive = co_await write_response(client_, res, cfg_.timeouts.idle) && rc_.keep_alive;
  co_return r;
}

// Ends a committed stream: what was relayed before the failure, the error
// as an event, then a clean chunked end, and no [DONE] — a client can never
// mistake it for a complete answer.
net::awaitable<AttemptResult> ChatProxy::end_with_error(RelayIo& io, const ApiError& error) {
  if (!io.state.outbox().empty() && !co_await io.out.write(io.state.outbox().pieces())) {
    co_return AttemptResult{true, false};
  }
  const std::string event = chat_completions_api().error_event(error);
  const bool ok = co_await io.out.write(event, /*last=*/true);
  co_return AttemptResult{true, ok && io.out.chunked() && rc_.keep_alive};
}

failover::FaultReport ChatProxy::judge(const routing::Candidate& c, AttemptRecord& rec,
                                       failover::Fault f, std::string_view text) const {
  const failover::Deadlines d(c.timeouts, total_deadline_);
  failover::FaultReport r =
      failover::judge_fault(f, failover::FaultContext{d, Clock::now(), rec.first_token.has_value(),
                                                      cfg_.server.limits.max_event_bytes, text});
  rec.outcome = r.outcome;
  rec.detail = r.detail;
  return r;
}

void ChatProxy::commit(RelayIo& io) {
  io.state.mark_committed();
  stream_committed_ = true;
  http::response<http::empty_body> res{http::status::ok, rc_.version};
  res.set(http::field::content_type, "text/event-stream");
  res.set(http::field::cache_control, "no-cache");
  res.set("x-accel-buffering", "no");
  add_route_headers(res, &io.rec);
  if (io.out.chunked()) res.set(http::field::trailer, "x-llmgate-output-tokens, x-llmgate-tps");
  io.out.set_head(res);  // sent with the first events, in one write
}

// The first output: this attempt takes the client (a hedge race ends here).
// False when the other branch already has.
bool ChatProxy::claim_output(RelayIo& io) {
  if (io.claimed || !io.state.has_output()) return true;
  if (!claim(io.branch)) return false;
  io.claimed = true;
  if (auto* f = in_flight_[io.branch]) f->first_token();
  if (auto t = io.rec.ttft()) {
    rs_.stats.record_first_token(io.rec.deployment, *t);
    io.rec.ttft_recorded = true;
  }
  return true;
}

void ChatProxy::note_first_token_relayed(RelayIo& io) {
  if (io.first_token_relayed || !io.rec.first_token) return;
  io.first_token_relayed = true;
  metrics_.shared().on_overhead(OverheadPhase::kFirstToken, Clock::now() - *io.rec.first_token);
}

// Reads once from the upstream into the SSE parser and feeds the events to
// the relay's state. Returns the read's error (need_buffer cleared).
net::awaitable<beast::error_code> ChatProxy::read_events(RelayIo& io) {
  io.lease->stream.tcp().expires_at(
      failover::Deadlines(io.c.timeouts, total_deadline_)
          .next_read(Clock::now(), io.rec.request_sent, io.rec.first_token.has_value()));
  io.state.outbox().hold();  // views into the parser's buffer must not outlive the next prepare()
  std::span<char> space = io.sse.prepare(kReadChunk / 2);  // all the free space, at least this
  io.parser.get().body().data = space.data();
  io.parser.get().body().size = space.size();
  auto [ec, n] =
      co_await http::async_read_some(io.lease->stream, io.lease->buffer, io.parser, kUseTuple);
  if (ec == http::error::need_buffer) ec = {};
  if (std::size_t got = space.size() - io.parser.get().body().size; got > 0) {
    io.sse.commit(got);
    const auto now = Clock::now();
    auto on_event = [&](const providers::SseEvent& ev) { io.state.on_event(ev, now); };
    if (io.sse.drain(on_event) == providers::SseParser::Status::kEventTooLarge)
      io.state.on_event_too_large();
    if (auto speed = io.state.take_speed_sample())
      rs_.stats.record_speed(io.rec.deployment, *speed, now);
  }
  co_return ec;
}

net::awaitable<AttemptResult> ChatProxy::relay(const routing::Candidate& c, AttemptRecord& rec,
                                               providers::Lease& lease, UpstreamParser& parser,
                                               int branch) {
  RelayIo io{c,
             rec,
             lease,
             parser,
             branch,
             RelayState(chat_completions_api(), providers::openai_chat_protocol(), req_, rec),
             ClientStream(client_, rc_, c.timeouts.idle, client_write_failed_),
             providers::SseParser(cfg_.server.limits.max_event_bytes)};
  std::optional<failover::Fault> fault;
  std::string fault_text;
  while (!parser.is_done()) {
    beast::error_code ec = co_await read_events(io);
    if (LLMGATE_CANCELLED()) {
      rec.outcome = AttemptOutcome::kClientGone;
      rec.detail = "client disconnected";
      co_return AttemptResult{true, false};
    }
    if ((fault = io.state.fault())) {
      fault_text = *fault == failover::Fault::kInBandError
                       ? redact_secrets(io.state.fault_text(), provider_keys())
                       : io.state.fault_text();
    }
    // Before the commit any fault fails the attempt over: nothing was sent.
    if (fault && !io.state.committed()) {
      judge(io.c, io.rec, *fault, fault_text);
      co_return AttemptResult{};
    }
    if (!claim_output(io))
      co_return fail(rec, AttemptOutcome::kHedgeLost, "a hedge produced output first");
    if (io.state.should_commit()) commit(io);
    // The end of the stream goes out with its last events, in one write.
    if (io.state.done() || fault) break;
    if (io.state.committed() && (!io.state.outbox().empty() || !io.first_token_relayed)) {
      if (!co_await io.out.write(io.state.outbox().pieces())) {
        rec.outcome = AttemptOutcome::kClientGone;
        rec.detail = "client went away mid-stream";
        co_return AttemptResult{true, false};
      }
      io.state.outbox().clear();
      note_first_token_relayed(io);
    }
    if (ec) {
      fault = ec == beast::error::timeout ? failover::Fault::kReadTimeout : failover::Fault::kCut;
      fault_text = ec.message();
      if (!io.state.committed()) {
        judge(io.c, io.rec, *fault, fault_text);
        co_return AttemptResult{};
      }
      break;
    }
  }
  if (!fault && !io.state.complete()) fault = failover::Fault::kEndedWithoutFinish;
  if (fault) {
    failover::FaultReport r = judge(io.c, io.rec, *fault, fault_text);
    if (!io.state.committed()) co_return AttemptResult{};
    co_return co_await end_with_error(io, r.client_error);
  }
  co_return co_await finish_relay(io);
}

// A complete answer: the stream's last bytes and trailers, or the assembled
// non-streamed body; then the upstream connection is kept if it can be.
net::awaitable<AttemptResult> ChatProxy::finish_relay(RelayIo& io) {
  io.rec.outcome = AttemptOutcome::kSuccess;
  AttemptResult result{true, rc_.keep_alive};
  if (req_.stream) {
    io.state.end_stream();
    if (!io.state.committed()) commit(io);
    const std::string trailers = io.state.trailers();
    const bool ok = co_await io.out.write(io.state.outbox().pieces(), /*last=*/true, trailers);
    io.state.outbox().clear();
    if (ok) note_first_token_relayed(io);
    result.keep_alive = ok && io.out.chunked() && rc_.keep_alive;
  } else {
    Response res = make_json_response(rc_, http::status::ok, io.state.completion());
    add_route_headers(res, &io.rec);
    if (io.rec.output_tokens)
      res.set("x-llmgate-output-tokens", std::to_string(*io.rec.output_tokens));
    if (auto tps = io.rec.tps()) res.set("x-llmgate-tps", format_decimal(*tps));
    result.keep_alive = co_await write_response(client_, res, io.c.timeouts.idle) && rc_.keep_alive;
  }
  // Keep the upstream connection if its response ends promptly after [DONE].
  if (!io.parser.is_done()) {
    io.lease->stream.tcp().expires_after(kDrainForReuse);
    while (!io.parser.is_done()) {
      std::span<char> sink = io.sse.prepare(kReadChunk / 2);  // discarded: after [DONE]
      io.parser.get().body().data = sink.data();
      io.parser.get().body().size = sink.size();
      auto [ec, n] =
          co_await http::async_read_some(io.lease->stream, io.lease->buffer, io.parser, kUseTuple);
      if (ec && ec != http::error::need_buffer) break;
    }
  }
  if (io.parser.is_done() && io.parser.keep_alive()) {
    io.lease->stream.tcp().expires_never();
    io.lease.give_back();
  }
  co_return result;
}

// One line per request: ids, names from config, numbers and outcomes. Never
// the prompt, the completion or a key.
void ChatProxy::log_request(const AttemptRecord* rec) const {
  if (!log_enabled(LogLevel::kInfo)) return;
  auto ms = [](double v) { return format_decimal(v); };
  std::vector<LogField> f{{"request_id", rc_.request_id},
                          {"model", req_.model},
                          {"stream", req_.stream ? "true" : "false", true},
                          {"result", to_string(outcome_)},
                          {"policy", config::to_string(decision_.policy)},
                          {"attempts", std::to_string(attempt_no_), true}};
  if (key_) f.push_back({"key", key_->name});  // the key's name from config, never the key
  if (rec) {
    f.push_back({"deployment", rec->deployment});
    f.push_back({"outcome", routing::to_string(rec->outcome)});
    f.push_back({"status", std::to_string(rec->http_status), true});
    if (auto t = rec->ttft()) {
      f.push_back({"ttft_ms", ms(std::chrono::duration<double, std::milli>(*t).count()), true});
    }
    if (rec->input_tokens) f.push_back({"input_tokens", std::to_string(*rec->input_tokens), true});
    if (rec->output_tokens)
      f.push_back({"output_tokens", std::to_string(*rec->output_tokens), true});
    if (auto tps = rec->tps()) f.push_back({"tps", ms(*tps), true});
  }
  if (!failures_.empty()) f.push_back({"failed", failures_.log_field()});
  if (race_ && race_->hedge_started())
    f.push_back({"hedged", race_->winner() == 1 ? "hedge-won" : "primary-won"});
  // Why this route: in the log always, whether or not the client may see it.
  if (auto route = routing::explain(decision_); !route.empty())
    f.push_back({"route", std::move(route)});
  f.push_back({"duration_ms", ms(ms_between(start_, Clock::now())), true});
  log_event(LogLevel::kInfo, "request", f);
}

// What admission reads of the request head.
RequestHead request_head(const Request& request) {
  RequestHead head{request[http::field::authorization],
                   request[http::field::content_type],
                   {},
                   [&request](std::string_view name) -> std::optional<std::string> {
                     auto it = request.find(beast::string_view(name.data(), name.size()));
                     if (it == request.end()) return std::nullopt;
                     return std::string(it->value());
                   }};
  for (const auto& f : request) {
    if (f.name() == http::field::via) head.via.push_back(f.value());
  }
  return head;
}

}  // namespace

net::awaitable<bool> handle_chat_completions(Worker& worker, beast::tcp_stream& client,
                                             const Request& request, const RequestContext& rc) {
  // The snapshot this request lives on, whatever reloads happen meanwhile.
  const std::shared_ptr<const Snapshot> snapshot = worker.snapshot;
  const config::Config& cfg = *snapshot->config;
  // Admission (admission.cpp): the key, a request loop, the body, the model,
  // the key's permissions and rates, the routing override.
  auto admitted = admit(chat_completions_api(), request_head(request), request.body(), cfg,
                        *snapshot->keys, worker.via_name);
  if (auto* no = std::get_if<Refusal>(&admitted)) {
    if (no->auth) snapshot->metrics->shared().on_auth_rejected(*no->auth);
    if (!no->log.empty()) log_line(LogLevel::kWarn, "request " + rc.request_id + ": " + no->log);
    Response res = make_error_response(rc, no->error);
    co_return co_await write_response(client, res, cfg.timeouts.idle) && rc.keep_alive;
  }
  Admitted& a = std::get<Admitted>(admitted);
  const config::Model* model = a.model;
  const config::GatewayKey* key = a.key;
  ChatProxy proxy(worker, *snapshot, client, request, rc, std::move(a.req), std::move(a.route),
                  key);
  snapshot->metrics->shared().request_started();
  struct Count {
    Metrics& m;
    const ChatProxy& proxy;
    const std::string& model;
    KeyStore& keys;
    const config::GatewayKey* key;
    ~Count() {
      m.on_request(model, proxy.outcome());
      m.shared().request_finished();
      if (key) keys.charge_tokens(*key, proxy.tokens_used());
    }
  } count{*snapshot->metrics, proxy, model->name, *snapshot->keys, key};
  // Race the whole exchange against the client hanging up: a disconnect
  // cancels the attempt, which closes the upstream connection and records it.
  // And against the end of a graceful drain: at drain.timeout the worker's
  // shutdown signal fires and requests still running are ended explicitly.
  std::variant<bool, std::monostate, std::monostate> r =
      co_await (proxy.run(*model) || watch_client_disconnect(client) || wait_for_shutdown(worker));
  if (r.index() == 1) {
    log_line(LogLevel::kDebug,
             "request " + rc.request_id + ": client disconnected, upstream cancelled");
    co_return false;
  }
  if (r.index() == 2) {
    log_line(LogLevel::kWarn, "request " + rc.request_id + ": cut by the end of the drain timeout");
    co_await proxy.end_for_shutdown();
    co_return false;
  }
  co_return std::get<0>(r);
}

}  // namespace llmgate::gateway
