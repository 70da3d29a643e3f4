// Fuzzes the upstream SSE reader: providers::SseParser (incremental, with an
// event size limit) and providers::inspect_chunk / parse_chunk on each
// event's data.
//
// Input: a 4-byte header, then the stream bytes.
//   byte 0     event size limit: 0 = 1 MiB (the default), else byte0 * 4 bytes
//   byte 1     largest piece when split: 1 + byte1 bytes
//   bytes 2-3  seed for the piece lengths
// The stream is fed once whole and once in pieces of pseudo-random lengths;
// both must yield the same events and the same final state. Each event's data
// then goes through parse_chunk (the nlohmann reference), whose result must be
// self-consistent: events nested deeper than providers::kMaxJsonDepth are
// malformed (never parsed), and usage counts are what the upstream sent when
// plausible, else 0, always within [0, 10^12] (total: [0, 2 * 10^12]) so sums
// cannot overflow. And through inspect_chunk (the relay's allocation-free
// scanner), which must agree with parse_chunk on every field but `json`;
// and, given the prefix it kept from the stream's earlier events (resuming
// after the bytes they share), exactly with itself without one.
//
// Each chunk, its choices read as messages, also goes through
// stream_of_completion (an upstream JSON answer made a stream): every event it
// makes is a chunk the relay accepts.
//
// Regression seeds (corpus/fuzz_sse_parser/regression-*) replay the fixed
// findings in tests/fuzz/findings/: a usage total that overflowed, and an
// event nested past the depth limit.
#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "providers/chat_chunk.h"
#include "providers/completion_assembler.h"
#include "providers/json_depth.h"
#include "providers/sse_parser.h"
#include "providers/upstream_protocol.h"
#include "tests/fuzz/fuzz_check.h"

