// One upstream attempt (upstream_attempt.h): the exchange up to the response
// head (upstream_exchange.h) under the candidate's deadlines; a non-200 is
// judged by the failover policy (the next candidate, or the caller's own
// error passed through), a 200 stream in the protocol's framing is relayed,
// a whole JSON answer returned.
#include "gateway/proxy/upstream_attempt.h"

#include <algorithm>
#include <chrono>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "gateway/http/headers.h"
#include "gateway/observe/log.h"
#include "gateway/observe/redact.h"
#include "gateway/proxy/relay.h"
#include "gateway/proxy/relay_state.h"
#include "gateway/proxy/upstream_body.h"
#include "gateway/proxy/upstream_exchange.h"
#include "providers/chat_chunk.h"
#include "providers/completion_assembler.h"
#include "providers/upstream_protocol.h"

namespace llmgate::gateway {
namespace {

using routing::AttemptOutcome;
using routing::AttemptRecord;
using Clock = std::chrono::steady_clock;

constexpr std::size_t kMaxErrorBody = 64 * 1024;

AttemptResult fail(AttemptRecord& rec, AttemptOutcome o, std::string detail) {
  rec.outcome = o;
  rec.detail = std::move(detail);
  return AttemptResult{};
}

// What an upstream's error body says: its message (else its first bytes),
// and whether it is already an OpenAI error object.
struct ErrorBody {
  std::string message;
  std::string param;  // error.param, when a string
  std::string code;   // error.code, when a string
  bool openai_shaped = false;
};

ErrorBody read_error_body(const std::string& body) {
  ErrorBody out;
  const auto j = nlohmann::json::parse(body, nullptr, false);
  const nlohmann::json* error = nullptr;
  if (auto it = j.find("error"); j.is_object() && it != j.end() && it->is_object()) error = &*it;
  out.openai_shaped = error != nullptr;
  if (error) {
    if (auto p = error->find("param"); p != error->end() && p->is_string())
      out.param = p->get<std::string>();
    if (auto c = error->find("code"); c != error->end() && c->is_string())
      out.code = c->get<std::string>();
    if (auto m = error->find("message"); m != error->end() && m->is_string()) {
      out.message = m->get<std::string>();
      return out;
    }
  }
  out.message = body.substr(0, 200);
  return out;
}

class UpstreamAttempt {
 public:
  UpstreamAttempt(AttemptContext& ctx, const routing::Candidate& c, AttemptRecord& rec, int branch,
                  routing::StatsRegistry::InFlight& in_flight,
                  const providers::UpstreamRequest& request, std::string body,
                  std::string_view traceparent)
      : ctx_(ctx),
        c_(c),
        rec_(rec),
        branch_(branch),
        in_flight_(in_flight),
        protocol_(ctx.protocol(c)),
        request_(request),
        body_(std::move(body)),
        traceparent_(traceparent) {}

  net::awaitable<AttemptResult> run();

 private:
  // The attempt continues a stream that broke off (continuation.h).
  bool continuing() const { return ctx_.continuation && ctx_.continuation->broken; }
  // How long the exchange's steps may take (the candidate's deadlines).
  ExchangeTimes exchange_times() const;
  net::awaitable<AttemptResult> on_head(providers::Lease& lease, UpstreamParser& parser,
                                        Clock::time_point ttft_deadline);
  // An attempt that failed (judged) before any exchange of its own was awaited.
  static net::awaitable<AttemptResult> failed_attempt() { co_return AttemptResult{}; }
  // A 200 with a JSON body to a stream request: a chat.completion is the
  // answer (synthesised into a stream for a stream client; no TTFT is
  // measured), anything else fails the attempt over.
  net::awaitable<AttemptResult> json_answer(providers::Lease& lease, UpstreamParser& parser);
  net::awaitable<AttemptResult> pass_through_status(providers::Lease& lease, UpstreamParser& parser,
                                                    Clock::time_point deadline);
  // The caller's own error as the upstream said it: `openai_body` as it came
  // (scrubbed), else an OpenAI-shaped error carrying `detail`.
  net::awaitable<bool> respond_client_error(const std::string& openai_body,
                                            const std::string& detail,
                                            const UpstreamHead& upstream_head);
  // The request to send, with body_ (taken: the message keeps the only copy).
  UpstreamMessage upstream_request();
  void measure_admission(Clock::duration acquire_time);

