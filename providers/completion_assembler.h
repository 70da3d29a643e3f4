// Builds one non-streamed `chat.completion` from the streamed chunks of an
// upstream response (the gateway always streams upstream, so TTFT is measured
// even when the client asked for a single JSON body).
//
// Nothing the upstream sent is dropped: every delta field is kept under the
// name it came with and merged by the streaming rules (strings concatenated,
// objects merged key by key, arrays of objects with an "index" merged element
// by element and others appended, other values replaced; `id` and `type`
// are identities, never concatenated), so the assembled answer equals the
// upstream's own non-streamed one. Fields of the chunk and of each choice
// outside the delta keep their last non-null value; `id`, `created` and
// `model` their first non-empty one (Azure's first chunk has them empty).
#pragma once

#include <array>
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
  // A plain chunk (ChatChunk::plain from inspect_chunk, its data still
  // alive) without parsing the chunk: what add(parse_chunk(data).json) would
  // do, from the views the scan kept (only the kMeta* values not seen yet and
  // a usage object are parsed, each on its own).
  void add_plain(const ChatChunk& c);
  nlohmann::json result() const;  // the assembled chat.completion
  // The same document as JSON text. When every chunk came through
  // add_plain (the usual answer), written directly: the metadata and the
  // usage object as the upstream wrote them, the texts escaped as nlohmann
  // escapes, the keys in result()'s order; no document is built.
  std::string body() const;
  const std::optional<Usage>& usage() const { return usage_; }

 private:
  struct Choice {
    std::string role = "assistant";
    std::optional<std::string> content, refusal;
    nlohmann::json delta_fields = nlohmann::json::object();  // every other delta field, merged
    nlohmann::json tool_calls = nlohmann::json::array();     // merged by "index"
    nlohmann::json finish_reason;                            // null until seen
    nlohmann::json logprobs;                                 // null or {"content":[...]}
    nlohmann::json fields = nlohmann::json::object();        // other choice fields: the last
  };

  void add_choice(const nlohmann::json& choice);
  // The kMeta* value `i` and the usage object: the text add_plain kept, or
  // the document add() set.
  nlohmann::json meta(std::size_t i) const;
  nlohmann::json raw_usage() const;
  // Turns the texts add_plain kept into documents (before add()).
  void parse_kept();
  // id_, created_, model_, system_fingerprint_, service_tier_: the kMeta*
  // order.
  std::array<nlohmann::json*, 5> meta_fields();
  std::array<const nlohmann::json*, 5> meta_fields() const;
  static void add_logprobs(Choice& out, const nlohmann::json& logprobs);
  static nlohmann::json message(const Choice& c);

  nlohmann::json id_, created_, model_, system_fingerprint_, service_tier_;
  // add_plain's, not parsed: the first non-empty kMeta* values' JSON text
  // (empty: none) and the last usage object's.
  std::array<std::string, 5> meta_text_;
  std::string usage_text_;
  bool all_plain_ = true;                             // add() was never called
  nlohmann::json fields_ = nlohmann::json::object();  // other top-level fields: the last
  std::map<int, Choice> choices_;
  std::optional<Usage> usage_;
  nlohmann::json raw_usage_;
};

// The inverse: a non-streamed chat.completion as the events of a stream
// ("data: ...\n\n" each, then "data: [DONE]\n\n"): per choice a role chunk,
// one chunk with the rest of the message (tool calls indexed) and a finish
// chunk; the usage chunk when `include_usage`. Assembling them gives the
// completion back. For an upstream that answered a stream request with JSON.
std::string stream_of_completion(const nlohmann::json& completion, bool include_usage);

}  // namespace llmgate::providers
