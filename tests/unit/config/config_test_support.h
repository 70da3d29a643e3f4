// Shared helpers for the config unit tests.
#pragma once

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
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
// ConfigError message, or "<no error>".
inline std::string config_error(const std::string& yaml) {
  try {
    parse_config(yaml, "cfg.yaml", &fake_env_lookup);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "<no error>";
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
