// The translation of Anthropic's Messages requests to chat as it was first
// written, on a parsed document (nlohmann): the reference
// gateway/apis/messages_request.cpp's translation from the client's text is
// held to (fuzz_messages). Not built into the gateway.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <variant>

#include "gateway/apis/chat_request.h"
#include "gateway/http/api_error.h"

namespace llmgate::fuzz {

struct ReferenceTranslation {
  nlohmann::json chat;
  std::optional<gateway::ChatRequest::Untranslated> untranslated;
  bool unsigned_thinking = false;
};

std::variant<ReferenceTranslation, gateway::ApiError> reference_translate_messages(
    const nlohmann::json& in);

}  // namespace llmgate::fuzz
