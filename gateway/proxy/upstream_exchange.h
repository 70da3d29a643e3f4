// One exchange with a provider, up to its response head
// (upstream_exchange.cpp), used by every request the gateway sends
// upstream -- a routed attempt (upstream_attempt.h) and a forwarded
// resource call (response_resource.h) alike: take a connection (a pooled
// idle one first), write the request, read the response head; a reused
// keep-alive connection that the peer had closed before any byte of an
// answer is retried once on a fresh one (the one stale-connection rule).
// And the pieces of it: the request as it goes on the wire, and its write.
// (The body's reads: upstream_body.h.)
// Includes Beast: include only from gateway .cpp files.
#pragma once

#include <boost/asio/awaitable.hpp>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "gateway/proxy/attempt_context.h"
#include "gateway/proxy/upstream_parser.h"
#include "providers/cloud/token_source.h"
#include "providers/upstream_pool.h"
#include "providers/upstream_protocol.h"

namespace llmgate::gateway {

// The largest upstream response head, and the largest answer read whole (a
// JSON answer, a stored Response): beyond them the upstream is at fault.
inline constexpr std::uint32_t kMaxUpstreamHeader = 64 * 1024;
inline constexpr std::size_t kMaxJsonAnswer = 16 * 1024 * 1024;

// The target of a request to `protocol_target` (path and query, e.g.
// "/chat/completions" or "/responses/resp_1") at provider `p` for its
// deployment's `model`: below base_url's path, chat's path replaced by the
// provider's chat_path (with {model} put in) when one is set — the other
// OpenAI endpoints take its prefix when it ends with /chat/completions
// (Azure's /deployments/{model}/embeddings) —, then the provider's query.
// Written into `out` (assigned: a caller's kept string is reused); the
// view is of it. `protocol_target` must not be a view into `out`.
std::string_view upstream_target(std::string& out, const config::Provider& p,
                                 const std::string& model, std::string_view protocol_target);

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
// tracestate (dropped when empty). `credential`: its bearer token goes in
// Authorization (auth:), or the request is signed with its AWS credentials
// (AWS Signature Version 4, for the provider's aws_region; Bedrock).
UpstreamMessage make_upstream_request(http::verb method, std::string_view target, std::string body,
                                      bool stream, const Request& client_request,
                                      const RequestContext& rc, std::string_view via_name,
                                      const config::Provider& provider,
                                      const providers::UpstreamProtocol& protocol,
                                      std::string_view traceparent = {},
                                      std::string_view tracestate = {},
                                      const providers::cloud::Credential* credential = nullptr);

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

// How long each step of an exchange may take; none ends after `by`.
struct ExchangeTimes {
  std::chrono::steady_clock::duration connect;  // taking a connection (DNS, TCP, TLS, a slot)
  std::chrono::steady_clock::duration write;    // writing the request, from its start
  // The response head, from the moment the request left (max(): only `by`).
  std::chrono::steady_clock::duration head = std::chrono::steady_clock::duration::max();
  std::chrono::steady_clock::time_point by = std::chrono::steady_clock::time_point::max();
};

// What an exchange came to. On kHead the head is in `parser` and the body
// follows on `lease`.
struct Exchanged {
  enum class Status {
    kHead,          // a response head was read
    kConnectError,  // no connection (`error` says why)
    kWriteError,    // the request could not be sent (`ec`)
    kHeadError,     // no head: a timeout or the connection ended (`ec`)
    kCancelled,     // the caller's coroutine was cancelled while it waited
  };
  Status status = Status::kConnectError;
  beast::error_code ec;
  std::string error;
  // When the request left (kHead, kHeadError; a request written at once:
  // the moment before the write, so a preempted worker cannot shrink a
  // first-token time measured from it).
  std::chrono::steady_clock::time_point sent{};
  std::chrono::steady_clock::duration acquire_time{};  // of the last round
  bool head_timed_out() const {
    return status == Status::kHeadError && ec == beast::error::timeout;
  }
  // Why no head came (not kHead), in words for an error message: "cannot
  // connect: ...", "cannot send the request: ...", "no answer in time",
  // "the connection closed before an answer (...)", "cancelled".
  std::string why_no_head() const;
};

// Sends `m` to `pool`'s provider and reads the response head into
// `parser` (emplaced anew for each round) on `lease`. `may_retry_stale`:
// a reused connection may be retried once on a fresh one.
net::awaitable<Exchanged> exchange_head(providers::ConnectionPool& pool, providers::Lease& lease,
                                        std::optional<UpstreamParser>& parser,
                                        const UpstreamMessage& m, const ExchangeTimes& times,
                                        bool may_retry_stale = true);

// An answer read whole (a token count, a token endpoint's answer), or why
// none came (status 0).
struct WholeAnswer {
  int status = 0;
  std::string body;
  std::string error;
};
// exchange_head(), then the body read whole while it is under `limit`
// bytes (beyond: no answer), all by `times.by`; the connection goes back to
// `pool` when the answer keeps it alive.
net::awaitable<WholeAnswer> exchange_whole(providers::ConnectionPool& pool,
                                           const UpstreamMessage& m, const ExchangeTimes& times,
                                           std::size_t limit);

}  // namespace llmgate::gateway
