#include "providers/prompt_prefix.h"

#include <string>
#include <string_view>
#include <tuple>
#include <utility>

#include "providers/find_bytes.h"
#include "providers/prompt_size.h"

namespace llmgate::providers {
namespace {

constexpr std::uint64_t kSeed = 0x6c6c6d676174652dULL;  // "llmgate-"

// What a provider reads before the conversation, in the order it reads
// it (OpenAI: tools, then the schema, then the messages; Anthropic: tools,
// then system), whatever order the body has them in.
constexpr std::string_view kPreamble[] = {"tools", "functions", "response_format",
                                          "text",  "system",    "instructions"};

bool space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

constexpr std::string_view kMark = "\"cache_control\"";

// Where the next "cache_control" member of `text` at or after `from` starts
// and ends (from the comma before it to its value's end; an object's first
// member from its key to the next member's), or npos. `from`: where the
// previous one's cut ended.
// A quote after '{', ',' or whitespace opens a string (inside one it would
// be escaped), and a string followed by ':' is a key.
std::pair<std::size_t, std::size_t> next_mark(std::string_view text, std::size_t from) {
  const std::size_t kept = from;  // what is before it was cut already (a comma, say)
  while (from < text.size()) {
    const std::size_t key = find_bytes(text, kMark, from);
    if (key == std::string_view::npos) break;
    from = key + 1;
    std::size_t before = key;
    while (before > 0 && space(text[before - 1])) --before;
    if (before == 0 || (text[before - 1] != ',' && text[before - 1] != '{')) continue;
    std::size_t colon = key + kMark.size();
    while (colon < text.size() && space(text[colon])) ++colon;
    if (colon >= text.size() || text[colon] != ':') continue;
    std::size_t value = colon + 1;
    while (value < text.size() && space(text[value])) ++value;
    std::size_t end = json_value_end(text, value);
    if (end > text.size()) break;
    if (text[before - 1] == ',' && before - 1 >= kept) return {before - 1, end};
    // The first member (or the first after a mark cut with the comma before
    // it): the comma after it goes with it.
    std::size_t next = end;
    while (next < text.size() && space(text[next])) ++next;
    if (next < text.size() && text[next] == ',') {
      end = next + 1;
      while (end < text.size() && space(text[end])) ++end;
    }
    return {key, end};
  }
  return {std::string_view::npos, std::string_view::npos};
}

// `text` without its "cache_control" members (Anthropic's cache marks, also
// written into chat requests for the gateways that pass them on): a coding
// agent moves its marks to the latest turn each time, and a message must
// hash the same in the next turn, where its mark is gone. `text` itself
// when it has none; else the rest, in `scratch`.
std::string_view without_marks(std::string_view text, std::string& scratch) {
  auto [cut, resume] = next_mark(text, 0);
  if (cut == std::string_view::npos) return text;
  scratch.clear();
  std::size_t kept = 0;
  while (cut != std::string_view::npos) {
    scratch.append(text.substr(kept, cut - kept));
    kept = resume;
    std::tie(cut, resume) = next_mark(text, resume);
  }
  scratch.append(text.substr(kept));
  return scratch;
}

struct Running {
  std::uint64_t hash = kSeed;
  std::size_t bytes = 0;
  std::uint32_t media = 0;
  std::string scratch;
  void add(std::string_view text) {
    hash = config::hash64(without_marks(text, scratch), hash);
    const PromptSize size = measure_prompt(text);
    bytes += size.bytes;
    media += size.media;
  }
  config::PrefixCut cut() const { return {hash == 0 ? 1 : hash, bytes, media}; }
};

}  // namespace

PromptPrefixes prompt_prefixes(const RequestBody& body) {
  PromptPrefixes out;
  const RequestBody::Member* conversation = body.find("messages");
  if (conversation == nullptr || conversation->v.type != RequestBody::Type::kArray) {
    conversation = body.find("input");
  }
  if (conversation == nullptr || conversation->v.type != RequestBody::Type::kArray ||
      conversation->v.size == 0) {
    return out;
  }
  Running running;
  bool preamble = false;
  for (std::string_view key : kPreamble) {
    if (const auto* m = body.find(key)) {
      running.hash = config::hash64(key, running.hash);
      running.add(body.text_of(*m));
      preamble = true;
    }
  }
  // The firsts are kept; the rest is a ring of the latest.
  std::size_t firsts = 0;
  if (preamble) out.cuts[firsts++] = running.cut();
  const std::size_t ring = PromptPrefixes::kMaxCuts - firsts - 1;  // after the first message's
  std::size_t later = 0;                                           // cuts after the first message
  const std::string_view text = body.text_of(*conversation);
  std::size_t p = 1;  // past the '['
  bool first = true;
  while (p < text.size()) {
    while (p < text.size() && (space(text[p]) || text[p] == ',')) ++p;
    if (p >= text.size() || text[p] == ']') break;
    // (A message the index recorded is not scanned for its end.)
    const std::size_t end = body.value_end(conversation->value + p) - conversation->value;
    running.add(text.substr(p, end - p));
    p = end;
    if (first) {
      out.cuts[firsts++] = running.cut();
      first = false;
    } else {
      out.cuts[firsts + later % ring] = running.cut();
      ++later;
    }
  }
  // Unroll the ring: shortest first.
  if (later > ring) {
    std::array<config::PrefixCut, PromptPrefixes::kMaxCuts> ordered{};
    for (std::size_t i = 0; i < ring; ++i) ordered[i] = out.cuts[firsts + (later + i) % ring];
    for (std::size_t i = 0; i < ring; ++i) out.cuts[firsts + i] = ordered[i];
    later = ring;
  }
  out.count = firsts + later;
  out.firsts = firsts;
  return out;
}

}  // namespace llmgate::providers
