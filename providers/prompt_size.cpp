#include "providers/prompt_size.h"

#include <algorithm>
#include <cstring>

#include "providers/find_bytes.h"

namespace llmgate::providers {
namespace {
// How far into a data: URL its ";base64," may be (the media type and its
// parameters come first).
constexpr std::size_t kMaxMediaHead = 256;
}  // namespace

PromptSize measure_prompt(std::string_view body) {
  PromptSize out;
  constexpr std::string_view kData = "\"data:";
  std::size_t counted_from = 0;  // the bytes before this are accounted for
  std::size_t at = 0;
  // (find_bytes: string_view::find stops at every quote, a JSON body's
  // commonest byte, to compare what follows.)
  while ((at = find_bytes(body, kData, at)) != std::string_view::npos) {
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
    // Only base64 media (RFC 2397: "data:[<type>][;params];base64,"), the
    // marker near the start: a text that begins with "data:" is text.
    const std::string_view head =
        body.substr(at + 1, std::min<std::size_t>(end - at - 1, kMaxMediaHead));
    if ((next < body.size() && body[next] == ':') ||
        head.find(";base64,") == std::string_view::npos) {
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
