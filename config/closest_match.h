// "Did you mean ...?" for names that are probably misspelt: config keys,
// provider names, request fields. Declared apart from the YAML walker so that
// layers which never touch YAML (routing/, gateway/) can use it.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace llmgate::config {

// The candidate that `name` most likely misspells, i.e. the nearest one within
// a case-insensitive edit distance of a third of its length (at least 1);
// nullopt if none is that close.
std::optional<std::string> closest_match(std::string_view name,
                                         const std::vector<std::string>& candidates);

}  // namespace llmgate::config
