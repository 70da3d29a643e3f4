#include "providers/prompt_prefix.h"

#include <string_view>

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

struct Running {
  std::uint64_t hash = kSeed;
  std::size_t bytes = 0;
  std::uint32_t media = 0;
  void add(std::string_view text) {
    hash = config::hash64(text, hash);
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
    const std::size_t end = json_value_end(text, p);
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
