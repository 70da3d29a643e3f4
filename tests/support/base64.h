// Base64 (RFC 4648, padded) of bytes, for tests that send HTTP Basic
// credentials (the gateway only decodes). Header-only: the fuzz targets
// include it too.
#pragma once

#include <string>
#include <string_view>

namespace llmgate::testing {

inline std::string base64(std::string_view in) {
  static constexpr char kAlphabet[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  unsigned bits = 0;
  int have = 0;
  for (unsigned char ch : in) {
    bits = (bits << 8) | ch;
    have += 8;
    while (have >= 6) {
      have -= 6;
      out += kAlphabet[(bits >> have) & 63];
    }
  }
  if (have > 0) out += kAlphabet[(bits << (6 - have)) & 63];
  while (out.size() % 4) out += '=';
  return out;
}

}  // namespace llmgate::testing
