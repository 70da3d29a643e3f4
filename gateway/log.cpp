#include "gateway/log.h"

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <string>

namespace llmgate::gateway {
namespace {
std::atomic<int> g_level{static_cast<int>(LogLevel::kInfo)};
}

void set_log_level(LogLevel level) { g_level.store(static_cast<int>(level)); }
bool log_enabled(LogLevel level) { return static_cast<int>(level) >= g_level.load(std::memory_order_relaxed); }

void log_line(LogLevel level, std::string_view message) {
  if (!log_enabled(level)) return;
  static constexpr const char* kNames[] = {"debug", "info", "warn", "error"};
  auto now = std::chrono::system_clock::now();
  std::time_t t = std::chrono::system_clock::to_time_t(now);
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() % 1000;
  std::tm tm{};
  gmtime_r(&t, &tm);
  char stamp[64];
  std::snprintf(stamp, sizeof stamp, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900,
                tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, static_cast<int>(ms));
  std::string line;
  line.reserve(message.size() + 64);
  line.append(stamp).append(" ").append(kNames[static_cast<int>(level)]).append(" ");
  line.append(message).push_back('\n');
  // One write(2) per line keeps lines from different threads whole.
  [[maybe_unused]] auto n = ::write(2, line.data(), line.size());
}

bool parse_log_level(std::string_view text, LogLevel& out) {
  if (text == "debug") out = LogLevel::kDebug;
  else if (text == "info") out = LogLevel::kInfo;
  else if (text == "warn") out = LogLevel::kWarn;
  else if (text == "error") out = LogLevel::kError;
  else return false;
  return true;
}

}  // namespace llmgate::gateway
