// The llmgate server: listeners, worker threads, request dispatch.
//
// Beast-free on purpose: main.cpp and tests include this cheaply.
//
// Threading model (docs/ARCHITECTURE.md): N workers, each a thread running its
// own io_context with its own SO_REUSEPORT acceptor per listener and its own
// upstream connection pools. A connection and everything it causes (the
// upstream attempts, the relay) live on one worker, so the data path has no
// locks; the only shared mutable state is the RoutingState (statistics, health,
// budgets), read once per request and updated once per attempt.
#pragma once

#include <cstdint>
#include <memory>
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

  // Binds every listener and starts the workers; returns the bound ports in
  // listener order (useful with port 0). Throws on bind failure.
  std::vector<std::uint16_t> start();
  void wait();  // blocks until stop()
  void stop();  // idempotent; safe from any thread, including a signal thread

  routing::StatsRegistry& stats();
  routing::RoutingState& routing();
  bool ready() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace llmgate::gateway
