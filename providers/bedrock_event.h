// One of Bedrock's ConverseStream events as the stream translator
// (bedrock_protocol.cpp) reads it on the relay's hot path. Each event is an
// AWS event-stream message whose payload is a small JSON object; most are
// contentBlockDelta's text. read_event() reads the payloads of the usual
// events -- messageStart, contentBlockDelta with text or reasoning text,
// contentBlockStop, messageStop, metadata -- by one scan, without building
// a document, and keeps a delta's text escaped as the upstream wrote it, for
// the chunk to carry as it is. It declines anything else (a tool call's
// start or input, a value of an unexpected type, a key it reads given
// twice, an escaped stop reason, text that is not a JSON object), which the
// translator reads from a parsed document as before. fuzz_bedrock_stream
// holds it to that reading. Beast-free.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace llmgate::providers::bedrock {

// Converse's TokenUsage counts that OpenAI's usage is made of, each when it
// is an integer: negative ones read as 0, and each is at most 10^12 (sums
// of them cannot overflow).
struct Usage {
  std::optional<std::int64_t> input;        // inputTokens
  std::optional<std::int64_t> cache_read;   // cacheReadInputTokens
  std::optional<std::int64_t> cache_write;  // cacheWriteInputTokens
  std::optional<std::int64_t> output;       // outputTokens
  bool operator==(const Usage&) const = default;
};

struct EventFacts {
  // contentBlockDelta: which text its delta carries, and that text between
  // its quotes (escaped as written, maybe empty); kNone: neither.
  enum class Delta { kNone, kText, kReasoning };
  Delta delta = Delta::kNone;
  std::string_view text;
  // messageStop: its stopReason when it is a string.
  std::optional<std::string_view> stop_reason;
  // metadata: its usage when it is an object.
  std::optional<Usage> usage;
};

// Reads the payload of an event of type `type`; false: the caller reads it
// from a document. `out`'s views point into `payload`.
bool read_event(std::string_view type, std::string_view payload, EventFacts& out);

}  // namespace llmgate::providers::bedrock
