#include "config/read_file.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <stdexcept>

namespace llmgate::config {

std::string read_file(const std::string& path, std::size_t max_bytes) {
  // stdio rather than iostreams: it reports *why* (errno), e.g. EISDIR.
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> file(std::fopen(path.c_str(), "rb"),
                                                       &std::fclose);
  if (!file) throw std::runtime_error(std::strerror(errno));

  std::string contents;
  char buffer[8192];
  while (true) {
    const std::size_t n = std::fread(buffer, 1, sizeof buffer, file.get());
    contents.append(buffer, n);
    if (contents.size() > max_bytes) {
      throw std::runtime_error("larger than " + std::to_string(max_bytes) + " bytes");
    }
    if (n < sizeof buffer) break;
  }
  if (std::ferror(file.get())) throw std::runtime_error(std::strerror(errno));
  return contents;
}

}  // namespace llmgate::config
