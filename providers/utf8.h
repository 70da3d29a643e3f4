// UTF-8 encoding of one code point, for the JSON string decoders
// (inspect_chunk's key capture, CompletionAssembler::add_plain).
#pragma once

namespace llmgate::providers {

// Calls put(byte) for each byte of `cp` (<= 0x10FFFF, not a surrogate) in UTF-8.
template <typename Put>
void encode_utf8(unsigned cp, Put&& put) {
  if (cp < 0x80) {
    put(cp);
  } else if (cp < 0x800) {
    put(0xC0 | cp >> 6);
    put(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    put(0xE0 | cp >> 12);
    put(0x80 | (cp >> 6 & 0x3F));
    put(0x80 | (cp & 0x3F));
  } else {
    put(0xF0 | cp >> 18);
    put(0x80 | (cp >> 12 & 0x3F));
    put(0x80 | (cp >> 6 & 0x3F));
    put(0x80 | (cp & 0x3F));
  }
}

}  // namespace llmgate::providers
