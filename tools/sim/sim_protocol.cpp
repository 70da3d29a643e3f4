#include "tools/sim/sim_protocol.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <nlohmann/json.hpp>

namespace llmgate::sim {
namespace {

using nlohmann::json;

ApiError invalid(std::string message, std::optional<std::string> param,
                 std::optional<std::string> code) {
  return ApiError{400, std::move(message), "invalid_request_error", std::move(param),
                  std::move(code)};
}

void append_int(std::string& out, std::int64_t v) {
  char buf[24];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);
  out.append(buf, end);
}

// The piece of a tool call's arguments that output token `k` carries: the
// pieces concatenate to {"query":"<answer text>"} in every protocol.
std::string tool_argument_piece(const Answer& a, int k) {
  const int j = k - a.reasoning;  // the answer's own token index
  std::string piece = j == 0 ? "{\"query\":\"" : "";
  piece += a.word(k);
  if (j == a.answer_tokens() - 1) piece += "\"}";
  return piece;
}

// The text of a message's content: a string, or its text parts joined
// ({"type": "text", "text"} blocks; Gemini's {"text"} parts).
std::string content_text(const json& content) {
  if (content.is_string()) return content.get<std::string>();
  std::string s;
  if (!content.is_array()) return s;
  for (const auto& part : content) {
    if (!part.is_object()) continue;
    if (auto t = part.find("text"); t != part.end() && t->is_string())
      s += t->get_ref<const std::string&>();
  }
  return s;
}

// Reads max_tokens or max_completion_tokens; null means absent.
std::optional<ApiError> read_token_cap(const json& body, const char* key,
                                       std::optional<std::int64_t>& cap) {
  auto it = body.find(key);
  if (it == body.end() || it->is_null()) return std::nullopt;
  if (!it->is_number_integer() || it->get<std::int64_t>() < 1) {
    return invalid(std::string("Invalid '") + key + "': expected an integer >= 1.", key,
                   "invalid_value");
  }
  const auto v = it->get<std::int64_t>();
  cap = cap ? std::min(*cap, v) : v;
  return std::nullopt;
}

}  // namespace

void append_json_string(std::string& out, std::string_view s) {
  static constexpr char kHex[] = "0123456789abcdef";
  out += '"';
  for (const char c : s) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          out += "\\u00";
          out += kHex[(c >> 4) & 0xf];
          out += kHex[c & 0xf];
        } else {
          out += c;  // UTF-8 passes through unchanged
        }
    }
  }
  out += '"';
}

std::string error_body(const ApiError& e) {
  using ojson = nlohmann::ordered_json;  // OpenAI's field order
  if (e.type.empty()) {                  // Azure's own errors: {"code", "message"}
    return ojson{{"error", {{"code", e.code.value_or("")}, {"message", e.message}}}}.dump(
        -1, ' ', false, ojson::error_handler_t::replace);
  }
  ojson error = {
      {"message", e.message},
      {"type", e.type},
      {"param", e.param ? ojson(*e.param) : ojson(nullptr)},
      {"code", e.code ? ojson(*e.code) : ojson(nullptr)},
  };
  return ojson{{"error", std::move(error)}}.dump(-1, ' ', false, ojson::error_handler_t::replace);
}

ApiError context_length_error(int kind, std::int64_t tokens, std::int64_t window) {
  const std::string n = std::to_string(tokens), w = std::to_string(window);
  switch (kind) {
    case 1:
      return ApiError{400, "prompt is too long: " + n + " tokens > " + w + " maximum",
                      "invalid_request_error", std::nullopt, std::nullopt};
    case 2:
      return ApiError{400,
                      "The input token count (" + n +
                          ") exceeds the maximum number of tokens allowed (" + w + ").",
                      "INVALID_ARGUMENT", std::nullopt, std::nullopt};
    default:
      return ApiError{400,
                      "This model's maximum context length is " + w +
                          " tokens. However, your messages resulted in " + n +
                          " tokens. Please reduce the length of the messages.",
                      "invalid_request_error", std::string("messages"),
                      std::string("context_length_exceeded")};
  }
}

ApiError injected_error(int status) {
  ApiError e;
  e.status = status;
  if (status == 429) {
    e.type = "rate_limit_error";
    e.code = "rate_limit_exceeded";
    e.message = "Rate limit reached (simulated). Please try again later.";
  } else if (status >= 500) {
    e.type = "server_error";
    e.code = status == 503 ? "service_unavailable" : "server_error";
    e.message = "The server had an error while processing your request (simulated).";
  } else if (status == 401) {
    e.type = "invalid_request_error";
    e.code = "invalid_api_key";
    e.message = "Incorrect API key provided (simulated).";
  } else if (status == 403) {
    e.type = "permission_error";
    e.message = "You are not allowed to make this request (simulated).";
  } else if (status == 404) {
    e.type = "invalid_request_error";
    e.code = "model_not_found";
    e.message = "The model does not exist or you do not have access to it (simulated).";
  } else {
    e.type = "invalid_request_error";
    e.message = "Your request was rejected (simulated).";
  }
  return e;
}

