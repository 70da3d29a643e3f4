#include "providers/chunk_writer.h"

#include <nlohmann/json.hpp>

#include "providers/request_body.h"

namespace llmgate::providers {
namespace {

// A JSON string of text that may not be valid UTF-8 (append_json_string
// copies such bytes as they are).
void append_replacing(std::string& out, std::string_view s) {
  out += nlohmann::json(s).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace

void ChunkWriter::set_head(std::string_view id, std::int64_t created, std::string_view model) {
  head_.assign(R"({"id":)");
  append_replacing(head_, id);
  head_.append(R"(,"object":"chat.completion.chunk","created":)");
  head_.append(std::to_string(created));
  head_.append(R"(,"model":)");
  append_replacing(head_, model);
  head_ += ',';
}

std::string& ChunkWriter::begin_choice() {
  text_.assign(head_);
  text_.append(R"("choices":[{"index":0,"delta":)");
  return text_;
}

std::string_view ChunkWriter::text_chunk(std::string_view key, std::string_view text,
                                         bool escaped) {
  std::string& delta = begin_choice();
  delta.append(R"({")").append(key).append(R"(":)");
  append_json_text(delta, text, escaped);
  delta += '}';
  return end_choice();
}

std::string_view ChunkWriter::end_choice(std::string_view finish_reason) {
  text_.append(R"(,"logprobs":null,"finish_reason":)");
  if (finish_reason.empty()) {
    text_.append("null");
  } else {
    text_.append("\"").append(finish_reason).append("\"");
  }
  text_.append("}]");
  if (include_usage_) text_.append(R"(,"usage":null)");
  text_ += '}';
  return text_;
}

std::string_view ChunkWriter::usage_chunk(std::string_view usage) {
  text_.assign(head_);
  text_.append(R"("choices":[],"usage":)").append(usage).append("}");
  return text_;
}

void ChunkWriter::append_tool_call(std::string& out, std::size_t index, std::string_view id,
                                   std::string_view name, std::string_view arguments) {
  out.append(R"({"index":)").append(std::to_string(index)).append(R"(,"id":)");
  append_json_string(out, id);
  out.append(R"(,"type":"function","function":{"name":)");
  append_json_string(out, name);
  out.append(R"(,"arguments":)");
  append_json_string(out, arguments);
  out.append("}}");
}

}  // namespace llmgate::providers