  AttemptContext& ctx_;
  const routing::Candidate& c_;
  AttemptRecord& rec_;
  const int branch_;
  routing::StatsRegistry::InFlight& in_flight_;
  const providers::UpstreamProtocol& protocol_;
  providers::UpstreamRequest request_;  // stream and stream_options as sent
  std::string body_;  // the upstream body for request_ (moved into the message it is sent in)
  std::string_view traceparent_;  // the attempt span's, "" when not traced
  // What the request authenticates with (auth:, Bedrock's SigV4), if its provider has one.
  std::shared_ptr<const providers::cloud::Credential> credential_;
  // What the upstream just refused (stream_options, or streaming): the
  // same request once more without it.
  std::optional<providers::Quirk> retry_without_;
  // Remembers that the deployment refuses `q` (logged the first time).
  void learn(providers::Quirk q, std::string_view what, const std::string& detail,
             std::string_view from_now_on);
};

// A 400 that refuses streaming itself (OpenAI's "param": "stream" for models
// an organisation may not stream), not stream_options.
bool refuses_stream(const ErrorBody& said, const std::string& body) {
  if (said.param == "stream") return true;
  return said.param.empty() && body.find("stream_options") == std::string::npos &&
         (said.message.find("stream") != std::string::npos ||
          said.message.find("Stream") != std::string::npos) &&
         (said.message.find("support") != std::string::npos ||
          said.message.find("verif") != std::string::npos ||
          said.message.find("allowed") != std::string::npos);
}

void UpstreamAttempt::learn(providers::Quirk q, std::string_view what, const std::string& detail,
                            std::string_view from_now_on) {
  retry_without_ = q;
  if (!ctx_.worker.quirks || !ctx_.worker.quirks->learn(rec_.deployment, q)) return;
  log_line(LogLevel::kWarn, rec_.deployment + " " + std::string(what) + " (" + detail +
                                "): " + std::string(from_now_on));
}

net::awaitable<AttemptResult> UpstreamAttempt::run() {
  // A provider with a credential of its own (a token the gateway refreshes,
  // AWS credentials a Bedrock request is signed with) cannot be reached
  // without one: that deployment fails over at once.
  {
    auto credential =
        credential_for(ctx_.snapshot.credentials, *c_.provider, std::chrono::system_clock::now());
    if (auto* why = std::get_if<std::string>(&credential))
      co_return fail(rec_, AttemptOutcome::kCredentialError, std::move(*why));
    credential_ = std::get<0>(std::move(credential));
  }
  auto& pool = ctx_.worker.pools->get(*c_.provider, ctx_.snapshot.tls);
  auto up = upstream_request();
  // A 400 refusing stream_options (or streaming) is tried once more
  // without them (as a JSON request): at most two such rounds.
  for (int round = 0; round < 3; ++round) {
    providers::Lease lease;
    std::optional<UpstreamParser> parser;
    const Exchanged x = co_await exchange_head(pool, lease, parser, up, exchange_times());
    if (x.status == Exchanged::Status::kConnectError)
      co_return fail(rec_, AttemptOutcome::kConnectError, x.error);
    rec_.reused_connection = lease.reused();  // (the last round's: a pooled one)
    if (x.status == Exchanged::Status::kWriteError)
      co_return fail(rec_, AttemptOutcome::kConnectError, "cannot send request: " + x.ec.message());
    rec_.request_sent = x.sent;
    measure_admission(x.acquire_time);
    if (x.status == Exchanged::Status::kCancelled) {
      rec_.detail = "client disconnected";
      co_return AttemptResult{true, false};
    }
    if (x.status == Exchanged::Status::kHeadError) {
      ctx_.judge(c_, rec_,
                 x.head_timed_out() ? failover::Fault::kHeadTimeout : failover::Fault::kHeadCut,
                 x.ec.message());
      co_return AttemptResult{};
    }
    // A head came: this request is not sent again as it is (a retry without
    // a refused option builds it anew). Its memory goes now, not at the end
    // of a stream that may last minutes. (Moved out, not assigned over: a
    // string assigned an empty one keeps its buffer.)
    { UpstreamMessage gone = std::move(up); }
    // A JSON answer comes whole: only the request's total deadline applies.
    const auto ttft_deadline = request_.stream ? ctx_.deadlines(c_).first_token(rec_.request_sent)
                                               : ctx_.total_deadline(c_);
    AttemptResult r = co_await on_head(lease, *parser, ttft_deadline);
    if (!retry_without_) co_return r;
    (*retry_without_ == providers::Quirk::kNoStream ? request_.stream : request_.stream_options) =
        false;
    retry_without_.reset();
    auto body = ctx_.api.upstream_body(protocol_, ctx_.req, request_);
    if (auto* s = std::get_if<std::string>(&body)) body_ = std::move(*s);
    up = upstream_request();
  }
  co_return fail(rec_, AttemptOutcome::kUpstreamStatus, "refused the request without its options");
}

ExchangeTimes UpstreamAttempt::exchange_times() const {
  // The candidate's deadlines as planned (its TTFT may be the live one).
  const failover::Deadlines d = ctx_.deadlines(c_);
  const config::Timeouts& t = d.timeouts();
  ExchangeTimes times{t.connect, d.write_timeout()};
  times.by = d.total();
  // A JSON answer comes whole: only the total deadline applies to its head
  // too. A deployment without a first-token deadline (a reasoning model)
  // must still answer with a response head within its provider's TTFT
  // timeout.
  if (request_.stream) {
    times.head = c_.deployment->first_token_deadline
                     ? t.ttft
                     : std::min(t.ttft, ctx_.cfg.timeouts_for(*c_.provider).ttft);
  }
  return times;
}

// The gateway's own share of getting the request out: parsing, routing,
// building the upstream request — not the upstream connect.
void UpstreamAttempt::measure_admission(Clock::duration acquire_time) {
  if (ctx_.admission_measured || ctx_.rc.received == Clock::time_point{}) return;
  ctx_.admission_measured = true;
  ctx_.snapshot.metrics->shared().on_overhead(OverheadPhase::kAdmission,
                                              rec_.request_sent - ctx_.rc.received - acquire_time);
}

// Not a coroutine: run() awaits the handler returned (a frame fewer, and
// none held for as long as the stream lasts).
net::awaitable<AttemptResult> UpstreamAttempt::on_head(providers::Lease& lease,
                                                       UpstreamParser& parser,
                                                       Clock::time_point ttft_deadline) {
  rec_.http_status = static_cast<int>(parser.get().result_int());
  if (rec_.http_status != 200) return pass_through_status(lease, parser, ttft_deadline);
  auto ct = parser.get()[http::field::content_type];
  // Some OpenAI-compatible servers ignore "stream": the whole answer as JSON.
  if (ct.substr(0, 16) == "application/json") return json_answer(lease, parser);
  // The stream in the protocol's framing (SSE, AWS event-stream), as asked.
  if (!providers::announces(std::string_view(ct.data(), ct.size()), protocol_.framing())) {
    ctx_.judge(c_, rec_, failover::Fault::kNotEventStream,
               "\"" + std::string(ct.substr(0, 100)) + "\" instead of " +
                   std::string(providers::content_type(protocol_.framing())));
    return failed_attempt();
  }
  return relay(ctx_,
               RelayUpstream{c_, rec_, lease, parser, branch_, in_flight_, protocol_, request_});
}

net::awaitable<AttemptResult> UpstreamAttempt::json_answer(providers::Lease& lease,
                                                           UpstreamParser& parser) {
  std::string body;
  // One byte past the limit tells a body over it from one exactly at it.
  const beast::error_code ec =
      co_await read_whole(lease, parser, body, kMaxJsonAnswer + 1, ctx_.total_deadline(c_));
  if (LLMGATE_CANCELLED()) co_return AttemptResult{true, false};
  if (!parser.is_done()) {
    const bool timeout = ec == beast::error::timeout;
    ctx_.judge(c_, rec_, timeout ? failover::Fault::kReadTimeout : failover::Fault::kCut,
               body.size() > kMaxJsonAnswer ? "JSON answer over 16 MiB" : ec.message());
    co_return AttemptResult{};
  }
  // The answer in the provider's protocol, as an OpenAI chat.completion.
  std::optional<nlohmann::json> j =
      protocol_.completion(nlohmann::json::parse(body, nullptr, false), request_);
  if (!j) {
    ctx_.judge(c_, rec_, failover::Fault::kNotEventStream,
               "application/json that is not an answer of the " + std::string(protocol_.name()) +
                   " protocol");
    co_return AttemptResult{};
  }
  // A continuation splices a stream; a whole answer would be a second
  // response.
  if (continuing())
    co_return fail(rec_, AttemptOutcome::kUpstreamStatus,
                   "answered JSON to a continuation (a continuation needs a stream)");
  // In the client API's shape (OpenAI's own answer byte for byte).
  body = ctx_.api.answer_body(protocol_, std::move(body), *j);
  if (!ctx_.claim(branch_, /*whole=*/true))
    co_return fail(rec_, AttemptOutcome::kHedgeLost, "a hedge answered first");
  in_flight_.first_token();
  if (auto u = protocol_.answer_usage(*j)) take_usage(rec_, *u);
  if (rec_.keep_meta) keep_answer_meta(*j, rec_);
  if (auto id = j->find("id"); ctx_.api.stores_responses() && id != j->end() && id->is_string())
    ctx_.remember_response(id->get<std::string>(), c_);
  rec_.outcome = AttemptOutcome::kSuccess;
  // No first token to time: the sample is the whole answer, when the client
  // first sees output.
  rec_.unstreamed = true;
  rec_.last_token = Clock::now();
  rec_.detail = request_.stream
                    ? "answered with JSON to a stream request (no TTFT; answer time measured)"
                    : "unstreamed attempt (no TTFT; answer time measured)";
  if (parser.keep_alive()) lease.give_back();
  Response res = ctx_.req.stream ? make_json_response(ctx_.rc, http::status::ok,
                                                      ctx_.api.stream_of_answer(*j, ctx_.req))
                                 : make_json_response(ctx_.rc, http::status::ok, std::move(body));
  if (ctx_.req.stream) {
    res.set(http::field::content_type, "text/event-stream");
    res.set(http::field::cache_control, "no-cache");
  }
  ctx_.trace.add_headers(res, ctx_.rc.request_id, &rec_);
  relay_upstream_headers(parser.get(), res);
  if (rec_.output_tokens) res.set("x-llmgate-output-tokens", std::to_string(*rec_.output_tokens));
  const bool ok = co_await write_response(ctx_.client, res, ctx_.cfg.timeouts.idle);
  co_return AttemptResult{true, ok && ctx_.rc.keep_alive};
}

net::awaitable<AttemptResult> UpstreamAttempt::pass_through_status(providers::Lease& lease,
                                                                   UpstreamParser& parser,
                                                                   Clock::time_point deadline) {
  const int status = rec_.http_status;
  auto ra = parser.get()[http::field::retry_after];
  if (!ra.empty()) {
    int s = parse_retry_after(ra, std::chrono::duration_cast<std::chrono::seconds>(
                                      std::chrono::system_clock::now().time_since_epoch())
                                      .count());
    if (s >= 0) rec_.retry_after_s = s;
  }
  // Read the (small) error body so the message can be reported or returned.
  std::string body;
  co_await read_whole(lease, parser, body, kMaxErrorBody, deadline);
  if (parser.is_done() && parser.keep_alive()) lease.give_back();

  // Whatever an upstream says is scrubbed of anything that looks like a key
  // before it is kept anywhere: a provider's 401 quotes the operator's key.
  body = redact_secrets(body, ctx_.provider_keys());
  const ErrorBody said = read_error_body(body);
  const std::string detail =
      "HTTP " + std::to_string(status) + (said.message.empty() ? "" : ": " + said.message);
  // What the body says beyond the status (another protocol's ways).
  const auto meaning = protocol_.error_meaning(nlohmann::json::parse(body, nullptr, false), status);
  if (!rec_.retry_after_s && meaning.retry_after_s) rec_.retry_after_s = meaning.retry_after_s;
  const int judged = meaning.judge_as.value_or(status);
  // Learnt wire options are OpenAI's (other protocols have no such options).
  const bool openai = protocol_.passthrough();
  if (openai && (status == 400 || status == 422) && request_.stream_options &&
      body.find("stream_options") != std::string::npos) {
    // An OpenAI-compatible server that refuses stream_options (older
    // Ollama, LM Studio, TGI, Mistral...): the same request without them,
    // and none for this deployment from now on.
    learn(providers::Quirk::kNoStreamOptions, "refuses stream_options", detail,
          "sending none to it from now on");
    co_return AttemptResult{};
  }
  if (openai && status == 400 && request_.stream && refuses_stream(said, body)) {
    // OpenAI refuses to stream some models to unverified organisations:
    // the same request as JSON (the client still gets its stream, made
    // from the answer), and JSON requests to this deployment from now on.
    learn(providers::Quirk::kNoStream, "refuses to stream", detail,
          "asking it for JSON answers from now on");
    co_return AttemptResult{};
  }
  if (failover::judge_status(judged) == failover::StatusVerdict::kFailOver) {
    // A provider refusing our own key or config needs the operator.
    log_line(failover::needs_operator(judged) ? LogLevel::kWarn : LogLevel::kDebug,
             "request " + ctx_.rc.request_id + ": " + rec_.deployment + " answered " + detail);
    co_return fail(rec_, AttemptOutcome::kUpstreamStatus, detail);
  }
  // A prompt too long for this deployment's context window: the caller's
  // request, but one a deployment with a larger window can serve. Passed on
  // to it, invisibly, when one follows in the plan; else returned below.
  if (failover::is_context_length_error(judged, said.code, said.message) &&
      ctx_.larger_window_follows(c_)) {
    log_line(LogLevel::kDebug, "request " + ctx_.rc.request_id + ": " + rec_.deployment +
                                   " cannot hold the prompt (" + detail +
                                   "); a deployment with a larger context window follows");
    // Held: if nothing later answers, this is what the client gets (not a
    // 5xx its SDK would retry); and candidates no larger are passed over.
    if (!ctx_.context_refusal) {
      std::string shaped = body;
      if (!openai || !said.openai_shaped) {
        auto as_openai = protocol_.error(nlohmann::json::parse(body, nullptr, false), status);
        shaped = as_openai
                     ? as_openai->dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)
                     : "";
      }
      ctx_.context_refusal =
          ContextRefusal{status, std::move(shaped), detail, c_.deployment->context_window};
    }
    co_return fail(rec_, AttemptOutcome::kClientError, "context length exceeded: " + detail);
  }
  // A continuation's refusal (a model that allows no prefill, say) is never
  // the client's answer: the client has a stream. The next deployment that
  // can continue is asked, else the break's own error ends the stream.
  if (continuing())
    co_return fail(rec_, AttemptOutcome::kClientError, "refused to continue: " + detail);
  // The caller's fault (400, 413, 422...): the next deployment would say the
  // same. Return it as the upstream said it (scrubbed), in OpenAI's shape --
  // unless a race's other side is still running: its answer, if it gives
  // one, beats this refusal (docs/failure-semantics.md, "Races").
  if (ctx_.trace.race) {
    // Held, it is not awaiting a first token any more (no load, no stall
    // evidence for its deployment).
    in_flight_.first_token();
    if (!co_await ctx_.trace.race->settle_refusal(branch_))
      co_return fail(rec_, AttemptOutcome::kHedgeLost,
                     "answered " + detail + "; the other side of the race took the client");
  }
  if (!ctx_.claim(branch_))
    co_return fail(rec_, AttemptOutcome::kHedgeLost, "a hedge answered first");
  rec_.outcome = AttemptOutcome::kClientError;
  rec_.detail = detail;
  // In OpenAI's shape: an OpenAI body as it came, another protocol's
  // translated, anything else replaced by the gateway's own error.
  if (!openai || !said.openai_shaped) {
    auto shaped = protocol_.error(nlohmann::json::parse(body, nullptr, false), status);
    body = shaped ? shaped->dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) : "";
  }
  const bool ok = co_await respond_client_error(body, detail, parser.get());
  co_return AttemptResult{true, ok && ctx_.rc.keep_alive};
}

