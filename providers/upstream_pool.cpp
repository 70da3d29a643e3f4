#include "providers/upstream_pool.h"

#include <sys/socket.h>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <cerrno>

#include "providers/tls_client.h"

namespace llmgate::providers {
namespace {

constexpr auto kUseTuple = net::as_tuple(net::use_awaitable);

// An idle keep-alive connection is healthy if the peer has neither closed it
// nor sent anything since the last response (unsolicited bytes or a TLS
// close_notify both mean it cannot be reused). One idle for less than
// kUnpeekedIdle is taken without asking the kernel (a syscall a request, on
// a busy provider's connections): no server ends a connection that young
// for idleness, and a peer that closed it anyway is found by the
// exchange's stale-connection retry (gateway/proxy/upstream_exchange.cpp),
// the only way connections are taken from the pool. What the peek also
// caught and the retry does not: bytes a peer sent unasked within those
// 100 ms (a 408 before closing, stray bytes after a misframed body) are
// read as the next answer's start -- a server's idle-request timeout is
// seconds, and a misframed body already fails the answer it ends.
constexpr std::chrono::milliseconds kUnpeekedIdle{100};

bool idle_connection_is_healthy(UpstreamConnection& c, Clock::duration idle) {
  auto& sock = c.stream.tcp().socket();
  if (!sock.is_open() || c.buffer.size() != 0) return false;
  if (idle < kUnpeekedIdle) return true;
  char byte;
  ssize_t n = ::recv(sock.native_handle(), &byte, 1, MSG_PEEK | MSG_DONTWAIT);
  return n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
}

}  // namespace

Lease& Lease::operator=(Lease&& o) noexcept {
  if (this != &o) {
    close();
    pool_ = std::exchange(o.pool_, nullptr);
    conn_ = std::move(o.conn_);
    reused_ = o.reused_;
  }
  return *this;
}

void Lease::give_back() {
  if (!conn_) return;
  ++conn_->requests;
  pool_->on_returned(std::move(conn_));
}

void Lease::close() {
  if (!conn_) return;
  beast::error_code ignored;
  conn_->stream.tcp().socket().shutdown(net::ip::tcp::socket::shutdown_both, ignored);
  conn_->stream.tcp().close();
  conn_.reset();
  pool_->on_closed();
}

ConnectionPool::ConnectionPool(net::any_io_executor ex, const config::Provider& provider,
                               std::shared_ptr<ssl::context> tls)
    : ex_(ex),
      provider_(provider),
      tls_(std::move(tls)),
      reap_timer_(std::make_unique<net::steady_timer>(ex)) {}

ConnectionPool::~ConnectionPool() {
  shutdown();
  alive_.reset();
}

void ConnectionPool::shutdown() {
  shut_down_ = true;
  open_ -= idle_.size();
  idle_.clear();
  reap_timer_.reset();  // cancels a pending reap (its handler sees the error)
  for (auto* w : waiters_) w->cancel();
}

void ConnectionPool::schedule_reap() {
  if (idle_.empty() || reap_scheduled_ || shut_down_) return;
  reap_scheduled_ = true;
  reap_timer_->expires_at(idle_.front()->idle_since + provider_.pool.idle_timeout);
  reap_timer_->async_wait([this, alive = std::weak_ptr<int>(alive_)](const beast::error_code& ec) {
    if (ec || alive.expired()) return;  // cancelled, or the pool is gone
    reap_scheduled_ = false;
    reap();
  });
}

void ConnectionPool::reap() {
  const auto now = Clock::now();
  while (!idle_.empty() && now - idle_.front()->idle_since >= provider_.pool.idle_timeout) {
    idle_.pop_front();  // closes it
    --open_;
  }
  schedule_reap();
}

void ConnectionPool::on_closed() {
  --open_;
  wake_one();
}

void ConnectionPool::retire() {
  retired_ = true;
  open_ -= idle_.size();
  idle_.clear();
  if (reap_timer_) reap_timer_->cancel();
}

void ConnectionPool::on_returned(std::unique_ptr<UpstreamConnection> c) {
  if (shut_down_ || retired_) {
    --open_;
    return;
  }
  c->idle_since = Clock::now();
  idle_.push_back(std::move(c));
  schedule_reap();
  wake_one();
}

void ConnectionPool::wake_one() {
  if (!waiters_.empty()) {
    waiters_.front()->cancel();
    waiters_.pop_front();
  }
}

net::awaitable<AcquireResult> ConnectionPool::acquire(Clock::time_point deadline,
                                                      bool allow_reuse) {
  for (;;) {
    if (allow_reuse) {
      if (Lease idle = take_idle()) co_return AcquireResult{std::move(idle), {}};
    }
    if (shut_down_) co_return AcquireResult{Lease(), "gateway is shutting down"};
    if (open_ < provider_.pool.max_connections) co_return co_await connect(deadline);

    // Full: wait for a lease to come back or close, or for the deadline.
    net::steady_timer timer(ex_, deadline);
    waiters_.push_back(&timer);
    auto [ec] = co_await timer.async_wait(kUseTuple);
    std::erase(waiters_, &timer);
    if (!ec) {
      co_return AcquireResult{Lease(), "connection pool for provider \"" + provider_.name +
                                           "\" is full (" +
                                           std::to_string(provider_.pool.max_connections) +
                                           " connections) until the connect deadline"};
    }
  }
}

Lease ConnectionPool::take_idle() {
  // Most recently used first: it is the least likely to have been closed.
  while (!idle_.empty()) {
    std::unique_ptr<UpstreamConnection> c = std::move(idle_.back());
    idle_.pop_back();
    const Clock::duration idle = Clock::now() - c->idle_since;
    if (idle < provider_.pool.idle_timeout && idle_connection_is_healthy(*c, idle))
      return Lease(this, std::move(c), /*reused=*/true);
    --open_;  // c closes as it goes out of scope
  }
  return Lease();
}

net::awaitable<bool> ConnectionPool::wait_for_room(Clock::time_point deadline) {
  while (!has_room() && !shut_down_) {
    net::steady_timer timer(ex_, deadline);
    waiters_.push_back(&timer);
    auto [ec] = co_await timer.async_wait(kUseTuple);
    std::erase(waiters_, &timer);
    if (!ec) co_return false;  // the deadline, not a wake-up
  }
  co_return true;
}

net::awaitable<AcquireResult> ConnectionPool::connect(Clock::time_point deadline) {
  ++open_;  // reserve the slot across the awaits below
  auto fail = [this](std::string what) {
    on_closed();
    return AcquireResult{Lease(), std::move(what)};
  };
  const auto& url = provider_.base_url;
  auto c = std::make_unique<UpstreamConnection>(url.tls ? UpstreamTransport(ex_, *tls_)
                                                        : UpstreamTransport(ex_));

  net::ip::tcp::resolver resolver(ex_);
  net::steady_timer resolve_deadline(ex_, deadline);
  // The resolver has no timeout of its own; cancel it from a timer.
  resolve_deadline.async_wait([&resolver](beast::error_code ec) {
    if (!ec) resolver.cancel();
  });
  auto [rec, endpoints] =
      co_await resolver.async_resolve(url.host, std::to_string(url.port), kUseTuple);
  resolve_deadline.cancel();
  if (rec) co_return fail("cannot resolve " + url.host + ": " + rec.message());

  auto& tcp = c->stream.tcp();
  tcp.expires_at(deadline);
  auto [cec, ep] = co_await tcp.async_connect(endpoints, kUseTuple);
  if (cec) {
    co_return fail("cannot connect to " + url.host + ":" + std::to_string(url.port) + ": " +
                   (cec == beast::error::timeout ? std::string("connect timeout") : cec.message()));
  }
  tcp.socket().set_option(net::ip::tcp::no_delay(true));

  if (auto* tls = c->stream.tls()) {
    if (!prepare_tls_client(*tls, provider_.tls, url.host)) {
      co_return fail("cannot set TLS SNI to " + tls_server_name(provider_.tls, url.host));
    }
    auto [hec] = co_await tls->async_handshake(ssl::stream_base::client, kUseTuple);
    if (hec) {
      co_return fail("TLS handshake with " + url.host + " failed: " +
                     (hec == beast::error::timeout ? std::string("timeout") : hec.message()));
    }
  }
  tcp.expires_never();
  co_return AcquireResult{Lease(this, std::move(c), /*reused=*/false), {}};
}

ConnectionPool& UpstreamPools::get(const config::Provider& provider, const TlsContexts& tls) {
  for (const auto& [p, pool] : matched_) {
    if (p == &provider) return *pool;
  }
  const config::Provider* now = current_ ? current_->find_provider(provider.name) : nullptr;
  auto [first, last] = pools_.equal_range(provider.name);
  ConnectionPool* retired = nullptr;
  for (auto it = first; it != last; ++it) {
    if (!(it->second->provider() == provider)) continue;
    if (!it->second->retired()) {
      if (now == &provider) matched_.emplace_back(&provider, it->second.get());
      return *it->second;
    }
    retired = it->second.get();
  }
  // No live pool for the provider as the caller's config has it. If that is
  // not the current config's provider, the request started before a reload
  // changed it: it gets a retired pool, so nothing outlives such requests.
  const bool stale = current_ && (now == nullptr || !(*now == provider));
  if (stale && retired) return *retired;
  std::shared_ptr<ssl::context> ctx;
  if (auto it = tls.find(provider.name); it != tls.end()) ctx = it->second;
  auto& pool =
      pools_
          .emplace(provider.name, std::make_unique<ConnectionPool>(ex_, provider, std::move(ctx)))
          ->second;
  if (stale) pool->retire();
  return *pool;
}

void UpstreamPools::retain(std::shared_ptr<const config::Config> cfg) {
  matched_.clear();  // before the old config (their providers) may go
  current_ = std::move(cfg);
  for (auto it = pools_.begin(); it != pools_.end();) {
    auto& pool = *it->second;
    const config::Provider* now = current_->find_provider(it->first);
    if (!pool.retired() && (now == nullptr || !(*now == pool.provider()))) pool.retire();
    if (pool.retired() && pool.unused()) {
      it = pools_.erase(it);
    } else {
      ++it;
    }
  }
}

void UpstreamPools::shutdown() {
  for (auto& [name, pool] : pools_) pool->shutdown();
}

}  // namespace llmgate::providers
