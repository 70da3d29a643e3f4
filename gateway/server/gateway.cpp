// The llmgate server as a process (gateway.h): its listeners and worker
// threads, the config snapshot each request starts with, hot reload and the
// graceful drain. A connection's session is session.cpp's; what a request
// is answered with, endpoints.cpp's.
#include <sys/socket.h>
#include <unistd.h>

#include "gateway/server/gateway_impl.h"

namespace llmgate::gateway {
namespace {

using tcp = net::ip::tcp;
constexpr auto kUseTuple = net::as_tuple(net::use_awaitable);

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
  snap->credentials =
      upstream_credentials(*config, nullptr, providers::cloud::process_environment(),
                           providers::cloud::read_small_file());
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
  {
    // Upstream credentials are fetched and refreshed on the first worker.
    auto& first = *impl_->workers.front();
    first.refresher = std::make_unique<CredentialRefresher>(first.io, *impl_->metrics);
    net::co_spawn(first.io, first.refresher->run(first.worker), net::detached);
  }
  for (auto& w : impl_->workers) {
    net::co_spawn(w->io, Impl::tick_watches(*w), net::detached);
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

net::awaitable<void> Gateway::Impl::tick_watches(WorkerThread& w) {
  net::steady_timer timer(w.io);
  for (;;) {
    timer.expires_after(RequestWatches::kTick);
    auto [ec] = co_await timer.async_wait(kUseTuple);
    if (ec) co_return;
    w.watches.tick();
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
  snap->credentials =
      upstream_credentials(*cfg, &old->credentials, providers::cloud::process_environment(),
                           providers::cloud::read_small_file());
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

// An API connection is known to the drain from its accept to its close.

}  // namespace llmgate::gateway
