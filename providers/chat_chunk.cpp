#include "providers/chat_chunk.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cstring>
#include <functional>
#include <optional>
#include <utility>

#include "providers/json_depth.h"
#include "providers/json_scan.h"

namespace llmgate::providers {
namespace {

// Counts from an upstream are untrusted: anything negative or beyond any real
// usage (10^12 tokens) reads as 0, so sums cannot overflow.
constexpr std::int64_t kMaxTokens = JsonScanner::kMaxCount;

std::size_t text_size(const nlohmann::json& delta, const char* key) {
  auto it = delta.find(key);
  if (it == delta.end() || !it->is_string()) return 0;
  return it->get_ref<const std::string&>().size();
}

constexpr std::string_view kChoicesKey = "\"choices\":";

// A string of a "choices" member read as the stream's template (`choice`:
// where its '[' is; `after`: past the content's closing quote).
std::string_view choice_view(const ChunkPrefix& t, const ChunkPrefix::Span& s, const char* choice,
                             const char* after) {
  if (!s.set) return {};
  const char* d = s.offset < t.choice_head ? choice + s.offset : after + (s.offset - t.choice_head);
  return std::string_view(d, s.size);
}

// ---------------------------------------------------------------------------
// inspect_chunk's scanner (json_scan.h: one pass, no allocation, exactly the
// documents nlohmann accepts) reading only what ChatChunk reports. It gives
// up (returns false) on anything it cannot answer exactly -- invalid JSON,
// nesting past kMaxJsonDepth, a non-null "error", no "choices" array, a key it
// reads appearing twice in one object (nlohmann keeps the last) -- and
// inspect_chunk then asks parse_chunk, the reference.

class ChunkScanner : public JsonScanner {
 public:
  using JsonScanner::JsonScanner;

  // Fills the classification fields of `c` (kind kChunk); false: give up.
  // With a prefix: resumes after it when the text starts with it, and
  // remembers this text's (on success).
  bool scan(ChatChunk& c, ChunkPrefix* prefix);

 private:
  // One top-level member (p_ at its value).
  bool top_member(std::string_view key, unsigned& seen, std::size_t& choice_count, Usage& u,
                  bool& has_usage, ChatChunk& c);
  // After the top-level object: the rest of `c`.
  bool finish(ChatChunk& c, unsigned seen, std::size_t choice_count, Usage& u, bool has_usage);
  bool choices(int depth, std::size_t& count, ChatChunk& c);
  // The "choices" member (p_ at its '['), when it is the stream's last plain
  // content choice with another string (ChunkPrefix::choice); else false,
  // p_ unmoved.
  bool like_last_choice(std::size_t& count, ChatChunk& c);
  // The stream's content choice template at p_ (the '[' of "choices") with
  // another valid content string: p_ past it; else nullopt, p_ unmoved.
  struct ChoiceMatch {
    const char* start;    // the '['
    const char* content;  // the content string's first byte
    const char* after;    // past its closing quote
    std::size_t chars;    // its decoded size
    std::string_view text() const {
      return {content, static_cast<std::size_t>(after - 1 - content)};
    }
  };
  [[gnu::always_inline]] inline std::optional<ChoiceMatch> match_choice();
  // Remembers the "choices" member [at, p_) as that template.
  void learn_choice(const char* at);
  // The whole chunk when it is the stream's usual one (ChunkPrefix::usual):
  // `c` filled as scan() would; else false, `c` unchanged (p_ moved).
  bool like_last_chunk(ChatChunk& c);
  // Remembers what followed "choices" as ChunkPrefix::after.
  void learn_after();
  // The state right after the top-level "choices" member.
  void note_choices_end() {
    choices_end_ = p_;
    meta_at_choices_end_ = meta_;
    plain_at_choices_end_ = plain_;
  }
  bool choice(int depth, ChatChunk& c);
  bool delta(int depth, ChatChunk& c);
  bool usage(int depth, Usage& u);
  template <std::size_t N>
  bool detail(int depth, const char (&name)[N], std::int64_t& out);

