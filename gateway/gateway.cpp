#include "gateway/gateway.h"

#include <atomic>
#include <chrono>
#include <thread>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/http.hpp>
#include <nlohmann/json.hpp>

#include "gateway/admin_routes.h"
#include "gateway/headers.h"
#include "gateway/log.h"
#include "gateway/worker.h"

namespace llmgate::gateway {
namespace {

using tcp = net::ip::tcp;
constexpr auto kUseTuple = net::as_tuple(net::use_awaitable);
constexpr std::chrono::seconds kWriteTimeout{30};

std::string_view path_of(std::string_view target) {
  return target.substr(0, target.find('?'));
}

// 413, whether Beast finds out from Content-Length (with the head) or while
// reading a chunked body.
ApiError body_too_large(const config::ServerLimits& limits) {
  return ApiError{413, "invalid_request_error",
                  "request body is larger than the limit of " +
                      std::to_string(limits.max_body_bytes) + " bytes",
                  std::nullopt, "request_too_large", std::nullopt};
}

}  // namespace

Response make_json_response(const RequestContext& rc, http::status status, std::string body) {
  Response res{status, rc.version};
  res.set(http::field::content_type, "application/json");
  res.set("x-request-id", rc.request_id);
  res.body() = std::move(body);
  res.keep_alive(rc.keep_alive);
  res.prepare_payload();
  return res;
}

Response make_error_response(const RequestContext& rc, const ApiError& error) {
  Response res = make_json_response(rc, static_cast<http::status>(error.status), error.body());
  if (error.retry_after_s) res.set(http::field::retry_after, std::to_string(*error.retry_after_s));
  return res;
}

net::awaitable<bool> write_response(beast::tcp_stream& client, Response& response,
                                    std::chrono::milliseconds timeout) {
  client.expires_after(timeout);
  auto [ec, n] = co_await http::async_write(client, response, kUseTuple);
  client.expires_never();
  co_return !ec;
}

struct Gateway::Impl {
  struct WorkerThread {
    // Destruction order matters: pools are declared first so they outlive the
    // io_context, whose destruction releases leases held by coroutine frames.
    std::unique_ptr<providers::UpstreamPools> pools;
    net::io_context io{1};
    std::vector<std::unique_ptr<tcp::acceptor>> acceptors;
    Worker worker;
    std::thread thread;

    ~WorkerThread() {
      if (pools) pools->shutdown();
    }
  };

  std::shared_ptr<const config::Config> config;
  std::unique_ptr<routing::RoutingState> routing;
  std::unique_ptr<Metrics> metrics;
  std::map<std::string, std::shared_ptr<providers::ssl::context>> tls_contexts;
  std::vector<std::unique_ptr<WorkerThread>> workers;
  std::atomic<bool> ready{false};
  std::atomic<bool> stopped{false};

