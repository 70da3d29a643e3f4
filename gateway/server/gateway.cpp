#include "gateway/server/gateway.h"

#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/http.hpp>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <ctime>
#include <functional>
#include <list>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>
#include <tuple>
#include <variant>

#include "config/reload_guard.h"
#include "gateway/admin/admin_routes.h"
#include "gateway/admin/console_page.h"
#include "gateway/http/headers.h"
#include "gateway/observe/log.h"
#include "gateway/observe/tracer.h"
#include "gateway/proxy/chat_proxy.h"
#include "gateway/proxy/client_stream.h"
#include "gateway/proxy/response_resource.h"
#include "gateway/server/chunked_request.h"
#include "gateway/shared/shared_limits.h"
#include "providers/tls_client.h"

namespace llmgate::gateway {
namespace {

using tcp = net::ip::tcp;
constexpr auto kUseTuple = net::as_tuple(net::use_awaitable);
constexpr std::chrono::seconds kWriteTimeout{30};
// After a drain timeout: how long requests get to write their error and close.
constexpr std::chrono::seconds kShutdownGrace{2};

// The body limit of a request and the setting it comes from (embeddings
// batches have their own).
struct BodyLimit {
  std::size_t bytes;
  std::string_view setting;
  // The shape of the errors for its path (Anthropic's API has its own),
  // known from the request line before the head is parsed.
  ErrorShape shape = ErrorShape::kOpenAi;
};

// 413, whether Beast finds out from Content-Length (with the head) or while
// reading a chunked body.
ApiError body_too_large(const BodyLimit& limit) {
  return ApiError{413,
                  "invalid_request_error",
                  "request body is larger than the limit of " + std::to_string(limit.bytes) +
                      " bytes (" + std::string(limit.setting) + ")",
                  std::nullopt,
                  "request_too_large",
                  std::nullopt};
}

std::optional<config::Operation> api_operation(std::string_view path);  // below

// Whether the request head at the start of `head` is a POST to the
// embeddings endpoint (its request line, before Beast parses it).
// The path of a POST's request line in a raw head, else nullopt.
std::optional<std::string_view> post_path(std::string_view head) {
  while (head.substr(0, 2) == "\r\n") head.remove_prefix(2);  // RFC 9112 §2.2
  if (head.substr(0, 5) != "POST ") return std::nullopt;
  head.remove_prefix(5);
  return request_path(head.substr(0, head.find(' ')));
}

bool is_embeddings_request(std::string_view head) {
  const auto path = post_path(head);
  return path && api_operation(*path) == config::Operation::kEmbeddings;
}

// Anthropic's API: POST /v1/messages and /v1/messages/count_tokens (or
// without /v1, as base URLs are written).
enum class MessagesPath { kNone, kMessages, kCountTokens };
MessagesPath messages_path(std::string_view path) {
  if (path.substr(0, 3) == "/v1") path.remove_prefix(3);
  if (path == "/messages") return MessagesPath::kMessages;
  if (path == "/messages/count_tokens") return MessagesPath::kCountTokens;
  return MessagesPath::kNone;
}

// Anthropic's clients: its paths, and GET /v1/models with anthropic-version
// (their SDKs list models there too).
ErrorShape error_shape_of(const Request& head) {
  const std::string_view path = request_path(head.target()).value_or("");
  if (messages_path(path) != MessagesPath::kNone) return ErrorShape::kAnthropic;
  const bool models = path == "/v1/models" || path.substr(0, 11) == "/v1/models/";
  return models && head.find("anthropic-version") != head.end() ? ErrorShape::kAnthropic
                                                                : ErrorShape::kOpenAi;
}

// What is wrong with a request head that Beast accepted, for the strict
// HTTP/1.1 framing of RFC 9112: the version, Host, Transfer-Encoding and
// the target's form. nullopt if nothing.
std::optional<ApiError> framing_error(const Request& head) {
  auto bad = [](std::string message, int status = 400) {
    return ApiError{status,
                    "invalid_request_error",
                    std::move(message),
                    std::nullopt,
                    status == 505 ? "http_version_not_supported" : "bad_http_request",
                    std::nullopt};
  };
  if (head.version() != 10 && head.version() != 11) {
    return bad("HTTP version not supported (llmgate speaks HTTP/1.1 and HTTP/1.0)", 505);
  }
  const auto hosts = std::count_if(head.begin(), head.end(),
                                   [](const auto& f) { return f.name() == http::field::host; });
  if (head.version() == 11 && hosts == 0) return bad("HTTP/1.1 request without a Host header");
  if (hosts > 1) return bad("more than one Host header");
  if (hosts == 1 && !is_valid_host(head[http::field::host])) {
    return bad("Host must be a host name or address and an optional port (RFC 9110 §7.2)");
  }
  std::vector<std::string_view> te;
  for (const auto& f : head) {
    if (f.name() == http::field::transfer_encoding) te.push_back(f.value());
  }
  if (!te.empty()) {
    if (head.version() == 10) return bad("Transfer-Encoding in an HTTP/1.0 request");
    if (head.find(http::field::content_length) != head.end()) {
      return bad("both Transfer-Encoding and Content-Length");
    }
    switch (classify_transfer_encoding(te)) {
      case TransferCoding::kInvalid:
        return bad("Transfer-Encoding must be chunked (its final coding is not)");
      case TransferCoding::kUnsupported:
        return bad("only the chunked transfer coding is supported", 501);
      case TransferCoding::kNone:
      case TransferCoding::kChunked:
        break;
    }
  }
  if (has_invalid_target_byte(head.target())) {
    return bad("request target has a control, space or non-ASCII byte");
  }
  if (!request_path(head.target())) {
    return bad("request target must be an absolute path (origin-form) or an absolute URI");
  }
  return std::nullopt;
}

std::string_view buffered(const beast::flat_buffer& b) {
  return {static_cast<const char*>(b.data().data()), b.size()};
}

// Reads until `buffer` holds a whole request head (or `max` bytes of one,
// which the parser then refuses as too large). An error (the deadline, a
// close) is returned as is.
net::awaitable<beast::error_code> read_head_bytes(beast::tcp_stream& stream,
                                                  beast::flat_buffer& buffer, std::size_t max) {
  std::size_t searched = 0;
  for (;;) {
    const std::string_view have = buffered(buffer);
    if (request_head_end(have, searched) != std::string_view::npos || have.size() > max)
      co_return beast::error_code{};
    searched = have.size();
    // Into the free space the buffer has (4 KiB are reserved per request),
    // at least 512 bytes, never past the limit.
    const std::size_t room = std::max<std::size_t>(512, buffer.capacity() - buffer.size());
    auto [ec, n] = co_await stream.async_read_some(
        buffer.prepare(std::min(room, max + 1 - have.size())), kUseTuple);
    if (ec) co_return ec;
    buffer.commit(n);
  }
}

}  // namespace

Response make_json_response(const RequestContext& rc, http::status status, std::string body) {
  Response res{status, rc.version};
  // Beast knows no reason phrase for Anthropic's 529.
  if (static_cast<unsigned>(status) == 529) res.reason("Overloaded");
  res.set(http::field::content_type, "application/json");
  res.set("x-request-id", rc.request_id);
  res.body() = std::move(body);
  res.keep_alive(rc.keep_alive);
  res.prepare_payload();
  return res;
}

Response make_error_response(const RequestContext& rc, const ApiError& error) {
  Response res = make_json_response(rc, static_cast<http::status>(error.status_for(rc.error_shape)),
                                    error.body(rc.error_shape));
  if (error.retry_after_s) {
    // The OpenAI SDKs retry on this header: a wait that ends (saturation, a
    // rate limit, a drain) is worth their retry.
    res.set(http::field::retry_after, std::to_string(*error.retry_after_s));
    res.set("x-should-retry", "true");
  }
  return res;
}

struct Gateway::Impl {
  // An API-listener connection, for the drain: idle ones are closed at once.
  struct Session {
    beast::tcp_stream* stream;
    bool busy = false;  // a request has been read and is being answered
  };
  struct Acceptor {
    std::unique_ptr<tcp::acceptor> acceptor;
    bool admin = false;
  };
  struct WorkerThread {
    // Destruction order matters: pools are declared first so they outlive the
    // io_context, whose destruction releases leases held by coroutine frames.
    // So do the sessions list and the worker, which session frames use as
    // they are destroyed.
    std::unique_ptr<providers::UpstreamPools> pools;
    std::list<Session> sessions;  // API sessions; this worker's thread only
    Worker worker;
    RequestWatches watches;  // before io: frames destroyed with it remove their requests
    net::io_context io{1};
    std::vector<Acceptor> acceptors;
    std::thread thread;

