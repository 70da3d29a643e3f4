// The failover policy: what each way an upstream attempt can end means for
// the request (fail over, or end the client's stream), for health and for
// the client's final error; when each wait of an attempt ends. Pure: no
// sockets, no Beast, no clock reads (every time is an argument), so every
// row of docs/failure-semantics.md is a unit test
// (tests/unit/gateway/failover_policy_test.cpp).
//
// The proxy (chat_proxy.cpp, upstream_attempt.cpp, relay.cpp) observes and
// asks; the decisions are here. What an outcome does to the TTFT statistics
// is routing's (routing/attempt_record.h: outcome_traits).
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "config/config.h"
#include "gateway/http/api_error.h"
#include "gateway/observe/vocabulary.h"
#include "routing/attempt_record.h"

namespace llmgate::gateway::failover {

using Clock = std::chrono::steady_clock;
using routing::AttemptOutcome;

// ---- Upstream statuses ------------------------------------------------------

enum class StatusVerdict {
  kFailOver,        // about the deployment (408, 429, 5xx, 401/403/404 of our key or config)
  kReturnToClient,  // about the request (400, 413, 422...): the next deployment would say the same
};
StatusVerdict judge_status(int status);
// A provider refusing our own key or config: the operator must act (warn log).
bool needs_operator(int status);

// A provider's refusal of a prompt too long for the model's context window:
// OpenAI's code context_length_exceeded, vLLM's "maximum context length",
// Anthropic's "prompt is too long", Gemini's "input token count ... exceeds
// the maximum number of tokens". `code` and `message` are the error body's.
bool is_context_length_error(int status, std::string_view code, std::string_view message);

// ---- Deadlines --------------------------------------------------------------

// Every wait of one attempt ends at one of these, never later than the
// request's own deadline (`timeouts.total` from its start). `planned` are the
// candidate's timeouts as the router planned them: its TTFT may be the live
// deadline (p95 x factor), shorter than the configured one.
class Deadlines {
 public:
  Deadlines(const config::Timeouts& planned, Clock::time_point total,
            std::chrono::milliseconds stall = {})
      : t_(planned), total_(total), stall_(stall) {}

  Clock::time_point total() const { return total_; }
  const config::Timeouts& timeouts() const { return t_; }
  // Taking a connection (pooled or new: DNS, TCP, TLS), or a concurrency slot.
  Clock::time_point connect(Clock::time_point now) const { return cap(now + t_.connect); }
  // Writing the request upstream: how long it may take, and until when.
  Clock::duration write_timeout() const { return t_.connect + t_.ttft; }
  Clock::time_point write(Clock::time_point now) const { return cap(now + write_timeout()); }
  // The response head and then the events, until the first output token.
  Clock::time_point first_token(Clock::time_point request_sent) const {
    return cap(request_sent + t_.ttft);
  }
  // How long a stream may pause after its first token: the idle timeout,
  // or while the attempt is `replaceable` (the client has seen nothing of
  // it: another deployment can still answer) the stall deadline the router
  // derived from the deployment's pauses, when it has one.
  std::chrono::milliseconds pause(bool replaceable) const {
    return replaceable && stall_.count() > 0 ? std::min(stall_, t_.idle) : t_.idle;
  }
  // The pause is the derived stall deadline, shorter than the idle timeout.
  bool stall_derived(bool replaceable) const { return pause(replaceable) < t_.idle; }
  // The next upstream read: the TTFT deadline until the first token, then the
  // pause from now.
  Clock::time_point next_read(Clock::time_point now, Clock::time_point request_sent,
                              bool first_token_seen, bool replaceable = false) const {
    return first_token_seen ? cap(now + pause(replaceable)) : first_token(request_sent);
  }
  bool total_expired(Clock::time_point now) const { return now >= total_; }

