// OpenAI-shaped errors: {"error":{"message","type","param","code"}}.
//
// Every error llmgate itself produces goes through here, so clients (and the
// OpenAI SDKs, which map status codes to exception types) see one shape.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace llmgate::gateway {

// The shape the client's API gives its errors: OpenAI's
// {"error": {message, type, param, code}}, or Anthropic's
// {"type": "error", "error": {type, message}} (POST /v1/messages).
enum class ErrorShape { kOpenAi, kAnthropic };

struct ApiError {
  int status = 500;
  std::string type;  // invalid_request_error, authentication_error, rate_limit_error,
                     // upstream_error, server_error, timeout_error
  std::string message;
  std::optional<std::string> param;
  std::optional<std::string> code;
  std::optional<int> retry_after_s;  // sent as Retry-After when set

  std::string body() const;       // the JSON document
  std::string sse_event() const;  // "data: {...}\n\n", for errors after commit

  // In the client API's shape: the document, the status (Anthropic's
  // clients know overload as 529, where the gateway says 503), and the
  // event that ends a stream that failed.
  std::string body(ErrorShape shape) const;
  int status_for(ErrorShape shape) const;
  std::string anthropic_event() const;  // "event: error\ndata: {...}\n\n"
};

// Anthropic's error type for a status (invalid_request_error,
// authentication_error, permission_error, not_found_error,
// request_too_large, rate_limit_error, overloaded_error, timeout_error,
// api_error).
std::string_view anthropic_error_type(int status);

// An OpenAI-shaped error document's text (an upstream's, passed on) in
// `shape` (the type by `status`; the message kept). Text that is not an
// OpenAI error becomes one that names the status.
std::string error_text_in(ErrorShape shape, const std::string& openai_text, int status);

ApiError invalid_request(std::string message, std::optional<std::string> param = std::nullopt,
                         std::optional<std::string> code = std::nullopt);

// A 405 for `method` on `path` (the caller sets the Allow header).
ApiError method_not_allowed(std::string_view method, std::string_view path);

}  // namespace llmgate::gateway
