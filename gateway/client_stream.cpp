#include "gateway/client_stream.h"

#include <sys/socket.h>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/http/empty_body.hpp>
#include <cerrno>
#include <charconv>

namespace llmgate::gateway {
namespace {
using Clock = std::chrono::steady_clock;
constexpr auto kUseTuple = net::as_tuple(net::use_awaitable);
}  // namespace

void ClientStream::set_head(http::response<http::empty_body>& res) {
  res.chunked(chunked());
  res.keep_alive(chunked() && rc_.keep_alive);
  head_.clear();
  head_.reserve(512);  // one allocation, freed once the head is sent
  head_.append(res.version() == 11 ? "HTTP/1.1 " : "HTTP/1.0 ");
  head_.append(std::to_string(res.result_int())).append(" ").append(res.reason()).append("\r\n");
  for (const auto& f : res)
    head_.append(f.name_string()).append(": ").append(f.value()).append("\r\n");
  head_.append("\r\n");
  head_pending_ = true;
}

net::awaitable<bool> ClientStream::write(std::span<const std::string_view> body, bool last,
                                         std::string_view trailer_lines) {
  std::size_t n = 0;
  for (const auto& b : body) n += b.size();
  bufs_.clear();
  if (bufs_.capacity() == 0) bufs_.reserve(8);  // once, not 1, 2, 4, 8
  if (head_pending_) bufs_.emplace_back(head_.data(), head_.size());
  char size_line[24];
  if (n > 0 && chunked()) {
    auto r = std::to_chars(size_line, size_line + 16, n, 16);
    r.ptr[0] = '\r';
    r.ptr[1] = '\n';
    bufs_.emplace_back(size_line, static_cast<std::size_t>(r.ptr + 2 - size_line));
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
  if (bufs_.empty()) co_return true;
  const bool with_head = head_pending_;
  head_pending_ = false;
  client_.expires_after(timeout_);
  // A span, not the vector: the operation copies its buffer sequence, and
  // copying a vector would allocate on every write.
  const std::span<const net::const_buffer> seq(bufs_);
  auto [ec, written] = co_await net::async_write(client_, seq, kUseTuple);
  client_.expires_never();
  // The head is sent once: its memory goes, not at the end of the stream.
  if (with_head) std::string().swap(head_);
  if (ec) failed_ = true;
  co_return !ec;
}

net::awaitable<void> watch_client_disconnect(beast::tcp_stream& client) {
  auto& sock = client.socket();
  for (;;) {
    auto [ec] = co_await sock.async_wait(net::ip::tcp::socket::wait_read, kUseTuple);
    if (ec) co_return;
    char byte;
    ssize_t n = ::recv(sock.native_handle(), &byte, 1, MSG_PEEK | MSG_DONTWAIT);
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) co_return;
    if (n > 0) {
      // The client sent more (pipelining): nothing to learn until we answer.
      net::steady_timer forever(client.get_executor(), Clock::time_point::max());
      co_await forever.async_wait(kUseTuple);
      co_return;
    }
  }
}

net::awaitable<void> wait_for_shutdown(Worker& worker) {
  if (worker.shutdown == nullptr) {
    net::steady_timer forever(co_await net::this_coro::executor, Clock::time_point::max());
    co_await forever.async_wait(kUseTuple);
    co_return;
  }
  co_await worker.shutdown->async_wait(kUseTuple);
}

}  // namespace llmgate::gateway
