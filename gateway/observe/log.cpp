#include "gateway/observe/log.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <nlohmann/json.hpp>
#include <string>

namespace llmgate::gateway {
namespace {

std::atomic<int> g_level{static_cast<int>(LogLevel::kInfo)};
std::atomic<int> g_format{static_cast<int>(LogFormat::kText)};
constexpr const char* kNames[] = {"debug", "info", "warn", "error"};

// "2026-01-02T03:04:05.678Z", appended.
void append_timestamp(std::string& out) {
  auto now = std::chrono::system_clock::now();
  std::time_t t = std::chrono::system_clock::to_time_t(now);
  auto ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() % 1000;
  std::tm tm{};
  gmtime_r(&t, &tm);
  char stamp[64];
  const int n = std::snprintf(stamp, sizeof stamp, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ",
                              tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min,
                              tm.tm_sec, static_cast<int>(ms));
  if (n > 0)
    out.append(stamp, std::min<std::size_t>(static_cast<std::size_t>(n), sizeof stamp - 1));
}

std::string timestamp() {
  std::string out;
  append_timestamp(out);
  return out;
}

// A quoted value as nlohmann's dump writes it. Printable ASCII (the usual
// ids, names and route explanations) is escaped here without a DOM: only
// '"' and '\\' need it. Anything else (control bytes, UTF-8, invalid UTF-8
// replaced) goes through nlohmann.
void append_quoted(std::string& out, std::string_view v) {
  for (char c : v) {
    const auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u > 0x7e) {
      out.append(nlohmann::json(std::string(v))
                     .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
      return;
    }
  }
  out.push_back('"');
  for (char c : v) {
    if (c == '"' || c == '\\') out.push_back('\\');
    out.push_back(c);
  }
  out.push_back('"');
}

bool needs_quotes(std::string_view v) {
  if (v.empty()) return true;
  for (char c : v) {
    if (c == ' ' || c == '"' || c == '=' || static_cast<unsigned char>(c) < 0x20) return true;
  }
  return false;
}

}  // namespace

void set_log_level(LogLevel level) { g_level.store(static_cast<int>(level)); }
bool log_enabled(LogLevel level) {
  return static_cast<int>(level) >= g_level.load(std::memory_order_relaxed);
}
void set_log_format(LogFormat format) { g_format.store(static_cast<int>(format)); }

std::string format_log_line(LogLevel level, std::string_view message,
                            std::span<const LogField> fields, LogFormat format) {
  if (format == LogFormat::kJson) {
    nlohmann::ordered_json j;
    j["ts"] = timestamp();
    j["level"] = kNames[static_cast<int>(level)];
    j["msg"] = message;
    for (const auto& f : fields) {
      const std::string key(f.key);
      if (f.number) {
        auto v = nlohmann::ordered_json::parse(f.value(), nullptr, false);
        j[key] = v.is_discarded() ? nlohmann::ordered_json(f.value()) : v;
      } else {
        j[key] = f.value();
      }
    }
    // Replace invalid UTF-8 rather than throw: a log line never fails.
    return j.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
  }
  // One allocation: the line's size, quoting aside, is known.
  std::size_t size = 48 + message.size();
  for (const auto& f : fields) size += f.key.size() + f.value().size() + 4;
  std::string line;
  line.reserve(size);
  append_timestamp(line);
  line.append(" ").append(kNames[static_cast<int>(level)]).append(" ").append(message);
  for (const auto& f : fields) {
    line.append(" ").append(f.key).append("=");
    if (!f.number && needs_quotes(f.value())) {
      append_quoted(line, f.value());
    } else {
      line.append(f.value());
    }
  }
  return line;
}

void log_refused_request(std::string_view request_id, std::string_view operation,
                         std::string_view model, std::string_view key, std::string_view reason,
                         int status) {
  if (!log_enabled(LogLevel::kInfo)) return;
  std::vector<LogField> f;
  f.reserve(7);
  f.push_back({"request_id", request_id});
  if (!operation.empty()) f.push_back({"operation", operation});
  if (!model.empty()) f.push_back({"model", model});
  if (!key.empty()) f.push_back({"key", key});
  f.push_back({"result", "refused"});
  f.push_back({"reason", reason});
  f.push_back({"status", std::to_string(status), true});
  log_event(LogLevel::kInfo, "request", f);
}

void log_event(LogLevel level, std::string_view message, std::span<const LogField> fields) {
  if (!log_enabled(level)) return;
  std::string line = format_log_line(
      level, message, fields, static_cast<LogFormat>(g_format.load(std::memory_order_relaxed)));
  line.push_back('\n');
  // One write(2) per line keeps lines from different threads whole.
  [[maybe_unused]] auto n = ::write(2, line.data(), line.size());
}

void log_line(LogLevel level, std::string_view message) { log_event(level, message, {}); }

bool parse_log_level(std::string_view text, LogLevel& out) {
  if (text == "debug")
    out = LogLevel::kDebug;
  else if (text == "info")
    out = LogLevel::kInfo;
  else if (text == "warn")
    out = LogLevel::kWarn;
  else if (text == "error")
    out = LogLevel::kError;
  else
    return false;
  return true;
}

bool parse_log_format(std::string_view text, LogFormat& out) {
  if (text == "text")
    out = LogFormat::kText;
  else if (text == "json")
    out = LogFormat::kJson;
  else
    return false;
  return true;
}

}  // namespace llmgate::gateway
