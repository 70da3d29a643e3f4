// Token sources: the flows' requests and answers (token_source.h).
#include "providers/cloud/token_source.h"

#include <algorithm>

#include "config/ascii.h"
#include "config/percent.h"
#include "providers/cloud/oauth.h"

namespace llmgate::providers::cloud {
namespace {

constexpr std::size_t kMaxTokenFileBytes = 64 * 1024;

// A file's contents, trimmed; nullopt (and `why`) when it cannot be read or is empty.
std::optional<std::string> read_token_file(const ReadFile& read, const std::string& path,
                                           std::string_view what, std::string& why) {
  const std::optional<std::string> text = read(path);
  if (!text) {
    why = "cannot read the " + std::string(what) + " " + path;
    return std::nullopt;
  }
  const std::string_view t = config::trim_whitespace(*text);
  if (t.empty() || t.size() > kMaxTokenFileBytes) {
    why = "the " + std::string(what) + " " + path + " is empty or too large";
    return std::nullopt;
  }
  return std::string(t);
}

TokenFetch post(TokenRequest r) {
  TokenFetch f;
  f.url = std::move(r.url);
  f.body = std::move(r.body);
  f.headers.emplace_back("Content-Type", "application/x-www-form-urlencoded");
  f.headers.emplace_back("Accept", "application/json");
  return f;
}

}  // namespace

std::optional<TokenSource> token_source(const config::Provider& p) {
  using K = config::ProviderAuth::Kind;
  const config::ProviderAuth& a = p.auth;
  TokenSource s;
  s.token_url = a.token_url;
  s.scope = a.scope;
  s.description = a.source;
  switch (a.kind) {
    case K::kNone:
      return std::nullopt;
    case K::kGoogleServiceAccount:
      s.kind = TokenSource::Kind::kGoogleServiceAccount;
      s.file = a.file;
      if (s.scope.empty()) s.scope = kGoogleCloudScope;
      return s;
    case K::kGoogleMetadata:
      s.kind = TokenSource::Kind::kGoogleMetadata;
      return s;
    case K::kEntra:
      s.kind = a.client_secret.empty() ? TokenSource::Kind::kEntraFederated
                                       : TokenSource::Kind::kEntraSecret;
      s.file = a.file;
      s.tenant_id = a.tenant_id;
      s.client_id = a.client_id;
      s.client_secret = a.client_secret;
      s.authority = a.authority;
      if (s.scope.empty()) s.scope = kCognitiveServicesScope;
      return s;
  }
  return std::nullopt;
}

TokenSource aws_web_identity_source(const WebIdentity& w, std::string_view region,
                                    std::string_view sts_endpoint) {
  TokenSource s;
  s.kind = TokenSource::Kind::kAwsWebIdentity;
  s.file = w.token_file;
  s.role_arn = w.role_arn;
  s.session_name = w.session_name;
  s.region = std::string(region);
  s.token_url = std::string(sts_endpoint);
  s.description = "AWS web identity (role " + w.role_arn + ", token file " + w.token_file + ")";
  return s;
}

TokenSource aws_container_source(const ContainerCredentials& c) {
  TokenSource s;
  s.kind = TokenSource::Kind::kAwsContainer;
  s.token_url = c.url;
  s.file = c.token_file;
  s.authorization = c.token;
  s.description = "AWS container credentials (" + c.url + ")";
  return s;
}

TokenSource aws_instance_source(std::string_view endpoint) {
  TokenSource s;
  s.kind = TokenSource::Kind::kAwsInstance;
  s.token_url = std::string(endpoint);
  while (!s.token_url.empty() && s.token_url.back() == '/') s.token_url.pop_back();
  s.description = "AWS instance metadata (" + s.token_url + ")";
  return s;
}

namespace {

constexpr std::string_view kImdsRoles = "/latest/meta-data/iam/security-credentials/";

// An IMDSv2 GET with the session token.
TokenFetch imds_get(std::string url, std::string_view session) {
  TokenFetch f;
  f.method = "GET";
  f.url = std::move(url);
  f.headers.emplace_back("X-aws-ec2-metadata-token", std::string(session));
  return f;
}

}  // namespace

std::optional<TokenFetch> token_next(const TokenSource& s, const TokenFetch& asked, int status,
                                     std::string_view body) {
  if (s.kind != TokenSource::Kind::kAwsInstance || status != 200) return std::nullopt;
  if (asked.method == "PUT") {
    // The session token: then the instance profile's role.
    const std::string session(config::trim_whitespace(body));
    if (session.empty()) return std::nullopt;
    return imds_get(s.token_url + std::string(kImdsRoles), session);
  }
  if (asked.url.ends_with(kImdsRoles)) {
    // The roles, one a line (an instance profile has one): its credentials.
    const std::string role(config::trim_whitespace(body.substr(0, body.find('\n'))));
    if (role.empty() || role.find('/') != std::string::npos) return std::nullopt;
    return imds_get(asked.url + config::percent_encode(role), asked.headers.at(0).second);
  }
  return std::nullopt;
}

std::chrono::milliseconds connect_timeout(const TokenSource& s) {
  return s.kind == TokenSource::Kind::kAwsInstance ? std::chrono::seconds(1)
                                                   : std::chrono::seconds(5);
}

std::variant<TokenFetch, std::string> token_request(const TokenSource& s,
                                                    SystemClock::time_point now,
                                                    const ReadFile& read) {
  using K = TokenSource::Kind;
  switch (s.kind) {
    case K::kGoogleServiceAccount: {
      std::string why;
      const auto file = read_token_file(read, s.file, "service account key file", why);
      if (!file) return why;
      auto parsed = parse_service_account(*file);
      if (auto* why = std::get_if<std::string>(&parsed)) return s.file + ": " + *why;
      ServiceAccount sa = std::get<ServiceAccount>(std::move(parsed));
      // The JWT's audience is the endpoint it is exchanged at.
      if (!s.token_url.empty()) sa.token_uri = s.token_url;
      std::string error;
      const std::string jwt = google_jwt_assertion(sa, s.scope, now, &error);
      if (jwt.empty()) return s.file + ": " + error;
      return post(google_token_request(sa, jwt));
    }
    case K::kGoogleMetadata: {
      TokenFetch f;
      f.method = "GET";
      f.url = s.token_url;
      if (!s.scope.empty()) f.url += "?scopes=" + form_encode(s.scope);
      f.headers.emplace_back("Metadata-Flavor", "Google");
      f.headers.emplace_back("Accept", "application/json");
      return f;
    }
    case K::kEntraSecret:
    case K::kEntraFederated: {
      TokenRequest r;
      if (s.kind == K::kEntraSecret) {
        r = entra_client_secret_request(s.authority, s.tenant_id, s.client_id, s.client_secret,
                                        s.scope);
      } else {
        std::string why;
        const auto token = read_token_file(read, s.file, "federated token file", why);
        if (!token) return why;
        r = entra_federated_request(s.authority, s.tenant_id, s.client_id, *token, s.scope);
      }
      if (!s.token_url.empty()) r.url = s.token_url;
      return post(std::move(r));
    }
    case K::kAwsContainer: {
      TokenFetch f;
      f.method = "GET";
      f.url = s.token_url;
      std::string authorization = s.authorization;
      if (!s.file.empty()) {
        std::string why;
        auto token = read_token_file(read, s.file, "container authorization token file", why);
        if (!token) return why;
        authorization = std::move(*token);
      }
      if (!authorization.empty()) f.headers.emplace_back("Authorization", authorization);
      f.headers.emplace_back("Accept", "application/json");
      return f;
    }
    case K::kAwsInstance: {
      // IMDSv2: a session token first (token_next goes on from its answer).
      TokenFetch f;
      f.method = "PUT";
      f.url = s.token_url + "/latest/api/token";
      f.headers.emplace_back("X-aws-ec2-metadata-token-ttl-seconds", "21600");
      return f;
    }
    case K::kAwsWebIdentity: {
      std::string why;
      const auto token = read_token_file(read, s.file, "web identity token file", why);
      if (!token) return why;
      TokenRequest r = sts_web_identity_request(s.region, s.role_arn, s.session_name, *token);
      if (!s.token_url.empty()) r.url = s.token_url + "/";
      TokenFetch f = post(std::move(r));
      f.headers.back().second = "application/xml";
      return f;
    }
  }
  return std::string("unknown token source");
}

std::variant<Credential, std::string> token_answer(const TokenSource& s, int status,
                                                   std::string_view body,
                                                   SystemClock::time_point now) {
  if (s.kind == TokenSource::Kind::kAwsInstance && status != 200) {
    return "the instance metadata service answered " + std::to_string(status) +
           (status == 404 ? " (no instance profile role)" : "");
  }
  if (s.kind == TokenSource::Kind::kAwsContainer || s.kind == TokenSource::Kind::kAwsInstance ||
      s.kind == TokenSource::Kind::kAwsWebIdentity) {
    auto aws = s.kind == TokenSource::Kind::kAwsWebIdentity
                   ? parse_sts_response(status, body)
                   : parse_container_credentials(status, body);
    if (auto* why = std::get_if<std::string>(&aws)) return std::move(*why);
    Credential c;
    c.aws = std::get<AwsCredentials>(std::move(aws));
    c.expires = c.aws->expires;
    return c;
  }
  auto token = parse_token_response(status, body, now);
  if (auto* why = std::get_if<std::string>(&token)) return std::move(*why);
  AccessToken& t = std::get<AccessToken>(token);
  Credential c;
  c.bearer = std::move(t.token);
  c.expires = t.expires;
  return c;
}

SystemClock::time_point refresh_time(SystemClock::time_point obtained,
                                     SystemClock::time_point expires) {
  if (expires == SystemClock::time_point::max()) return expires;
  if (expires <= obtained) return obtained;
  const auto halfway = obtained + (expires - obtained) / 2;
  return std::max(halfway, expires - std::chrono::minutes(5));
}

}  // namespace llmgate::providers::cloud
