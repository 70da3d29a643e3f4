// What Anthropic's Messages API and OpenAI's chat completions say alike, in
// both directions: usage counts (Anthropic keeps cached input apart from
// input_tokens; OpenAI's prompt_tokens include it) and the reasons an answer
// stopped. Shared by the upstream protocols (anthropic_protocol.cpp,
// anthropic_messages_protocol.cpp) and the gateway's Messages client API.
// Beast-free.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <string_view>

#include "providers/chat_chunk.h"

namespace llmgate::providers::anthropic {

// Counts above this are garbage; the cap keeps sums from overflowing (the
// bound usage_of() applies).
inline constexpr std::int64_t kMaxCount = 1'000'000'000'000;

// A JSON integer as int64 (nullopt for anything else, or one too large).
inline std::optional<std::int64_t> integer(const nlohmann::json& v) {
  if (v.is_number_unsigned()) {
    const auto u = v.get<std::uint64_t>();
    if (u > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()))
      return std::nullopt;
    return static_cast<std::int64_t>(u);
  }
  if (v.is_number_integer()) return v.get<std::int64_t>();
  return std::nullopt;
}

struct Counts {
  std::int64_t input = 0, cache_creation = 0, cache_read = 0, output = 0;

  // The counts' names in Anthropic's usage object, in take()'s order.
  static constexpr std::array<std::string_view, 4> kNames = {
      "input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens", "output_tokens"};

  // Count `i` (kNames' order) is `n`, within [0, kMaxCount].
  void take(std::size_t i, std::int64_t n) {
    std::int64_t* const into[] = {&input, &cache_creation, &cache_read, &output};
    *into[i] = std::clamp<std::int64_t>(n, 0, kMaxCount);
  }

  // Anthropic's usage counts are cumulative: whatever an event carries
  // replaces (message_start's, then message_delta's).
  void read(const nlohmann::json& usage) {
    if (!usage.is_object()) return;
    for (std::size_t i = 0; i < kNames.size(); ++i) {
      auto it = usage.find(kNames[i]);
      if (const auto n = it != usage.end() ? integer(*it) : std::nullopt) take(i, *n);
    }
  }

  // From OpenAI's counts: the cached share comes out of the input.
  static Counts of(const Usage& u) {
    Counts c;
    c.cache_read = std::clamp<std::int64_t>(u.cached_tokens, 0, kMaxCount);
    c.input = std::clamp<std::int64_t>(u.prompt_tokens - c.cache_read, 0, kMaxCount);
    c.output = std::clamp<std::int64_t>(u.completion_tokens, 0, kMaxCount);
    return c;
  }

  Usage usage() const {
    Usage u;
    u.prompt_tokens = input + cache_creation + cache_read;
    u.completion_tokens = output;
    u.total_tokens = u.prompt_tokens + output;
    u.cached_tokens = cache_read;
    return u;
  }

  // OpenAI's usage object. An ordered_json has OpenAI's order of the
  // members (a chunk's text).
  template <class Json = nlohmann::json>
  Json openai() const {
    const std::int64_t prompt = input + cache_creation + cache_read;
    return {{"prompt_tokens", prompt},
            {"completion_tokens", output},
            {"total_tokens", prompt + output},
            {"prompt_tokens_details", {{"cached_tokens", cache_read}}}};
  }

  // Anthropic's usage object, in its order.
  nlohmann::ordered_json anthropic() const {
    return {{"input_tokens", input},
            {"cache_creation_input_tokens", cache_creation},
            {"cache_read_input_tokens", cache_read},
            {"output_tokens", output}};
  }
};

// Anthropic's stop_reason as OpenAI's finish_reason.
inline std::string_view finish_reason(std::string_view stop_reason) {
  if (stop_reason == "max_tokens") return "length";
  if (stop_reason == "tool_use") return "tool_calls";
  if (stop_reason == "refusal") return "content_filter";
  return "stop";  // end_turn, stop_sequence, pause_turn, and any new one
}

// OpenAI's finish_reason as Anthropic's stop_reason.
inline std::string_view stop_reason(std::string_view finish_reason) {
  if (finish_reason == "length") return "max_tokens";
  if (finish_reason == "tool_calls" || finish_reason == "function_call") return "tool_use";
  if (finish_reason == "content_filter") return "refusal";
  return "end_turn";  // stop, and any other
}

}  // namespace llmgate::providers::anthropic
