// One upstream attempt (upstream_attempt.h): connect or reuse, write, read
// the head; a non-200 is judged by the failover policy (the next candidate,
// or the caller's own error passed through), a 200 event stream is relayed.
#include "gateway/upstream_attempt.h"

#include <algorithm>
#include <array>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/container/small_vector.hpp>
#include <charconv>
#include <chrono>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "gateway/headers.h"
#include "gateway/log.h"
#include "gateway/redact.h"
#include "gateway/relay.h"
#include "gateway/relay_state.h"
#include "providers/chat_chunk.h"
#include "providers/completion_assembler.h"
#include "providers/upstream_protocol.h"

namespace llmgate::gateway {
namespace {

using routing::AttemptOutcome;
using routing::AttemptRecord;
using Clock = std::chrono::steady_clock;
constexpr auto kUseTuple = net::as_tuple(net::use_awaitable);

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
  // One try on one connection; nullopt when it is to be made again: a reused
  // connection turned out closed before any response byte (once), or the
  // upstream refused stream_options (once, without them).
  net::awaitable<std::optional<AttemptResult>> exchange(providers::Lease& lease,
                                                        UpstreamMessage& up, bool may_retry,
                                                        Clock::duration acquire_time);
  net::awaitable<AttemptResult> on_head(providers::Lease& lease, UpstreamParser& parser,
                                        Clock::time_point ttft_deadline);
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
  auto& pool = ctx_.worker.pools->get(*c_.provider, ctx_.snapshot.tls);
  auto up = upstream_request();
  // A reused keep-alive connection may have been closed by the peer just as we
  // took it; that failure says nothing about the deployment, so the request
  // is sent once more on a fresh connection. Only while no response byte came.
  // And a 400 refusing stream_options (or streaming) is tried once more
  // without them (as a JSON request).
  bool may_retry_stale = true;
  for (int round = 0; round < 4; ++round) {
    const auto acquire_start = Clock::now();
    // (An idle connection without acquire()'s coroutine frame.)
    providers::AcquireResult acq{may_retry_stale ? pool.take_idle() : providers::Lease(), {}};
    if (!acq.lease) {
      acq = co_await pool.acquire(ctx_.deadlines(c_).connect(acquire_start),
                                  /*allow_reuse=*/may_retry_stale);
    }
    if (!acq.lease) co_return fail(rec_, AttemptOutcome::kConnectError, acq.error);
    rec_.reused_connection = acq.lease.reused();
    const auto acquire_time = Clock::now() - acquire_start;
    std::optional<AttemptResult> r =
        co_await exchange(acq.lease, up, may_retry_stale, acquire_time);
    if (r) co_return *r;
    if (retry_without_) {
      (*retry_without_ == providers::Quirk::kNoStream ? request_.stream : request_.stream_options) =
          false;
      retry_without_.reset();
      auto body = ctx_.api.upstream_body(protocol_, ctx_.req, request_);
      if (auto* s = std::get_if<std::string>(&body)) body_ = std::move(*s);
      up = upstream_request();
      continue;
    }
    may_retry_stale = false;
  }
  co_return fail(rec_, AttemptOutcome::kConnectError, "connection closed by upstream");
}

// The gateway's own share of getting the request out: parsing, routing,
// building the upstream request — not the upstream connect.
void UpstreamAttempt::measure_admission(Clock::duration acquire_time) {
  if (ctx_.admission_measured || ctx_.rc.received == Clock::time_point{}) return;
  ctx_.admission_measured = true;
  ctx_.snapshot.metrics->shared().on_overhead(OverheadPhase::kAdmission,
                                              rec_.request_sent - ctx_.rc.received - acquire_time);
}

net::awaitable<std::optional<AttemptResult>> UpstreamAttempt::exchange(
    providers::Lease& lease, UpstreamMessage& up, bool may_retry, Clock::duration acquire_time) {
  const failover::Deadlines deadlines = ctx_.deadlines(c_);
  auto& tcp = lease->stream.tcp();
  // The first token is timed from the moment the request left. Written at
  // once (a request that fits the socket's buffer), that is now: a clock
  // read after the write could come late -- the worker preempted between
  // the two -- and make a 5 ms first token read as 0.1 ms.
  const Clock::time_point writing = Clock::now();
  UpstreamWrite write(lease, up);
  beast::error_code wec = write.error();
  const bool at_once = write.done();
  if (!at_once) wec = co_await write.rest(deadlines.write(Clock::now()));
  if (wec) {
    if (lease.reused() && may_retry) co_return std::nullopt;
    co_return fail(rec_, AttemptOutcome::kConnectError, "cannot send request: " + wec.message());
  }
  rec_.request_sent = at_once ? writing : Clock::now();
  measure_admission(acquire_time);
  // A JSON answer comes whole: only the request's total deadline applies.
  // A deployment without a first-token deadline (a reasoning model) must
  // still answer with a response head within its provider's TTFT timeout.
  const auto ttft_deadline =
      request_.stream ? deadlines.first_token(rec_.request_sent) : ctx_.total_deadline(c_);
  const auto head_deadline =
      !request_.stream || c_.deployment->first_token_deadline
          ? ttft_deadline
          : std::min(ttft_deadline, rec_.request_sent + ctx_.cfg.timeouts_for(*c_.provider).ttft);

  UpstreamParser parser;
  parser.body_limit(boost::none);  // events are bounded one by one instead
  parser.header_limit(kMaxUpstreamHeader);
  tcp.expires_at(head_deadline);
  lease->reserve_for_head();
  const std::size_t buffered_before = lease->buffer.size();
  auto [hec, hn] =
      co_await http::async_read_header(lease->stream, lease->buffer, parser, kUseTuple);
  if (LLMGATE_CANCELLED()) {
    rec_.detail = "client disconnected";
    co_return AttemptResult{true, false};
  }
  if (hec) {
    // (Over TLS a peer that closes without close_notify, as most servers
    // end an idle connection, reads as a truncated stream.)
    // Nothing of an answer at all: no head parsed, and no byte of one
    // waiting in the buffer (a head cut short leaves its bytes there).
    const bool stale = lease.reused() && may_retry && buffered_before == 0 && hn == 0 &&
                       lease->buffer.size() == 0 &&
                       (hec == http::error::end_of_stream || hec == net::error::connection_reset ||
                        hec == net::error::eof || hec == net::ssl::error::stream_truncated);
    if (stale) co_return std::nullopt;
    ctx_.judge(
        c_, rec_,
        hec == beast::error::timeout ? failover::Fault::kHeadTimeout : failover::Fault::kHeadCut,
        hec.message());
    co_return AttemptResult{};
  }
  // A head came: this request is not sent again as it is (a retry without a
  // refused option builds it anew). Its memory goes now, not at the end of a
  // stream that may last minutes.
  // (Moved out, not assigned over: a string assigned an empty one keeps
  // its buffer.)
  { UpstreamMessage gone = std::move(up); }
  AttemptResult r = co_await on_head(lease, parser, ttft_deadline);
  if (retry_without_) co_return std::nullopt;
  co_return r;
}

net::awaitable<AttemptResult> UpstreamAttempt::on_head(providers::Lease& lease,
                                                       UpstreamParser& parser,
                                                       Clock::time_point ttft_deadline) {
  rec_.http_status = static_cast<int>(parser.get().result_int());
  if (rec_.http_status != 200) {
    AttemptResult r = co_await pass_through_status(lease, parser, ttft_deadline);
    co_return r;
  }
  auto ct = parser.get()[http::field::content_type];
  if (ct.substr(0, 16) == "application/json") {
    // Some OpenAI-compatible servers ignore "stream": the whole answer as JSON.
    AttemptResult r = co_await json_answer(lease, parser);
    co_return r;
  }
  if (ct.substr(0, 17) != "text/event-stream") {
    ctx_.judge(c_, rec_, failover::Fault::kNotEventStream, std::string_view(ct.data(), ct.size()));
    co_return AttemptResult{};
  }
  AttemptResult r = co_await relay(
      ctx_, RelayUpstream{c_, rec_, lease, parser, branch_, in_flight_, protocol_, request_});
  co_return r;
}

net::awaitable<AttemptResult> UpstreamAttempt::json_answer(providers::Lease& lease,
                                                           UpstreamParser& parser) {
  std::string body;
  lease->stream.tcp().expires_at(ctx_.total_deadline(c_));
  // One byte past the limit tells a body over it from one exactly at it.
  const beast::error_code ec = co_await read_upstream_body(lease, parser, body, kMaxJsonAnswer + 1);
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
  if (auto id = j->find("id");
      ctx_.req.operation == config::Operation::kResponses && id != j->end() && id->is_string())
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
  lease->stream.tcp().expires_at(deadline);
  co_await read_upstream_body(lease, parser, body, kMaxErrorBody);
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
  return make_upstream_request(
      http::verb::post,
      upstream_target(*c_.provider, c_.deployment->model,
                      protocol_.target(c_.deployment->model, request_.stream)),
      std::move(body_), request_.stream, ctx_.client_request, ctx_.rc, ctx_.worker.via_name,
      *c_.provider, protocol_, traceparent_,
      ctx_.request_trace ? ctx_.request_trace->trace_state : "");
}

}  // namespace

