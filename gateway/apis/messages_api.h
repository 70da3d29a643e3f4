// Anthropic's Messages API as the gateway serves it (messages_api.cpp):
// what a chat answer is as a Message, and a Message as a stream. Beast-free.
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "gateway/apis/client_api.h"

namespace llmgate::gateway {

// A chat.completion (its first choice) as an Anthropic Message: reasoning
// as a thinking block (unsigned), the text, each tool call as a tool_use
// block (its arguments as input), the stop reason, usage with the cached
// share apart.
nlohmann::ordered_json message_of_completion(const nlohmann::json& completion);

// The renderer of chat chunks as Anthropic's events (what messages_api()
// gives a Messages client on a chat deployment). `scan` false: each chunk
// rendered from its parsed document, the reference fuzz_messages holds the
// scanning renderer to.
std::unique_ptr<ClientApi::StreamRenderer> chat_to_messages_renderer(bool scan = true);

// A Message as the events of a stream: message_start, each block opened,
// given whole in one delta (a thinking block's signature in its own) and
// closed, message_delta, message_stop.
std::string stream_of_message(const nlohmann::ordered_json& message);

}  // namespace llmgate::gateway
