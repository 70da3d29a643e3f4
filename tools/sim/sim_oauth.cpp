// The simulator's token endpoints (sim_oauth.h).
#include "tools/sim/sim_oauth.h"

#include <cstdlib>
#include <ctime>
#include <nlohmann/json.hpp>
#include <random>

#include "config/rfc3339.h"
#include "providers/cloud/oauth.h"

namespace llmgate::sim {
namespace {

using json = nlohmann::json;
namespace cloud = llmgate::providers::cloud;

std::int64_t unix_seconds(TokenIssuer::Clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::seconds>(t.time_since_epoch()).count();
}

std::string field(const std::vector<std::pair<std::string, std::string>>& form,
                  std::string_view name) {
  for (const auto& [k, v] : form) {
    if (k == name) return v;
  }
  return {};
}

std::string random_text(std::size_t n) {
  static constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
  thread_local std::mt19937_64 rng{std::random_device{}()};
  std::string out(n, 'A');
  for (char& c : out) c = kAlphabet[rng() % (sizeof kAlphabet - 1)];
  return out;
}

std::string json_body(const json& j) {
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

}  // namespace

TokenIssuer::TokenIssuer(TokenOptions options) : options_(std::move(options)) {}

std::optional<TokenIssuer::Answer> TokenIssuer::handle(
    std::string_view method, std::string_view target,
    const std::function<std::string(std::string_view)>& header, std::string_view body,
    Clock::time_point now) {
  const std::string_view path = target.substr(0, target.find('?'));
  if (method == "GET" && path == "/computeMetadata/v1/instance/service-accounts/default/token") {
    return metadata(header, now);
  }
  if (method == "GET" && path == "/v1/credentials" && !options_.aws_container_token.empty())
    return container(header, now);
  if (!options_.aws_instance_role.empty() &&
      ((method == "PUT" && path == "/latest/api/token") ||
       (method == "GET" && path.starts_with("/latest/meta-data/iam/security-credentials/"))))
    return instance(method, path, header, now);
  if (method != "POST") return std::nullopt;
  if (path == "/token") return google(body, now);
  if (path.ends_with("/oauth2/v2.0/token")) return entra(body, now);
  if (path == "/" && field(cloud::form_decode(body), "Action") == "AssumeRoleWithWebIdentity")
    return sts(body, now);
  return std::nullopt;
}

std::string TokenIssuer::issue(Clock::time_point now) {
  for (auto it = tokens_.begin(); it != tokens_.end();) {
    it = it->second <= now ? tokens_.erase(it) : std::next(it);
  }
  std::string token = "ya29.sim-" + std::to_string(++next_) + "-" + random_text(16);
  tokens_.emplace(token, now + options_.lifetime);
  ++stats_.issued;
  return token;
}

TokenIssuer::Answer TokenIssuer::oauth_error(int status, std::string_view error,
                                             std::string_view description) {
  std::lock_guard lock(mu_);
  ++stats_.refused;
  return {status, "application/json",
          json_body({{"error", error}, {"error_description", description}})};
}

TokenIssuer::Answer TokenIssuer::google(std::string_view body, Clock::time_point now) {
  const auto form = cloud::form_decode(body);
  if (field(form, "grant_type") != "urn:ietf:params:oauth:grant-type:jwt-bearer")
    return oauth_error(400, "unsupported_grant_type", "Invalid grant_type.");
  const std::string jwt = field(form, "assertion");
  const std::size_t dot1 = jwt.find('.');
  const std::size_t dot2 = dot1 == std::string::npos ? dot1 : jwt.find('.', dot1 + 1);
  if (dot2 == std::string::npos) return oauth_error(400, "invalid_grant", "Invalid JWT.");
  const auto head = cloud::base64url_decode(std::string_view(jwt).substr(0, dot1));
  const auto claims_text =
      cloud::base64url_decode(std::string_view(jwt).substr(dot1 + 1, dot2 - dot1 - 1));
  const auto sig = cloud::base64url_decode(std::string_view(jwt).substr(dot2 + 1));
  const json h = head ? json::parse(*head, nullptr, false) : json();
  const json c = claims_text ? json::parse(*claims_text, nullptr, false) : json();
  if (!h.is_object() || !c.is_object() || !sig || h.value("alg", "") != "RS256")
    return oauth_error(400, "invalid_grant", "Invalid JWT.");
  const std::string iss = c.value("iss", "");
  const std::int64_t iat = c.value("iat", std::int64_t{0});
  const std::int64_t exp = c.value("exp", std::int64_t{0});
  const std::int64_t t = unix_seconds(now);
  if (iss.empty() || c.value("scope", "").empty() || !c.value("aud", "").ends_with("/token"))
    return oauth_error(400, "invalid_grant", "Invalid JWT: missing claims.");
  if (exp <= t || exp - iat > 3600 || iat > t + 300)
    return oauth_error(400, "invalid_grant",
                       "Invalid JWT: Token must be a short-lived token (60 minutes) and in a "
                       "reasonable timeframe. Check your iat and exp values in the JWT claim.");
  if (!options_.google_service_account_json.empty()) {
    auto sa = cloud::parse_service_account(options_.google_service_account_json);
    const auto* account = std::get_if<cloud::ServiceAccount>(&sa);
    if (!account || account->client_email != iss)
      return oauth_error(400, "invalid_grant", "Invalid grant: account not found");
    if (!cloud::rs256_verify(account->private_key, std::string_view(jwt).substr(0, dot2), *sig))
      return oauth_error(400, "invalid_grant", "Invalid JWT Signature.");
  }
  return google_token(now);
}

TokenIssuer::Answer TokenIssuer::google_token(Clock::time_point now) {
  std::lock_guard lock(mu_);
  const std::string token = issue(now);
  return {200, "application/json",
          json_body({{"access_token", token},
                     {"expires_in", options_.lifetime.count()},
                     {"token_type", "Bearer"}})};
}

TokenIssuer::Answer TokenIssuer::metadata(
    const std::function<std::string(std::string_view)>& header, Clock::time_point now) {
  if (header("metadata-flavor") != "Google") {
    std::lock_guard lock(mu_);
    ++stats_.refused;
    return {403, "text/html", "Missing required header \"Metadata-Flavor\""};
  }
  return google_token(now);
}

TokenIssuer::Answer TokenIssuer::entra(std::string_view body, Clock::time_point now) {
  const auto form = cloud::form_decode(body);
  if (field(form, "grant_type") != "client_credentials")
    return oauth_error(400, "unsupported_grant_type",
                       "AADSTS70003: The app requested an unsupported grant type.");
  if (field(form, "client_id").empty() || field(form, "scope").empty())
    return oauth_error(400, "invalid_request",
                       "AADSTS900144: The request body must contain "
                       "client_id and scope.");
  const std::string secret = field(form, "client_secret");
  const std::string assertion = field(form, "client_assertion");
  const bool by_secret = !secret.empty() && secret == options_.entra_client_secret;
  const bool by_assertion = !assertion.empty() && assertion == options_.entra_federated_token &&
                            field(form, "client_assertion_type") ==
                                "urn:ietf:params:oauth:client-assertion-type:jwt-bearer";
  if (!by_secret && !by_assertion) {
    return oauth_error(401, "invalid_client",
                       secret.empty() ? "AADSTS700213: No matching federated identity record found "
                                        "for presented assertion."
                                      : "AADSTS7000215: Invalid client secret provided.");
  }
  std::lock_guard lock(mu_);
  const std::string token = issue(now);
  return {200, "application/json",
          json_body({{"token_type", "Bearer"},
                     {"expires_in", options_.lifetime.count()},
                     {"ext_expires_in", options_.lifetime.count()},
                     {"access_token", token}})};
}

TokenIssuer::Answer TokenIssuer::sts(std::string_view body, Clock::time_point now) {
  const auto form = cloud::form_decode(body);
  const std::string token = field(form, "WebIdentityToken");
  if (token.empty() || token != options_.aws_web_identity_token || field(form, "RoleArn").empty() ||
      field(form, "RoleSessionName").empty()) {
    std::lock_guard lock(mu_);
    ++stats_.refused;
    return {400, "text/xml",
            "<ErrorResponse xmlns=\"https://sts.amazonaws.com/doc/2011-06-15/\"><Error>"
            "<Type>Sender</Type><Code>InvalidIdentityToken</Code><Message>The web identity "
            "token that was passed could not be validated by AWS. Get a new identity token "
            "from the identity provider and then retry the request.</Message></Error>"
            "<RequestId>sim</RequestId></ErrorResponse>"};
  }
  std::lock_guard lock(mu_);
  AwsTemporary t;
  const auto [key_id, expires] = issue_aws(now, t);
  return {200, "text/xml",
          "<AssumeRoleWithWebIdentityResponse xmlns=\"https://sts.amazonaws.com/doc/2011-06-15/\">"
          "<AssumeRoleWithWebIdentityResult><Credentials><AccessKeyId>" +
              key_id + "</AccessKeyId><SecretAccessKey>" + t.secret +
              "</SecretAccessKey><SessionToken>" + t.session_token + "</SessionToken><Expiration>" +
              config::format_rfc3339_utc(expires) +
              "</Expiration></Credentials><Audience>sts.amazonaws.com</Audience>"
              "</AssumeRoleWithWebIdentityResult><ResponseMetadata><RequestId>sim</RequestId>"
              "</ResponseMetadata></AssumeRoleWithWebIdentityResponse>"};
}

std::pair<std::string, TokenIssuer::Clock::time_point> TokenIssuer::issue_aws(Clock::time_point now,
                                                                              AwsTemporary& t) {
  for (auto it = aws_.begin(); it != aws_.end();) {
    it = it->second.second <= now ? aws_.erase(it) : std::next(it);
  }
  std::string key_id = "ASIASIM" + random_text(13);
  t = AwsTemporary{random_text(40), "FwoGZXIvYXdzSim" + random_text(48)};
  // AWS's expirations have whole seconds.
  const auto expires = Clock::from_time_t(Clock::to_time_t(now + options_.lifetime));
  aws_.emplace(key_id, std::make_pair(t, expires));
  ++stats_.issued;
  return {std::move(key_id), expires};
}

TokenIssuer::Answer TokenIssuer::container(
    const std::function<std::string(std::string_view)>& header, Clock::time_point now) {
  std::lock_guard lock(mu_);
  if (header("authorization") != options_.aws_container_token) {
    ++stats_.refused;
    return {401, "application/json",
            json_body({{"code", "AccessDenied"}, {"message", "Unauthorized"}})};
  }
  AwsTemporary t;
  const auto [key_id, expires] = issue_aws(now, t);
  return {200, "application/json",
          json_body({{"RoleArn", "arn:aws:iam::123456789012:role/sim"},
                     {"AccessKeyId", key_id},
                     {"SecretAccessKey", t.secret},
                     {"Token", t.session_token},
                     {"Expiration", config::format_rfc3339_utc(expires)}})};
}

TokenIssuer::Answer TokenIssuer::instance(
    std::string_view method, std::string_view path,
    const std::function<std::string(std::string_view)>& header, Clock::time_point now) {
  std::lock_guard lock(mu_);
  if (method == "PUT") {
    // IMDSv2's session token, for the seconds the request asks (1..21600).
    const std::string ttl = header("x-aws-ec2-metadata-token-ttl-seconds");
    const int seconds = std::atoi(ttl.c_str());
    if (seconds < 1 || seconds > 21600) return {400, "text/plain", ""};
    std::string session = "AQAEAsim" + random_text(32);
    imds_sessions_.emplace(session, now + std::chrono::seconds(seconds));
    return {200, "text/plain", session};
  }
  const auto it = imds_sessions_.find(header("x-aws-ec2-metadata-token"));
  if (it == imds_sessions_.end() || it->second <= now) {
    ++stats_.refused;
    return {401, "text/plain", ""};
  }
  constexpr std::string_view kRoles = "/latest/meta-data/iam/security-credentials/";
  const std::string_view role = path.substr(kRoles.size());
  if (role.empty()) return {200, "text/plain", options_.aws_instance_role};
  if (role != options_.aws_instance_role) return {404, "text/plain", ""};
  AwsTemporary t;
  const auto [key_id, expires] = issue_aws(now, t);
  return {200, "text/plain",
          json_body({{"Code", "Success"},
                     {"LastUpdated", config::format_rfc3339_utc(now)},
                     {"Type", "AWS-HMAC"},
                     {"AccessKeyId", key_id},
                     {"SecretAccessKey", t.secret},
                     {"Token", t.session_token},
                     {"Expiration", config::format_rfc3339_utc(expires)}})};
}

std::optional<std::string> TokenIssuer::check_bearer(std::string_view authorization,
                                                     Clock::time_point now) {
  std::lock_guard lock(mu_);
  if (!authorization.starts_with("Bearer ")) {
    ++stats_.missing_seen;
    return "Request is missing required authentication credential. Expected OAuth 2 access "
           "token.";
  }
  const auto it = tokens_.find(authorization.substr(7));
  if (it == tokens_.end()) {
    ++stats_.missing_seen;
    return "Request had invalid authentication credentials. Expected OAuth 2 access token.";
  }
  if (it->second <= now) {
    ++stats_.expired_seen;
    return "Request had invalid authentication credentials: the access token expired.";
  }
  return std::nullopt;
}

std::optional<TokenIssuer::AwsTemporary> TokenIssuer::aws_temporary(std::string_view access_key_id,
                                                                    Clock::time_point now) const {
  std::lock_guard lock(mu_);
  const auto it = aws_.find(access_key_id);
  if (it == aws_.end() || it->second.second <= now) return std::nullopt;
  return it->second.first;
}

TokenStats TokenIssuer::stats() const {
  std::lock_guard lock(mu_);
  return stats_;
}

}  // namespace llmgate::sim
