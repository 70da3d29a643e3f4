#include "providers/json_write.h"

#include <charconv>
#include <cstdint>
#include <cstring>

#include "providers/request_body.h"

namespace llmgate::providers {

bool valid_utf8(std::string_view s) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const auto* end = p + s.size();
  while (p != end) {
    // ASCII eight bytes at a time (most of a conversation).
    while (end - p >= 8) {
      std::uint64_t word;
      std::memcpy(&word, p, 8);
      if (word & 0x8080808080808080ULL) break;
      p += 8;
    }
    if (p == end) break;
    const unsigned char b = *p;
    if (b < 0x80) {
      ++p;
      continue;
    }
    // The sequence's length and the range its second byte must be in
    // (which rules out overlong forms, surrogates and > U+10FFFF).
    std::size_t n = 0;
    unsigned char lo = 0x80, hi = 0xBF;
    if (b >= 0xC2 && b <= 0xDF) {
      n = 2;
    } else if (b >= 0xE0 && b <= 0xEF) {
      n = 3;
      if (b == 0xE0) lo = 0xA0;
      if (b == 0xED) hi = 0x9F;
    } else if (b >= 0xF0 && b <= 0xF4) {
      n = 4;
      if (b == 0xF0) lo = 0x90;
      if (b == 0xF4) hi = 0x8F;
    } else {
      return false;
    }
    if (static_cast<std::size_t>(end - p) < n) return false;
    if (p[1] < lo || p[1] > hi) return false;
    for (std::size_t i = 2; i < n; ++i) {
      if (p[i] < 0x80 || p[i] > 0xBF) return false;
    }
    p += n;
  }
  return true;
}

namespace {

template <class Json>
void write_string(std::string& out, const std::string& s) {
  if (valid_utf8(s)) return append_json_string(out, s);
  out += Json(s).dump(-1, ' ', false, Json::error_handler_t::replace);  // its replacements
}

template <class Json>
void write(std::string& out, const Json& j) {
  using Type = typename Json::value_t;
  switch (j.type()) {
    case Type::object: {
      out += '{';
      bool first = true;
      for (auto it = j.cbegin(); it != j.cend(); ++it) {
        if (!first) out += ',';
        first = false;
        write_string<Json>(out, it.key());
        out += ':';
        write(out, it.value());
      }
      out += '}';
      return;
    }
    case Type::array: {
      out += '[';
      bool first = true;
      for (const Json& e : j) {
        if (!first) out += ',';
        first = false;
        write(out, e);
      }
      out += ']';
      return;
    }
    case Type::string:
      return write_string<Json>(out, j.template get_ref<const std::string&>());
    case Type::boolean:
      out += j.template get<bool>() ? "true" : "false";
      return;
    case Type::null:
      out += "null";
      return;
    case Type::number_integer:
    case Type::number_unsigned: {
      char digits[24];
      const auto r =
          j.type() == Type::number_integer
              ? std::to_chars(digits, digits + sizeof digits, j.template get<std::int64_t>())
              : std::to_chars(digits, digits + sizeof digits, j.template get<std::uint64_t>());
      out.append(digits, r.ptr);
      return;
    }
    default:  // a float (its shortest form), binary, discarded: nlohmann's own text
      out += j.dump(-1, ' ', false, Json::error_handler_t::replace);
  }
}

}  // namespace

void write_json(std::string& out, const nlohmann::json& j) { write(out, j); }
void write_json(std::string& out, const nlohmann::ordered_json& j) { write(out, j); }

}  // namespace llmgate::providers
