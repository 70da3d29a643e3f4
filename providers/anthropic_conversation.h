// A chat request's conversation written as Anthropic's `system` and
// `messages`, as text from the client's indexed body (RequestBody): the
// translation anthropic_protocol.cpp makes on a parsed document
// (translate_messages), without the document. Strings and a data URL's
// parts keep the client's text; cache_control marks and a tool call's
// arguments (a JSON text inside a string) are written from their own small
// documents, as the document's translation writes them (the client's text
// of an object could hold a key twice). A chat client's 32 KiB
// conversation to an Anthropic deployment cost ~6.3 million instructions
// as a parse, a translated document and its serialisation.
//
// The writer answers only what it answers exactly as the document's
// translation does: anything that translation would refuse, or that the
// writer does not handle (an escaped image URL, a message-level
// cache_control over a part's own), makes it decline, and the caller
// translates the document instead -- which refuses it with its own words,
// or translates it. fuzz_chat_request holds the two equal on every input
// the writer answers. Beast-free.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <variant>

#include "providers/request_body.h"
#include "providers/upstream_protocol.h"

namespace llmgate::providers {

// Appends `"messages":[...]`, followed by `,"system":...` when the
// conversation has system text, for the request's `messages` member. False
// when it declines (then `out` holds a partial text: the caller discards
// it).
bool write_anthropic_conversation(const RequestBody& in, std::string& out);

// The Anthropic protocol's upstream body for a chat request
// (anthropic_protocol().body() is the first, else the second):
// - its conversation written as text, the few other fields translated from
//   their own documents; nullopt when the writer declines;
std::optional<std::variant<std::string, Untranslatable>> anthropic_chat_body_text(
    const RequestBody& in, const UpstreamRequest& r);
// - the whole request translated as a document (the reference the first is
//   held to).
std::variant<std::string, Untranslatable> anthropic_chat_body_from_document(
    const nlohmann::json& in, const UpstreamRequest& r);

}  // namespace llmgate::providers