std::variant<ChatRequest, ApiError> parse_chat_request(std::string_view body) {
  const json j = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) {
    return invalid("We could not parse the JSON body of your request.", std::nullopt, std::nullopt);
  }
  if (!j.is_object()) {
    return invalid("The request body must be a JSON object.", std::nullopt, std::nullopt);
  }

  ChatRequest r;
  auto model = j.find("model");
  if (model == j.end() || !model->is_string() || model->get_ref<const std::string&>().empty()) {
    return invalid("You must provide a model parameter.", "model",
                   model == j.end() ? "missing_required_parameter" : "invalid_type");
  }
  r.model = model->get<std::string>();

  auto messages = j.find("messages");
  if (messages == j.end()) {
    return invalid("Missing required parameter: 'messages'.", "messages",
                   "missing_required_parameter");
  }
  if (!messages->is_array()) {
    return invalid("Invalid type for 'messages': expected an array.", "messages", "invalid_type");
  }
  if (messages->empty()) {
    return invalid("Invalid 'messages': empty array. Expected an array with minimum length 1.",
                   "messages", "empty_array");
  }
  r.prompt_tokens = estimate_prompt_tokens(*messages);
  // Each message's canonical text (nlohmann sorts keys) extends the hash of
  // the prefix before it: the simulator's own fingerprint, not the gateway's.
  {
    std::uint64_t h = 1469598103934665603ULL;
    std::size_t chars = 0;  // as estimate_prompt_tokens counts them
    for (const auto& m : *messages) {
      for (unsigned char ch : m.dump()) h = (h ^ ch) * 1099511628211ULL;
      h = (h ^ 0xff) * 1099511628211ULL;  // the boundary
      if (m.is_object()) {
        if (auto content = m.find("content"); content != m.end()) chars += content_chars(*content);
      }
      r.prefixes.emplace_back(h, tokens_for_chars(chars));
    }
  }

  if (auto stream = j.find("stream"); stream != j.end() && !stream->is_null()) {
    if (!stream->is_boolean()) {
      return invalid("Invalid type for 'stream': expected a boolean.", "stream", "invalid_type");
    }
    r.stream = stream->get<bool>();
  }
  if (auto options = j.find("stream_options"); options != j.end() && !options->is_null()) {
    if (!options->is_object()) {
      return invalid("Invalid type for 'stream_options': expected an object.", "stream_options",
                     "invalid_type");
    }
    r.has_stream_options = true;
    if (auto usage = options->find("include_usage"); usage != options->end()) {
      if (!usage->is_boolean()) {
        return invalid("Invalid type for 'stream_options.include_usage': expected a boolean.",
                       "stream_options.include_usage", "invalid_type");
      }
      r.include_usage = usage->get<bool>();
    }
  }
  if (auto e = read_token_cap(j, "max_tokens", r.max_tokens)) return *e;
  if (auto e = read_token_cap(j, "max_completion_tokens", r.max_tokens)) return *e;

  // Continuing the last assistant message: DeepSeek's and Mistral's
  // "prefix": true on it, or vLLM's continue_final_message (which needs
  // add_generation_prompt off: vLLM's default is on, and both is an error).
  const json& last = messages->back();
  const bool assistant_last =
      last.is_object() && last.contains("role") && last["role"] == "assistant";
  bool continue_final = false;
  if (auto c = j.find("continue_final_message"); c != j.end() && !c->is_null()) {
    if (!c->is_boolean()) {
      return invalid("Invalid type for 'continue_final_message': expected a boolean.",
                     "continue_final_message", "invalid_type");
    }
    continue_final = c->get<bool>();
  }
  if (continue_final) {
    const auto g = j.find("add_generation_prompt");
    if (g == j.end() || !g->is_boolean() || g->get<bool>()) {
      return invalid(
          "Cannot set both `continue_final_message` and `add_generation_prompt` to True.",
          "continue_final_message", std::nullopt);
    }
    if (!assistant_last) {
      return invalid(
          "continue_final_message is set but the final message is not from the "
          "assistant.",
          "messages", std::nullopt);
    }
  }
  const bool prefix = assistant_last && last.contains("prefix") && last["prefix"] == true;
  if (continue_final || prefix) {
    const auto content = last.find("content");
    r.prefill = content == last.end() ? std::string() : content_text(*content);
  }
  return r;
}

void continue_after(ChatPlan& plan, std::string_view prefill) {
  // The words of the unbroken answer after its reasoning, as far as the
  // prefill holds them whole.
  const int first = std::min(plan.reasoning_tokens, plan.completion_tokens);
  int matched = 0;
  std::size_t at = 0;
  while (first + matched < plan.completion_tokens) {
    const std::string_view w = token_text(static_cast<std::size_t>(first + matched));
    if (prefill.substr(at, w.size()) != w) break;
    at += w.size();
    ++matched;
  }
  plan.offset = first + matched;
  plan.completion_tokens -= plan.offset;
  plan.reasoning_tokens = 0;
}

ApiError stream_options_refused() {
  return ApiError{400, "Unrecognized request argument supplied: stream_options",
                  "invalid_request_error", std::string("stream_options"), std::nullopt};
}

ApiError stream_refused() {
  return ApiError{400,
                  "Your organization must be verified to stream this model. Please go to "
                  "https://platform.openai.com/settings/organization/general and click on Verify "
                  "Organization. (simulated)",
                  "invalid_request_error", std::string("stream"), std::string("unsupported_value")};
}

ChatPlan plan_chat(const ChatRequest& request, const Profile& profile, Rng& rng) {
  ChatPlan plan;
  // Fixed draw order (error, ttft, tps, length, faults) keeps a seeded run
  // reproducible.
  plan.inject_error = sample_error(profile, rng);
  plan.ttft_ms = sample_ttft_ms(profile, rng);
  plan.tokens_per_second = sample_tokens_per_second(profile, rng);
  plan.completion_tokens = sample_output_tokens(profile, rng);
  plan.faults = sample_faults(profile, rng);
  // Reasoning comes on top of the answer and counts against max_tokens, as
  // max_completion_tokens does for OpenAI's reasoning models.
  plan.output = profile.output;
  plan.reasoning_tokens = profile.reasoning_tokens;
  plan.reasoning_hidden = profile.reasoning_hidden || !request.show_reasoning;
  plan.reasoning_field = profile.reasoning_field == "reasoning" ? "reasoning" : "reasoning_content";
  plan.annotations = profile.annotations && profile.output == Profile::Output::kText;
  plan.cached_tokens = std::min<std::int64_t>(profile.cached_tokens, request.prompt_tokens);
  // Prefill: the prompt's tokens not read from the cache.
  plan.ttft_ms += profile.prefill_ms_per_1k_tokens *
                  static_cast<double>(request.prompt_tokens - plan.cached_tokens) / 1000;
  plan.context_exceeded =
      profile.context_window > 0 &&
      request.prompt_tokens + request.max_tokens.value_or(0) > profile.context_window;
  plan.completion_tokens += profile.reasoning_tokens;
  if (request.max_tokens && plan.completion_tokens > *request.max_tokens) {
    plan.completion_tokens = static_cast<int>(*request.max_tokens);
    plan.capped = true;
  }
  return plan;
}

ChunkFormatter::ChunkFormatter(std::string_view id, std::int64_t created, std::string_view model,
                               bool include_usage) {
  head_ = "data: {\"id\":";
  append_json_string(head_, id);
  head_ += ",\"object\":\"chat.completion.chunk\",\"created\":";
  append_int(head_, created);
  head_ += ",\"model\":";
  append_json_string(head_, model);
  head_ += ",\"system_fingerprint\":\"fp_sim\",";
  if (include_usage) usage_tail_ = ",\"usage\":null";
}

void ChunkFormatter::choice(std::string& out, std::string_view delta,
                            std::string_view finish_reason) const {
  out += head_;
  out += "\"choices\":[{\"index\":0,\"delta\":";
  out += delta;
  out += ",\"logprobs\":null,\"finish_reason\":";
  out += finish_reason;
  out += "}]";
  out += usage_tail_;
  out += "}\n\n";
}

void ChunkFormatter::role(std::string& out) const {
  choice(out, R"({"role":"assistant","content":""})", "null");
}

void ChunkFormatter::content(std::string& out, std::string_view text) const {
  out += head_;
  out += "\"choices\":[{\"index\":0,\"delta\":{\"content\":";
  append_json_string(out, text);
  out += "},\"logprobs\":null,\"finish_reason\":null}]";
  out += usage_tail_;
  out += "}\n\n";
}

