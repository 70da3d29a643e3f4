#include "gateway/proxy/failover_policy.h"

#include <algorithm>

#include "config/ascii.h"

namespace llmgate::gateway::failover {

StatusVerdict judge_status(int status) {
  // 401/403/404 from a provider are about our key or our config, not the
  // caller's request: another deployment may well serve it.
  const bool deployment = status == 408 || status == 429 || status >= 500 || status == 401 ||
                          status == 403 || status == 404;
  return deployment ? StatusVerdict::kFailOver : StatusVerdict::kReturnToClient;
}

bool needs_operator(int status) { return status == 401 || status == 403 || status == 404; }

bool is_context_length_error(int status, std::string_view code, std::string_view message) {
  if (status != 400 && status != 413) return false;
  if (code == "context_length_exceeded") return true;
  // The providers' words (lower-cased compare: "Prompt is too long" too).
  const std::string lower = config::ascii_lowercase(message.substr(0, 1000));
  for (std::string_view said :
       {"context_length_exceeded", "maximum context length", "context window", "prompt is too long",
        "exceeds the maximum number of tokens", "input token count", "too many input tokens",
        "context length"}) {
    if (lower.find(said) != std::string::npos) return true;
  }
  return false;
}

namespace {

ApiError upstream_error(std::string message, const char* code) {
  return ApiError{502, "upstream_error", std::move(message), std::nullopt, code, std::nullopt};
}

std::string ms(std::chrono::milliseconds d) { return std::to_string(d.count()) + "ms"; }

FaultReport read_timeout(const FaultContext& c) {
  const auto& t = c.deadlines.timeouts();
  AttemptOutcome o;
  std::string detail;
  if (c.deadlines.total_expired(c.now)) {
    o = AttemptOutcome::kTotalTimeout;
    detail = "request deadline expired";
  } else if (c.first_token_seen) {
    o = AttemptOutcome::kIdleTimeout;
    detail = "stream stalled: no data for " + ms(c.deadlines.pause(c.replaceable));
    if (c.deadlines.stall_derived(c.replaceable))
      detail += " (the stall deadline its streams' pauses give)";
  } else {
    o = AttemptOutcome::kTtftTimeout;
    detail = "no first token within the TTFT deadline of " + ms(t.ttft);
  }
  ApiError e{
      504,          "timeout_error",    "the upstream stream failed after it started: " + detail,
      std::nullopt, "upstream_timeout", std::nullopt};
  return {o, std::move(detail), std::move(e)};
}

}  // namespace

FaultReport judge_fault(Fault fault, const FaultContext& c) {
  const std::string text(c.text);
  switch (fault) {
    case Fault::kHeadTimeout: {
      const bool total = c.deadlines.total_expired(c.now);
      std::string detail =
          "no response within the TTFT deadline of " + ms(c.deadlines.timeouts().ttft);
      return {
          total ? AttemptOutcome::kTotalTimeout : AttemptOutcome::kTtftTimeout, detail,
          ApiError{504, "timeout_error", detail, std::nullopt, "upstream_timeout", std::nullopt}};
    }
    case Fault::kHeadCut: {
      std::string detail = "connection failed before response headers: " + text;
      return {AttemptOutcome::kTruncated, detail,
              upstream_error(detail, "upstream_stream_truncated")};
    }
    case Fault::kNotEventStream: {
      // (`text`: the Content-Type, quoted, and what was expected.)
      std::string detail = "upstream answered 200 with Content-Type " + text;
      return {AttemptOutcome::kMalformed, detail,
              upstream_error(detail, "upstream_malformed_event")};
    }
    case Fault::kInBandError:
      // The upstream's words go to the log (redacted), never to the client.
      return {
          AttemptOutcome::kMalformed, "in-band error event: " + text,
          upstream_error("the upstream reported an error in the stream", "upstream_stream_error")};
    case Fault::kMalformedEvent:
      return {AttemptOutcome::kMalformed, text, upstream_error(text, "upstream_malformed_event")};
    case Fault::kEventTooLarge: {
      std::string msg =
          "upstream event larger than " + std::to_string(c.max_event_bytes) + " bytes";
      return {AttemptOutcome::kMalformed, msg, upstream_error(msg, "upstream_event_too_large")};
    }
    case Fault::kReadTimeout:
      return read_timeout(c);
    case Fault::kCut: {
      std::string detail = "upstream stream cut: " + text;
      return {AttemptOutcome::kTruncated, detail,
              upstream_error("the upstream stream failed after it started: " + detail,
                             "upstream_stream_truncated")};
    }
    case Fault::kEndedWithoutFinish: {
      std::string detail = "upstream ended the stream without [DONE] or a finish_reason";
      return {AttemptOutcome::kTruncated, detail,
              upstream_error("the upstream stream was truncated: " + detail,
                             "upstream_stream_truncated")};
    }
  }
  return {AttemptOutcome::kMalformed, text, upstream_error(text, "upstream_error")};
}

Effects effects_of(const routing::AttemptRecord& rec, std::chrono::milliseconds planned_ttft,
                   std::chrono::milliseconds configured_ttft) {
  Effects e;
  // Missing a deadline derived from the deployment's own recent p95 means it
  // is slow, not broken: the estimator (a censored sample) moves traffic off
  // it, and ejecting it would only keep it out after it recovers. Silence
  // for the whole configured TTFT timeout is a failure for health.
  // Likewise a stream given up at the stall deadline derived from its
  // deployment's pauses, before the idle timeout.
  const bool merely_slow =
      (rec.outcome == AttemptOutcome::kTtftTimeout && planned_ttft < configured_ttft) ||
      (rec.outcome == AttemptOutcome::kIdleTimeout && rec.stall_derived);
  if (!routing::outcome_traits(rec.outcome).about_deployment || merely_slow) {
    e.health = HealthEffect::kNone;
  } else {
    e.health =
        rec.outcome == AttemptOutcome::kSuccess ? HealthEffect::kSuccess : HealthEffect::kFailure;
  }
  // 529: Anthropic's "overloaded", its 503.
  e.cooldown = rec.retry_after_s.has_value() &&
               (rec.http_status == 429 || rec.http_status == 503 || rec.http_status == 529);
  return e;
}

void FailureSummary::shared_state_unavailable(const std::string& deployment) {
  saturated_ = true;
  details_.push_back(deployment +
                     ": its max_concurrent is shared and the shared state is unavailable "
                     "(on_failure: closed)");
  short_.push_back(deployment + "=shared_state_unavailable");
}

void FailureSummary::saturated(const std::string& deployment, std::string why) {
  saturated_ = true;
  only_shared_state_ = false;
  details_.push_back(deployment + ": " + std::move(why));
  short_.push_back(deployment + "=saturated");
}

void FailureSummary::untranslatable(const std::string& deployment, std::string message,
                                    std::string param) {
  details_.push_back(deployment + ": " + message);
  short_.push_back(deployment + "=unsupported(" + param + ")");
  if (!untranslatable_) untranslatable_.emplace(std::move(message), std::move(param));
}

void FailureSummary::failed(const routing::AttemptRecord& rec) {
  outcomes_.push_back(rec.outcome);
  details_.push_back(rec.deployment + ": " + rec.detail);
  std::string s = rec.deployment + "=" + routing::to_string(rec.outcome);
  if (rec.http_status && rec.http_status != 200) s += "(" + std::to_string(rec.http_status) + ")";
  short_.push_back(std::move(s));
  if (rec.retry_after_s) {
    min_retry_after_ = std::min(min_retry_after_.value_or(*rec.retry_after_s), *rec.retry_after_s);
  }
  if (rec.http_status != 429) all_rate_limited_ = false;
  last_fault_code_ = rec.fault_code;
}

std::string FailureSummary::header() const {
  std::string out;
  for (const auto& f : short_) {
    if (out.size() + f.size() > 512) break;
    out += (out.empty() ? "" : ", ") + f;
  }
  return out;
}

std::string FailureSummary::log_field() const {
  std::string out;
  for (const auto& f : short_) out += (out.empty() ? "" : ",") + f;
  return out;
}

std::string FailureSummary::detail() const {
  std::string out;
  for (const auto& f : details_) out += (out.empty() ? "" : "; ") + f;
  return out;
}

ApiError FailureSummary::final_error(const std::string& model, int attempts, bool explain,
                                     bool total_expired) const {
  // The client learns the public model, how many attempts failed and how,
  // never an upstream's own words (a provider's 401 quotes the operator's
  // key) nor, unless it may see route explanations, which deployments.
  std::string how;
  for (const auto& f : short_) {
    std::string_view item = f;
    if (!explain) item = item.substr(item.find('=') + 1);
    how += (how.empty() ? "" : ", ") + std::string(item);
  }
  if (attempts == 0 && untranslatable_ && !saturated_) {
    // No deployment that could be tried speaks a protocol that can say this
    // request: the client's to change (the message names the parameter).
    return ApiError{400,
                    "invalid_request_error",
                    untranslatable_->first + (short_.size() > 1 ? " (" + how + ")" : ""),
                    untranslatable_->second,
                    "unsupported_parameter",
                    std::nullopt};
  }
  if (attempts == 0 && saturated_ && only_shared_state_) {
    return ApiError{503,
                    "service_unavailable",
                    "the deployments of model \"" + model +
                        "\" share their concurrency limits through the gateway's shared state, "
                        "which is unavailable; try again shortly (" +
                        how + ")",
                    std::nullopt,
                    "shared_state_unavailable",
                    1};
  }
  if (attempts == 0 && saturated_) {
    return ApiError{
        503,
        "service_unavailable",
        "every deployment of model \"" + model + "\" is at its concurrency limit (" + how + ")",
        std::nullopt,
        "upstream_saturated",
        1};
  }
  if (attempts == 0) {
    return ApiError{
        504,          "timeout_error",    "request deadline expired before any upstream attempt",
        std::nullopt, "upstream_timeout", std::nullopt};
  }
  std::string msg = "all " + std::to_string(attempts) + " upstream attempt(s) for model \"" +
                    model + "\" failed (" + how + ")";
  if (all_rate_limited_) {
    return ApiError{429,          "rate_limit_error",      std::move(msg),
                    std::nullopt, "upstream_rate_limited", min_retry_after_.value_or(1)};
  }
  if (budget_exhausted_) msg += "; no further fallback: the retry budget is exhausted";
  const bool timed_out =
      !outcomes_.empty() && (outcomes_.back() == AttemptOutcome::kTtftTimeout ||
                             outcomes_.back() == AttemptOutcome::kIdleTimeout ||
                             outcomes_.back() == AttemptOutcome::kTotalTimeout || total_expired);
  if (timed_out) {
    return ApiError{504,          "timeout_error",    std::move(msg),
                    std::nullopt, "upstream_timeout", std::nullopt};
  }
  // The last attempt failed after its first token: the code a streaming
  // client gets for that fault (upstream_stream_error for an in-band error).
  return ApiError{502,
                  "upstream_error",
                  std::move(msg),
                  std::nullopt,
                  last_fault_code_.empty() ? "upstream_unavailable" : last_fault_code_,
                  std::nullopt};
}

}  // namespace llmgate::gateway::failover
