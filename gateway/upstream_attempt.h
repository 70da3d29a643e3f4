// One attempt on one deployment (upstream_attempt.cpp): take a connection
// from the worker's pool (or open one), send the request, read the response
// head under the TTFT deadline; then pass an error status through or fail
// over, or hand the event stream to the relay (relay.h).
// Includes Beast: include only from gateway .cpp files.
#pragma once

#include <boost/asio/awaitable.hpp>
#include <cstddef>
#include <cstdint>
#include <string>

#include "gateway/attempt_context.h"
#include "gateway/attempt_result.h"
#include "gateway/relay.h"
#include "providers/upstream_protocol.h"
#include "routing/stats_registry.h"

namespace llmgate::gateway {

// The largest upstream response head, and the largest answer read whole (a
// JSON answer, a stored Response): beyond them the upstream is at fault.
inline constexpr std::uint32_t kMaxUpstreamHeader = 64 * 1024;
inline constexpr std::size_t kMaxJsonAnswer = 16 * 1024 * 1024;

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

// The target of a request to `protocol_target` (path and query, e.g.
// "/chat/completions" or "/responses/resp_1") at provider `p` for its
// deployment's `model`: below base_url's path, chat's path replaced by the
// provider's chat_path (with {model} put in) when one is set — the other
// OpenAI endpoints take its prefix when it ends with /chat/completions
// (Azure's /deployments/{model}/embeddings) —, then the provider's query.
std::string upstream_target(const config::Provider& p, const std::string& model,
                            std::string_view protocol_target);

// A request to an upstream as it goes on the wire: the head (request line,
// fields, blank line) serialized once into one string, and the body. Sent in
// one gathered write (UpstreamWrite); no Beast field set is built.
struct UpstreamMessage {
  std::string head;
  std::string body;
};

// A request to `provider`: the client's end-to-end headers (not hop-by-hop
// ones, not its credentials, not what the gateway owns), Via, Host, the
// provider's key where it wants it, the protocol's and the provider's own
// headers (a later one of a name replaces an earlier one and the client's);
// `body` as JSON when not empty, with its Content-Length (as Beast's
// prepare_payload would set it). `traceparent` (traced requests): the
// attempt span's context replaces the client's, and `tracestate` its
// tracestate (dropped when empty).
UpstreamMessage make_upstream_request(http::verb method, std::string target, std::string body,
                                      bool stream, const Request& client_request,
                                      const RequestContext& rc, std::string_view via_name,
                                      const config::Provider& provider,
                                      const providers::UpstreamProtocol& protocol,
                                      std::string_view traceparent = {},
                                      std::string_view tracestate = {});

// The request's trace when tracing is on (snapshot.tracer): the client's
// traceparent and tracestate (several tracestate lines are one list, W3C
// Trace Context 3.3.1.1) make its parent; else nullopt.
std::optional<RequestTrace> begin_trace(const Snapshot& snapshot, const Request& client_request,
                                        const RequestContext& rc);

// Writes `m` on the lease's connection: the constructor sends what a plain
// connection takes at once, without waiting (most requests: no timer,
// asynchronous operation or coroutine frame); when that was not all of it
// (or over TLS), rest() writes what is left under `deadline`.
class UpstreamWrite {
 public:
  UpstreamWrite(providers::Lease& lease, const UpstreamMessage& m);
  bool done() const { return ec_ || w_.done(); }
  const beast::error_code& error() const { return ec_; }
  net::awaitable<beast::error_code> rest(std::chrono::steady_clock::time_point deadline);

 private:
  providers::Lease& lease_;
  GatheredWrite w_;
  beast::error_code ec_;
};

// Reads the rest of a response body into `body` while it holds fewer than
// `limit` bytes, under the deadline already set on the connection. Returns
// the read's error, if one ended it.
net::awaitable<beast::error_code> read_upstream_body(providers::Lease& lease,
                                                     UpstreamParser& parser, std::string& body,
                                                     std::size_t limit);

}  // namespace llmgate::gateway