// The audio of one answer token, base64 (what its stream and its
// non-streamed answer both carry, token by token).
constexpr std::string_view kAudioPerToken = "UklG";

void ChunkFormatter::output(std::string& out, const Answer& a, int k) const {
  std::string delta;
  const int j = k - a.reasoning;  // the answer's own token index
  if (j < 0) {
    delta = "{\"";
    delta += a.reasoning_field;
    delta += "\":";
    append_json_string(delta, a.word(k));
    delta += "}";
  } else if (a.output == Profile::Output::kText) {
    content(out, a.word(k));
    return;
  } else if (a.output == Profile::Output::kToolCall) {
    const std::string piece = tool_argument_piece(a, k);
    delta = "{\"tool_calls\":[{\"index\":0,";
    if (j == 0) {
      delta += "\"id\":";
      append_json_string(delta, a.call_id);
      delta += ",\"type\":\"function\",\"function\":{\"name\":\"lookup\",\"arguments\":";
    } else {
      delta += "\"function\":{\"arguments\":";
    }
    append_json_string(delta, piece);
    delta += "}}]}";
  } else {  // audio: 4 base64 characters and a word of transcript per token
    delta = "{\"audio\":{";
    if (j == 0) {
      delta += "\"id\":";
      append_json_string(delta, a.call_id);
      delta += ",";
    }
    delta += "\"data\":";
    append_json_string(delta, kAudioPerToken);
    delta += ",\"transcript\":";
    append_json_string(delta, a.word(k));
    delta += "}}";
  }
  choice(out, delta, "null");
}

void ChunkFormatter::finish(std::string& out, std::string_view finish_reason) const {
  std::string_view quoted = finish_reason == "length"       ? "\"length\""
                            : finish_reason == "tool_calls" ? "\"tool_calls\""
                                                            : "\"stop\"";
  choice(out, "{}", quoted);
}

void ChunkFormatter::annotations(std::string& out, const Answer& a) const {
  choice(out, "{\"annotations\":" + a.annotations_json() + "}", "null");
}

void ChunkFormatter::usage(std::string& out, std::int64_t prompt_tokens,
                           std::int64_t completion_tokens, std::int64_t reasoning_tokens,
                           std::int64_t cached_tokens) const {
  out += head_;
  out += "\"choices\":[],\"usage\":{\"prompt_tokens\":";
  append_int(out, prompt_tokens);
  out += ",\"completion_tokens\":";
  append_int(out, completion_tokens);
  out += ",\"total_tokens\":";
  append_int(out, prompt_tokens + completion_tokens);
  if (cached_tokens > 0) {
    out += ",\"prompt_tokens_details\":{\"cached_tokens\":";
    append_int(out, cached_tokens);
    out += "}";
  }
  if (reasoning_tokens > 0) {
    out += ",\"completion_tokens_details\":{\"reasoning_tokens\":";
    append_int(out, reasoning_tokens);
    out += "}";
  }
  out += "}}\n\n";
}

void ChunkFormatter::azure_prompt_filter(std::string& out) {
  out +=
      "data: {\"choices\":[],\"created\":0,\"id\":\"\",\"model\":\"\",\"object\":\"\","
      "\"prompt_filter_results\":[{\"prompt_index\":0,\"content_filter_results\":{"
      "\"hate\":{\"filtered\":false,\"severity\":\"safe\"},"
      "\"self_harm\":{\"filtered\":false,\"severity\":\"safe\"},"
      "\"sexual\":{\"filtered\":false,\"severity\":\"safe\"},"
      "\"violence\":{\"filtered\":false,\"severity\":\"safe\"}}}]}\n\n";
}

Answer::Answer(const ChatPlan& plan, std::string id)
    : output(plan.output),
      tokens(plan.completion_tokens),
      reasoning(std::min(plan.reasoning_tokens, plan.completion_tokens)),
      reasoning_hidden(plan.reasoning_hidden),
      reasoning_field(plan.reasoning_field),
      annotations(plan.annotations),
      call_id(std::move(id)),
      offset(plan.offset) {}

std::string Answer::annotations_json() const {
  const std::string text = answer_text();
  std::string out = "[{\"type\":\"url_citation\",\"url_citation\":{\"start_index\":0,";
  out += "\"end_index\":";
  append_int(out, static_cast<std::int64_t>(text.size()));
  out += ",\"title\":\"Lorem ipsum (simulated)\",\"url\":\"https://example.com/lorem\"}}]";
  return out;
}

std::string Answer::reasoning_text() const {
  std::string s;
  for (int k = 0; k < reasoning; ++k) s += word(k);
  return s;
}

std::string Answer::answer_text() const {
  std::string s;
  for (int k = reasoning; k < tokens; ++k) s += word(k);
  return s;
}

std::string Answer::tool_arguments() const { return "{\"query\":\"" + answer_text() + "\"}"; }

std::string Answer::audio_data() const {
  std::string s;
  for (int k = reasoning; k < tokens; ++k) s += kAudioPerToken;
  return s;
}

void ChunkFormatter::done(std::string& out) { out += "data: [DONE]\n\n"; }

void ChunkFormatter::truncated(std::string& out) { out += "data: {\"id\":\"chatcm"; }

void ChunkFormatter::malformed(std::string& out) { out += "data: {not json\n\n"; }

void ChunkFormatter::error(std::string& out) {
  out += "data: ";
  out += error_body(midstream_error(Protocol::kOpenAI));
  out += "\n\n";
}

namespace {

using ojson = nlohmann::ordered_json;

// ordered_json keeps OpenAI's field order, which makes captures easy to diff.
std::string completion_json(std::string_view id, std::int64_t created, std::string_view model,
                            ojson message, std::string_view finish_reason, ojson usage) {
  ojson choice = {{"index", 0},
                  {"message", std::move(message)},
                  {"logprobs", nullptr},
                  {"finish_reason", finish_reason}};
  ojson body = {{"id", id},
                {"object", "chat.completion"},
                {"created", created},
                {"model", model},
                {"system_fingerprint", "fp_sim"},
                {"choices", ojson::array({std::move(choice)})},
                {"usage", std::move(usage)}};
  return body.dump();
}

}  // namespace

std::string completion_body(std::string_view id, std::int64_t created, std::string_view model,
                            std::string_view content, std::string_view finish_reason,
                            std::int64_t prompt_tokens, std::int64_t completion_tokens) {
  ojson message = {{"role", "assistant"}, {"content", content}, {"refusal", nullptr}};
  ojson usage = {{"prompt_tokens", prompt_tokens},
                 {"completion_tokens", completion_tokens},
                 {"total_tokens", prompt_tokens + completion_tokens}};
  return completion_json(id, created, model, std::move(message), finish_reason, std::move(usage));
}

