// Leveled logging to stderr: one write per line, safe across threads. Text
// ("<time> <level> <message> key=value ...") or JSON lines
// ({"ts":...,"level":...,"msg":...,"key":value,...}) for log pipelines.
//
// What is logged is decided by the callers, and never includes prompts,
// completions or keys: request lines carry ids, names from config, numbers
// and outcomes only.
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace llmgate::gateway {

enum class LogLevel { kDebug = 0, kInfo = 1, kWarn = 2, kError = 3 };
enum class LogFormat { kText, kJson };

void set_log_level(LogLevel level);
bool log_enabled(LogLevel level);
bool parse_log_level(std::string_view text, LogLevel& out);
void set_log_format(LogFormat format);
bool parse_log_format(std::string_view text, LogFormat& out);

// A structured field: a number (or true/false) goes into JSON bare, a string
// quoted. In text, strings with spaces or quotes are quoted.
//
// The key is a literal. The value is borrowed when given as a string that
// outlives the log_event() call (a name from config, an id of the request:
// the request line copies none of them) and owned when given as a
// temporary std::string (a number rendered for the line).
struct LogField {
  LogField(std::string_view k, std::string_view v, bool is_number = false)
      : key(k), number(is_number), borrowed_(v) {}
  LogField(std::string_view k, const char* v, bool is_number = false)
      : LogField(k, std::string_view(v), is_number) {}
  LogField(std::string_view k, std::string&& v, bool is_number = false)
      : key(k), number(is_number), owned_(std::move(v)), owns_(true) {}

  std::string_view value() const { return owns_ ? std::string_view(owned_) : borrowed_; }

  std::string_view key;
  bool number = false;

 private:
  std::string_view borrowed_;
  std::string owned_;
  bool owns_ = false;
};

void log_line(LogLevel level, std::string_view message);
void log_event(LogLevel level, std::string_view message, std::span<const LogField> fields);

// The request line (info) of a request refused before any upstream attempt
// (docs/operations.md, "Refusals"): result=refused, the reason and the
// status; the operation, model and key's name when known (empty: left out).
void log_refused_request(std::string_view request_id, std::string_view operation,
                         std::string_view model, std::string_view key, std::string_view reason,
                         int status);

// The line as log_event would write it (without the trailing newline), for tests.
std::string format_log_line(LogLevel level, std::string_view message,
                            std::span<const LogField> fields, LogFormat format);

}  // namespace llmgate::gateway
