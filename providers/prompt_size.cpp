#include "providers/prompt_size.h"

#include <cstring>

namespace llmgate::providers {

PromptSize measure_prompt(std::string_view body) {
  PromptSize out;
  constexpr std::string_view kData = "\"data:";
  std::size_t counted_from = 0;  // the bytes before this are accounted for
  std::size_t at = 0;
  while ((at = body.find(kData, at)) != std::string_view::npos) {
    // A quote that opens a string: not one escaped inside another string
    // (an odd run of backslashes before it).
    std::size_t slashes = 0;
    while (slashes < at && body[at - 1 - slashes] == '\\') ++slashes;
    if (slashes % 2 == 1) {
      at += kData.size();
      continue;
    }
    // The string's end: the next quote not escaped (base64 has none).
    std::size_t end = at + 1;
    for (; end < body.size(); ++end) {
      if (body[end] == '\\') {
        ++end;  // the escaped character
      } else if (body[end] == '"') {
        break;
      }
    }
    if (end >= body.size()) break;  // unterminated: not JSON; count it as text
    // A key ("data:...": ...) is text, not media.
    std::size_t next = end + 1;
    while (next < body.size() &&
           (body[next] == ' ' || body[next] == '\t' || body[next] == '\n' || body[next] == '\r'))
      ++next;
    if (next < body.size() && body[next] == ':') {
      at = end + 1;
      continue;
    }
    out.bytes += at - counted_from;
    out.media_bytes += end + 1 - at;
    ++out.media;
    counted_from = end + 1;
    at = end + 1;
  }
  out.bytes += body.size() - counted_from;
  return out;
}

}  // namespace llmgate::providers
