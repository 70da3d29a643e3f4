// The client side of a request in flight: the committed streaming response
// (head, chunks, trailers as gathered writes) and the two things that end a
// request from outside (the client hanging up, the drain running out).
// Includes Beast: include only from gateway .cpp files.
#pragma once

#include <array>
#include <boost/beast/http/empty_body.hpp>
#include <boost/container/small_vector.hpp>
#include <chrono>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "gateway/http/http_response.h"
#include "gateway/proxy/worker.h"

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
  // The same as text: start_head() writes the status line, the caller the
  // fields, end_head() the framing (chunked, or to the end of the
  // connection for HTTP/1.0) and the blank line.
  HeadLines start_head(http::status status);
  void end_head(HeadLines& h);

  // Sends the pending head, `body` as one chunk, and with `last` the end of
  // the body: the zero-size chunk with `trailer_lines` ("name: value\r\n"...).
  // False if the client is gone.
  net::awaitable<bool> write(std::span<const std::string_view> body, bool last = false,
                             std::string_view trailer_lines = {});
  net::awaitable<bool> write(std::string_view bytes, bool last = false) {
    co_return co_await write(std::span<const std::string_view>(&bytes, 1), last);
  }
  // The same in two steps, for the relay's per-event and last writes: write_now()
  // sends what the socket takes at once (no coroutine, no timer) and is true
  // when that was all of it, or the write failed (see failed()); when false,
  // write_rest() must send the rest before anything else is written. `body`
  // must stay valid until then.
  bool write_now(std::span<const std::string_view> body, bool last = false,
                 std::string_view trailer_lines = {});
  net::awaitable<bool> write_rest();
  bool failed() const { return failed_; }

 private:
  beast::tcp_stream& client_;
  const RequestContext& rc_;
  std::chrono::milliseconds timeout_;
  bool& failed_;
  void sent();

  std::string head_;
  bool head_pending_ = false;
  bool head_sending_ = false;  // in bufs_ (sent: freed)
  boost::container::small_vector<net::const_buffer, 8> bufs_;
  std::size_t rest_ = 0;              // bufs_[rest_...]: staged for write_rest()
  std::array<char, 24> size_line_{};  // the chunk's size line, in bufs_
};

// What ended a request's exchange from outside.
enum class Interrupt {
  kNone,        // nothing: the exchange ended by itself
  kClientGone,  // the client closed its connection (or its socket failed)
  kShutdown,    // the drain ran out of time
};

struct Watched {
  bool result = false;  // the exchange's (false when interrupted)
  Interrupt why = Interrupt::kNone;
};

// Runs `exchange` and waits for it to end. The client hanging up or the end
// of the drain cancels it (terminal: its waits end with operation_aborted, a
// write in progress is cut), and `why` says which. What `exchange || watch
// || drain` did, without three coroutines per request -- and without one of
// the exchange's own: it runs in the caller's coroutine, the session's, and
// is cancelled through `session_cancel`, the signal that coroutine is bound
// to (its cancellation state is reset after an interrupt, for what the
// session does next).
net::awaitable<Watched> run_watched(Worker& worker, beast::tcp_stream& client,
                                    net::cancellation_signal& session_cancel,
                                    net::awaitable<bool> exchange);

// The requests in flight on one worker that something outside may end: the
// client hanging up (each one's socket is watched for it while the request
// runs: a wait for readability and a peek, which consumes nothing, so a
// pipelined request stays in the socket for the session) and the drain
// running out of time (end_all). This worker's thread only. Entries are
// reused: nothing is allocated per request in the steady state.
//
// A request's watch starts at the second tick after it does (tick(), every
// kTick): one that ends sooner -- most non-streamed answers, every request
// of a busy closed loop -- never pays for the wait (an epoll_ctl to arm it
// and a cancellation to end it, a twentieth of a short request's CPU), and
// a hang-up is still found within 2 * kTick (arming a socket that is
// already readable reports it at once). nginx learns of a hang-up from the
// event mask it registered once; Asio's waits re-register every time.
class RequestWatches {
 public:
  static constexpr std::chrono::milliseconds kTick{100};

  RequestWatches();
  ~RequestWatches();
  RequestWatches(const RequestWatches&) = delete;
  RequestWatches& operator=(const RequestWatches&) = delete;

  // The drain ran out of time: every watched request is cancelled, and any
  // that starts from now on ends at once.
  void end_all();
  // Every kTick (Gateway: a timer on the worker): arms the watch of each
  // request that was already running at the previous tick.
  void tick();

 private:
  friend net::awaitable<Watched> run_watched(Worker&, beast::tcp_stream&, net::cancellation_signal&,
                                             net::awaitable<bool>);
  struct Entry;
  struct OnReadable;

  // A request's entry (`id` names it); `cancel` ends its exchange.
  Entry& add(net::cancellation_signal& cancel, net::ip::tcp::socket& socket, std::uint64_t& id);
  Entry* find(std::uint64_t id);  // null once removed
  void remove(std::uint64_t id);
  void arm(Entry& e, std::uint64_t id);  // waits for the socket to be readable
  static void interrupt(Entry& e, Interrupt why);

  std::vector<std::unique_ptr<Entry>> entries_;
  std::vector<std::uint32_t> free_;
  std::uint64_t ticks_ = 0;
  bool ended_ = false;
};

}  // namespace llmgate::gateway
