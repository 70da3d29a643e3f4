// Upstream connections: plain TCP or TLS, pooled per provider per worker.
//
// Includes Beast and Asio: include this only from .cpp files.
//
// Threading: a ConnectionPool belongs to one worker thread (one io_context) and
// is never touched from another, so it has no locks. The ssl::context is built
// once per provider and shared by all workers (OpenSSL allows concurrent use of
// a configured SSL_CTX).
#pragma once

#include <boost/asio/awaitable.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <chrono>
#include <deque>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "config/config.h"

namespace llmgate::providers {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace ssl = boost::asio::ssl;
using Clock = std::chrono::steady_clock;

// A stream that is either plain TCP or TLS over TCP; satisfies Beast's
// AsyncReadStream/AsyncWriteStream so http::async_read/write work on it.
class UpstreamTransport {
 public:
  using executor_type = net::any_io_executor;

  explicit UpstreamTransport(net::any_io_executor ex)
      : tcp_(std::make_unique<beast::tcp_stream>(ex)) {}
  UpstreamTransport(net::any_io_executor ex, ssl::context& ctx)
      : tls_(std::make_unique<ssl::stream<beast::tcp_stream>>(ex, ctx)) {}

  executor_type get_executor() { return tcp().get_executor(); }
  beast::tcp_stream& tcp() { return tls_ ? tls_->next_layer() : *tcp_; }
  ssl::stream<beast::tcp_stream>* tls() { return tls_.get(); }

  template <class MutableBuffers, class Token>
  auto async_read_some(const MutableBuffers& b, Token&& token) {
    if (tls_) return tls_->async_read_some(b, std::forward<Token>(token));
    return tcp_->async_read_some(b, std::forward<Token>(token));
  }
  template <class ConstBuffers, class Token>
  auto async_write_some(const ConstBuffers& b, Token&& token) {
    if (tls_) return tls_->async_write_some(b, std::forward<Token>(token));
    return tcp_->async_write_some(b, std::forward<Token>(token));
  }

 private:
  std::unique_ptr<beast::tcp_stream> tcp_;
  std::unique_ptr<ssl::stream<beast::tcp_stream>> tls_;
};

struct UpstreamConnection {
  // Beast reads at most the buffer's free capacity (at least 512 bytes) per
  // call: a buffer that starts empty stays at 512 and a 6 KB response takes
  // a dozen reads. 16 KiB before each response head (Envoy reads 16 KiB at
  // a time too) takes a fast answer -- a whole short stream, most
  // non-streamed bodies -- in the head's read, relayed in one write: with
  // 4 KiB a 6 KB stream took two reads and two client writes, a quarter of
  // the CPU of a closed loop of such requests (bench/README.md, Transport
  // II hot path 9). A stream gives most of it back at once
  // (gateway/proxy/upstream_body.cpp); an idle pooled connection keeps it.
  static constexpr std::size_t kReadBuffer = 16384;
  explicit UpstreamConnection(UpstreamTransport s) : stream(std::move(s)) {}
  void reserve_for_head() {
    if (buffer.capacity() < kReadBuffer) buffer.reserve(kReadBuffer);
  }
  UpstreamTransport stream;
  beast::flat_buffer buffer;  // bytes read past the end of a response
  Clock::time_point idle_since{};
  std::uint64_t requests = 0;  // responses completed on this connection
};

class ConnectionPool;

// Exclusive use of one connection. Destroying a lease closes the connection;
// give_back() returns it to the pool for keep-alive reuse.
class Lease {
 public:
  Lease() = default;
  Lease(ConnectionPool* pool, std::unique_ptr<UpstreamConnection> c, bool reused)
      : pool_(pool), conn_(std::move(c)), reused_(reused) {}
  Lease(Lease&& o) noexcept { *this = std::move(o); }
  Lease& operator=(Lease&& o) noexcept;
  ~Lease() { close(); }

  explicit operator bool() const { return conn_ != nullptr; }
  UpstreamConnection& operator*() { return *conn_; }
  UpstreamConnection* operator->() { return conn_.get(); }
  bool reused() const { return reused_; }
  void give_back();  // the response was read to its end and the peer keeps alive
  void close();      // drop the connection (idempotent)

 private:
  ConnectionPool* pool_ = nullptr;
  std::unique_ptr<UpstreamConnection> conn_;
  bool reused_ = false;
};

struct AcquireResult {
  Lease lease;
  std::string error;  // set when lease is empty
};

class ConnectionPool {
 public:
  ConnectionPool(net::any_io_executor ex, const config::Provider& provider,
                 std::shared_ptr<ssl::context> tls);
  ~ConnectionPool();

