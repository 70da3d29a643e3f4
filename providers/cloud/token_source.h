// Where a provider's short-lived credential comes from (token_source.cpp):
// which token endpoint, the request to send it and how to read its answer,
// for the flows the gateway refreshes itself -- a Google service account's
// signed JWT, the GCE/GKE metadata server, Microsoft Entra ID (client secret,
// workload identity) and AWS STS web identity (EKS IRSA). And when to ask
// again. Pure functions: the clock and the file system are parameters; the
// gateway's refresher (gateway/proxy/upstream_credentials.h) sends the
// requests. Beast-free.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "config/config.h"
#include "providers/cloud/aws_credentials.h"
#include "providers/cloud/sigv4.h"

namespace llmgate::providers::cloud {

using SystemClock = std::chrono::system_clock;

// What an upstream request authenticates with: a bearer token (Google, Entra),
// or AWS credentials it is signed with (Bedrock).
struct Credential {
  std::string bearer;
  std::optional<AwsCredentials> aws;
  SystemClock::time_point expires = SystemClock::time_point::max();
};

// One request to a token endpoint.
struct TokenFetch {
  std::string method = "POST";                               // the metadata server's is a GET
  std::string url;                                           // absolute http(s) URL
  std::vector<std::pair<std::string, std::string>> headers;  // besides Host and Content-Length
  std::string body;                                          // a form (POST)
};

// A provider's token source: its flow and what the flow needs. Equal
// sources share a credential across config reloads.
struct TokenSource {
  enum class Kind {
    kGoogleServiceAccount,  // key file -> RS256 JWT -> access token
    kGoogleMetadata,        // GET the metadata server's token
    kEntraSecret,           // client credentials with a secret
    kEntraFederated,        // workload identity: a federated token file as the assertion
    kAwsWebIdentity,        // STS AssumeRoleWithWebIdentity with a token file
    kAwsContainer,          // the ECS / EKS Pod Identity container credentials endpoint
    kAwsInstance,           // EC2 instance metadata (IMDSv2): session token, role, credentials
  };
  Kind kind = Kind::kGoogleServiceAccount;
  std::string token_url;  // "" = the key file's token_uri (Google), STS's regional endpoint
  std::string file;       // the key file, the federated or web identity token file
  std::string tenant_id, client_id, client_secret, authority, scope;
  std::string role_arn, session_name, region;  // AWS
  std::string authorization;                   // the container endpoint's token, inline
  std::string description;                     // for logs and errors: never a secret
  bool operator==(const TokenSource&) const = default;
};

// The provider's token source from its auth: (nullopt when it has none).
std::optional<TokenSource> token_source(const config::Provider& p);
// AWS web identity: STS in `region` (or `sts_endpoint`, AWS_ENDPOINT_URL_STS,
// when set) assumes the role with the token file's token.
TokenSource aws_web_identity_source(const WebIdentity& w, std::string_view region,
                                    std::string_view sts_endpoint);

// AWS container credentials (ECS task roles, EKS Pod Identity).
TokenSource aws_container_source(const ContainerCredentials& c);

// AWS EC2 instance metadata (IMDSv2) at `endpoint` (AWS_EC2_METADATA_SERVICE_ENDPOINT,
// else http://169.254.169.254): the instance profile's role credentials.
TokenSource aws_instance_source(std::string_view endpoint);

// The request for a new credential at `now`: files (the key, the federated
// or web identity token, which Kubernetes rotates) are read each time.
// Why not, when a file cannot be read or is not what it should be.
std::variant<TokenFetch, std::string> token_request(const TokenSource& s,
                                                    SystemClock::time_point now,
                                                    const ReadFile& read);
// For a flow of several requests (IMDSv2: a session token, the role's name,
// its credentials): the request after `asked` was answered `status`,
// `body`; nullopt when that answer is the last one (token_answer reads it).
std::optional<TokenFetch> token_next(const TokenSource& s, const TokenFetch& asked, int status,
                                     std::string_view body);
// How long connecting to the source's endpoint may take: 1 s for the
// instance metadata service (not there off EC2: the SDKs wait as long), else 5 s.
std::chrono::milliseconds connect_timeout(const TokenSource& s);

// The token endpoint's answer as a credential, or why it is none.
std::variant<Credential, std::string> token_answer(const TokenSource& s, int status,
                                                   std::string_view body,
                                                   SystemClock::time_point now);

// When a credential obtained at `obtained`, good until `expires`, is asked
// for again: halfway through its life, and at the latest five minutes
// before it expires (the clouds' SDKs refresh 5 minutes ahead).
SystemClock::time_point refresh_time(SystemClock::time_point obtained,
                                     SystemClock::time_point expires);

}  // namespace llmgate::providers::cloud
