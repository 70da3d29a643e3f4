// The relay: an attempt's upstream event stream to the client, from the
// response head on (relay.cpp). Events are held until the first output
// token, then committed (the head and the held events in one write) and
// relayed as they complete; a non-streaming client gets one assembled body.
// Includes Beast: include only from gateway .cpp files.
#pragma once

#include <boost/asio/awaitable.hpp>

#include "gateway/proxy/attempt_context.h"
#include "gateway/proxy/attempt_result.h"
#include "gateway/proxy/upstream_parser.h"
#include "providers/upstream_pool.h"
#include "providers/upstream_protocol.h"
#include "routing/stats_registry.h"

namespace llmgate::gateway {

// One attempt's upstream as the relay sees it: the 200 event-stream head has
// been read from `parser`; the body follows on `lease`.
struct RelayUpstream {
  const routing::Candidate& c;
  routing::AttemptRecord& rec;
  providers::Lease& lease;
  UpstreamParser& parser;
  int branch;                                   // the side of a hedge race, else 0
  routing::StatsRegistry::InFlight& in_flight;  // no longer awaiting at the first token
  const providers::UpstreamProtocol& protocol;  // how its events are read
  const providers::UpstreamRequest& request;    // what the attempt asked for
};

// Relays the events of `up` to the client under the read deadlines, records
// the outcome in `up.rec`, and keeps the upstream connection when its
// response ends cleanly.
net::awaitable<AttemptResult> relay(AttemptContext& ctx, RelayUpstream up);

}  // namespace llmgate::gateway
