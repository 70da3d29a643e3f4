// Shared helpers for the config unit tests.
#pragma once

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <regex>
#include <sstream>
#include <string>

#include "config/config.h"

namespace llmgate::config::testing {

// EnvLookup is a plain function pointer, so the fake environment is a global
// map that each test fills in (and clears in SetUp).
inline std::map<std::string, std::string>& fake_env() {
  static std::map<std::string, std::string> env;
  return env;
}

inline std::optional<std::string> fake_env_lookup(const std::string& name) {
  const auto it = fake_env().find(name);
  if (it == fake_env().end()) return std::nullopt;
  return it->second;
}

// parse_config with origin "cfg.yaml" and the fake environment; returns the
// ConfigError message with its line and column, or "<no error>".
inline std::string config_error_at(const std::string& yaml) {
  try {
    parse_config(yaml, "cfg.yaml", &fake_env_lookup);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "<no error>";
}

// config_error_at() without the locations: each line's "cfg.yaml:3:5: "
// becomes "cfg.yaml: " (the error matrix checks what is said; the locations
// have tests of their own).
inline std::string config_error(const std::string& yaml) {
  static const std::regex kLocation("^cfg\\.yaml:[0-9]+:[0-9]+:");
  std::istringstream lines(config_error_at(yaml));
  std::string out, line;
  while (std::getline(lines, line)) {
    if (!out.empty()) out += '\n';
    out += std::regex_replace(line, kLocation, "cfg.yaml:");
  }
  return out;
}

inline std::shared_ptr<const Config> parse(const std::string& yaml) {
  return parse_config(yaml, "cfg.yaml", &fake_env_lookup);
}

// A file under the temp directory, removed when the test ends.
class TempFile {
 public:
  explicit TempFile(const std::string& contents) {
    std::string pattern =
        (std::filesystem::temp_directory_path() / "llmgate_config_XXXXXX").string();
    const int fd = ::mkstemp(pattern.data());
    if (fd < 0) std::abort();
    ::close(fd);
    path_ = pattern;
    std::ofstream(path_, std::ios::binary) << contents;
  }
  ~TempFile() { std::filesystem::remove(path_); }
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;

  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace llmgate::config::testing
