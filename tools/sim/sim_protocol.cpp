#include "tools/sim/sim_protocol.h"

#include <algorithm>
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
  return r;
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
  plan.reasoning_hidden = profile.reasoning_hidden;
  plan.reasoning_field = profile.reasoning_field == "reasoning" ? "reasoning" : "reasoning_content";
  plan.annotations = profile.annotations && profile.output == Profile::Output::kText;
  plan.cached_tokens = std::min<std::int64_t>(profile.cached_tokens, request.prompt_tokens);
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
    append_json_string(delta, token_text(static_cast<std::size_t>(k)));
    delta += "}";
  } else if (a.output == Profile::Output::kText) {
    content(out, token_text(static_cast<std::size_t>(k)));
    return;
  } else if (a.output == Profile::Output::kToolCall) {
    std::string piece = j == 0 ? "{\"query\":\"" : "";
    piece += token_text(static_cast<std::size_t>(k));
    if (j == a.answer_tokens() - 1) piece += "\"}";
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
    append_json_string(delta, token_text(static_cast<std::size_t>(k)));
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
      call_id(std::move(id)) {}

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
  for (int k = 0; k < reasoning; ++k) s += token_text(static_cast<std::size_t>(k));
  return s;
}

std::string Answer::answer_text() const {
  std::string s;
  for (int k = reasoning; k < tokens; ++k) s += token_text(static_cast<std::size_t>(k));
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

}  // namespace llmgate::sim
