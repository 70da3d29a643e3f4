// A chat request's conversation written as Bedrock Converse's `messages` and
// `system`, as text from the client's indexed body (RequestBody): the
// translation bedrock_protocol.cpp makes on a parsed document (add_message),
// without the document -- as anthropic_conversation.h and
// gemini_conversation.h do for their protocols. Strings and a data URL's
// parts keep the client's text; a call's input and a tool's JSON result are
// written from their own documents, as the document's translation writes
// them.
//
// The writer answers only what it answers exactly as the document's
// translation does; anything that translation would refuse, or that the
// writer does not handle (an image URL with an escape), makes it decline,
// and the caller translates the document instead. fuzz_chat_request holds
// the two equal on every input the writer answers. Beast-free.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <variant>

#include "providers/request_body.h"
#include "providers/upstream_protocol.h"

namespace llmgate::providers {

// Appends `"messages":[...]`, followed by `,"system":[...]` when the
// conversation has system text, for the request's `messages` member. False
// when it declines (`out` then holds a partial text).
bool write_bedrock_conversation(const RequestBody& in, std::string& out);

// The Bedrock protocol's upstream body for a chat request (the protocol's
// body() is the first, else the second): its conversation written as text,
// the other fields translated from their own documents (nullopt when the
// writer declines); the whole request translated as a document.
std::optional<std::variant<std::string, Untranslatable>> bedrock_chat_body_text(
    const RequestBody& in, const UpstreamRequest& r);
std::variant<std::string, Untranslatable> bedrock_chat_body_from_document(const nlohmann::json& in,
                                                                          const UpstreamRequest& r);

}  // namespace llmgate::providers
