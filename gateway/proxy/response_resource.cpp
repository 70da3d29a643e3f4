// GET/DELETE /v1/responses/{id}, GET …/input_items, POST …/cancel: one
// exchange with the provider that created the response.
#include "gateway/proxy/response_resource.h"

#include <algorithm>
#include <boost/beast/http/empty_body.hpp>
#include <chrono>
#include <optional>
#include <string>
#include <variant>

#include "gateway/apis/client_api.h"
#include "gateway/http/headers.h"
#include "gateway/observe/tracer.h"
#include "gateway/proxy/client_stream.h"
#include "gateway/proxy/observers.h"
#include "gateway/proxy/relay_state.h"
#include "gateway/proxy/upstream_body.h"
#include "gateway/proxy/upstream_exchange.h"
#include "gateway/shared/shared_limits.h"
#include "providers/framer.h"

namespace llmgate::gateway {
namespace {

using Clock = std::chrono::steady_clock;

// The methods each part answers, as its Allow header says them.
std::string_view method_for(ResponsePath::Part part) {
  switch (part) {
    case ResponsePath::Part::kResponse:
      return "GET, DELETE";
    case ResponsePath::Part::kInputItems:
      return "GET";
    case ResponsePath::Part::kCancel:
      return "POST";
  }
  return "GET";
}

bool allowed(ResponsePath::Part part, std::string_view method) {
  for (std::string_view list = method_for(part);;) {
    const auto comma = list.find(", ");
    if (list.substr(0, comma) == method) return true;
    if (comma == std::string_view::npos) return false;
    list.remove_prefix(comma + 2);
  }
}

}  // namespace

ApiError response_not_found(const std::string& id) {
  return ApiError{404,
                  "invalid_request_error",
                  "Response with id '" + id +
                      "' not found. llmgate forwards a stored response's requests to the "
                      "provider that created it, and knows the responses it saw created (the "
                      "last 100000, for 24 hours, per gateway process).",
                  std::nullopt,
                  "response_not_found",
                  std::nullopt};
}

namespace {

ApiError upstream_error(int status, std::string message) {
  return ApiError{status,
                  "api_error",
                  std::move(message),
                  std::nullopt,
                  status == 504 ? "upstream_timeout" : "upstream_error",
                  std::nullopt};
}

class ResourceExchange {
 public:
  ResourceExchange(Worker& worker, beast::tcp_stream& client, const Request& request,
                   const RequestContext& rc, const ResponsePath& path, const RequestTrace* trace)
      : worker_(worker),
        snap_(worker.snapshot),
        cfg_(*snap_->config),
        client_(client),
        request_(request),
        rc_(rc),
        path_(path),
        trace_(trace) {}

  net::awaitable<bool> run();
  // The exchange as its observers see it.
  ResourceView view(Clock::time_point start) const {
    return ResourceView{rc_,
                        std::string_view(request_.method_string()),
                        path_,
                        key_,
                        status_,
                        error_.message,
                        upstream_provider_,
                        upstream_span_,
                        upstream_start_,
                        upstream_end_,
                        upstream_status_,
                        start,
                        trace_};
  }

 private:
  // The answer when no upstream exchange happens (or it failed before any
  // byte reached the client).
  // `error_` (and `allow_`, for a 405): set first, never passed as a
  // temporary into the co_await (GCC 12 destroys such temporaries twice).
  net::awaitable<bool> refuse() {
    status_ = error_.status;
    upstream_done();
    Response res = make_error_response(rc_, error_);
    if (!allow_.empty()) res.set(http::field::allow, allow_);
    co_return co_await write_response(client_, res, kWriteTimeout);
  }
  net::awaitable<bool> exchange(const ResponseOwners::Owner& owner, const config::Provider& p,
                                const providers::UpstreamProtocol& protocol);
  // Relays an event stream (GET ?stream=true) as it comes.
  net::awaitable<bool> relay_stream(providers::Lease& lease, UpstreamParser& parser,
                                    const config::Timeouts& t, Clock::time_point until,
                                    providers::Framing framing, const ResponseOwners::Owner& owner);
  void add_route_headers(http::fields& h, const ResponseOwners::Owner& owner) const;
  // The upstream exchange is over (its span ends here).
  void upstream_done() {
    if (upstream_start_ && !upstream_end_) upstream_end_ = Clock::now();
  }

