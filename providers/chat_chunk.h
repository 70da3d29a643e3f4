// What the gateway needs to know about one streamed chat.completion.chunk.
//
// The relay decides from this whether an event is the first token (TTFT stops
// here), carries usage (output tokens for TPS and cost), ends the stream, or
// is broken (fail over before commit, error event after).
#pragma once

#include <array>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>

namespace llmgate::providers {

struct Usage {
  std::int64_t prompt_tokens = 0;
  std::int64_t completion_tokens = 0;
  std::int64_t total_tokens = 0;
  // completion_tokens_details.reasoning_tokens: thinking inside
  // completion_tokens (hidden unless the stream carried reasoning text).
  std::int64_t reasoning_tokens = 0;
  // prompt_tokens_details.cached_tokens: input read from the provider's
  // prompt cache (inside prompt_tokens, billed at the cached price).
  std::int64_t cached_tokens = 0;
  bool operator==(const Usage&) const = default;
};

struct ChatChunk {
  enum class Kind {
    kDone,       // "data: [DONE]"
    kChunk,      // a well-formed chat.completion.chunk
    kError,      // an in-band {"error": {...}} event from the upstream
    kMalformed,  // not JSON, or JSON that is not a chunk
  };
  Kind kind = Kind::kMalformed;
  // Carries output: a delta field other than `role` with something in it
  // (content, refusal, reasoning, tool or function calls, audio, annotations,
  // and fields not known today). This is the "first token" event; a
  // role-only or empty delta (nulls, "", [], {}) is not.
  bool has_output = false;
  bool has_reasoning = false;    // reasoning text (reasoning_content / reasoning) in a delta
  bool has_finish = false;       // some choice has a non-null finish_reason
  bool usage_only = false;       // "choices": [] with usage: the include_usage chunk
  std::optional<Usage> usage;    // non-null usage object
  std::size_t output_chars = 0;  // characters of output text in this chunk
  nlohmann::json json;           // parse_chunk(): the parsed event (null for kDone /
                                 // kMalformed); inspect_chunk(): null unless it fell back
  std::string error_message;     // for kError / kMalformed

  // inspect_chunk() only (parse_chunk() leaves them false/empty): a plain
  // chunk, one the assembler can take without parsing it -- every chunk of a
  // usual answer: the role chunk, the content chunks, the finish chunk and
  // the usage chunk. At most one choice, with "index" 0 or absent and a
  // delta object whose non-null fields are only "role" and "content"
  // (strings); a string or null finish_reason; no logprobs or other choice
  // field; no top-level field the assembler keeps beyond the kMeta* ones;
  // and a usage object only when there is no choice. The views below are the
  // JSON text of `data` (valid while it is): strings between their quotes,
  // still escaped.
  static constexpr unsigned kMetaId = 1, kMetaCreated = 2, kMetaModel = 4,
                            kMetaSystemFingerprint = 8, kMetaServiceTier = 16;
  bool plain = false;
  bool plain_choice = false;  // the chunk has its one choice
  bool has_role = false, has_content = false, has_finish_reason = false;
  std::string_view role, content, finish_reason;
  std::string_view usage_json;  // the usage object's text, when there is one
  // Which of id, created, model, system_fingerprint and service_tier are
  // present and not null (kMeta* bits), and each one's JSON text, in that
  // order.
  unsigned meta_keys = 0;
  std::array<std::string_view, 5> meta{};