std::string completion_body(std::string_view id, std::int64_t created, std::string_view model,
                            const Answer& a, std::string_view finish_reason,
                            std::int64_t prompt_tokens, std::int64_t cached_tokens) {
  ojson message = {{"role", "assistant"}, {"content", nullptr}, {"refusal", nullptr}};
  if (a.reasoning > 0 && !a.reasoning_hidden)
    message[std::string(a.reasoning_field)] = a.reasoning_text();
  switch (a.output) {
    case Profile::Output::kText:
      message["content"] = a.answer_text();
      if (a.annotations) message["annotations"] = ojson::parse(a.annotations_json());
      break;
    case Profile::Output::kToolCall:
      if (a.answer_tokens() > 0) {
        message["tool_calls"] =
            ojson::array({{{"id", a.call_id},
                           {"type", "function"},
                           {"function", {{"name", "lookup"}, {"arguments", a.tool_arguments()}}}}});
      } else {
        message["content"] = "";
      }
      break;
    case Profile::Output::kAudio:
      if (a.answer_tokens() > 0) {
        message["audio"] = {
            {"id", a.call_id}, {"data", a.audio_data()}, {"transcript", a.answer_text()}};
      } else {
        message["content"] = "";
      }
      break;
  }
  ojson usage = {{"prompt_tokens", prompt_tokens},
                 {"completion_tokens", a.tokens},
                 {"total_tokens", prompt_tokens + a.tokens}};
  if (cached_tokens > 0) usage["prompt_tokens_details"] = {{"cached_tokens", cached_tokens}};
  if (a.reasoning > 0) usage["completion_tokens_details"] = {{"reasoning_tokens", a.reasoning}};
  return completion_json(id, created, model, std::move(message), finish_reason, std::move(usage));
}

// ---------------------------------------------------------------------------
// Shared.

std::optional<std::string> percent_decode(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '%') {
      out += s[i];
      continue;
    }
    unsigned value = 0;
    if (i + 2 >= s.size()) return std::nullopt;
    auto [p, ec] = std::from_chars(s.data() + i + 1, s.data() + i + 3, value, 16);
    if (ec != std::errc() || p != s.data() + i + 3) return std::nullopt;
    out += static_cast<char>(value);
    i += 2;
  }
  return out;
}

ApiError midstream_error(Protocol protocol) {
  switch (protocol) {
    case Protocol::kAnthropic:
      return anthropic_injected_error(529);
    case Protocol::kGemini:
      return gemini_injected_error(503);
    case Protocol::kBedrock:
      return ApiError{424, "The model stopped generating (simulated).", "ModelStreamErrorException",
                      std::nullopt, std::nullopt};
    case Protocol::kOpenAI:
      break;
  }
  // What OpenAI streams when generation fails after the 200: no code.
  return ApiError{500, "The server had an error while processing your request (simulated).",
                  "server_error", std::nullopt, std::nullopt};
}

OpenAIStream::OpenAIStream(std::string_view id, std::int64_t created, std::string_view model,
                           Answer answer, Options options)
    : format_(id, created, model, options.include_usage),
      answer_(std::move(answer)),
      options_(options) {}

void OpenAIStream::open(std::string& out) {
  if (options_.azure) ChunkFormatter::azure_prompt_filter(out);
  format_.role(out);
}

void OpenAIStream::token(std::string& out, int k) { format_.output(out, answer_, k); }

int OpenAIStream::tail_events() const {
  return (answer_.annotations ? 1 : 0) + 1 + (options_.include_usage ? 1 : 0) + 1;
}

void OpenAIStream::tail(std::string& out, int i) {
  // In order: annotations (if any), finish, usage (if asked for), [DONE].
  if (!answer_.annotations) ++i;
  if (i == 0) return format_.annotations(out, answer_);
  if (i == 1) return format_.finish(out, options_.finish_reason);
  if (!options_.include_usage) ++i;
  if (i == 2) {
    return format_.usage(out, options_.prompt_tokens, answer_.tokens, answer_.reasoning,
                         options_.cached_tokens);
  }
  ChunkFormatter::done(out);
}

namespace {

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

bool is_tool_call(const Answer& a) { return a.output == Profile::Output::kToolCall; }

// ---------------------------------------------------------------------------
// Anthropic.

ApiError anthropic_invalid(std::string message) {
  return ApiError{400, std::move(message), "invalid_request_error", std::nullopt, std::nullopt};
}

// Anthropic's error types by status (docs: "Errors"), with the message sent
// with an injected failure of that status.
struct AnthropicStatus {
  int status;
  std::string_view type;
  std::string_view message;
};
constexpr AnthropicStatus kAnthropicStatuses[] = {
    {401, "authentication_error", "invalid x-api-key"},
    {403, "permission_error",
     "Your API key does not have permission to use the specified resource."},
    {404, "not_found_error", "Not found"},
    {413, "request_too_large", "Request exceeds the maximum allowed number of bytes."},
    {429, "rate_limit_error", "Number of requests has exceeded your rate limit (simulated)."},
    {529, "overloaded_error", "Overloaded"},
};

}  // namespace

ApiError anthropic_injected_error(int status) {
  for (const auto& s : kAnthropicStatuses) {
    if (s.status == status) {
      return ApiError{status, std::string(s.message), std::string(s.type), std::nullopt,
                      std::nullopt};
    }
  }
  // Anthropic: invalid_request_error may also stand for "other 4XX status
  // codes"; any other 5xx is an api_error.
  if (status >= 500) {
    return ApiError{status, "Internal server error (simulated).", "api_error", std::nullopt,
                    std::nullopt};
  }
  return ApiError{status, "Your request was rejected (simulated).", "invalid_request_error",
                  std::nullopt, std::nullopt};
}

std::string anthropic_error_body(const ApiError& e, std::string_view request_id) {
  ojson body = {{"type", "error"}, {"error", {{"type", e.type}, {"message", e.message}}}};
  if (!request_id.empty()) body["request_id"] = request_id;
  return body.dump(-1, ' ', false, ojson::error_handler_t::replace);
}

