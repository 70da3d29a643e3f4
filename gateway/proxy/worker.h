// One worker thread's state. Includes Beast: include only from gateway .cpp files.
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

#include "gateway/observe/route_history.h"
#include "gateway/proxy/response_owners.h"
#include "gateway/proxy/snapshot.h"
#include "providers/upstream_pool.h"
#include "providers/wire_quirks.h"

namespace llmgate::gateway {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = boost::beast::http;

class RequestWatches;  // client_stream.h

// One worker thread's state. Touched only on that thread: a reload posts the
// new snapshot to it (Envoy's thread-local-slot pattern), so the hot path
// reads its snapshot without locks or atomics.
struct Worker {
  std::shared_ptr<const Snapshot> snapshot;
  providers::UpstreamPools* pools = nullptr;
  // The requests in flight that a client hang-up or the end of a drain
  // ends (run_watched).
  RequestWatches* watches = nullptr;
  std::mt19937_64 rng{1};                   // this worker's: exploration, random policy
  std::string_view via_name;                // the gateway's Via pseudonym (loop detection)
  providers::WireQuirks* quirks = nullptr;  // what deployments were found to refuse
  ResponseOwners* responses = nullptr;      // which provider stored each response
  RouteHistory* history = nullptr;          // the console's: failovers, hedges, failures
};

}  // namespace llmgate::gateway
