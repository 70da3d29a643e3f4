// Profiles of the simulated provider: what a model's latency, speed, length
// and faults look like, how they are written as JSON, and how one request's
// numbers are drawn from them.
//
// Beast-free and socket-free: everything here is testable with an injected
// Rng and no clock.
#pragma once

#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <random>
#include <string>
#include <string_view>

namespace llmgate::sim {

struct Distribution {
  enum class Kind { kFixed, kNormal, kLogNormal };
  Kind kind = Kind::kFixed;
  double mean = 0;    // in the unit of the field (ms for TTFT, tokens/s for TPS)
  double stddev = 0;  // ignored for kFixed
};

struct Profile {
  Distribution ttft{Distribution::Kind::kFixed, 200, 0};  // ms, request read -> first content
  Distribution tps{Distribution::Kind::kFixed, 50, 0};    // output tokens per second
  int output_tokens_min = 16;                             // length drawn uniformly in [min, max],
  int output_tokens_max = 64;                             // then capped by the request's max_tokens
  double error_rate = 0;  // share of requests answered with error_status
  int error_status = 500;
  std::optional<int> retry_after_s;  // Retry-After on error responses
  // Faults (a value < 0 disables the fault). A request gets all of them with
  // probability fault_rate and none of them otherwise (one draw per request):
  double fault_rate = 1;
  int stall_before_first_token_ms = -1;  // headers + role chunk, then silence this long
  int stall_after_tokens = -1;           // after N content tokens ...
  int stall_ms = 0;                      // ... stall this long
  int cut_after_tokens = -1;             // after N tokens close the connection mid-event
  int malformed_after_tokens = -1;       // after N tokens send an event that is not JSON
  // After N tokens an in-band error event ends the stream (Anthropic's
  // `event: error` overloaded_error, an {"error": ...} event for OpenAI and
  // Gemini): the failure a client sees after a 200.
  int error_after_tokens = -1;
  std::string region;  // echoed in x-sim-region
  // What real providers send besides plain text (docs/providers.md):
  enum class Output { kText, kToolCall, kAudio };
  Output output = Output::kText;  // the answer: text, one tool call, or audio
  // The first N output tokens are reasoning (`delta.reasoning_content`, and
  // usage.completion_tokens_details.reasoning_tokens), then the answer.
  int reasoning_tokens = 0;
  // x-ratelimit-* and openai-processing-ms on every answer, as OpenAI sends.
  bool ratelimit_headers = false;
  // A 400 to any request that names stream_options (servers that do not
  // know it).
  bool reject_stream_options = false;
  // A 400 (param "stream") to any streaming request: OpenAI's answer for
  // models an unverified organisation may not stream.
  bool reject_stream = false;
  // A 400 to a request that asks to continue an assistant message (prefix,
  // continue_final_message, Anthropic prefill, a trailing Gemini model
  // turn): what models that do not allow prefill answer.
  bool refuse_prefill = false;
  // How reasoning reaches the client: streamed as text before the answer
  // (DeepSeek-R1, vLLM), or hidden (OpenAI's o-series: thinking time before
  // the first visible token, counted only in usage).
  bool reasoning_hidden = false;
  // The delta field streamed reasoning goes in: "reasoning_content"
  // (DeepSeek, older vLLM) or "reasoning" (OpenRouter, newer vLLM).
  std::string reasoning_field = "reasoning_content";
  // Web-search style url_citation annotations on a text answer (a delta of
  // their own before the finish chunk; message.annotations when not streamed).
  bool annotations = false;
  // Prompt tokens reported as read from the prompt cache
  // (usage.prompt_tokens_details.cached_tokens), at most the prompt's.
  int cached_tokens = 0;
  // Prefill: each 1,000 prompt tokens not read from the cache add this to
  // the first token's time, as a real model's prefill does.
  double prefill_ms_per_1k_tokens = 0;
  // A prompt cache of this process's own, as providers keep one: the chat
  // prompts it has read (each prefix ending at a message boundary) for
  // prefix_cache_ttl_ms after their last use; a later prompt that starts
  // with one of them, of at least prefix_cache_min_tokens tokens, reads it
  // from the cache -- reported as cached_tokens, not prefilled. (With
  // cached_tokens set too, the larger of the two counts.)
  bool prefix_cache = false;
  int prefix_cache_ttl_ms = 300'000;
  int prefix_cache_min_tokens = 1024;
  // The model's context window in tokens (0: none): a prompt whose tokens
  // and max_tokens are more gets the provider's context-length 400.
  std::int64_t context_window = 0;
  // Gemini only: a 200 whose prompt was blocked (promptFeedback.blockReason
  // "SAFETY", no candidates), which a client must not take for an empty answer.
  bool safety_block = false;
  // POST …/embeddings: the length of each vector unless the request asks
  // for `dimensions`. Vectors are deterministic by input.
  int embedding_dimensions = 16;
};

// Reads a profile from JSON, starting from `base`: keys that are absent keep
// the value of `base`, so {"ttft_ms": 800} is a valid partial update. Throws
// std::invalid_argument naming the offending key ("ttft_ms.stddev: ...") on an
// unknown key, a wrong type or an out-of-range value.
//
//   ttft_ms, tps:   number (fixed) | {"dist": "fixed|normal|lognormal",
//                                     "mean": n, "stddev": n}
//                   (an object merges over the current distribution)
//   output_tokens:  number | {"min": n, "max": n}
//   error_rate [0,1], error_status [400,599], retry_after_s (int | null),
//   stall_before_first_token_ms, stall_after_tokens, stall_ms,
//   cut_after_tokens, malformed_after_tokens, error_after_tokens (int, < 0 disables),
//   fault_rate [0,1], region,
//   output ("text" | "tool_call" | "audio"), reasoning_tokens (int >= 0),
//   ratelimit_headers (bool), reject_stream_options (bool), reject_stream (bool),
//   reasoning_hidden (bool), reasoning_field ("reasoning_content" | "reasoning"),
//   annotations (bool), cached_tokens (int >= 0), safety_block (bool),
//   prefill_ms_per_1k_tokens (number >= 0), context_window (int >= 0),
//   prefix_cache (bool), prefix_cache_ttl_ms (int >= 0), prefix_cache_min_tokens (int >= 0).
Profile profile_from_json(const nlohmann::json& j, const Profile& base = {});
nlohmann::json profile_to_json(const Profile& p);

std::string_view to_string(Distribution::Kind kind);
std::string_view to_string(Profile::Output output);

// ---------------------------------------------------------------------------
// Sampling. Every draw takes the generator explicitly so that a fixed seed
// gives a fixed sequence of requests.

using Rng = std::mt19937_64;

// One draw from `d`, clamped to >= 0. A log-normal is parametrised so that the
// draws have mean `d.mean` and standard deviation `d.stddev` (not the mean and
// stddev of the underlying normal).
double sample(const Distribution& d, Rng& rng);

inline constexpr double kMinTokensPerSecond = 0.1;

double sample_ttft_ms(const Profile& p, Rng& rng);            // >= 0
double sample_tokens_per_second(const Profile& p, Rng& rng);  // >= kMinTokensPerSecond
int sample_output_tokens(const Profile& p, Rng& rng);         // uniform in [min, max]
bool sample_error(const Profile& p, Rng& rng);                // true with p.error_rate
bool sample_faults(const Profile& p, Rng& rng);               // true with p.fault_rate

// `p` with every fault disabled (stalls, cut, malformed, error): what a request that
// drew "no faults" is answered with.
Profile without_faults(Profile p);

// ---------------------------------------------------------------------------
// Text. Token i of every completion is the same, so a streamed and a
// non-streamed answer of the same length have the same content.

std::string_view token_text(std::size_t index);  // " lorem", " ipsum", ...
std::string completion_text(std::size_t tokens);

// About one token per four characters of message content (string contents and
// the "text" of content parts), at least 1.
std::int64_t estimate_prompt_tokens(const nlohmann::json& messages);

// The characters of one content value: a string, or an array of parts whose
// "text" counts (OpenAI content parts, Anthropic blocks, Gemini parts).
std::size_t content_chars(const nlohmann::json& content);
// The token estimate for `chars` characters of prompt: chars / 4, at least 1.
std::int64_t tokens_for_chars(std::size_t chars);

}  // namespace llmgate::sim