std::variant<ChatRequest, ApiError> parse_messages_request(std::string_view body) {
  const json j = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return anthropic_invalid("Request body is not valid JSON.");
  if (!j.is_object()) return anthropic_invalid("Input should be a valid dictionary");

  ChatRequest r;
  auto model = j.find("model");
  if (model == j.end()) return anthropic_invalid("model: Field required");
  if (!model->is_string() || model->get_ref<const std::string&>().empty()) {
    return anthropic_invalid("model: Input should be a valid string");
  }
  r.model = model->get<std::string>();

  auto messages = j.find("messages");
  if (messages == j.end()) return anthropic_invalid("messages: Field required");
  if (!messages->is_array()) return anthropic_invalid("messages: Input should be a valid list");
  if (messages->empty()) return anthropic_invalid("messages: at least one message is required");
  std::size_t chars = 0;
  for (const auto& m : *messages) {
    if (!m.is_object()) return anthropic_invalid("messages.0: Input should be a valid dictionary");
    if (auto content = m.find("content"); content != m.end()) chars += content_chars(*content);
  }
  if (auto system = j.find("system"); system != j.end()) chars += content_chars(*system);
  r.prompt_tokens = tokens_for_chars(chars);
  // A last assistant message is prefill: the answer continues it, and may
  // not end with whitespace (Anthropic refuses that).
  if (const json& last = messages->back(); last.contains("role") && last["role"] == "assistant") {
    const auto content = last.find("content");
    std::string text = content == last.end() ? std::string() : content_text(*content);
    if (!text.empty() && std::isspace(static_cast<unsigned char>(text.back()))) {
      return anthropic_invalid(
          "messages: final assistant content cannot end with trailing whitespace");
    }
    r.prefill = std::move(text);
  }

  auto max_tokens = j.find("max_tokens");
  if (max_tokens == j.end()) return anthropic_invalid("max_tokens: Field required");
  if (!max_tokens->is_number_integer()) {
    return anthropic_invalid("max_tokens: Input should be a valid integer");
  }
  if (max_tokens->get<std::int64_t>() < 1) {
    return anthropic_invalid("max_tokens: Input should be greater than or equal to 1");
  }
  r.max_tokens = max_tokens->get<std::int64_t>();

  if (auto stream = j.find("stream"); stream != j.end() && !stream->is_null()) {
    if (!stream->is_boolean()) return anthropic_invalid("stream: Input should be a valid boolean");
    r.stream = stream->get<bool>();
  }

  // Claude thinks only when asked; the profile still decides how long, so
  // without `thinking` the reasoning is spent unseen (see show_reasoning).
  r.show_reasoning = false;
  if (auto thinking = j.find("thinking"); thinking != j.end() && !thinking->is_null()) {
    if (!thinking->is_object()) {
      return anthropic_invalid("thinking: Input should be a valid dictionary or object");
    }
    const auto type = thinking->find("type");
    const std::string t =
        type != thinking->end() && type->is_string() ? type->get<std::string>() : std::string();
    if (t == "enabled") {
      const auto budget = thinking->find("budget_tokens");
      if (budget == thinking->end()) {
        return anthropic_invalid("thinking.enabled.budget_tokens: Field required");
      }
      if (!budget->is_number_integer()) {
        return anthropic_invalid("thinking.enabled.budget_tokens: Input should be a valid integer");
      }
      if (budget->get<std::int64_t>() < 1024) {
        return anthropic_invalid(
            "thinking.enabled.budget_tokens: Input should be greater than or equal to 1024");
      }
      if (*r.max_tokens <= budget->get<std::int64_t>()) {
        return anthropic_invalid(
            "`max_tokens` must be greater than `thinking.budget_tokens`. Please consult our "
            "documentation at https://docs.claude.com/en/docs/build-with-claude/"
            "extended-thinking#max-tokens-and-context-window-size");
      }
      r.show_reasoning = true;
    } else if (t == "adaptive") {
      r.show_reasoning = true;
    } else if (t != "disabled") {
      return anthropic_invalid(
          "thinking: Input tag '" + t +
          "' found using 'type' does not match any of the expected tags: 'enabled', 'disabled', "
          "'adaptive'");
    }
  }
  return r;
}

std::string_view anthropic_stop_reason(const ChatPlan& plan) {
  if (plan.capped) return "max_tokens";
  const int answer =
      plan.completion_tokens - std::min(plan.reasoning_tokens, plan.completion_tokens);
  return plan.output == Profile::Output::kToolCall && answer > 0 ? "tool_use" : "end_turn";
}

AnthropicFormatter::AnthropicFormatter(std::string_view id, std::string_view model, Answer answer,
                                       std::string_view stop_reason, std::int64_t prompt_tokens,
                                       std::int64_t cached_tokens)
    : id_(id),
      model_(model),
      answer_(std::move(answer)),
      stop_reason_(stop_reason),
      prompt_tokens_(prompt_tokens),
      cached_tokens_(cached_tokens),
      answer_index_(answer_.reasoning > 0 && !answer_.reasoning_hidden ? 1 : 0) {}

void AnthropicFormatter::event(std::string& out, std::string_view type,
                               std::string_view data) const {
  out += "event: ";
  out += type;
  out += "\ndata: ";
  out += data;
  out += "\n\n";
}

// Anthropic counts cache reads apart from input_tokens: input_tokens +
// cache_creation_input_tokens + cache_read_input_tokens is the prompt.
void AnthropicFormatter::usage(std::string& out, std::int64_t output_tokens, bool with_tier) const {
  out += "{\"input_tokens\":";
  append_int(out, prompt_tokens_ - cached_tokens_);
  out += ",\"cache_creation_input_tokens\":0,\"cache_read_input_tokens\":";
  append_int(out, cached_tokens_);
  out += ",\"output_tokens\":";
  append_int(out, output_tokens);
  if (with_tier) out += ",\"service_tier\":\"standard\"";
  out += "}";
}

void AnthropicFormatter::open(std::string& out) {
  std::string data = "{\"type\":\"message_start\",\"message\":{\"id\":";
  append_json_string(data, id_);
  data += ",\"type\":\"message\",\"role\":\"assistant\",\"model\":";
  append_json_string(data, model_);
  data += ",\"content\":[],\"stop_reason\":null,\"stop_sequence\":null,\"usage\":";
  usage(data, 1, /*with_tier=*/true);
  data += "}}";
  event(out, "message_start", data);
  event(out, "ping", "{\"type\":\"ping\"}");
}

void AnthropicFormatter::token(std::string& out, int k) {
  const bool thinking = k < answer_.reasoning;
  const int index = thinking ? 0 : answer_index_;
  const bool first = thinking ? k == 0 : k == answer_.reasoning;
  const bool last = thinking ? k == answer_.reasoning - 1 : k == answer_.tokens - 1;
  const bool tool = !thinking && is_tool_call(answer_);
  std::string head = "{\"type\":\"content_block_delta\",\"index\":";
  append_int(head, index);
  head += ",\"delta\":";

  if (first) {
    std::string start = "{\"type\":\"content_block_start\",\"index\":";
    append_int(start, index);
    if (thinking) {
      start += ",\"content_block\":{\"type\":\"thinking\",\"thinking\":\"\",\"signature\":\"\"}}";
    } else if (tool) {
      start += ",\"content_block\":{\"type\":\"tool_use\",\"id\":";
      append_json_string(start, answer_.call_id);
      start += ",\"name\":\"lookup\",\"input\":{}}}";
    } else {
      start += ",\"content_block\":{\"type\":\"text\",\"text\":\"\"}}";
    }
    event(out, "content_block_start", start);
    // Anthropic opens a tool_use block with an empty piece of input.
    if (tool)
      event(out, "content_block_delta",
            head + "{\"type\":\"input_json_delta\",\"partial_json\":\"\"}}");
  }

  std::string data = head;
  if (thinking) {
    data += "{\"type\":\"thinking_delta\",\"thinking\":";
    append_json_string(data, answer_.word(k));
  } else if (tool) {
    data += "{\"type\":\"input_json_delta\",\"partial_json\":";
    append_json_string(data, tool_argument_piece(answer_, k));
  } else {
    data += "{\"type\":\"text_delta\",\"text\":";
    append_json_string(data, answer_.word(k));
  }
  data += "}}";
  event(out, "content_block_delta", data);

  if (last) {
    if (thinking) {
      std::string signature = head + "{\"type\":\"signature_delta\",\"signature\":";
      append_json_string(signature, kSimSignature);
      signature += "}}";
      event(out, "content_block_delta", signature);
    }
    std::string stop = "{\"type\":\"content_block_stop\",\"index\":";
    append_int(stop, index);
    stop += "}";
    event(out, "content_block_stop", stop);
  }
}

