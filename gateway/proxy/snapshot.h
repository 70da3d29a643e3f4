// The config snapshot a request lives on: everything it needs from one
// config, built once per (re)load and shared by every worker.
// Includes Beast (TLS contexts, limiters): include only from gateway .cpp files.
#pragma once

#include <boost/asio/awaitable.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <chrono>
#include <memory>
#include <random>
#include <string>
#include <string_view>

#include "config/config.h"
#include "gateway/access/auth.h"
#include "gateway/observe/metrics.h"
#include "gateway/proxy/concurrency_limiter.h"
#include "gateway/proxy/upstream_credentials.h"
#include "providers/upstream_pool.h"
#include "routing/routing_state.h"

namespace llmgate::gateway {

class SharedLimits;
class Tracer;

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = boost::beast::http;

// Everything a request needs from one config: the immutable config, the
// routing state built for it (sharing live statistics across reloads), its
// metric series and its providers' TLS contexts. A hot reload builds a new
// Snapshot; a request holds the one it started with to its end.
struct Snapshot {
  std::shared_ptr<const config::Config> config;
  std::shared_ptr<routing::RoutingState> routing;
  std::shared_ptr<Metrics> metrics;
  providers::TlsContexts tls;
  std::shared_ptr<KeyStore> keys;  // gateway keys (auth:); carried over by reloads by key name
  // Deployments with max_concurrent, by id. Carried over by reloads, so the
  // limit holds across requests of old and new snapshots alike.
  std::map<std::string, std::shared_ptr<ConcurrencyLimiter>> limiters;
  // shared_state: (nullptr when not configured); the same object in every snapshot.
  std::shared_ptr<SharedLimits> shared;
  // tracing: (nullptr when not configured); the same object in every snapshot.
  std::shared_ptr<Tracer> tracer;
  // Providers whose requests carry a credential of their own (auth:, and
  // Bedrock without api_key), by name: refreshed ones are shared with the
  // previous snapshot when their source is unchanged.
  UpstreamCredentials credentials;
  std::uint64_t generation = 0;  // 1 at start-up, +1 per successful reload
};

}  // namespace llmgate::gateway
