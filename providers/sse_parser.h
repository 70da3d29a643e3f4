// Incremental parser for text/event-stream (WHATWG HTML §9.2 "server-sent events").
//
// Bytes arrive split anywhere (in the middle of a line, between CR and LF); the
// parser keeps only the current, incomplete event and hands out each event as
// soon as its terminating blank line arrives — never later. An event larger
// than the configured limit is an error, so a hostile or broken upstream cannot
// make the gateway buffer without bound.
//
// Events are Frames (frame.h): the framing of protocols that stream SSE
// (framer.h). Zero-copy use (the relay): read the upstream straight into prepare(), then
// commit(n) and drain(on_event). Each event is reported with views of its raw
// bytes (forwarded verbatim, without re-serialising) and its decoded fields,
// all pointing into the parser's own buffer (or, only for an event with several
// "data" lines, a scratch string that joins them). Lines are found with
// memchr, not byte by byte. Steady state allocates nothing: the buffer is
// reused, and grows only for an event bigger than it (up to the limit).
//
// feed() is the copying convenience for callers that already hold the bytes.
#pragma once

#include <cstddef>
#include <cstring>
#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "providers/frame.h"
#include "providers/frame_buffer.h"

namespace llmgate::providers {

class SseParser {
 public:
  enum class Status { kOk, kEventTooLarge };

  explicit SseParser(std::size_t max_event_bytes) : max_event_bytes_(max_event_bytes) {}

  // At least `n` writable bytes after the data buffered so far. Invalidates
  // the views handed out by earlier drain() calls (the buffer may move).
  std::span<char> prepare(std::size_t n);
  // Gives the buffer's memory back when no event is unfinished (a stream gone
  // quiet after a burst); the next prepare() allocates what it asks for.
  // Invalidates views as prepare() does.
  void shrink();
  // `n` bytes were written at the start of the last prepare()'s span.
  void commit(std::size_t n) { buf_.commit(n); }

  // Calls on_event(const Frame&) for each event completed by the committed
  // bytes, in order. The views stay valid until the next prepare().
  // After kEventTooLarge the parser must not be used again.
  template <class OnEvent>
  Status drain(OnEvent&& on_event) {
    Frame ev;
    for (;;) {
      switch (next(ev)) {
        case Next::kEvent:
          on_event(static_cast<const Frame&>(ev));
          break;
        case Next::kNeedMore:
          return Status::kOk;
        case Next::kTooLarge:
          return Status::kEventTooLarge;
      }
    }
  }

  // Copies `bytes` in and drains. The views passed to on_event are valid only
  // during the call.
  template <class OnEvent>
  Status feed(std::string_view bytes, OnEvent&& on_event) {
    while (!bytes.empty()) {
      std::size_t n = bytes.size() < kFeedStep ? bytes.size() : kFeedStep;
      std::memcpy(prepare(n).data(), bytes.data(), n);
      commit(n);
      bytes.remove_prefix(n);
      if (drain(on_event) != Status::kOk) return Status::kEventTooLarge;
    }
    return Status::kOk;
  }

  // True if some bytes of an unfinished event are buffered.
  bool has_partial_event() const {
    return buf_.buffered() > 0 && (has_fields_ || buf_.end() > line_start_);
  }
  std::size_t buffered_bytes() const { return buf_.buffered(); }
  std::size_t capacity() const { return buf_.capacity(); }

 private:
  enum class Next { kEvent, kNeedMore, kTooLarge };
  static constexpr std::size_t kFeedStep = 16 * 1024;
  // A field value: an offset from the event's start (stable when the buffer
  // moves) and a length.
  struct Span {
    std::size_t off = 0, len = 0;
  };

  Next next(Frame& ev);
  void process_field(std::size_t start, std::size_t end);
  std::string_view view(Span s) const { return {buf_.data() + buf_.begin() + s.off, s.len}; }
  void reset_event();

  std::size_t max_event_bytes_;
  FrameBuffer buf_;             // the current event's raw bytes from its begin()
  std::size_t line_start_ = 0;  // start of the current line
  std::size_t scan_ = 0;        // bytes before this are parsed
  bool skip_lf_ = false;        // the last line ended with CR: a LF right after belongs to it
  bool has_fields_ = false;     // any non-blank line (field or comment) seen
  bool has_data_ = false;
  bool data_joined_ = false;  // several data lines: data_scratch_ holds them
  Span data_, event_, id_;
  std::string data_scratch_;
};

}  // namespace llmgate::providers
