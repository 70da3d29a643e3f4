// How a protocol's streamed body is cut into frames: the framing is the
// protocol's (UpstreamProtocol::framing()), the relay only reads into it.
// One interface over the framings, the SSE parser's zero-copy one: read
// the upstream straight into prepare(), commit(n), drain(on_frame) — each
// Frame's views valid until the next prepare(). Held by value (no
// allocation, no virtual call per frame). Beast-free.
#pragma once

#include <cstddef>
#include <span>
#include <string>
#include <string_view>
#include <variant>

#include "providers/event_stream.h"
#include "providers/frame.h"
#include "providers/sse_parser.h"

namespace llmgate::providers {

enum class Framing {
  kSse,          // text/event-stream (OpenAI, Anthropic, Gemini's alt=sse)
  kEventStream,  // application/vnd.amazon.eventstream (Amazon Bedrock)
};

// The media type a streamed answer of this framing comes as (and is asked
// for with, in Accept).
constexpr std::string_view content_type(Framing f) {
  return f == Framing::kEventStream ? "application/vnd.amazon.eventstream" : "text/event-stream";
}

// Whether a response's Content-Type announces `f` (parameters after ';'
// ignored).
bool announces(std::string_view content_type_value, Framing f);

class Framer {
 public:
  Framer(Framing f, std::size_t max_frame_bytes)
      : impl_(f == Framing::kEventStream
                  ? Impl(std::in_place_type<EventStreamParser>, max_frame_bytes)
                  : Impl(std::in_place_type<SseParser>, max_frame_bytes)) {}

  std::span<char> prepare(std::size_t n) {
    return std::visit([n](auto& p) { return p.prepare(n); }, impl_);
  }
  void commit(std::size_t n) {
    std::visit([n](auto& p) { p.commit(n); }, impl_);
  }
  void shrink() {
    std::visit([](auto& p) { p.shrink(); }, impl_);
  }
  std::size_t capacity() const {
    return std::visit([](const auto& p) { return p.capacity(); }, impl_);
  }
  bool has_partial_frame() const {
    return std::visit([](const auto& p) { return p.has_partial_event(); }, impl_);
  }

  template <class OnFrame>
  FrameStatus drain(OnFrame&& on_frame) {
    if (auto* sse = std::get_if<SseParser>(&impl_)) {
      return sse->drain(on_frame) == SseParser::Status::kOk ? FrameStatus::kOk
                                                            : FrameStatus::kTooLarge;
    }
    return std::get<EventStreamParser>(impl_).drain(on_frame);
  }

  // Why the stream is malformed (after kMalformed).
  std::string_view error() const {
    if (auto* es = std::get_if<EventStreamParser>(&impl_)) return es->error();
    return {};
  }

 private:
  using Impl = std::variant<SseParser, EventStreamParser>;
  Impl impl_;
};

}  // namespace llmgate::providers
