// SSE events for tests that feed a relay's state or a splice directly: each
// event's bytes live in the store, which outlives the views into them.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "providers/sse_parser.h"

namespace llmgate::testing {

struct SseEvents {
  std::vector<std::unique_ptr<std::string>> store;
  // "data: <json>\n\n".
  providers::Frame data(std::string_view json) {
    auto& s =
        *store.emplace_back(std::make_unique<std::string>("data: " + std::string(json) + "\n\n"));
    providers::Frame ev;
    ev.raw = s;
    ev.data = std::string_view(s).substr(6, json.size());
    ev.has_data = true;
    return ev;
  }
  // ": keep-alive\n\n".
  providers::Frame comment() {
    auto& s = *store.emplace_back(std::make_unique<std::string>(": keep-alive\n\n"));
    providers::Frame ev;
    ev.raw = s;
    return ev;
  }
};

}  // namespace llmgate::testing
