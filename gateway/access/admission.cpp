#include "gateway/access/admission.h"

#include <algorithm>

namespace llmgate::gateway {
namespace {

Refusal refuse(ApiError e, std::optional<AuthRejection> auth = std::nullopt) {
  return Refusal{std::move(e), auth, {}};
}

// Our own Via name on the way in: a provider's base_url leads back here.
std::optional<Refusal> loop(const RequestHead& head, std::string_view via_name) {
  for (std::string_view v : head.via) {
    if (via_name.empty() || v.find(via_name) == std::string_view::npos) continue;
    Refusal r = refuse(ApiError{508, "server_error",
                                "request loop: this request has already passed through this "
                                "gateway (a provider's base_url points back at it)",
                                std::nullopt, "loop_detected", std::nullopt});
    r.log = "request loop (Via: " + std::string(v.substr(0, 200)) +
            "): a provider's base_url points back at this gateway";
    return r;
  }
  return std::nullopt;
}

// A conversation's explicit key: x-llmgate-session, else the body's
// prompt_cache_key (OpenAI's: `body` is a chat or Responses one); hashed with its kind and the
// gateway key's name (one tenant's session ids never meet another's). 0: none.
std::uint64_t conversation_key(const RequestHead& head, const providers::RequestBody* body,
                               const config::GatewayKey* key) {
  const std::uint64_t seed = config::hash64(key ? std::string_view(key->name) : "");
  const auto nonzero = [](std::uint64_t h) { return h == 0 ? std::uint64_t{1} : h; };
  if (head.header) {
    if (auto id = head.header("x-llmgate-session"); id && !id->empty())
      return nonzero(config::hash64(*id, config::hash64("session", seed)));
  }
  // OpenAI's own: requests that share a prefix the client wants cached.
  const auto* m = body ? body->find("prompt_cache_key") : nullptr;
  if (m && m->v.type == providers::RequestBody::Type::kString && m->v.size > 0)
    return nonzero(config::hash64(body->text_of(*m), config::hash64("prompt_cache_key", seed)));
  return 0;
}

}  // namespace

Refused refused_as(const ApiError& error, std::optional<AuthRejection> auth) {
  // The gateway's own failure, whatever a caller took it for.
  if (error.code == "shared_state_unavailable") return Refused::kSharedStateUnavailable;
  if (auth) {
    switch (*auth) {
      case AuthRejection::kUnauthenticated:
      case AuthRejection::kAdminUnauthenticated:
        return Refused::kUnauthenticated;
      case AuthRejection::kModelNotAllowed:
        return Refused::kModelNotAllowed;
      case AuthRejection::kRateLimited:
        return Refused::kRateLimited;
      case AuthRejection::kBudgetExhausted:
        return Refused::kBudgetExhausted;
    }
  }
  if (error.code == "loop_detected") return Refused::kLoopDetected;
  if (error.status == 404) return Refused::kNotFound;
  return Refused::kInvalidRequest;
}

std::variant<Admitted, Refusal> admit(const ClientApi& api, const RequestHead& head,
                                      std::string body, const config::Config& cfg, KeyStore& keys,
                                      std::string_view via_name) {
  Admitted a;
  // Gateway keys first, as OpenAI does: a caller without a valid key learns
  // nothing about models or request shape.
  if (keys.enabled()) {
    auto k = keys.authenticate(head.authorization, head.x_api_key);
    if (auto* e = std::get_if<ApiError>(&k)) return refuse(*e, AuthRejection::kUnauthenticated);
    a.key = std::get<const config::GatewayKey*>(k);
  }
  if (auto r = loop(head, via_name)) return *r;
  auto parsed = api.parse_for(head.content_type, std::move(body), cfg);
  if (auto* e = std::get_if<ApiError>(&parsed)) return refuse(*e);
  a.req = std::move(std::get<ChatRequest>(parsed));
  // The document the prompt is read from: an Anthropic client's own (what
  // its deployments are sent, documents and all; the chat translation is
  // written only if another deployment is tried), else the body.
  const providers::RequestBody& sent = a.req.native ? *a.req.native : a.req.body;
  a.req.prompt = providers::measure_prompt(sent.text());
  if (api.operation() == config::Operation::kChat ||
      api.operation() == config::Operation::kResponses) {
    a.req.prefixes = providers::prompt_prefixes(sent);
    a.req.conversation_key = conversation_key(head, a.req.native ? nullptr : &a.req.body, a.key);
  }
  a.model = cfg.find_model(a.req.model);
  // Refusals from here on name the model (llmgate_requests_total's label).
  const auto of_model = [&](Refusal r) {
    r.model = a.model;
    return r;
  };
  if (a.model == nullptr) {
    return refuse(ApiError{404, "invalid_request_error",
                           "The model `" + a.req.model.substr(0, 200) +
                               "` does not exist or you do not have access to it.",
                           "model", "model_not_found", std::nullopt});
  }
  // A key that may not use the model learns nothing more about it: 403 on
  // every endpoint, before what the model serves.
  if (a.key) {
    if (auto denied = model_refusal(*a.key, a.model->name)) {
      return of_model(refuse(*denied, rejection_of(*denied)));
    }
  }
  // A model none of whose deployments serves this endpoint: a clear 400,
  // never an upstream's 404.
  const config::Operation op = api.operation();
  if (std::none_of(a.model->deployments.begin(), a.model->deployments.end(),
                   [op](const config::Deployment& d) { return d.serves(op); })) {
    return of_model(refuse(ApiError{400, "invalid_request_error",
                                    "The model `" + a.model->name + "` is not served at " +
                                        config::endpoint_of(op) + " (no deployment lists \"" +
                                        config::to_string(op) + "\" in its operations)",
                                    "model", "unsupported_operation", std::nullopt}));
  }
  if (a.key) {
    if (auto denied = keys.authorize(*a.key, a.model->name)) {
      return of_model(refuse(*denied, rejection_of(*denied)));
    }
  }
  // Per-request routing overrides: the body's `route` object and x-llmgate-*
  // headers. A bad one is the caller's mistake: 400, saying what is wrong.
  auto route = routing::parse_route_override(a.req.route, head.header);
  std::optional<std::string> route_error;
  if (auto* e = std::get_if<std::string>(&route)) {
    route_error = *e;
  } else {
    route_error = routing::check_override(std::get<routing::RouteOverride>(route), *a.model);
  }
  if (route_error) {
    return of_model(refuse(ApiError{400, "invalid_request_error", *route_error, "route",
                                    "invalid_route", std::nullopt}));
  }
  a.route = std::move(std::get<routing::RouteOverride>(route));
  return a;
}

}  // namespace llmgate::gateway
