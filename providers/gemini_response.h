// One of Gemini's streamed GenerateContentResponses as the stream translator
// (gemini_protocol.cpp) reads it on the relay's hot path. Most of a
// stream's events are usual ones: the first candidate's text (or thought)
// parts, maybe its finishReason, maybe cumulative usageMetadata.
// read_usual() reads such an event by one scan, without building a
// document, and keeps the text escaped as Google wrote it, for the chunk to
// carry as it is; it declines anything else -- an error, a blocked prompt, a
// function call, a value of an unexpected type, a key it reads given twice,
// text that is not JSON -- which the translator reads from a parsed document
// as before. fuzz_gemini_stream holds it to that reading. Beast-free.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace llmgate::providers::gemini {

// The usageMetadata counts OpenAI's usage is made of, each when it is a
// plausible token count (an integer, 0 to 10^12), as the document's reading
// takes them.
struct Usage {
  std::optional<std::int64_t> prompt;      // promptTokenCount
  std::optional<std::int64_t> candidates;  // candidatesTokenCount
  std::optional<std::int64_t> thoughts;    // thoughtsTokenCount
  std::optional<std::int64_t> cached;      // cachedContentTokenCount
  bool operator==(const Usage&) const = default;
};

// What a usual response says. `content` and `reasoning` are the first
// candidate's text parts and thought parts joined, each as the text between
// a JSON string's quotes (escaped as the upstream wrote it; "" when none).
struct UsualResponse {
  std::string content, reasoning;
  std::string_view finish_reason;  // its finishReason, unescaped; "" when none
  std::optional<Usage> usage;      // its usageMetadata, when it has one
  void clear() {
    content.clear();
    reasoning.clear();
    finish_reason = {};
    usage.reset();
  }
};

// Fills `out` (a view into `data` in finish_reason) and answers true when
// `data` is a usual response; false: the caller reads it from a document.
bool read_usual(std::string_view data, UsualResponse& out);

}  // namespace llmgate::providers::gemini
