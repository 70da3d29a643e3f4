// Admission of a POST /v1/messages body (Anthropic's Messages API): checked
// as Anthropic checks it (its words, "max_tokens: Field required"), kept as
// the client sent it for Anthropic deployments, and translated to an OpenAI
// chat document when another deployment is tried -- not before: a coding
// agent's request to an Anthropic deployment never pays for a translation
// (routing reads the model, stream, limits, prompt size and prefixes from
// the client's document). docs/providers.md, "Anthropic clients".
// Beast-free.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

#include "gateway/apis/chat_request.h"
#include "gateway/http/api_error.h"

namespace llmgate::gateway {

// The top-level fields passed as they are, under their chat names.
inline constexpr std::pair<std::string_view, std::string_view> kMessagesRenamed[] = {
    {"model", "model"},
    {"stream", "stream"},
    {"max_tokens", "max_completion_tokens"},
    {"temperature", "temperature"},
    {"top_p", "top_p"},
    {"top_k", "top_k"},
    {"stop_sequences", "stop"},
};
// Translated otherwise, or not carried (they change nothing a chat upstream
// says). Every other field is untranslated.
inline constexpr std::string_view kMessagesHandled[] = {
    "system", "messages", "tools", "tool_choice", "thinking", "metadata", "service_tier", "route"};

// What names the first thing chat cannot say: `what` ("the field \"x\""),
// at `param`.
ChatRequest::Untranslated messages_untranslated(std::string param, std::string_view what);

struct MessagesTranslation {
  std::string chat;  // the chat document's text (model, messages, max_completion_tokens, ...)
  // The first thing chat cannot say (a server tool, a document, a field
  // Anthropic alone has): only Anthropic deployments can serve the request.
  std::optional<ChatRequest::Untranslated> untranslated;
  // A thinking block without a signature is in the history.
  bool unsigned_thinking = false;
  // What `thinking` asks for in chat's words (low, medium, high), or empty.
  std::string_view reasoning_effort;
};

// How far a translation goes: kCheck makes Anthropic's checks and finds what
// chat cannot say without writing the chat document (`chat` stays empty).
enum class Translate { kCheck, kWrite };

// `in`: the client's document, indexed. A 400 (Anthropic's words) when Anthropic
// would refuse it; else its translation. Thinking blocks in the history are
// not translated (another provider cannot take Anthropic's signed reasoning)
// and cache_control marks are not (a caching hint; OpenAI-compatible
// servers and Gemini cache by prefix without them): neither changes what
// the answer says.
// The chat document carries the client's own text for every string and
// every value it passes on (a tool call's arguments: its input, compacted).
std::variant<MessagesTranslation, ApiError> translate_messages_request(
    const providers::RequestBody& in, Translate mode = Translate::kWrite);

// Admission: the request checked (translate_messages_request's kCheck), kept
// in `native`, with what routing reads; `body` is empty until
// translate_for_chat writes it (chat_pending) -- unless `cfg` says no
// deployment of its model is Anthropic's: then the translation is written
// in the walk that checks it (a second walk for it would cost as much).
std::variant<ChatRequest, ApiError> parse_messages_request(std::string_view content_type,
                                                           std::string body,
                                                           const config::Config* cfg = nullptr);

// The chat translation of an admitted Messages request into `req.body`, the
// first time a deployment other than Anthropic's is tried (a no-op after).
// An error when the translation is not an admissible chat body (one level
// deeper than the client's document: a tool schema nested to the limit),
// each time it is asked: only Anthropic's deployments can take it.
std::optional<ApiError> translate_for_chat(ChatRequest& req);

}  // namespace llmgate::gateway
