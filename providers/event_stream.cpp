#include "providers/event_stream.h"

#include <algorithm>
#include <array>

namespace llmgate::providers {
namespace {

constexpr std::array<std::uint32_t, 256> make_crc_table() {
  std::array<std::uint32_t, 256> t{};
  for (std::uint32_t i = 0; i < 256; ++i) {
    std::uint32_t c = i;
    for (int k = 0; k < 8; ++k) c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
    t[i] = c;
  }
  return t;
}
constexpr auto kCrcTable = make_crc_table();

std::uint32_t be32(const char* p) {
  const auto* u = reinterpret_cast<const unsigned char*>(p);
  return (std::uint32_t{u[0]} << 24) | (std::uint32_t{u[1]} << 16) | (std::uint32_t{u[2]} << 8) |
         std::uint32_t{u[3]};
}

std::uint16_t be16(const char* p) {
  const auto* u = reinterpret_cast<const unsigned char*>(p);
  return static_cast<std::uint16_t>((u[0] << 8) | u[1]);
}

void put32(std::string& out, std::uint32_t v) {
  for (int shift = 24; shift >= 0; shift -= 8)
    out.push_back(static_cast<char>((v >> shift) & 0xFF));
}

// Bytes a header's value takes after its type byte (strings and byte
// arrays: their length prefix's value, read separately); -1: unknown type.
int fixed_value_size(unsigned char type) {
  switch (type) {
    case 0:
    case 1:
      return 0;  // bool true / false
    case 2:
      return 1;
    case 3:
      return 2;
    case 4:
      return 4;
    case 5:
    case 8:
      return 8;  // int64, timestamp
    case 9:
      return 16;  // UUID
    default:
      return -1;
  }
}

}  // namespace

std::uint32_t crc32(std::string_view bytes, std::uint32_t crc) {
  crc = ~crc;
  for (unsigned char b : bytes) crc = kCrcTable[(crc ^ b) & 0xFF] ^ (crc >> 8);
  return ~crc;
}

std::string encode_event_stream_message(std::span<const EventStreamHeader> headers,
                                        std::string_view payload) {
  std::string h;
  for (const auto& [name, value] : headers) {
    h.push_back(static_cast<char>(std::min<std::size_t>(name.size(), 255)));
    h.append(name.substr(0, 255));
    h.push_back(7);  // string
    const std::size_t n = std::min<std::size_t>(value.size(), 0xFFFF);
    h.push_back(static_cast<char>(n >> 8));
    h.push_back(static_cast<char>(n & 0xFF));
    h.append(value.substr(0, n));
  }
  std::string m;
  m.reserve(EventStreamParser::kMinMessage + h.size() + payload.size());
  put32(m, static_cast<std::uint32_t>(EventStreamParser::kMinMessage + h.size() + payload.size()));
  put32(m, static_cast<std::uint32_t>(h.size()));
  put32(m, crc32(m));
  m.append(h).append(payload);
  put32(m, crc32(m));
  return m;
}

std::span<char> EventStreamParser::prepare(std::size_t n) {
  std::size_t moved = 0;  // (no offsets kept: a message is parsed whole)
  return buf_.prepare(n, moved);
}

EventStreamParser::Next EventStreamParser::next(Frame& f) {
  const std::size_t have = buf_.buffered();
  if (have < 12) return Next::kNeedMore;
  const char* m = buf_.data() + buf_.begin();
  const std::uint32_t total = be32(m), headers_len = be32(m + 4);
  if (crc32(std::string_view(m, 8)) != be32(m + 8))
    return malformed("event-stream prelude CRC mismatch");
  if (total < kMinMessage || headers_len > total - kMinMessage)
    return malformed("event-stream message lengths do not add up (total " + std::to_string(total) +
                     ", headers " + std::to_string(headers_len) + ")");
  if (total > max_) return Next::kTooLarge;
  if (have < total) return Next::kNeedMore;
  if (crc32(std::string_view(m, total - 4)) != be32(m + total - 4))
    return malformed("event-stream message CRC mismatch");
  f = Frame{};
  std::string_view message_type, event_type, exception_type, error_code, error_message;
  const char* p = m + 12;
  const char* const headers_end = p + headers_len;
  while (p < headers_end) {
    const std::size_t name_len = static_cast<unsigned char>(*p++);
    if (static_cast<std::size_t>(headers_end - p) < name_len + 1)
      return malformed("event-stream header runs past the headers");
    const std::string_view name(p, name_len);
    p += name_len;
    const auto type = static_cast<unsigned char>(*p++);
    std::size_t value_len = 0;
    std::string_view value;
    if (type == 6 || type == 7) {
      if (headers_end - p < 2) return malformed("event-stream header runs past the headers");
      value_len = be16(p);
      p += 2;
    } else if (const int n = fixed_value_size(type); n >= 0) {
      value_len = static_cast<std::size_t>(n);
    } else {
      return malformed("event-stream header of unknown type " + std::to_string(type));
    }
    if (static_cast<std::size_t>(headers_end - p) < value_len)
      return malformed("event-stream header runs past the headers");
    if (type == 7) value = std::string_view(p, value_len);
    p += value_len;
    if (name == ":message-type")
      message_type = value;
    else if (name == ":event-type")
      event_type = value;
    else if (name == ":exception-type")
      exception_type = value;
    else if (name == ":error-code")
      error_code = value;
    else if (name == ":error-message")
      error_message = value;
  }
  f.raw = std::string_view(m, total);
  f.data = std::string_view(headers_end, total - kMinMessage - headers_len);
  f.has_data = true;
  // (No :message-type: an event, as the SDKs read it.)
  if (message_type == "exception") {
    f.exception = true;
    f.event = exception_type;
  } else if (message_type == "error") {
    f.exception = true;
    f.event = error_code;
    if (f.data.empty()) f.data = error_message;
  } else {
    f.event = event_type;
  }
  buf_.consume_to(buf_.begin() + total);
  return Next::kFrame;
}

}  // namespace llmgate::providers
