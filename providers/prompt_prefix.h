// A request's prompt prefixes, for prompt-cache affinity (docs/routing.md,
// "Prompt-cache affinity"). Providers cache what they have read of a prompt
// (OpenAI from 1,024 tokens; Anthropic at cache_control; Gemini, DeepSeek,
// vLLM hosts implicitly): a follow-up turn sent where its conversation's
// previous turn went reads only its new part. To know where that was, the
// router remembers where each prefix was served; this reads the prefixes.
//
// A prefix is what the provider reads first -- the request's tools,
// functions, structured-output schema, `system` and `instructions`, in that
// order whatever the body's -- and then the conversation's messages
// (`messages`, or a Responses `input` array) up to a boundary between two
// of them. One prefix per boundary would do, but a conversation of
// hundreds of turns would cost as many lookups: kept are the preamble's
// (when there is one) and the first message's (the system prompt, shared by
// every conversation of an application), and the latest, kMaxCuts in all.
// The previous turn's whole prompt is among them as long as a turn adds
// fewer than kMaxCuts - 2 messages.
//
// Each message is hashed as its text (config::hash64): two requests share a
// prefix when the same client sent the same messages, byte for byte, as an
// SDK does -- less their "cache_control" members: a coding agent marks its
// latest turn for Anthropic's cache and moves the mark on the next turn, so
// the same message comes with a mark once and without it after. Works on a
// chat, Responses or Anthropic Messages body alike (Anthropic's `tools` and
// `system` are read before its messages, as Anthropic reads them). One pass
// over the messages; an allocation only for a message with a mark.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

#include "config/fingerprint.h"
#include "providers/request_body.h"

namespace llmgate::providers {

struct PromptPrefixes {
  static constexpr std::size_t kMaxCuts = 16;
  std::array<config::PrefixCut, kMaxCuts> cuts{};  // shortest first
  std::size_t count = 0;
  std::size_t firsts = 0;  // of them, the preamble's and the first message's
  std::span<const config::PrefixCut> view() const { return {cuts.data(), count}; }
  // The request's whole prompt (the longest cut), if it has cuts.
  const config::PrefixCut* whole() const { return count > 0 ? &cuts[count - 1] : nullptr; }

  // The cuts a later request may meet again, for the affinity table to
  // remember: the firsts (every conversation of an application shares
  // them), the whole prompt (the next turn's prefix) and all but its last
  // message (the same turn edited or regenerated). Into `buf`.
  using Remembered = std::array<config::PrefixCut, 4>;
  std::span<const config::PrefixCut> remembered(Remembered& buf) const {
    std::size_t n = 0;
    for (std::size_t i = 0; i < count; ++i) {
      if (i < firsts || i + 2 >= count) buf[n++] = cuts[i];
    }
    return {buf.data(), n};
  }
};

// `body` is admitted (valid JSON). No prefixes (count 0) when it holds no
// conversation: no `messages` array, no `input` array.
PromptPrefixes prompt_prefixes(const RequestBody& body);

}  // namespace llmgate::providers
