#include "providers/anthropic_event.h"

#include <nlohmann/json.hpp>

#include "providers/json_depth.h"
#include "providers/json_member.h"
#include "providers/json_scan.h"

namespace llmgate::providers::anthropic {
namespace {

using nlohmann::json;

EventType type_of(std::string_view type) {
  if (type.empty()) return EventType::kNone;
  if (type == "content_block_delta") return EventType::kContentBlockDelta;
  if (type == "content_block_start") return EventType::kContentBlockStart;
  if (type == "content_block_stop") return EventType::kContentBlockStop;
  if (type == "message_start") return EventType::kMessageStart;
  if (type == "message_delta") return EventType::kMessageDelta;
  if (type == "message_stop") return EventType::kMessageStop;
  if (type == "ping") return EventType::kPing;
  if (type == "error") return EventType::kError;
  return EventType::kOther;
}

bool blank(std::string_view s) { return s.find_first_not_of(" \t\r\n") == std::string_view::npos; }

// ---- the scan --------------------------------------------------------------------

class EventScanner : public JsonScanner {
 public:
  using JsonScanner::JsonScanner;

  // Fills `f` (and `delta_json`, and `words` when given); false: give up
  // (read_event_dom() answers).
  bool scan(EventFacts& f, std::optional<std::string_view>& delta_json, EventWords* words);

 private:
  // A member's value: where its text is, and what it is.
  struct Span {
    const char* at = nullptr;
    const char* end = nullptr;
    Value v;
    bool object() const { return at && v.type == Value::Type::kObject; }
    bool string() const { return at && v.type == Value::Type::kString; }
    // A string's text between its quotes (escaped as written).
    std::string_view inner() const { return {at + 1, static_cast<std::size_t>(end - at) - 2}; }
  };

  // The members of an object named `names` (their spans; null values read
  // as absent, as providers::member reads them); false on a repeat.
  template <std::size_t N>
  bool read(int depth, const std::array<std::string_view, N>& names, std::array<Span, N>& out) {
    unsigned seen = 0;
    return members<true>(depth, [&](std::string_view key) {
      std::size_t i = 0;
      while (i < N && key != names[i]) ++i;
      if (i < N && !once(seen, 1u << i)) return false;
      Span s;
      s.at = p_;
      if (!value(depth, s.v)) return false;
      s.end = p_;
      if (i < N && s.v.type != Value::Type::kNull) out[i] = s;
      return true;
    });
  }
  // The same of an object value already scanned.
  template <std::size_t N>
  static bool read(const Span& object, const std::array<std::string_view, N>& names,
                   std::array<Span, N>& out) {
    EventScanner sub(std::string_view(object.at, static_cast<std::size_t>(object.end - object.at)));
    return sub.eat('{') && sub.read(1, names, out);
  }

  // A delta's members: read where the delta stands, in the event's one
  // pass (it holds the text of most events).
  enum { kDeltaType, kText, kThinking, kPartialJson, kStopReason };
  static constexpr std::array<std::string_view, 5> kDeltaNames = {"type", "text", "thinking",
                                                                  "partial_json", "stop_reason"};
  using DeltaSpans = std::array<Span, 5>;

