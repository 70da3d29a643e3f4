// The size of a request's prompt as the router sees it before any provider
// has counted it (docs/routing.md, "Prompt size"): the request body's bytes,
// less its inline media, and the inline media apart. Tokenizer-free: each
// deployment learns how many of these bytes make one of its input tokens
// from the usage its answers report (routing::StatsRegistry), so JSON's
// syntax, roles and tool schemas are priced in by the same ratio.
//
// Inline media -- a JSON string that is a base64 `data:` URL (a base64 image,
// audio clip or file: ";base64," within its first 256 bytes) -- are not text: their bytes would
// weigh a 100 KB screenshot as 25,000 tokens. Each counts kMediaTokens instead; a remote image (an
// http(s) URL) counts as the characters of its URL (the gateway does not
// fetch it). Beast-free, allocation-free: one pass over the body's text.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace llmgate::providers {

// What one inline image or file is taken to cost, in input tokens (a
// 1024x1024 image is 765 of OpenAI's, ~1,400 of Anthropic's, 258 of Gemini's).
inline constexpr std::int64_t kMediaTokens = 1000;

struct PromptSize {
  std::size_t bytes = 0;        // the body's bytes outside inline media
  std::uint32_t media = 0;      // inline media (data: URLs)
  std::size_t media_bytes = 0;  // their bytes (not counted above)

  // The input tokens these make at `bytes_per_token` (> 0).
  std::int64_t tokens(double bytes_per_token) const {
    return static_cast<std::int64_t>(static_cast<double>(bytes) / bytes_per_token) +
           static_cast<std::int64_t>(media) * kMediaTokens;
  }
};

// `body`: a request body's JSON text (valid JSON: admission has checked it).
PromptSize measure_prompt(std::string_view body);

}  // namespace llmgate::providers
