// What the gateway needs to know about one streamed chat.completion.chunk.
//
// The relay decides from this whether an event is the first token (TTFT stops
// here), carries usage (output tokens for TPS and cost), ends the stream, or
// is broken (fail over before commit, error event after).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace llmgate::providers {

struct Usage {
  std::int64_t prompt_tokens = 0;
  std::int64_t completion_tokens = 0;
  std::int64_t total_tokens = 0;
};

struct ChatChunk {
  enum class Kind {
    kDone,       // "data: [DONE]"
    kChunk,      // a well-formed chat.completion.chunk
    kError,      // an in-band {"error": {...}} event from the upstream
    kMalformed,  // not JSON, or JSON that is not a chunk
  };
  Kind kind = Kind::kMalformed;
  // Carries output: delta content, refusal, reasoning or a tool call. This is
  // the "first token" event; a role-only or empty delta is not.
  bool has_output = false;
  bool has_finish = false;     // some choice has a non-null finish_reason
  bool usage_only = false;     // "choices": [] with usage: the include_usage chunk
  std::optional<Usage> usage;  // non-null usage object
  std::size_t output_chars = 0;  // characters of output text in this chunk
  nlohmann::json json;         // the parsed event (null for kDone / kMalformed)
  std::string error_message;   // for kError / kMalformed
};

ChatChunk inspect_chunk(std::string_view data);

// The "usage" object of a parsed chunk or completion, if present and not null.
std::optional<Usage> usage_of(const nlohmann::json& j);

}  // namespace llmgate::providers
