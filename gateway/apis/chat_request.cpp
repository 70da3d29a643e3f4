#include "gateway/apis/chat_request.h"

#include <algorithm>

#include "config/ascii.h"
#include "providers/json_depth.h"

namespace llmgate::gateway {
namespace {

bool is_json_content_type(std::string_view ct) {
  auto semi = ct.find(';');
  std::string_view media = ct.substr(0, semi);
  while (!media.empty() && media.back() == ' ') media.remove_suffix(1);
  while (!media.empty() && media.front() == ' ') media.remove_prefix(1);
  constexpr std::string_view kJson = "application/json";
  return media.size() == kJson.size() &&
         std::equal(media.begin(), media.end(), kJson.begin(),
                    [](char c, char want) { return config::ascii_lower(c) == want; });
}

using providers::RequestBody;
using Type = RequestBody::Type;
using Member = RequestBody::Member;

}  // namespace

std::optional<ApiError> parse_json_body(std::string_view content_type, std::string body,
                                        RequestBody& out) {
  if (!content_type.empty() && !is_json_content_type(content_type)) {
    ApiError e = invalid_request("Content-Type must be application/json, got \"" +
                                 std::string(content_type.substr(0, 100)) + "\"");
    e.status = 415;
    e.code = "unsupported_media_type";
    return e;
  }
  if (body.empty()) return invalid_request("request body is empty: expected a JSON object");
  auto parsed = RequestBody::parse(std::move(body));
  if (auto* b = std::get_if<RequestBody>(&parsed)) {
    out = std::move(*b);
    return std::nullopt;
  }
  const auto& why = std::get<RequestBody::Invalid>(parsed);
  switch (why.reason) {
    case RequestBody::Invalid::Reason::kNulByte:
      return invalid_request("request body is not valid JSON: it contains a NUL byte", std::nullopt,
                             "invalid_json");
    case RequestBody::Invalid::Reason::kTooDeep:
      return invalid_request("request body nests arrays or objects more than " +
                                 std::to_string(providers::kMaxJsonDepth) + " levels deep",
                             std::nullopt, "invalid_json");
    case RequestBody::Invalid::Reason::kNotObject:
      return invalid_request("request body must be a JSON object");
    case RequestBody::Invalid::Reason::kSyntax:
      break;
  }
  // parse_error, and out_of_range for a number no double holds (1e400);
  // ill-formed UTF-8 too.
  return invalid_request("request body is not valid JSON: " + why.message, std::nullopt,
                         "invalid_json");
}

namespace {

bool present(const Member* m) { return m != nullptr && m->v.type != Type::kNull; }

// `model`, which every request has.
std::optional<ApiError> read_model(ChatRequest& r) {
  const Member* model = r.body.find("model");
  if (!present(model)) {
    return invalid_request("you must provide a model parameter", "model",
                           "missing_required_parameter");
  }
  if (model->v.type != Type::kString || model->v.size == 0) {
    return invalid_request("model must be a non-empty string", "model", "invalid_type");
  }
  r.model = r.body.string_of(*model);
  return std::nullopt;
}

// `messages`, which every chat request has.
std::optional<ApiError> read_messages(ChatRequest& r) {
  const Member* messages = r.body.find("messages");
  if (!present(messages)) {
    return invalid_request("you must provide a messages parameter", "messages",
                           "missing_required_parameter");
  }
  if (messages->v.type != Type::kArray || messages->v.size == 0) {
    return invalid_request("messages must be a non-empty array", "messages", "invalid_type");
  }
  std::optional<ApiError> error;
  // Each message's role found in the scan that walks the messages.
  r.body.each_element_with(
      *messages, "role", [&](std::size_t i, const Member& m, const Member* role) {
        if (m.v.type != Type::kObject) {
          std::string param = "messages[" + std::to_string(i) + "]";
          error = invalid_request(param + " must be an object", param, "invalid_type");
          return false;
        }
        if (!role || role->v.type != Type::kString) {
          std::string param = "messages[" + std::to_string(i) + "].role";
          error = invalid_request(param + " must be a string", param, "invalid_type");
          return false;
        }
        return true;
      });
  return error;
}

// A boolean when present (null reads as absent).
std::variant<std::optional<bool>, ApiError> read_bool(const ChatRequest& r, const char* key) {
  const Member* m = r.body.find(key);
  if (!present(m)) return std::optional<bool>();
  if (m->v.type != Type::kTrue && m->v.type != Type::kFalse) {
    return invalid_request(std::string(key) + " must be a boolean", key, "invalid_type");
  }
  return std::optional<bool>(m->v.type == Type::kTrue);
}

// `stream`, a boolean when present.
std::optional<ApiError> read_stream(ChatRequest& r) {
  auto s = read_bool(r, "stream");
  if (auto* e = std::get_if<ApiError>(&s)) return std::move(*e);
  if (auto v = std::get<std::optional<bool>>(s)) r.stream = *v;
  return std::nullopt;
}

// An integer as nlohmann reads it (an integer literal; one past int64 reads
// negative) of at least `min`.
bool integer_at_least(const Member& m, std::int64_t min) {
  return m.v.type == Type::kNumber && m.v.integer && m.v.fits_int64 && m.v.int64 >= min;
}

// A token limit (or `n`), a non-negative integer when present; the value
// when present.
std::variant<std::optional<std::int64_t>, ApiError> read_limit(const ChatRequest& r,
                                                               const char* key) {
  const Member* m = r.body.find(key);
  if (!present(m)) return std::optional<std::int64_t>();
  if (!integer_at_least(*m, 0)) {
    return invalid_request(std::string(key) + " must be a non-negative integer", key,
                           "invalid_type");
  }
  return std::optional<std::int64_t>(m->v.int64);
}

// `stream`, `stream_options` and the token limits.
std::optional<ApiError> read_stream_and_limits(ChatRequest& r) {
  if (auto e = read_stream(r)) return e;
  if (const Member* so = r.body.find("stream_options"); present(so)) {
    if (so->v.type != Type::kObject) {
      return invalid_request("stream_options must be an object", "stream_options", "invalid_type");
    }
    if (!r.stream) {
      return invalid_request("stream_options is only allowed when stream is true", "stream_options",
                             "invalid_value");
    }
    if (auto iu = r.body.member_of(*so, "include_usage"); iu && iu->v.type != Type::kNull) {
      if (iu->v.type != Type::kTrue && iu->v.type != Type::kFalse) {
        return invalid_request("stream_options.include_usage must be a boolean",
                               "stream_options.include_usage", "invalid_type");
      }
      r.include_usage = iu->v.type == Type::kTrue;
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
std::string reasoning_effort_of(const RequestBody& body) {
  std::optional<Member> effort;
  if (const Member* e = body.find("reasoning_effort")) {
    effort = *e;
  } else if (const Member* r = body.find("reasoning"); r && r->v.type == Type::kObject) {
    effort = body.member_of(*r, "effort");
  }
  if (!effort || effort->v.type != Type::kString) return {};
  std::string text = body.string_of(*effort);
  for (std::string_view known : kReasoningEfforts) {
    if (text == known) return text;
  }
  return {};
}

// A required field that must be present and not null (its shape is the
// upstream's to judge beyond `ok`).
std::optional<ApiError> require(const ChatRequest& r, const char* key, bool (*ok)(const Member&),
                                const char* expected) {
  const Member* m = r.body.find(key);
  if (!present(m)) {
    return invalid_request(std::string("you must provide a ") + key + " parameter", key,
                           "missing_required_parameter");
  }
  if (!ok(*m))
    return invalid_request(std::string(key) + " must be " + expected, key, "invalid_type");
  return std::nullopt;
}

bool string_or_array(const Member& m) {
  return (m.v.type == Type::kString || m.v.type == Type::kArray) && m.v.size > 0;
}

// The gateway's own routing override: never forwarded upstream.
void take_route(ChatRequest& r) {
  if (r.body.contains("route")) r.route = r.body.erase("route");
}

}  // namespace

std::variant<ChatRequest, ApiError> parse_responses_request(std::string_view content_type,
                                                            std::string body) {
  ChatRequest r;
  r.operation = config::Operation::kResponses;
  if (auto e = parse_json_body(content_type, std::move(body), r.body)) return std::move(*e);
  if (auto e = read_model(r)) return std::move(*e);
  if (auto e = require(r, "input", string_or_array, "a string or a non-empty array")) {
    return std::move(*e);
  }
  if (const Member* so = r.body.find("stream_options");
      present(so) && so->v.type != Type::kObject) {
    return invalid_request("stream_options must be an object", "stream_options", "invalid_type");
  }
  if (auto e = read_stream(r)) return std::move(*e);
  auto limit = read_limit(r, "max_output_tokens");
  if (auto* e = std::get_if<ApiError>(&limit)) return std::move(*e);
  r.max_tokens = std::get<std::optional<std::int64_t>>(limit);
  if (const Member* p = r.body.find("previous_response_id"); present(p)) {
    if (p->v.type != Type::kString || p->v.size == 0) {
      return invalid_request("previous_response_id must be a non-empty string",
                             "previous_response_id", "invalid_type");
    }
    r.previous_response_id = r.body.string_of(*p);
  }
  auto background = read_bool(r, "background");
  if (auto* e = std::get_if<ApiError>(&background)) return std::move(*e);
  r.background = std::get<std::optional<bool>>(background).value_or(false);
  // Usage always comes on response.completed: nothing to ask for.
  r.include_usage = true;
  r.reasoning_effort = reasoning_effort_of(r.body);
  take_route(r);
  return r;
}

std::variant<ChatRequest, ApiError> parse_embeddings_request(std::string_view content_type,
                                                             std::string body) {
  ChatRequest r;
  r.operation = config::Operation::kEmbeddings;
  if (auto e = parse_json_body(content_type, std::move(body), r.body)) return std::move(*e);
  if (auto e = read_model(r)) return std::move(*e);
  if (auto e = require(r, "input", string_or_array,
                       "a non-empty string or a non-empty array of strings or token arrays")) {
    return std::move(*e);
  }
  if (const Member* f = r.body.find("encoding_format"); present(f)) {
    const std::string format = r.body.string_of(*f);
    if (f->v.type != Type::kString || (format != "float" && format != "base64")) {
      return invalid_request("encoding_format must be \"float\" or \"base64\"", "encoding_format",
                             "invalid_value");
    }
  }
  if (const Member* d = r.body.find("dimensions"); present(d)) {
    if (!integer_at_least(*d, 1)) {
      return invalid_request("dimensions must be a positive integer", "dimensions", "invalid_type");
    }
  }
  if (const Member* s = r.body.find("stream"); present(s) && s->v.type != Type::kFalse) {
    return invalid_request("embeddings are not streamed", "stream", "invalid_value");
  }
  take_route(r);
  return r;
}

std::variant<ChatRequest, ApiError> parse_completions_request(std::string_view content_type,
                                                              std::string body) {
  ChatRequest r;
  r.operation = config::Operation::kCompletions;
  if (auto e = parse_json_body(content_type, std::move(body), r.body)) return std::move(*e);
  if (auto e = read_model(r)) return std::move(*e);
  if (auto e = require(
          r, "prompt",
          [](const Member& m) {
            return m.v.type == Type::kString || (m.v.type == Type::kArray && m.v.size > 0);
          },
          "a string or a non-empty array")) {
    return std::move(*e);
  }
  if (auto e = read_stream_and_limits(r)) return std::move(*e);
  take_route(r);
  return r;
}

std::variant<ChatRequest, ApiError> parse_chat_request(std::string_view content_type,
                                                       std::string body) {
  ChatRequest r;
  if (auto e = parse_json_body(content_type, std::move(body), r.body)) return std::move(*e);
  if (auto e = read_model(r)) return std::move(*e);
  if (auto e = read_messages(r)) return std::move(*e);
  if (auto e = read_stream_and_limits(r)) return std::move(*e);
  r.reasoning_effort = reasoning_effort_of(r.body);
  take_route(r);
  return r;
}

}  // namespace llmgate::gateway
