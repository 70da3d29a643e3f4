// Incremental parser for text/event-stream (WHATWG HTML §9.2 "server-sent events").
//
// Bytes arrive split anywhere (in the middle of a line, between CR and LF); the
// parser keeps only the current, incomplete event and hands out each event as
// soon as its terminating blank line arrives — never later. An event larger
// than the configured limit is an error, so a hostile or broken upstream cannot
// make the gateway buffer without bound.
//
// Each event is reported with its raw bytes (so a relay forwards it verbatim,
// without re-serialising) and its decoded fields.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace llmgate::providers {

struct SseEvent {
  std::string_view raw;    // the event's bytes as received, including the blank line
  std::string_view data;   // "data" lines joined with '\n'; empty if none
  std::string_view event;  // the "event" field, empty if none
  std::string_view id;     // the "id" field, empty if none
  bool has_data = false;   // false for comment-only blocks such as ": keep-alive"
};

class SseParser {
 public:
  enum class Status { kOk, kEventTooLarge };

  explicit SseParser(std::size_t max_event_bytes) : max_event_bytes_(max_event_bytes) {}

  // Feeds `bytes`; calls on_event(const SseEvent&) for each event completed by
  // them, in order. The views passed to on_event are valid only during the call.
  // After kEventTooLarge the parser must not be fed again.
  template <class OnEvent>
  Status feed(std::string_view bytes, OnEvent&& on_event) {
    for (char c : bytes) {
      if (pending_cr_) {
        pending_cr_ = false;
        if (c == '\n') {  // the LF of a CRLF already handled at the CR
          raw_.push_back(c);
          continue;
        }
      }
      raw_.push_back(c);
      if (c == '\r' || c == '\n') {
        pending_cr_ = (c == '\r');
        if (end_line()) {
          on_event(current());
          reset_event();
        }
      } else {
        line_.push_back(c);
        if (raw_.size() > max_event_bytes_) return Status::kEventTooLarge;
      }
    }
    return Status::kOk;
  }

  // True if some bytes of an unfinished event are buffered.
  bool has_partial_event() const { return !raw_.empty() && !only_blank_lines(); }
  std::size_t buffered_bytes() const { return raw_.size(); }

 private:
  bool end_line();  // returns true when the line was blank and ends an event
  void process_field(std::string_view line);
  SseEvent current() const;
  void reset_event();
  bool only_blank_lines() const;

  std::size_t max_event_bytes_;
  std::string raw_;    // bytes of the current event so far
  std::string line_;   // the current line, without its terminator
  std::string data_;
  std::string event_;
  std::string id_;
  bool has_data_ = false;
  bool has_fields_ = false;  // any non-blank line (field or comment) seen
  bool pending_cr_ = false;
};

}  // namespace llmgate::providers