  net::awaitable<void> accept_loop(WorkerThread& w, tcp::acceptor& acceptor);
  net::awaitable<void> session(WorkerThread& w, tcp::socket socket);
  static net::awaitable<void> lingering_close(beast::tcp_stream& stream);
  net::awaitable<bool> dispatch(WorkerThread& w, beast::tcp_stream& stream, Request& req,
                                RequestContext& rc);
  Response simple_response(const Request& req, std::string_view path,
                           const RequestContext& rc) const;
  std::string models_body() const;
};

Gateway::Gateway(std::shared_ptr<const config::Config> config) : impl_(std::make_unique<Impl>()) {
  impl_->config = std::move(config);
  impl_->routing = std::make_unique<routing::RoutingState>(*impl_->config);
  impl_->metrics = std::make_unique<Metrics>(*impl_->config);
  for (const auto& p : impl_->config->providers) {
    if (p.base_url.tls) impl_->tls_contexts[p.name] = providers::make_tls_context(p);
  }
}

Gateway::~Gateway() {
  stop();
  wait();
}

routing::StatsRegistry& Gateway::stats() { return impl_->routing->stats; }
routing::RoutingState& Gateway::routing() { return *impl_->routing; }
bool Gateway::ready() const { return impl_->ready.load(); }

std::vector<std::uint16_t> Gateway::start() {
  const auto& server = impl_->config->server;
  unsigned n = server.workers != 0 ? server.workers : std::max(1u, std::thread::hardware_concurrency());
  std::vector<std::uint16_t> ports;
  for (unsigned i = 0; i < n; ++i) {
    auto w = std::make_unique<Impl::WorkerThread>();
    w->pools = std::make_unique<providers::UpstreamPools>(w->io.get_executor(), impl_->tls_contexts);
    w->worker = Worker{impl_->config, impl_->routing.get(), impl_->metrics.get(), w->pools.get(),
                       std::mt19937_64(0x9e3779b9u + i)};
    for (std::size_t l = 0; l < server.listeners.size(); ++l) {
      const auto& listener = server.listeners[l];
      // Every worker binds the same address and port; the kernel spreads
      // connections across them (SO_REUSEPORT). Port 0 is resolved by the
      // first worker and reused by the others.
      std::uint16_t port = (i == 0) ? listener.port : ports[l];
      tcp::endpoint ep{net::ip::make_address(listener.address), port};
      auto acc = std::make_unique<tcp::acceptor>(w->io);
      acc->open(ep.protocol());
      acc->set_option(net::socket_base::reuse_address(true));
      int one = 1;
      ::setsockopt(acc->native_handle(), SOL_SOCKET, SO_REUSEPORT, &one, sizeof one);
      acc->bind(ep);
      acc->listen(net::socket_base::max_listen_connections);
      if (i == 0) ports.push_back(acc->local_endpoint().port());
      w->acceptors.push_back(std::move(acc));
    }
    impl_->workers.push_back(std::move(w));
  }
  for (auto& w : impl_->workers) {
    for (auto& acc : w->acceptors) {
      net::co_spawn(w->io, impl_->accept_loop(*w, *acc), net::detached);
    }
    w->thread = std::thread([&io = w->io] {
      try {
        io.run();
      } catch (const std::exception& e) {
        log_line(LogLevel::kError, std::string("worker stopped by exception: ") + e.what());
      }
    });
  }
  impl_->ready = true;
  return ports;
}

void Gateway::stop() {
  if (impl_->stopped.exchange(true)) return;
  impl_->ready = false;
  for (auto& w : impl_->workers) w->io.stop();
}

void Gateway::wait() {
  for (auto& w : impl_->workers) {
    if (w->thread.joinable()) w->thread.join();
  }
}

net::awaitable<void> Gateway::Impl::accept_loop(WorkerThread& w, tcp::acceptor& acceptor) {
  for (;;) {
    auto [ec, socket] = co_await acceptor.async_accept(kUseTuple);
    if (ec) {
      if (ec == net::error::operation_aborted || !acceptor.is_open()) co_return;
      // EMFILE and friends: back off briefly instead of spinning.
      log_line(LogLevel::kWarn, "accept failed: " + ec.message());
      net::steady_timer t(acceptor.get_executor(), std::chrono::milliseconds(50));
      co_await t.async_wait(kUseTuple);
      continue;
    }
    socket.set_option(tcp::no_delay(true));
    net::co_spawn(acceptor.get_executor(), session(w, std::move(socket)), net::detached);
  }
}

net::awaitable<void> Gateway::Impl::session(WorkerThread& w, tcp::socket socket) {
  beast::tcp_stream stream(std::move(socket));
  beast::flat_buffer buffer;
  const auto& limits = config->server.limits;
  bool first = true;
  try {
    for (;;) {
      http::request_parser<http::string_body> parser;
      parser.header_limit(static_cast<std::uint32_t>(limits.max_header_bytes));
      parser.body_limit(limits.max_body_bytes);
      // Idle keep-alive wait first, then the slowloris guard for the head.
      stream.expires_after(first ? limits.client_header_timeout : limits.client_idle_timeout);
      first = false;
      auto [hec, hn] = co_await http::async_read_header(stream, buffer, parser, kUseTuple);
      RequestContext rc{new_request_id(), 11, false};
      if (hec) {
        if (hec == http::error::end_of_stream || hec == beast::error::timeout ||
            hec == net::error::connection_reset || hec == net::error::eof) {
          break;
        }
        // Beast checks Content-Length against the body limit with the head.
        ApiError e =
            hec == http::error::header_limit
                ? ApiError{431, "invalid_request_error", "request headers are too large",
                           std::nullopt, "headers_too_large", std::nullopt}
            : hec == http::error::body_limit
                ? body_too_large(limits)
                : invalid_request("malformed HTTP request: " + hec.message(), std::nullopt,
                                  "bad_http_request");
        Response res = make_error_response(rc, e);
        res.keep_alive(false);
        co_await write_response(stream, res, kWriteTimeout);
        break;
      }
      auto& head = parser.get();
      rc.version = head.version() == 10 ? 10 : 11;
      rc.keep_alive = head.keep_alive();
      if (auto id = head["x-request-id"]; is_valid_request_id(id)) rc.request_id = std::string(id);

      if (beast::iequals(head[http::field::expect], "100-continue")) {
        http::response<http::empty_body> cont{http::status::continue_, rc.version};
        stream.expires_after(kWriteTimeout);
        auto [cec, cn] = co_await http::async_write(stream, cont, kUseTuple);
        if (cec) break;
      }
      stream.expires_after(limits.client_header_timeout);
      auto [bec, bn] = co_await http::async_read(stream, buffer, parser, kUseTuple);
      stream.expires_never();
      if (bec) {
        if (bec == http::error::body_limit) {
          Response res = make_error_response(rc, body_too_large(limits));
          res.keep_alive(false);
          co_await write_response(stream, res, kWriteTimeout);
        }
        break;
      }
      Request req = parser.release();
      bool keep = co_await dispatch(w, stream, req, rc);
      if (!keep || !rc.keep_alive) break;
    }
  } catch (const boost::system::system_error& e) {
    // Cancellation of an operation: the connection goes.
    log_line(LogLevel::kDebug, std::string("session ended: ") + e.what());
  } catch (const std::exception& e) {
    // A broken invariant: loud, because nothing on the data path should throw.
    log_line(LogLevel::kError, std::string("session aborted by exception: ") + e.what());
  }
  co_await lingering_close(stream);
}

// Half-close, then read and discard what the client is still sending (an
// oversized body we refused, say) for a bounded time and size before closing.
// Closing with unread data makes the kernel send a reset, which can destroy
// the error response before the client reads it (nginx's lingering_close).
net::awaitable<void> Gateway::Impl::lingering_close(beast::tcp_stream& stream) {
  constexpr std::size_t kMaxDrain = 8 * 1024 * 1024;
  beast::error_code ignored;
  stream.socket().shutdown(tcp::socket::shutdown_send, ignored);
  stream.expires_after(std::chrono::seconds(2));
  char sink[16 * 1024];
  for (std::size_t drained = 0; drained < kMaxDrain;) {
    auto [ec, n] = co_await stream.async_read_some(net::buffer(sink), kUseTuple);
    if (ec) break;
    drained += n;
  }
  stream.close();
}

std::string Gateway::Impl::models_body() const {
  nlohmann::json data = nlohmann::json::array();
  for (const auto& m : config->models) {
    data.push_back({{"id", m.name}, {"object", "model"}, {"created", 0}, {"owned_by", "llmgate"}});
  }
  return nlohmann::json{{"object", "list"}, {"data", std::move(data)}}.dump();
}

net::awaitable<bool> Gateway::Impl::dispatch(WorkerThread& w, beast::tcp_stream& stream,
                                             Request& req, RequestContext& rc) {
  std::string_view path = path_of(req.target());
  if (path == "/v1/chat/completions" || path == "/chat/completions") {
    if (req.method() == http::verb::post) {
      co_return co_await handle_chat_completions(w.worker, stream, req, rc);
    }
  }
  // Every other answer is built first and written once. (No temporaries live
  // across a co_await: GCC 12 mis-destroys some of them in coroutines.)
  Response res = simple_response(req, path, rc);
  co_return co_await write_response(stream, res, kWriteTimeout);
}

Response Gateway::Impl::simple_response(const Request& req, std::string_view path,
                                        const RequestContext& rc) const {
  auto method = req.method();
  auto wrong_method = [&](std::string_view allow) {
    ApiError e{405, "invalid_request_error",
               "method " + std::string(req.method_string()) + " is not allowed on " +
                   std::string(path),
               std::nullopt, "method_not_allowed", std::nullopt};
    Response res = make_error_response(rc, e);
    res.set(http::field::allow, allow);
    return res;
  };
  bool get = method == http::verb::get || method == http::verb::head;
  if (path == "/v1/chat/completions" || path == "/chat/completions") return wrong_method("POST");
  if (path == "/v1/models" || path == "/models") {
    return get ? make_json_response(rc, http::status::ok, models_body()) : wrong_method("GET");
  }
  if (path == "/metrics") {
    if (!get) return wrong_method("GET");
    Response res = make_json_response(rc, http::status::ok, metrics->scrape(*routing));
    res.set(http::field::content_type, "text/plain; version=0.0.4; charset=utf-8");
    return res;
  }
  if (path == "/healthz") {
    // Liveness: this process answers. Never depends on upstreams.
    return get ? make_json_response(rc, http::status::ok, R"({"status":"ok"})") : wrong_method("GET");
  }
  if (path == "/admin/routes") {
    // Live per-deployment measurements: why routes are chosen.
    if (!get) return wrong_method("GET");
    std::string_view target = req.target();
    auto q = target.find('?');
    std::string_view query = q == std::string_view::npos ? std::string_view{} : target.substr(q + 1);
    if (query == "format=text") {
      Response res = make_json_response(rc, http::status::ok, routes_text(*config, *routing));
      res.set(http::field::content_type, "text/plain; charset=utf-8");
      return res;
    }
    return make_json_response(rc, http::status::ok, routes_json(*config, *routing));
  }
  if (path == "/readyz") {
    if (!get) return wrong_method("GET");
    bool ok = ready.load();
    return make_json_response(rc, ok ? http::status::ok : http::status::service_unavailable,
                              ok ? R"({"status":"ready"})" : R"({"status":"not ready"})");
  }
  ApiError e{404, "invalid_request_error",
             "unknown path " + std::string(path.substr(0, 200)) +
                 " (llmgate serves /v1/chat/completions and /v1/models)",
             std::nullopt, "unknown_url", std::nullopt};
  return make_error_response(rc, e);
}

}  // namespace llmgate::gateway
