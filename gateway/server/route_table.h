// The gateway's paths as data (route_table.cpp): which endpoint a request's
// path names, the methods it answers and the listener that serves it. The
// session dispatches on the endpoint (endpoints.cpp); nothing else matches
// paths. Beast-free: unit-tested as a table (tests/unit/gateway).
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "config/config.h"
#include "gateway/proxy/response_owners.h"

namespace llmgate::gateway {

enum class Endpoint {
  kApi,          // POST a client API of `operation` (/v1/chat/completions, /v1/responses, ...)
  kMessages,     // POST /v1/messages: Anthropic's Messages API
  kCountTokens,  // POST /v1/messages/count_tokens
  kResponse,     // /v1/responses/{id}[/input_items|/cancel]: forwarded to its provider
  kModels,       // GET /v1/models
  kModel,        // GET /v1/models/{id}
  kMetrics,      // GET /metrics (Prometheus)
  kHealthz,      // GET /healthz (liveness)
  kReadyz,       // GET /readyz (readiness)
  kConsole,      // GET /admin/console
  kHistory,      // GET /admin/history
  kRoutes,       // GET /admin/routes
  kAdminOther,   // another /admin/ path (its key is checked, then 404)
  kUnknown,
};

struct Route {
  Endpoint endpoint = Endpoint::kUnknown;
  // The methods it answers, as an Allow header says them ("GET" answers
  // HEAD too); empty: any (kResponse checks its own), or none (kUnknown).
  std::string_view allow;
  // An operator's path (probes, scrapes, /admin/*): served on the admin
  // listener when there is one, needs no API key.
  bool admin = false;
  // kApi: the operation; kModel: the model id, percent-decoded; kResponse:
  // the stored response and the part of it named.
  std::optional<config::Operation> operation;
  std::string model_id;
  std::optional<ResponsePath> response;

  // Whether `method` ("GET", "POST", ...) is one it answers.
  bool allows(std::string_view method) const;
};

// The route of a request target's path (origin-form, no query). The
// session asks once per request, after its head (endpoints.cpp dispatches
// on what it found).
Route route_of(std::string_view path);

// The path of a POST's request line at the start of a raw request head,
// else nullopt (before Beast parses the head: the body limit depends on it).
std::optional<std::string_view> post_path(std::string_view head);

// The query of a request target ("" without one).
std::string_view query_of(std::string_view target);

}  // namespace llmgate::gateway
