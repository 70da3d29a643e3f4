#include "gateway/api_error.h"

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