net::awaitable<bool> UpstreamAttempt::respond_client_error(const std::string& openai_body,
                                                           const std::string& detail,
                                                           const UpstreamHead& upstream_head) {
  Response res;
  if (!openai_body.empty()) {
    res = make_json_response(ctx_.rc, static_cast<http::status>(rec_.http_status),
                             error_text_in(ctx_.rc.error_shape, openai_body, rec_.http_status));
  } else {
    res = make_error_response(
        ctx_.rc, ApiError{rec_.http_status, "invalid_request_error", detail, std::nullopt,
                          "upstream_rejected_request", std::nullopt});
  }
  ctx_.trace.add_headers(res, ctx_.rc.request_id, &rec_);
  relay_upstream_headers(upstream_head, res, /*with_retry_after=*/true);
  const bool ok = co_await write_response(ctx_.client, res, ctx_.cfg.timeouts.idle);
  co_return ok;
}

UpstreamMessage UpstreamAttempt::upstream_request() {
  // The targets are only read into the head below: the thread's strings (a
  // plain function, nothing suspends), kept from one request to the next.
  thread_local std::string protocol_built, target;
  const std::string_view protocol_target =
      protocol_.target(c_.deployment->model, request_.stream, protocol_built);
  return make_upstream_request(
      http::verb::post,
      upstream_target(target, *c_.provider, c_.deployment->model, protocol_target),
      std::move(body_), request_.stream, ctx_.client_request, ctx_.rc, ctx_.worker.via_name,
      *c_.provider, protocol_, traceparent_,
      ctx_.request_trace ? ctx_.request_trace->trace_state : "", credential_.get());
}

}  // namespace

net::awaitable<AttemptResult> run_upstream_attempt(AttemptContext& ctx, const routing::Candidate& c,
                                                   AttemptRecord& rec, int branch,
                                                   routing::StatsRegistry::InFlight& in_flight,
                                                   const providers::UpstreamRequest& request,
                                                   std::string body, std::string_view traceparent) {
  UpstreamAttempt attempt(ctx, c, rec, branch, in_flight, request, std::move(body), traceparent);
  AttemptResult r = co_await attempt.run();
  co_return r;
}

}  // namespace llmgate::gateway
