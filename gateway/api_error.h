// OpenAI-shaped errors: {"error":{"message","type","param","code"}}.
//
// Every error llmgate itself produces goes through here, so clients (and the
// OpenAI SDKs, which map status codes to exception types) see one shape.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace llmgate::gateway {

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
};

ApiError invalid_request(std::string message, std::optional<std::string> param = std::nullopt,
                         std::optional<std::string> code = std::nullopt);

// A 405 for `method` on `path` (the caller sets the Allow header).
ApiError method_not_allowed(std::string_view method, std::string_view path);

}  // namespace llmgate::gateway
