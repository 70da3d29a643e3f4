// A chat request's conversation written as Gemini's `contents` and
// `systemInstruction`, as text from the client's indexed body (RequestBody):
// the translation gemini_protocol.cpp makes on a parsed document
// (add_messages), without the document -- as anthropic_conversation.h does
// for Anthropic. Strings and a data URL's parts keep the client's text; a
// call's arguments and a tool's result are written from their own
// documents, as the document's translation writes them.
//
// The writer answers only what it answers exactly as the document's
// translation does; anything that translation would refuse, or that the
// writer does not handle (an image URL with an escape), makes it decline,
// and the caller translates the document instead.
// fuzz_chat_request holds the two equal on every input the writer answers.
// Beast-free.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <variant>

#include "providers/request_body.h"
#include "providers/upstream_protocol.h"

namespace llmgate::providers {

// Appends `"contents":[...]`, followed by `,"systemInstruction":{...}` when
// the conversation has system text, for the request's `messages` member.
// False when it declines (`out` then holds a partial text).
bool write_gemini_conversation(const RequestBody& in, std::string& out);

// A remote image's media type from its URL's extension (image/jpeg when it
// names none Gemini knows).
std::string gemini_image_type(std::string_view url);

// The Gemini protocol's upstream body for a chat request (the protocol's
// body() is the first, else the second): its conversation written as text,
// the other fields translated from their own documents (nullopt when the
// writer declines); the whole request translated as a document.
std::optional<std::variant<std::string, Untranslatable>> gemini_chat_body_text(
    const RequestBody& in, const UpstreamRequest& r);
std::variant<std::string, Untranslatable> gemini_chat_body_from_document(const nlohmann::json& in,
                                                                         const UpstreamRequest& r);

}  // namespace llmgate::providers