    ~WorkerThread() {
      if (pools) pools->shutdown();
    }
  };

  std::unique_ptr<MetricsRegistry> metrics = std::make_unique<MetricsRegistry>();
  // This gateway's name in Via (RFC 9110 §7.6.3), unique per instance: a
  // request that comes back with it has looped through a base_url that
  // points at the gateway itself.
  const std::string via_name = "llmgate-" + new_request_id().substr(0, 12);
  providers::WireQuirks quirks;  // learnt per deployment, for the gateway's lifetime
  ResponseOwners responses;      // which provider stored each response (Responses API)
  RouteHistory history;          // the console's last minutes (/admin/history)
  mutable std::mutex snapshot_mu;
  std::shared_ptr<const Snapshot> current;  // snapshot_mu
  std::mutex reload_mu;                     // one reload at a time
  std::optional<std::uint16_t> admin_port;
  std::atomic<bool> ready{false};
  std::atomic<bool> stopped{false};
  std::atomic<bool> draining{false};  // readiness off; answers say Connection: close
  std::atomic<bool> closing{false};   // the drain closed the API listeners: no new requests
  // Open API connections, for the drain to wait on.
  std::mutex sessions_mu;
  std::condition_variable sessions_cv;
  std::size_t api_sessions = 0;     // sessions_mu
  std::condition_variable stop_cv;  // wakes a drain's delay when stop() is called
  // shared_state: started once with the first config (a change needs a restart).
  std::shared_ptr<SharedLimits> shared;
  // tracing: likewise.
  std::shared_ptr<Tracer> tracer;
  // Last: destroying a worker destroys session frames, which use the members above.
  std::vector<std::unique_ptr<WorkerThread>> workers;

  std::shared_ptr<const Snapshot> snapshot() const {
    std::lock_guard lock(snapshot_mu);
    return current;
  }
  // Runs `fn` on every worker's thread and waits until all have run it (or
  // `limit` passed: a stopped worker runs nothing).
  void on_every_worker(const std::function<void(WorkerThread&)>& fn,
                       std::chrono::milliseconds limit = std::chrono::seconds(10));

  net::awaitable<void> accept_loop(WorkerThread& w, tcp::acceptor& acceptor, bool admin);
  // Samples the routing table into `history` every interval, on one worker.
  net::awaitable<void> sample_history(WorkerThread& w);
  class SessionTracker;
  net::awaitable<void> session(WorkerThread& w, tcp::socket socket, bool admin,
                               net::cancellation_signal& cancel);
  bool over_connection_limit(WorkerThread& w);
  // Reads and answers one request: whether the connection goes on.
  net::awaitable<bool> serve_request(WorkerThread& w, beast::tcp_stream& stream,
                                     beast::flat_buffer& buffer, SessionTracker& tracked,
                                     bool first, bool admin, net::cancellation_signal& cancel);
  // The head (or the body) read whole, else answered when the client is
  // still there, and false: the connection closes.
  static net::awaitable<bool> read_request_head(beast::tcp_stream& stream,
                                                beast::flat_buffer& buffer,
                                                http::request_parser<http::string_body>& parser,
                                                RequestContext& rc,
                                                const config::ServerLimits& limits,
                                                BodyLimit& body_limit);
  // The same without an I/O operation, a timer or a coroutine frame, for
  // what the buffer already holds whole (most requests: head and body came
  // with the read that began the request, or behind the previous one).
  enum class Buffered { kDone, kError, kRead };
  static Buffered parse_buffered_head(beast::flat_buffer& buffer,
                                      http::request_parser<http::string_body>& parser,
                                      const config::ServerLimits& limits, BodyLimit& body_limit,
                                      beast::error_code& ec);
  // Both: the path's body limit, from the request line at the start of
  // `head` (embeddings batches have their own), set before Beast parses the
  // head; then the head, whole in `buffer`, parsed in place (kRead: Beast
  // wants more).
  static void use_path_body_limit(std::string_view head,
                                  http::request_parser<http::string_body>& parser,
                                  const config::ServerLimits& limits, BodyLimit& body_limit);
  static Buffered put_whole_head(beast::flat_buffer& buffer,
                                 http::request_parser<http::string_body>& parser,
                                 beast::error_code& ec);
  static Buffered parse_buffered_body(beast::tcp_stream& stream, beast::flat_buffer& buffer,
                                      http::request_parser<http::string_body>& parser,
                                      beast::error_code& ec);
  static net::awaitable<bool> read_request_body(beast::tcp_stream& stream,
                                                beast::flat_buffer& buffer,
                                                http::request_parser<http::string_body>& parser,
                                                const RequestContext& rc,
                                                const config::ServerLimits& limits,
                                                const BodyLimit& body_limit);
  static net::awaitable<void> lingering_close(beast::tcp_stream& stream);
  net::awaitable<bool> dispatch(WorkerThread& w, beast::tcp_stream& stream, Request& req,
                                RequestContext& rc, bool admin);
  std::optional<ApiError> admin_refusal(const Snapshot& snap, const Request& req, bool admin) const;
  Response models_response(const Snapshot& snap, const Request& req, const RequestContext& rc,
                           const std::string* id = nullptr) const;
  Response simple_response(const Snapshot& snap, const Request& req, std::string_view path,
                           const RequestContext& rc, bool admin) const;
  std::optional<ApiError> rejected_before_body(const Snapshot& snap, const Request& head,
                                               bool admin) const;
};

namespace {

providers::TlsContexts tls_contexts(const config::Config& cfg, const Snapshot* previous) {
  providers::TlsContexts out;
  for (const auto& p : cfg.providers) {
    if (!p.base_url.tls) continue;
    // An unchanged provider keeps its context (and so its pooled connections).
    if (previous) {
      const config::Provider* old = previous->config->find_provider(p.name);
      auto it = previous->tls.find(p.name);
      if (old && *old == p && it != previous->tls.end()) {
        out[p.name] = it->second;
        continue;
      }
    }
    out[p.name] = providers::make_tls_context(p.tls);
  }
  return out;
}

// One limiter per deployment id with max_concurrent (the smallest limit when
// several models list it); an existing one is kept, with its new limits.
std::map<std::string, std::shared_ptr<ConcurrencyLimiter>> limiters(const config::Config& cfg,
                                                                    const Snapshot* previous) {
  std::map<std::string, std::pair<unsigned, unsigned>> limits;
  for (const auto& m : cfg.models) {
    for (const auto& d : m.deployments) {
      if (!d.max_concurrent) continue;
      auto [it, fresh] = limits.try_emplace(d.id(), *d.max_concurrent, d.max_queue);
      if (!fresh)
        it->second = {std::min(it->second.first, *d.max_concurrent),
                      std::min(it->second.second, d.max_queue)};
    }
  }
  std::map<std::string, std::shared_ptr<ConcurrencyLimiter>> out;
  for (const auto& [id, l] : limits) {
    std::shared_ptr<ConcurrencyLimiter> limiter;
    if (previous) {
      if (auto it = previous->limiters.find(id); it != previous->limiters.end())
        limiter = it->second;
    }
    if (limiter) {
      limiter->set_limits(l.first, l.second);
    } else {
      limiter = std::make_shared<ConcurrencyLimiter>(l.first, l.second);
    }
    out.emplace(id, std::move(limiter));
  }
  return out;
}

// Fails if another socket already listens on `ep`. Every worker binds its
// own acceptor with SO_REUSEPORT, which would let a second process (an old
// instance, or one with another config, say without auth) silently take a
// share of the connections: a plain bind, without SO_REUSEPORT, fails with
// EADDRINUSE exactly when some socket listens there. Port 0 is always free.
void ensure_not_in_use(const tcp::endpoint& ep) {
  if (ep.port() == 0) return;
  const int fd = ::socket(ep.protocol().family(), SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) throw std::runtime_error(std::string("socket: ") + std::strerror(errno));
  int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);  // TIME_WAIT is not "in use"
  const int rc = ::bind(fd, ep.data(), static_cast<socklen_t>(ep.size()));
  const int err = errno;
  ::close(fd);
  if (rc != 0) {
    throw std::runtime_error("cannot listen on " + ep.address().to_string() + ":" +
                             std::to_string(ep.port()) + ": " +
                             (err == EADDRINUSE ? "address in use (another process listens there)"
                                                : std::strerror(err)));
  }
}

double unix_now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

}  // namespace

