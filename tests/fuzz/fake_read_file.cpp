// Deterministic stand-in for config/read_file.cpp in the fuzz targets: the
// fuzzer may name any path as api_key_file or tls.ca_file, and reading the
// real file system would make runs depend on the machine (or block on
// /dev/stdin). A few fixed paths have contents; every other path is missing.
#include <stdexcept>
#include <string>

#include "config/read_file.h"

namespace llmgate::config {

std::string read_file(const std::string& path, std::size_t max_bytes) {
  std::string contents;
  if (path == "/run/secrets/openai" || path == "/fuzz/key") {
    contents = "sk-fuzz-file-key\n";
  } else if (path == "/fuzz/empty") {
    contents = "";
  } else if (path == "/fuzz/spaces") {
    contents = "sk fuzz\n";
  } else if (path == "/etc/ssl/certs/ca-certificates.crt" || path == "/fuzz/ca.pem") {
    contents = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n";
  } else if (path == "/fuzz/huge") {
    throw std::runtime_error("larger than " + std::to_string(max_bytes) + " bytes");
  } else if (!path.empty() && path.back() == '/') {
    throw std::runtime_error("Is a directory");
  } else {
    throw std::runtime_error("No such file or directory");
  }
  if (contents.size() > max_bytes) {
    throw std::runtime_error("larger than " + std::to_string(max_bytes) + " bytes");
  }
  return contents;
}

}  // namespace llmgate::config