  // A pooled idle connection if a healthy one exists, else a new one (DNS,
  // TCP, TLS) — waiting for a free slot when the pool is full. Never throws
  // for network failures; `deadline` bounds the whole operation.
  net::awaitable<AcquireResult> acquire(Clock::time_point deadline, bool allow_reuse = true);
  // The first step of acquire(), which needs no coroutine: a pooled idle
  // connection if a healthy one exists (most requests), else an empty lease.
  Lease take_idle();

  // Waits until acquire() would not have to wait for a slot (an idle
  // connection, or room for a new one), or `deadline`. False on the
  // deadline: the pool is saturated locally — a fact about this gateway,
  // not about the provider. Nothing is taken: a caller that then calls
  // acquire() without suspending in between gets the slot.
  net::awaitable<bool> wait_for_room(Clock::time_point deadline);
  bool has_room() const { return !idle_.empty() || open_ < provider_.pool.max_connections; }

  std::size_t open_connections() const { return open_; }
  std::size_t idle_connections() const { return idle_.size(); }
  const config::Provider& provider() const { return provider_; }
  void shutdown();  // close idle connections; leases closed later are not pooled
  // The provider's config changed (a reload): close idle connections and pool
  // no more, but still connect for requests that started on the old config.
  void retire();
  bool retired() const { return retired_; }
  // Retired with nothing open or waiting: safe to destroy.
  bool unused() const { return open_ == 0 && waiters_.empty(); }

 private:
  friend class Lease;
  net::awaitable<AcquireResult> connect(Clock::time_point deadline);
  void on_closed();
  void on_returned(std::unique_ptr<UpstreamConnection> c);
  void wake_one();

  // Closes idle connections once they have been idle for pool.idle_timeout
  // (the oldest are at the front of idle_), so none lingers, e.g. half-closed
  // by the upstream. One timer, armed for the oldest idle connection.
  void schedule_reap();
  void reap();

  net::any_io_executor ex_;
  const config::Provider provider_;  // a copy: the pool may outlive the config it came from
  std::shared_ptr<ssl::context> tls_;
  // Owned so shutdown() can destroy it: the pool outlives its io_context
  // (leases held by coroutine frames come back as the io_context is torn
  // down), but a timer must not outlive the io_context's services.
  std::unique_ptr<net::steady_timer> reap_timer_;
  bool reap_scheduled_ = false;
  // Expires with the pool: a reap completion queued before the pool was
  // destroyed sees it and does nothing.
  std::shared_ptr<int> alive_ = std::make_shared<int>(0);
  std::deque<std::unique_ptr<UpstreamConnection>> idle_;  // most recently used at the back
  std::deque<net::steady_timer*> waiters_;
  std::size_t open_ = 0;  // idle + leased
  bool shut_down_ = false;
  bool retired_ = false;
};

// TLS contexts of a config's providers, by provider name (plain ones absent).
using TlsContexts = std::map<std::string, std::shared_ptr<ssl::context>>;

// All pools of one worker. A pool serves one provider *as configured*: after a
// hot reload changes a provider (its URL, key, TLS, limits...), requests on
// the new config get a new pool, and the old one is retired — it keeps
// serving requests that started on the old config, pools nothing more, and is
// freed at a later reload once its last connection has closed.
class UpstreamPools {
 public:
  explicit UpstreamPools(net::any_io_executor ex) : ex_(std::move(ex)) {}
  // `tls` is the provider's context in the caller's config snapshot.
  ConnectionPool& get(const config::Provider& provider, const TlsContexts& tls);
  // `cfg` is now the current config (at start-up, and on each reload):
  // retires the pools of providers that are not in it as configured, and
  // frees retired pools with nothing open.
  void retain(std::shared_ptr<const config::Config> cfg);
  void shutdown();
  std::size_t pool_count() const { return pools_.size(); }

 private:
  net::any_io_executor ex_;
  std::shared_ptr<const config::Config> current_;
  std::multimap<std::string, std::unique_ptr<ConnectionPool>> pools_;  // by provider name
  // Providers of the current config (current_ keeps them where they are)
  // already matched to their live pool: a request's get() is then a pointer
  // comparison, not a comparison of the whole provider. Cleared by retain().
  std::vector<std::pair<const config::Provider*, ConnectionPool*>> matched_;
};

}  // namespace llmgate::providers
