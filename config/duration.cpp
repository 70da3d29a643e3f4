// parse_duration: "250ms", "2s", "1.5s", "1m", "1h", "1m30s" -> milliseconds.
//
// Grammar: one or more <number><unit> segments, no spaces, no sign.
//   number: digits, optionally followed by '.' and more digits
//   unit:   us | ms | s | m | h
// Arithmetic is exact (integers, not floating point): the result must be a
// whole number of milliseconds ("100us" and "1.0005s" are rejected rather than
// rounded) and at most kMaxDuration. "0s" parses to zero; whether zero is
// acceptable is the caller's decision.
#include <cstdint>
#include <stdexcept>
#include <string_view>

#include "config/ascii.h"
#include "config/config.h"
#include "config/quoting.h"

namespace llmgate::config {
namespace {

// Far above any sensible timeout, and far below what would overflow
// steady_clock::now() + d in nanoseconds.
constexpr std::int64_t kMaxDurationMicros = 7LL * 24 * 3600 * 1'000'000;  // 168h

// Enough integer digits for any duration up to the maximum, with room to
// detect overflow. Once trailing zeros are dropped, a fraction longer than
// nine digits is never a whole number of milliseconds, whatever the unit.
constexpr std::size_t kMaxIntegerDigits = 15;
constexpr std::size_t kMaxFractionDigits = 9;

struct Unit {
  std::string_view name;
  std::int64_t micros;
};
constexpr Unit kUnits[] = {
    {"us", 1}, {"ms", 1'000}, {"s", 1'000'000}, {"m", 60'000'000}, {"h", 3'600'000'000},
};

using Wide = __int128;  // (15 + 9 digits) * 3.6e9 fits; int64_t would not.

[[noreturn]] void invalid(std::string_view text) {
  throw std::invalid_argument("invalid duration " + quote(text) + " (expected e.g. 250ms, 2s, 1m)");
}

std::string_view take_while(std::string_view text, std::size_t& pos, bool (*pred)(char)) {
  const std::size_t start = pos;
  while (pos < text.size() && pred(text[pos])) ++pos;
  return text.substr(start, pos - start);
}

Wide digits_value(std::string_view digits) {
  Wide value = 0;
  for (char c : digits) value = value * 10 + (c - '0');
  return value;
}

}  // namespace

Duration parse_duration(const std::string& text_in) {
  const std::string_view text = text_in;
  if (text.empty()) invalid(text);
  Wide total_micros = 0;
  std::size_t pos = 0;
  while (pos < text.size()) {
    const std::string_view whole = take_while(text, pos, is_ascii_digit);
    std::string_view fraction;
    if (pos < text.size() && text[pos] == '.') {
      ++pos;
      fraction = take_while(text, pos, is_ascii_digit);
      if (fraction.empty()) invalid(text);
    }
    const std::string_view unit_name = take_while(text, pos, is_ascii_letter);
    if (whole.empty() || unit_name.empty()) invalid(text);
    while (!fraction.empty() && fraction.back() == '0') fraction.remove_suffix(1);
    if (whole.size() > kMaxIntegerDigits) {
      throw std::invalid_argument("duration " + quote(text) + " is too large (at most 168h)");
    }
    if (fraction.size() > kMaxFractionDigits) {
      throw std::invalid_argument("duration " + quote(text) +
                                  " is not a whole number of milliseconds");
    }
    const Unit* unit = nullptr;
    for (const auto& candidate : kUnits) {
      if (candidate.name == unit_name) unit = &candidate;
    }
    if (unit == nullptr) invalid(text);

    Wide scale = 1;
    for (std::size_t i = 0; i < fraction.size(); ++i) scale *= 10;
    const Wide numerator = (digits_value(whole) * scale + digits_value(fraction)) * unit->micros;
    if (numerator % scale != 0) {
      throw std::invalid_argument("duration " + quote(text) +
                                  " is not a whole number of milliseconds");
    }
    total_micros += numerator / scale;
    if (total_micros > kMaxDurationMicros) {
      throw std::invalid_argument("duration " + quote(text) + " is too large (at most 168h)");
    }
  }
  if (total_micros % 1000 != 0) {
    throw std::invalid_argument("duration " + quote(text) +
                                " is not a whole number of milliseconds");
  }
  return Duration{static_cast<Duration::rep>(total_micros / 1000)};
}

}  // namespace llmgate::config