// The deployment's chat target below base_url's path: the protocol's
// (path and query), its path replaced by chat_path (with {model} put in)
// when one is set, then the provider's query.
std::string upstream_target(const config::Provider& p, const std::string& model,
                            std::string_view protocol_target) {
  const auto q = protocol_target.find('?');
  const std::string_view protocol_path = protocol_target.substr(0, q);
  std::string path(protocol_path);
  if (!p.chat_path.empty()) {
    // chat_path is chat's; the other endpoints take the same prefix when it
    // ends with /chat/completions (Azure's /deployments/{model}/embeddings).
    constexpr std::string_view kChat = "/chat/completions";
    const std::string_view chat(p.chat_path);
    const bool other_api = protocol_path == "/responses" ||
                           protocol_path.substr(0, 11) == "/responses/" ||
                           protocol_path == "/embeddings" || protocol_path == "/completions";
    if (!other_api) {
      path = p.chat_path;
    } else if (chat.size() >= kChat.size() && chat.substr(chat.size() - kChat.size()) == kChat) {
      path = std::string(chat.substr(0, chat.size() - kChat.size())) + std::string(protocol_path);
    }
  }
  const std::string_view protocol_query =
      q == std::string_view::npos ? std::string_view() : protocol_target.substr(q + 1);
  if (auto at = path.find("{model}"); at != std::string::npos) {
    std::string encoded;
    for (unsigned char c : model) {
      // A model name is printable ASCII; what would end or split a path is encoded.
      if (c == '?' || c == '#' || c == '%' || c == ' ') {
        static constexpr char kHex[] = "0123456789ABCDEF";
        encoded += '%';
        encoded += kHex[c >> 4];
        encoded += kHex[c & 15];
      } else {
        encoded += static_cast<char>(c);
      }
    }
    path.replace(at, 7, encoded);
  }
  std::string target = p.base_url.path_prefix + path;
  for (std::string_view query : {protocol_query, std::string_view(p.query)}) {
    if (!query.empty())
      target.append(target.find('?') == std::string::npos ? "?" : "&").append(query);
  }
  return target;
}

