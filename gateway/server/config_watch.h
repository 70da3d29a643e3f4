// The config-file watch's decision: reload only a change that has settled.
//
// A file being written (a slow copy, `cat > file`, an editor saving in
// place) is read mid-way more often than one would think; a reload of half a
// file is at best a rejected reload and at worst a different config. The
// watch therefore reloads a new content only once it has read the same bytes
// for `settle` (and reload_guard.h refuses what would still weaken security).
// Atomic replacement (write a temporary file, then rename it over the config)
// never shows a partial file: docs/operations.md, "Reloading".
//
// Beast-free and clock-injected: tests/unit/gateway/config_watch_test.cpp.
#pragma once

#include <chrono>
#include <optional>
#include <string>

namespace llmgate::gateway {

class ConfigWatch {
 public:
  using Clock = std::chrono::steady_clock;

  ConfigWatch(std::optional<std::string> current, std::chrono::milliseconds settle)
      : applied_(std::move(current)), settle_(settle) {}

  // What the file reads now (nullopt: unreadable, e.g. between an unlink and
  // a rename). True when this content should be reloaded now.
  bool observe(std::optional<std::string> content, Clock::time_point now);
  // A reload happened by other means (SIGHUP): this is the content now.
  void applied(std::optional<std::string> content);
  // A change is waiting to settle: poll again soon (not at the full interval).
  bool settling() const { return pending_.has_value(); }

 private:
  std::optional<std::string> applied_;
  std::optional<std::string> pending_;
  Clock::time_point pending_since_{};
  std::chrono::milliseconds settle_;
};

}  // namespace llmgate::gateway
