// The OpenAI chat completions wire format as the simulated provider speaks it:
// request validation, the per-request plan drawn from a Profile, OpenAI-shaped
// error bodies, and the exact bytes of each server-sent event.
//
// Beast-free: sim_server.cpp does the sockets, this file decides the bytes, so
// the bytes are unit-testable.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>

#include "tools/sim/sim_profile.h"

namespace llmgate::sim {

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
};

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

  Answer(const ChatPlan& plan, std::string call_id);
  int answer_tokens() const { return tokens - reasoning; }
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

}  // namespace llmgate::sim
