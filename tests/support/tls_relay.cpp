#include "tests/support/tls_relay.h"

#include <atomic>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <cstdlib>
#include <mutex>
#include <thread>

namespace llmgate::testing {

namespace net = boost::asio;
namespace ssl = boost::asio::ssl;
using tcp = net::ip::tcp;
constexpr auto kTuple = net::as_tuple(net::use_awaitable);

bool make_self_signed_cert(const std::string& dir, const std::string& dns_name,
                           std::string& cert_file, std::string& key_file, const std::string& san) {
  cert_file = dir + "/cert.pem";
  key_file = dir + "/key.pem";
  std::string cmd = "openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=" + dns_name +
                    " -addext subjectAltName=" + (san.empty() ? "DNS:" + dns_name : san) +
                    " -keyout " + key_file + " -out " + cert_file + " >/dev/null 2>&1";
  return std::system(cmd.c_str()) == 0;
}

struct TlsRelay::Impl {
  net::io_context io{1};
  ssl::context ctx{ssl::context::tls_server};
  tcp::acceptor acceptor{io};
  std::uint16_t target_port;
  std::thread thread;
  mutable std::mutex mu;
  std::string sni;                     // mu
  std::atomic<bool> drop_next{false};  // see TlsRelay::drop_next_reused_request
  std::atomic<int> dropped{0};

  template <class From, class To>
  // `relay`: the gateway-to-upstream direction's, which may drop a request.
  static net::awaitable<void> pipe(From& from, To& to, Impl* relay = nullptr) {
    char buf[8192];
    for (bool first = true;; first = false) {
      auto [ec, n] = co_await from.async_read_some(net::buffer(buf), kTuple);
      if (ec) co_return;
      // A later read on a connection already used: the "provider" closes it
      // now, TCP only (no close_notify), as a server ending an idle
      // keep-alive connection just as a request arrives.
      if (relay && !first && relay->drop_next.exchange(false)) {
        ++relay->dropped;
        boost::system::error_code ignored;
        from.lowest_layer().close(ignored);
        co_return;
      }
      auto [wec, wn] = co_await net::async_write(to, net::buffer(buf, n), kTuple);
      if (wec) co_return;
    }
  }

  net::awaitable<void> serve(tcp::socket client) {
    auto tls = std::make_shared<ssl::stream<tcp::socket>>(std::move(client), ctx);
    auto [hec] = co_await tls->async_handshake(ssl::stream_base::server, kTuple);
    {
      const char* name = SSL_get_servername(tls->native_handle(), TLSEXT_NAMETYPE_host_name);
      std::lock_guard lock(mu);
      sni = name ? name : "";
    }
    if (hec) co_return;  // the gateway refused our certificate: that is the test
    auto upstream = std::make_shared<tcp::socket>(io);
    auto [cec] = co_await upstream->async_connect(
        tcp::endpoint(net::ip::make_address("127.0.0.1"), target_port), kTuple);
    if (cec) co_return;
    // Each direction ends the other when it ends.
    net::co_spawn(
        io,
        [tls, upstream]() -> net::awaitable<void> {
          co_await pipe(*upstream, *tls);
          boost::system::error_code ignored;
          tls->next_layer().close(ignored);
        },
        net::detached);
    co_await pipe(*tls, *upstream, this);
    boost::system::error_code ignored;
    upstream->close(ignored);
  }

  net::awaitable<void> accept_loop() {
    for (;;) {
      auto [ec, s] = co_await acceptor.async_accept(kTuple);
      if (ec) co_return;
      net::co_spawn(io, serve(std::move(s)), net::detached);
    }
  }
};

TlsRelay::TlsRelay(const std::string& cert_file, const std::string& key_file,
                   std::uint16_t target_port)
    : impl_(std::make_unique<Impl>()) {
  impl_->ctx.use_certificate_chain_file(cert_file);
  impl_->ctx.use_private_key_file(key_file, ssl::context::pem);
  impl_->target_port = target_port;
}

TlsRelay::~TlsRelay() {
  impl_->io.stop();
  if (impl_->thread.joinable()) impl_->thread.join();
}

void TlsRelay::drop_next_reused_request() { impl_->drop_next = true; }

int TlsRelay::dropped() const { return impl_->dropped.load(); }

std::string TlsRelay::last_sni() const {
  std::lock_guard lock(impl_->mu);
  return impl_->sni;
}

std::uint16_t TlsRelay::start() {
  tcp::endpoint ep(net::ip::make_address("127.0.0.1"), 0);
  impl_->acceptor.open(ep.protocol());
  impl_->acceptor.bind(ep);
  impl_->acceptor.listen();
  std::uint16_t port = impl_->acceptor.local_endpoint().port();
  net::co_spawn(impl_->io, impl_->accept_loop(), net::detached);
  impl_->thread = std::thread([this] { impl_->io.run(); });
  return port;
}

}  // namespace llmgate::testing