net::awaitable<beast::error_code> read_upstream_body(providers::Lease& lease,
                                                     UpstreamParser& parser, std::string& body,
                                                     std::size_t limit) {
  char buf[4096];
  while (!parser.is_done() && body.size() < limit) {
    parser.get().body().data = buf;
    parser.get().body().size = sizeof buf;
    auto [ec, n] = co_await http::async_read_some(lease->stream, lease->buffer, parser, kUseTuple);
    body.append(buf, sizeof buf - parser.get().body().size);
    if (ec && ec != http::error::need_buffer) co_return ec;
  }
  co_return beast::error_code{};
}

namespace {

constexpr std::string_view kColon = ": ", kCrlf = "\r\n";

// The fields the gateway sets on an upstream request, in order: a later one
// of a name replaces an earlier one (as Beast's set() did), and each
// replaces what the client sent under that name.
class SetFields {
 public:
  void set(std::string_view name, std::string_view value) {
    lines_.erase(std::remove_if(lines_.begin(), lines_.end(),
                                [&](const Line& l) { return beast::iequals(l.name, name); }),
                 lines_.end());
    lines_.push_back({name, value});
  }
  // Neither the client's `name` nor one of ours.
  void drop(std::string_view name) {
    set(name, {});
    lines_.back().dropped = true;
  }
  bool has(std::string_view name) const {
    return std::any_of(lines_.begin(), lines_.end(),
                       [&](const Line& l) { return beast::iequals(l.name, name); });
  }
  void append_to(std::string& out) const {
    for (const Line& l : lines_) {
      if (!l.dropped) out.append(l.name).append(kColon).append(l.value).append(kCrlf);
    }
  }

 private:
  struct Line {
    std::string_view name, value;
    bool dropped = false;
  };
  boost::container::small_vector<Line, 16> lines_;
};

}  // namespace

std::optional<RequestTrace> begin_trace(const Snapshot& snapshot, const Request& client_request,
                                        const RequestContext& rc) {
  if (!snapshot.tracer) return std::nullopt;
  std::string tracestate;
  for (auto [it, end] = client_request.equal_range("tracestate"); it != end; ++it) {
    tracestate.append(tracestate.empty() ? "" : ",").append(it->value());
  }
  return snapshot.tracer->begin(client_request["traceparent"], tracestate, rc.received);
}