void AnthropicFormatter::tail(std::string& out, int i) {
  if (i != 0) return event(out, "message_stop", "{\"type\":\"message_stop\"}");
  std::string data = "{\"type\":\"message_delta\",\"delta\":{\"stop_reason\":";
  append_json_string(data, stop_reason_);
  data += ",\"stop_sequence\":null},\"usage\":";
  usage(data, answer_.tokens, /*with_tier=*/false);
  data += "}";
  event(out, "message_delta", data);
}

void AnthropicFormatter::truncated(std::string& out) {
  out += "event: content_block_delta\ndata: {\"type\":\"content_blo";
}

void AnthropicFormatter::malformed(std::string& out) {
  out += "event: content_block_delta\ndata: {not json\n\n";
}

void AnthropicFormatter::error(std::string& out) {
  const ApiError e = midstream_error(Protocol::kAnthropic);
  event(out, "error", anthropic_error_body(e, ""));
}

std::string anthropic_message_body(std::string_view id, std::string_view model, const Answer& a,
                                   std::string_view stop_reason, std::int64_t prompt_tokens,
                                   std::int64_t cached_tokens) {
  ojson content = ojson::array();
  if (a.reasoning > 0 && !a.reasoning_hidden) {
    content.push_back(
        {{"type", "thinking"}, {"thinking", a.reasoning_text()}, {"signature", kSimSignature}});
  }
  if (a.answer_tokens() > 0) {
    if (is_tool_call(a)) {
      content.push_back({{"type", "tool_use"},
                         {"id", a.call_id},
                         {"name", "lookup"},
                         {"input", {{"query", a.answer_text()}}}});
    } else {
      content.push_back({{"type", "text"}, {"text", a.answer_text()}});
    }
  }
  ojson usage = {{"input_tokens", prompt_tokens - cached_tokens},
                 {"cache_creation_input_tokens", 0},
                 {"cache_read_input_tokens", cached_tokens},
                 {"output_tokens", a.tokens},
                 {"service_tier", "standard"}};
  ojson body = {{"id", id},
                {"type", "message"},
                {"role", "assistant"},
                {"model", model},
                {"content", std::move(content)},
                {"stop_reason", stop_reason},
                {"stop_sequence", nullptr},
                {"usage", std::move(usage)}};
  return body.dump(-1, ' ', false, ojson::error_handler_t::replace);
}

// ---------------------------------------------------------------------------
// Gemini.

namespace {

ApiError gemini_invalid(std::string message) { return gemini_error(400, std::move(message)); }

// Google's message for a field of the wrong type:
//   Invalid value at 'generation_config.max_output_tokens' (TYPE_INT32), "x"
ApiError gemini_invalid_value(std::string_view field, std::string_view type, const json& v) {
  return gemini_invalid("Invalid value at '" + std::string(field) + "' (" + std::string(type) +
                        "), " + v.dump(-1, ' ', false, json::error_handler_t::replace));
}

std::size_t parts_chars(const json& content) {
  if (!content.is_object()) return 0;
  auto parts = content.find("parts");
  return parts == content.end() ? 0 : content_chars(*parts);
}

// Google's streamed JSON puts a space after each colon and none after commas:
//   {"candidates": [{"content": {"parts": [{"text": "Paris"}],"role": "model"}}]}
void append_usage(std::string& out, std::int64_t prompt, std::int64_t candidates,
                  std::int64_t thoughts, std::int64_t cached) {
  out += "{\"promptTokenCount\": ";
  append_int(out, prompt);
  if (candidates > 0) {
    out += ",\"candidatesTokenCount\": ";
    append_int(out, candidates);
  }
  out += ",\"totalTokenCount\": ";
  append_int(out, prompt + candidates + thoughts);
  if (cached > 0) {
    out += ",\"cachedContentTokenCount\": ";
    append_int(out, cached);
  }
  out += ",\"promptTokensDetails\": [{\"modality\": \"TEXT\",\"tokenCount\": ";
  append_int(out, prompt);
  out += "}]";
  if (thoughts > 0) {
    out += ",\"thoughtsTokenCount\": ";
    append_int(out, thoughts);
  }
  out += "}";
}

void append_text_part(std::string& out, std::string_view text, bool thought) {
  out += "{\"text\": ";
  append_json_string(out, text);
  if (thought) out += ",\"thought\": true";
  out += "}";
}

// The whole call of a tool call answer; a model that thought signs it.
void append_function_call_part(std::string& out, const Answer& a) {
  out += "{\"functionCall\": {\"name\": \"lookup\",\"args\": {\"query\": ";
  append_json_string(out, a.answer_text());
  out += "}}";
  if (a.reasoning > 0) {
    out += ",\"thoughtSignature\": ";
    append_json_string(out, kSimSignature);
  }
  out += "}";
}

// Google's pretty-printed JSON (non-streamed bodies and streamed JSON array
// elements): two-space indent, "key": value.
std::string pretty(std::string_view compact) {
  return ojson::parse(compact).dump(2, ' ', false, ojson::error_handler_t::replace);
}

// One GenerateContentResponse after `produced` output tokens (usage is
// cumulative); `finish` empty for all but the last.
std::string response_json(const Answer& a, std::string_view parts, std::string_view finish,
                          int produced, std::int64_t prompt_tokens, std::int64_t cached_tokens,
                          std::string_view model, std::string_view response_id) {
  const int thoughts = std::min(produced, a.reasoning);
  std::string out = "{\"candidates\": [{\"content\": {\"parts\": [";
  out += parts;
  out += "],\"role\": \"model\"}";
  if (!finish.empty()) {
    out += ",\"finishReason\": ";
    append_json_string(out, finish);
  }
  out += ",\"index\": 0";
  if (!finish.empty() && is_tool_call(a) && a.answer_tokens() > 0) {
    out += ",\"finishMessage\": \"Model generated function call(s).\"";
  }
  out += "}],\"usageMetadata\": ";
  append_usage(out, prompt_tokens, produced - thoughts, thoughts, cached_tokens);
  out += ",\"modelVersion\": ";
  append_json_string(out, model);
  out += ",\"responseId\": ";
  append_json_string(out, response_id);
  out += "}";
  return out;
}

}  // namespace

