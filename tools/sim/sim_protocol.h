// The wire formats the simulated provider speaks — OpenAI chat completions,
// Anthropic Messages and Gemini generateContent: request validation, the
// per-request plan drawn from a Profile, each vendor's error bodies, and the
// exact bytes of every event.
//
// Beast-free: sim_server.cpp does the sockets, this file decides the bytes, so
// the bytes are unit-testable.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <variant>

#include "tools/sim/sim_profile.h"

namespace llmgate::sim {

// The wire format of one request, chosen by its path.
enum class Protocol { kOpenAI, kAnthropic, kGemini, kBedrock };

// An error in OpenAI's shape: {"error": {"message", "type", "param", "code"}};
// with an empty type, in Azure's: {"error": {"code", "message"}}.
struct ApiError {
  int status = 400;
  std::string message;
  std::string type = "invalid_request_error";
  std::optional<std::string> param;
  std::optional<std::string> code;
};

std::string error_body(const ApiError& e);

// The error an injected failure (Profile::error_rate) answers with: type and
// code follow what OpenAI sends for that status (429 -> rate_limit_error, ...).
ApiError injected_error(int status);

// The 400 a provider answers a prompt too long for its context window with,
// in its own words (OpenAI's context_length_exceeded, Anthropic's "prompt is
// too long", Gemini's INVALID_ARGUMENT "input token count"). `kind`:
// 0 OpenAI, 1 Anthropic, 2 Gemini.
ApiError context_length_error(int kind, std::int64_t tokens, std::int64_t window);

// What servers that do not know stream_options answer (older Ollama, TGI...):
// a 400 naming the argument (Profile::reject_stream_options).
ApiError stream_options_refused();

// What the simulator needs from a chat completion request.
struct ChatRequest {
  std::string model;
  bool stream = false;
  bool include_usage = false;              // stream_options.include_usage
  bool has_stream_options = false;         // the request names stream_options
  std::optional<std::int64_t> max_tokens;  // min of max_tokens, max_completion_tokens
  std::int64_t prompt_tokens = 1;
  // Chat only: each prefix of the messages that ends at a message boundary
  // (a hash of the messages up to it, and its tokens), shortest first: what
  // a prompt cache (Profile::prefix_cache) keeps and matches.
  std::vector<std::pair<std::uint64_t, std::int64_t>> prefixes;
  // Whether reasoning reaches the client. OpenAI-style servers send what the
  // profile says; Anthropic only with `thinking` enabled, Gemini only with
  // thinkingConfig.includeThoughts. Otherwise it is hidden: its time passes
  // and usage counts it, as reasoning_hidden does.
  bool show_reasoning = true;
  // The request asks to continue an assistant message with this text, in
  // its protocol's way: OpenAI-compatible "prefix": true on the last
  // message (DeepSeek, Mistral) or "continue_final_message" (vLLM),
  // Anthropic's prefill (a last assistant message), Gemini's trailing model
  // turn. A last assistant message without them is answered anew, as
  // OpenAI does.
  std::optional<std::string> prefill;
};

// The 400 each protocol's servers answer a continuation with when the model
// does not allow prefill (Profile::refuse_prefill).
ApiError prefill_refused(Protocol protocol);

// Validates the body the way OpenAI does for the fields the simulator reads;
// other fields are accepted and ignored. Never throws.
std::variant<ChatRequest, ApiError> parse_chat_request(std::string_view body);

// One request's draws from its profile.
struct ChatPlan {
  bool inject_error = false;
  double ttft_ms = 0;  // request read -> first content token
  double tokens_per_second = 1;
  int completion_tokens = 0;
  bool capped = false;  // max_tokens cut the sampled length: finish_reason "length"
  bool faults = true;   // the profile's faults apply to this request (Profile::fault_rate)
  Profile::Output output = Profile::Output::kText;
  int reasoning_tokens = 0;  // the first ones of completion_tokens
  bool reasoning_hidden = false;
  std::string_view reasoning_field = "reasoning_content";
  bool annotations = false;
  std::int64_t cached_tokens = 0;  // of the prompt, from the prompt cache
  // The prompt and max_tokens are more than the profile's context window:
  // the provider's context-length 400 (context_length_error).
  bool context_exceeded = false;
  // A continuation (ChatRequest::prefill): the answer's words start this far
  // into the text an unbroken answer has, after the words the prefill
  // already holds, and carry no reasoning.
  int offset = 0;
  std::string_view finish_reason() const {
    return capped ? "length" : output == Profile::Output::kToolCall ? "tool_calls" : "stop";
  }
};

// The shape of one answer, token by token: tokens [0, reasoning) are
// reasoning, the rest the answer in the plan's output kind. A streamed and a
// non-streamed answer of the same plan say exactly the same thing.
struct Answer {
  Profile::Output output = Profile::Output::kText;
  int tokens = 0;                 // all output tokens
  int reasoning = 0;              // the first ones, reasoning
  bool reasoning_hidden = false;  // reasoning is spent, never sent (usage only)
  std::string_view reasoning_field = "reasoning_content";
  bool annotations = false;  // url_citation annotations on a text answer
  std::string call_id;       // the tool call's or the audio's id
  int offset = 0;            // ChatPlan::offset

