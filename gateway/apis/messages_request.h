// Admission of a POST /v1/messages body (Anthropic's Messages API): checked
// as Anthropic checks it (its words, "max_tokens: Field required"), kept as
// the client sent it for Anthropic deployments, and translated to an OpenAI
// chat document for every other deployment and for admission (the model,
// stream, prompt size and prefixes are read from the translation as a chat
// request's are). docs/providers.md, "Anthropic clients". Beast-free.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string_view>
#include <variant>

#include "gateway/apis/chat_request.h"
#include "gateway/http/api_error.h"

namespace llmgate::gateway {

struct MessagesTranslation {
  nlohmann::json chat;  // the chat document (model, messages, max_completion_tokens, ...)
  // The first thing chat cannot say (a server tool, a document, a field
  // Anthropic alone has): only Anthropic deployments can serve the request.
  std::optional<ChatRequest::Untranslated> untranslated;
  // A thinking block without a signature is in the history.
  bool unsigned_thinking = false;
};

// `in`: the client's document. A 400 (Anthropic's words) when Anthropic
// would refuse it; else its translation. Thinking blocks in the history are
// not translated (another provider cannot take Anthropic's signed reasoning)
// and cache_control marks are not (a caching hint; OpenAI-compatible
// servers and Gemini cache by prefix without them): neither changes what
// the answer says.
std::variant<MessagesTranslation, ApiError> translate_messages_request(const nlohmann::json& in);

std::variant<ChatRequest, ApiError> parse_messages_request(std::string_view content_type,
                                                           std::string body);

}  // namespace llmgate::gateway
