// A guard for untrusted JSON: nlohmann's parser, copies and dump() recurse
// once per nesting level, so a small document nested deeply enough (tens of
// thousands of '[') overflows the stack. Check the depth first, in one pass
// with no allocation; strings (and escapes in them) are skipped.
#pragma once

#include <string_view>

namespace llmgate::providers {

// Deep enough for any real request or event (tool schemas nest a few levels).
inline constexpr int kMaxJsonDepth = 128;

inline bool json_too_deep(std::string_view text, int max_depth = kMaxJsonDepth) {
  int depth = 0;
  bool in_string = false, escaped = false;
  for (char c : text) {
    if (in_string) {
      if (escaped)
        escaped = false;
      else if (c == '\\')
        escaped = true;
      else if (c == '"')
        in_string = false;
      continue;
    }
    if (c == '"')
      in_string = true;
    else if (c == '[' || c == '{') {
      if (++depth > max_depth) return true;
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return false;
}

}  // namespace llmgate::providers
