// The reads of an upstream response's body (upstream_body.h).
#include "gateway/proxy/upstream_body.h"

#include <algorithm>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/http/error.hpp>
#include <cstdint>

namespace llmgate::gateway {

using Clock = std::chrono::steady_clock;

namespace {

constexpr auto kUseTuple = net::as_tuple(net::use_awaitable);

// An open stream holds the connection's buffer (and a relay's framer
// buffer) for as long as it lasts, and a long stream's reads are one event
// each, a few hundred bytes. So once the head is in, an empty buffer goes
// and reads start at kMinRead; after kQuietReads reads in a row that each
// used under a quarter of their room the buffer shrinks back: a handful of
// allocations per stream, none per event.
constexpr int kQuietReads = 8;
// What a quiet stream's buffer may hold when it shrinks: Beast's parser
// leaves the CRLF that ends a chunk's data until the next chunk's header is
// in (so between chunks the buffer is never empty), and a read may have
// brought part of that header.
constexpr std::size_t kCarry = 64;

// Replaces the buffer's storage with one of kMinRead free bytes after what
// it holds: one allocation, the room the next read asks for.
void shrink_keeping(beast::flat_buffer& raw) {
  beast::flat_buffer kept;
  if (const std::size_t n = raw.size(); n > 0)
    kept.commit(net::buffer_copy(kept.prepare(UpstreamBody::kMinRead + n), raw.data()));
  raw = std::move(kept);
}

}  // namespace

// The deadline of the body read in progress, kept by one timer for all of
// them (a Beast stream's timeout arms a timer for every read and cancels it
// when the read completes). A read only moves the deadline; the timer, when
// it fires before the deadline, waits again until it, and past it closes the
// socket if a read is in progress (as Beast's timeout does: a TLS read may be
// several socket reads, and a close fails every one of them; a cancel would
// miss one that had not started). Between reads (a relay writing to a slow
// client) a deadline passes harmlessly: the next read sets its own. Shared
// with the timer's handler, which may run after the body's reader is gone:
// `socket` is null then, and a handler of an earlier wait (`generation`)
// does nothing.
struct ReadDeadline {
  explicit ReadDeadline(net::ip::tcp::socket& s) : timer(s.get_executor()), socket(&s) {}
  net::steady_timer timer;
  Clock::time_point deadline = Clock::time_point::max();
  Clock::time_point armed = Clock::time_point::max();  // the wait's expiry; max: none
  net::ip::tcp::socket* socket;
  std::uint64_t generation = 0;
  bool reading = false;    // a read is in progress
  bool expired = false;    // ... and the deadline closed its socket
  bool one_chunk = false;  // the read's parse stops at the first body bytes
};

namespace {

void wait_for_deadline(const std::shared_ptr<ReadDeadline>& d) {
  d->armed = d->deadline;
  d->timer.expires_at(d->deadline);  // cancels an earlier wait, if any
  d->timer.async_wait([d, generation = ++d->generation](boost::system::error_code ec) {
    if (ec || !d->socket || generation != d->generation) return;
    d->armed = Clock::time_point::max();
    if (!d->reading) return;  // the next read sets its deadline and waits
    if (Clock::now() < d->deadline) {
      wait_for_deadline(d);  // reads moved it on
      return;
    }
    d->expired = true;
    beast::error_code ignored;
    d->socket->close(ignored);  // the read completes with operation_aborted
  });
}

}  // namespace

UpstreamBody::UpstreamBody(providers::Lease& lease, UpstreamParser& parser, Use use)
    : lease_(lease),
      parser_(parser),
      deadline_(std::make_shared<ReadDeadline>(lease->stream.tcp().socket())) {
  // Nothing of the body came with the head (a stream that trickles): the
  // head's buffer goes, and reads start small (kMinRead). A stream's first
  // events that came with it (a few hundred bytes in the head's 16 KiB)
  // keep a buffer their size, not the head's, while the stream waits for
  // its next event; a burst (a fast answer all there at once) keeps the
  // buffer it came in, and is relayed in one write.
  beast::flat_buffer& raw = lease_->buffer;
  if (raw.size() == 0)
    raw.shrink_to_fit();
  else if (use == Use::kStream && raw.size() <= raw.capacity() / 8 &&
           raw.capacity() > kMinRead + kCarry)
    shrink_keeping(raw);
  lease_->stream.tcp().expires_never();  // deadline_ times the reads
}

UpstreamBody::~UpstreamBody() { stop(); }

void UpstreamBody::stop() {
  deadline_->socket = nullptr;
  deadline_->timer.cancel();
}

std::size_t UpstreamBody::room() const { return std::max(kMinRead, lease_->buffer.capacity()); }

bool UpstreamBody::settle() {
  beast::flat_buffer& raw = lease_->buffer;
  if (quiet_reads_ < kQuietReads || raw.size() > kCarry) return false;
  quiet_reads_ = 0;
  shrink_keeping(raw);
  return true;
}

bool UpstreamBody::begin(Clock::time_point deadline, std::span<char> space, beast::error_code& ec,
                         net::mutable_buffer& into, bool one_chunk) {
  ReadDeadline& d = *deadline_;
  d.deadline = deadline;
  d.expired = false;
  d.one_chunk = one_chunk;
  if (d.deadline < d.armed) wait_for_deadline(deadline_);  // none pending, or a later one
  space_ = space;
  parser_.get().body().data = space_.data();
  parser_.get().body().size = space_.size();
  ec = parse_buffered(one_chunk);
  if (ec == http::error::need_buffer) ec = {};
  if (ec || delivered() > 0 || parser_.is_done()) return false;
  // Nothing (more) in what was buffered: read, into the free space, at
  // least kMinRead (as Beast's reads: beast::read_size) -- straight from the
  // socket (or TLS): Beast's read operation would only add a layer, and its
  // stream a timer.
  beast::flat_buffer& raw = lease_->buffer;
  read_room_ = std::max(kMinRead, raw.capacity() - raw.size());
  into = raw.prepare(read_room_);
  d.reading = true;
  return true;
}

net::awaitable<std::tuple<beast::error_code, std::size_t>> UpstreamBody::read_socket(
    net::mutable_buffer into) {
  if (auto* tls = lease_->stream.tls()) return tls->async_read_some(into, kUseTuple);
  return lease_->stream.tcp().socket().async_read_some(into, kUseTuple);
}

beast::error_code UpstreamBody::end(beast::error_code ec, std::size_t got,
                                    std::size_t other_capacity) {
  ReadDeadline& d = *deadline_;
  beast::flat_buffer& raw = lease_->buffer;
  d.reading = false;
  raw.commit(got);
  if (d.expired) ec = beast::error::timeout;  // whatever the closed socket said
  // A read that filled its room: the next gets twice as much.
  const std::size_t room = read_room_;
  if (got >= room && raw.capacity() < kMaxRead)
    raw.reserve(std::min(kMaxRead, 2 * std::max(kMinRead, raw.capacity())));
  // (What a shrink leaves -- kMinRead and the bytes kept, and a caller's
  // buffer as large -- is not shrinkable again: a quiet stream settles.)
  const bool shrinkable = raw.capacity() > kMinRead + kCarry || other_capacity > kMinRead + kCarry;
  quiet_reads_ = got < room / 4 && shrinkable ? quiet_reads_ + 1 : 0;
  if (const bool eof = ec == net::error::eof; !ec || eof) {
    ec = parse_buffered(d.one_chunk);
    // As Beast's read at the end of the connection, once what is buffered
    // gives nothing more: the end of a body read to the end of the
    // connection, or (framed and unfinished) partial_message. (A read after
    // the end ends again.)
    if (eof && !ec && delivered() == 0 && !parser_.is_done()) parser_.put_eof(ec);
  }
  if (ec == http::error::need_buffer) ec = {};
  return ec;
}

// Beast's parser (not eager) stops after each element of a chunked body: a
// chunk's header, then its data. What the buffer already holds is parsed
// here rather than by another read: until the space is full, the parser
// needs more bytes or is done -- and, one chunk at a time, until the first
// data arrived: a relay before its commit sees its first output before what
// comes after it is looked at, however the upstream's bytes were split into
// reads. (An eager parser would not do: at the end of a chunk's data it
// waits for the next chunk's header.)
beast::error_code UpstreamBody::parse_buffered(bool one_chunk) {
  beast::flat_buffer& raw = lease_->buffer;
  beast::error_code ec;
  auto& body = parser_.get().body();
  while (raw.size() > 0 && !parser_.is_done() && body.size > 0 &&
         (!one_chunk || body.size == space_.size())) {
    const std::size_t used = parser_.put(raw.data(), ec);
    raw.consume(used);
    if (ec == http::error::need_more) return {};
    if (ec || used == 0) break;
  }
  return ec;
}

net::awaitable<beast::error_code> UpstreamBody::read(Clock::time_point deadline,
                                                     std::span<char> space) {
  beast::error_code ec;
  net::mutable_buffer into;
  if (begin(deadline, space, ec, into)) {
    auto [rec, got] = co_await read_socket(into);
    ec = end(rec, got);
  }
  co_return ec;
}

net::awaitable<beast::error_code> read_whole(providers::Lease& lease, UpstreamParser& parser,
                                             std::string& body, std::size_t limit,
                                             Clock::time_point deadline) {
  UpstreamBody reads(lease, parser, UpstreamBody::Use::kWhole);
  while (!parser.is_done() && body.size() < limit) {
    // The body's own string is the space (no copy), growing with the body,
    // never past `limit`.
    const std::size_t had = body.size();
    body.resize(
        had + std::min(limit - had, std::max(reads.room(), std::min<std::size_t>(had, 64 * 1024))));
    const beast::error_code ec =
        co_await reads.read(deadline, std::span<char>(body.data() + had, body.size() - had));
    body.resize(had + reads.delivered());
    if (ec) co_return ec;
  }
  co_return beast::error_code{};
}

}  // namespace llmgate::gateway