 private:
  Clock::time_point cap(Clock::time_point t) const { return t < total_ ? t : total_; }
  config::Timeouts t_;
  Clock::time_point total_;
  std::chrono::milliseconds stall_;
};

// ---- Faults -----------------------------------------------------------------

// Every way an attempt can break, in the words of the observer (the attempt
// reading the head, the relay reading events).
enum class Fault {
  kHeadTimeout,     // no response head by the deadline
  kHeadCut,         // the connection failed before a response head
  kNotEventStream,  // a 200 not in the protocol's framing (text: the Content-Type, quoted, and what
                    // was expected)
  kInBandError,     // an {"error":...} event
  kMalformedEvent,  // an event that is not a valid chunk
  kEventTooLarge,   // an event over server.limits.max_event_size
  kReadTimeout,     // no data by the read deadline (TTFT, idle or total)
  kCut,             // the connection failed mid-body
  kEndedWithoutFinish,  // a clean end of body without [DONE] or a finish_reason
};

struct FaultContext {
  const Deadlines& deadlines;
  Clock::time_point now;
  bool first_token_seen = false;
  std::size_t max_event_bytes = 0;
  // The observer's words: the upstream's (redacted) error message, the
  // parser's, the socket error's or the Content-Type.
  std::string_view text;
  // The client has seen nothing of the attempt (Deadlines::pause).
  bool replaceable = false;
};

// What a fault makes of the attempt: its outcome and detail (log, metrics,
// x-llmgate-failed) and, when the client's stream had already started, the
// error event that ends it (never [DONE]). Before commit the next candidate
// is tried instead and `client_error` is unused.
struct FaultReport {
  AttemptOutcome outcome;
  std::string detail;
  ApiError client_error;
};
FaultReport judge_fault(Fault fault, const FaultContext& ctx);

// ---- Effects of a finished attempt -------------------------------------------

enum class HealthEffect {
  kNone,  // says nothing about the deployment: the client's doing, a lost
          // hedge, or merely slow (it missed a deadline tighter than the
          // configured TTFT timeout: the estimator moves traffic, ejection would not)
  kSuccess,
  kFailure,
};
struct Effects {
  HealthEffect health = HealthEffect::kNone;
  bool cooldown = false;  // a 429/503 with Retry-After: the deployment cools down
};
// `planned_ttft` is the deadline the attempt had, `configured_ttft` the
// provider's timeouts.ttft.
Effects effects_of(const routing::AttemptRecord& rec, std::chrono::milliseconds planned_ttft,
                   std::chrono::milliseconds configured_ttft);

// ---- The request's failures -------------------------------------------------

// Everything that went wrong for one request, and what the client is told
// when nothing succeeded.
class FailureSummary {
 public:
  // A candidate skipped as saturated; `why` is for the log.
  void saturated(const std::string& deployment, std::string why);
  // A candidate skipped because its max_concurrent is shared and the shared
  // state is unavailable (on_failure: closed): not saturated, and said so.
  void shared_state_unavailable(const std::string& deployment);
  // A candidate passed over: its protocol cannot express the request
  // (`message` and `param` are the client's: they name the parameter, never
  // an upstream's words).
  void untranslatable(const std::string& deployment, std::string message, std::string param);
  // A failed attempt (not a lost hedge, not the client's doing).
  void failed(const routing::AttemptRecord& rec);
  void budget_exhausted() { budget_exhausted_ = true; }

  bool empty() const { return short_.empty(); }
  const std::vector<AttemptOutcome>& outcomes() const { return outcomes_; }
  // "deployment=outcome(status), ..." for x-llmgate-failed (at most ~512 bytes).
  std::string header() const;
  // The same, comma-separated without spaces, for the request log.
  std::string log_field() const;
  // "deployment: detail; ..." for the warn log (the caller redacts it).
  std::string detail() const;

  // The client's error after `attempts` attempts of model `model` all failed
  // (or none could be made). Names deployments only when `explain`; never
  // an upstream's own words.
  ApiError final_error(const std::string& model, int attempts, bool explain,
                       bool total_expired) const;

 private:
  std::vector<std::string> details_;  // "deployment: reason"
  std::vector<std::string> short_;    // "deployment=outcome"
  std::vector<AttemptOutcome> outcomes_;
  std::optional<int> min_retry_after_;
  bool all_rate_limited_ = true;
  std::string last_fault_code_;  // the last attempt's, when it failed after its first token
  bool budget_exhausted_ = false;
  bool saturated_ = false;         // a candidate was skipped without an attempt
  bool only_shared_state_ = true;  // ... each for want of the shared state
  // The first untranslatable request's reason, for a 400 when nothing else ran.
  std::optional<std::pair<std::string, std::string>> untranslatable_;
};

}  // namespace llmgate::gateway::failover
