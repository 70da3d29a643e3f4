#include "providers/chat_chunk.h"

#include "providers/json_depth.h"

namespace llmgate::providers {
namespace {

std::size_t text_size(const nlohmann::json& delta, const char* key) {
  auto it = delta.find(key);
  if (it == delta.end() || !it->is_string()) return 0;
  return it->get_ref<const std::string&>().size();
}

bool non_empty_array(const nlohmann::json& obj, const char* key) {
  auto it = obj.find(key);
  return it != obj.end() && it->is_array() && !it->empty();
}

}  // namespace

std::optional<Usage> usage_of(const nlohmann::json& j) {
  auto it = j.find("usage");
  if (it == j.end() || !it->is_object()) return std::nullopt;
  Usage u;
  // Counts from an upstream are untrusted: anything negative or beyond any
  // real usage (10^12 tokens) reads as 0, so sums cannot overflow.
  constexpr std::int64_t kMaxTokens = 1'000'000'000'000;
  auto get = [&](const char* k) -> std::int64_t {
    auto f = it->find(k);
    if (f == it->end()) return 0;
    if (f->is_number_unsigned()) {
      auto v = f->get<std::uint64_t>();
      return v <= static_cast<std::uint64_t>(kMaxTokens) ? static_cast<std::int64_t>(v) : 0;
    }
    if (f->is_number_integer()) {
      auto v = f->get<std::int64_t>();
      return v >= 0 && v <= kMaxTokens ? v : 0;
    }
    return 0;
  };
  u.prompt_tokens = get("prompt_tokens");
  u.completion_tokens = get("completion_tokens");
  u.total_tokens = get("total_tokens");
  if (u.total_tokens == 0) u.total_tokens = u.prompt_tokens + u.completion_tokens;
  return u;
}

ChatChunk inspect_chunk(std::string_view data) {
  ChatChunk c;
  if (data == "[DONE]") {
    c.kind = ChatChunk::Kind::kDone;
    return c;
  }
  if (data.find('\0') != std::string_view::npos) {  // the parser would stop there
    c.kind = ChatChunk::Kind::kMalformed;
    c.error_message = "upstream sent an event with a NUL byte";
    return c;
  }
  if (json_too_deep(data)) {
    c.kind = ChatChunk::Kind::kMalformed;
    c.error_message = "upstream sent an event nested more than " + std::to_string(kMaxJsonDepth) +
                      " levels deep";
    return c;
  }
  c.json = nlohmann::json::parse(data, nullptr, /*allow_exceptions=*/false);
  if (c.json.is_discarded() || !c.json.is_object()) {
    c.kind = ChatChunk::Kind::kMalformed;
    c.error_message = "upstream sent an event that is not a JSON object";
    c.json = nullptr;
    return c;
  }
  if (auto err = c.json.find("error"); err != c.json.end() && !err->is_null()) {
    c.kind = ChatChunk::Kind::kError;
    if (err->is_object() && err->contains("message") && (*err)["message"].is_string()) {
      c.error_message = (*err)["message"].get<std::string>();
    } else {
      c.error_message = err->dump();
    }
    return c;
  }
  auto choices = c.json.find("choices");
  if (choices == c.json.end() || !choices->is_array()) {
    c.kind = ChatChunk::Kind::kMalformed;
    c.error_message = "upstream event has no \"choices\" array";
    return c;
  }
  c.kind = ChatChunk::Kind::kChunk;
  c.usage = usage_of(c.json);
  c.usage_only = choices->empty() && c.usage.has_value();
  for (const auto& choice : *choices) {
    if (!choice.is_object()) continue;
    if (auto fr = choice.find("finish_reason"); fr != choice.end() && !fr->is_null()) {
      c.has_finish = true;
    }
    auto delta = choice.find("delta");
    if (delta == choice.end() || !delta->is_object()) continue;
    std::size_t chars = text_size(*delta, "content") + text_size(*delta, "refusal") +
                        text_size(*delta, "reasoning_content") + text_size(*delta, "reasoning");
    c.output_chars += chars;
    if (chars > 0 || non_empty_array(*delta, "tool_calls") ||
        (delta->contains("function_call") && !(*delta)["function_call"].is_null())) {
      c.has_output = true;
    }
  }
  return c;
}

}  // namespace llmgate::providers
