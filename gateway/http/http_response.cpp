// The gateway's own JSON answers and errors (http_response.h).
#include "gateway/http/http_response.h"

#include <string>
#include <utility>

namespace llmgate::gateway {

Response make_json_response(const RequestContext& rc, http::status status, std::string body) {
  Response res{status, rc.version};
  // Beast knows no reason phrase for Anthropic's 529.
  if (static_cast<unsigned>(status) == 529) res.reason("Overloaded");
  res.set(http::field::content_type, "application/json");
  res.set("x-request-id", rc.request_id);
  res.body() = std::move(body);
  res.keep_alive(rc.keep_alive);
  res.prepare_payload();
  return res;
}

Response make_error_response(const RequestContext& rc, const ApiError& error) {
  Response res = make_json_response(rc, static_cast<http::status>(error.status_for(rc.error_shape)),
                                    error.body(rc.error_shape));
  if (error.retry_after_s) {
    // The OpenAI SDKs retry on this header: a wait that ends (saturation, a
    // rate limit, a drain) is worth their retry.
    res.set(http::field::retry_after, std::to_string(*error.retry_after_s));
    res.set("x-should-retry", "true");
  }
  return res;
}

}  // namespace llmgate::gateway
