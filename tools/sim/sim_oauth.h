// The simulator's token endpoints (sim_oauth.cpp): the clouds' short-lived
// credentials, issued and checked as their services do, so the gateway's
// refresher can be run against them --
//   POST /token                                   Google OAuth 2 (a service
//        account's RS256 JWT, grant type jwt-bearer; the signature checked
//        against --google-service-account's key)
//   GET  /computeMetadata/v1/instance/service-accounts/default/token
//        the GCE/GKE metadata server (Metadata-Flavor: Google required)
//   POST /{tenant}/oauth2/v2.0/token              Microsoft Entra ID (client
//        credentials: a client secret, or a federated token as the assertion)
//   POST /  Action=AssumeRoleWithWebIdentity      AWS STS (temporary keys
//        that Bedrock requests may then be signed with)
//   GET  /v1/credentials                           the ECS / EKS Pod Identity
//        container credentials endpoint (Authorization: the agent's token)
//   PUT  /latest/api/token, GET /latest/meta-data/iam/security-credentials/[ROLE]
//        EC2 instance metadata, IMDSv2 (a session token, then the role's keys)
// Tokens live --token-lifetime seconds; model requests must carry a live one
// (Authorization: Bearer) when tokens are required. Counts what it issued
// and refused. Thread-safe. Beast-free.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

namespace llmgate::sim {

struct TokenOptions {
  std::chrono::seconds lifetime{3600};
  // Model requests need a live token this issuer gave out.
  bool require = false;
  // The service account key file's JSON whose JWTs are accepted ("" = a
  // well-formed JWT is enough).
  std::string google_service_account_json;
  std::string entra_client_secret;     // "" = none accepted that way
  std::string entra_federated_token;   // the federated token accepted as an assertion
  std::string aws_web_identity_token;  // the web identity token STS accepts
  // The container credentials endpoint's (GET /v1/credentials) authorization
  // token ("" = the endpoint is not served).
  std::string aws_container_token;
  // The EC2 instance profile's role the instance metadata endpoints (IMDSv2)
  // serve credentials for ("" = not served).
  std::string aws_instance_role;
};

struct TokenStats {
  std::uint64_t issued = 0;        // tokens (and STS credentials) given out
  std::uint64_t refused = 0;       // token requests refused
  std::uint64_t expired_seen = 0;  // model requests with an expired token
  std::uint64_t missing_seen = 0;  // model requests with no (or an unknown) token
};

class TokenIssuer {
 public:
  explicit TokenIssuer(TokenOptions options);
  using Clock = std::chrono::system_clock;

  struct Answer {
    int status = 200;
    std::string content_type = "application/json";
    std::string body;
  };
  // The answer when `method` and `target` name a token endpoint, else nullopt.
  std::optional<Answer> handle(std::string_view method, std::string_view target,
                               const std::function<std::string(std::string_view)>& header,
                               std::string_view body, Clock::time_point now);

  bool required() const { return options_.require; }
  // Whether an Authorization header value carries a live token; why not.
  std::optional<std::string> check_bearer(std::string_view authorization, Clock::time_point now);
  // The secret and session token of temporary AWS credentials STS issued
  // for `access_key_id`, while they live.
  struct AwsTemporary {
    std::string secret;
    std::string session_token;
  };
  std::optional<AwsTemporary> aws_temporary(std::string_view access_key_id,
                                            Clock::time_point now) const;
  TokenStats stats() const;

 private:
  Answer google(std::string_view body, Clock::time_point now);
  Answer metadata(const std::function<std::string(std::string_view)>& header,
                  Clock::time_point now);
  Answer entra(std::string_view body, Clock::time_point now);
  Answer sts(std::string_view body, Clock::time_point now);
  Answer container(const std::function<std::string(std::string_view)>& header,
                   Clock::time_point now);
  Answer instance(std::string_view method, std::string_view path,
                  const std::function<std::string(std::string_view)>& header,
                  Clock::time_point now);
  // New temporary AWS credentials (mu_ held): the key id, and when they expire.
  std::pair<std::string, Clock::time_point> issue_aws(Clock::time_point now, AwsTemporary& t);
  Answer google_token(Clock::time_point now);  // Google's answer (and the metadata server's)
  Answer oauth_error(int status, std::string_view error, std::string_view description);
  std::string issue(Clock::time_point now);  // a new token (mu_ held)

  const TokenOptions options_;
  mutable std::mutex mu_;
  std::uint64_t next_ = 0;
  std::map<std::string, Clock::time_point, std::less<>> tokens_;  // token -> expiry
  std::map<std::string, std::pair<AwsTemporary, Clock::time_point>, std::less<>> aws_;
  std::map<std::string, Clock::time_point, std::less<>> imds_sessions_;  // token -> expiry
  TokenStats stats_;
};

}  // namespace llmgate::sim
