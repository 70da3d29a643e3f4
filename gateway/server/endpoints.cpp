// A request's dispatch (gateway_impl.h): by its route (route_table.h) to a
// client API (proxy/chat_proxy.h), Anthropic's token count, a stored
// response's provider, or one of the gateway's own answers -- the models a
// key may use, /metrics, the probes, and /admin/* behind the admin key.
#include <algorithm>
#include <charconv>
#include <ctime>

#include "config/rfc3339.h"
#include "gateway/server/gateway_impl.h"
#include "gateway/server/route_table.h"

namespace llmgate::gateway {
namespace {

// When this process started (Unix seconds): a model's stable `created`.
// Read at the program's start (a function's static would be the time of
// the first /v1/models call).
const std::int64_t kProcessStartUnix = std::chrono::duration_cast<std::chrono::seconds>(
                                           std::chrono::system_clock::now().time_since_epoch())
                                           .count();
std::int64_t process_start_unix() { return kProcessStartUnix; }

// A model as OpenAI lists it; `owned_by` names the providers that serve it
// to a caller that may see how it is routed (`explain`), else "llmgate".
nlohmann::json model_object(const config::Model& m, bool explain) {
  // What it serves (an extra field: the SDKs ignore it): the operations
  // some deployment of it lists.
  nlohmann::json operations = nlohmann::json::array();
  for (config::Operation op : config::kAllOperations) {
    if (std::any_of(m.deployments.begin(), m.deployments.end(),
                    [op](const config::Deployment& d) { return d.serves(op); }))
      operations.push_back(config::to_string(op));
  }
  std::vector<std::string> providers;
  if (!explain) {
    return {{"id", m.name},
            {"object", "model"},
            {"created", process_start_unix()},
            {"owned_by", "llmgate"},
            {"operations", std::move(operations)}};
  }
  for (const auto& d : m.deployments) {
    if (std::find(providers.begin(), providers.end(), d.provider) == providers.end())
      providers.push_back(d.provider);
  }
  std::string owners;
  for (const auto& p : providers) owners.append(owners.empty() ? "" : ",").append(p);
  return {{"id", m.name},
          {"object", "model"},
          {"created", process_start_unix()},
          {"owned_by", owners.empty() ? std::string("llmgate") : owners},
          {"operations", std::move(operations)}};
}

// A model as Anthropic lists it (GET /v1/models with anthropic-version).
nlohmann::ordered_json anthropic_model_object(const config::Model& m) {
  const std::string created = config::format_rfc3339_utc(
      std::chrono::system_clock::from_time_t(static_cast<std::time_t>(process_start_unix())));
  return {{"type", "model"}, {"id", m.name}, {"display_name", m.name}, {"created_at", created}};
}

// Anthropic's list: one page holds them all.
std::string anthropic_models_body(const config::Config& cfg, const config::GatewayKey* key) {
  nlohmann::ordered_json data = nlohmann::ordered_json::array();
  for (const auto& m : cfg.models) {
    if (key_allows(key, m.name)) data.push_back(anthropic_model_object(m));
  }
  nlohmann::ordered_json first = data.empty() ? nlohmann::ordered_json() : data.front()["id"];
  nlohmann::ordered_json last = data.empty() ? nlohmann::ordered_json() : data.back()["id"];
  return nlohmann::ordered_json{{"data", std::move(data)},
                                {"has_more", false},
                                {"first_id", std::move(first)},
                                {"last_id", std::move(last)}}
      .dump();
}

std::string models_body(const config::Config& cfg, const config::GatewayKey* key) {
  nlohmann::json data = nlohmann::json::array();
  for (const auto& m : cfg.models) {
    if (key_allows(key, m.name)) data.push_back(model_object(m, may_explain(cfg, key)));
  }
  return nlohmann::json{{"object", "list"}, {"data", std::move(data)}}.dump();
}

}  // namespace

namespace {

// A Content-Encoding other than identity: the body is re-encoded upstream as
// plain JSON, and a compressed one would be parsed as garbage or forwarded
// under a wrong Content-Encoding.
std::optional<std::string_view> unsupported_encoding(const Request& req) {
  for (const auto& f : req) {
    if (f.name() == http::field::content_encoding && !beast::iequals(f.value(), "identity"))
      return f.value();
  }
  return std::nullopt;
}

}  // namespace

net::awaitable<bool> Gateway::Impl::dispatch(WorkerThread& w, beast::tcp_stream& stream,
                                             Request& req, RequestContext& rc, const Route& route,
                                             bool admin) {
  // Not a coroutine: the session awaits the handler returned (its arguments
  // are the session's, alive until it has).
  if (!admin && req.method() == http::verb::post && !unsupported_encoding(req)) {
    switch (route.endpoint) {
      case Endpoint::kApi:
        return handle_api_request(w.worker, stream, req, rc, client_api(*route.operation));
      case Endpoint::kMessages:
        return handle_api_request(w.worker, stream, req, rc, messages_api());
      case Endpoint::kCountTokens:
        return handle_count_tokens(w.worker, stream, req, rc);
      default:
        break;
    }
  }
  return answer_here(w, stream, req, rc, route, admin);
}

net::awaitable<bool> Gateway::Impl::answer_here(WorkerThread& w, beast::tcp_stream& stream,
                                                Request& req, RequestContext& rc,
                                                const Route& route, bool admin) {
  if (const std::optional<std::string_view> encoding = unsupported_encoding(req)) {
    Response res = make_error_response(
        rc, ApiError{415, "invalid_request_error",
                     "Content-Encoding " + std::string(encoding->substr(0, 64)) +
                         " is not supported: send the request body uncompressed",
                     std::nullopt, "unsupported_content_encoding", std::nullopt});
    co_return co_await write_response(stream, res, kWriteTimeout);
  }
  if (!admin && route.endpoint == Endpoint::kResponse) {
    // (Its part's methods are its own.)
    co_return co_await handle_response_resource(w.worker, stream, req, rc, *route.response);
  }
  // Every other answer is built first and written once. (No temporaries live
  // across a co_await: GCC 12 mis-destroys some of them in coroutines.)
  const std::string_view path = request_path(req.target()).value_or("");
  const auto snap = w.worker.snapshot;
  Response res = simple_response(*snap, req, route, path, rc, admin);
  co_return co_await write_response(stream, res, kWriteTimeout);
}

// With an admin listener, /admin/* is served there only; an admin key, if
// configured, is needed on any listener.
std::optional<ApiError> Gateway::Impl::admin_refusal(const Snapshot& snap, const Request& req,
                                                     bool admin) const {
  if (!admin && snap.config->server.admin_listener) {
    return ApiError{404,
                    "invalid_request_error",
                    "/admin/* is served on the admin listener only (server.admin_listener)",
                    std::nullopt,
                    "unknown_url",
                    std::nullopt};
  }
  if (snap.keys->admin_allowed(req[http::field::authorization])) return std::nullopt;
  metrics->on_auth_rejected(AuthRejection::kAdminUnauthenticated);
  return ApiError{401,
                  "invalid_request_error",
                  "/admin/* needs the admin key (auth.admin_key_sha256) as "
                  "'Authorization: Bearer <key>'",
                  std::nullopt,
                  "invalid_api_key",
                  std::nullopt};
}

// GET /v1/models: the models the caller's key may use; GET /v1/models/{id}:
// one of them (404 for any other, as OpenAI answers).
Response Gateway::Impl::models_response(const Snapshot& snap, const Request& req,
                                        const RequestContext& rc, const std::string* id) const {
  const config::GatewayKey* key = nullptr;
  if (snap.keys->enabled()) {
    auto a = snap.keys->authenticate(req[http::field::authorization], req["x-api-key"]);
    if (auto* e = std::get_if<ApiError>(&a)) {
      metrics->on_auth_rejected(AuthRejection::kUnauthenticated);
      return make_error_response(rc, *e);
    }
    key = std::get<const config::GatewayKey*>(a);
  }
  if (!id) {
    return make_json_response(rc, http::status::ok,
                              rc.error_shape == ErrorShape::kAnthropic
                                  ? anthropic_models_body(*snap.config, key)
                                  : models_body(*snap.config, key));
  }
  const config::Model* m = snap.config->find_model(*id);
  if (!m || !key_allows(key, m->name)) {
    return make_error_response(rc, ApiError{404, "invalid_request_error",
                                            "The model '" + id->substr(0, 200) +
                                                "' does not exist or you do not have access to it.",
                                            std::nullopt, "model_not_found", std::nullopt});
  }
  return make_json_response(rc, http::status::ok,
                            rc.error_shape == ErrorShape::kAnthropic
                                ? anthropic_model_object(*m).dump()
                                : model_object(*m, may_explain(*snap.config, key)).dump());
}

Response Gateway::Impl::simple_response(const Snapshot& snap, const Request& req,
                                        const Route& route, std::string_view path,
                                        const RequestContext& rc, bool admin) const {
  const config::Config& cfg = *snap.config;
  routing::RoutingState& rs = *snap.routing;
  if (admin && !route.admin) {
    ApiError e{404,
               "invalid_request_error",
               "unknown path " + std::string(path.substr(0, 200)) +
                   " on the admin listener (it serves /metrics, /healthz, /readyz and /admin/*; "
                   "the API is on the main listener)",
               std::nullopt,
               "unknown_url",
               std::nullopt};
    return make_error_response(rc, e);
  }
  // /admin/* needs its key before anything is said of the path.
  if (path.substr(0, 7) == "/admin/") {
    if (auto e = admin_refusal(snap, req, admin)) {
      Response res = make_error_response(rc, *e);
      // A browser asks for the key (as the password) and sends it on from
      // then on: the console works without a client of its own.
      if (e->status == 401)
        res.set(http::field::www_authenticate, R"(Basic realm="llmgate admin")");
      return res;
    }
  }
  const std::string_view method(req.method_string().data(), req.method_string().size());
  if (!route.allow.empty() && !route.allows(method)) {
    Response res = make_error_response(rc, method_not_allowed(req.method_string(), path));
    res.set(http::field::allow, beast::string_view(route.allow.data(), route.allow.size()));
    return res;
  }
  switch (route.endpoint) {
    case Endpoint::kModels:
      return models_response(snap, req, rc);
    case Endpoint::kModel:
      return models_response(snap, req, rc, &route.model_id);
    case Endpoint::kMetrics: {
      Response res = make_json_response(rc, http::status::ok, metrics->scrape(cfg, rs));
      res.set(http::field::content_type, "text/plain; version=0.0.4; charset=utf-8");
      return res;
    }
    case Endpoint::kHealthz:
      // Liveness: this process answers. Never depends on upstreams.
      return make_json_response(rc, http::status::ok, R"({"status":"ok"})");
    case Endpoint::kReadyz: {
      // Ready once serving and every credential the gateway fetches itself
      // has had its first answer (either way: a refused one fails its
      // deployments over, as an outage does, and never holds readiness).
      std::string fetching;
      for (const auto& [name, cell] : snap.credentials) {
        if (!cell->settled()) fetching += (fetching.empty() ? "" : ", ") + name;
      }
      const bool ok = ready.load() && fetching.empty();
      const std::string body =
          ok                ? R"({"status":"ready"})"
          : draining.load() ? R"({"status":"draining"})"
          : ready.load()
              ? nlohmann::json{{"status", "starting"}, {"fetching_credentials", fetching}}.dump()
              : R"({"status":"not ready"})";
      return make_json_response(rc, ok ? http::status::ok : http::status::service_unavailable,
                                body);
    }
    case Endpoint::kConsole:
      return console_response(rc);
    case Endpoint::kHistory:
      return history_response(req, rc);
    case Endpoint::kRoutes: {
      // Live per-deployment measurements: why routes are chosen.
      if (query_of(req.target()) == "format=text") {
        Response res = make_json_response(rc, http::status::ok, routes_text(cfg, rs, &quirks));
        res.set(http::field::content_type, "text/plain; charset=utf-8");
        return res;
      }
      return make_json_response(rc, http::status::ok, routes_json(cfg, rs, &quirks));
    }
    default:
      break;
  }
  ApiError e{404,
             "invalid_request_error",
             "unknown path " + std::string(path.substr(0, 200)) +
                 " (llmgate serves /v1/chat/completions, /v1/responses, /v1/embeddings, "
                 "/v1/completions, /v1/messages and /v1/models)",
             std::nullopt,
             "unknown_url",
             std::nullopt};
  return make_error_response(rc, e);
}

Response Gateway::Impl::console_response(const RequestContext& rc) const {
  Response res = make_json_response(rc, http::status::ok, std::string(console_page()));
  res.set(http::field::content_type, "text/html; charset=utf-8");
  res.set(http::field::cache_control, "no-store");
  // Its own script and style only, data from this origin only, never framed.
  res.set("content-security-policy",
          "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; "
          "connect-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'none'; "
          "frame-ancestors 'none'");
  res.set("x-content-type-options", "nosniff");
  res.set("x-frame-options", "DENY");
  res.set("referrer-policy", "no-referrer");
  return res;
}

// The console's last minutes: samples of the routing table, and the
// requests that failed over, were hedged or failed.
Response Gateway::Impl::history_response(const Request& req, const RequestContext& rc) const {
  const std::string_view query = query_of(req.target());
  std::uint64_t after = 0;
  if (!query.empty()) {
    constexpr std::string_view kAfter = "after=";
    auto [end, ec] = std::from_chars(query.data() + std::min(query.size(), kAfter.size()),
                                     query.data() + query.size(), after);
    if (query.substr(0, kAfter.size()) != kAfter || ec != std::errc() ||
        end != query.data() + query.size()) {
      return make_error_response(
          rc, ApiError{400, "invalid_request_error",
                       "/admin/history takes one parameter: after=<cursor> (the cursor of an "
                       "earlier answer)",
                       std::string("after"), "invalid_value", std::nullopt});
    }
  }
  Response res = make_json_response(rc, http::status::ok, history.json(after));
  res.set(http::field::cache_control, "no-store");
  return res;
}

}  // namespace llmgate::gateway