  // ChatChunk::plain, as far as seen: cleared by anything that would make the
  // assembler read more than the role, the content, the finish reason, the
  // usage and the kMeta* fields.
  bool plain_ = true;
  // The views ChatChunk::plain hands out (the last "role" wins, as in nlohmann).
  std::optional<std::string_view> role_, content_, finish_;
  std::string_view usage_json_;
  std::array<std::string_view, 5> meta_text_{};
  unsigned meta_ = 0;
  ChunkPrefix* prefix_ = nullptr;      // the stream's, if any
  const char* choices_end_ = nullptr;  // see note_choices_end()
  unsigned meta_at_choices_end_ = 0;
  bool plain_at_choices_end_ = false;
  // After "choices": the number and string values of members that show in
  // nothing but `plain` (ChunkPrefix::holes), [begin, end) each.
  struct ValueSpan {
    const char *begin, *end;
    bool number;
  };
  std::array<ValueSpan, ChunkPrefix::kHoles> holes_{};
  std::size_t hole_count_ = 0;

  // Whether the text at `at` starts with `lit`.
  bool key_at(const char* at, std::string_view lit) const {
    return static_cast<std::size_t>(end_ - at) >= lit.size() &&
           std::memcmp(at, lit.data(), lit.size()) == 0;
  }
};

// p_ is past the '[' of the top-level "choices" array, at `depth`.
bool ChunkScanner::choices(int depth, std::size_t& count, ChatChunk& c) {
  return elements(depth, [&] {
    ++count;
    if (eat('{')) return choice(depth + 1, c);
    plain_ = false;  // not an object: nothing the assembler reads, but rare
    return skip(depth);
  });
}

bool ChunkScanner::choice(int depth, ChatChunk& c) {
  unsigned seen = 0;
  bool has_delta = false;
  const bool ok = members<true>(depth, [&](std::string_view key) {
    if (is(key, "delta")) {
      if (!once(seen, 1)) return false;
      if (eat('{')) {
        has_delta = true;
        return delta(depth + 1, c);
      }
      plain_ = false;
    } else if (is(key, "finish_reason")) {
      if (!once(seen, 2)) return false;
      const char* at = p_;
      Value v;
      if (!value(depth, v)) return false;
      if (v.type != Value::Type::kNull) {
        c.has_finish = true;
        if (v.type == Value::Type::kString)
          finish_ = inner(at);
        else
          plain_ = false;
      }
      return true;
    } else if (is(key, "index")) {
      const char* at = p_;
      Value v;
      if (!value(depth, v)) return false;
      if (std::string_view(at, static_cast<std::size_t>(p_ - at)) != "0") plain_ = false;
      return true;
    }
    Value v;
    if (!value(depth, v)) return false;
    if (v.type != Value::Type::kNull) plain_ = false;  // logprobs, content filters...: kept
    return true;
  });
  if (!has_delta) plain_ = false;
  return ok;
}

bool ChunkScanner::delta(int depth, ChatChunk& c) {
  unsigned seen = 0;
  // Other fields seen, by a hash of the name: a repeated one goes to
  // parse_chunk, where the last value wins (the scanner would count them
  // all). A collision or more than kOthers of them only costs that fallback.
  constexpr std::size_t kOthers = 8;
  std::array<std::size_t, kOthers> others{};
  std::size_t n_others = 0;
  return members<true>(depth, [&](std::string_view key) {
    enum : unsigned { kText = 1, kToolCalls = 2, kFunctionCall = 4, kOther = 8 };
    unsigned what = kOther;
    unsigned bit = 0;
    if (is(key, "content")) {
      what = kText, bit = 1;
    } else if (is(key, "refusal")) {
      what = kText, bit = 2;
    } else if (is(key, "reasoning_content")) {
      what = kText, bit = 4;
    } else if (is(key, "reasoning")) {
      what = kText, bit = 8;
    } else if (is(key, "tool_calls")) {
      what = kToolCalls, bit = 16;
    } else if (is(key, "function_call")) {
      what = kFunctionCall, bit = 32;
    }
    if (bit && !once(seen, bit)) return false;
    const bool role = is(key, "role");
    if (!bit && !role) {
      const std::size_t h = std::hash<std::string_view>{}(key);
      if (n_others == kOthers ||
          std::find(others.begin(), others.begin() + n_others, h) != others.begin() + n_others) {
        return false;
      }
      others[n_others++] = h;
    }
    const char* at = p_;
    Value v;
    if (!value(depth, v)) return false;
    // The assembler reads more than the role and the content (a null adds
    // nothing, and a null role after a string one leaves none).
    if (role) {
      if (v.type == Value::Type::kString)
        role_ = inner(at);
      else if (v.type == Value::Type::kNull)
        role_.reset();
      else
        plain_ = false;
    } else if (bit == 1) {
      if (v.type == Value::Type::kString)
        content_ = inner(at);
      else if (v.type != Value::Type::kNull)
        plain_ = false;
    } else if (v.type != Value::Type::kNull) {
      plain_ = false;
    }
    if (what == kText && v.type == Value::Type::kString) {
      c.output_chars += v.size;
      if (v.size > 0) c.has_output = true;
      if (v.size > 0 && (bit == 4 || bit == 8)) c.has_reasoning = true;
    } else if (what == kToolCalls && v.type == Value::Type::kArray && v.size > 0) {
      c.has_output = true;
    } else if (what == kFunctionCall && v.type != Value::Type::kNull) {
      c.has_output = true;
    } else if (what == kOther && !role && non_empty(v)) {
      c.has_output = true;  // audio, annotations, a field of tomorrow: output all the same
    }
    return true;
  });
}

bool ChunkScanner::usage(int depth, Usage& u) {
  unsigned seen = 0;
  return members<true>(depth, [&](std::string_view key) {
    std::int64_t* field = nullptr;
    unsigned bit = 0;
    if (is(key, "prompt_tokens")) {
      field = &u.prompt_tokens, bit = 1;
    } else if (is(key, "completion_tokens")) {
      field = &u.completion_tokens, bit = 2;
    } else if (is(key, "total_tokens")) {
      field = &u.total_tokens, bit = 4;
    } else if (is(key, "completion_tokens_details")) {
      if (!once(seen, 8)) return false;
      if (eat('{')) return detail(depth + 1, "reasoning_tokens", u.reasoning_tokens);
    } else if (is(key, "prompt_tokens_details")) {
      if (!once(seen, 16)) return false;
      if (eat('{')) return detail(depth + 1, "cached_tokens", u.cached_tokens);
    }
    if (bit && !once(seen, bit)) return false;
    Value v;
    if (!value(depth, v)) return false;
    if (field && v.type == Value::Type::kNumber) *field = v.count;
    return true;
  });
}

// One count inside a usage details object (p_ past its '{').
template <std::size_t N>
bool ChunkScanner::detail(int depth, const char (&name)[N], std::int64_t& out) {
  bool seen = false;
  return members<true>(depth, [&](std::string_view key) {
    const bool mine = is(key, name);
    if (mine && std::exchange(seen, true)) return false;  // nlohmann keeps the last
    Value v;
    if (!value(depth, v)) return false;
    if (mine && v.type == Value::Type::kNumber) out = v.count;
    return true;
  });
}

bool ChunkScanner::scan(ChatChunk& c, ChunkPrefix* prefix) {
  unsigned seen = 0;
  const std::string_view text(begin_, static_cast<std::size_t>(end_ - begin_));
  prefix_ = prefix;
  // The stream's usual chunk: nothing to scan but its content.
  if (prefix && prefix->usual) {
    if (like_last_chunk(c)) return true;
    p_ = begin_;  // as it was: scanned from the start (or the prefix) below
  }
  const bool resume = prefix && !prefix->text().empty() && text.starts_with(prefix->text());
  if (resume) {
    // The state the prefix left (see the resume point below).
    p_ = begin_ + prefix->text().size();
    seen = prefix->seen;
    meta_ = prefix->meta_keys;
    plain_ = prefix->plain;
    for (std::size_t i = 0; i < meta_text_.size(); ++i)
      meta_text_[i] = text.substr(prefix->meta[i].first, prefix->meta[i].second);
  } else {
    if (!open_object()) return false;
  }
  // The last point this chunk could be resumed from: a key at the top level
  // before "choices" and "usage" (the members before it set only seen,
  // plain_ and the meta fields, never `c`). A point after a comma, so every
  // value before it had its end (a number's too).
  const char* resume_at = nullptr;
  unsigned resume_seen = 0, resume_meta = 0;
  bool resume_plain = true;
  std::array<std::string_view, 5> resume_meta_text{};
  std::size_t choice_count = 0;
  Usage u;
  bool has_usage = false;
  const bool ok = members<true>(
      1,
      [&](std::string_view key) {
        if (prefix && !(seen & 3)) {
          resume_at = key_begin_;
          resume_seen = seen;
          resume_meta = meta_;
          resume_plain = plain_;
          resume_meta_text = meta_text_;
        }
        return top_member(key, seen, choice_count, u, has_usage, c);
      },
      resume);
  if (!ok || !finish(c, seen, choice_count, u, has_usage)) return false;
  if (prefix) {
    const auto at = static_cast<std::size_t>(resume_at ? resume_at - begin_ : 0);
    // What followed "choices", if it came right at the resume point and
    // what followed changed nothing but `seen` (see like_last_chunk()).
    constexpr std::size_t kMaxAfter = 128;
    prefix->after_set = at != 0 && choices_end_ && key_at(begin_ + at, kChoicesKey) &&
                        plain_at_choices_end_ && meta_ == meta_at_choices_end_ && !has_usage &&
                        static_cast<std::size_t>(end_ - choices_end_) <= kMaxAfter;
    if (prefix->after_set) learn_after();
    if (at == 0) {
      prefix->set(ChunkPrefix::kText, std::string_view());
    } else if (!resume || at != prefix->text().size()) {
      prefix->set(ChunkPrefix::kText, text.substr(0, at));
      prefix->seen = resume_seen;
      prefix->meta_keys = resume_meta;
      prefix->plain = resume_plain;
      for (std::size_t i = 0; i < resume_meta_text.size(); ++i) {
        const std::string_view m = resume_meta_text[i];
        prefix->meta[i] = m.empty() ? std::pair<std::uint32_t, std::uint32_t>{0, 0}
                                    : std::pair{static_cast<std::uint32_t>(m.data() - begin_),
                                                static_cast<std::uint32_t>(m.size())};
      }
    }
    prefix->usual = prefix->after_set && prefix->choice_head != 0 && !prefix->text().empty();
  }
  return true;
}

bool ChunkScanner::top_member(std::string_view key, unsigned& seen, std::size_t& choice_count,
                              Usage& u, bool& has_usage, ChatChunk& c) {
  if (is(key, "choices")) {
    if (!once(seen, 1)) return false;
    if (prefix_ && like_last_choice(choice_count, c)) {
      note_choices_end();
      return true;
    }
    const char* const at = p_;
    const bool plain_before = plain_;
    if (!eat('[') || !choices(2, choice_count, c)) return false;
    // A plain choice with a content string: nothing else in it shows in `c`.
    if (prefix_ && plain_before && plain_ && choice_count == 1 && content_) learn_choice(at);
    note_choices_end();
    return true;
  }
  if (is(key, "usage")) {
    if (!once(seen, 2)) return false;
    const char* at = p_;
    if (eat('{')) {
      has_usage = true;
      if (!usage(2, u)) return false;
      usage_json_ = std::string_view(at, static_cast<std::size_t>(p_ - at));
      return true;
    }
  } else if (is(key, "error")) {  // only a null one stays on this path
    if (!once(seen, 4) || p_ == end_ || *p_ != 'n') return false;
  } else {
    unsigned meta = is(key, "id")                   ? ChatChunk::kMetaId
                    : is(key, "created")            ? ChatChunk::kMetaCreated
                    : is(key, "model")              ? ChatChunk::kMetaModel
                    : is(key, "system_fingerprint") ? ChatChunk::kMetaSystemFingerprint
                    : is(key, "service_tier")       ? ChatChunk::kMetaServiceTier
                                                    : 0;
    if (meta) {
      if (!once(seen, meta << 3)) plain_ = false;  // repeated: the last one counts
      const char* at = p_;
      Value v;
      if (!value(1, v)) return false;
      if (v.type != Value::Type::kNull) {
        meta_ |= meta;
        meta_text_[static_cast<std::size_t>(std::countr_zero(meta))] =
            std::string_view(at, static_cast<std::size_t>(p_ - at));
      }
      return true;
    }
  }
  const char* const at = p_;
  Value v;
  if (!value(1, v)) return false;
  // Anything else the assembler keeps (a stream's own `obfuscation` aside).
  if (v.type != Value::Type::kNull && !is(key, "object") && !is(key, "obfuscation")) plain_ = false;
  // After "choices", a number or a string here shows in nothing but plain_,
  // whatever its value: a hole in ChunkPrefix::after ("usage" and "error"
  // aside, which are more than that when they are not null).
  const bool scalar = v.type == Value::Type::kNumber || v.type == Value::Type::kString;
  if (choices_end_ && scalar && hole_count_ < holes_.size() && !is(key, "usage") &&
      !is(key, "error")) {
    holes_[hole_count_++] = {at, p_, v.type == Value::Type::kNumber};
  }
  return true;
}

std::optional<ChunkScanner::ChoiceMatch> ChunkScanner::match_choice() {
  const ChunkPrefix& t = *prefix_;
  if (t.choice_head == 0) return std::nullopt;
  const std::string_view choice = t.choice();
  const std::string_view head = choice.substr(0, t.choice_head);
  const std::string_view tail = choice.substr(t.choice_head);
  const char* const start = p_;
  if (static_cast<std::size_t>(end_ - p_) <= choice.size() ||
      std::memcmp(p_, head.data(), head.size()) != 0) {
    return std::nullopt;
  }
  p_ += head.size();
  const char* const content = p_;
  std::size_t chars = 0;
  if (!string<false>(chars, nullptr, nullptr) ||
      static_cast<std::size_t>(end_ - p_) < tail.size() ||
      std::memcmp(p_, tail.data(), tail.size()) != 0) {
    p_ = start;
    return std::nullopt;
  }
  const char* const after = p_;
  p_ += tail.size();
  return ChoiceMatch{start, content, after, chars};
}

bool ChunkScanner::like_last_choice(std::size_t& count, ChatChunk& c) {
  const ChunkPrefix& t = *prefix_;
  const std::optional<ChoiceMatch> m = match_choice();
  if (!m) return false;
  auto view = [&](const ChunkPrefix::Span& s) -> std::optional<std::string_view> {
    if (!s.set) return std::nullopt;
    return choice_view(t, s, m->start, m->after);
  };
  content_ = m->text();
  role_ = view(t.role);
  finish_ = view(t.finish_reason);
  count = 1;
  // What choice() and delta() make of a plain choice.
  c.output_chars += m->chars;
  if (m->chars > 0) c.has_output = true;
  if (finish_) c.has_finish = true;
  return true;
}

bool ChunkScanner::like_last_chunk(ChatChunk& c) {
  const ChunkPrefix& t = *prefix_;
  const std::string_view text = t.text();
  const std::string_view after = t.after();
  const std::size_t last = t.hole_count ? t.holes[t.hole_count - 1].at : 0;
  const std::size_t lead = text.size() + kChoicesKey.size();
  const auto size = static_cast<std::size_t>(end_ - begin_);
  // (The ending first: a stream whose chunks end differently each time
  // pays for one comparison.)
  if (size < lead + after.size() - last ||
      std::memcmp(end_ - (after.size() - last), after.data() + last, after.size() - last) != 0 ||
      std::memcmp(begin_, text.data(), text.size()) != 0 ||
      std::memcmp(begin_ + text.size(), kChoicesKey.data(), kChoicesKey.size()) != 0) {
    return false;
  }
  p_ = begin_ + lead;
  const std::optional<ChoiceMatch> m = match_choice();
  if (!m) return false;
  // The text between the holes as learnt, a value of the same kind in each.
  std::size_t from = 0;
  for (std::size_t i = 0; i < t.hole_count; ++i) {
    const std::string_view piece = after.substr(from, t.holes[i].at - from);
    from = t.holes[i].at;
    if (!key_at(p_, piece)) return false;
    p_ += piece.size();
    Value v;
    if (!value(1, v) ||
        v.type != (t.holes[i].number ? Value::Type::kNumber : Value::Type::kString)) {
      return false;
    }
  }
  // What is left is the ending compared above (a hole's value may not run
  // into it).
  if (static_cast<std::size_t>(end_ - p_) != after.size() - from) return false;
  // What scan() and finish() make of it: the prefix's members, the choice
  // as the template's with this content, what followed as learnt.
  c.kind = ChatChunk::Kind::kChunk;
  c.output_chars += m->chars;
  if (m->chars > 0) c.has_output = true;
  if (t.finish_reason.set) c.has_finish = true;
  if (t.after_plain) {
    c.plain = true;
    c.plain_choice = true;
    c.has_role = t.role.set;
    c.has_content = true;
    c.has_finish_reason = t.finish_reason.set;
    c.role = choice_view(t, t.role, m->start, m->after);
    c.content = m->text();
    c.finish_reason = choice_view(t, t.finish_reason, m->start, m->after);
    c.meta_keys = t.meta_keys;
    for (std::size_t i = 0; i < c.meta.size(); ++i)
      c.meta[i] = std::string_view(begin_ + t.meta[i].first, t.meta[i].second);
  }
  p_ = end_;
  return true;
}

void ChunkScanner::learn_after() {
  ChunkPrefix& t = *prefix_;
  std::array<std::string_view, ChunkPrefix::kHoles + 1> pieces;
  std::size_t size = 0;
  const char* from = choices_end_;
  for (std::size_t i = 0; i < hole_count_; ++i) {
    pieces[i] = {from, static_cast<std::size_t>(holes_[i].begin - from)};
    size += pieces[i].size();
    t.holes[i] = {static_cast<std::uint16_t>(size), holes_[i].number};
    from = holes_[i].end;
  }
  pieces[hole_count_] = {from, static_cast<std::size_t>(end_ - from)};
  t.set(ChunkPrefix::kAfter, std::span(pieces.data(), hole_count_ + 1));
  t.hole_count = static_cast<std::uint8_t>(hole_count_);
  t.after_plain = plain_;
}

void ChunkScanner::learn_choice(const char* at) {
  ChunkPrefix& t = *prefix_;
  t.usual = false;  // set again at the end of a scan that succeeds
  const char* const content = content_->data();
  const char* const after = content + content_->size() + 1;
  const auto head = static_cast<std::uint32_t>(content - at);
  const std::array<std::string_view, 2> pieces{
      std::string_view(at, head), std::string_view(after, static_cast<std::size_t>(p_ - after))};
  t.set(ChunkPrefix::kChoice, pieces);
  t.choice_head = head;
  auto span = [&](const std::optional<std::string_view>& v) {
    if (!v) return ChunkPrefix::Span{};
    const char* d = v->data();
    return ChunkPrefix::Span{static_cast<std::uint32_t>(d < content ? d - at : head + (d - after)),
                             static_cast<std::uint32_t>(v->size()), true};
  };
  t.role = span(role_);
  t.finish_reason = span(finish_);
}

bool ChunkScanner::finish(ChatChunk& c, unsigned seen, std::size_t choice_count, Usage& u,
                          bool has_usage) {
  ws();
  if (p_ != end_ || !(seen & 1)) return false;
  c.kind = ChatChunk::Kind::kChunk;
  if (has_usage) {
    if (u.total_tokens == 0) u.total_tokens = u.prompt_tokens + u.completion_tokens;
    c.usage = u;
  }
  c.usage_only = choice_count == 0 && c.usage.has_value();
  // One choice and no usage, or no choice (plain_ says the choice was an
  // object with a delta).
  if (plain_ && (choice_count == 1 ? !has_usage : choice_count == 0)) {
    c.plain = true;
    c.plain_choice = choice_count == 1;
    c.has_role = role_.has_value();
    c.has_content = content_.has_value();
    c.has_finish_reason = finish_.has_value();
    c.role = role_.value_or(std::string_view());
    c.content = content_.value_or(std::string_view());
    c.finish_reason = finish_.value_or(std::string_view());
    c.usage_json = usage_json_;
    c.meta_keys = meta_;
    c.meta = meta_text_;
  }
  return true;
}

}  // namespace

void ChunkPrefix::set(Part p, std::span<const std::string_view> pieces) {
  // A stream's three parts are about 250 bytes: room for them at once.
  constexpr std::size_t kFirst = 256;
  std::size_t n = 0;
  for (std::string_view piece : pieces) n += piece.size();
  std::size_t at = offset(p);
  if (n != size_[p]) {
    if (const std::size_t need = store_.size() - size_[p] + n; need > store_.capacity())
      store_.reserve(std::max(need, kFirst));
    store_.replace(at, size_[p], n, '\0');
  }
  for (std::string_view piece : pieces) {
    if (!piece.empty()) std::memcpy(store_.data() + at, piece.data(), piece.size());
    at += piece.size();
  }
  size_[p] = static_cast<std::uint32_t>(n);
}

namespace {
// A token count as the scanner reads it: a non-negative integer up to
// kMaxTokens, else 0.
std::int64_t token_count(const nlohmann::json& parent, const char* key) {
  auto f = parent.find(key);
  if (f == parent.end()) return 0;
  if (f->is_number_unsigned()) {
    auto v = f->get<std::uint64_t>();
    return v <= static_cast<std::uint64_t>(kMaxTokens) ? static_cast<std::int64_t>(v) : 0;
  }
  if (f->is_number_integer()) {
    auto v = f->get<std::int64_t>();
    return v >= 0 && v <= kMaxTokens ? v : 0;
  }
  return 0;
}
}  // namespace

std::optional<Usage> usage_of(const nlohmann::json& j) {
  auto it = j.find("usage");
  if (it == j.end() || !it->is_object()) return std::nullopt;
  Usage u;
  u.prompt_tokens = token_count(*it, "prompt_tokens");
  u.completion_tokens = token_count(*it, "completion_tokens");
  u.total_tokens = token_count(*it, "total_tokens");
  auto detail = [&](const char* object, const char* key) -> std::int64_t {
    auto d = it->find(object);
    return d != it->end() && d->is_object() ? token_count(*d, key) : 0;
  };
  u.reasoning_tokens = detail("completion_tokens_details", "reasoning_tokens");
  u.cached_tokens = detail("prompt_tokens_details", "cached_tokens");
  if (u.total_tokens == 0) u.total_tokens = u.prompt_tokens + u.completion_tokens;
  return u;
}

ChatChunk parse_chunk(std::string_view data) {
  ChatChunk c;
  if (data == "[DONE]") {
    c.kind = ChatChunk::Kind::kDone;
    return c;
  }
  if (data.find('\0') != std::string_view::npos) {  // the parser would stop there
    c.kind = ChatChunk::Kind::kMalformed;
    c.error_message = "upstream sent an event with a NUL byte";
    return c;
  }
  if (json_too_deep(data)) {
    c.kind = ChatChunk::Kind::kMalformed;
    c.error_message =
        "upstream sent an event nested more than " + std::to_string(kMaxJsonDepth) + " levels deep";
    return c;
  }
  c.json = nlohmann::json::parse(data, nullptr, /*allow_exceptions=*/false);
  if (c.json.is_discarded() || !c.json.is_object()) {
    c.kind = ChatChunk::Kind::kMalformed;
    c.error_message = "upstream sent an event that is not a JSON object";
    c.json = nullptr;
    return c;
  }
  if (auto err = c.json.find("error"); err != c.json.end() && !err->is_null()) {
    c.kind = ChatChunk::Kind::kError;
    if (err->is_object() && err->contains("message") && (*err)["message"].is_string()) {
      c.error_message = (*err)["message"].get<std::string>();
    } else {
      c.error_message = err->dump();
    }
    return c;
  }
  auto choices = c.json.find("choices");
  if (choices == c.json.end() || !choices->is_array()) {
    c.kind = ChatChunk::Kind::kMalformed;
    c.error_message = "upstream event has no \"choices\" array";
    return c;
  }
  c.kind = ChatChunk::Kind::kChunk;
  c.usage = usage_of(c.json);
  c.usage_only = choices->empty() && c.usage.has_value();
  for (const auto& choice : *choices) {
    if (!choice.is_object()) continue;
    if (auto fr = choice.find("finish_reason"); fr != choice.end() && !fr->is_null()) {
      c.has_finish = true;
    }
    auto delta = choice.find("delta");
    if (delta == choice.end() || !delta->is_object()) continue;
    std::size_t chars = text_size(*delta, "content") + text_size(*delta, "refusal") +
                        text_size(*delta, "reasoning_content") + text_size(*delta, "reasoning");
    c.output_chars += chars;
    for (const auto& [key, value] : delta->items()) {
      // As the scanner reads it: text fields when they are non-empty strings,
      // tool calls as a non-empty array, a function call when not null, and
      // any other field but `role` (audio, annotations, a field of tomorrow)
      // when it is a non-empty string, array or object.
      const bool text = value.is_string() && !value.get_ref<const std::string&>().empty();
      if (key == "role") continue;
      if (key == "content" || key == "refusal" || key == "reasoning_content" ||
          key == "reasoning") {
        if (text) c.has_output = true;
        if (text && key != "content" && key != "refusal") c.has_reasoning = true;
      } else if (key == "tool_calls") {
        if (value.is_array() && !value.empty()) c.has_output = true;
      } else if (key == "function_call") {
        if (!value.is_null()) c.has_output = true;
      } else if (text || ((value.is_array() || value.is_object()) && !value.empty())) {
        c.has_output = true;
      }
    }
  }
  return c;
}

namespace {
void inspect(std::string_view data, ChatChunk& c, ChunkPrefix* prefix) {
  if (data == "[DONE]") {
    c.kind = ChatChunk::Kind::kDone;
    return;
  }
  if (!ChunkScanner(data).scan(c, prefix)) c = parse_chunk(data);
}
}  // namespace

void inspect_chunk(std::string_view data, ChatChunk& c) { inspect(data, c, nullptr); }

void inspect_chunk(std::string_view data, ChatChunk& c, ChunkPrefix& prefix) {
  inspect(data, c, &prefix);
}

ChatChunk inspect_chunk(std::string_view data) {
  ChatChunk c;
  inspect_chunk(data, c);
  return c;
}

}  // namespace llmgate::providers
