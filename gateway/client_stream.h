// The client side of a request in flight: the committed streaming response
// (head, chunks, trailers as gathered writes) and the two things that end a
// request from outside (the client hanging up, the drain running out).
// Includes Beast: include only from gateway .cpp files.
#pragma once

#include <boost/beast/http/empty_body.hpp>
#include <chrono>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "gateway/http_response.h"
#include "gateway/worker.h"

namespace llmgate::gateway {

// The response to the client of a streaming request, once committed.
//
// Writes are gathered: the response head goes out with the first events, and
// the last events with the terminating chunk and trailers, each as one
// writev of the caller's pieces (the relay's views into the SSE parser's
// buffer), the chunk framing around them. Nothing is copied here.
class ClientStream {
 public:
  // `failed` is set when a write fails or is cancelled part-way: the
  // response's framing is then unknown and nothing more may be written.
  ClientStream(beast::tcp_stream& client, const RequestContext& rc,
               std::chrono::milliseconds timeout, bool& failed)
      : client_(client), rc_(rc), timeout_(timeout), failed_(failed) {}

  bool chunked() const { return rc_.version == 11; }

  // The head to send before the first body bytes (with them, in one write).
  void set_head(http::response<http::empty_body>& res);

  // Sends the pending head, `body` as one chunk, and with `last` the end of
  // the body: the zero-size chunk with `trailer_lines` ("name: value\r\n"...).
  net::awaitable<bool> write(std::span<const std::string_view> body, bool last = false,
                             std::string_view trailer_lines = {});
  net::awaitable<bool> write(std::string_view bytes, bool last = false) {
    co_return co_await write(std::span<const std::string_view>(&bytes, 1), last);
  }

 private:
  beast::tcp_stream& client_;
  const RequestContext& rc_;
  std::chrono::milliseconds timeout_;
  bool& failed_;
  std::string head_;
  bool head_pending_ = false;
  std::vector<net::const_buffer> bufs_;
};

// Waits until the client closes its connection (or the socket errors). Does
// not consume bytes: a pipelined request stays in the socket for the session.
net::awaitable<void> watch_client_disconnect(beast::tcp_stream& client);

// Completes when the worker's drain runs out of time (its shutdown timer is
// cancelled); never otherwise.
net::awaitable<void> wait_for_shutdown(Worker& worker);

}  // namespace llmgate::gateway
