// The text of the chat.completion.chunks a translating protocol (Anthropic,
// Gemini, Bedrock) makes of its upstream's events, laid out as an OpenAI deployment's
// chunks are, so that a client cannot tell the protocols apart by their shape:
//
//   {"id":…,"object":"chat.completion.chunk","created":…,"model":…,
//    "choices":[{"index":0,"delta":{…},"logprobs":null,"finish_reason":…}]}
//
// and, last, the usage chunk {…the same head…,"choices":[],"usage":{…}}.
// When the client asked for stream_options.include_usage, OpenAI puts
// "usage":null on every chunk before that one; otherwise no "usage" at all.
//
// One per stream, on the relay's hot path (a chunk per upstream event): the
// chunk is written into one buffer reused from chunk to chunk, so writing
// allocates only when a chunk is longer than every one before it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace llmgate::providers {

class ChunkWriter {
 public:
  explicit ChunkWriter(bool include_usage) : include_usage_(include_usage) {}

  // The members before "choices", for every chunk from now on. `id` and
  // `model` may hold invalid UTF-8 (a model name from the configuration):
  // it is replaced, as nlohmann's dump(replace) does.
  void set_head(std::string_view id, std::int64_t created, std::string_view model);

  // Starts a chunk of one choice (index 0): the text so far, which ends at
  // `"delta":`. The caller appends the delta object to it, then calls
  // end_choice().
  std::string& begin_choice();
  // Ends the chunk begun: logprobs, the finish reason (null when empty: a
  // word such as "stop", written quoted), and "usage":null when asked for.
  // The chunk's text, valid until the next chunk begins.
  std::string_view end_choice(std::string_view finish_reason = {});

  // A whole chunk whose delta is one text member, {"<key>":"<text>"}
  // ("content", "reasoning_content"): `text` as append_json_text takes it.
  std::string_view text_chunk(std::string_view key, std::string_view text, bool escaped);

  // The usage chunk: `usage` is the usage object's JSON text.
  std::string_view usage_chunk(std::string_view usage);

  // One element of a delta's "tool_calls", as OpenAI orders its members:
  // {"index":…,"id":…,"type":"function","function":{"name":…,"arguments":…}}.
  // The strings are valid UTF-8 (they came out of a parsed document).
  static void append_tool_call(std::string& out, std::size_t index, std::string_view id,
                               std::string_view name, std::string_view arguments);

 private:
  std::string head_;  // from '{' to the ',' before "choices"
  std::string text_;  // the chunk being written (the event's data views it)
  bool include_usage_;
};

}  // namespace llmgate::providers
