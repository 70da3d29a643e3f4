// Where AWS credentials come from (aws_credentials.cpp): the sources of the
// AWS SDKs' default chain that need no network, in the chain's order --
// the environment (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY,
// AWS_SESSION_TOKEN), then the shared credentials file
// (AWS_SHARED_CREDENTIALS_FILE, else ~/.aws/credentials) under the profile
// AWS_PROFILE names (else "default"). Web identity (EKS IRSA, pod identity:
// AWS_WEB_IDENTITY_TOKEN_FILE with AWS_ROLE_ARN) is exchanged at STS, which
// the gateway's refresher does (not here). Pure functions of what they are
// given: the environment and the file's text are parameters. Beast-free.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "providers/cloud/sigv4.h"

namespace llmgate::providers::cloud {

// The process environment as the chain reads it (tests pass their own).
using Getenv = std::function<std::optional<std::string>(const char* name)>;
Getenv process_environment();

// Credentials found, and where ("environment", "file /root/.aws/credentials
// [profile prod]"): for logs and errors, never the secret.
struct FoundCredentials {
  AwsCredentials credentials;
  std::string source;
};

// An INI document as AWS's shared files write it: [section] headers,
// key = value lines, '#' and ';' comments. Section and key names as
// written (AWS's names are lower case); values trimmed.
using IniSections = std::map<std::string, std::map<std::string, std::string>>;
IniSections parse_ini(std::string_view text);

// From the environment: both keys set (a session token with them if set),
// else nullopt. One without the other is an error (`error` says which).
std::optional<FoundCredentials> credentials_from_environment(const Getenv& env, std::string* error);

// From a shared credentials file's text: the profile's aws_access_key_id,
// aws_secret_access_key and aws_session_token; nullopt when the profile is
// not there (or lacks a key: `error` says which).
std::optional<FoundCredentials> credentials_from_file(std::string_view text,
                                                      std::string_view profile,
                                                      std::string_view path, std::string* error);

// The shared credentials file's path and the profile the environment names.
std::string shared_credentials_path(const Getenv& env);
std::string profile_name(const Getenv& env, std::string_view configured = {});

// The web identity the environment configures (EKS IRSA, pod identity), if
// any: the token file and the role to assume with it.
struct WebIdentity {
  std::string token_file;
  std::string role_arn;
  std::string session_name;  // AWS_ROLE_SESSION_NAME, else "llmgate"
};
std::optional<WebIdentity> web_identity_from_environment(const Getenv& env);

// The container credentials endpoint the environment configures (ECS task
// roles, EKS Pod Identity): AWS_CONTAINER_CREDENTIALS_RELATIVE_URI (below
// http://169.254.170.2), else AWS_CONTAINER_CREDENTIALS_FULL_URI (https, or
// http to a loopback address or the ECS/EKS link-local endpoints only, as
// the SDKs allow), with the authorization token
// AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE names (read at each request: EKS
// rotates it), else AWS_CONTAINER_AUTHORIZATION_TOKEN. nullopt when none is
// configured, or `error` says why the one configured cannot be used.
struct ContainerCredentials {
  std::string url;
  std::string token;       // the Authorization header's value, when given inline
  std::string token_file;  // ... or the file to read it from
};
std::optional<ContainerCredentials> container_credentials_from_environment(const Getenv& env,
                                                                           std::string* error);

// Reads a file whole; nullopt when it cannot be read (tests pass their own).
using ReadFile = std::function<std::optional<std::string>(const std::string& path)>;
ReadFile read_small_file();

// The fixed credentials a Bedrock provider signs with, or why there are
// none: the environment, then the shared credentials file under the
// profile (a provider's aws_profile reads the file only, as the SDKs'
// fromIni does). Web identity, the chain's next link, is fetched and
// refreshed by the gateway (gateway/proxy/upstream_credentials.h).
struct ResolvedCredentials {
  std::optional<FoundCredentials> found;
  std::string error;  // when none: what was tried, and why each failed
};
ResolvedCredentials resolve_aws_credentials(std::string_view configured_profile, const Getenv& env,
                                            const ReadFile& read);

}  // namespace llmgate::providers::cloud