  Answer(const ChatPlan& plan, std::string call_id);
  int answer_tokens() const { return tokens - reasoning; }
  // The text of output token `k`.
  std::string_view word(int k) const { return token_text(static_cast<std::size_t>(k + offset)); }
  std::string reasoning_text() const;  // tokens [0, reasoning)
  std::string answer_text() const;     // tokens [reasoning, tokens)
  std::string tool_arguments() const;  // {"query":"<answer text>"}
  std::string audio_data() const;      // base64, 4 characters per answer token
  // Whether output token `k` goes on the wire (hidden reasoning does not).
  bool sent(int k) const { return !(reasoning_hidden && k < reasoning); }
  // The annotations array's JSON: one url_citation over the answer.
  std::string annotations_json() const;
};

ChatPlan plan_chat(const ChatRequest& request, const Profile& profile, Rng& rng);

// Makes `plan` the continuation of `prefill`: the words of the answer the
// prefill holds (whole words, from the first) are not said again -- so the
// prefill and the continuation read as the unbroken answer would.
void continue_after(ChatPlan& plan, std::string_view prefill);

// Formats the events of one streamed completion. Each call appends exactly one
// complete event ("data: ...\n\n") to `out`; nothing allocates once `out` has
// grown to an event's size, so a stream can reuse one buffer for every token.
class ChunkFormatter {
 public:
  ChunkFormatter(std::string_view id, std::int64_t created, std::string_view model,
                 bool include_usage);

  void role(std::string& out) const;  // delta {"role":"assistant",...}
  void content(std::string& out, std::string_view text) const;
  // Output token `k` of `a`: reasoning, text, a piece of the tool call's
  // arguments (the first with its id and name) or of the audio.
  void output(std::string& out, const Answer& a, int k) const;
  void finish(std::string& out, std::string_view finish_reason) const;  // delta {}
  // delta {"annotations": [...]}, before the finish chunk.
  void annotations(std::string& out, const Answer& a) const;
  void usage(std::string& out, std::int64_t prompt_tokens, std::int64_t completion_tokens,
             std::int64_t reasoning_tokens = 0, std::int64_t cached_tokens = 0) const;
  // Azure OpenAI's first event: no choices, empty id and model, the prompt's
  // content filter results.
  static void azure_prompt_filter(std::string& out);
  static void done(std::string& out);  // data: [DONE]
  // A prefix of a content event, cut mid-way (the cut_after_tokens fault).
  static void truncated(std::string& out);
  // An event whose data is not JSON (the malformed_after_tokens fault).
  static void malformed(std::string& out);
  // The in-band error of error_after_tokens: {"error": {...}} as a data
  // event; the stream ends after it, without [DONE].
  static void error(std::string& out);

 private:
  void choice(std::string& out, std::string_view delta, std::string_view finish_reason) const;

