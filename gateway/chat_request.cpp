#include "gateway/chat_request.h"

#include <algorithm>
#include <cctype>

#include "providers/json_depth.h"

namespace llmgate::gateway {
namespace {

bool is_json_content_type(std::string_view ct) {
  auto semi = ct.find(';');
  std::string_view media = ct.substr(0, semi);
  while (!media.empty() && media.back() == ' ') media.remove_suffix(1);
  while (!media.empty() && media.front() == ' ') media.remove_prefix(1);
  std::string lower(media);
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return lower == "application/json";
}

// A JSON object from the request's body, or why it is none.
std::optional<ApiError> parse_json_object(std::string_view content_type, std::string_view body,
                                          nlohmann::json& out) {
  if (!content_type.empty() && !is_json_content_type(content_type)) {
    ApiError e = invalid_request("Content-Type must be application/json, got \"" +
                                 std::string(content_type.substr(0, 100)) + "\"");
    e.status = 415;
    e.code = "unsupported_media_type";
    return e;
  }
  if (body.empty()) return invalid_request("request body is empty: expected a JSON object");
  // nlohmann's lexer takes a NUL byte for the end of input, which would
  // silently drop whatever follows; a raw NUL is never valid JSON anyway.
  if (body.find('\0') != std::string_view::npos) {
    return invalid_request("request body is not valid JSON: it contains a NUL byte", std::nullopt,
                           "invalid_json");
  }
  if (providers::json_too_deep(body)) {
    return invalid_request("request body nests arrays or objects more than " +
                               std::to_string(providers::kMaxJsonDepth) + " levels deep",
                           std::nullopt, "invalid_json");
  }
  try {
    out = nlohmann::json::parse(body);
  } catch (const nlohmann::json::exception& e) {
    // parse_error, and out_of_range for a number no double holds (1e400).
    // nlohmann rejects ill-formed UTF-8 here too.
    return invalid_request(std::string("request body is not valid JSON: ") + e.what(), std::nullopt,
                           "invalid_json");
  }
  if (!out.is_object()) return invalid_request("request body must be a JSON object");
  return std::nullopt;
}

// `model`, which every request has.
std::optional<ApiError> read_model(ChatRequest& r) {
  auto model = r.body.find("model");
  if (model == r.body.end() || model->is_null()) {
    return invalid_request("you must provide a model parameter", "model",
                           "missing_required_parameter");
  }
  if (!model->is_string() || model->get_ref<const std::string&>().empty()) {
    return invalid_request("model must be a non-empty string", "model", "invalid_type");
  }
  r.model = model->get<std::string>();
  return std::nullopt;
}

// `messages`, which every chat request has.
std::optional<ApiError> read_messages(ChatRequest& r) {
  auto messages = r.body.find("messages");
  if (messages == r.body.end() || messages->is_null()) {
    return invalid_request("you must provide a messages parameter", "messages",
                           "missing_required_parameter");
  }
  if (!messages->is_array() || messages->empty()) {
    return invalid_request("messages must be a non-empty array", "messages", "invalid_type");
  }
  for (std::size_t i = 0; i < messages->size(); ++i) {
    const auto& m = (*messages)[i];
    std::string param = "messages[" + std::to_string(i) + "]";
    if (!m.is_object()) return invalid_request(param + " must be an object", param, "invalid_type");
    auto role = m.find("role");
    if (role == m.end() || !role->is_string()) {
      return invalid_request(param + ".role must be a string", param + ".role", "invalid_type");
    }
  }
  return std::nullopt;
}

// `stream`, a boolean when present.
std::optional<ApiError> read_stream(ChatRequest& r) {
  if (auto s = r.body.find("stream"); s != r.body.end() && !s->is_null()) {
    if (!s->is_boolean())
      return invalid_request("stream must be a boolean", "stream", "invalid_type");
    r.stream = s->get<bool>();
  }
  return std::nullopt;
}

// A token limit (or `n`), a non-negative integer when present; the value
// when present.
std::variant<std::optional<std::int64_t>, ApiError> read_limit(const ChatRequest& r,
                                                               const char* key) {
  auto it = r.body.find(key);
  if (it == r.body.end() || it->is_null()) return std::optional<std::int64_t>();
  if (!it->is_number_integer() || it->get<std::int64_t>() < 0) {
    return invalid_request(std::string(key) + " must be a non-negative integer", key,
                           "invalid_type");
  }
  return std::optional<std::int64_t>(it->get<std::int64_t>());
}

// `stream`, `stream_options` and the token limits.
std::optional<ApiError> read_stream_and_limits(ChatRequest& r) {
  if (auto e = read_stream(r)) return e;
  if (auto so = r.body.find("stream_options"); so != r.body.end() && !so->is_null()) {
    if (!so->is_object()) {
      return invalid_request("stream_options must be an object", "stream_options", "invalid_type");
    }
    if (!r.stream) {
      return invalid_request("stream_options is only allowed when stream is true", "stream_options",
                             "invalid_value");
    }
    if (auto iu = so->find("include_usage"); iu != so->end() && !iu->is_null()) {
      if (!iu->is_boolean()) {
        return invalid_request("stream_options.include_usage must be a boolean",
                               "stream_options.include_usage", "invalid_type");
      }
      r.include_usage = iu->get<bool>();
    }
  }
  for (const char* key : {"max_tokens", "max_completion_tokens", "n"}) {
    auto limit = read_limit(r, key);
    if (auto* e = std::get_if<ApiError>(&limit)) return std::move(*e);
    const auto value = std::get<std::optional<std::int64_t>>(limit);
    if (value && std::string_view(key) != "n") r.max_tokens = value;
  }
  return std::nullopt;
}

// The reasoning effort the statistics keep apart, if any (never an error:
// the upstream judges the parameter).
std::string reasoning_effort_of(const nlohmann::json& body) {
  const nlohmann::json* effort = nullptr;
  if (auto it = body.find("reasoning_effort"); it != body.end()) {
    effort = &*it;
  } else if (auto r = body.find("reasoning"); r != body.end() && r->is_object()) {
    if (auto e = r->find("effort"); e != r->end()) effort = &*e;
  }
  if (effort == nullptr || !effort->is_string()) return {};
  const auto& text = effort->get_ref<const std::string&>();
  for (std::string_view known : kReasoningEfforts) {
    if (text == known) return text;
  }
  return {};
}

// A required field that must be present and not null (its shape is the
// upstream's to judge beyond `ok`).
std::optional<ApiError> require(const ChatRequest& r, const char* key,
                                bool (*ok)(const nlohmann::json&), const char* expected) {
  auto it = r.body.find(key);
  if (it == r.body.end() || it->is_null()) {
    return invalid_request(std::string("you must provide a ") + key + " parameter", key,
                           "missing_required_parameter");
  }
  if (!ok(*it))
    return invalid_request(std::string(key) + " must be " + expected, key, "invalid_type");
  return std::nullopt;
}

bool string_or_array(const nlohmann::json& v) {
  return (v.is_string() && !v.get_ref<const std::string&>().empty()) ||
         (v.is_array() && !v.empty());
}

// The gateway's own routing override: never forwarded upstream.
void take_route(ChatRequest& r) {
  if (auto route = r.body.find("route"); route != r.body.end()) {
    r.route = std::move(*route);
    r.body.erase(route);
  }
}

}  // namespace

std::variant<ChatRequest, ApiError> parse_responses_request(std::string_view content_type,
                                                            std::string_view body) {
  ChatRequest r;
  r.operation = config::Operation::kResponses;
  if (auto e = parse_json_object(content_type, body, r.body)) return std::move(*e);
  if (auto e = read_model(r)) return std::move(*e);
  if (auto e = require(r, "input", string_or_array, "a string or a non-empty array")) {
    return std::move(*e);
  }
  if (r.body.contains("stream_options") && !r.body.at("stream_options").is_null() &&
      !r.body.at("stream_options").is_object()) {
    return invalid_request("stream_options must be an object", "stream_options", "invalid_type");
  }
  if (auto e = read_stream(r)) return std::move(*e);
  auto limit = read_limit(r, "max_output_tokens");
  if (auto* e = std::get_if<ApiError>(&limit)) return std::move(*e);
  r.max_tokens = std::get<std::optional<std::int64_t>>(limit);
  if (auto p = r.body.find("previous_response_id"); p != r.body.end() && !p->is_null()) {
    if (!p->is_string() || p->get_ref<const std::string&>().empty()) {
      return invalid_request("previous_response_id must be a non-empty string",
                             "previous_response_id", "invalid_type");
    }
    r.previous_response_id = p->get<std::string>();
  }
  if (auto b = r.body.find("background"); b != r.body.end() && !b->is_null()) {
    if (!b->is_boolean()) {
      return invalid_request("background must be a boolean", "background", "invalid_type");
    }
    r.background = b->get<bool>();
  }
  // Usage always comes on response.completed: nothing to ask for.
  r.include_usage = true;
  r.reasoning_effort = reasoning_effort_of(r.body);
  take_route(r);
  return r;
}

std::variant<ChatRequest, ApiError> parse_embeddings_request(std::string_view content_type,
                                                             std::string_view body) {
  ChatRequest r;
  r.operation = config::Operation::kEmbeddings;
  if (auto e = parse_json_object(content_type, body, r.body)) return std::move(*e);
  if (auto e = read_model(r)) return std::move(*e);
  if (auto e = require(r, "input", string_or_array,
                       "a non-empty string or a non-empty array of strings or token arrays")) {
    return std::move(*e);
  }
  if (auto f = r.body.find("encoding_format"); f != r.body.end() && !f->is_null()) {
    if (!f->is_string() || (*f != "float" && *f != "base64")) {
      return invalid_request("encoding_format must be \"float\" or \"base64\"", "encoding_format",
                             "invalid_value");
    }
  }
  if (auto d = r.body.find("dimensions"); d != r.body.end() && !d->is_null()) {
    if (!d->is_number_integer() || d->get<std::int64_t>() < 1) {
      return invalid_request("dimensions must be a positive integer", "dimensions", "invalid_type");
    }
  }
  if (auto s = r.body.find("stream"); s != r.body.end() && !s->is_null() && *s != false) {
    return invalid_request("embeddings are not streamed", "stream", "invalid_value");
  }
  take_route(r);
  return r;
}

std::variant<ChatRequest, ApiError> parse_completions_request(std::string_view content_type,
                                                              std::string_view body) {
  ChatRequest r;
  r.operation = config::Operation::kCompletions;
  if (auto e = parse_json_object(content_type, body, r.body)) return std::move(*e);
  if (auto e = read_model(r)) return std::move(*e);
  if (auto e = require(
          r, "prompt",
          [](const nlohmann::json& v) { return v.is_string() || (v.is_array() && !v.empty()); },
          "a string or a non-empty array")) {
    return std::move(*e);
  }
  if (auto e = read_stream_and_limits(r)) return std::move(*e);
  take_route(r);
  return r;
}

std::variant<ChatRequest, ApiError> parse_chat_request(std::string_view content_type,
                                                       std::string_view body) {
  ChatRequest r;
  if (auto e = parse_json_object(content_type, body, r.body)) return std::move(*e);
  if (auto e = read_model(r)) return std::move(*e);
  if (auto e = read_messages(r)) return std::move(*e);
  if (auto e = read_stream_and_limits(r)) return std::move(*e);
  r.reasoning_effort = reasoning_effort_of(r.body);
  take_route(r);
  return r;
}

}  // namespace llmgate::gateway
