// What an upstream attempt and its relay know of their request: the client's
// connection and head, the admitted request, the config snapshot, the total
// deadline, the route so far (for the response headers) and the hedge race
// it may be in — not the proxy that orchestrates the attempts.
// Includes Beast: include only from gateway .cpp files.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gateway/apis/chat_request.h"
#include "gateway/apis/client_api.h"
#include "gateway/http/http_response.h"
#include "gateway/observe/tracer.h"
#include "gateway/proxy/continuation.h"
#include "gateway/proxy/failover_policy.h"
#include "gateway/proxy/race.h"
#include "gateway/proxy/snapshot.h"
#include "gateway/proxy/upstream_parser.h"
#include "gateway/proxy/worker.h"
#include "providers/upstream_protocol.h"
#include "routing/attempt_record.h"
#include "routing/router.h"

namespace llmgate::gateway {

// How the request has been routed so far: the plan, the failures, the
// attempts, the race. The response headers and the request log say it.
struct RouteTrace {
  routing::RouteDecision decision;
  failover::FailureSummary failures;
  int attempts = 0;
  Race* race = nullptr;  // the hedge race running now, if any
  // The client may see how it was routed: deployments, prices, exclusions
  // (server.explain). The log always has it.
  bool explain = false;
  // The race decided (a side claimed the client): the deployment of the
  // side that lost, and whether the race was learning about the first
  // (explored, re-checked, probed) rather than a hedge.
  std::string race_lost;
  bool race_learning = false;
  // What the attempt made to learn about a deployment taught: "recheck
  // groq/llama (never answered): learnt 321ms" (ChatProxy::note_lesson).
  std::string lesson;

  // x-request-id, the policy, the attempts and the hedge; the TTFT of `rec`;
  // and, with `explain`, the route, the deployment and the failures.
  void add_headers(http::fields& h, const std::string& request_id,
                   const routing::AttemptRecord* rec) const;
  void add_headers(HeadLines& h, const std::string& request_id,
                   const routing::AttemptRecord* rec) const;
  // "hedge-won" / "primary-won" when a hedge started, else empty.
  std::string_view hedged() const;
  // routing::explain(decision), rendered once for the header and the log;
  // plan_changed() forgets it when the plan grows (a reserve promoted).
  const std::string& route_text() const;
  void plan_changed() { route_text_.reset(); }

 private:
  mutable std::optional<std::string> route_text_;
};

// The headers of the upstream's answer a client relies on, copied to the
// client's response: `x-ratelimit-*` and `openai-processing-ms` (and, for an
// error passed through, `retry-after`).
void relay_upstream_headers(const UpstreamHead& upstream, http::fields& out,
                            bool with_retry_after = false);
void relay_upstream_headers(const UpstreamHead& upstream, HeadLines& out,
                            bool with_retry_after = false);

// A provider's context-length 400, in OpenAI's shape ("" when it had no
// error object: the gateway's own words then), and the refusing deployment's
// configured window.
struct ContextRefusal {
  int status = 400;
  std::string body;
  std::string detail;
  std::optional<std::int64_t> window;
};

struct AttemptContext {
  Worker& worker;
  const Snapshot& snapshot;
  const config::Config& cfg;
  beast::tcp_stream& client;
  const Request& client_request;
  const RequestContext& rc;
  const ClientApi& api;  // the endpoint's client API (chat, responses, ...)
  ChatRequest& req;      // its body is rewritten for each upstream request
  RouteTrace& trace;
  const config::GatewayKey* key = nullptr;        // the caller's gateway key, if keys are on
  const RequestTrace* request_trace = nullptr;    // with tracing: the request's trace
  std::chrono::steady_clock::time_point start{};  // the request's arrival at the proxy
  bool stream_committed = false;                  // a streaming response head went to the client
  // The first context-length refusal passed over for a larger window
  // (docs/routing.md, "Context windows"): the client's answer if no later
  // attempt gives one.
  std::optional<ContextRefusal> context_refusal = std::nullopt;
  bool client_write_failed = false;  // a client write failed or was cut part-way
  bool admission_measured = false;   // the admission overhead metric was observed
  // The request's stream may be continued after a break (continuation.h):
  // the proxy's, else null.
  StreamContinuation* continuation = nullptr;
  // The speed guard before commit (config::CommitAfter), for an attempt
  // another candidate follows (the proxy's: off for the plan's last).
  config::CommitAfter commit_after{};

  // The attempt on `branch` has output and takes the client; false when the
  // other side of a hedge race already has (or this side declined it:
  // Race::claim). `whole`: the attempt holds its whole answer.
  bool claim(int branch, bool whole = false) {
    return trace.race == nullptr || trace.race->claim(branch, whole);
  }
  // This attempt declined the client in its race and reads on unclaimed.
  bool deferred(int branch) const { return trace.race && trace.race->declined(branch); }
  // A candidate after `c` in the plan may hold a prompt `c` refused as too
  // long: its context window is larger, or either one's is not known.
  bool larger_window_follows(const routing::Candidate& c) const;
  // The request's end on `c`: its provider's timeouts.total (else the
  // global one) from the start.
  std::chrono::steady_clock::time_point total_deadline(const routing::Candidate& c) const {
    return start + c.timeouts.total;
  }
  // The deadlines of an attempt on `c`.
  failover::Deadlines deadlines(const routing::Candidate& c) const {
    return failover::Deadlines(c.timeouts, total_deadline(c), c.stall);
  }
  // Records what fault `f` makes of the attempt in `rec` (outcome, detail)
  // and returns the judgement (failover_policy.h).
  // `replaceable`: the client has seen nothing of the attempt (its pause
  // was the stall deadline).
  failover::FaultReport judge(const routing::Candidate& c, routing::AttemptRecord& rec,
                              failover::Fault f, std::string_view text,
                              bool replaceable = false) const;
  // The configured provider keys, for redact_secrets (failure paths only).
  std::vector<std::string> provider_keys() const;
  // Whether attempts at the candidate ask for a stream (config, and what the
  // gateway learnt: a deployment that refused to stream gets JSON requests).
  bool streams(const routing::Candidate& c) const;
  // What an attempt at `c` asks its upstream for (the wire options as
  // configured and learnt).
  providers::UpstreamRequest upstream_request(const routing::Candidate& c) const;
  // The protocol of an attempt at `c` for this request's operation (never
  // null once planned: a candidate without one makes no attempt).
  const providers::UpstreamProtocol& protocol(const routing::Candidate& c) const {
    return *api.protocol_for(*c.provider);  // (the proxy passed over a provider without one)
  }
  // A stored response (Responses API) was created at `c`'s provider: later
  // requests that continue it, and GETs of it, go there.
  void remember_response(const std::string& id, const routing::Candidate& c) const;
};

}  // namespace llmgate::gateway
