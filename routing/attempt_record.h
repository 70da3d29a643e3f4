// One upstream attempt, as measured by the gateway. This is the single record
// the router learns from (routing/stats_registry.h), so the measurement points
// are defined here once:
//   - TTFT: from the moment the request was written upstream to the first SSE
//     event that carries output (content, refusal, reasoning or a tool call) —
//     not the first byte and not the role-only chunk.
//   - Output tokens: from the upstream's usage (the gateway always asks for it).
//   - TPS: output tokens / (last output event - first output event).
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace llmgate::routing {

using Clock = std::chrono::steady_clock;

enum class AttemptOutcome {
  kSuccess,         // stream completed ([DONE] or clean end after finish_reason)
  kConnectError,    // DNS, TCP, TLS, pool exhausted
  kUpstreamStatus,  // a non-200 status that is retried (5xx, 429, 401/403 of our key...)
  kClientError,     // a 4xx that is the caller's fault: returned, not retried
  kTtftTimeout,     // no first token within the TTFT deadline
  kIdleTimeout,     // stall after the first token
  kTruncated,       // stream cut before it finished
  kMalformed,       // non-SSE body, bad JSON event, oversized event, in-band error
  kClientGone,      // the client disconnected: the attempt was abandoned
  kTotalTimeout,    // the request's overall deadline expired
  kHedgeLost,       // cancelled before its first token: a hedge raced it and won
  // No credential to send: a token not fetched (yet), expired or refused
  // (auth:, Bedrock's AWS credentials). Never sent; fails over.
  kCredentialError,
};

const char* to_string(AttemptOutcome o);

// What an outcome says, in one place: the statistics (stats_registry.cpp),
// health and the failover policy (gateway/proxy/failover_policy.h) read it here.
struct OutcomeTraits {
  // False for the client's own doing and for a lost hedge: no effect on
  // health, error rate or latency statistics.
  bool about_deployment = true;
  // The attempt was still waiting for its first token when the gateway
  // stopped waiting: its TTFT is only known to exceed the wait (a censored
  // sample, routing/windowed_quantiles.h).
  bool waited_for_first_token = false;
};
constexpr OutcomeTraits outcome_traits(AttemptOutcome o) {
  switch (o) {
    case AttemptOutcome::kClientGone:
    case AttemptOutcome::kClientError:
    case AttemptOutcome::kHedgeLost:
      return {false, false};
    case AttemptOutcome::kTtftTimeout:
    case AttemptOutcome::kTotalTimeout:
      return {true, true};
    default:
      return {true, false};
  }
}

struct AttemptRecord {
  std::string deployment;  // Deployment::id(): "provider/model"
  // Where its statistics go (stats_key: the deployment, or the deployment
  // at the request's reasoning effort); empty: the deployment's own.
  std::string stats_key;
  const std::string& stats_id() const { return stats_key.empty() ? deployment : stats_key; }
  AttemptOutcome outcome = AttemptOutcome::kConnectError;
  // A fault after the first token: the error code a streaming client got
  // for it (upstream_stream_error, ...), which a non-streaming one whose
  // every attempt failed gets too; else empty.
  std::string fault_code;
  // The half-open probe of its deployment (HealthTracker::check).
  bool probe = false;
  // Made to learn about its deployment (an exploration, a re-check, a size
  // race: PlannedCandidate::learn_reason). One that ends without a first
  // token taught nothing (DeploymentStats::lessons_missed).
  bool learning = false;
  int http_status = 0;
  Clock::time_point started{};       // attempt began (before connect)
  Clock::time_point request_sent{};  // request fully written upstream
  std::optional<Clock::time_point> first_token;
  std::optional<Clock::time_point> last_token;
  std::optional<std::int64_t> input_tokens;
  std::optional<std::int64_t> output_tokens;
  // Usage details: thinking inside output_tokens, and input read from the
  // provider's prompt cache inside input_tokens (0 when not reported).
  std::int64_t reasoning_tokens = 0;
  std::int64_t cached_input_tokens = 0;
  // The request's prompt as the router measured it before sending
  // (providers::measure_prompt): its bytes outside inline media, and how many
  // inline media. With input_tokens, they teach the deployment how many
  // bytes make one of its tokens.
  std::size_t prompt_bytes = 0;
  std::uint32_t prompt_media = 0;
  // The router's estimate of the prompt in this deployment's input tokens:
  // what its time to first token is read against (the prefill fit).
  std::int64_t input_tokens_est = 0;
  // Prompt-cache affinity: the prefix of the prompt the router took this
  // deployment to hold (in estimated tokens; 0: none it knew of), and of
  // those the tokens it expected read from the cache (held x the
  // deployment's cache share). The prefill is read against the rest.
  std::int64_t cache_held_tokens = 0;
  std::int64_t cached_tokens_est = 0;
  // Its prompt_bytes and input_tokens may teach bytes per token: false when
  // the provider also counts what the body does not hold (a Responses
  // request continuing a stored conversation or prompt).
  bool calibrates = true;
  // The stream carried reasoning text: its tokens arrived between the first
  // and the last output event (else they were spent before the first one).
  bool reasoning_streamed = false;
  std::int64_t output_chars = 0;  // tokenizer-neutral output size
  // A stream that completed: the longest wait between two reads after its
  // first token (from kMinPauseReads reads on; else unset). What its
  // deployment's stall deadline derives from (docs/failure-semantics.md,
  // "Stalls").
  std::optional<std::chrono::microseconds> longest_pause;
  static constexpr int kMinPauseReads = 8;
  // The stream was given up at the stall deadline derived from those pauses
  // (shorter than timeouts.idle): the deployment was slow, not broken.
  bool stall_derived = false;
  bool reused_connection = false;
  std::optional<int> retry_after_s;
  std::string detail;          // human-readable reason for failures
  bool ttft_recorded = false;  // the TTFT went to the stats at the first token already
  // Asked for one JSON answer, not a stream (providers[].stream: false, or a
  // deployment that refuses to stream): no TTFT; last_token is when the
  // answer arrived whole.
  bool unstreamed = false;
  // Traced requests only (kept when `keep_meta`): the answer's id and each
  // choice's finish_reason, for the spans (gen_ai.response.*).
  bool keep_meta = false;
  std::string response_id;
  std::vector<std::string> finish_reasons;

  // Thousands of the prompt's (estimated) tokens the deployment read
  // itself, not from its cache: by the share its usage reported cached
  // when it did, else as the router expected.
  double uncached_k() const {
    const auto est = static_cast<double>(std::max<std::int64_t>(0, input_tokens_est));
    if (input_tokens && *input_tokens > 0) {
      const auto cached = std::clamp<std::int64_t>(cached_input_tokens, 0, *input_tokens);
      return est * static_cast<double>(*input_tokens - cached) /
             static_cast<double>(*input_tokens) / 1000;
    }
    return std::max(0.0, est - static_cast<double>(std::max<std::int64_t>(0, cached_tokens_est))) /
           1000;
  }

  std::optional<std::chrono::microseconds> ttft() const {
    if (!first_token) return std::nullopt;
    return std::chrono::duration_cast<std::chrono::microseconds>(*first_token - request_sent);
  }
  // An unstreamed answer: from the request written to the whole answer.
  std::optional<std::chrono::microseconds> answer_time() const {
    if (!unstreamed || !last_token || request_sent == Clock::time_point{}) return std::nullopt;
    return std::chrono::duration_cast<std::chrono::microseconds>(*last_token - request_sent);
  }
  // The output tokens that arrived as output events: all of them, less the
  // hidden reasoning of a model that thinks before its first visible token
  // (counted in completion_tokens, spent before the TTFT clock stopped).
  std::optional<std::int64_t> streamed_tokens() const {
    if (!output_tokens) return std::nullopt;
    if (reasoning_streamed) return output_tokens;
    return std::max<std::int64_t>(0, *output_tokens - std::max<std::int64_t>(0, reasoning_tokens));
  }
  // Output tokens per second between the first and the last output event
  // (of the tokens that arrived in between); nullopt when there is too
  // little to measure.
  std::optional<double> tps() const {
    const auto tokens = streamed_tokens();
    if (!first_token || !last_token || !tokens || *tokens < 2) return std::nullopt;
    auto span = std::chrono::duration<double>(*last_token - *first_token).count();
    if (span <= 0) return std::nullopt;
    // N tokens arrive over N-1 gaps after the first one.
    return static_cast<double>(*tokens - 1) / span;
  }
};

}  // namespace llmgate::routing