std::optional<GeminiTarget> parse_gemini_target(std::string_view target) {
  constexpr std::string_view kGenerate = ":generateContent";
  constexpr std::string_view kStream = ":streamGenerateContent";
  constexpr std::string_view kModels = "/models/";
  const auto q = target.find('?');
  const std::string_view path = target.substr(0, q);
  GeminiTarget t;
  std::string_view head;
  if (ends_with(path, kStream)) {
    t.stream = true;
    head = path.substr(0, path.size() - kStream.size());
  } else if (ends_with(path, kGenerate)) {
    head = path.substr(0, path.size() - kGenerate.size());
  } else {
    return std::nullopt;
  }
  const auto at = head.rfind(kModels);
  if (at == std::string_view::npos) return std::nullopt;
  const std::string_view name = head.substr(at + kModels.size());
  if (name.empty() || name.find('/') != std::string_view::npos) return std::nullopt;
  auto model = percent_decode(name);
  if (!model || model->empty()) return std::nullopt;
  t.model = std::move(*model);

  std::string_view query = q == std::string_view::npos ? "" : target.substr(q + 1);
  while (!query.empty()) {
    const auto amp = query.find('&');
    const std::string_view param = query.substr(0, amp);
    if (param == "alt=sse") t.sse = true;
    if (param.starts_with("key=")) t.key = percent_decode(param.substr(4));
    if (amp == std::string_view::npos) break;
    query.remove_prefix(amp + 1);
  }
  return t;
}

namespace {

// google.rpc status names by HTTP code, and the message Google sends with an
// injected failure of that code.
struct GoogleStatus {
  int code;
  std::string_view name;
  std::string_view message;
};
constexpr GoogleStatus kGoogleStatuses[] = {
    {400, "INVALID_ARGUMENT", "Request contains an invalid argument. (simulated)"},
    {401, "UNAUTHENTICATED", "Request had invalid authentication credentials. (simulated)"},
    {403, "PERMISSION_DENIED", "The caller does not have permission (simulated)"},
    {404, "NOT_FOUND", "Requested entity was not found. (simulated)"},
    {409, "ABORTED", "The operation was aborted. (simulated)"},
    {429, "RESOURCE_EXHAUSTED", "Resource has been exhausted (e.g. check quota). (simulated)"},
    {499, "CANCELLED", "The operation was cancelled. (simulated)"},
    {501, "UNIMPLEMENTED", "Operation is not implemented. (simulated)"},
    {503, "UNAVAILABLE", "The model is overloaded. Please try again later."},
    {504, "DEADLINE_EXCEEDED", "Deadline expired before operation could complete. (simulated)"},
};

GoogleStatus google_status(int code) {
  for (const auto& s : kGoogleStatuses) {
    if (s.code == code) return s;
  }
  if (code >= 500) {
    return {code, "INTERNAL",
            "An internal error has occurred. Please retry or report in "
            "https://developers.generativeai.google/guide/troubleshooting (simulated)"};
  }
  return {code, "FAILED_PRECONDITION", "Precondition check failed. (simulated)"};
}

}  // namespace

ApiError gemini_error(int status, std::string message) {
  return ApiError{status, std::move(message), std::string(google_status(status).name), std::nullopt,
                  std::nullopt};
}

ApiError gemini_injected_error(int status) {
  return gemini_error(status, std::string(google_status(status).message));
}

std::string gemini_error_body(const ApiError& e, std::optional<int> retry_delay_s) {
  ojson error = {{"code", e.status}, {"message", e.message}, {"status", e.type}};
  ojson details = ojson::array();
  if (e.code) {
    details.push_back({{"@type", "type.googleapis.com/google.rpc.ErrorInfo"},
                       {"reason", *e.code},
                       {"domain", "googleapis.com"},
                       {"metadata", {{"service", "generativelanguage.googleapis.com"}}}});
  }
  if (retry_delay_s) {
    details.push_back({{"@type", "type.googleapis.com/google.rpc.RetryInfo"},
                       {"retryDelay", std::to_string(*retry_delay_s) + "s"}});
  }
  if (!details.empty()) error["details"] = std::move(details);
  return ojson{{"error", std::move(error)}}.dump(2, ' ', false, ojson::error_handler_t::replace) +
         "\n";
}

std::variant<ChatRequest, ApiError> parse_generate_request(std::string_view body,
                                                           const GeminiTarget& target) {
  const json j = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return gemini_invalid("Invalid JSON payload received. Unexpected token.");
  if (!j.is_object()) {
    return gemini_invalid("Invalid JSON payload received. Expected an object.");
  }
  ChatRequest r;
  r.model = target.model;
  r.stream = target.stream;

  auto contents = j.find("contents");
  if (contents == j.end() || contents->is_null() || (contents->is_array() && contents->empty())) {
    return gemini_invalid("* GenerateContentRequest.contents: contents is not specified\n");
  }
  if (!contents->is_array()) {
    return gemini_invalid_value("contents",
                                "type.googleapis.com/google.ai.generativelanguage."
                                "v1beta.Content",
                                *contents);
  }
  std::size_t chars = 0;
  for (const auto& c : *contents) chars += parts_chars(c);
  if (auto system = j.find("systemInstruction"); system != j.end()) chars += parts_chars(*system);
  r.prompt_tokens = tokens_for_chars(chars);
  // A trailing model turn: the answer continues it.
  if (const json& last = contents->back();
      last.is_object() && last.contains("role") && last["role"] == "model") {
    const auto parts = last.find("parts");
    r.prefill = parts == last.end() ? std::string() : content_text(*parts);
  }

  // Gemini 2.5 thinks by default but shows thoughts only when asked.
  r.show_reasoning = false;
  auto config = j.find("generationConfig");
  if (config == j.end() || config->is_null()) return r;
  if (!config->is_object()) {
    return gemini_invalid_value("generation_config",
                                "type.googleapis.com/google.ai."
                                "generativelanguage.v1beta.GenerationConfig",
                                *config);
  }
  if (auto max = config->find("maxOutputTokens"); max != config->end() && !max->is_null()) {
    if (!max->is_number_integer()) {
      return gemini_invalid_value("generation_config.max_output_tokens", "TYPE_INT32", *max);
    }
    const auto v = max->get<std::int64_t>();
    if (v < 0) {
      return gemini_invalid(
          "* GenerateContentRequest.generation_config.max_output_tokens: max_output_tokens must "
          "be positive.\n");
    }
    if (v > 0) r.max_tokens = v;  // 0 is proto3's "unset"
  }
  if (auto thinking = config->find("thinkingConfig");
      thinking != config->end() && thinking->is_object()) {
    if (auto include = thinking->find("includeThoughts");
        include != thinking->end() && !include->is_null()) {
      if (!include->is_boolean()) {
        return gemini_invalid_value("generation_config.thinking_config.include_thoughts",
                                    "TYPE_BOOL", *include);
      }
      r.show_reasoning = include->get<bool>();
    }
  }
  return r;
}