  std::string head_;  // data: {"id":..,"object":..,"created":..,"model":..,"system_fingerprint":..,
  std::string usage_tail_;  // ,"usage":null when include_usage, else empty
};

// The body of a non-streamed chat.completion.
std::string completion_body(std::string_view id, std::int64_t created, std::string_view model,
                            std::string_view content, std::string_view finish_reason,
                            std::int64_t prompt_tokens, std::int64_t completion_tokens);
// The same for `answer` (reasoning, tool call or audio as its plan says).
std::string completion_body(std::string_view id, std::int64_t created, std::string_view model,
                            const Answer& answer, std::string_view finish_reason,
                            std::int64_t prompt_tokens, std::int64_t cached_tokens = 0);

// What OpenAI answers a streaming request for a model the organisation may
// not stream (Profile::reject_stream): a 400 naming "stream".
ApiError stream_refused();

// Appends `s` as a JSON string literal (quotes included).
void append_json_string(std::string& out, std::string_view s);

// ---------------------------------------------------------------------------
// What every protocol shares.

// Percent-decodes a path segment or query value; nullopt on a bad escape.
std::optional<std::string> percent_decode(std::string_view s);

// The error a stream that fails mid-way reports (error_after_tokens), in
// the protocol's own terms: OpenAI's server_error, Anthropic's 529
// overloaded_error, Gemini's 503 UNAVAILABLE. A non-streamed answer that
// fails is answered with it as its status and body.
ApiError midstream_error(Protocol protocol);

// The events of one streamed answer in one protocol's framing. The server
// drives it: open() with the headers, token(k) at each token's due time
// (only for tokens Answer::sent), then tail(0..tail_events()-1), each its own
// write; a fault replaces the rest with truncated() or error(), or slips in
// malformed(). Each call appends whole events, or nothing.
class EventStream {
 public:
  virtual ~EventStream() = default;
  virtual void open(std::string& out) = 0;
  virtual void token(std::string& out, int k) = 0;
  virtual int tail_events() const = 0;
  virtual void tail(std::string& out, int i) = 0;
  virtual void truncated(std::string& out) = 0;
  virtual void malformed(std::string& out) = 0;
  virtual void error(std::string& out) = 0;
};

// OpenAI's stream (ChunkFormatter's events) as an EventStream: the role chunk
// (after Azure's prompt filter event), one chunk per token, then annotations,
// finish, usage and [DONE].
class OpenAIStream final : public EventStream {
 public:
  struct Options {
    bool include_usage = false;
    bool azure = false;
    std::int64_t prompt_tokens = 1;
    std::int64_t cached_tokens = 0;
    std::string_view finish_reason = "stop";
  };
  OpenAIStream(std::string_view id, std::int64_t created, std::string_view model, Answer answer,
               Options options);
  void open(std::string& out) override;
  void token(std::string& out, int k) override;
  int tail_events() const override;
  void tail(std::string& out, int i) override;
  void truncated(std::string& out) override { ChunkFormatter::truncated(out); }
  void malformed(std::string& out) override { ChunkFormatter::malformed(out); }
  void error(std::string& out) override { ChunkFormatter::error(out); }

 private:
  ChunkFormatter format_;
  Answer answer_;
  Options options_;
};

// ---------------------------------------------------------------------------
// Anthropic Messages (POST …/messages).

// Validates a Messages request the way Anthropic does for the fields the
// simulator reads: model, messages (non-empty), max_tokens (required, >= 1),
// stream, thinking ({"type": "enabled", "budget_tokens" >= 1024 and <
// max_tokens} shows reasoning as thinking blocks; "disabled" or absent hides
// it). system counts towards the prompt; other fields are ignored. Errors are
// 400 invalid_request_error with pydantic-style messages ("max_tokens: Field
// required"). Never throws.
std::variant<ChatRequest, ApiError> parse_messages_request(std::string_view body);

// The error an injected failure answers with, typed as Anthropic does for the
// status: 400 invalid_request_error, 401 authentication_error, 403
// permission_error, 404 not_found_error, 413 request_too_large, 429
// rate_limit_error, 529 overloaded_error, other 5xx api_error.
ApiError anthropic_injected_error(int status);

// {"type":"error","error":{"type":..,"message":..},"request_id":..}.
std::string anthropic_error_body(const ApiError& e, std::string_view request_id);

// end_turn, max_tokens (capped), or tool_use (a tool_use block was produced).
std::string_view anthropic_stop_reason(const ChatPlan& plan);

// The SSE events of one streamed Message, each `event: <type>\ndata: <json>\n\n`:
// message_start and ping at once; then per content block content_block_start,
// its deltas (thinking_delta then a signature_delta; text_delta; or
// input_json_delta pieces of {"query": "<answer>"} for a tool_use block) and
// content_block_stop, token by token; then message_delta (stop_reason, usage)
// and message_stop.
class AnthropicFormatter final : public EventStream {
 public:
  AnthropicFormatter(std::string_view id, std::string_view model, Answer answer,
                     std::string_view stop_reason, std::int64_t prompt_tokens,
                     std::int64_t cached_tokens);
  void open(std::string& out) override;  // message_start, ping
  void token(std::string& out, int k) override;
  int tail_events() const override { return 2; }  // message_delta, message_stop
  void tail(std::string& out, int i) override;
  void truncated(std::string& out) override;
  void malformed(std::string& out) override;
  void error(std::string& out) override;  // event: error, overloaded_error

 private:
  void event(std::string& out, std::string_view type, std::string_view data) const;
  void usage(std::string& out, std::int64_t output_tokens, bool with_tier) const;

