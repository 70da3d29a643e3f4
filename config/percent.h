// Percent-encoding (RFC 3986): query values in the config, OTEL_* variables,
// and the providers' URL paths, form bodies and AWS signatures. Header-only.
#pragma once

#include <charconv>
#include <string>
#include <string_view>

#include "config/ascii.h"

namespace llmgate::config {

// Unreserved characters (A-Z a-z 0-9 - . _ ~) and those in `keep` stay;
// every other byte is %XX (upper-case hex).
inline std::string percent_encode(std::string_view text, std::string_view keep = {}) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(text.size());
  for (const char ch : text) {
    const auto c = static_cast<unsigned char>(ch);
    if (is_ascii_alnum(ch) || c == '-' || c == '.' || c == '_' || c == '~' ||
        keep.find(ch) != std::string_view::npos) {
      out += ch;
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out;
}

// %XX decoded; a '%' not followed by two hex digits stays as it is.
inline std::string percent_decode(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (std::size_t i = 0; i < s.size(); ++i) {
    unsigned v = 0;
    if (s[i] == '%' && i + 2 < s.size() &&
        std::from_chars(s.data() + i + 1, s.data() + i + 3, v, 16).ptr == s.data() + i + 3) {
      out.push_back(static_cast<char>(v));
      i += 2;
    } else {
      out.push_back(s[i]);
    }
  }
  return out;
}

}  // namespace llmgate::config
