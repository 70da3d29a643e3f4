// Admission of a POST /v1/chat/completions body: parse it just enough to route
// it, reject what is wrong with an OpenAI-shaped 400, and build the body sent
// upstream. Fields the gateway does not need pass through untouched.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <variant>

#include "config/config.h"
#include "gateway/http/api_error.h"
#include "providers/prompt_prefix.h"
#include "providers/prompt_size.h"
#include "providers/request_body.h"

namespace llmgate::gateway {

struct ChatRequest {
  providers::RequestBody body;             // the client's document (text, indexed)
  std::string model;                       // the public model name
  bool stream = false;                     // the client wants SSE
  bool include_usage = false;              // the client asked for the usage chunk
  std::optional<std::int64_t> max_tokens;  // max_completion_tokens, else max_tokens
  nlohmann::json route;                    // the `route` override (removed from body), or null
  // `reasoning_effort` (or the Responses-style `reasoning.effort`) when it is
  // one the statistics keep apart (kReasoningEfforts), else empty: what the
  // request is measured as (routing::stats_key).
  std::string reasoning_effort;
  // The client API it came through (the endpoint).
  config::Operation operation = config::Operation::kChat;
  // Responses API: the stored response it continues (the conversation lives
  // with the provider that stored it), and whether it runs in the background.
  std::string previous_response_id;
  bool background = false;
  // The prompt's size before any provider counted it (admission measures
  // the body: docs/routing.md, "Prompt size"); each deployment turns it
  // into its own tokens.
  providers::PromptSize prompt;
  // Prompt-cache affinity (docs/routing.md): the prompt's prefixes (chat
  // and Responses), and its conversation's explicit key -- x-llmgate-session,
  // else prompt_cache_key -- hashed (0: none). (Not `user`: an end user's
  // conversations are many, and what they share -- the system prompt -- the
  // prefixes find.)
  providers::PromptPrefixes prefixes;
  std::uint64_t conversation_key = 0;
  // Anthropic's Messages API (POST /v1/messages): the client's own
  // document, sent as it came (the deployment's model put in) to Anthropic
  // deployments -- `body` above is its translation to chat, for the others,
  // written when one is tried (chat_pending) -- and the first thing that
  // translation could not say: deployments that would need it are passed
  // over, naming it.
  std::optional<providers::RequestBody> native;
  struct Untranslated {
    std::string message;
    std::string param;
  };
  std::optional<Untranslated> untranslated;
  // Its history holds a thinking block without a signature (what a
  // translated answer gave): left out of what Anthropic deployments get.
  bool native_unsigned_thinking = false;
  // `body` (the chat translation of `native`) is not written yet: it is
  // when a deployment other than Anthropic's is tried (translate_for_chat).
  bool chat_pending = false;
};

// The efforts measured apart, OpenAI's names. Any other value is measured
// with the deployment's own traffic (the upstream judges it).
inline constexpr std::string_view kReasoningEfforts[] = {"none",   "minimal", "low",
                                                         "medium", "high",    "xhigh"};

// A request body that must be a JSON object (`content_type`: the
// Content-Type header's value; empty reads as JSON): indexed into `out`, or
// the 400/415 that says why not.
std::optional<ApiError> parse_json_body(std::string_view content_type, std::string body,
                                        providers::RequestBody& out);

// `content_type` is the request's Content-Type header value.
std::variant<ChatRequest, ApiError> parse_chat_request(std::string_view content_type,
                                                       std::string body);

// POST /v1/responses, /v1/embeddings and /v1/completions (legacy): the same
// admission for their own required fields (`input`, `prompt`).
std::variant<ChatRequest, ApiError> parse_responses_request(std::string_view content_type,
                                                            std::string body);
std::variant<ChatRequest, ApiError> parse_embeddings_request(std::string_view content_type,
                                                             std::string body);
std::variant<ChatRequest, ApiError> parse_completions_request(std::string_view content_type,
                                                              std::string body);

// The upstream body is the upstream protocol's to build
// (providers::UpstreamProtocol::body): the client's own `stream` and
// `include_usage` stay in the parsed fields above.

}  // namespace llmgate::gateway