  std::string id_;
  std::string model_;
  Answer answer_;
  std::string stop_reason_;
  std::int64_t prompt_tokens_;
  std::int64_t cached_tokens_;
  int answer_index_;  // the answer block's index: 1 after a thinking block, else 0
};

// The body of a non-streamed Message: content [thinking?, text | tool_use],
// stop_reason, stop_sequence null, usage.
std::string anthropic_message_body(std::string_view id, std::string_view model,
                                   const Answer& answer, std::string_view stop_reason,
                                   std::int64_t prompt_tokens, std::int64_t cached_tokens);

// The signature a thinking block (and a Gemini part after thoughts) carries.
inline constexpr std::string_view kSimSignature = "c2ltdWxhdGVkIHNpZ25hdHVyZQ==";

// ---------------------------------------------------------------------------
// Gemini generateContent (POST …/models/{model}:generateContent and
// :streamGenerateContent).

// What a Gemini target names.
struct GeminiTarget {
  std::string model;               // URL-decoded, from the path
  bool stream = false;             // :streamGenerateContent
  bool sse = false;                // ?alt=sse: SSE; else a streamed JSON array
  std::optional<std::string> key;  // ?key=K, URL-decoded
};

// The Gemini call `target` (path and query) names, or nullopt when it names
// none (or its model segment is empty or badly escaped).
std::optional<GeminiTarget> parse_gemini_target(std::string_view target);

// Validates a GenerateContentRequest the way Google does for the fields the
// simulator reads: contents (non-empty array), systemInstruction (counts
// towards the prompt), generationConfig.maxOutputTokens (caps the length:
// finishReason MAX_TOKENS), generationConfig.thinkingConfig.includeThoughts
// (thought parts streamed; else hidden). Errors are 400 INVALID_ARGUMENT.
// The model and streaming come from the target. Never throws.
std::variant<ChatRequest, ApiError> parse_generate_request(std::string_view body,
                                                           const GeminiTarget& target);

// A Google API error: `status` is the HTTP code, `type` the google.rpc status
// name ("INVALID_ARGUMENT"), and `code`, when set, the ErrorInfo reason
// ("API_KEY_INVALID").
ApiError gemini_error(int status, std::string message);

// The error an injected failure answers with: 400 INVALID_ARGUMENT, 401
// UNAUTHENTICATED, 403 PERMISSION_DENIED, 404 NOT_FOUND, 429
// RESOURCE_EXHAUSTED, 500 INTERNAL, 503 UNAVAILABLE, 504 DEADLINE_EXCEEDED...
ApiError gemini_injected_error(int status);

// {"error": {"code", "message", "status"[, "details"]}}, pretty-printed as
// Google does; `retry_delay_s` adds a google.rpc.RetryInfo detail (Google's
// way of saying Retry-After), an ErrorInfo reason in `e.code` an ErrorInfo.
std::string gemini_error_body(const ApiError& e, std::optional<int> retry_delay_s = std::nullopt);

// STOP or MAX_TOKENS (capped).
std::string_view gemini_finish_reason(const ChatPlan& plan);

// The events of one streamed generateContent: one GenerateContentResponse
// per visible token (a thought part {"text", "thought": true} or a text
// part) with cumulative usageMetadata, then a last one with finishReason
// carrying an empty text part, or the whole functionCall of a tool call
// answer. With alt=sse each is `data: <json>\r\n\r\n` and the body just ends;
// without, the body is a JSON array streamed element by element (`[`,
// `\n,\r\n` between, `\n]` at the end), elements pretty-printed.
class GeminiFormatter final : public EventStream {
 public:
  GeminiFormatter(std::string_view response_id, std::string_view model, Answer answer, bool capped,
                  std::int64_t prompt_tokens, std::int64_t cached_tokens, bool sse);
  void open(std::string&) override {}
  void token(std::string& out, int k) override;
  int tail_events() const override { return sse_ ? 1 : 2; }  // last response[, "\n]"]
  void tail(std::string& out, int i) override;
  void truncated(std::string& out) override;
  void malformed(std::string& out) override;
  void error(std::string& out) override;  // {"error": {... UNAVAILABLE}}, then the end
  // The whole stream of a safety-blocked prompt: one response with
  // promptFeedback.blockReason SAFETY and no candidates.
  void blocked(std::string& out);

 private:
  void frame(std::string& out, std::string_view compact_json);

  std::string response_id_;
  std::string model_;
  Answer answer_;
  bool capped_;
  std::int64_t prompt_tokens_;
  std::int64_t cached_tokens_;
  bool sse_;
  bool first_ = true;  // JSON array framing: no element written yet
};

// The body of a non-streamed generateContent: one GenerateContentResponse with
// every part (thought?, text | functionCall), finishReason and usageMetadata.
std::string gemini_response_body(std::string_view response_id, std::string_view model,
                                 const Answer& answer, bool capped, std::int64_t prompt_tokens,
                                 std::int64_t cached_tokens);
// The body of a safety-blocked prompt (Profile::safety_block).
std::string gemini_blocked_body(std::string_view response_id, std::string_view model,
                                std::int64_t prompt_tokens);

}  // namespace llmgate::sim
