// The OpenAI API beyond chat, as the simulator serves it: the Responses API
// (POST …/responses: typed events in OpenAI's order), legacy completions
// (POST …/completions: text_completion chunks) and embeddings
// (POST …/embeddings: vectors deterministic by input). Beast-free.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <variant>
#include <vector>

#include "tools/sim/sim_protocol.h"

namespace llmgate::sim {

// Which OpenAI endpoint an exchange is for.
enum class OpenAiApi { kChat, kResponses, kCompletions, kEmbeddings };

// POST …/responses: model, input (a string or a non-empty array; counts
// towards the prompt), stream, max_output_tokens (caps the length: status
// "incomplete"), reasoning.summary (reasoning streamed as summary text;
// else hidden). Errors as OpenAI's. Never throws.
std::variant<ChatRequest, ApiError> parse_responses_request(std::string_view body);

// What POST …/responses asks for beyond what ChatRequest carries: whether
// the provider keeps the response (store, OpenAI's default true), whether it
// runs in the background (the POST answers at once, status "queued"), and
// the input as items (a string input is one user message): a JSON array.
// For a body parse_responses_request accepted. Never throws.
struct ResponsesOptions {
  bool store = true;
  bool background = false;
  std::string input_items = "[]";
};
ResponsesOptions responses_options(std::string_view body);

// The responses the simulator stored, for GET …/responses/{id} (?stream=true
// replays it as events), GET …/{id}/input_items, DELETE …/{id} and POST
// …/{id}/cancel. A background response is "queued", then "in_progress"
// until `ready`, then what it finished as. Bounded (the oldest go first).
// Thread-safe.
class ResponseStore {
 public:
  static constexpr std::size_t kCapacity = 10'000;
  using Clock = std::chrono::steady_clock;

  struct Stored {
    std::string body;         // the finished Response object (JSON)
    std::string input_items;  // a JSON array
    Clock::time_point ready;  // when a background response finishes
    bool background = false;
    bool cancelled = false;
  };
  void put(const std::string& id, Stored s);

  struct Answer {
    int status = 200;
    std::string body;
    bool event_stream = false;
  };
  // What OpenAI answers to `method` ("GET", "DELETE", "POST") on `part`
  // ("", "/input_items", "/cancel") of `id`, at `now`; `stream` a GET's
  // ?stream=true. 404 for an id it does not have.
  Answer answer(std::string_view method, const std::string& id, std::string_view part, bool stream,
                Clock::time_point now);

 private:
  std::mutex mu_;
  std::unordered_map<std::string, Stored> stored_;
  std::deque<std::string> order_;  // oldest first
};

// A Response object as a background POST answers it ("queued", no output).
std::string queued_response(const std::string& finished_body);

// POST …/completions: model, prompt (a string or a non-empty array), stream,
// stream_options.include_usage, max_tokens. Never throws.
std::variant<ChatRequest, ApiError> parse_completions_request(std::string_view body);

// POST …/embeddings.
struct EmbeddingsRequest {
  std::string model;
  std::vector<std::string> inputs;  // each input as text (token arrays as their JSON)
  int dimensions = 0;               // 0: the profile's
  bool base64 = false;              // encoding_format "base64"
  std::int64_t prompt_tokens = 0;
};
std::variant<EmbeddingsRequest, ApiError> parse_embeddings_request(std::string_view body);

// {"object":"list","data":[{"object":"embedding","index":i,"embedding":...}],
// "model","usage"}: unit vectors of `dimensions` floats seeded by each input
// (the same input gives the same vector), base64 as little-endian float32.
std::string embeddings_body(const EmbeddingsRequest& r, int dimensions);

// The events of one streamed Response, each `event: <type>\ndata: <json>\n\n`
// with a sequence_number: response.created and response.in_progress at
// once; a reasoning item (summary text deltas) when reasoning is shown; then
// a message item (output_text deltas) or a function_call item
// (function_call_arguments deltas), each opened with output_item.added
// (and content_part.added) at its first token and closed with its .done
// events; then response.completed (response.incomplete when capped) with
// the whole response and its usage.
class ResponsesStream final : public EventStream {
 public:
  ResponsesStream(std::string_view id, std::int64_t created, std::string_view model, Answer answer,
                  bool capped, std::int64_t prompt_tokens, std::int64_t cached_tokens);
  void open(std::string& out) override;
  void token(std::string& out, int k) override;
  int tail_events() const override { return 2; }  // the last item's .done events; completed
  void tail(std::string& out, int i) override;
  void truncated(std::string& out) override;
  void malformed(std::string& out) override;
  void error(std::string& out) override;  // event: error (server_error)

 private:
  void event(std::string& out, std::string_view type, std::string fields_json);
  void close_reasoning(std::string& out);

  std::string id_;
  std::int64_t created_;
  std::string model_;
  Answer answer_;
  bool capped_;
  std::int64_t prompt_tokens_;
  std::int64_t cached_tokens_;
  int sequence_ = 0;
  bool reasoning_open_ = false;
  bool answer_open_ = false;
};

// The whole Response object (a non-streamed answer, and response.completed's).
std::string responses_body(std::string_view id, std::int64_t created, std::string_view model,
                           const Answer& answer, bool capped, std::int64_t prompt_tokens,
                           std::int64_t cached_tokens);

// Legacy completions: one text_completion chunk per token, then the finish
// chunk, the usage chunk (include_usage) and [DONE].
class CompletionsStream final : public EventStream {
 public:
  CompletionsStream(std::string_view id, std::int64_t created, std::string_view model,
                    Answer answer, std::string_view finish_reason, bool include_usage,
                    std::int64_t prompt_tokens);
  void open(std::string&) override {}
  void token(std::string& out, int k) override;
  int tail_events() const override { return include_usage_ ? 3 : 2; }
  void tail(std::string& out, int i) override;
  void truncated(std::string& out) override { ChunkFormatter::truncated(out); }
  void malformed(std::string& out) override { ChunkFormatter::malformed(out); }
  void error(std::string& out) override { ChunkFormatter::error(out); }

 private:
  std::string chunk(std::string_view text, std::string_view finish_reason) const;

  std::string id_;
  std::int64_t created_;
  std::string model_;
  Answer answer_;
  std::string finish_reason_;
  bool include_usage_;
  std::int64_t prompt_tokens_;
};

std::string completions_body(std::string_view id, std::int64_t created, std::string_view model,
                             const Answer& answer, std::string_view finish_reason,
                             std::int64_t prompt_tokens);

}  // namespace llmgate::sim
