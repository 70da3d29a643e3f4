#include "providers/bedrock_event.h"

#include <algorithm>

#include "providers/json_scan.h"

namespace llmgate::providers::bedrock {
namespace {

// A payload read in one pass, each object's members where they stand (a
// container's depth counted as JsonScanner::value counts it). `false`:
// declined.
class EventScanner : public JsonScanner {
 public:
  EventScanner(std::string_view text, EventFacts& out) : JsonScanner(text), out_(out) {}

  // The payload is an object; `member(key)` reads the members it wants
  // (p_ at the value, which it must consume) and returns false to decline,
  // or skips the others.
  template <typename Member>
  bool object(Member&& member) {
    if (!open_object() || !members<true>(1, member)) return false;
    ws();
    return at_end();
  }

  // The value at p_ (`v`); when it is a string, `text` its text between
  // the quotes.
  bool text(int depth, Value& v, std::string_view& text) {
    const char* const at = p_;
    if (!value(depth, v)) return false;
    if (v.type == Value::Type::kString) text = inner(at);
    return true;
  }

  // contentBlockDelta's delta (p_ past its '{', at depth 2).
  bool delta() {
    unsigned seen = 0;
    bool reasoning = false;
    std::string_view reasoning_text;
    bool has_reasoning_text = false;
    bool has_text = false;
    std::string_view text_value;
    const bool read = members<true>(2, [&](std::string_view key) {
      if (is(key, "text")) {
        if (!once(seen, 1)) return false;
        Value v;
        if (!text(2, v, text_value)) return false;
        if (v.type == Value::Type::kNull) return true;
        has_text = v.type == Value::Type::kString;
        return has_text;  // a text that is not a string: the document's
      }
      if (is(key, "toolUse")) return at_null() && skip(2);  // a call's input: the document's
      if (is(key, "reasoningContent")) {
        if (!once(seen, 2)) return false;
        if (at_null()) return skip(2);
        if (!eat('{')) return false;
        reasoning = true;
        unsigned inner = 0;
        return members<true>(3, [&](std::string_view k) {
          if (!is(k, "text")) return skip(3);  // signature, redactedContent
          if (!once(inner, 1)) return false;
          Value v;
          if (!text(3, v, reasoning_text)) return false;
          if (v.type == Value::Type::kNull) return true;
          has_reasoning_text = v.type == Value::Type::kString;
          return has_reasoning_text;
        });
      }
      return skip(2);
    });
    if (!read) return false;
    if (has_text) {
      out_.delta = EventFacts::Delta::kText;
      out_.text = text_value;
    } else if (reasoning && has_reasoning_text) {
      out_.delta = EventFacts::Delta::kReasoning;
      out_.text = reasoning_text;
    }
    return true;
  }

  bool usage() {
    Usage& u = out_.usage.emplace();
    unsigned seen = 0;
    return members<true>(2, [&](std::string_view key) {
      std::optional<std::int64_t>* count = nullptr;
      unsigned bit = 0;
      if (is(key, "inputTokens")) {
        count = &u.input, bit = 1;
      } else if (is(key, "cacheReadInputTokens")) {
        count = &u.cache_read, bit = 2;
      } else if (is(key, "cacheWriteInputTokens")) {
        count = &u.cache_write, bit = 4;
      } else if (is(key, "outputTokens")) {
        count = &u.output, bit = 8;
      } else {
        return skip(2);  // totalTokens, the cache details
      }
      if (!once(seen, bit)) return false;
      Value v;
      if (!value(2, v)) return false;
      // An integer that does not fit int64 is one past it: nlohmann's
      // int64 of it is negative, read as 0.
      if (v.type == Value::Type::kNumber && v.integer)
        *count = v.fits_int64 ? std::clamp<std::int64_t>(v.int64, 0, kMaxCount) : 0;
      return true;
    });
  }

  EventFacts& out_;
};

}  // namespace

bool read_event(std::string_view type, std::string_view payload, EventFacts& out) {
  out = EventFacts{};
  EventScanner scan(payload, out);
  if (type == "contentBlockDelta") {
    unsigned seen = 0;
    bool has_delta = false;
    const bool read = scan.object([&](std::string_view key) {
      if (!JsonScanner::is(key, "delta")) return scan.skip(1);  // contentBlockIndex, p
      if (!JsonScanner::once(seen, 1)) return false;
      if (scan.at_null()) return scan.skip(1);
      has_delta = true;
      return scan.eat('{') && scan.delta();
    });
    return read && has_delta;  // no delta: the document's (malformed)
  }
  if (type == "messageStop") {
    unsigned seen = 0;
    return scan.object([&](std::string_view key) {
      if (!JsonScanner::is(key, "stopReason")) return scan.skip(1);
      if (!JsonScanner::once(seen, 1)) return false;
      JsonScanner::Value v;
      std::string_view reason;
      if (!scan.text(1, v, reason)) return false;
      if (v.type != JsonScanner::Value::Type::kString) return true;
      if (v.escaped) return false;
      out.stop_reason = reason;
      return true;
    });
  }
  if (type == "metadata") {
    unsigned seen = 0;
    return scan.object([&](std::string_view key) {
      if (!JsonScanner::is(key, "usage")) return scan.skip(1);  // metrics, trace
      if (!JsonScanner::once(seen, 1)) return false;
      if (scan.at_null()) return scan.skip(1);
      if (!scan.eat('{')) return false;
      return scan.usage();
    });
  }
  if (type == "messageStart" || type == "contentBlockStop")
    return scan.object([&](std::string_view) { return scan.skip(1); });
  return false;  // contentBlockStart (a tool call's), and what is not an event
}

}  // namespace llmgate::providers::bedrock
