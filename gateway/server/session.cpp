// One HTTP/1.1 connection (gateway_impl.h): the request head and body read
// under their limits and deadlines (most without an I/O operation, from what
// the buffer already holds), RFC 9112's framing checked, keep-alive and
// pipelining, a key checked before any body is read; then the request
// goes to endpoints.cpp's dispatch.
#include <algorithm>
#include <array>

#include "gateway/server/gateway_impl.h"
#include "gateway/server/route_table.h"

namespace llmgate::gateway {
namespace {

using tcp = net::ip::tcp;
constexpr auto kUseTuple = net::as_tuple(net::use_awaitable);
// Beast reads at most the buffer's free capacity (at least 512 bytes) per
// call, and an empty buffer never grows past 512: each request is read with
// 4 KiB reserved (one or two reads for a typical request), and the buffer is
// freed while the request is served (a long stream should not keep it:
// memory per open stream, bench/scale).
constexpr std::size_t kRequestBuffer = 4096;

// 413, whether Beast finds out from Content-Length (with the head) or while
// reading a chunked body.
ApiError body_too_large(const BodyLimit& limit) {
  return ApiError{413,
                  "invalid_request_error",
                  "request body is larger than the limit of " + std::to_string(limit.bytes) +
                      " bytes (" + std::string(limit.setting) + ")",
                  std::nullopt,
                  "request_too_large",
                  std::nullopt};
}

// Anthropic's API (/v1/messages, /v1/messages/count_tokens).
bool anthropic_api(const Route& r) {
  return r.endpoint == Endpoint::kMessages || r.endpoint == Endpoint::kCountTokens;
}

// Anthropic's clients: its paths, and GET /v1/models with anthropic-version
// (their SDKs list models there too).
ErrorShape error_shape_of(const Route& r, const Request& head) {
  if (anthropic_api(r)) return ErrorShape::kAnthropic;
  const bool models = r.endpoint == Endpoint::kModels || r.endpoint == Endpoint::kModel;
  return models && head.find("anthropic-version") != head.end() ? ErrorShape::kAnthropic
                                                                : ErrorShape::kOpenAi;
}

// What is wrong with a request head that Beast accepted, for the strict
// HTTP/1.1 framing of RFC 9112: the version, Host, Transfer-Encoding and
// the target's form. nullopt if nothing.
std::optional<ApiError> framing_error(const Request& head) {
  auto bad = [](std::string message, int status = 400) {
    return ApiError{status,
                    "invalid_request_error",
                    std::move(message),
                    std::nullopt,
                    status == 505 ? "http_version_not_supported" : "bad_http_request",
                    std::nullopt};
  };
  if (head.version() != 10 && head.version() != 11) {
    return bad("HTTP version not supported (llmgate speaks HTTP/1.1 and HTTP/1.0)", 505);
  }
  const auto hosts = std::count_if(head.begin(), head.end(),
                                   [](const auto& f) { return f.name() == http::field::host; });
  if (head.version() == 11 && hosts == 0) return bad("HTTP/1.1 request without a Host header");
  if (hosts > 1) return bad("more than one Host header");
  if (hosts == 1 && !is_valid_host(head[http::field::host])) {
    return bad("Host must be a host name or address and an optional port (RFC 9110 §7.2)");
  }
  std::vector<std::string_view> te;
  for (const auto& f : head) {
    if (f.name() == http::field::transfer_encoding) te.push_back(f.value());
  }
  if (!te.empty()) {
    if (head.version() == 10) return bad("Transfer-Encoding in an HTTP/1.0 request");
    if (head.find(http::field::content_length) != head.end()) {
      return bad("both Transfer-Encoding and Content-Length");
    }
    switch (classify_transfer_encoding(te)) {
      case TransferCoding::kInvalid:
        return bad("Transfer-Encoding must be chunked (its final coding is not)");
      case TransferCoding::kUnsupported:
        return bad("only the chunked transfer coding is supported", 501);
      case TransferCoding::kNone:
      case TransferCoding::kChunked:
        break;
    }
  }
  if (has_invalid_target_byte(head.target())) {
    return bad("request target has a control, space or non-ASCII byte");
  }
  if (!request_path(head.target())) {
    return bad("request target must be an absolute path (origin-form) or an absolute URI");
  }
  return std::nullopt;
}

// Every Connection line counts. (A plain function: its tokens stay out of
// the request's coroutine frame, which lives as long as the answer.)
bool client_keeps_alive(const Request& head, unsigned version) {
  ListTokens connection;
  for (const auto& f : head) {
    if (f.name() == http::field::connection) add_list_tokens(f.value(), connection);
  }
  return wants_keep_alive(version, connection);
}

std::string_view buffered(const beast::flat_buffer& b) {
  return {static_cast<const char*>(b.data().data()), b.size()};
}

// Reads until `buffer` holds a whole request head (or `max` bytes of one,
// which the parser then refuses as too large). An error (the deadline, a
// close) is returned as is.
net::awaitable<beast::error_code> read_head_bytes(beast::tcp_stream& stream,
                                                  beast::flat_buffer& buffer, std::size_t max) {
  std::size_t searched = 0;
  for (;;) {
    const std::string_view have = buffered(buffer);
    if (request_head_end(have, searched) != std::string_view::npos || have.size() > max)
      co_return beast::error_code{};
    searched = have.size();
    // Into the free space the buffer has (4 KiB are reserved per request),
    // at least 512 bytes, never past the limit.
    const std::size_t room = std::max<std::size_t>(512, buffer.capacity() - buffer.size());
    auto [ec, n] = co_await stream.async_read_some(
        buffer.prepare(std::min(room, max + 1 - have.size())), kUseTuple);
    if (ec) co_return ec;
    buffer.commit(n);
  }
}

}  // namespace

class Gateway::Impl::SessionTracker {
 public:
  SessionTracker(Impl& impl, WorkerThread& w, beast::tcp_stream* s, bool admin)
      : impl_(impl), w_(w) {
    if (admin) return;
    it_ = w.sessions.insert(w.sessions.end(), Session{s});
    std::lock_guard lock(impl.sessions_mu);
    ++impl.api_sessions;
  }
  SessionTracker(const SessionTracker&) = delete;
  SessionTracker& operator=(const SessionTracker&) = delete;
  ~SessionTracker() {
    if (!it_) return;
    w_.sessions.erase(*it_);
    std::lock_guard lock(impl_.sessions_mu);
    if (--impl_.api_sessions == 0) impl_.sessions_cv.notify_all();
  }
  // A request has begun (the drain lets it finish), or the session waits.
  void busy(bool b) {
    if (it_) (*it_)->busy = b;
  }

