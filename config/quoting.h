// Rendering user-supplied text inside configuration error messages.
//
// Internal to config/. Error messages end up in logs and terminals, so text
// taken from the config file is always quoted, stripped of control bytes and
// cut short. Secrets are never passed through here: callers name where a
// secret came from (an environment variable, a file), never its value.
#pragma once

#include <string>
#include <string_view>

namespace llmgate::config {

inline constexpr std::size_t kMaxQuotedChars = 64;

// Text without the surrounding quotes: control and non-ASCII bytes as \xNN,
// '"' and '\' backslash-escaped, cut after kMaxQuotedChars with "...".
inline std::string escape_for_message(std::string_view text) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  std::size_t shown = 0;
  for (unsigned char c : text) {
    if (shown++ == kMaxQuotedChars) {
      out += "...";
      break;
    }
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20 || c >= 0x7f) {
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 0xf];
    } else {
      out += static_cast<char>(c);
    }
  }
  return out;
}

// `text` in double quotes, escaped as above: quote("ttf") == "\"ttf\"".
inline std::string quote(std::string_view text) { return '"' + escape_for_message(text) + '"'; }

}  // namespace llmgate::config
