// One of Anthropic's stream events as the gateway reads it when it relays a
// native Messages stream (anthropic_messages_protocol.cpp): its type,
// whether it carries output (text, thinking, a tool call's input) and how
// much, the usage counts it states, whether it gives the stop reason, an
// error's words. Once per event, on the relay's hot path: read_event()
// scans the text once without building a document, and hands anything
// unusual -- invalid JSON, a key it reads given twice, an escaped type, an
// error event -- to read_event_dom(), the nlohmann reading it must agree
// with on every input (fuzz_messages). Beast-free.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "providers/anthropic_wire.h"

namespace llmgate::providers::anthropic {

enum class EventType {
  kNone,  // no "type" string (or not an object): not an Anthropic event
  kMessageStart,
  kContentBlockStart,
  kContentBlockDelta,
  kContentBlockStop,
  kMessageDelta,
  kMessageStop,
  kPing,
  kError,
  kOther,  // a type not known today: passed on
};

struct EventFacts {
  bool json = false;  // the text is JSON
  EventType type = EventType::kNone;
  // content_block_delta: its text, thinking or (not blank) partial_json;
  // content_block_start: a tool_use block, or text or thinking sent whole.
  bool has_output = false;
  bool has_reasoning = false;
  std::size_t output_chars = 0;  // decoded bytes
  // The usage object's counts (message_start's message.usage,
  // message_delta's usage), each when it is an integer, in Counts::kNames'
  // order.
  std::array<std::optional<std::int64_t>, 4> counts{};
  bool has_finish = false;  // message_delta: a stop reason
  // content_block_delta: which text its delta carries (a string, maybe
  // empty); content_block_delta and content_block_stop: the event's
  // "index" when it is an integer.
  enum class Delta { kNone, kText, kThinking, kInputJson };
  Delta delta = Delta::kNone;
  std::optional<std::int64_t> index;
  std::string error_kind, error_message;  // kError

  // Anthropic's counts are cumulative: what the event states replaces.
  void apply(Counts& c) const {
    for (std::size_t i = 0; i < counts.size(); ++i) {
      if (counts[i]) c.take(i, *counts[i]);
    }
  }
  bool operator==(const EventFacts&) const = default;
};

// The words a translator names its chunks and finishes with, each when it
// is a string (maybe empty): message_start's message.id and message.model,
// message_delta's delta.stop_reason. Copies, read only when asked for (the
// native relay forwards the events as they came).
struct EventWords {
  std::optional<std::string> message_id, message_model, stop_reason;
  bool operator==(const EventWords&) const = default;
};

// `delta_json`, when given: set when the scan read the event (no fallback)
// and it is a content_block_delta with a text -- that string's text
// between its quotes, still escaped (a view of `data`), for a translator
// that writes it into JSON as it is. `words`, when given, gets the event's
// words.
EventFacts read_event(std::string_view data, std::optional<std::string_view>* delta_json = nullptr,
                      EventWords* words = nullptr);
EventFacts read_event_dom(std::string_view data, EventWords* words = nullptr);

}  // namespace llmgate::providers::anthropic
