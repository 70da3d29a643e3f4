// What the translating protocols (anthropic_protocol.cpp, gemini_protocol.cpp,
// bedrock_protocol.cpp) share when they read a client's chat document or an
// upstream's answer: nothing here throws on what either side sends.
// Header-only, Beast-free.
#pragma once

#include <cstdint>
#include <ctime>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "providers/json_depth.h"
#include "providers/json_member.h"
#include "providers/json_write.h"
#include "providers/upstream_protocol.h"

namespace llmgate::providers::translation {

// "<param> <why>": "temperature must be a number".
inline Untranslatable invalid(const std::string& param, std::string_view why) {
  return {param + " " + std::string(why), param};
}

// The string member `key` (present, not null, a string), else null.
inline const std::string* string_member(const nlohmann::json& obj, std::string_view key) {
  const nlohmann::json* v = member(obj, key);
  return v && v->is_string() ? &v->get_ref<const std::string&>() : nullptr;
}

// Strings from either side may hold invalid UTF-8 (a model name from the
// config); nlohmann's dump() would throw on it: replaced instead, as
// dump(replace) does (json_write.h: the same bytes, several times quicker).
inline std::string dump(const nlohmann::json& j) { return json_text(j); }

// A JSON document inside a string (tool arguments, a tool's result, an
// event's payload); null when it is not JSON or nests too deep for the
// recursive parser.
inline nlohmann::json parse_embedded(std::string_view text) {
  if (json_too_deep(text)) return nullptr;
  nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  return j.is_discarded() ? nlohmann::json(nullptr) : j;
}

// `created` of translated chunks and answers: the request's (tests), else now.
inline std::int64_t created_of(const UpstreamRequest& r) {
  return r.created != 0 ? r.created : static_cast<std::int64_t>(std::time(nullptr));
}

// OpenAI's `stop` (a string or an array of strings) as an array; nullopt
// when it is neither.
inline std::optional<nlohmann::json> stop_sequences(const nlohmann::json& v) {
  nlohmann::json seqs = v.is_string() ? nlohmann::json::array({v}) : v;
  if (!seqs.is_array()) return std::nullopt;
  for (const auto& s : seqs) {
    if (!s.is_string()) return std::nullopt;
  }
  return seqs;
}

}  // namespace llmgate::providers::translation