Gateway::Gateway(std::shared_ptr<const config::Config> config) : impl_(std::make_unique<Impl>()) {
  auto snap = std::make_shared<Snapshot>();
  snap->routing = std::make_shared<routing::RoutingState>(*config);
  snap->metrics = std::make_shared<Metrics>(*impl_->metrics, *config);
  snap->tls = tls_contexts(*config, nullptr);
  snap->limiters = limiters(*config, nullptr);
  snap->keys = std::make_shared<KeyStore>(config->auth);
  snap->keys->set_shared(config->shared_state.enabled());
  if (config->tracing.enabled())
    impl_->tracer = Tracer::start(config->tracing, impl_->metrics.get());
  snap->tracer = impl_->tracer;
  snap->config = std::move(config);
  snap->generation = 1;
  {
    std::lock_guard lock(impl_->snapshot_mu);
    impl_->current = snap;
  }
  // After the snapshot is published: the shared-state thread applies other
  // replicas' cooldowns and ejections to it from the moment it connects.
  const config::SharedState& shared_cfg = snap->config->shared_state;
  if (shared_cfg.enabled()) {
    Impl* impl = impl_.get();
    SharedLimits::Hooks hooks;
    hooks.metrics = impl->metrics.get();
    hooks.on_health = [impl](HealthEvent event, const std::string& deployment,
                             std::chrono::milliseconds after) {
      const auto current = impl->snapshot();
      auto& health = current->routing->health;
      if (event == HealthEvent::kCooldown) {
        health.on_retry_after(deployment, after, routing::Clock::now());
      } else {
        health.on_shared_ejection(deployment, after, routing::Clock::now());
      }
    };
    impl_->shared = SharedLimits::start(shared_cfg, std::move(hooks));
    // No request reads it yet: the workers start later (start()).
    snap->shared = impl_->shared;
  }
}

Gateway::~Gateway() {
  stop();
  wait();
  if (impl_->shared) impl_->shared->stop();
  // Last: the spans of requests that ran to the end go out (within one export timeout).
  if (impl_->tracer) impl_->tracer->stop();
}

std::shared_ptr<const config::Config> Gateway::config() const { return impl_->snapshot()->config; }
routing::StatsRegistry& Gateway::stats() { return impl_->snapshot()->routing->stats; }
routing::RoutingState& Gateway::routing() { return *impl_->snapshot()->routing; }
bool Gateway::ready() const { return impl_->ready.load(); }
bool Gateway::draining() const { return impl_->draining.load(); }
std::optional<std::uint16_t> Gateway::admin_port() const { return impl_->admin_port; }
std::uint64_t Gateway::config_generation() const { return impl_->snapshot()->generation; }
std::size_t Gateway::open_api_connections() const {
  std::lock_guard lock(impl_->sessions_mu);
  return impl_->api_sessions;
}

