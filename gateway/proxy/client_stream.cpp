#include "gateway/proxy/client_stream.h"

#include <sys/socket.h>
#include <sys/uio.h>

#include <algorithm>
#include <array>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/http/empty_body.hpp>
#include <boost/beast/http/write.hpp>
#include <cerrno>
#include <charconv>
#include <utility>

namespace llmgate::gateway {
namespace {
constexpr auto kUseTuple = net::as_tuple(net::use_awaitable);

// Writes what the socket takes now, without waiting (MSG_DONTWAIT): the
// bytes written; `ec` set on an error other than "it would block".
std::size_t write_now(net::ip::tcp::socket& socket, std::span<const net::const_buffer> seq,
                      beast::error_code& ec) {
  constexpr std::size_t kBatch = 64;  // well under IOV_MAX
  std::size_t total = 0;
  while (!seq.empty()) {
    std::array<iovec, kBatch> iov;
    const std::size_t n = std::min(seq.size(), kBatch);
    std::size_t want = 0;
    for (std::size_t i = 0; i < n; ++i) {
      iov[i] = {const_cast<void*>(seq[i].data()), seq[i].size()};
      want += seq[i].size();
    }
    msghdr m{};
    m.msg_iov = iov.data();
    m.msg_iovlen = n;
    const ssize_t r = ::sendmsg(socket.native_handle(), &m, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (r < 0) {
      if (errno == EINTR) continue;
      if (errno != EAGAIN && errno != EWOULDBLOCK)
        ec.assign(errno, boost::system::system_category());
      return total;
    }
    total += static_cast<std::size_t>(r);
    if (static_cast<std::size_t>(r) < want) return total;  // the socket is full
    seq = seq.subspan(n);
  }
  return total;
}

// SO_LINGER: off (a close sends what is queued, then FIN), or on with no
// time (a close resets the connection and drops what is queued).
void set_abortive_close(net::ip::tcp::socket& socket, bool on) {
  beast::error_code ignored;
  socket.set_option(net::socket_base::linger(on, 0), ignored);
}

// The status line, the fields and the blank line, as Beast's serializer
// writes them.
void append_head(std::string& out, const http::response_header<>& h) {
  HeadLines lines(out);
  lines.start(h.version(), h.result_int(), std::string_view(h.reason().data(), h.reason().size()));
  for (const auto& f : h) {
    lines.set(std::string_view(f.name_string().data(), f.name_string().size()),
              std::string_view(f.value().data(), f.value().size()));
  }
  out.append("\r\n");
}

// What the socket takes of `bufs` now, without waiting (most writes, to a
// client that keeps up: no timer, no asynchronous operation); `bufs` becomes
// what is left, empty when all of it went.
beast::error_code send_now(net::ip::tcp::socket& socket, std::span<net::const_buffer>& bufs) {
  beast::error_code ec;
  std::size_t left = write_now(socket, bufs, ec);
  auto rest = bufs.begin();  // past what went now
  while (rest != bufs.end() && left >= rest->size()) left -= (rest++)->size();
  if (rest != bufs.end()) *rest += left;
  bufs = std::span<net::const_buffer>(rest, bufs.end());
  return ec;
}

// The rest of a write, as the socket makes room, under `timeout` -- and
// meanwhile a close resets the connection: a client that stops reading for
// the whole timeout does not keep what was queued for it in the kernel
// (nginx's reset_timedout_connection).
net::awaitable<beast::error_code> send_rest(beast::tcp_stream& client,
                                            std::span<const net::const_buffer> rest,
                                            std::chrono::milliseconds timeout) {
  set_abortive_close(client.socket(), true);
  client.expires_after(timeout);
  // A span, not a vector: the operation copies its buffer sequence, and
  // copying a vector would allocate.
  auto [ec, written] = co_await net::async_write(client, rest, kUseTuple);
  if (!ec) {
    client.expires_never();
    set_abortive_close(client.socket(), false);
  }
  co_return ec;
}
}  // namespace

void HeadLines::start(unsigned version, http::status status) {
  const beast::string_view reason = http::obsolete_reason(status);
  start(version, static_cast<unsigned>(status), std::string_view(reason.data(), reason.size()));
}

void HeadLines::start(unsigned version, unsigned code, std::string_view reason) {
  text_.append(version == 11 ? "HTTP/1.1 " : "HTTP/1.0 ");
  char digits[8];
  const auto r = std::to_chars(digits, digits + sizeof digits, code);
  text_.append(digits, r.ptr).append(" ").append(reason).append("\r\n");
}

void HeadLines::end(unsigned version, bool keep_alive, std::optional<std::size_t> content_length) {
  if (content_length) {
    char n[24];
    const auto r = std::to_chars(n, n + sizeof n, *content_length);
    text_.append("Content-Length: ").append(n, r.ptr).append("\r\n");
  } else if (version == 11) {
    text_.append("Transfer-Encoding: chunked\r\n");
  }  // else HTTP/1.0: the body ends with the connection
  // HTTP/1.1 keeps the connection unless told; HTTP/1.0 closes it unless told.
  if (version == 11 && !keep_alive) text_.append("Connection: close\r\n");
  if (version != 11 && keep_alive) text_.append("Connection: keep-alive\r\n");
  text_.append("\r\n");
}

beast::error_code GatheredWrite::send_now(net::ip::tcp::socket& socket) {
  return gateway::send_now(socket, rest);
}

net::awaitable<bool> write_whole_rest(beast::tcp_stream& client, GatheredWrite& w,
                                      std::chrono::milliseconds timeout) {
  const beast::error_code ec = co_await send_rest(client, w.rest, timeout);
  client.expires_never();
  co_return !ec;
}

std::optional<bool> write_whole_now(beast::tcp_stream& client, GatheredWrite& w) {
  const beast::error_code ec = w.send_now(client.socket());
  if (!ec && !w.done()) return std::nullopt;
  // No deadline outlives the answer (an earlier phase's may still be set).
  client.expires_never();
  return !ec;
}

net::awaitable<bool> write_whole(beast::tcp_stream& client, std::string_view head,
                                 std::string_view body, std::chrono::milliseconds timeout) {
  GatheredWrite w(head, body);
  if (const std::optional<bool> done = write_whole_now(client, w)) co_return *done;
  co_return co_await write_whole_rest(client, w, timeout);
}

net::awaitable<bool> write_response(beast::tcp_stream& client, Response& response,
                                    std::chrono::milliseconds timeout) {
  if (response.chunked()) {
    // Not written by the handlers (a whole body has a length); Beast frames it.
    client.expires_after(timeout);
    auto [ec, n] = co_await http::async_write(client, response, kUseTuple);
    client.expires_never();
    co_return !ec;
  }
  std::string head;
  head.reserve(256);
  append_head(head, response.base());
  co_return co_await write_whole(client, head, response.body(), timeout);
}

HeadLines ClientStream::start_head(http::status status) {
  head_.clear();
  head_.reserve(512);  // one allocation, freed once the head is sent
  HeadLines h(head_);
  h.start(rc_.version, status);
  return h;
}

void ClientStream::end_head(HeadLines& h) {
  h.end(rc_.version, chunked() && rc_.keep_alive, std::nullopt);
  head_pending_ = true;
}

void ClientStream::set_head(http::response<http::empty_body>& res) {
  res.chunked(chunked());
  res.keep_alive(chunked() && rc_.keep_alive);
  head_.clear();
  head_.reserve(512);  // one allocation, freed once the head is sent
  append_head(head_, res.base());
  head_pending_ = true;
}

bool ClientStream::write_now(std::span<const std::string_view> body, bool last,
                             std::string_view trailer_lines) {
  std::size_t n = 0;
  for (const auto& b : body) n += b.size();
  bufs_.clear();
  if (head_pending_) bufs_.emplace_back(head_.data(), head_.size());
  if (n > 0 && chunked()) {
    auto r = std::to_chars(size_line_.data(), size_line_.data() + 16, n, 16);
    r.ptr[0] = '\r';
    r.ptr[1] = '\n';
    bufs_.emplace_back(size_line_.data(), static_cast<std::size_t>(r.ptr + 2 - size_line_.data()));
  }
  for (const auto& b : body) {
    if (!b.empty()) bufs_.emplace_back(b.data(), b.size());
  }
  static constexpr std::string_view kCrlf = "\r\n", kLast = "0\r\n";
  if (n > 0 && chunked()) bufs_.emplace_back(kCrlf.data(), kCrlf.size());
  if (last && chunked()) {
    bufs_.emplace_back(kLast.data(), kLast.size());
    if (!trailer_lines.empty()) bufs_.emplace_back(trailer_lines.data(), trailer_lines.size());
    bufs_.emplace_back(kCrlf.data(), kCrlf.size());
  }
  rest_ = bufs_.size();
  if (bufs_.empty()) return true;
  head_sending_ = head_pending_;
  head_pending_ = false;
  std::span<net::const_buffer> rest(bufs_.data(), bufs_.size());
  if (send_now(client_.socket(), rest)) {
    failed_ = true;
    return true;
  }
  rest_ = static_cast<std::size_t>(rest.data() - bufs_.data());
  if (!rest.empty()) return false;
  sent();
  return true;
}

net::awaitable<bool> ClientStream::write_rest() {
  const std::span<const net::const_buffer> rest(bufs_.data() + rest_, bufs_.size() - rest_);
  rest_ = bufs_.size();
  const beast::error_code ec = co_await send_rest(client_, rest, timeout_);
  if (ec) {
    failed_ = true;
    co_return false;
  }
  sent();
  co_return true;
}

void ClientStream::sent() {
  // The head is sent once: its memory goes, not at the end of the stream.
  if (head_sending_) std::string().swap(head_);
  head_sending_ = false;
}

net::awaitable<bool> ClientStream::write(std::span<const std::string_view> body, bool last,
                                         std::string_view trailer_lines) {
  if (write_now(body, last, trailer_lines)) co_return !failed_;
  co_return co_await write_rest();
}

struct RequestWatches::Entry {
  net::cancellation_signal stop;               // the socket wait's (per-operation)
  net::cancellation_signal* cancel = nullptr;  // the session's; null: the entry is free
  net::ip::tcp::socket* socket = nullptr;
  Interrupt why = Interrupt::kNone;
  std::uint32_t generation = 0;  // the upper half of an id: a stale id finds nothing
  std::uint64_t added = 0;       // the tick it was added in
  bool armed = false;            // its watch has started (tick() leaves it alone)
  bool waiting = false;          // a wait for readability is pending
};

// The end of a wait for the client's socket to be readable. It names its
// request by id, so it is harmless after the request (and the entry's next
// use): it finds nothing then.
struct RequestWatches::OnReadable {
  RequestWatches* watches;
  std::uint64_t id;

