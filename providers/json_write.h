// A parsed document written as JSON text: what nlohmann's
// dump(-1, ' ', false, error_handler_t::replace) writes, byte for byte, at
// about half its cost on a conversation. nlohmann's serializer takes every
// string byte through its UTF-8 decoder (~40 instructions a byte of a
// translated conversation); here a string is checked to be valid UTF-8
// eight bytes at a time and written with append_json_string, and only a
// string that is not valid UTF-8 (whose replacement characters nlohmann
// decides) or a floating-point number (its shortest form) is left to
// nlohmann. fuzz_chat_request holds the two equal. Beast-free.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace llmgate::providers {

// Whether `s` is valid UTF-8 (no overlong forms, surrogates or code points
// past U+10FFFF), as nlohmann's serializer judges it.
bool valid_utf8(std::string_view s);

// Appends `j`'s text to `out`.
void write_json(std::string& out, const nlohmann::json& j);
void write_json(std::string& out, const nlohmann::ordered_json& j);

// `j`'s text.
template <class Json>
std::string json_text(const Json& j) {
  std::string out;
  write_json(out, j);
  return out;
}

}  // namespace llmgate::providers