namespace {

using llmgate::providers::ChatChunk;
using llmgate::providers::Frame;
using llmgate::providers::SseParser;
using nlohmann::json;

struct Event {
  std::string raw, data, event, id;
  bool has_data;
  bool operator==(const Event&) const = default;
};

struct Outcome {
  std::vector<Event> events;
  SseParser::Status status = SseParser::Status::kOk;
  bool partial = false;
  std::size_t buffered = 0;
  bool operator==(const Outcome&) const = default;
};

// Feeds `pieces` in order, stopping after kEventTooLarge (the parser must not
// be fed again then). With `shrink`, the parser gives its memory back between
// pieces (as the relay does when a stream goes quiet).
template <typename Pieces>
Outcome run(std::size_t limit, const Pieces& pieces, bool shrink = false) {
  SseParser parser(limit);
  Outcome out;
  for (std::string_view piece : pieces) {
    out.status = parser.feed(piece, [&](const Frame& e) {
      out.events.push_back({std::string(e.raw), std::string(e.data), std::string(e.event),
                            std::string(e.id), e.has_data});
    });
    if (out.status != SseParser::Status::kOk) break;
    if (shrink) parser.shrink();
  }
  out.partial = parser.has_partial_event();
  out.buffered = parser.buffered_bytes();
  return out;
}

void check_event(const Event& e, std::size_t limit) {
  FUZZ_CHECK(!e.raw.empty());
  // An event ends at a line break, and only line breaks follow its last
  // non-break byte, which was within the limit: CR LF CR at most.
  FUZZ_CHECK(e.raw.back() == '\n' || e.raw.back() == '\r');
  FUZZ_CHECK(e.raw.size() <= limit + 3);
  FUZZ_CHECK(e.data.size() <= e.raw.size());
  FUZZ_CHECK(e.event.size() <= e.raw.size());
  FUZZ_CHECK(e.id.size() <= e.raw.size());
  FUZZ_CHECK(e.has_data || e.data.empty());
  FUZZ_CHECK(e.event.find_first_of("\r\n") == std::string::npos);
  FUZZ_CHECK(e.id.find_first_of("\r\n") == std::string::npos);
}

constexpr std::int64_t kMaxTokens = 1'000'000'000'000;  // providers::usage_of

// What usage_of should read for one count: the number if it is an integer in
// [0, kMaxTokens], else 0.
std::int64_t plausible_count(const json& usage, const char* key) {
  auto f = usage.find(key);
  if (f == usage.end()) return 0;
  if (f->is_number_unsigned()) {
    const std::uint64_t v = f->get<std::uint64_t>();
    return v <= static_cast<std::uint64_t>(kMaxTokens) ? static_cast<std::int64_t>(v) : 0;
  }
  if (f->is_number_integer()) {
    const std::int64_t v = f->get<std::int64_t>();
    return v >= 0 && v <= kMaxTokens ? v : 0;
  }
  return 0;
}

void check_usage(const ChatChunk& c) {
  const auto it = c.json.find("usage");
  FUZZ_CHECK(c.usage.has_value() == (it != c.json.end() && it->is_object()));
  if (!c.usage) return;
  const llmgate::providers::Usage& u = *c.usage;
  FUZZ_CHECK(u.prompt_tokens >= 0 && u.prompt_tokens <= kMaxTokens);
  FUZZ_CHECK(u.completion_tokens >= 0 && u.completion_tokens <= kMaxTokens);
  FUZZ_CHECK(u.total_tokens >= 0 && u.total_tokens <= 2 * kMaxTokens);
  FUZZ_CHECK(u.prompt_tokens == plausible_count(*it, "prompt_tokens"));
  FUZZ_CHECK(u.completion_tokens == plausible_count(*it, "completion_tokens"));
  const std::int64_t total = plausible_count(*it, "total_tokens");
  FUZZ_CHECK(u.total_tokens == (total != 0 ? total : u.prompt_tokens + u.completion_tokens));
  auto detail = [&](const char* object, const char* key) -> std::int64_t {
    auto d = it->find(object);
    return d != it->end() && d->is_object() ? plausible_count(*d, key) : 0;
  };
  FUZZ_CHECK(u.reasoning_tokens == detail("completion_tokens_details", "reasoning_tokens"));
  FUZZ_CHECK(u.cached_tokens == detail("prompt_tokens_details", "cached_tokens"));
}

// inspect_chunk scans the text itself and falls back to parse_chunk for
// anything unusual; either way it must say what parse_chunk says.
// A plain chunk assembles, unparsed, to exactly what the parsed chunk does:
// alone (when it carries no metadata) and after a chunk that gave all of it.
// The assembler takes a plain chunk unparsed exactly as it takes the parsed
// one: alone, after metadata it already has, and after a chunk that set
// everything the plain one may set (role, content, finish reason, usage).
void check_plain(const ChatChunk& c, const ChatChunk& ref) {
  using llmgate::providers::CompletionAssembler;
  const json before[] = {
      json(nullptr),
      json::parse(R"({"id":"i","created":1,"model":"m","system_fingerprint":"f",)"
                  R"("service_tier":"t","choices":[]})"),
      json::parse(R"({"id":"","created":0,"choices":[{"index":0,"delta":{"role":"tool",)"
                  R"("content":"a"},"finish_reason":"length"}],"usage":{"prompt_tokens":1}})"),
  };
  for (const json& first : before) {
    CompletionAssembler fast, slow;
    fast.add(first);
    slow.add(first);
    slow.add(ref.json);
    fast.add_plain(c);
    FUZZ_CHECK(fast.result() == slow.result());
    FUZZ_CHECK(fast.usage() == slow.usage());
    FUZZ_CHECK(json::parse(fast.body()) == slow.result());
  }
  // Plain all the way (twice: metadata kept once, texts joined): the text
  // written without a document is the same document; and so it stays when
  // a parsed chunk comes after the plain ones.
  for (const json& then : before) {
    CompletionAssembler fast, slow;
    fast.add_plain(c);
    fast.add_plain(c);
    slow.add(ref.json);
    slow.add(ref.json);
    FUZZ_CHECK(json::parse(fast.body()) == slow.result());
    if (then.is_null()) continue;
    fast.add(then);
    slow.add(then);
    FUZZ_CHECK(fast.result() == slow.result());
    FUZZ_CHECK(json::parse(fast.body()) == slow.result());
  }
}

// Every field equal, the views by their text.
void check_same_inspection(const ChatChunk& a, const ChatChunk& b) {
  FUZZ_CHECK(a.kind == b.kind);
  FUZZ_CHECK(a.has_output == b.has_output);
  FUZZ_CHECK(a.has_reasoning == b.has_reasoning);
  FUZZ_CHECK(a.has_finish == b.has_finish);
  FUZZ_CHECK(a.usage_only == b.usage_only);
  FUZZ_CHECK(a.usage == b.usage);
  FUZZ_CHECK(a.output_chars == b.output_chars);
  FUZZ_CHECK(a.json == b.json);
  FUZZ_CHECK(a.error_message == b.error_message);
  FUZZ_CHECK(a.plain == b.plain);
  FUZZ_CHECK(a.plain_choice == b.plain_choice);
  FUZZ_CHECK(a.has_role == b.has_role);
  FUZZ_CHECK(a.has_content == b.has_content);
  FUZZ_CHECK(a.has_finish_reason == b.has_finish_reason);
  FUZZ_CHECK(a.role == b.role);
  FUZZ_CHECK(a.content == b.content);
  FUZZ_CHECK(a.finish_reason == b.finish_reason);
  FUZZ_CHECK(a.usage_json == b.usage_json);
  FUZZ_CHECK(a.meta_keys == b.meta_keys);
  FUZZ_CHECK(a.meta == b.meta);
}

// With the stream's prefix (`prefix`, from the events before): the same as
// without; then again (resuming after this chunk's own prefix).
void check_resumed(std::string_view data, const ChatChunk& whole,
                   llmgate::providers::ChunkPrefix& prefix) {
  for (int i = 0; i < 2; ++i) {
    ChatChunk c;
    llmgate::providers::inspect_chunk(data, c, prefix);
    check_same_inspection(c, whole);
    // The scanner's answer (not parse_chunk's) leaves the prefix of this chunk.
    if (c.kind == ChatChunk::Kind::kChunk && c.json.is_null())
      FUZZ_CHECK(data.starts_with(prefix.text()) && !prefix.text().empty());
  }
}

void check_inspect_agrees(std::string_view data, const ChatChunk& ref,
                          llmgate::providers::ChunkPrefix& prefix) {
  const ChatChunk c = llmgate::providers::inspect_chunk(data);
  check_resumed(data, c, prefix);
  FUZZ_CHECK(c.kind == ref.kind);
  FUZZ_CHECK(c.has_output == ref.has_output);
  FUZZ_CHECK(c.has_finish == ref.has_finish);
  FUZZ_CHECK(c.has_reasoning == ref.has_reasoning);
  FUZZ_CHECK(!c.has_reasoning || c.has_output);
  FUZZ_CHECK(c.usage_only == ref.usage_only);
  FUZZ_CHECK(c.usage.has_value() == ref.usage.has_value());
  if (ref.usage) {
    FUZZ_CHECK(c.usage->prompt_tokens == ref.usage->prompt_tokens);
    FUZZ_CHECK(c.usage->completion_tokens == ref.usage->completion_tokens);
    FUZZ_CHECK(c.usage->total_tokens == ref.usage->total_tokens);
    FUZZ_CHECK(c.usage->reasoning_tokens == ref.usage->reasoning_tokens);
    FUZZ_CHECK(c.usage->cached_tokens == ref.usage->cached_tokens);
  }
  FUZZ_CHECK(c.output_chars == ref.output_chars);
  FUZZ_CHECK(c.error_message == ref.error_message);
  // Its `json` is null, or parse_chunk's when it fell back.
  FUZZ_CHECK(c.json.is_null() || c.json == ref.json);
  FUZZ_CHECK(!c.plain || c.kind == ChatChunk::Kind::kChunk);
  if (c.plain) check_plain(c, ref);
}

// An upstream's JSON answer turned into a stream (stream_of_completion: the
// chunk's choices read as messages): every event is a chunk the relay
// accepts, and the stream ends with [DONE].
void check_streamed_completion(const json& chunk) {
  json completion = chunk;
  for (auto& ch : completion["choices"]) {
    if (!ch.is_object()) continue;
    if (auto d = ch.find("delta"); d != ch.end()) {
      ch["message"] = *d;
      ch.erase("delta");
    }
  }
  const std::string sse = llmgate::providers::stream_of_completion(completion, true);
  FUZZ_CHECK(sse.size() >= 14 && sse.compare(sse.size() - 14, 14, "data: [DONE]\n\n") == 0);
  for (std::size_t at = 0; (at = sse.find("data: ", at)) != std::string::npos;) {
    const std::size_t end = sse.find("\n\n", at);
    FUZZ_CHECK(end != std::string::npos);
    const std::string data = sse.substr(at + 6, end - at - 6);
    at = end + 2;
    if (data == "[DONE]" || llmgate::providers::json_too_deep(data)) continue;
    FUZZ_CHECK(llmgate::providers::parse_chunk(data).kind == ChatChunk::Kind::kChunk);
  }
}

void check_chunk(std::string_view data, llmgate::providers::ChunkPrefix& prefix) {
  const ChatChunk c = llmgate::providers::parse_chunk(data);
  using Kind = ChatChunk::Kind;
  FUZZ_CHECK((c.kind == Kind::kDone) == (data == "[DONE]"));
  if (llmgate::providers::json_too_deep(data)) FUZZ_CHECK(c.kind == Kind::kMalformed);
  switch (c.kind) {
    case Kind::kDone:
      FUZZ_CHECK(c.json.is_null());
      break;
    case Kind::kChunk:
      FUZZ_CHECK(c.json.is_object() && c.json.contains("choices") &&
                 c.json.at("choices").is_array());
      FUZZ_CHECK(!c.usage_only || (c.usage.has_value() && c.json.at("choices").empty()));
      FUZZ_CHECK(c.output_chars == 0 || c.has_output);
      FUZZ_CHECK(c.output_chars <= data.size());
      check_usage(c);
      check_streamed_completion(c.json);
      break;
    case Kind::kError:
      FUZZ_CHECK(c.json.is_object());
      break;
    case Kind::kMalformed:
      FUZZ_CHECK(!c.error_message.empty());
      break;
  }
  if (c.kind != Kind::kChunk) {
    FUZZ_CHECK(!c.has_output && !c.has_finish && !c.usage_only && c.output_chars == 0);
  }
  if (c.usage) FUZZ_CHECK(c.kind == Kind::kChunk);
  check_inspect_agrees(data, c, prefix);
}

// The OpenAI API beyond chat (providers/openai_api_protocols.cpp) reads the
// same events: whatever they are, its classification keeps the relay's
// promises (output has characters, reasoning is output, an error or a
// malformed event says why, nothing but data carries output or an id).
void check_api_events(const Event& e) {
  using llmgate::providers::UpstreamEvent;
  const Frame ev{e.raw, e.data, e.event, e.id, e.has_data};
  for (const auto* p : {&llmgate::providers::openai_responses_protocol(),
                        &llmgate::providers::openai_completions_protocol(),
                        &llmgate::providers::openai_embeddings_protocol()}) {
    llmgate::providers::ChunkPrefix prefix;
    const UpstreamEvent out = p->classify(ev, prefix);
    FUZZ_CHECK(out.raw == e.raw);
    switch (out.kind) {
      case UpstreamEvent::Kind::kData:
        FUZZ_CHECK(out.chunk.kind == ChatChunk::Kind::kChunk);
        FUZZ_CHECK(!out.chunk.has_reasoning || out.chunk.has_output);
        FUZZ_CHECK(out.chunk.has_output == (out.chunk.output_chars > 0));
        FUZZ_CHECK(out.chunk.output_chars <= e.data.size());
        break;
      case UpstreamEvent::Kind::kError:
      case UpstreamEvent::Kind::kMalformed:
        FUZZ_CHECK(!out.message.empty());
        [[fallthrough]];
      case UpstreamEvent::Kind::kKeepAlive:
      case UpstreamEvent::Kind::kDone:
        FUZZ_CHECK(!out.chunk.has_output && !out.chunk.has_finish && !out.chunk.usage);
        FUZZ_CHECK(out.response_id.empty());
        break;
    }
    if (!e.has_data && p != &llmgate::providers::openai_embeddings_protocol())
      FUZZ_CHECK(out.kind == UpstreamEvent::Kind::kKeepAlive);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 4) return 0;
  const std::size_t limit = data[0] == 0 ? std::size_t{1} << 20 : std::size_t{data[0]} * 4;
  const std::size_t max_piece = std::size_t{data[1]} + 1;
  std::uint32_t state = (std::uint32_t{data[2]} << 8 | data[3]) * 2654435761u + 1;
  const std::string_view stream(reinterpret_cast<const char*>(data) + 4, size - 4);

  const Outcome whole = run(limit, std::vector<std::string_view>{stream});

  std::vector<std::string_view> pieces;
  for (std::size_t pos = 0; pos < stream.size();) {
    state = state * 1103515245u + 12345u;
    const std::size_t n = 1 + (state >> 16) % max_piece;
    pieces.push_back(stream.substr(pos, n));
    pos += n;
  }
  const Outcome split = run(limit, pieces);
  FUZZ_CHECK(split.events.size() == whole.events.size());
  FUZZ_CHECK(split == whole);
  FUZZ_CHECK(run(limit, pieces, /*shrink=*/true) == whole);

  llmgate::providers::ChunkPrefix prefix;  // the stream's, across its events
  for (const Event& e : whole.events) {
    check_event(e, limit);
    if (e.has_data) check_chunk(e.data, prefix);
    check_api_events(e);
  }
  if (whole.status == SseParser::Status::kOk) FUZZ_CHECK(whole.buffered <= limit + 3);
  return 0;
}