std::vector<std::uint16_t> Gateway::start() {
  const auto snap = impl_->snapshot();
  const auto& server = snap->config->server;
  unsigned n =
      server.workers != 0 ? server.workers : std::max(1u, std::thread::hardware_concurrency());
  // The API listeners, then the admin listener.
  std::vector<config::Listener> listeners = server.listeners;
  if (server.admin_listener) listeners.push_back(*server.admin_listener);
  std::vector<std::uint16_t> ports;
  for (unsigned i = 0; i < n; ++i) {
    auto w = std::make_unique<Impl::WorkerThread>();
    w->pools = std::make_unique<providers::UpstreamPools>(w->io.get_executor());
    w->pools->retain(snap->config);
    w->worker = Worker{snap,
                       w->pools.get(),
                       &w->watches,
                       std::mt19937_64(0x9e3779b9u + i),
                       impl_->via_name,
                       &impl_->quirks,
                       &impl_->responses,
                       &impl_->history};
    for (std::size_t l = 0; l < listeners.size(); ++l) {
      const auto& listener = listeners[l];
      // Every worker binds the same address and port; the kernel spreads
      // connections across them (SO_REUSEPORT). Port 0 is resolved by the
      // first worker and reused by the others.
      std::uint16_t port = (i == 0) ? listener.port : ports[l];
      tcp::endpoint ep{net::ip::make_address(listener.address), port};
      if (i == 0) ensure_not_in_use(ep);
      auto acc = std::make_unique<tcp::acceptor>(w->io);
      acc->open(ep.protocol());
      acc->set_option(net::socket_base::reuse_address(true));
      int one = 1;
      ::setsockopt(acc->native_handle(), SOL_SOCKET, SO_REUSEPORT, &one, sizeof one);
      acc->bind(ep);
      acc->listen(net::socket_base::max_listen_connections);
      if (i == 0) ports.push_back(acc->local_endpoint().port());
      w->acceptors.push_back({std::move(acc), l >= server.listeners.size()});
    }
    impl_->workers.push_back(std::move(w));
  }
  if (server.admin_listener) {
    impl_->admin_port = ports.back();
    ports.pop_back();
  }
  net::co_spawn(impl_->workers.front()->io, impl_->sample_history(*impl_->workers.front()),
                net::detached);
  for (auto& w : impl_->workers) {
    for (auto& a : w->acceptors) {
      net::co_spawn(w->io, impl_->accept_loop(*w, *a.acceptor, a.admin), net::detached);
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

net::awaitable<void> Gateway::Impl::sample_history(WorkerThread& w) {
  net::steady_timer timer(w.io);
  for (;;) {
    // The worker's snapshot: the latest config, posted to this thread.
    const Snapshot& snap = *w.worker.snapshot;
    history.sample(*snap.config, *snap.routing, routing::Clock::now(), unix_now_ms());
    timer.expires_after(history.options().interval);
    auto [ec] = co_await timer.async_wait(kUseTuple);
    if (ec) co_return;
  }
}

void Gateway::stop() {
  if (impl_->stopped.exchange(true)) return;
  impl_->ready = false;
  for (auto& w : impl_->workers) w->io.stop();
  std::lock_guard lock(impl_->sessions_mu);
  impl_->stop_cv.notify_all();
  impl_->sessions_cv.notify_all();
}

void Gateway::wait() {
  for (auto& w : impl_->workers) {
    if (w->thread.joinable()) w->thread.join();
  }
}

void Gateway::Impl::on_every_worker(const std::function<void(WorkerThread&)>& fn,
                                    std::chrono::milliseconds limit) {
  struct Done {
    std::mutex mu;
    std::condition_variable cv;
    std::size_t left;
  };
  auto done = std::make_shared<Done>();
  done->left = workers.size();
  for (auto& w : workers) {
    net::post(w->io, [done, fn, &w = *w] {
      fn(w);
      std::lock_guard lock(done->mu);
      if (--done->left == 0) done->cv.notify_all();
    });
  }
  std::unique_lock lock(done->mu);
  done->cv.wait_for(lock, limit, [&] { return done->left == 0; });
}

bool Gateway::drain() {
  if (impl_->stopped.load()) return true;
  // Readiness off first: whoever sees draining() sees !ready() too.
  impl_->ready = false;
  if (impl_->draining.exchange(true)) return false;
  const config::Drain d = impl_->snapshot()->config->server.drain;
  impl_->metrics->set_draining(true);
  log_line(LogLevel::kInfo, "draining: readiness off; accepting for " +
                                std::to_string(d.delay.count()) + "ms more, then up to " +
                                std::to_string(d.timeout.count()) + "ms for requests in flight");
  {
    // Keep serving (with Connection: close) while load balancers notice.
    std::unique_lock lock(impl_->sessions_mu);
    impl_->stop_cv.wait_for(lock, d.delay, [&] { return impl_->stopped.load(); });
  }
  impl_->closing = true;
  impl_->on_every_worker([](Impl::WorkerThread& w) {
    for (auto& a : w.acceptors) {
      beast::error_code ignored;
      if (!a.admin) a.acceptor->close(ignored);
    }
    // An idle keep-alive connection has nothing in flight: close it now.
    for (auto& s : w.sessions) {
      if (!s.busy) s.stream->socket().cancel();
    }
  });
  bool clean;
  std::size_t left;
  {
    std::unique_lock lock(impl_->sessions_mu);
    clean = impl_->sessions_cv.wait_for(lock, d.timeout, [&] {
      return impl_->api_sessions == 0 || impl_->stopped.load();
    }) && impl_->api_sessions == 0;
    left = impl_->api_sessions;
  }
  if (clean) {
    log_line(LogLevel::kInfo, "drained: every request finished; stopping");
  } else {
    // Out of time: end what is still running explicitly (an error event on
    // a committed stream, never a silent cut), then give those writes a
    // moment before stopping.
    log_line(LogLevel::kWarn, "drain timeout: ending " + std::to_string(left) +
                                  " connection(s) still busy with an error; stopping");
    impl_->on_every_worker([](Impl::WorkerThread& w) { w.watches.end_all(); });
    std::unique_lock lock(impl_->sessions_mu);
    impl_->sessions_cv.wait_for(lock, kShutdownGrace,
                                [&] { return impl_->api_sessions == 0 || impl_->stopped.load(); });
  }
  stop();
  return clean;
}

bool Gateway::reload(std::shared_ptr<const config::Config> cfg, std::string* error) {
  std::lock_guard lock(impl_->reload_mu);
  const auto old = impl_->snapshot();
  auto refuse = [&](ReloadResult result, const std::string& why) {
    log_line(LogLevel::kError, "config reload " + std::string(to_string(result)) +
                                   ", keeping the running config: " + why);
    impl_->metrics->on_reload(result, unix_now());
    if (error) *error = why;
    return false;
  };
  if (auto why = config::reload_refusal(*old->config, *cfg))
    return refuse(ReloadResult::kRejected, *why);
  auto snap = std::make_shared<Snapshot>();
  try {
    snap->tls = tls_contexts(*cfg, old.get());
  } catch (const std::exception& e) {
    return refuse(ReloadResult::kFailure, e.what());
  }
  for (const auto& warning : cfg->warnings) log_line(LogLevel::kWarn, "config: " + warning);
  const auto& was = old->config->server;
  const auto& now = cfg->server;
  if (was.listeners != now.listeners || was.admin_listener != now.admin_listener ||
      was.workers != now.workers) {
    log_line(LogLevel::kWarn,
             "config reload: server.listeners, server.admin_listener and server.workers take "
             "effect only at restart; the running ones are kept");
  }
  snap->routing = std::make_shared<routing::RoutingState>(*cfg, *old->config, *old->routing);
  snap->metrics = std::make_shared<Metrics>(*impl_->metrics, *cfg);
  snap->limiters = limiters(*cfg, old.get());
  snap->keys = std::make_shared<KeyStore>(cfg->auth, old->keys.get());
  if (!(cfg->shared_state == old->config->shared_state)) {
    log_line(LogLevel::kWarn,
             "config reload: shared_state takes effect only at restart; the running one is kept");
  }
  snap->shared = old->shared;
  snap->keys->set_shared(snap->shared != nullptr);
  if (!(cfg->tracing == old->config->tracing)) {
    log_line(LogLevel::kWarn,
             "config reload: tracing takes effect only at restart; the running one is kept");
  }
  snap->tracer = old->tracer;
  snap->config = cfg;
  snap->generation = old->generation + 1;
  {
    std::lock_guard slock(impl_->snapshot_mu);
    impl_->current = snap;
  }
  impl_->on_every_worker([snap](Impl::WorkerThread& w) {
    w.worker.snapshot = snap;
    w.pools->retain(snap->config);
  });
  impl_->metrics->on_reload(ReloadResult::kSuccess, unix_now());
  std::size_t deployments = 0;
  for (const auto& m : cfg->models) deployments += m.deployments.size();
  log_line(LogLevel::kInfo, "config reloaded (generation " + std::to_string(snap->generation) +
                                "): " + std::to_string(cfg->providers.size()) + " providers, " +
                                std::to_string(cfg->models.size()) + " models, " +
                                std::to_string(deployments) + " deployments");
  return true;
}

bool Gateway::reload_from_file(const std::string& path, std::string* error) {
  std::shared_ptr<const config::Config> cfg;
  try {
    cfg = config::load_config(path);
  } catch (const std::exception& e) {
    // A ConfigError lists one problem per line; the log keeps one line.
    std::string problems;
    for (const char c : std::string_view(e.what())) {
      if (c == '\n') {
        problems += "; ";
      } else {
        problems += c;
      }
    }
    log_line(LogLevel::kError, "config reload failure, keeping the running config: " + problems);
    impl_->metrics->on_reload(ReloadResult::kFailure, unix_now());
    if (error) *error = e.what();
    return false;
  }
  return reload(std::move(cfg), error);
}

net::awaitable<void> Gateway::Impl::accept_loop(WorkerThread& w, tcp::acceptor& acceptor,
                                                bool admin) {
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
    // The session's coroutine is bound to a signal of its own: a request's
    // exchange runs in it and is ended through it (run_watched), with no
    // coroutine of its own. The completion handler owns the signal, which
    // must outlive the coroutine's cancellation state (kept in the signal's
    // slot): the handler is the last thing the coroutine runs.
    auto cancel = std::make_shared<net::cancellation_signal>();
    net::cancellation_signal& signal = *cancel;
    net::co_spawn(acceptor.get_executor(), session(w, std::move(socket), admin, signal),
                  net::bind_cancellation_slot(signal.slot(),
                                              [cancel = std::move(cancel)](std::exception_ptr) {}));
  }
}

// Beast reads at most the buffer's free capacity (at least 512 bytes) per
// call, and an empty buffer never grows past 512: each request is read with
// 4 KiB reserved (one or two reads for a typical request), and the buffer is
// freed while the request is served (a long stream should not keep it:
// memory per open stream, bench/scale).
constexpr std::size_t kRequestBuffer = 4096;

// An API connection is known to the drain from its accept to its close.
class Gateway::Impl::SessionTracker {
 public:
  SessionTracker(Impl& impl, WorkerThread& w, beast::tcp_stream* s, bool admin)
      : impl_(impl), w_(w) {
    if (admin) return;
    it_ = w.sessions.insert(w.sessions.end(), Session{s});
    std::lock_guard lock(impl.sessions_mu);
    ++impl.api_sessions;
  }
  SessionTracker(const SessionTracker&) = delete;
  SessionTracker& operator=(const SessionTracker&) = delete;
  ~SessionTracker() {
    if (!it_) return;
    w_.sessions.erase(*it_);
    std::lock_guard lock(impl_.sessions_mu);
    if (--impl_.api_sessions == 0) impl_.sessions_cv.notify_all();
  }
  // A request has begun (the drain lets it finish), or the session waits.
  void busy(bool b) {
    if (it_) (*it_)->busy = b;
  }

 private:
  Impl& impl_;
  WorkerThread& w_;
  std::optional<std::list<Session>::iterator> it_;
};

namespace {

// What a request head that could not be read gets (nullopt: the client went
// away or stalled, and only closing is left).
std::optional<ApiError> head_error(beast::error_code ec, bool new_version,
                                   const BodyLimit& body_limit) {
  if (ec == http::error::end_of_stream || ec == beast::error::timeout ||
      ec == net::error::connection_reset || ec == net::error::eof ||
      ec == net::error::operation_aborted) {
    return std::nullopt;
  }
  // Beast checks Content-Length against the body limit with the head.
  if (ec == http::error::header_limit) {
    return ApiError{431,          "invalid_request_error", "request headers are too large",
                    std::nullopt, "headers_too_large",     std::nullopt};
  }
  if (ec == http::error::body_limit) return body_too_large(body_limit);
  if (ec == http::error::bad_version && new_version) {
    return ApiError{505,
                    "invalid_request_error",
                    "HTTP version not supported (llmgate speaks HTTP/1.1 and HTTP/1.0)",
                    std::nullopt,
                    "http_version_not_supported",
                    std::nullopt};
  }
  return invalid_request("malformed HTTP request: " + ec.message(), std::nullopt,
                         "bad_http_request");
}

// What a body that could not be read whole gets: too large, or malformed (a
// bad chunk size, say). Nullopt when the client went away or stalled past
// the deadline: it just loses the connection.
std::optional<ApiError> body_error(beast::error_code ec, const BodyLimit& body_limit) {
  if (ec == beast::error::timeout || ec == http::error::end_of_stream ||
      ec == http::error::partial_message || ec == net::error::eof ||
      ec == net::error::connection_reset || ec == net::error::operation_aborted) {
    return std::nullopt;
  }
  if (ec == http::error::body_limit) return body_too_large(body_limit);
  return invalid_request("malformed HTTP request body: " + ec.message(), std::nullopt,
                         "bad_http_request");
}

// Reads the rest of a chunked body (what http::async_read would do) with the
// chunk line and the trailer section bounded (gateway/server/chunked_request.h): the
// answer to a body past either limit, as soon as it is, else nullopt with
// `ec` set as the read left it. The buffer holds at most a limit's worth of
// unparsed bytes and a read.
net::awaitable<std::optional<ApiError>> read_chunked_body(
    beast::tcp_stream& stream, beast::flat_buffer& buffer,
    http::request_parser<http::string_body>& parser, const config::ServerLimits& limits,
    beast::error_code& ec) {
  ChunkedBodyReader reader(parser, limits.max_header_bytes);
  for (;;) {
    switch (reader.put(buffer, ec)) {
      case ChunkedBodyReader::Status::kDone:
      case ChunkedBodyReader::Status::kError:
        co_return std::nullopt;
      case ChunkedBodyReader::Status::kChunkLine:
        co_return invalid_request("a chunk line (chunk size and extensions) is longer than " +
                                      std::to_string(kMaxChunkLineBytes) + " bytes",
                                  std::nullopt, "bad_http_request");
      case ChunkedBodyReader::Status::kTrailers:
        co_return ApiError{431,
                           "invalid_request_error",
                           "the request's trailer section is larger than the limit of " +
                               std::to_string(limits.max_header_bytes) +
                               " bytes (server.limits.max_header_size)",
                           std::nullopt,
                           "headers_too_large",
                           std::nullopt};
      case ChunkedBodyReader::Status::kNeedMore:
        break;
    }
    // As much as Beast's own read would ask for.
    std::size_t n = 0;
    std::tie(ec, n) =
        co_await stream.async_read_some(buffer.prepare(beast::read_size(buffer, 65536)), kUseTuple);
    if (ec) co_return std::nullopt;
    buffer.commit(n);
  }
}

// Answers `error` and marks the connection for closing.
net::awaitable<void> answer_and_close(beast::tcp_stream& stream, const RequestContext& rc,
                                      const ApiError& error) {
  Response res = make_error_response(rc, error);
  res.keep_alive(false);
  co_await write_response(stream, res, kWriteTimeout);
}

}  // namespace

net::awaitable<void> Gateway::Impl::session(WorkerThread& w, tcp::socket socket, bool admin,
                                            net::cancellation_signal& cancel) {
  beast::tcp_stream stream(std::move(socket));
  beast::flat_buffer buffer;
  SessionTracker tracked(*this, w, &stream, admin);
  if (!admin && over_connection_limit(w)) {
    // Shed load with an answer, not a silent close: the client can retry.
    const std::size_t max = w.worker.snapshot->config->server.limits.max_connections;
    RequestContext rc{new_request_id(), 11, false};
    Response res =
        make_error_response(rc, ApiError{503, "service_unavailable",
                                         "too many connections (server.limits.max_connections is " +
                                             std::to_string(max) + "); retry shortly",
                                         std::nullopt, "too_many_connections", 1});
    co_await write_response(stream, res, kWriteTimeout);
    co_await lingering_close(stream);
    co_return;
  }
  try {
    for (bool first = true;; first = false) {
      // The drain closed the listeners: no new request on an API connection.
      // (Checked right before the read, with no suspension between, so the
      // drain's cancellation of idle sessions cannot miss this one.)
      if (!admin && closing.load()) break;
      tracked.busy(false);
      const bool more = co_await serve_request(w, stream, buffer, tracked, first, admin, cancel);
      if (!more) break;
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

bool Gateway::Impl::over_connection_limit(WorkerThread& w) {
  const std::size_t max = w.worker.snapshot->config->server.limits.max_connections;
  std::lock_guard lock(sessions_mu);
  return api_sessions > max;
}

net::awaitable<bool> Gateway::Impl::serve_request(WorkerThread& w, beast::tcp_stream& stream,
                                                  beast::flat_buffer& buffer,
                                                  SessionTracker& tracked, bool first, bool admin,
                                                  net::cancellation_signal& cancel) {
  // Limits as the current config has them (a reload may change them).
  const auto snap = w.worker.snapshot;
  const auto& limits = snap->config->server.limits;
  // The path's: embeddings batches have their own (use_path_body_limit).
  BodyLimit body_limit{limits.max_body_bytes, "server.limits.max_body_size"};
  http::request_parser<http::string_body> parser;
  parser.header_limit(static_cast<std::uint32_t>(limits.max_header_bytes));
  parser.body_limit(limits.max_body_bytes);
  if (buffer.capacity() < kRequestBuffer) buffer.reserve(kRequestBuffer);
  if (!first && buffer.size() == 0) {
    // Keep-alive: the wait for the next request is bounded by the idle
    // timeout; from its first byte on, the head by the header timeout.
    stream.expires_after(limits.client_idle_timeout);
    auto [iec, in] = co_await stream.async_read_some(buffer.prepare(kRequestBuffer), kUseTuple);
    if (iec) co_return false;
    buffer.commit(in);
  }
  tracked.busy(true);  // a request has begun: the drain lets it finish
  RequestContext rc{new_request_id(), 11, false};
  rc.session_cancel = &cancel;
  beast::error_code ec;
  switch (parse_buffered_head(buffer, parser, limits, body_limit, ec)) {
    case Buffered::kDone:
      break;
    case Buffered::kError:
      rc.error_shape = body_limit.shape;
      if (std::optional<ApiError> e = head_error(ec, /*new_version=*/false, body_limit))
        co_await answer_and_close(stream, rc, *e);
      co_return false;
    case Buffered::kRead:
      if (!co_await read_request_head(stream, buffer, parser, rc, limits, body_limit))
        co_return false;
      break;
  }
  auto& head = parser.get();
  rc.version = head.version() == 10 ? 10 : 11;
  rc.error_shape = error_shape_of(head);
  // While draining, answer and close: clients reconnect to another replica.
  std::vector<std::string> connection;  // every Connection line counts
  for (const auto& f : head) {
    if (f.name() != http::field::connection) continue;
    for (auto& t : connection_tokens(f.value())) connection.push_back(std::move(t));
  }
  rc.keep_alive = wants_keep_alive(rc.version, connection) && !(draining.load() && !admin);
  if (auto id = head["x-request-id"]; is_valid_request_id(id)) rc.request_id = std::string(id);
  if (auto e = framing_error(head)) {
    // The request's extent is unknown or ambiguous: answer, then close
    // (whatever follows on the connection is never read as a request).
    co_await answer_and_close(stream, rc, *e);
    co_return false;
  }
  if (auto e = rejected_before_body(*snap, head, admin)) {
    // A caller without a valid key cannot make the gateway read (or, with
    // Expect: 100-continue, ask for) a body. Its request line, and an API
    // call's outcome in llmgate_requests_total (docs/operations.md, "Refusals").
    const std::string_view path = request_path(head.target()).value_or("");
    const std::optional<config::Operation> op =
        head.method() == http::verb::post ? api_operation(path) : std::nullopt;
    if (op) metrics->on_refused(*op, "", Refused::kUnauthenticated);
    log_refused_request(rc.request_id, op ? config::gen_ai_name(*op) : "", "", "",
                        to_string(Refused::kUnauthenticated), e->status);
    Response res = make_error_response(rc, *e);
    const bool body_unread = !parser.is_done();
    res.keep_alive(rc.keep_alive && !body_unread);
    const bool written = co_await write_response(stream, res, kWriteTimeout);
    co_return written && !body_unread && rc.keep_alive;
  }
  switch (parse_buffered_body(stream, buffer, parser, ec)) {
    case Buffered::kDone:
      break;
    case Buffered::kError:
      if (std::optional<ApiError> e = body_error(ec, body_limit))
        co_await answer_and_close(stream, rc, *e);
      co_return false;
    case Buffered::kRead:
      if (!co_await read_request_body(stream, buffer, parser, rc, limits, body_limit))
        co_return false;
      break;
  }
  rc.received = std::chrono::steady_clock::now();
  if (buffer.size() == 0) buffer.shrink_to_fit();  // nothing pipelined behind it
  Request req = parser.release();
  const bool keep = co_await dispatch(w, stream, req, rc, admin);
  co_return keep&& rc.keep_alive;
}

net::awaitable<bool> Gateway::Impl::read_request_head(
    beast::tcp_stream& stream, beast::flat_buffer& buffer,
    http::request_parser<http::string_body>& parser, RequestContext& rc,
    const config::ServerLimits& limits, BodyLimit& body_limit) {
  stream.expires_after(limits.client_header_timeout);  // the slowloris guard
  // The whole head is in the buffer before Beast parses it, so that what
  // Beast would quietly normalise (obs-fold) can be refused first.
  beast::error_code hec = co_await read_head_bytes(stream, buffer, limits.max_header_bytes);
  const std::string_view have = buffered(buffer);
  const std::size_t head_end = hec ? std::string_view::npos : request_head_end(have);
  // Checked before the parser consumes the head: a 505 rather than a 400.
  const bool new_version = !hec && has_unsupported_http_version(have);
  // In the head only: a pretty-printed body with CRLF line ends has CRLF and
  // a space without being a fold.
  const bool folded = !hec && has_obs_fold(have.substr(0, head_end));
  if (folded) {
    co_await answer_and_close(
        stream, rc,
        invalid_request("obsolete line folding in the request head is not accepted", std::nullopt,
                        "bad_http_request"));
    co_return false;
  }
  if (!hec) use_path_body_limit(have, parser, limits, body_limit);
  rc.error_shape = body_limit.shape;
  // The head is whole in the buffer now (else past the limit: Beast refuses
  // it as it reads on): parsed in place.
  if (!hec && head_end != std::string_view::npos &&
      put_whole_head(buffer, parser, hec) == Buffered::kDone) {
    co_return true;
  }
  if (!hec && !parser.is_header_done())
    std::tie(hec, std::ignore) =
        co_await http::async_read_header(stream, buffer, parser, kUseTuple);
  if (!hec) co_return true;
  if (std::optional<ApiError> e = head_error(hec, new_version, body_limit)) {
    co_await answer_and_close(stream, rc, *e);
  }
  co_return false;
}

Gateway::Impl::Buffered Gateway::Impl::parse_buffered_head(
    beast::flat_buffer& buffer, http::request_parser<http::string_body>& parser,
    const config::ServerLimits& limits, BodyLimit& body_limit, beast::error_code& ec) {
  const std::string_view have = buffered(buffer);
  // What read_request_head answers itself (a version, a fold) goes there.
  const std::size_t head_end = request_head_end(have);
  if (head_end == std::string_view::npos || has_unsupported_http_version(have) ||
      has_obs_fold(have.substr(0, head_end))) {
    return Buffered::kRead;
  }
  use_path_body_limit(have, parser, limits, body_limit);
  return put_whole_head(buffer, parser, ec);
}

void Gateway::Impl::use_path_body_limit(std::string_view head,
                                        http::request_parser<http::string_body>& parser,
                                        const config::ServerLimits& limits, BodyLimit& body_limit) {
  if (auto path = post_path(head); path && messages_path(*path) != MessagesPath::kNone)
    body_limit.shape = ErrorShape::kAnthropic;
  if (!is_embeddings_request(head)) return;
  // A batch of inputs has its own limit (Beast checks Content-Length
  // against it as it parses the head).
  body_limit = {limits.max_embeddings_body_bytes, "server.limits.max_embeddings_body_size"};
  parser.body_limit(body_limit.bytes);
}

Gateway::Impl::Buffered Gateway::Impl::put_whole_head(
    beast::flat_buffer& buffer, http::request_parser<http::string_body>& parser,
    beast::error_code& ec) {
  // Beast parses a head only once all of it is there; need_more is rare (a
  // buffer that ends in "\r\n\n": Beast takes the head up to the bare LF)
  // and the read path goes on from where the parser is, as after a read.
  const std::size_t n = parser.put(buffer.data(), ec);
  buffer.consume(n);
  if (ec == http::error::need_more) {
    ec = {};
    return Buffered::kRead;
  }
  if (ec) return Buffered::kError;
  return parser.is_header_done() ? Buffered::kDone : Buffered::kRead;
}

Gateway::Impl::Buffered Gateway::Impl::parse_buffered_body(
    beast::tcp_stream& stream, beast::flat_buffer& buffer,
    http::request_parser<http::string_body>& parser, beast::error_code& ec) {
  // No 100-continue to send, and a body of a known length that is all here.
  if (parser.get().find(http::field::expect) != parser.get().end()) return Buffered::kRead;
  if (!parser.is_done()) {
    const auto left = parser.content_length_remaining();
    if (parser.chunked() || !left || buffer.size() < *left) return Buffered::kRead;
    while (!parser.is_done()) {
      const std::size_t n = parser.put(buffer.data(), ec);
      buffer.consume(n);
      if (ec) return Buffered::kError;
      if (n == 0) return Buffered::kRead;  // not expected: the read path goes on
    }
  }
  stream.expires_never();  // as read_request_body leaves it
  return Buffered::kDone;
}

net::awaitable<bool> Gateway::Impl::read_request_body(
    beast::tcp_stream& stream, beast::flat_buffer& buffer,
    http::request_parser<http::string_body>& parser, const RequestContext& rc,
    const config::ServerLimits& limits, const BodyLimit& body_limit) {
  if (beast::iequals(parser.get()[http::field::expect], "100-continue")) {
    http::response<http::empty_body> cont{http::status::continue_, rc.version};
    stream.expires_after(kWriteTimeout);
    auto [cec, cn] = co_await http::async_write(stream, cont, kUseTuple);
    if (cec) co_return false;
  }
  stream.expires_after(limits.client_header_timeout);
  std::optional<ApiError> refused;
  beast::error_code bec;
  if (parser.chunked()) {
    refused = co_await read_chunked_body(stream, buffer, parser, limits, bec);
  } else {
    std::tie(bec, std::ignore) = co_await http::async_read(stream, buffer, parser, kUseTuple);
  }
  stream.expires_never();
  if (!refused && !bec) co_return true;
  if (!refused) refused = body_error(bec, body_limit);
  if (refused) co_await answer_and_close(stream, rc, *refused);
  co_return false;
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

namespace {

// The models `key` may use (every model without keys).
// When this process started (Unix seconds): a model's stable `created`.
std::int64_t process_start_unix() {
  static const std::int64_t t = std::chrono::duration_cast<std::chrono::seconds>(
                                    std::chrono::system_clock::now().time_since_epoch())
                                    .count();
  return t;
}

// A model as OpenAI lists it; `owned_by` names the providers that serve it
// to a caller that may see how it is routed (`explain`), else "llmgate".
nlohmann::json model_object(const config::Model& m, bool explain) {
  // What it serves (an extra field: the SDKs ignore it): the operations
  // some deployment of it lists.
  nlohmann::json operations = nlohmann::json::array();
  for (config::Operation op : config::kAllOperations) {
    if (std::any_of(m.deployments.begin(), m.deployments.end(),
                    [op](const config::Deployment& d) { return d.serves(op); }))
      operations.push_back(config::to_string(op));
  }
  std::vector<std::string> providers;
  if (!explain) {
    return {{"id", m.name},
            {"object", "model"},
            {"created", process_start_unix()},
            {"owned_by", "llmgate"},
            {"operations", std::move(operations)}};
  }
  for (const auto& d : m.deployments) {
    if (std::find(providers.begin(), providers.end(), d.provider) == providers.end())
      providers.push_back(d.provider);
  }
  std::string owners;
  for (const auto& p : providers) owners.append(owners.empty() ? "" : ",").append(p);
  return {{"id", m.name},
          {"object", "model"},
          {"created", process_start_unix()},
          {"owned_by", owners.empty() ? std::string("llmgate") : owners},
          {"operations", std::move(operations)}};
}

// A model as Anthropic lists it (GET /v1/models with anthropic-version).
nlohmann::ordered_json anthropic_model_object(const config::Model& m) {
  char created[32];
  const std::time_t t = static_cast<std::time_t>(process_start_unix());
  std::tm tm{};
  gmtime_r(&t, &tm);
  std::strftime(created, sizeof created, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return {{"type", "model"}, {"id", m.name}, {"display_name", m.name}, {"created_at", created}};
}

// Anthropic's list: one page holds them all.
std::string anthropic_models_body(const config::Config& cfg, const config::GatewayKey* key) {
  nlohmann::ordered_json data = nlohmann::ordered_json::array();
  for (const auto& m : cfg.models) {
    if (key_allows(key, m.name)) data.push_back(anthropic_model_object(m));
  }
  nlohmann::ordered_json first = data.empty() ? nlohmann::ordered_json() : data.front()["id"];
  nlohmann::ordered_json last = data.empty() ? nlohmann::ordered_json() : data.back()["id"];
  return nlohmann::ordered_json{{"data", std::move(data)},
                                {"has_more", false},
                                {"first_id", std::move(first)},
                                {"last_id", std::move(last)}}
      .dump();
}

std::string models_body(const config::Config& cfg, const config::GatewayKey* key) {
  nlohmann::json data = nlohmann::json::array();
  for (const auto& m : cfg.models) {
    if (key_allows(key, m.name)) data.push_back(model_object(m, may_explain(cfg, key)));
  }
  return nlohmann::json{{"object", "list"}, {"data", std::move(data)}}.dump();
}

// The client API a POST to `path` is for ("/v1/chat/completions" or
// "/chat/completions", ...), else nullopt.
std::optional<config::Operation> api_operation(std::string_view path) {
  if (path.substr(0, 3) == "/v1") path.remove_prefix(3);
  for (config::Operation op : config::kAllOperations) {
    if (path == std::string_view(config::endpoint_of(op)).substr(3)) return op;
  }
  return std::nullopt;
}

// "/v1/models/ID" (or "/models/ID"): the percent-decoded ID, else nullopt.
std::optional<std::string> model_path_id(std::string_view path) {
  for (std::string_view prefix : {"/v1/models/", "/models/"}) {
    if (path.substr(0, prefix.size()) != prefix) continue;
    std::string_view raw = path.substr(prefix.size());
    std::string id;
    for (std::size_t i = 0; i < raw.size(); ++i) {
      auto hex = [](char c) {
        return c >= '0' && c <= '9'   ? c - '0'
               : c >= 'a' && c <= 'f' ? c - 'a' + 10
               : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                      : -1;
      };
      if (raw[i] == '%' && i + 2 < raw.size() && hex(raw[i + 1]) >= 0 && hex(raw[i + 2]) >= 0) {
        id.push_back(static_cast<char>(hex(raw[i + 1]) * 16 + hex(raw[i + 2])));
        i += 2;
      } else {
        id.push_back(raw[i]);
      }
    }
    return id;
  }
  return std::nullopt;
}

// The query of a request target ("" without one).
std::string_view query_of(std::string_view target) {
  auto q = target.find('?');
  return q == std::string_view::npos ? std::string_view{} : target.substr(q + 1);
}

bool is_admin_path(std::string_view path) {
  return path == "/metrics" || path == "/healthz" || path == "/readyz" ||
         path.substr(0, 7) == "/admin/";
}

}  // namespace

std::optional<ApiError> Gateway::Impl::rejected_before_body(const Snapshot& snap,
                                                            const Request& head, bool admin) const {
  // Probes, scrapes and /admin/* (which has its own key) are not API calls.
  const std::string_view path = request_path(head.target()).value_or("");
  if (admin || is_admin_path(path) || !snap.keys->enabled()) return std::nullopt;
  auto a = snap.keys->authenticate(head[http::field::authorization], head["x-api-key"]);
  auto* e = std::get_if<ApiError>(&a);
  if (e == nullptr) return std::nullopt;
  metrics->on_auth_rejected(AuthRejection::kUnauthenticated);
  return *e;
}

net::awaitable<bool> Gateway::Impl::dispatch(WorkerThread& w, beast::tcp_stream& stream,
                                             Request& req, RequestContext& rc, bool admin) {
  const std::string_view path = request_path(req.target()).value_or("");
  // The body is re-encoded upstream as plain JSON: a compressed one would be
  // parsed as garbage or forwarded under a wrong Content-Encoding.
  for (const auto& f : req) {
    if (f.name() != http::field::content_encoding || beast::iequals(f.value(), "identity"))
      continue;
    Response res = make_error_response(
        rc, ApiError{415, "invalid_request_error",
                     "Content-Encoding " + std::string(f.value().substr(0, 64)) +
                         " is not supported: send the request body uncompressed",
                     std::nullopt, "unsupported_content_encoding", std::nullopt});
    co_return co_await write_response(stream, res, kWriteTimeout);
  }
  if (!admin && req.method() == http::verb::post) {
    if (auto op = api_operation(path)) {
      co_return co_await handle_api_request(w.worker, stream, req, rc, client_api(*op));
    }
    switch (messages_path(path)) {
      case MessagesPath::kMessages:
        co_return co_await handle_api_request(w.worker, stream, req, rc, messages_api());
      case MessagesPath::kCountTokens:
        co_return co_await handle_count_tokens(w.worker, stream, req, rc);
      case MessagesPath::kNone:
        break;
    }
  }
  if (!admin) {
    if (auto rp = response_path(path)) {
      co_return co_await handle_response_resource(w.worker, stream, req, rc, *rp);
    }
  }
  // Every other answer is built first and written once. (No temporaries live
  // across a co_await: GCC 12 mis-destroys some of them in coroutines.)
  const auto snap = w.worker.snapshot;
  Response res = simple_response(*snap, req, path, rc, admin);
  co_return co_await write_response(stream, res, kWriteTimeout);
}

// With an admin listener, /admin/* is served there only; an admin key, if
// configured, is needed on any listener.
std::optional<ApiError> Gateway::Impl::admin_refusal(const Snapshot& snap, const Request& req,
                                                     bool admin) const {
  if (!admin && snap.config->server.admin_listener) {
    return ApiError{404,
                    "invalid_request_error",
                    "/admin/* is served on the admin listener only (server.admin_listener)",
                    std::nullopt,
                    "unknown_url",
                    std::nullopt};
  }
  if (snap.keys->admin_allowed(req[http::field::authorization])) return std::nullopt;
  metrics->on_auth_rejected(AuthRejection::kAdminUnauthenticated);
  return ApiError{401,
                  "invalid_request_error",
                  "/admin/* needs the admin key (auth.admin_key_sha256) as "
                  "'Authorization: Bearer <key>'",
                  std::nullopt,
                  "invalid_api_key",
                  std::nullopt};
}

// GET /v1/models: the models the caller's key may use; GET /v1/models/{id}:
// one of them (404 for any other, as OpenAI answers).
Response Gateway::Impl::models_response(const Snapshot& snap, const Request& req,
                                        const RequestContext& rc, const std::string* id) const {
  const config::GatewayKey* key = nullptr;
  if (snap.keys->enabled()) {
    auto a = snap.keys->authenticate(req[http::field::authorization], req["x-api-key"]);
    if (auto* e = std::get_if<ApiError>(&a)) {
      metrics->on_auth_rejected(AuthRejection::kUnauthenticated);
      return make_error_response(rc, *e);
    }
    key = std::get<const config::GatewayKey*>(a);
  }
  if (!id) {
    return make_json_response(rc, http::status::ok,
                              rc.error_shape == ErrorShape::kAnthropic
                                  ? anthropic_models_body(*snap.config, key)
                                  : models_body(*snap.config, key));
  }
  const config::Model* m = snap.config->find_model(*id);
  if (!m || !key_allows(key, m->name)) {
    return make_error_response(rc, ApiError{404, "invalid_request_error",
                                            "The model '" + id->substr(0, 200) +
                                                "' does not exist or you do not have access to it.",
                                            std::nullopt, "model_not_found", std::nullopt});
  }
  return make_json_response(rc, http::status::ok,
                            rc.error_shape == ErrorShape::kAnthropic
                                ? anthropic_model_object(*m).dump()
                                : model_object(*m, may_explain(*snap.config, key)).dump());
}

Response Gateway::Impl::simple_response(const Snapshot& snap, const Request& req,
                                        std::string_view path, const RequestContext& rc,
                                        bool admin) const {
  const config::Config& cfg = *snap.config;
  routing::RoutingState& rs = *snap.routing;
  auto method = req.method();
  auto wrong_method = [&](std::string_view allow) {
    Response res = make_error_response(rc, method_not_allowed(req.method_string(), path));
    res.set(http::field::allow, allow);
    return res;
  };
  bool get = method == http::verb::get || method == http::verb::head;
  if (admin && !is_admin_path(path)) {
    ApiError e{404,
               "invalid_request_error",
               "unknown path " + std::string(path.substr(0, 200)) +
                   " on the admin listener (it serves /metrics, /healthz, /readyz and /admin/*; "
                   "the API is on the main listener)",
               std::nullopt,
               "unknown_url",
               std::nullopt};
    return make_error_response(rc, e);
  }
  if (api_operation(path) || messages_path(path) != MessagesPath::kNone)
    return wrong_method("POST");
  if (path == "/v1/models" || path == "/models") {
    return get ? models_response(snap, req, rc) : wrong_method("GET");
  }
  if (auto id = model_path_id(path)) {
    return get ? models_response(snap, req, rc, &*id) : wrong_method("GET");
  }
  if (path == "/metrics") {
    if (!get) return wrong_method("GET");
    Response res = make_json_response(rc, http::status::ok, metrics->scrape(cfg, rs));
    res.set(http::field::content_type, "text/plain; version=0.0.4; charset=utf-8");
    return res;
  }
  if (path == "/healthz") {
    // Liveness: this process answers. Never depends on upstreams.
    return get ? make_json_response(rc, http::status::ok, R"({"status":"ok"})")
               : wrong_method("GET");
  }
  if (path.substr(0, 7) == "/admin/") {
    if (auto e = admin_refusal(snap, req, admin)) {
      Response res = make_error_response(rc, *e);
      // A browser asks for the key (as the password) and sends it on from
      // then on: the console works without a client of its own.
      if (e->status == 401)
        res.set(http::field::www_authenticate, R"(Basic realm="llmgate admin")");
      return res;
    }
  }
  if (path == "/admin/console") {
    if (!get) return wrong_method("GET");
    Response res = make_json_response(rc, http::status::ok, std::string(console_page()));
    res.set(http::field::content_type, "text/html; charset=utf-8");
    res.set(http::field::cache_control, "no-store");
    // Its own script and style only, data from this origin only, never framed.
    res.set("content-security-policy",
            "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; "
            "connect-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'none'; "
            "frame-ancestors 'none'");
    res.set("x-content-type-options", "nosniff");
    res.set("x-frame-options", "DENY");
    res.set("referrer-policy", "no-referrer");
    return res;
  }
  if (path == "/admin/history") {
    // The console's last minutes: samples of the routing table, and the
    // requests that failed over, were hedged or failed.
    if (!get) return wrong_method("GET");
    const std::string_view query = query_of(req.target());
    std::uint64_t after = 0;
    if (!query.empty()) {
      constexpr std::string_view kAfter = "after=";
      auto [end, ec] = std::from_chars(query.data() + std::min(query.size(), kAfter.size()),
                                       query.data() + query.size(), after);
      if (query.substr(0, kAfter.size()) != kAfter || ec != std::errc() ||
          end != query.data() + query.size()) {
        return make_error_response(
            rc, ApiError{400, "invalid_request_error",
                         "/admin/history takes one parameter: after=<cursor> (the cursor of an "
                         "earlier answer)",
                         std::string("after"), "invalid_value", std::nullopt});
      }
    }
    Response res = make_json_response(rc, http::status::ok, history.json(after));
    res.set(http::field::cache_control, "no-store");
    return res;
  }
  if (path == "/admin/routes") {
    // Live per-deployment measurements: why routes are chosen.
    if (!get) return wrong_method("GET");
    if (query_of(req.target()) == "format=text") {
      Response res = make_json_response(rc, http::status::ok, routes_text(cfg, rs, &quirks));
      res.set(http::field::content_type, "text/plain; charset=utf-8");
      return res;
    }
    return make_json_response(rc, http::status::ok, routes_json(cfg, rs, &quirks));
  }
  if (path == "/readyz") {
    if (!get) return wrong_method("GET");
    bool ok = ready.load();
    return make_json_response(rc, ok ? http::status::ok : http::status::service_unavailable,
                              ok                ? R"({"status":"ready"})"
                              : draining.load() ? R"({"status":"draining"})"
                                                : R"({"status":"not ready"})");
  }
  ApiError e{404,
             "invalid_request_error",
             "unknown path " + std::string(path.substr(0, 200)) +
                 " (llmgate serves /v1/chat/completions, /v1/responses, /v1/embeddings, "
                 "/v1/completions, /v1/messages and /v1/models)",
             std::nullopt,
             "unknown_url",
             std::nullopt};
  return make_error_response(rc, e);
}

}  // namespace llmgate::gateway
