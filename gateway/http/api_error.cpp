#include "gateway/http/api_error.h"

#include <nlohmann/json.hpp>

namespace llmgate::gateway {
namespace {

nlohmann::json to_json(const ApiError& e) {
  auto opt = [](const std::optional<std::string>& s) {
    return s ? nlohmann::json(*s) : nlohmann::json(nullptr);
  };
  return {
      {"error",
       {{"message", e.message}, {"type", e.type}, {"param", opt(e.param)}, {"code", opt(e.code)}}}};
}

}  // namespace

std::string ApiError::body() const {
  // `replace` keeps invalid UTF-8 from upstream messages from throwing.
  return to_json(*this).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::string ApiError::sse_event() const { return "data: " + body() + "\n\n"; }

namespace {

std::string dump(const nlohmann::ordered_json& j) {
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

nlohmann::ordered_json anthropic_error(std::string_view type, const std::string& message) {
  return {{"type", "error"}, {"error", {{"type", type}, {"message", message}}}};
}

}  // namespace

std::string_view anthropic_error_type(int status) {
  switch (status) {
    case 401:
      return "authentication_error";
    case 402:
      return "billing_error";
    case 403:
      return "permission_error";
    case 404:
      return "not_found_error";
    case 413:
      return "request_too_large";
    case 429:
      return "rate_limit_error";
    case 503:
    case 529:
      return "overloaded_error";
    case 504:
      return "timeout_error";
    default:
      return status >= 400 && status < 500 ? "invalid_request_error" : "api_error";
  }
}

int ApiError::status_for(ErrorShape shape) const {
  return shape == ErrorShape::kAnthropic && status == 503 ? 529 : status;
}

std::string ApiError::body(ErrorShape shape) const {
  if (shape == ErrorShape::kOpenAi) return body();
  return dump(anthropic_error(anthropic_error_type(status_for(shape)), message));
}

std::string ApiError::anthropic_event() const {
  return "event: error\ndata: " + body(ErrorShape::kAnthropic) + "\n\n";
}

std::string error_text_in(ErrorShape shape, const std::string& openai_text, int status) {
  if (shape == ErrorShape::kOpenAi) return openai_text;
  const auto j = nlohmann::json::parse(openai_text, nullptr, false);
  std::string message = "the upstream refused the request (HTTP " + std::to_string(status) + ")";
  if (j.is_object()) {
    auto e = j.find("error");
    if (e != j.end() && e->is_object()) {
      auto m = e->find("message");
      if (m != e->end() && m->is_string()) message = m->get<std::string>();
    }
  }
  return dump(anthropic_error(anthropic_error_type(status), message));
}

ApiError invalid_request(std::string message, std::optional<std::string> param,
                         std::optional<std::string> code) {
  return ApiError{
      400,         "invalid_request_error", std::move(message), std::move(param), std::move(code),
      std::nullopt};
}

ApiError method_not_allowed(std::string_view method, std::string_view path) {
  return ApiError{405,
                  "invalid_request_error",
                  "method " + std::string(method) + " is not allowed on " + std::string(path),
                  std::nullopt,
                  "method_not_allowed",
                  std::nullopt};
}

}  // namespace llmgate::gateway
