// Numbers as text without printf: the route explanation and the x-llmgate-*
// headers write a few per request, and snprintf's floating-point path cost
// ~8,000 instructions per request of it.
#pragma once

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <string>

namespace llmgate::config {

// `v` with `precision` digits after the point, as printf's "%.*f" writes it
// (std::to_chars rounds the exact binary value the same way).
inline void append_fixed(std::string& out, double v, int precision) {
  char buf[64];
  // Whole milliseconds and the like (most numbers written per request): the
  // nearest integer, ties to even, is what "%.0f" writes, at a tenth of
  // to_chars' cost for a double. (Not below zero: -0.4 and -0.0 are "-0".
  // nearbyint rounds as the rounding mode says: nothing here changes it
  // from the default, to nearest.)
  if (precision == 0 && v >= 0 && !std::signbit(v) && v < 1e18) {
    const auto r =
        std::to_chars(buf, buf + sizeof buf, static_cast<unsigned long long>(std::nearbyint(v)));
    out.append(buf, r.ptr);
    return;
  }
  // One to three decimals (the x-llmgate-* milliseconds and tokens/s): the
  // scaled value's nearest integer, when the scaled value is not near a tie
  // -- its rounding error (under 1e-4 below 1e12) cannot then change which
  // integer is nearest to the exact binary value, the one printf rounds.
  if (precision >= 1 && precision <= 3 && v >= 0 && !std::signbit(v)) {
    static constexpr double kScale[] = {1, 10, 100, 1000};
    const double scaled = v * kScale[precision];
    const double whole = std::floor(scaled);
    if (scaled < 1e12 && std::fabs(scaled - whole - 0.5) > 0.01) {
      const auto n = static_cast<unsigned long long>(whole) + (scaled - whole > 0.5 ? 1 : 0);
      const unsigned long long unit = static_cast<unsigned long long>(kScale[precision]);
      char* p = std::to_chars(buf, buf + sizeof buf, n / unit).ptr;
      *p++ = '.';
      unsigned long long frac = n % unit;
      for (int i = precision - 1; i >= 0; --i, frac /= 10)
        p[i] = static_cast<char>('0' + frac % 10);
      out.append(buf, p + precision);
      return;
    }
  }
  const auto r = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::fixed, precision);
  if (r.ec == std::errc()) {
    out.append(buf, r.ptr);
    return;
  }
  // Too long for the buffer (|v| past ~1e60): printf's shortest-ish form.
  const int n = std::snprintf(buf, sizeof buf, "%.*g", precision + 1, v);
  if (n > 0) out.append(buf, std::min<std::size_t>(static_cast<std::size_t>(n), sizeof buf - 1));
}

// The same as a string of its own.
inline std::string fixed(double v, int precision) {
  std::string out;
  append_fixed(out, v, precision);
  return out;
}

}  // namespace llmgate::config
