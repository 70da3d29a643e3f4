// The client request and response types, the per-request context and the
// helpers every handler answers with (OpenAI-shaped errors, x-request-id,
// a write deadline). Includes Beast: include only from gateway .cpp files.
#pragma once

#include <array>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/message.hpp>
#include <boost/beast/http/string_body.hpp>
#include <chrono>
#include <memory>
#include <optional>
#include <random>
#include <span>
#include <string>
#include <string_view>

#include "gateway/http/api_error.h"
#include "gateway/http/client_request.h"
#include "gateway/http/headers.h"

namespace llmgate::gateway {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = boost::beast::http;

struct RequestContext {
  std::string request_id;
  unsigned version = 11;  // client's HTTP version: 10 or 11
  bool keep_alive = true;
  std::chrono::steady_clock::time_point received{};  // the whole request was read
  // The client connection's cancellation (its session's coroutine is bound
  // to it): run_watched ends a request's exchange through it. Set by the
  // session for every request it reads.
  net::cancellation_signal* session_cancel = nullptr;
  // The shape of the errors the client's API expects (Anthropic's for
  // /v1/messages): every error the gateway writes for it takes it.
  ErrorShape error_shape = ErrorShape::kOpenAi;
};

// A client's request (gateway/http/client_request.h).
using Request = ClientRequest;
using Response = http::response<http::string_body>;

// A JSON response carrying x-request-id; keep-alive as the request allows.
Response make_json_response(const RequestContext& rc, http::status status, std::string body);
Response make_error_response(const RequestContext& rc, const ApiError& error);

// Writes a whole response with a write deadline. Returns false if the client
// is gone (the caller closes the connection).
net::awaitable<bool> write_response(beast::tcp_stream& client, Response& response,
                                    std::chrono::milliseconds timeout);

// A response head written as text, for the relay's answers: Beast's fields
// cost an allocation and a tree insertion per field, and a serializer pass.
// start() writes the status line, set() a field (appended: the callers set
// each name once), end() the framing (a length, or chunked), Connection as
// keep-alive asks (as Beast's keep_alive() would) and the blank line.
class HeadLines {
 public:
  explicit HeadLines(std::string& text) : text_(text) {}
  void start(unsigned version, http::status status);
  void start(unsigned version, unsigned code, std::string_view reason);  // any code
  void set(std::string_view name, std::string_view value) { append_field_line(text_, name, value); }
  // `content_length`: the body's; none: chunked in HTTP/1.1, and in
  // HTTP/1.0 to the end of the connection.
  void end(unsigned version, bool keep_alive, std::optional<std::size_t> content_length);

 private:
  std::string& text_;
};

// A whole response: `head` (HeadLines) and `body`, with a write deadline.
// False if the client is gone.
net::awaitable<bool> write_whole(beast::tcp_stream& client, std::string_view head,
                                 std::string_view body, std::chrono::milliseconds timeout);

// Two pieces (a head and a body) as one gathered write. send_now() sends
// what the socket takes at once, without waiting -- most writes, with no
// timer, asynchronous operation or coroutine frame -- and leaves in `rest`
// what it did not send, for an asynchronous write.
struct GatheredWrite {
  GatheredWrite(std::string_view head, std::string_view body)
      : bufs{net::const_buffer(head.data(), head.size()),
             net::const_buffer(body.data(), body.size())} {}
  GatheredWrite(const GatheredWrite&) = delete;
  GatheredWrite& operator=(const GatheredWrite&) = delete;

  beast::error_code send_now(net::ip::tcp::socket& socket);
  bool done() const { return rest.empty(); }

  std::array<net::const_buffer, 2> bufs;
  std::span<net::const_buffer> rest{bufs};
};

// write_whole in two steps, for the relay's answers: write_whole_now() sends
// what the socket takes and is the answer (false: the client is gone) when
// that was all of it, else nullopt, and write_whole_rest() writes the rest
// under `timeout`. Either way the client's stream has no deadline after it.
std::optional<bool> write_whole_now(beast::tcp_stream& client, GatheredWrite& w);
net::awaitable<bool> write_whole_rest(beast::tcp_stream& client, GatheredWrite& w,
                                      std::chrono::milliseconds timeout);

}  // namespace llmgate::gateway