  static bool counts(const Span& usage, EventFacts& f);
  static bool delta(const DeltaSpans& d, EventFacts& f, std::optional<std::string_view>& json);
  static bool block_start(const Span& block, EventFacts& f);
};

bool EventScanner::scan(EventFacts& f, std::optional<std::string_view>& delta_json,
                        EventWords* words) {
  if (!open_object()) return false;
  enum { kType, kDelta, kBlock, kMessage, kUsage, kIndex };
  static constexpr std::array<std::string_view, 6> kNames = {"type",    "delta", "content_block",
                                                             "message", "usage", "index"};
  std::array<Span, 6> top;
  DeltaSpans d;
  unsigned seen = 0;
  // read(1, kNames, top), but for a delta object, whose members go to `d`.
  const bool read_top = members<true>(1, [&](std::string_view key) {
    std::size_t i = 0;
    while (i < kNames.size() && key != kNames[i]) ++i;
    if (i < kNames.size() && !once(seen, 1u << i)) return false;
    Span s;
    s.at = p_;
    if (i == kDelta && p_ != end_ && *p_ == '{') {
      ++p_;
      s.v.type = Value::Type::kObject;
      if (!read(2, kDeltaNames, d)) return false;
    } else if (!value(1, s.v)) {
      return false;
    }
    s.end = p_;
    if (i < kNames.size() && s.v.type != Value::Type::kNull) top[i] = s;
    return true;
  });
  if (!read_top) return false;
  ws();
  if (!at_end()) return false;
  f.json = true;
  const Span& type = top[kType];
  if (!type.string()) return true;  // kNone
  if (type.v.escaped) return false;
  f.type = type_of(type.inner());
  switch (f.type) {
    case EventType::kContentBlockDelta: {
      if (top[kIndex].at) f.index = top[kIndex].v.as_int64();
      return !top[kDelta].object() || delta(d, f, delta_json);
    }
    case EventType::kContentBlockStart:
      return !top[kBlock].object() || block_start(top[kBlock], f);
    case EventType::kContentBlockStop:
      if (top[kIndex].at) f.index = top[kIndex].v.as_int64();
      return true;
    case EventType::kMessageStart: {
      if (!top[kMessage].object()) return true;
      enum { kUsage, kId, kModel };
      std::array<Span, 3> m;
      if (!read(top[kMessage], std::array<std::string_view, 3>{"usage", "id", "model"}, m))
        return false;
      // A string taken as it is written; an escaped one: declined.
      auto take = [](const Span& span, std::optional<std::string>& into) {
        if (!span.string()) return true;
        if (span.v.escaped) return false;
        into.emplace(span.inner());
        return true;
      };
      if (words && !(take(m[kId], words->message_id) && take(m[kModel], words->message_model)))
        return false;
      return !m[kUsage].object() || counts(m[kUsage], f);
    }
    case EventType::kMessageDelta: {
      if (top[kUsage].object() && !counts(top[kUsage], f)) return false;
      if (!top[kDelta].object()) return true;
      const Span& stop = d[kStopReason];
      if (!stop.string()) return true;
      f.has_finish = stop.v.size > 0;
      if (!words) return true;
      if (stop.v.escaped) return false;
      words->stop_reason.emplace(stop.inner());
      return true;
    }
    case EventType::kError:
      return false;  // its words: read from the document
    default:
      return true;
  }
}

bool EventScanner::counts(const Span& usage, EventFacts& f) {
  std::array<Span, 4> n;
  if (!read(usage, Counts::kNames, n)) {
    return false;
  }
  for (std::size_t i = 0; i < n.size(); ++i) {
    if (n[i].at) f.counts[i] = n[i].v.as_int64();
  }
  return true;
}

bool EventScanner::delta(const DeltaSpans& d, EventFacts& f,
                         std::optional<std::string_view>& json) {
  if (!d[kDeltaType].string()) return true;
  if (d[kDeltaType].v.escaped) return false;
  const std::string_view type = d[kDeltaType].inner();
  const Span* text = nullptr;
  EventFacts::Delta kind = EventFacts::Delta::kNone;
  if (type == "text_delta") {
    text = &d[kText], kind = EventFacts::Delta::kText;
  } else if (type == "thinking_delta") {
    text = &d[kThinking], kind = EventFacts::Delta::kThinking;
  } else if (type == "input_json_delta") {
    text = &d[kPartialJson], kind = EventFacts::Delta::kInputJson;
  } else {
    return true;
  }
  if (!text->string()) return true;
  const std::string_view raw = text->inner();
  f.delta = kind;
  json = raw;
  if (kind == EventFacts::Delta::kInputJson) {
    // The empty piece a tool_use block opens with is no output. Its
    // escapes need decoding to judge only when one comes first.
    const std::size_t first = raw.find_first_not_of(" \t\r\n");
    if (first == std::string_view::npos) return true;
    if (raw[first] == '\\') return false;
  }
  f.output_chars = text->v.size;
  f.has_output = f.output_chars > 0;
  f.has_reasoning = text == &d[kThinking] && f.has_output;
  return true;
}

bool EventScanner::block_start(const Span& block, EventFacts& f) {
  enum { kType, kText, kThinking };
  std::array<Span, 3> b;
  if (!read(block, std::array<std::string_view, 3>{"type", "text", "thinking"}, b)) return false;
  if (!b[kType].string()) return true;
  if (b[kType].v.escaped) return false;
  const std::string_view type = b[kType].inner();
  if (type == "tool_use") {
    f.has_output = true;
  } else if (type == "text" || type == "thinking") {
    const Span& text = type == "text" ? b[kText] : b[kThinking];
    f.output_chars = text.string() ? text.v.size : 0;
    f.has_output = f.output_chars > 0;
    f.has_reasoning = type == "thinking" && f.has_output;
  }
  return true;
}

// ---- the document ------------------------------------------------------------------

std::string_view text_of(const json* v) {
  return v && v->is_string() ? std::string_view(v->get_ref<const std::string&>())
                             : std::string_view();
}

void read_counts(const json* usage, EventFacts& f) {
  if (!usage || !usage->is_object()) return;
  for (std::size_t i = 0; i < f.counts.size(); ++i) {
    auto it = usage->find(Counts::kNames[i]);
    if (it != usage->end()) f.counts[i] = integer(*it);
  }
}

}  // namespace

EventFacts read_event(std::string_view data, std::optional<std::string_view>* delta_json,
                      EventWords* words) {
  EventFacts f;
  std::optional<std::string_view> json;
  if (words) *words = {};
  if (EventScanner(data).scan(f, json, words)) {
    if (delta_json) *delta_json = json;
    return f;
  }
  if (delta_json) delta_json->reset();
  return read_event_dom(data, words);
}

EventFacts read_event_dom(std::string_view data, EventWords* words) {
  if (words) *words = {};
  EventFacts f;
  const json j =
      json_too_deep(data) ? json(json::value_t::discarded) : json::parse(data, nullptr, false);
  f.json = !j.is_discarded();
  f.type = type_of(text_of(member(j, "type")));
  switch (f.type) {
    case EventType::kContentBlockDelta: {
      if (const json* index = member(j, "index")) f.index = integer(*index);
      const json* delta = member(j, "delta");
      if (!delta) break;
      const std::string_view type = text_of(member(*delta, "type"));
      const char* key = type == "text_delta"         ? "text"
                        : type == "thinking_delta"   ? "thinking"
                        : type == "input_json_delta" ? "partial_json"
                                                     : nullptr;
      const json* value = key ? member(*delta, key) : nullptr;
      if (value && value->is_string()) {
        f.delta = type == "text_delta"       ? EventFacts::Delta::kText
                  : type == "thinking_delta" ? EventFacts::Delta::kThinking
                                             : EventFacts::Delta::kInputJson;
      }
      std::string_view text = text_of(value);
      if (f.delta == EventFacts::Delta::kThinking) f.has_reasoning = !text.empty();
      if (f.delta == EventFacts::Delta::kInputJson && blank(text))
        text = {};  // the empty piece a tool_use block opens with
      f.has_output = !text.empty();
      f.output_chars = text.size();
      break;
    }
    case EventType::kContentBlockStart: {
      const json* block = member(j, "content_block");
      if (!block) break;
      const std::string_view type = text_of(member(*block, "type"));
      if (type == "tool_use") {
        f.has_output = true;
      } else if (type == "text") {
        f.output_chars = text_of(member(*block, "text")).size();
        f.has_output = f.output_chars > 0;
      } else if (type == "thinking") {
        f.output_chars = text_of(member(*block, "thinking")).size();
        f.has_output = f.has_reasoning = f.output_chars > 0;
      }
      break;
    }
    case EventType::kMessageStart:
      if (const json* m = member(j, "message")) {
        read_counts(member(*m, "usage"), f);
        if (!words) break;
        if (const json* id = member(*m, "id"); id && id->is_string()) words->message_id = *id;
        if (const json* model = member(*m, "model"); model && model->is_string())
          words->message_model = *model;
      }
      break;
    case EventType::kContentBlockStop:
      if (const json* index = member(j, "index")) f.index = integer(*index);
      break;
    case EventType::kMessageDelta: {
      read_counts(member(j, "usage"), f);
      const json* delta = member(j, "delta");
      const json* stop = delta ? member(*delta, "stop_reason") : nullptr;
      f.has_finish = !text_of(stop).empty();
      if (words && stop && stop->is_string()) words->stop_reason = stop->get<std::string>();
      break;
    }
    case EventType::kError: {
      const json* error = member(j, "error");
      f.error_kind = error ? text_of(member(*error, "type")) : "";
      f.error_message = error ? text_of(member(*error, "message")) : "";
      break;
    }
    default:
      break;
  }
  return f;
}

}  // namespace llmgate::providers::anthropic
