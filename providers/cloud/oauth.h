// Short-lived credentials from token endpoints (oauth.cpp): what to send and
// how to read the answer, for the flows cloud providers use -- a Google
// service account's signed JWT exchanged for an OAuth 2 access token (Vertex
// AI), Microsoft Entra ID's client credentials and workload identity (a
// federated token as the client assertion: Azure OpenAI), and AWS STS
// AssumeRoleWithWebIdentity (EKS IRSA, pod identity). Pure functions: the
// clock is a parameter, nothing here does I/O (the gateway's refresher
// sends the requests). Beast-free.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "providers/cloud/sigv4.h"

namespace llmgate::providers::cloud {

using SystemClock = std::chrono::system_clock;

// base64url without padding (RFC 4648 §5), as JWTs use it, and back
// (nullopt: not base64url).
std::string base64url(std::string_view bytes);
std::optional<std::string> base64url_decode(std::string_view text);
// application/x-www-form-urlencoded: every byte but unreserved ones as %XX.
std::string form_encode(std::string_view s);
// A form body's fields ('+' is a space), in order; a name without '=' has
// an empty value.
std::vector<std::pair<std::string, std::string>> form_decode(std::string_view body);

// Whether `signature` is the RS256 signature (RSASSA-PKCS1-v1_5, SHA-256)
// of `data` by the PEM key (a private key, or a public one) -- how a token
// endpoint checks a service account's JWT.
bool rs256_verify(std::string_view pem, std::string_view data, std::string_view signature);

// A POST to a token endpoint: its URL and form body (Content-Type
// application/x-www-form-urlencoded).
struct TokenRequest {
  std::string url;
  std::string body;
};

// An access token and when it stops working.
struct AccessToken {
  std::string token;
  SystemClock::time_point expires;
};

// --- Google service accounts -------------------------------------------------

// The fields of a service account key file that the flow needs.
struct ServiceAccount {
  std::string client_email;
  std::string private_key;  // PEM (PKCS#8)
  std::string private_key_id;
  std::string token_uri = "https://oauth2.googleapis.com/token";
  std::string project_id;
};
// From the key file's JSON; why not, when it is not a service account key.
std::variant<ServiceAccount, std::string> parse_service_account(std::string_view json_text);

// The JWT a service account signs (RS256) to ask for a token for `scope`:
// iss and sub the account, aud the token URI, issued `now`, valid an hour.
// Empty when the private key cannot be read (`error` says why).
std::string google_jwt_assertion(const ServiceAccount& sa, std::string_view scope,
                                 SystemClock::time_point now, std::string* error = nullptr);
// The token request (grant type jwt-bearer) for it.
TokenRequest google_token_request(const ServiceAccount& sa, std::string_view assertion);
// Vertex AI's scope.
inline constexpr std::string_view kGoogleCloudScope =
    "https://www.googleapis.com/auth/cloud-platform";

// --- Microsoft Entra ID ------------------------------------------------------

// https://login.microsoftonline.com (other clouds have their own).
inline constexpr std::string_view kEntraAuthority = "https://login.microsoftonline.com";
// Azure OpenAI's scope.
inline constexpr std::string_view kCognitiveServicesScope =
    "https://cognitiveservices.azure.com/.default";
// Client credentials with a secret.
TokenRequest entra_client_secret_request(std::string_view authority, std::string_view tenant,
                                         std::string_view client_id, std::string_view secret,
                                         std::string_view scope);
// Workload identity: the federated token (AZURE_FEDERATED_TOKEN_FILE's
// contents) as the client assertion.
TokenRequest entra_federated_request(std::string_view authority, std::string_view tenant,
                                     std::string_view client_id, std::string_view federated_token,
                                     std::string_view scope);

// An OAuth 2 token endpoint's answer (Google's and Entra's alike:
// {"access_token", "expires_in", "token_type"}), or why it is none: an
// error answer's {"error", "error_description"}, or a body that is not one.
std::variant<AccessToken, std::string> parse_token_response(int status, std::string_view body,
                                                            SystemClock::time_point now);

// --- AWS STS ------------------------------------------------------------------

// AssumeRoleWithWebIdentity (unsigned: the web identity token is the
// credential) at the regional STS endpoint, or the global one for an empty
// region.
TokenRequest sts_web_identity_request(std::string_view region, std::string_view role_arn,
                                      std::string_view session_name,
                                      std::string_view web_identity_token);
// Its XML answer's credentials (AccessKeyId, SecretAccessKey, SessionToken,
// Expiration), or why there are none (an <Error><Message>, or no answer).
std::variant<AwsCredentials, std::string> parse_sts_response(int status, std::string_view body);

// --- AWS container credentials (ECS, EKS Pod Identity) ------------------------

// The endpoint's JSON answer ({"AccessKeyId", "SecretAccessKey", "Token",
// "Expiration"}), or why it is none (an error answer's "message", or no
// complete credentials).
std::variant<AwsCredentials, std::string> parse_container_credentials(int status,
                                                                      std::string_view body);

}  // namespace llmgate::providers::cloud