 private:
  Impl& impl_;
  WorkerThread& w_;
  std::optional<std::list<Session>::iterator> it_;
};

namespace {

// What a request head that could not be read gets (nullopt: the client went
// away or stalled, and only closing is left).
std::optional<ApiError> head_error(beast::error_code ec, bool new_version,
                                   const BodyLimit& body_limit) {
  if (ec == http::error::end_of_stream || ec == beast::error::timeout ||
      ec == net::error::connection_reset || ec == net::error::eof ||
      ec == net::error::operation_aborted) {
    return std::nullopt;
  }
  // Beast checks Content-Length against the body limit with the head.
  if (ec == http::error::header_limit) {
    return ApiError{431,          "invalid_request_error", "request headers are too large",
                    std::nullopt, "headers_too_large",     std::nullopt};
  }
  if (ec == http::error::body_limit) return body_too_large(body_limit);
  if (ec == http::error::bad_version && new_version) {
    return ApiError{505,
                    "invalid_request_error",
                    "HTTP version not supported (llmgate speaks HTTP/1.1 and HTTP/1.0)",
                    std::nullopt,
                    "http_version_not_supported",
                    std::nullopt};
  }
  return invalid_request("malformed HTTP request: " + ec.message(), std::nullopt,
                         "bad_http_request");
}

// What a body that could not be read whole gets: too large, or malformed (a
// bad chunk size, say). Nullopt when the client went away or stalled past
// the deadline: it just loses the connection.
std::optional<ApiError> body_error(beast::error_code ec, const BodyLimit& body_limit) {
  if (ec == beast::error::timeout || ec == http::error::end_of_stream ||
      ec == http::error::partial_message || ec == net::error::eof ||
      ec == net::error::connection_reset || ec == net::error::operation_aborted) {
    return std::nullopt;
  }
  if (ec == http::error::body_limit) return body_too_large(body_limit);
  return invalid_request("malformed HTTP request body: " + ec.message(), std::nullopt,
                         "bad_http_request");
}

// Reads the rest of a chunked body (what http::async_read would do) with the
// chunk line and the trailer section bounded (gateway/server/chunked_request.h): the
// answer to a body past either limit, as soon as it is, else nullopt with
// `ec` set as the read left it. The buffer holds at most a limit's worth of
// unparsed bytes and a read.
net::awaitable<std::optional<ApiError>> read_chunked_body(beast::tcp_stream& stream,
                                                          beast::flat_buffer& buffer,
                                                          RequestParser& parser,
                                                          const config::ServerLimits& limits,
                                                          beast::error_code& ec) {
  ChunkedBodyReader reader(parser, limits.max_header_bytes);
  for (;;) {
    switch (reader.put(buffer, ec)) {
      case ChunkedBodyReader::Status::kDone:
      case ChunkedBodyReader::Status::kError:
        co_return std::nullopt;
      case ChunkedBodyReader::Status::kChunkLine:
        co_return invalid_request("a chunk line (chunk size and extensions) is longer than " +
                                      std::to_string(kMaxChunkLineBytes) + " bytes",
                                  std::nullopt, "bad_http_request");
      case ChunkedBodyReader::Status::kTrailers:
        co_return ApiError{431,
                           "invalid_request_error",
                           "the request's trailer section is larger than the limit of " +
                               std::to_string(limits.max_header_bytes) +
                               " bytes (server.limits.max_header_size)",
                           std::nullopt,
                           "headers_too_large",
                           std::nullopt};
      case ChunkedBodyReader::Status::kNeedMore:
        break;
    }
    // As much as Beast's own read would ask for.
    std::size_t n = 0;
    std::tie(ec, n) =
        co_await stream.async_read_some(buffer.prepare(beast::read_size(buffer, 65536)), kUseTuple);
    if (ec) co_return std::nullopt;
    buffer.commit(n);
  }
}

// Answers `error` and marks the connection for closing.
net::awaitable<void> answer_and_close(beast::tcp_stream& stream, const RequestContext& rc,
                                      const ApiError& error) {
  Response res = make_error_response(rc, error);
  res.keep_alive(false);
  co_await write_response(stream, res, kWriteTimeout);
}

}  // namespace

net::awaitable<void> Gateway::Impl::session(WorkerThread& w, tcp::socket socket, bool admin,
                                            net::cancellation_signal& cancel) {
  beast::tcp_stream stream(std::move(socket));
  beast::flat_buffer buffer;
  SessionTracker tracked(*this, w, &stream, admin);
  if (!admin && over_connection_limit(w)) {
    // Shed load with an answer, not a silent close: the client can retry.
    const std::size_t max = w.worker.snapshot->config->server.limits.max_connections;
    RequestContext rc{new_request_id(), 11, false};
    Response res =
        make_error_response(rc, ApiError{503, "service_unavailable",
                                         "too many connections (server.limits.max_connections is " +
                                             std::to_string(max) + "); retry shortly",
                                         std::nullopt, "too_many_connections", 1});
    co_await write_response(stream, res, kWriteTimeout);
    co_await lingering_close(stream);
    co_return;
  }
  try {
    for (bool first = true;; first = false) {
      // The drain closed the listeners: no new request on an API connection.
      // (Checked right before the read, with no suspension between, so the
      // drain's cancellation of idle sessions cannot miss this one.)
      if (!admin && closing.load()) break;
      tracked.busy(false);
      const bool more = co_await serve_request(w, stream, buffer, tracked, first, admin, cancel);
      if (!more) break;
    }
  } catch (const boost::system::system_error& e) {
    // Cancellation of an operation: the connection goes.
    log_line(LogLevel::kDebug, std::string("session ended: ") + e.what());
  } catch (const std::exception& e) {
    // A broken invariant: loud, because nothing on the data path should throw.
    log_line(LogLevel::kError, std::string("session aborted by exception: ") + e.what());
  }
  co_await lingering_close(stream);
}

bool Gateway::Impl::over_connection_limit(WorkerThread& w) {
  const std::size_t max = w.worker.snapshot->config->server.limits.max_connections;
  std::lock_guard lock(sessions_mu);
  return api_sessions > max;
}

net::awaitable<bool> Gateway::Impl::serve_request(WorkerThread& w, beast::tcp_stream& stream,
                                                  beast::flat_buffer& buffer,
                                                  SessionTracker& tracked, bool first, bool admin,
                                                  net::cancellation_signal& cancel) {
  // Limits as the current config has them (a reload may change them).
  const auto snap = w.worker.snapshot;
  const auto& limits = snap->config->server.limits;
  // The path's: embeddings batches have their own (use_path_body_limit).
  BodyLimit body_limit{limits.max_body_bytes, "server.limits.max_body_size"};
  Request req;
  RequestParser parser(req);
  parser.header_limit(static_cast<std::uint32_t>(limits.max_header_bytes));
  parser.body_limit(limits.max_body_bytes);
  if (buffer.capacity() < kRequestBuffer) buffer.reserve(kRequestBuffer);
  if (!first && buffer.size() == 0) {
    // Keep-alive: the wait for the next request is bounded by the idle
    // timeout; from its first byte on, the head by the header timeout.
    stream.expires_after(limits.client_idle_timeout);
    auto [iec, in] = co_await stream.async_read_some(buffer.prepare(kRequestBuffer), kUseTuple);
    if (iec) co_return false;
    buffer.commit(in);
  }
  tracked.busy(true);  // a request has begun: the drain lets it finish
  RequestContext rc{new_request_id(), 11, false};
  rc.session_cancel = &cancel;
  beast::error_code ec;
  switch (parse_buffered_head(buffer, parser, limits, body_limit, ec)) {
    case Buffered::kDone:
      break;
    case Buffered::kError:
      rc.error_shape = body_limit.shape;
      if (std::optional<ApiError> e = head_error(ec, /*new_version=*/false, body_limit))
        co_await answer_and_close(stream, rc, *e);
      co_return false;
    case Buffered::kRead:
      if (!co_await read_request_head(stream, buffer, parser, rc, limits, body_limit))
        co_return false;
      break;
  }
  auto& head = parser.get();
  rc.version = head.version() == 10 ? 10 : 11;
  // What the path names, once for the request (an invalid target: none).
  const Route route = route_of(request_path(head.target()).value_or(""));
  rc.error_shape = error_shape_of(route, head);
  // While draining, answer and close: clients reconnect to another replica.
  rc.keep_alive = client_keeps_alive(head, rc.version) && !(draining.load() && !admin);
  if (auto id = head["x-request-id"]; is_valid_request_id(id)) rc.request_id = std::string(id);
  if (auto e = framing_error(head)) {
    // The request's extent is unknown or ambiguous: answer, then close
    // (whatever follows on the connection is never read as a request).
    co_await answer_and_close(stream, rc, *e);
    co_return false;
  }
  if (auto e = rejected_before_body(*snap, route, head, admin)) {
    // A caller without a valid key cannot make the gateway read (or, with
    // Expect: 100-continue, ask for) a body. Its request line, and an API
    // call's outcome in llmgate_requests_total (docs/operations.md, "Refusals").
    const std::optional<config::Operation> op =
        head.method() == http::verb::post ? route.operation : std::nullopt;
    if (op) metrics->on_refused(*op, "", Refused::kUnauthenticated);
    log_refused_request(rc.request_id, op ? config::gen_ai_name(*op) : "", "", "",
                        to_string(Refused::kUnauthenticated), e->status);
    Response res = make_error_response(rc, *e);
    const bool body_unread = !parser.is_done();
    res.keep_alive(rc.keep_alive && !body_unread);
    const bool written = co_await write_response(stream, res, kWriteTimeout);
    co_return written && !body_unread && rc.keep_alive;
  }
  switch (parse_buffered_body(stream, buffer, parser, ec)) {
    case Buffered::kDone:
      break;
    case Buffered::kError:
      if (std::optional<ApiError> e = body_error(ec, body_limit))
        co_await answer_and_close(stream, rc, *e);
      co_return false;
    case Buffered::kRead:
      if (!co_await read_request_body(stream, buffer, parser, rc, limits, body_limit))
        co_return false;
      break;
  }
  rc.received = std::chrono::steady_clock::now();
  if (buffer.size() == 0) buffer.shrink_to_fit();  // nothing pipelined behind it
  const bool keep = co_await dispatch(w, stream, req, rc, route, admin);
  co_return keep&& rc.keep_alive;
}

net::awaitable<bool> Gateway::Impl::read_request_head(beast::tcp_stream& stream,
                                                      beast::flat_buffer& buffer,
                                                      RequestParser& parser, RequestContext& rc,
                                                      const config::ServerLimits& limits,
                                                      BodyLimit& body_limit) {
  stream.expires_after(limits.client_header_timeout);  // the slowloris guard
  // The whole head is in the buffer before Beast parses it, so that what
  // Beast would quietly normalise (obs-fold) can be refused first.
  beast::error_code hec = co_await read_head_bytes(stream, buffer, limits.max_header_bytes);
  const std::string_view have = buffered(buffer);
  const std::size_t head_end = hec ? std::string_view::npos : request_head_end(have);
  // Checked before the parser consumes the head: a 505 rather than a 400.
  const bool new_version = !hec && has_unsupported_http_version(have);
  // In the head only: a pretty-printed body with CRLF line ends has CRLF and
  // a space without being a fold.
  const bool folded = !hec && has_obs_fold(have.substr(0, head_end));
  if (folded) {
    co_await answer_and_close(
        stream, rc,
        invalid_request("obsolete line folding in the request head is not accepted", std::nullopt,
                        "bad_http_request"));
    co_return false;
  }
  if (!hec) use_path_body_limit(have, parser, limits, body_limit);
  rc.error_shape = body_limit.shape;
  // The head is whole in the buffer now (else past the limit: Beast refuses
  // it as it reads on): parsed in place.
  if (!hec && head_end != std::string_view::npos &&
      put_whole_head(buffer, parser, head_end, hec) == Buffered::kDone) {
    co_return true;
  }
  if (!hec && !parser.is_header_done())
    std::tie(hec, std::ignore) =
        co_await http::async_read_header(stream, buffer, parser, kUseTuple);
  if (!hec) co_return true;
  if (std::optional<ApiError> e = head_error(hec, new_version, body_limit)) {
    co_await answer_and_close(stream, rc, *e);
  }
  co_return false;
}

Gateway::Impl::Buffered Gateway::Impl::parse_buffered_head(beast::flat_buffer& buffer,
                                                           RequestParser& parser,
                                                           const config::ServerLimits& limits,
                                                           BodyLimit& body_limit,
                                                           beast::error_code& ec) {
  const std::string_view have = buffered(buffer);
  // What read_request_head answers itself (a version, a fold) goes there.
  const std::size_t head_end = request_head_end(have);
  if (head_end == std::string_view::npos || has_unsupported_http_version(have) ||
      has_obs_fold(have.substr(0, head_end))) {
    return Buffered::kRead;
  }
  use_path_body_limit(have, parser, limits, body_limit);
  return put_whole_head(buffer, parser, head_end, ec);
}

void Gateway::Impl::use_path_body_limit(std::string_view head, RequestParser& parser,
                                        const config::ServerLimits& limits, BodyLimit& body_limit) {
  const std::optional<std::string_view> path = post_path(head);
  if (!path) return;
  const Route r = route_of(*path);
  if (anthropic_api(r)) body_limit.shape = ErrorShape::kAnthropic;
  if (r.operation != config::Operation::kEmbeddings) return;
  // A batch of inputs has its own limit (Beast checks Content-Length
  // against it as it parses the head).
  body_limit = {limits.max_embeddings_body_bytes, "server.limits.max_embeddings_body_size"};
  parser.body_limit(body_limit.bytes);
}

Gateway::Impl::Buffered Gateway::Impl::put_whole_head(beast::flat_buffer& buffer,
                                                      RequestParser& parser, std::size_t head_end,
                                                      beast::error_code& ec) {
  // The fields' block sized for the head: one allocation.
  parser.get().reserve(head_end);
  // Beast parses a head only once all of it is there; need_more is rare (a
  // buffer that ends in "\r\n\n": Beast takes the head up to the bare LF)
  // and the read path goes on from where the parser is, as after a read.
  const std::size_t n = parser.put(buffer.data(), ec);
  buffer.consume(n);
  if (ec == http::error::need_more) {
    ec = {};
    return Buffered::kRead;
  }
  if (ec) return Buffered::kError;
  return parser.is_header_done() ? Buffered::kDone : Buffered::kRead;
}

Gateway::Impl::Buffered Gateway::Impl::parse_buffered_body(beast::tcp_stream& stream,
                                                           beast::flat_buffer& buffer,
                                                           RequestParser& parser,
                                                           beast::error_code& ec) {
  // No 100-continue to send, and a body of a known length that is all here.
  if (parser.get().find(http::field::expect) != parser.get().end()) return Buffered::kRead;
  if (!parser.is_done()) {
    const auto left = parser.content_length_remaining();
    if (parser.chunked() || !left || buffer.size() < *left) return Buffered::kRead;
    while (!parser.is_done()) {
      const std::size_t n = parser.put(buffer.data(), ec);
      buffer.consume(n);
      if (ec) return Buffered::kError;
      if (n == 0) return Buffered::kRead;  // not expected: the read path goes on
    }
  }
  stream.expires_never();  // as read_request_body leaves it
  return Buffered::kDone;
}

net::awaitable<bool> Gateway::Impl::read_request_body(
    beast::tcp_stream& stream, beast::flat_buffer& buffer, RequestParser& parser,
    const RequestContext& rc, const config::ServerLimits& limits, const BodyLimit& body_limit) {
  if (beast::iequals(parser.get()[http::field::expect], "100-continue")) {
    http::response<http::empty_body> cont{http::status::continue_, rc.version};
    stream.expires_after(kWriteTimeout);
    auto [cec, cn] = co_await http::async_write(stream, cont, kUseTuple);
    if (cec) co_return false;
  }
  stream.expires_after(limits.client_header_timeout);
  std::optional<ApiError> refused;
  beast::error_code bec;
  if (parser.chunked()) {
    refused = co_await read_chunked_body(stream, buffer, parser, limits, bec);
  } else {
    std::tie(bec, std::ignore) = co_await http::async_read(stream, buffer, parser, kUseTuple);
  }
  stream.expires_never();
  if (!refused && !bec) co_return true;
  if (!refused) refused = body_error(bec, body_limit);
  if (refused) co_await answer_and_close(stream, rc, *refused);
  co_return false;
}

// Where lingering closes read what they discard: the thread's, not 16 KiB
// in each closing connection's coroutine frame (held up to two seconds).
namespace {
net::mutable_buffer discard_buffer() {
  thread_local std::array<char, 16 * 1024> sink;
  return net::buffer(sink);
}
}  // namespace

// Half-close, then read and discard what the client is still sending (an
// oversized body we refused, say) for a bounded time and size before closing.
// Closing with unread data makes the kernel send a reset, which can destroy
// the error response before the client reads it (nginx's lingering_close).
net::awaitable<void> Gateway::Impl::lingering_close(beast::tcp_stream& stream) {
  constexpr std::size_t kMaxDrain = 8 * 1024 * 1024;
  beast::error_code ignored;
  stream.socket().shutdown(tcp::socket::shutdown_send, ignored);
  stream.expires_after(std::chrono::seconds(2));
  for (std::size_t drained = 0; drained < kMaxDrain;) {
    auto [ec, n] = co_await stream.async_read_some(discard_buffer(), kUseTuple);
    if (ec) break;
    drained += n;
  }
  stream.close();
}

std::optional<ApiError> Gateway::Impl::rejected_before_body(const Snapshot& snap,
                                                            const Route& route, const Request& head,
                                                            bool admin) const {
  // Probes, scrapes and /admin/* (which has its own key) are not API calls.
  if (admin || route.admin || !snap.keys->enabled()) return std::nullopt;
  auto a = snap.keys->authenticate(head[http::field::authorization], head["x-api-key"]);
  auto* e = std::get_if<ApiError>(&a);
  if (e == nullptr) return std::nullopt;
  metrics->on_auth_rejected(AuthRejection::kUnauthenticated);
  return *e;
}

}  // namespace llmgate::gateway
