// Locale-independent ASCII helpers: config parsing, and names that are
// ASCII tokens elsewhere (HTTP field names, media types), where the locale's
// tolower() would cost a call per character.
#pragma once

#include <algorithm>
#include <string>
#include <string_view>

namespace llmgate::config {

inline bool is_ascii_digit(char c) { return c >= '0' && c <= '9'; }
inline bool is_ascii_letter(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
inline bool is_ascii_alnum(char c) { return is_ascii_digit(c) || is_ascii_letter(c); }

inline char ascii_lower(char c) {
  return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c;
}

// The same letters but for ASCII case, `a` and `b` of one length.
inline bool ascii_same_letters(std::string_view a, std::string_view b) {
  return std::equal(a.begin(), a.end(), b.begin(),
                    [](char x, char y) { return ascii_lower(x) == ascii_lower(y); });
}

// Equal but for ASCII case (HTTP field names, tokens). The lengths are
// compared where it is called: most names compared differ in length, and a
// call was what such a mismatch cost.
[[gnu::always_inline]] inline bool ascii_iequals(std::string_view a, std::string_view b) {
  return a.size() == b.size() && ascii_same_letters(a, b);
}

inline std::string ascii_lowercase(std::string_view text) {
  std::string out(text);
  std::transform(out.begin(), out.end(), out.begin(), ascii_lower);
  return out;
}

// Without surrounding spaces and tabs (HTTP's optional whitespace).
inline std::string_view trim_ows(std::string_view text) {
  while (!text.empty() && (text.front() == ' ' || text.front() == '\t')) text.remove_prefix(1);
  while (!text.empty() && (text.back() == ' ' || text.back() == '\t')) text.remove_suffix(1);
  return text;
}

// Without surrounding spaces, tabs, CRs and LFs.
inline std::string_view trim_whitespace(std::string_view text) {
  const auto is_space = [](char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; };
  while (!text.empty() && is_space(text.front())) text.remove_prefix(1);
  while (!text.empty() && is_space(text.back())) text.remove_suffix(1);
  return text;
}

}  // namespace llmgate::config
