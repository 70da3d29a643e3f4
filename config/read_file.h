// Reading small files (the config itself, api_key_file, tls.ca_file).
// Internal to config/.
#pragma once

#include <cstddef>
#include <string>

namespace llmgate::config {

// The whole file. Throws std::runtime_error whose what() is just the reason
// ("No such file or directory", "larger than 65536 bytes"); callers add the
// path and key. Fails on directories and on more than `max_bytes` (so a path
// like /dev/zero cannot hang start-up). The message never contains any of the
// file's contents.
std::string read_file(const std::string& path, std::size_t max_bytes);

}  // namespace llmgate::config