UpstreamMessage make_upstream_request(http::verb method, std::string target, std::string body,
                                      bool stream, const Request& client_request,
                                      const RequestContext& rc, std::string_view via_name,
                                      const config::Provider& provider,
                                      const providers::UpstreamProtocol& protocol,
                                      std::string_view traceparent, std::string_view tracestate) {
  const auto& url = provider.base_url;
  // End-to-end client headers pass through (RFC 9110 §7.6); hop-by-hop ones,
  // those the Connection header names, and the client's credentials do not.
  // Every Connection line counts (a second one must not smuggle a header
  // past the hop-by-hop filter), and so does every Via line.
  std::vector<std::string> hop;
  std::string via;
  for (const auto& f : client_request) {
    if (f.name() == http::field::connection) {
      for (auto& t : connection_tokens(f.value())) hop.push_back(std::move(t));
    } else if (f.name() == http::field::via) {
      via.append(via.empty() ? "" : ", ").append(f.value());
    }
  }
  via.append(via.empty() ? "" : ", ").append(rc.version == 10 ? "1.0 " : "1.1 ").append(via_name);
  const std::string host = url.authority();
  SetFields set;
  set.set("Via", via);
  set.set("Host", host);
  if (!body.empty()) set.set("Content-Type", "application/json");
  set.set("Accept", stream ? "text/event-stream" : "application/json");
  set.set("User-Agent", "llmgate/0.1");
  set.set("x-request-id", rc.request_id);  // the client's own, or the one we made
  if (!traceparent.empty()) {
    // Traced: the upstream's parent is the attempt's span (the client's
    // tracestate goes on only if well-formed).
    set.set("traceparent", traceparent);
    tracestate.empty() ? set.drop("tracestate") : set.set("tracestate", tracestate);
  }
  // The key: in the header the provider names (Authorization as a Bearer
  // token, any other alone: Azure's api-key), else where the protocol puts
  // it; then the protocol's fixed headers (anthropic-version).
  const auto& key_header = provider.api_key_header;
  const bool own_key_header = !key_header.empty() && !provider.api_key.empty();
  std::string bearer;
  if (own_key_header) {
    if (beast::iequals(key_header, "authorization")) {
      bearer = "Bearer " + provider.api_key;
      set.set(key_header, bearer);
    } else {
      set.set(key_header, provider.api_key);
    }
  }
  const auto protocol_headers =
      protocol.headers(own_key_header ? std::string() : provider.api_key, provider);
  for (const auto& [name, value] : protocol_headers) set.set(name, value);
  for (const auto& [name, value] : provider.headers) set.set(name, value);

  UpstreamMessage m;
  std::string& h = m.head;
  h.reserve(512 + target.size());
  const auto verb = http::to_string(method);
  h.append(verb.data(), verb.size())
      .append(1, ' ')
      .append(target)
      .append(std::string_view(" HTTP/1.1\r\n"));
  for (const auto& f : client_request) {
    const std::string_view name(f.name_string().data(), f.name_string().size());
    if (is_hop_by_hop(name, hop) || is_gateway_owned(name) || f.name() == http::field::via ||
        set.has(name)) {
      continue;
    }
    const beast::string_view value = f.value();
    h.append(name).append(kColon).append(value.data(), value.size()).append(kCrlf);
  }
  set.append_to(h);
  // As prepare_payload: a length for a body, and for an empty one where the
  // method expects a body.
  if (!body.empty() || method == http::verb::post || method == http::verb::put ||
      method == http::verb::options) {
    char n[24];
    const auto r = std::to_chars(n, n + sizeof n, body.size());
    h.append(std::string_view("Content-Length: ")).append(n, r.ptr).append(kCrlf);
  }
  h.append(kCrlf);
  m.body = std::move(body);
  return m;
}

UpstreamWrite::UpstreamWrite(providers::Lease& lease, const UpstreamMessage& m)
    : lease_(lease), w_(m.head, m.body) {
  // (As Asio's own first attempt at a write would, without its operation.)
  if (lease->stream.tls() == nullptr) ec_ = w_.send_now(lease->stream.tcp().socket());
}

net::awaitable<beast::error_code> UpstreamWrite::rest(Clock::time_point deadline) {
  lease_->stream.tcp().expires_at(deadline);
  auto [ec, n] = co_await net::async_write(lease_->stream, w_.rest, kUseTuple);
  ec_ = ec;
  co_return ec;
}

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
