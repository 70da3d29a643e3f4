// The reads of an upstream response's body, once its head is in
// (upstream_body.cpp): one loop of reads for every way a body is used --
// relayed frame by frame (relay.cpp), forwarded as it comes (a stored
// response's event stream, response_resource.cpp), read whole (a JSON
// answer, an error body, a token count: read_whole()). It owns what a read
// needs: one deadline timer for all the reads of the body (closing the
// socket when a read outlives it, as Beast's stream timeout would, without a
// timer armed per read), the connection's buffer sized to the stream (it
// grows with reads that fill it, shrinks after quiet ones), what the buffer
// already holds parsed before the socket is read again, and the socket (or
// TLS) read itself, without Beast's read operation around it.
// Includes Beast: include only from gateway .cpp files.
#pragma once

#include <boost/asio/awaitable.hpp>
#include <boost/asio/buffer.hpp>
#include <chrono>
#include <cstddef>
#include <memory>
#include <span>
#include <string>
#include <tuple>

#include "gateway/http/http_response.h"
#include "gateway/proxy/upstream_parser.h"
#include "providers/upstream_pool.h"

namespace llmgate::gateway {

struct ReadDeadline;

class UpstreamBody {
 public:
  using Clock = std::chrono::steady_clock;
  // Reads start at this much (as Beast's reads: at least this), and a read
  // that fills its room doubles the connection's buffer, up to kMaxRead.
  static constexpr std::size_t kMinRead = 512;
  static constexpr std::size_t kMaxRead = 16 * 1024;

  // How the body is used, which decides what the head's read buffer becomes:
  // a stream may stay open for minutes with its reads one event each, so a
  // few body bytes that came with the head move to a buffer their size; a
  // body read whole keeps the buffer it will fill.
  enum class Use { kWhole, kStream };
  // The head has been read from `parser` on `lease`.
  UpstreamBody(providers::Lease& lease, UpstreamParser& parser, Use use);
  ~UpstreamBody();
  UpstreamBody(const UpstreamBody&) = delete;
  UpstreamBody& operator=(const UpstreamBody&) = delete;

  // One read, in three steps around the socket read (a caller that reads
  // per event keeps its loop free of a coroutine frame per read):
  //
  //   if (body.begin(deadline, space, ec, into)) {
  //     auto [rec, got] = co_await body.read_socket(into);
  //     ec = body.end(rec, got);
  //   }
  //   ... body.delivered() bytes are at the front of `space`; ec: the read's error
  //
  // begin: the read's deadline, the space the body's bytes go to, and what
  // the connection's buffer already holds parsed into it; true when that
  // gave nothing and a socket read into `into` is due. `one_chunk`: parse
  // at most until the first body bytes (a relay before its commit looks at
  // each event before the next). ec: need_buffer cleared.
  bool begin(Clock::time_point deadline, std::span<char> space, beast::error_code& ec,
             net::mutable_buffer& into, bool one_chunk = false);
  // The socket read (plain or TLS). Not a coroutine: the awaitable of the
  // read operation itself.
  net::awaitable<std::tuple<beast::error_code, std::size_t>> read_socket(net::mutable_buffer into);
  // After it: its bytes parsed into the space; the buffers sized for the
  // next read. `other_capacity`: what the caller's own buffer holds (a
  // framer's), which decides with the connection's whether the stream is
  // quiet enough to shrink.
  beast::error_code end(beast::error_code ec, std::size_t got, std::size_t other_capacity = 0);
  // Body bytes the read put at the front of its space.
  std::size_t delivered() const { return space_.size() - parser_.get().body().size; }
  bool done() const { return parser_.is_done(); }

  // One whole read (begin, read_socket, end) for a caller that does not
  // count coroutine frames: into `space`, under `deadline`; delivered()
  // after it. Returns the read's error (need_buffer cleared).
  net::awaitable<beast::error_code> read(Clock::time_point deadline, std::span<char> space);

  // The room to offer a read: the connection buffer's, at least kMinRead.
  std::size_t room() const;
  // After kQuietReads reads in a row that each used under a quarter of
  // their room: the connection's buffer shrinks back (keeping the few bytes
  // of a chunk header it holds), and true says so -- the caller shrinks its
  // own then. Call before preparing the next read's space.
  bool settle();

  // No read is timed any more (the timer's pending wait does nothing).
  void stop();

 private:
  beast::error_code parse_buffered(bool one_chunk);

  providers::Lease& lease_;
  UpstreamParser& parser_;
  std::shared_ptr<ReadDeadline> deadline_;
  std::span<char> space_;      // this read's body space
  std::size_t read_room_ = 0;  // what this read's socket read was offered
  int quiet_reads_ = 0;
};

// Reads the rest of a response body into `body` while it holds fewer than
// `limit` bytes, until `deadline`. Returns the read's error, if one ended it
// (the body is whole when the parser is done).
net::awaitable<beast::error_code> read_whole(providers::Lease& lease, UpstreamParser& parser,
                                             std::string& body, std::size_t limit,
                                             std::chrono::steady_clock::time_point deadline);

}  // namespace llmgate::gateway