  void operator()(boost::system::error_code ec) const {
    Entry* e = watches->find(id);
    if (e == nullptr) return;  // the request is over
    e->waiting = false;
    if (!ec) {
      char byte;
      const ssize_t n = ::recv(e->socket->native_handle(), &byte, 1, MSG_PEEK | MSG_DONTWAIT);
      // The client sent more (pipelining): nothing to learn until we answer.
      if (n > 0) return;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
        watches->arm(*e, id);
        return;
      }
    }
    interrupt(*e, Interrupt::kClientGone);  // end of stream, or the socket failed
  }
};

RequestWatches::RequestWatches() = default;
RequestWatches::~RequestWatches() = default;

RequestWatches::Entry& RequestWatches::add(net::cancellation_signal& cancel,
                                           net::ip::tcp::socket& socket, std::uint64_t& id) {
  std::uint32_t index;
  if (!free_.empty()) {
    index = free_.back();
    free_.pop_back();
  } else {
    index = static_cast<std::uint32_t>(entries_.size());
    entries_.push_back(std::make_unique<Entry>());
  }
  Entry& e = *entries_[index];
  e.cancel = &cancel;
  e.socket = &socket;
  e.why = Interrupt::kNone;
  e.added = ticks_;
  e.armed = false;
  id = std::uint64_t{e.generation} << 32 | index;
  return e;
}

RequestWatches::Entry* RequestWatches::find(std::uint64_t id) {
  const auto index = static_cast<std::uint32_t>(id);
  if (index >= entries_.size()) return nullptr;
  Entry& e = *entries_[index];
  return e.cancel != nullptr && e.generation == static_cast<std::uint32_t>(id >> 32) ? &e : nullptr;
}

void RequestWatches::remove(std::uint64_t id) {
  Entry* e = find(id);
  if (e == nullptr) return;
  e->cancel = nullptr;
  e->socket = nullptr;
  ++e->generation;
  // The pending wait ends with operation_aborted and finds nothing.
  if (std::exchange(e->waiting, false)) e->stop.emit(net::cancellation_type::all);
  free_.push_back(static_cast<std::uint32_t>(id));
}

void RequestWatches::arm(Entry& e, std::uint64_t id) {
  e.armed = true;
  e.waiting = true;
  e.socket->async_wait(net::ip::tcp::socket::wait_read,
                       net::bind_cancellation_slot(e.stop.slot(), OnReadable{this, id}));
}

void RequestWatches::interrupt(Entry& e, Interrupt why) {
  if (e.why != Interrupt::kNone) return;
  e.why = why;
  e.cancel->emit(net::cancellation_type::terminal);
}

void RequestWatches::tick() {
  ++ticks_;
  for (std::size_t i = 0; i < entries_.size(); ++i) {
    Entry& e = *entries_[i];
    // (Running since before the previous tick: at least kTick.)
    if (e.cancel == nullptr || e.armed || e.why != Interrupt::kNone || ticks_ - e.added < 2)
      continue;
    arm(e, std::uint64_t{e.generation} << 32 | i);
  }
}

void RequestWatches::end_all() {
  ended_ = true;
  for (std::size_t i = 0; i < entries_.size(); ++i) {
    if (entries_[i]->cancel != nullptr) interrupt(*entries_[i], Interrupt::kShutdown);
  }
}

net::awaitable<Watched> run_watched(Worker& worker, beast::tcp_stream& client,
                                    net::cancellation_signal& session_cancel,
                                    net::awaitable<bool> exchange) {
  RequestWatches& watches = *worker.watches;
  if (watches.ended_) co_return Watched{false, Interrupt::kShutdown};
  std::uint64_t id = 0;
  RequestWatches::Entry& entry = watches.add(session_cancel, client.socket(), id);
  // Removed on every way out, the frame's destruction included.
  struct Remove {
    RequestWatches& watches;
    std::uint64_t id;
    ~Remove() { watches.remove(id); }
  } remove{watches, id};
  // (Armed by the worker's tick once it has run for kTick.)
  Watched out;
  try {
    out.result = co_await std::move(exchange);
  } catch (...) {
    // An exchange cancelled mid-operation may throw (operation_aborted).
    if (entry.why == Interrupt::kNone) throw;
  }
  out.why = entry.why;
  if (out.why != Interrupt::kNone) {
    out.result = false;
    // The session goes on (an answer for the drain, a lingering close): its
    // waits from here on are not cancelled.
    co_await net::this_coro::reset_cancellation_state();
  }
  co_return out;
}

}  // namespace llmgate::gateway