  static constexpr std::chrono::milliseconds kWriteTimeout{30'000};

  Worker& worker_;
  const std::shared_ptr<const Snapshot> snap_;  // the config this request started with
  const config::Config& cfg_;
  beast::tcp_stream& client_;
  const Request& request_;
  const RequestContext& rc_;
  const ResponsePath& path_;
  const config::GatewayKey* key_ = nullptr;
  ApiError error_;          // what refuse() answers
  std::string_view allow_;  // its Allow header (a 405)
  int status_ = 0;          // what the client got (0: nothing, e.g. it hung up)
  // Traced requests: the request's trace and the upstream exchange's span.
  const RequestTrace* trace_;
  SpanId upstream_span_;
  const config::Provider* upstream_provider_ = nullptr;
  std::optional<Clock::time_point> upstream_start_, upstream_end_;
  int upstream_status_ = 0;  // the provider's answer (0: none)
};

void ResourceExchange::add_route_headers(http::fields& h,
                                         const ResponseOwners::Owner& owner) const {
  h.set("x-request-id", rc_.request_id);
  const bool explain = may_explain(cfg_, key_);
  if (explain) {
    h.set("x-llmgate-route", "pinned to provider " + owner.provider + " (response " + path_.id +
                                 " was created there)");
  }
}

net::awaitable<bool> ResourceExchange::run() {
  if (!allowed(path_.part, request_.method_string())) {
    error_ =
        method_not_allowed(request_.method_string(), request_path(request_.target()).value_or(""));
    allow_ = method_for(path_.part);
    co_return co_await refuse();
  }
  if (snap_->keys->enabled()) {
    auto a = snap_->keys->authenticate(request_[http::field::authorization], request_["x-api-key"]);
    if (auto* e = std::get_if<ApiError>(&a)) {
      error_ = *e;
      co_return co_await refuse();
    }
    key_ = std::get<const config::GatewayKey*>(a);
  }
  std::optional<ResponseOwners::Owner> owner;
  if (worker_.responses) owner = worker_.responses->owner_of(path_.id, Clock::now());
  // Another key's response, or one whose model this key may not use: as if
  // the id did not exist.
  const bool key_ok =
      owner && owner->key == (key_ ? key_->name : std::string()) && key_allows(key_, owner->model);
  if (!owner || !key_ok) {
    error_ = response_not_found(path_.id);
    co_return co_await refuse();
  }
  // The key's request rate holds here too: each of these is a provider call
  // on the operator's account.
  if (key_) {
    if (auto denied = snap_->keys->authorize(*key_, owner->model)) {
      error_ = *denied;
      co_return co_await refuse();
    }
    if (snap_->shared) {
      if (auto denied = co_await admit_shared_request(*snap_->shared, *snap_->keys, *key_,
                                                      snap_->metrics->shared())) {
        error_ = *denied;
        co_return co_await refuse();
      }
    }
  }
  const config::Provider* p = cfg_.find_provider(owner->provider);
  const providers::UpstreamProtocol* protocol =
      p ? providers::protocol_for(*p, config::Operation::kResponses) : nullptr;
  if (!protocol) {
    error_ = ApiError{
        404,
        "invalid_request_error",
        "Response with id '" + path_.id + "' was created at provider " + owner->provider +
            ", which the current configuration no longer has as an OpenAI-protocol provider",
        std::nullopt,
        "response_not_found",
        std::nullopt};
    co_return co_await refuse();
  }
  co_return co_await exchange(*owner, *p, *protocol);
}

net::awaitable<bool> ResourceExchange::exchange(const ResponseOwners::Owner& owner,
                                                const config::Provider& p,
                                                const providers::UpstreamProtocol& protocol) {
  std::string target = "/responses/" + path_.id + std::string(part_path(path_.part));
  const std::string_view client_target = request_.target();
  const std::string query = responses_query(client_target);
  if (!query.empty()) target.append("?").append(query);
  const bool wants_stream = ("&" + query + "&").find("&stream=true&") != std::string::npos;
  // Traced: the upstream exchange's span is the provider's parent.
  std::string traceparent;
  if (trace_) {
    upstream_span_ = snap_->tracer->new_span_id();
    traceparent = trace_->child_traceparent(upstream_span_);
  }
  auto credential = credential_for(snap_->credentials, p, std::chrono::system_clock::now());
  if (auto* why = std::get_if<std::string>(&credential)) {
    error_ = upstream_error(502, "provider " + p.name + ": " + *why);
    co_return co_await refuse();
  }
  std::string upstream;
  const auto up = make_upstream_request(
      request_.method(), upstream_target(upstream, p, owner.upstream_model, target),
      request_.body(), wants_stream, request_, rc_, worker_.via_name, p, protocol, traceparent,
      trace_ ? std::string_view(trace_->trace_state) : std::string_view(),
      std::get<0>(credential).get());
  upstream_provider_ = &p;
  upstream_start_ = Clock::now();
  const config::Timeouts t = cfg_.timeouts_for(p);
  auto& pool = worker_.pools->get(p, snap_->tls);
  // A stored response is read, not generated: its head comes within the
  // provider's first-token timeout.
  ExchangeTimes times{t.connect, t.connect, t.ttft};
  times.by = upstream_start_.value() + t.total;
  providers::Lease lease;
  std::optional<UpstreamParser> parser;
  const Exchanged x = co_await exchange_head(pool, lease, parser, up, times);
  if (x.status == Exchanged::Status::kCancelled) co_return false;  // the client went away
  if (x.status != Exchanged::Status::kHead) {
    error_ = upstream_error(x.head_timed_out() ? 504 : 502,
                            "provider " + p.name + ": " + x.why_no_head());
    co_return co_await refuse();
  }
  auto& head = parser->get();
  upstream_status_ = head.result_int();
  // An event stream (GET ?stream=true) as the Responses protocol frames it.
  const bool event_stream =
      providers::announces(head[http::field::content_type], protocol.framing()) &&
      head.result() == http::status::ok;
  if (event_stream)
    co_return co_await relay_stream(lease, *parser, t, times.by, protocol.framing(), owner);
  std::string body;
  // Within the exchange's own end: start + timeouts.total.
  const beast::error_code ec =
      co_await read_whole(lease, *parser, body, kMaxJsonAnswer + 1, times.by);
  if (!parser->is_done()) {
    error_ = upstream_error(
        ec == beast::error::timeout ? 504 : 502,
        "provider " + p.name + " did not send its whole answer (" +
            (body.size() > kMaxJsonAnswer ? std::string("over 16 MiB") : ec.message()) + ")");
    co_return co_await refuse();
  }
  const int status = head.result_int();
  status_ = status;
  upstream_done();
  if (parser->keep_alive()) lease.give_back();
  if (status >= 200 && status < 300 && request_.method() == http::verb::delete_ &&
      worker_.responses) {
    worker_.responses->forget(path_.id);
  }
  Response res{static_cast<http::status>(status), rc_.version};
  res.keep_alive(rc_.keep_alive);
  std::string_view ct = head[http::field::content_type];
  if (ct.empty()) ct = "application/json";
  res.set(http::field::content_type, beast::string_view(ct.data(), ct.size()));
  add_route_headers(res, owner);
  relay_upstream_headers(head, res, /*with_retry_after=*/true);
  res.body() = std::move(body);
  res.prepare_payload();
  co_return co_await write_response(client_, res, kWriteTimeout);
}

net::awaitable<bool> ResourceExchange::relay_stream(providers::Lease& lease, UpstreamParser& parser,
                                                    const config::Timeouts& t,
                                                    Clock::time_point until,
                                                    providers::Framing framing,
                                                    const ResponseOwners::Owner& owner) {
  // The response head goes with the first events; each read's whole events
  // are passed on as they come, verbatim (the relay's reads and framer,
  // forwarded: nothing is translated, nothing is held past its event). A
  // cut, a stall or a bad frame ends the stream with an error event after
  // the last whole event, so a client never reads a cut stream as a
  // finished one, nor half an event glued to the error.
  status_ = 200;
  http::response<http::empty_body> res{http::status::ok, rc_.version};
  res.set(http::field::content_type, "text/event-stream");
  res.set(http::field::cache_control, "no-cache");
  add_route_headers(res, owner);
  relay_upstream_headers(parser.get(), res);
  bool failed = false;
  ClientStream out(client_, rc_, t.idle, failed);
  out.set_head(res);
  providers::Framer frames(framing, cfg_.server.limits.max_event_bytes);
  UpstreamBody body(lease, parser, UpstreamBody::Use::kStream);
  SequenceFollower sequence;  // the error event's number, if the stream breaks
  std::string events;         // this read's whole events
  std::string broke;          // why the stream broke, if it did
  while (broke.empty() && !parser.is_done()) {
    const beast::error_code ec =
        co_await body.read(std::min(Clock::now() + t.idle, until), frames.prepare(body.room()));
    frames.commit(body.delivered());
    events.clear();
    const providers::FrameStatus framed =
        frames.drain([&](const providers::Frame& f) { events.append(f.raw); });
    sequence.feed(events);
    if (!events.empty() && !co_await out.write(events)) co_return false;
    if (framed == providers::FrameStatus::kTooLarge) {
      broke = "an event over server.limits.max_event_size";
    } else if (framed == providers::FrameStatus::kMalformed) {
      broke = "a malformed frame: " + std::string(frames.error());
    } else if (ec) {
      broke = ec.message();
    } else if (parser.is_done() && frames.has_partial_frame()) {
      broke = "the body ended inside an event";
    }
  }
  upstream_done();
  if (!broke.empty()) {
    const std::string event =
        client_api(config::Operation::kResponses)
            .error_event(upstream_error(502, "the upstream stream ended early (" + broke +
                                                 "); the events above are partial"),
                         sequence.next());
    co_await out.write(event, /*last=*/true);
    co_return false;
  }
  body.stop();
  if (parser.keep_alive()) lease.give_back();
  const bool ok = co_await out.write(std::string_view(), /*last=*/true);
  co_return ok&& rc_.keep_alive&& out.chunked();
}

}  // namespace

net::awaitable<bool> handle_response_resource(Worker& worker, beast::tcp_stream& client,
                                              const Request& request, const RequestContext& rc,
                                              const ResponsePath& path) {
  const auto start = Clock::now();
  const std::optional<RequestTrace> trace = begin_trace(*worker.snapshot, request, rc);
  ResourceExchange exchange(worker, client, request, rc, path, trace ? &*trace : nullptr);
  // The client hanging up, or the drain running out, ends the exchange (and
  // closes the upstream connection with it).
  net::awaitable<bool> run = exchange.run();
  const Watched r = co_await run_watched(worker, client, *rc.session_cancel, std::move(run));
  RequestObservers(*worker.snapshot, nullptr).resource_ended(exchange.view(start), Clock::now());
  co_return r.why == Interrupt::kNone&& r.result;
}

}  // namespace llmgate::gateway
