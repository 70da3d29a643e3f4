// The simulator's Amazon Bedrock mode (sim_bedrock.h). The event-stream
// messages and the SigV4 signatures are made with the gateway's own
// providers/event_stream.h and providers/cloud/sigv4.h: the gateway's
// agreement with AWS's own implementations is what tests/e2e/bedrock.test.mjs
// checks (AWS's signer and codec on the other side).
#include "tools/sim/sim_bedrock.h"

#include <nlohmann/json.hpp>
#include <regex>

#include "providers/cloud/sigv4.h"
#include "providers/event_stream.h"
#include "tools/sim/sim_profile.h"

namespace llmgate::sim {
namespace {

using json = nlohmann::json;

ApiError validation(std::string message) {
  return ApiError{400, std::move(message), "ValidationException", std::nullopt, std::nullopt};
}

std::string message(std::string_view type, const json& payload) {
  const providers::EventStreamHeader h[] = {
      {":event-type", type}, {":content-type", "application/json"}, {":message-type", "event"}};
  return providers::encode_event_stream_message(h, payload.dump());
}

// The text of a Converse message's content blocks.
std::size_t converse_chars(const json& content, std::string* text = nullptr) {
  std::size_t chars = 0;
  if (!content.is_array()) return 0;
  for (const auto& block : content) {
    if (!block.is_object()) continue;
    if (auto t = block.find("text"); t != block.end() && t->is_string()) {
      chars += t->get_ref<const std::string&>().size();
      if (text) *text += t->get_ref<const std::string&>();
    } else {
      chars += block.dump().size();  // tool use and results, images: their size
    }
  }
  return chars;
}

std::string_view stop_reason(const Answer& a, bool capped) {
  if (capped) return "max_tokens";
  return a.output == Profile::Output::kToolCall ? "tool_use" : "end_turn";
}

json usage(const Answer& a, std::int64_t prompt_tokens, std::int64_t cached_tokens) {
  // Bedrock counts cache reads apart from inputTokens.
  const std::int64_t cached = std::min(cached_tokens, prompt_tokens);
  json u = {{"inputTokens", prompt_tokens - cached},
            {"outputTokens", a.tokens},
            {"totalTokens", prompt_tokens + a.tokens}};
  if (cached > 0) u["cacheReadInputTokens"] = cached;
  return u;
}

}  // namespace

std::optional<ConverseTarget> converse_target(std::string_view path) {
  constexpr std::string_view kPrefix = "/model/";
  if (!path.starts_with(kPrefix)) return std::nullopt;
  path.remove_prefix(kPrefix.size());
  const std::size_t slash = path.find('/');
  if (slash == std::string_view::npos || slash == 0) return std::nullopt;
  const std::string_view op = path.substr(slash + 1);
  if (op != "converse" && op != "converse-stream") return std::nullopt;
  std::optional<std::string> model = percent_decode(path.substr(0, slash));
  if (!model) return std::nullopt;
  return ConverseTarget{std::move(*model), op == "converse-stream"};
}

std::variant<ChatRequest, ApiError> parse_converse_request(std::string_view body,
                                                           const ConverseTarget& target) {
  const json j = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return validation("Malformed input request, please reformat your input.");
  const auto messages = j.find("messages");
  if (messages == j.end() || !messages->is_array() || messages->empty()) {
    return validation(
        "The model returned the following errors: messages: at least one message is required");
  }
  ChatRequest r;
  r.model = target.model;
  r.stream = target.stream;
  r.include_usage = true;  // metadata always comes
  std::size_t chars = 0;
  for (const auto& m : *messages) {
    if (!m.is_object() || !m.contains("role") || !m["role"].is_string()) {
      return validation("Malformed input request: messages[].role is required.");
    }
    if (auto c = m.find("content"); c != m.end()) chars += converse_chars(*c);
  }
  if ((*messages)[0]["role"] != "user") {
    return validation(
        "A conversation must start with a user message. Try again with a "
        "conversation that starts with a user message.");
  }
  if (auto system = j.find("system"); system != j.end()) chars += converse_chars(*system);
  r.prompt_tokens = tokens_for_chars(chars);
  if (const json& last = messages->back(); last["role"] == "assistant") {
    std::string text;
    if (auto c = last.find("content"); c != last.end()) converse_chars(*c, &text);
    r.prefill = std::move(text);
  }
  if (auto config = j.find("inferenceConfig"); config != j.end() && config->is_object()) {
    if (auto max = config->find("maxTokens"); max != config->end()) {
      if (!max->is_number_integer() || max->get<std::int64_t>() < 1)
        return validation("inferenceConfig.maxTokens must be a positive integer.");
      r.max_tokens = max->get<std::int64_t>();
    }
  }
  return r;
}

std::optional<ApiError> check_sigv4(std::string_view method, std::string_view target,
                                    std::string_view body,
                                    const std::function<std::string(std::string_view)>& header,
                                    const AwsKey& key) {
  static const std::regex kAuth(
      "AWS4-HMAC-SHA256 Credential=([^/]+)/(\\d{8})/([^/]+)/([^/]+)/aws4_request, "
      "SignedHeaders=([a-z0-9;-]+), Signature=([0-9a-f]{64})");
  const std::string auth = header("authorization");
  std::smatch m;
  if (!std::regex_match(auth, m, kAuth)) {
    return ApiError{403, "Missing Authentication Token", "MissingAuthenticationTokenException",
                    std::nullopt, std::nullopt};
  }
  if (m[1] != key.access_key_id ||
      (!key.session_token.empty() && header("x-amz-security-token") != key.session_token)) {
    return ApiError{403, "The security token included in the request is invalid.",
                    "UnrecognizedClientException", std::nullopt, std::nullopt};
  }
  // Signed again over the headers the request names (the ones sign() adds
  // itself -- host, x-amz-date, the token, the payload hash -- as it adds them).
  const std::size_t q = target.find('?');
  providers::cloud::SigV4Request r;
  r.method = method;
  const std::string host = header("host");
  r.host = host;
  r.path = target.substr(0, q);
  r.query = q == std::string_view::npos ? std::string_view() : target.substr(q + 1);
  r.payload = body;
  std::string names = m[5];
  for (std::size_t at = 0; at <= names.size();) {
    const std::size_t semi = std::min(names.find(';', at), names.size());
    const std::string name = names.substr(at, semi - at);
    if (name != "host" && name != "x-amz-date" && name != "x-amz-security-token" &&
        name != "x-amz-content-sha256") {
      r.headers.emplace_back(name, header(name));
    }
    at = semi + 1;
  }
  providers::cloud::AwsCredentials creds{key.access_key_id, key.secret_access_key,
                                         header("x-amz-security-token")};
  const auto when = providers::cloud::sigv4_parse_amz_date(header("x-amz-date"));
  if (!when) {
    return ApiError{403,
                    "Authorization header requires existence of either a 'X-Amz-Date' or "
                    "a 'Date' header.",
                    "IncompleteSignatureException", std::nullopt, std::nullopt};
  }
  const auto expected =
      providers::cloud::sigv4_sign(r, creds, std::string(m[3]), std::string(m[4]), *when);
  if (expected.authorization != auth) {
    return ApiError{403,
                    "The request signature we calculated does not match the signature you "
                    "provided. Check your AWS Secret Access Key and signing method. Consult the "
                    "service documentation for details.",
                    "InvalidSignatureException", std::nullopt, std::nullopt};
  }
  return std::nullopt;
}

std::string bedrock_error_body(const ApiError& e) { return json{{"message", e.message}}.dump(); }

ApiError bedrock_injected_error(int status) {
  if (status == 429) {
    return ApiError{429, "Too many requests, please wait before trying again. (simulated)",
                    "ThrottlingException", std::nullopt, std::nullopt};
  }
  if (status == 503) {
    return ApiError{503, "Bedrock is unable to process your request. (simulated)",
                    "ServiceUnavailableException", std::nullopt, std::nullopt};
  }
  return ApiError{status, "The server encountered an internal error. (simulated)",
                  "InternalServerException", std::nullopt, std::nullopt};
}

BedrockFormatter::BedrockFormatter(Answer answer, bool capped, std::int64_t prompt_tokens,
                                   std::int64_t cached_tokens)
    : answer_(std::move(answer)),
      capped_(capped),
      prompt_tokens_(prompt_tokens),
      cached_tokens_(cached_tokens) {}

void BedrockFormatter::open(std::string& out) {
  // Bedrock pads each payload ("p") against length side channels.
  out += message("messageStart", {{"role", "assistant"}, {"p", "abcdefghijkl"}});
}

void BedrockFormatter::token(std::string& out, int k) {
  const bool thought = k < answer_.reasoning;
  if (!thought && answer_.output == Profile::Output::kToolCall) return;  // whole, at the end
  json delta = thought ? json{{"reasoningContent", {{"text", answer_.word(k)}}}}
                       : json{{"text", answer_.word(k)}};
  out += message("contentBlockDelta",
                 {{"contentBlockIndex", thought ? 0 : (answer_.reasoning > 0 ? 1 : 0)},
                  {"delta", std::move(delta)}});
}

void BedrockFormatter::tail(std::string& out, int) {
  const int block = answer_.reasoning > 0 ? 1 : 0;
  if (answer_.output == Profile::Output::kToolCall && answer_.answer_tokens() > 0) {
    out +=
        message("contentBlockStart",
                {{"contentBlockIndex", block},
                 {"start", {{"toolUse", {{"toolUseId", answer_.call_id}, {"name", "lookup"}}}}}});
    out += message("contentBlockDelta",
                   {{"contentBlockIndex", block},
                    {"delta", {{"toolUse", {{"input", answer_.tool_arguments()}}}}}});
  }
  out += message("contentBlockStop", {{"contentBlockIndex", block}});
  out += message("messageStop", {{"stopReason", stop_reason(answer_, capped_)}});
  out += message("metadata", {{"usage", usage(answer_, prompt_tokens_, cached_tokens_)},
                              {"metrics", {{"latencyMs", 100}}}});
}

void BedrockFormatter::truncated(std::string& out) {
  const std::string whole =
      message("contentBlockDelta", {{"contentBlockIndex", 0}, {"delta", {{"text", " cut"}}}});
  out.append(whole, 0, whole.size() / 2);
}

void BedrockFormatter::malformed(std::string& out) {
  const providers::EventStreamHeader h[] = {{":event-type", "contentBlockDelta"},
                                            {":content-type", "application/json"},
                                            {":message-type", "event"}};
  out += providers::encode_event_stream_message(h, "{not json");
}

void BedrockFormatter::error(std::string& out) {
  const providers::EventStreamHeader h[] = {{":exception-type", "modelStreamErrorException"},
                                            {":content-type", "application/json"},
                                            {":message-type", "exception"}};
  out += providers::encode_event_stream_message(
      h, json{{"message", "The model stopped generating (simulated)."}, {"originalStatusCode", 500}}
             .dump());
}

std::string converse_response_body(const Answer& answer, bool capped, std::int64_t prompt_tokens,
                                   std::int64_t cached_tokens) {
  json content = json::array();
  if (answer.reasoning > 0 && !answer.reasoning_hidden)
    content.push_back(
        {{"reasoningContent", {{"reasoningText", {{"text", answer.reasoning_text()}}}}}});
  if (answer.output == Profile::Output::kToolCall && answer.answer_tokens() > 0) {
    content.push_back({{"toolUse",
                        {{"toolUseId", answer.call_id},
                         {"name", "lookup"},
                         {"input", json::parse(answer.tool_arguments(), nullptr, false)}}}});
  } else {
    content.push_back({{"text", answer.answer_text()}});
  }
  return json{{"output", {{"message", {{"role", "assistant"}, {"content", std::move(content)}}}}},
              {"stopReason", stop_reason(answer, capped)},
              {"usage", usage(answer, prompt_tokens, cached_tokens)},
              {"metrics", {{"latencyMs", 100}}}}
      .dump();
}

}  // namespace llmgate::sim
