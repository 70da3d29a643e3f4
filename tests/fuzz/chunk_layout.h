// FUZZ_CHECK that a translated chat.completion.chunk is laid out as an
// OpenAI deployment's (providers/chunk_writer.h): "id", "object", "created",
// "model", "choices" in that order, then "usage" (an object on the usage
// chunk, which has no choice; null on the others exactly when the client
// asked for usage; else absent); every choice "index", "delta",
// "logprobs": null, "finish_reason", in that order.
#pragma once

#include <array>
#include <cstddef>
#include <nlohmann/json.hpp>
#include <string_view>

#include "tests/fuzz/fuzz_check.h"

inline void check_chunk_layout(std::string_view data, bool include_usage) {
  const auto chunk = nlohmann::ordered_json::parse(data, nullptr, /*allow_exceptions=*/false);
  FUZZ_CHECK(chunk.is_object());
  static constexpr std::array<std::string_view, 6> kMembers = {"id",    "object",  "created",
                                                               "model", "choices", "usage"};
  std::size_t i = 0;
  for (const auto& [key, value] : chunk.items()) {
    FUZZ_CHECK(i < kMembers.size() && key == kMembers[i]);
    ++i;
  }
  const auto& choices = chunk["choices"];
  FUZZ_CHECK(choices.is_array());
  if (choices.empty()) {
    FUZZ_CHECK(i == 6 && chunk["usage"].is_object());
  } else {
    FUZZ_CHECK(i == (include_usage ? 6u : 5u));
    FUZZ_CHECK(!include_usage || chunk["usage"].is_null());
  }
  static constexpr std::array<std::string_view, 4> kChoice = {"index", "delta", "logprobs",
                                                              "finish_reason"};
  for (const auto& choice : choices) {
    FUZZ_CHECK(choice.is_object() && choice.size() == kChoice.size());
    std::size_t j = 0;
    for (const auto& [key, value] : choice.items()) FUZZ_CHECK(key == kChoice[j++]);
    FUZZ_CHECK(choice["logprobs"].is_null());
  }
}
