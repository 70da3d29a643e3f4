// The CRC oracle for event-stream tests (unit and fuzz): CRC-32/ISO-HDLC
// computed bit by bit, independent of the table providers/event_stream.cpp
// uses; and a big-endian u32 read.
#pragma once

#include <cstdint>
#include <string_view>

namespace llmgate::testing {

inline std::uint32_t oracle_crc32(std::string_view s) {
  std::uint32_t c = 0xFFFFFFFFu;
  for (unsigned char b : s) {
    c ^= b;
    for (int k = 0; k < 8; ++k) c = (c >> 1) ^ (0xEDB88320u & (0u - (c & 1u)));
  }
  return ~c;
}

inline std::uint32_t read_be32(std::string_view s) {
  return (std::uint32_t(static_cast<unsigned char>(s[0])) << 24) |
         (std::uint32_t(static_cast<unsigned char>(s[1])) << 16) |
         (std::uint32_t(static_cast<unsigned char>(s[2])) << 8) |
         std::uint32_t(static_cast<unsigned char>(s[3]));
}

}  // namespace llmgate::testing