std::string_view gemini_finish_reason(const ChatPlan& plan) {
  return plan.capped ? "MAX_TOKENS" : "STOP";
}

GeminiFormatter::GeminiFormatter(std::string_view response_id, std::string_view model,
                                 Answer answer, bool capped, std::int64_t prompt_tokens,
                                 std::int64_t cached_tokens, bool sse)
    : response_id_(response_id),
      model_(model),
      answer_(std::move(answer)),
      capped_(capped),
      prompt_tokens_(prompt_tokens),
      cached_tokens_(cached_tokens),
      sse_(sse) {}

void GeminiFormatter::frame(std::string& out, std::string_view compact_json) {
  if (sse_) {
    out += "data: ";
    out += compact_json;
    out += "\r\n\r\n";
    return;
  }
  out += first_ ? "[" : "\n,\r\n";
  first_ = false;
  out += pretty(compact_json);
}

void GeminiFormatter::token(std::string& out, int k) {
  const bool thought = k < answer_.reasoning;
  if (!thought && is_tool_call(answer_)) return;  // the call comes whole, with the finish
  std::string part;
  append_text_part(part, answer_.word(k), thought);
  frame(out, response_json(answer_, part, "", k + 1, prompt_tokens_, cached_tokens_, model_,
                           response_id_));
}

void GeminiFormatter::tail(std::string& out, int i) {
  if (i != 0) {
    out += "\n]";
    return;
  }
  std::string part;
  if (is_tool_call(answer_) && answer_.answer_tokens() > 0) {
    append_function_call_part(part, answer_);
  } else {
    append_text_part(part, "", false);
  }
  frame(out, response_json(answer_, part, capped_ ? "MAX_TOKENS" : "STOP", answer_.tokens,
                           prompt_tokens_, cached_tokens_, model_, response_id_));
}

void GeminiFormatter::truncated(std::string& out) {
  if (sse_) {
    out += "data: {\"candidates\": [{\"conte";
    return;
  }
  out += first_ ? "[" : "\n,\r\n";
  out += "{\n  \"candidates\": [\n    {\n      \"conte";
}

void GeminiFormatter::malformed(std::string& out) {
  if (sse_) {
    out += "data: {not json\r\n\r\n";
    return;
  }
  out += first_ ? "[" : "\n,\r\n";
  first_ = false;
  out += "{not json";
}

void GeminiFormatter::error(std::string& out) {
  const ApiError e = midstream_error(Protocol::kGemini);
  std::string compact = "{\"error\": {\"code\": ";
  append_int(compact, e.status);
  compact += ",\"message\": ";
  append_json_string(compact, e.message);
  compact += ",\"status\": ";
  append_json_string(compact, e.type);
  compact += "}}";
  frame(out, compact);
  if (!sse_) out += "\n]";
}

namespace {

std::string blocked_json(std::string_view response_id, std::string_view model,
                         std::int64_t prompt_tokens) {
  std::string out =
      "{\"promptFeedback\": {\"blockReason\": \"SAFETY\",\"safetyRatings\": ["
      "{\"category\": \"HARM_CATEGORY_SEXUALLY_EXPLICIT\",\"probability\": \"NEGLIGIBLE\"},"
      "{\"category\": \"HARM_CATEGORY_HATE_SPEECH\",\"probability\": \"NEGLIGIBLE\"},"
      "{\"category\": \"HARM_CATEGORY_HARASSMENT\",\"probability\": \"NEGLIGIBLE\"},"
      "{\"category\": \"HARM_CATEGORY_DANGEROUS_CONTENT\",\"probability\": \"HIGH\","
      "\"blocked\": true}]},\"usageMetadata\": ";
  append_usage(out, prompt_tokens, 0, 0, 0);
  out += ",\"modelVersion\": ";
  append_json_string(out, model);
  out += ",\"responseId\": ";
  append_json_string(out, response_id);
  out += "}";
  return out;
}

}  // namespace

void GeminiFormatter::blocked(std::string& out) {
  frame(out, blocked_json(response_id_, model_, prompt_tokens_));
  if (!sse_) out += "\n]";
}

std::string gemini_response_body(std::string_view response_id, std::string_view model,
                                 const Answer& a, bool capped, std::int64_t prompt_tokens,
                                 std::int64_t cached_tokens) {
  std::string parts;
  if (a.reasoning > 0 && !a.reasoning_hidden) append_text_part(parts, a.reasoning_text(), true);
  if (a.answer_tokens() > 0) {
    if (!parts.empty()) parts += ",";
    if (is_tool_call(a)) {
      append_function_call_part(parts, a);
    } else {
      append_text_part(parts, a.answer_text(), false);
    }
  }
  ojson body = ojson::parse(response_json(a, parts, capped ? "MAX_TOKENS" : "STOP", a.tokens,
                                          prompt_tokens, cached_tokens, model, response_id));
  // A candidate that produced nothing has no parts at all, as Gemini answers.
  if (parts.empty()) body["candidates"][0]["content"].erase("parts");
  return body.dump(2, ' ', false, ojson::error_handler_t::replace) + "\n";
}

std::string gemini_blocked_body(std::string_view response_id, std::string_view model,
                                std::int64_t prompt_tokens) {
  return pretty(blocked_json(response_id, model, prompt_tokens)) + "\n";
}

ApiError prefill_refused(Protocol protocol) {
  switch (protocol) {
    case Protocol::kAnthropic:
      return ApiError{400,
                      "This model does not support assistant message prefill. The conversation "
                      "must end with a user message. (simulated)",
                      "invalid_request_error", std::nullopt, std::nullopt};
    case Protocol::kGemini:
      return gemini_invalid(
          "Please ensure that the conversation ends with a user turn: this model does not "
          "continue a model turn. (simulated)");
    case Protocol::kBedrock:
      return ApiError{400,
                      "This model doesn't support conversations that end with an assistant "
                      "message. (simulated)",
                      "ValidationException", std::nullopt, std::nullopt};
    case Protocol::kOpenAI:
      break;
  }
  return ApiError{400, "This model does not support continuing an assistant message. (simulated)",
                  "invalid_request_error", std::string("messages"), std::nullopt};
}

}  // namespace llmgate::sim
