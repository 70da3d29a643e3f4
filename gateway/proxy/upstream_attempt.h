// One attempt on one deployment (upstream_attempt.cpp): take a connection
// from the worker's pool (or open one), send the request, read the response
// head under the TTFT deadline; then pass an error status through or fail
// over, or hand the event stream to the relay (relay.h).
// Includes Beast: include only from gateway .cpp files.
#pragma once

#include <boost/asio/awaitable.hpp>
#include <string>
#include <string_view>

#include "gateway/proxy/attempt_context.h"
#include "gateway/proxy/attempt_result.h"
#include "gateway/proxy/relay.h"
#include "gateway/proxy/upstream_exchange.h"
#include "providers/upstream_protocol.h"
#include "routing/stats_registry.h"

namespace llmgate::gateway {

// The attempt's outcome and detail are left in `rec` on every path; the
// caller records them (statistics, health, metrics) when the attempt ends.
// `request` is what it asks for and `body` the upstream body built for it
// (providers::UpstreamProtocol::body, by the caller: a request the protocol
// cannot express is no attempt at all).
net::awaitable<AttemptResult> run_upstream_attempt(AttemptContext& ctx, const routing::Candidate& c,
                                                   routing::AttemptRecord& rec, int branch,
                                                   routing::StatsRegistry::InFlight& in_flight,
                                                   const providers::UpstreamRequest& request,
                                                   std::string body,
                                                   std::string_view traceparent = {});

}  // namespace llmgate::gateway
