#include "gateway/server/route_table.h"

#include "gateway/http/headers.h"

namespace llmgate::gateway {
namespace {

// The fixed paths. The API's are written with and without /v1, as base
// URLs are (the client APIs' own come from config::endpoint_of).
struct Fixed {
  std::string_view path;
  Endpoint endpoint;
  std::string_view allow;
  bool admin;
};
constexpr Fixed kFixed[] = {
    {"/v1/models", Endpoint::kModels, "GET", false},
    {"/models", Endpoint::kModels, "GET", false},
    {"/v1/messages", Endpoint::kMessages, "POST", false},
    {"/messages", Endpoint::kMessages, "POST", false},
    {"/v1/messages/count_tokens", Endpoint::kCountTokens, "POST", false},
    {"/messages/count_tokens", Endpoint::kCountTokens, "POST", false},
    {"/metrics", Endpoint::kMetrics, "GET", true},
    {"/healthz", Endpoint::kHealthz, "GET", true},
    {"/readyz", Endpoint::kReadyz, "GET", true},
    {"/admin/console", Endpoint::kConsole, "GET", true},
    {"/admin/history", Endpoint::kHistory, "GET", true},
    {"/admin/routes", Endpoint::kRoutes, "GET", true},
};

// "/v1/models/ID" (or "/models/ID"): the percent-decoded ID.
std::optional<std::string> model_path_id(std::string_view path) {
  for (std::string_view prefix : {"/v1/models/", "/models/"}) {
    if (path.substr(0, prefix.size()) != prefix) continue;
    const std::string_view raw = path.substr(prefix.size());
    const auto hex = [](char c) {
      return c >= '0' && c <= '9'   ? c - '0'
             : c >= 'a' && c <= 'f' ? c - 'a' + 10
             : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                    : -1;
    };
    std::string id;
    for (std::size_t i = 0; i < raw.size(); ++i) {
      if (raw[i] == '%' && i + 2 < raw.size() && hex(raw[i + 1]) >= 0 && hex(raw[i + 2]) >= 0) {
        id.push_back(static_cast<char>(hex(raw[i + 1]) * 16 + hex(raw[i + 2])));
        i += 2;
      } else {
        id.push_back(raw[i]);
      }
    }
    return id;
  }
  return std::nullopt;
}

}  // namespace

bool Route::allows(std::string_view method) const {
  if (allow.empty()) return endpoint == Endpoint::kResponse;
  return method == allow || (allow == "GET" && method == "HEAD");
}

Route route_of(std::string_view path) {
  Route r;
  for (const Fixed& f : kFixed) {
    if (path == f.path) {
      r.endpoint = f.endpoint;
      r.allow = f.allow;
      r.admin = f.admin;
      return r;
    }
  }
  const std::string_view unversioned = path.substr(0, 3) == "/v1" ? path.substr(3) : path;
  for (config::Operation op : config::kAllOperations) {
    if (unversioned == std::string_view(config::endpoint_of(op)).substr(3)) {
      r.endpoint = Endpoint::kApi;
      r.allow = "POST";
      r.operation = op;
      return r;
    }
  }
  if (auto id = model_path_id(path)) {
    r.endpoint = Endpoint::kModel;
    r.allow = "GET";
    r.model_id = std::move(*id);
    return r;
  }
  if ((r.response = response_path(path))) {
    r.endpoint = Endpoint::kResponse;  // its methods are the resource's (response_resource.h)
    return r;
  }
  if (path.substr(0, 7) == "/admin/") {
    r.endpoint = Endpoint::kAdminOther;
    r.admin = true;
  }
  return r;
}

std::optional<std::string_view> post_path(std::string_view head) {
  while (head.substr(0, 2) == "\r\n") head.remove_prefix(2);  // RFC 9112 §2.2
  if (head.substr(0, 5) != "POST ") return std::nullopt;
  head.remove_prefix(5);
  return request_path(head.substr(0, head.find(' ')));
}

std::string_view query_of(std::string_view target) {
  const auto q = target.find('?');
  return q == std::string_view::npos ? std::string_view{} : target.substr(q + 1);
}

}  // namespace llmgate::gateway
