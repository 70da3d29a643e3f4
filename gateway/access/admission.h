// Admission: from the request head, its body, the gateway keys and the
// config snapshot, either an admitted request (its parsed document, the
// configured model, the caller's key and routing override) or the
// OpenAI-shaped error the client gets. Pure apart from the key's rate
// buckets (authorize() takes a request from them); Beast-free, so every
// refusal is a unit test (tests/unit/gateway/admission_test.cpp).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "config/config.h"
#include "gateway/access/auth.h"
#include "gateway/apis/chat_request.h"
#include "gateway/apis/client_api.h"
#include "gateway/http/api_error.h"
#include "gateway/observe/vocabulary.h"
#include "routing/route_override.h"

namespace llmgate::gateway {

// What admission reads of the request head.
struct RequestHead {
  std::string_view authorization;
  std::string_view content_type;
  std::vector<std::string_view> via;  // every Via line
  routing::HeaderLookup header;       // any other header by lowercase name (x-llmgate-*)
  std::string_view x_api_key;         // the key as Anthropic's clients send it
};

struct Admitted {
  ChatRequest req;
  const config::Model* model = nullptr;
  const config::GatewayKey* key = nullptr;  // when gateway keys are configured
  routing::RouteOverride route;
};

struct Refusal {
  ApiError error;
  std::optional<AuthRejection> auth;     // counted in llmgate_auth_rejections_total
  std::string log;                       // a warn line to log, if any (the request loop)
  const config::Model* model = nullptr;  // when it was known by then
};

// Why a refusal refused (llmgate_requests_total's outcome, the log line's
// reason): shared_state_unavailable by its code, else the key's `auth` reason
// when there is one, else by its error.
Refused refused_as(const ApiError& error, std::optional<AuthRejection> auth);
inline Refused refused_as(const Refusal& r) { return refused_as(r.error, r.auth); }

// In order: the gateway key (401 before anything is learnt about models or
// the request's shape), the request loop (508: our own Via name came back),
// the body (400/415), the model (404), the key's model list and rates
// (403/429), the routing override (400).
std::variant<Admitted, Refusal> admit(const ClientApi& api, const RequestHead& head,
                                      std::string body, const config::Config& cfg, KeyStore& keys,
                                      std::string_view via_name);

}  // namespace llmgate::gateway
