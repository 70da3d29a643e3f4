// AWS event-stream framing (application/vnd.amazon.eventstream): the binary
// messages Amazon Bedrock's ConverseStream and InvokeModelWithResponseStream
// answer with. Each message is
//
//   total length (u32 BE) | headers length (u32 BE) | prelude CRC32 (u32 BE)
//   | headers | payload | message CRC32 (u32 BE)
//
// the prelude CRC over the first 8 bytes, the message CRC over everything
// before it (CRC-32/ISO-HDLC, zlib's). A header is a name (u8 length, bytes),
// a type byte and a value: 0/1 bool true/false (no bytes), 2 byte, 3 int16,
// 4 int32, 5 int64, 6 byte array and 7 string (u16 BE length, bytes), 8
// timestamp (int64 ms), 9 UUID (16 bytes).
//
// EventStreamParser has the SSE parser's zero-copy interface (prepare,
// commit, drain, shrink): bytes arrive split anywhere, each message goes out
// as soon as its last byte is in, both CRCs checked, as a Frame whose views
// point into the parser's buffer. A message over the limit, or bytes that are
// no message (a CRC mismatch, lengths that do not add up), end the stream:
// the framer must not be used again. Steady state allocates nothing.
//
// encode_event_stream_message() writes one (the simulator's Bedrock mode,
// tests). Beast-free.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "providers/frame.h"
#include "providers/frame_buffer.h"

namespace llmgate::providers {

// CRC-32/ISO-HDLC (zlib's crc32, the one event-stream uses), continued from `crc`.
std::uint32_t crc32(std::string_view bytes, std::uint32_t crc = 0);

// One string header of a message to encode (:event-type, :message-type,
// :content-type...).
struct EventStreamHeader {
  std::string_view name;
  std::string_view value;
};

// One message: `headers` (as type 7, string) and `payload`, with both CRCs.
std::string encode_event_stream_message(std::span<const EventStreamHeader> headers,
                                        std::string_view payload);

class EventStreamParser {
 public:
  // The smallest message: a prelude and a message CRC, nothing between.
  static constexpr std::size_t kMinMessage = 16;

  explicit EventStreamParser(std::size_t max_message_bytes) : max_(max_message_bytes) {}

  std::span<char> prepare(std::size_t n);
  void shrink() { buf_.shrink(); }
  void commit(std::size_t n) { buf_.commit(n); }

  // Calls on_frame(const Frame&) for each message completed by the
  // committed bytes, in order; views valid until the next prepare().
  template <class OnFrame>
  FrameStatus drain(OnFrame&& on_frame) {
    Frame f;
    for (;;) {
      switch (next(f)) {
        case Next::kFrame:
          on_frame(static_cast<const Frame&>(f));
          break;
        case Next::kNeedMore:
          return FrameStatus::kOk;
        case Next::kTooLarge:
          return FrameStatus::kTooLarge;
        case Next::kMalformed:
          return FrameStatus::kMalformed;
      }
    }
  }

  bool has_partial_event() const { return buf_.buffered() > 0; }
  std::size_t buffered_bytes() const { return buf_.buffered(); }
  std::size_t capacity() const { return buf_.capacity(); }
  // Why the stream was malformed (after kMalformed).
  const std::string& error() const { return error_; }

 private:
  enum class Next { kFrame, kNeedMore, kTooLarge, kMalformed };
  Next next(Frame& f);
  Next malformed(std::string why) {
    error_ = std::move(why);
    return Next::kMalformed;
  }

  std::size_t max_;
  FrameBuffer buf_;  // the current message from its begin()
  std::string error_;
};

}  // namespace llmgate::providers
