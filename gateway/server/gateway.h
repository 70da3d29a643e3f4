// The llmgate server: listeners, worker threads, request dispatch, hot reload
// and graceful drain.
//
// Beast-free on purpose: main.cpp and tests include this cheaply.
//
// Threading model (docs/ARCHITECTURE.md): N workers, each a thread running its
// own io_context with its own SO_REUSEPORT acceptor per listener and its own
// upstream connection pools. A connection and everything it causes (the
// upstream attempts, the relay) live on one worker, so the data path has no
// locks; the only shared mutable state is the RoutingState (statistics, health,
// budgets), read once per request and updated once per attempt.
//
// Config snapshots: each worker holds the current Snapshot (config, routing
// state, metric series, TLS contexts); a request keeps the one it started
// with to its end. reload() builds a new one and posts it to every worker.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "config/config.h"
#include "routing/routing_state.h"

namespace llmgate::gateway {

class Gateway {
 public:
  explicit Gateway(std::shared_ptr<const config::Config> config);
  ~Gateway();  // stops
  Gateway(const Gateway&) = delete;
  Gateway& operator=(const Gateway&) = delete;

  // Binds every listener and starts the workers; returns the bound ports of
  // server.listeners in order (useful with port 0). Throws on bind failure.
  std::vector<std::uint16_t> start();
  std::optional<std::uint16_t> admin_port() const;  // server.admin_listener's, once started
  void wait();                                      // blocks until stop()
  void stop();  // immediate; idempotent; safe from any thread, including a signal thread

  // Graceful shutdown (server.drain): /readyz fails at once; the listeners
  // keep accepting for drain.delay, then close; idle keep-alive connections
  // are closed and busy ones after their response; requests in flight get
  // drain.timeout to finish. Then stop(). Blocks; returns true if every
  // connection finished in time. The admin listener serves to the end.
  bool drain();
  bool draining() const;

  // Hot reload: new requests use `config`; requests in flight keep theirs.
  // The router's live statistics carry over for unchanged deployments
  // (routing::RoutingState). Listener and worker changes need a restart: they
  // are logged and kept as they are. Returns false (and leaves the running
  // config in force) if the new one cannot be applied, e.g. a bad CA file;
  // `error` then says why. Every outcome is logged and counted
  // (llmgate_config_reloads_total).
  bool reload(std::shared_ptr<const config::Config> config, std::string* error = nullptr);
  // Loads and validates `path`, then reload(); a config that does not load is
  // rejected the same way.
  bool reload_from_file(const std::string& path, std::string* error = nullptr);
  std::uint64_t config_generation() const;  // 1 at start, +1 per successful reload

  // The current snapshot's: valid until the next reload.
  std::shared_ptr<const config::Config> config() const;
  routing::StatsRegistry& stats();
  routing::RoutingState& routing();
  bool ready() const;
  std::size_t open_api_connections() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace llmgate::gateway
