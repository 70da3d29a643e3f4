// Minimal leveled logging to stderr: one write per line, safe across threads.
#pragma once

#include <string_view>

namespace llmgate::gateway {

enum class LogLevel { kDebug = 0, kInfo = 1, kWarn = 2, kError = 3 };

void set_log_level(LogLevel level);
bool log_enabled(LogLevel level);
void log_line(LogLevel level, std::string_view message);
bool parse_log_level(std::string_view text, LogLevel& out);

}  // namespace llmgate::gateway
