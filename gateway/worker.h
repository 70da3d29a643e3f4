// Per-worker state and the HTTP helpers shared by the gateway's handlers.
// Includes Beast: include only from gateway .cpp files.
#pragma once

#include <memory>
#include <random>
#include <string>
#include <string_view>

#include <boost/asio/awaitable.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/message.hpp>
#include <boost/beast/http/string_body.hpp>

#include "config/config.h"
#include "gateway/api_error.h"
#include "gateway/auth.h"
#include "gateway/concurrency_limiter.h"
#include "gateway/metrics.h"
#include "providers/upstream_pool.h"
#include "routing/routing_state.h"

namespace llmgate::gateway {

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
  std::uint64_t generation = 0;  // 1 at start-up, +1 per successful reload
};

// One worker thread's state. Touched only on that thread: a reload posts the
// new snapshot to it (Envoy's thread-local-slot pattern), so the hot path
// reads its snapshot without locks or atomics.
struct Worker {
  std::shared_ptr<const Snapshot> snapshot;
  providers::UpstreamPools* pools = nullptr;
  // Never expires; cancelled when a drain runs out of time, which ends the
  // requests still in flight (wait_for_shutdown).
  net::steady_timer* shutdown = nullptr;
  std::mt19937_64 rng{1};  // this worker's: exploration, random policy
  std::string_view via_name;  // the gateway's Via pseudonym (loop detection)
};

struct RequestContext {
  std::string request_id;
  unsigned version = 11;  // client's HTTP version: 10 or 11
  bool keep_alive = true;
  std::chrono::steady_clock::time_point received{};  // the whole request was read
};

using Request = http::request<http::string_body>;
using Response = http::response<http::string_body>;

// A JSON response carrying x-request-id; keep-alive as the request allows.
Response make_json_response(const RequestContext& rc, http::status status, std::string body);
Response make_error_response(const RequestContext& rc, const ApiError& error);

// Writes a whole response with a write deadline. Returns false if the client
// is gone (the caller closes the connection).
net::awaitable<bool> write_response(beast::tcp_stream& client, Response& response,
                                    std::chrono::milliseconds timeout);

// POST /v1/chat/completions. Returns whether the connection may be kept alive.
net::awaitable<bool> handle_chat_completions(Worker& worker, beast::tcp_stream& client,
                                             const Request& request, const RequestContext& rc);

}  // namespace llmgate::gateway
