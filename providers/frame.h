// One frame of an upstream's streamed body, as its protocol's framing cut it
// (framer.h): a server-sent event (sse_parser.h) or an AWS event-stream
// message (event_stream.h). Views into the framer's buffer, valid until its
// next prepare(). Beast-free.
#pragma once

#include <string_view>

namespace llmgate::providers {

struct Frame {
  // The frame's bytes as received. For SSE, the event including its blank
  // line: forwarded verbatim to an SSE client. For an event-stream message,
  // binary: never forwarded as it is.
  std::string_view raw;
  // The payload: SSE's "data" lines joined with '\n'; an event-stream
  // message's payload (an error message's :error-message when it has none).
  std::string_view data;
  // SSE's "event" field; an event-stream message's :event-type (an
  // exception's :exception-type, an error's :error-code). Empty if none.
  std::string_view event;
  std::string_view id;     // SSE's "id" field, empty if none
  bool has_data = false;   // false for comment-only SSE blocks such as ": keep-alive"
  bool exception = false;  // an event-stream message of :message-type exception or error
};

// What a framer's drain() found.
enum class FrameStatus {
  kOk,         // every complete frame handed out; the rest waits for more bytes
  kTooLarge,   // a frame over the limit: the framer must not be used again
  kMalformed,  // bytes that are no frame (a CRC mismatch): likewise
};

}  // namespace llmgate::providers