  // Drops the views (before `data` goes away; the flags stay).
  void forget_views() {
    role = content = finish_reason = usage_json = {};
    meta = {};
  }
};

// The relay's per-event classification, on the hot path (once per streamed
// event): a single-pass validating scan of `data` that allocates nothing for
// well-formed chunks. It returns exactly what parse_chunk() returns in every
// field except `json`, which it leaves null; for anything unusual (not a chunk,
// an in-band error, invalid JSON, a repeated key it reads, ...) it simply
// returns parse_chunk(data), `json` included. Callers that need the document
// must call parse_chunk().
ChatChunk inspect_chunk(std::string_view data);
// The same into `c`, a default ChatChunk (the relay's event, filled in place).
void inspect_chunk(std::string_view data, ChatChunk& c);

// What inspect_chunk learnt from the last chunk of one stream: the text of
// its top-level members before "choices" (or "usage") and what scanning them
// gave. The chunks of one stream open with the same bytes (`id`, `object`,
// `created`, `model`, `system_fingerprint`: half of a content chunk), so a
// chunk that starts with this text is scanned from where it ends, with the
// state it left: the same answer as a whole scan, for less than half of the
// work. Keep one per stream; it allocates when the prefix changes (at the
// first chunk), not per chunk.
//
// It also keeps the "choices" member of the stream's last plain chunk with
// content, around its content string: the content chunks of a stream differ
// there only (`[{"index":0,"delta":{"content":"` ... `"},"finish_reason":null}]`),
// so a "choices" member made of those bytes around a valid string is read as
// that chunk's was, with the new string: nothing in it but the string scanned.
struct ChunkPrefix {
  // The chunks' shared text before "choices" (empty: nothing to resume from).
  std::string_view text() const { return part(kText); }
  unsigned seen = 0;
  unsigned meta_keys = 0;
  bool plain = true;
  std::array<std::pair<std::uint32_t, std::uint32_t>, 5> meta{};  // offset, size in `text`

  // A string value in `choice`: offset (below choice_head: from the member's
  // '['; else from past the content's closing quote, plus choice_head), size.
  struct Span {
    std::uint32_t offset = 0, size = 0;
    bool set = false;
  };
  // The member's text before the content, then after it.
  std::string_view choice() const { return part(kChoice); }
  std::uint32_t choice_head = 0;  // bytes of `choice` up to the content's opening quote (0: none)
  Span role, finish_reason;       // the choice's role and finish reason strings, if any

  // What followed the "choices" member, to the end of the text, when the
  // "choices" key came right after `text` and what followed showed in
  // nothing but `plain` (",\"usage\":null}"): its text with the values of
  // up to kHoles other members cut out (`holes`: where each was, and
  // whether a number or a string) -- values that change from chunk to chunk
  // (OpenAI's "obfuscation" string, a benchmark's time stamp) --, and
  // `plain` after it. A chunk that has `text`, then "choices": as `choice`
  // with another content string, then this, needs no other scan
  // (after_set, `usual`).
  static constexpr std::size_t kHoles = 2;
  struct Hole {
    std::uint16_t at = 0;  // offset in `after`
    bool number = false;   // else a string
  };
  std::string_view after() const { return part(kAfter); }
  std::array<Hole, kHoles> holes{};
  std::uint8_t hole_count = 0;
  bool after_plain = true;
  bool after_set = false;

  // The stream's usual chunk is known: `text`, "\"choices\":", the
  // choice's text before its content, a string, the rest of `choice`, then
  // `after`. Set at the end of a scan that read a chunk whole (with
  // after_set and a choice), cleared when a choice is learnt. A chunk of
  // that shape is read from those comparisons and its content string,
  // without scanning any member.
  bool usual = false;

  // text(), choice() and after(), in that order in one buffer: one
  // allocation a stream. Part `p` becomes `pieces` joined (never views of
  // the buffer itself).
  enum Part : std::size_t { kText, kChoice, kAfter };
  void set(Part p, std::span<const std::string_view> pieces);
  void set(Part p, std::string_view text) { set(p, std::span(&text, 1)); }

 private:
  std::size_t offset(Part p) const {
    std::size_t at = 0;
    for (std::size_t i = 0; i < p; ++i) at += size_[i];
    return at;
  }
  std::string_view part(Part p) const { return {store_.data() + offset(p), size_[p]}; }
  std::string store_;
  std::array<std::uint32_t, 3> size_{};
};
// inspect_chunk(data, c) for the next chunk of the stream `prefix` follows,
// remembering this chunk's prefix for the next.
void inspect_chunk(std::string_view data, ChatChunk& c, ChunkPrefix& prefix);

// The reference classification: parses `data` with nlohmann::json and fills
// `json` (the parsed event for kChunk and kError). inspect_chunk() must agree
// with it on every other field for every input. Use it when the parsed DOM is
// needed: assembling a non-streamed response from the chunks, or rewriting an
// event (stripping usage the client did not ask for).
ChatChunk parse_chunk(std::string_view data);

// The "usage" object of a parsed chunk or completion, if present and not null.
std::optional<Usage> usage_of(const nlohmann::json& j);

}  // namespace llmgate::providers
