// UTC timestamps as RFC 3339 writes them, to the second
// ("2026-11-30T06:00:00Z"): how Anthropic lists models and rate-limit
// resets, and how AWS (STS, container and instance credentials) says when
// credentials expire; format_utc for other layouts (SigV4's x-amz-date).
// Beast-free, header-only.
#pragma once

#include <chrono>
#include <ctime>
#include <optional>
#include <string>

namespace llmgate::config {

// `t` in UTC, to the second, as strftime's `format` writes it (at most 31
// characters).
inline std::string format_utc(std::chrono::system_clock::time_point t, const char* format) {
  const std::time_t s = std::chrono::system_clock::to_time_t(t);
  std::tm tm{};
  gmtime_r(&s, &tm);
  char buf[32];
  const std::size_t n = std::strftime(buf, sizeof buf, format, &tm);
  return std::string(buf, n);
}

inline std::string format_rfc3339_utc(std::chrono::system_clock::time_point t) {
  return format_utc(t, "%Y-%m-%dT%H:%M:%SZ");
}

// Its date and time (fractions and the zone are not read: AWS writes UTC);
// nullopt when it is none, or beyond the years a nanosecond clock holds.
inline std::optional<std::chrono::system_clock::time_point> parse_rfc3339_utc(
    const std::string& s) {
  std::tm tm{};
  const char* end = strptime(s.c_str(), "%Y-%m-%dT%H:%M:%S", &tm);
  if (end == nullptr || tm.tm_year < 70 || tm.tm_year > 250) return std::nullopt;
  return std::chrono::system_clock::from_time_t(timegm(&tm));
}

}  // namespace llmgate::config
