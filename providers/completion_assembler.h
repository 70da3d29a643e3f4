// Builds one non-streamed `chat.completion` from the streamed chunks of an
// upstream response (the gateway always streams upstream, so TTFT is measured
// even when the client asked for a single JSON body).
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "providers/chat_chunk.h"

namespace llmgate::providers {

class CompletionAssembler {
 public:
  void add(const nlohmann::json& chunk);  // one chat.completion.chunk
  // A plain content chunk (ChatChunk::plain from inspect_chunk) without
  // parsing it: appends its still-escaped content to choice 0. Returns false
  // (and does nothing) when the chunk carries metadata not seen yet; then
  // add(parse_chunk(data).json) instead.
  bool add_plain(std::string_view escaped_content, unsigned meta_keys);
  nlohmann::json result() const;  // the assembled chat.completion
  const std::optional<Usage>& usage() const { return usage_; }

 private:
  struct ToolCall {
    nlohmann::json id, type;
    std::string name, arguments;
  };
  struct Choice {
    std::string role = "assistant";
    std::optional<std::string> content, refusal, reasoning_content;
    std::map<int, ToolCall> tool_calls;
    nlohmann::json finish_reason;  // null until seen
    nlohmann::json logprobs;       // null or {"content":[...]}
  };

  nlohmann::json id_, created_, model_, system_fingerprint_, service_tier_;
  std::map<int, Choice> choices_;
  std::optional<Usage> usage_;
  nlohmann::json raw_usage_;
};

}  // namespace llmgate::providers
