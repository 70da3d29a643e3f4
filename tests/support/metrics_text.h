// Reading values out of a Prometheus text exposition, for tests.
#pragma once

#include <string>

namespace llmgate::testing {

// The sum of the values of every series of `name` (exactly that metric, not
// a longer name) whose label text contains `labels` ("" = all of them).
inline double metric_value(const std::string& text, const std::string& name,
                           const std::string& labels = "") {
  double sum = 0;
  std::size_t pos = 0;
  while ((pos = text.find("\n" + name, pos)) != std::string::npos) {
    std::size_t end = text.find('\n', pos + 1);
    std::string line = text.substr(pos + 1, end - pos - 1);
    pos = end;
    std::string series = line.substr(0, line.rfind(' '));
    if (series != name && series.rfind(name + "{", 0) != 0) continue;
    if (!labels.empty() && series.find(labels) == std::string::npos) continue;
    sum += std::stod(line.substr(line.rfind(' ') + 1));
  }
  return sum;
}

}  // namespace llmgate::testing
