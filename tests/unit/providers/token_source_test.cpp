// Token sources (providers/cloud/token_source.h): which flow a provider's
// auth: names, the request each sends (files read at each refresh), how an
// answer becomes a credential, and when it is asked for again.
#include "providers/cloud/token_source.h"

#include <gtest/gtest.h>

#include <map>
#include <string>

#include "providers/cloud/oauth.h"

namespace llmgate::providers::cloud {
namespace {

using namespace std::chrono_literals;
const SystemClock::time_point kNow = SystemClock::time_point(std::chrono::seconds(1764480000));

// A file system of `files`.
ReadFile files(std::map<std::string, std::string> files) {
  return [files](const std::string& path) -> std::optional<std::string> {
    auto it = files.find(path);
    if (it == files.end()) return std::nullopt;
    return it->second;
  };
}

std::string field(const TokenFetch& f, std::string_view name) {
  for (const auto& [k, v] : form_decode(f.body)) {
    if (k == name) return v;
  }
  return "<absent>";
}

TEST(TokenSource, NoAuthNoSource) {
  config::Provider p;
  EXPECT_FALSE(token_source(p));
}

TEST(TokenSource, EntraClientSecretAndFederatedToken) {
  config::Provider p;
  p.auth.kind = config::ProviderAuth::Kind::kEntra;
  p.auth.tenant_id = "t1";
  p.auth.client_id = "c1";
  p.auth.client_secret = "s3cret";
  p.auth.authority = "https://login.microsoftonline.com";
  auto s = token_source(p);
  ASSERT_TRUE(s);
  EXPECT_EQ(s->kind, TokenSource::Kind::kEntraSecret);
  auto f = std::get<TokenFetch>(token_request(*s, kNow, files({})));
  EXPECT_EQ(f.method, "POST");
  EXPECT_EQ(f.url, "https://login.microsoftonline.com/t1/oauth2/v2.0/token");
  EXPECT_EQ(field(f, "client_secret"), "s3cret");
  EXPECT_EQ(field(f, "scope"), "https://cognitiveservices.azure.com/.default");

  p.auth.client_secret.clear();
  p.auth.file = "/var/run/secrets/azure/tokens/azure-identity-token";
  s = token_source(p);
  EXPECT_EQ(s->kind, TokenSource::Kind::kEntraFederated);
  // The file is read at each refresh: Kubernetes rotates it.
  f = std::get<TokenFetch>(token_request(*s, kNow, files({{p.auth.file, "jwt-1\n"}})));
  EXPECT_EQ(field(f, "client_assertion"), "jwt-1");
  f = std::get<TokenFetch>(token_request(*s, kNow, files({{p.auth.file, "jwt-2"}})));
  EXPECT_EQ(field(f, "client_assertion"), "jwt-2");
  EXPECT_EQ(std::get<std::string>(token_request(*s, kNow, files({}))),
            "cannot read the federated token file " + p.auth.file);
  // A configured token_url replaces the authority's.
  p.auth.token_url = "http://127.0.0.1:9/tok";
  f = std::get<TokenFetch>(token_request(*token_source(p), kNow, files({{p.auth.file, "j"}})));
  EXPECT_EQ(f.url, "http://127.0.0.1:9/tok");
}

TEST(TokenSource, TheMetadataServerIsAGetWithItsHeader) {
  config::Provider p;
  p.auth.kind = config::ProviderAuth::Kind::kGoogleMetadata;
  p.auth.token_url = "http://metadata.google.internal/computeMetadata/v1/x/token";
  auto f = std::get<TokenFetch>(token_request(*token_source(p), kNow, files({})));
  EXPECT_EQ(f.method, "GET");
  EXPECT_EQ(f.url, p.auth.token_url);
  EXPECT_EQ(f.headers.at(0), std::make_pair(std::string("Metadata-Flavor"), std::string("Google")));
}

TEST(TokenSource, AServiceAccountKeyFileThatIsNoneSaysWhy) {
  config::Provider p;
  p.auth.kind = config::ProviderAuth::Kind::kGoogleServiceAccount;
  p.auth.file = "/k.json";
  const auto s = *token_source(p);
  EXPECT_EQ(s.scope, kGoogleCloudScope);
  EXPECT_EQ(std::get<std::string>(token_request(s, kNow, files({{"/k.json", "[]"}}))),
            "/k.json: the service account key file is not a JSON object");
  EXPECT_EQ(std::get<std::string>(token_request(
                s, kNow,
                files({{"/k.json",
                        R"({"type":"service_account","client_email":"a@b","private_key":"x"})"}}))),
            "/k.json: the service account's private_key is not a PEM private key");
}

TEST(TokenSource, StsWebIdentityAtTheConfiguredEndpoint) {
  const WebIdentity w{"/token", "arn:aws:iam::1:role/r", "llmgate"};
  auto s = aws_web_identity_source(w, "eu-west-1", "");
  auto f = std::get<TokenFetch>(token_request(s, kNow, files({{"/token", "eks-jwt"}})));
  EXPECT_EQ(f.url, "https://sts.eu-west-1.amazonaws.com/");
  EXPECT_EQ(field(f, "WebIdentityToken"), "eks-jwt");
  EXPECT_EQ(field(f, "RoleArn"), "arn:aws:iam::1:role/r");
  s = aws_web_identity_source(w, "eu-west-1", "http://127.0.0.1:4566");
  f = std::get<TokenFetch>(token_request(s, kNow, files({{"/token", "eks-jwt"}})));
  EXPECT_EQ(f.url, "http://127.0.0.1:4566/");
  const auto c = std::get<Credential>(token_answer(
      s, 200,
      "<R><Credentials><AccessKeyId>ASIA1</AccessKeyId><SecretAccessKey>sk</SecretAccessKey>"
      "<SessionToken>st</SessionToken><Expiration>2025-11-30T06:00:00Z</Expiration>"
      "</Credentials></R>",
      kNow));
  ASSERT_TRUE(c.aws);
  EXPECT_EQ(c.aws->access_key_id, "ASIA1");
  EXPECT_EQ(c.expires, c.aws->expires);
  EXPECT_TRUE(c.bearer.empty());
}

TEST(TokenSource, ContainerCredentialsWithTheAgentsTokenFile) {
  std::map<std::string, std::string> vars = {
      {"AWS_CONTAINER_CREDENTIALS_FULL_URI", "http://169.254.170.23/v1/credentials"},
      {"AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE",
       "/var/run/secrets/pods.eks.amazonaws.com/serviceaccount/eks-pod-identity-token"}};
  const Getenv env = [&](const char* name) -> std::optional<std::string> {
    auto it = vars.find(name);
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
  std::string error;
  auto c = container_credentials_from_environment(env, &error);
  ASSERT_TRUE(c) << error;
  const TokenSource s = aws_container_source(*c);
  auto f = std::get<TokenFetch>(token_request(
      s, kNow, files({{vars["AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE"], "eks-token\n"}})));
  EXPECT_EQ(f.method, "GET");
  EXPECT_EQ(f.url, "http://169.254.170.23/v1/credentials");
  EXPECT_EQ(f.headers.at(0),
            std::make_pair(std::string("Authorization"), std::string("eks-token")));
  const auto got = std::get<Credential>(token_answer(
      s, 200,
      R"({"AccessKeyId":"ASIA2","SecretAccessKey":"sk","Token":"st","Expiration":"2025-11-30T06:00:00Z"})",
      kNow));
  EXPECT_EQ(got.aws->session_token, "st");
  EXPECT_EQ(std::get<std::string>(token_answer(s, 401, R"({"message":"Unauthorized"})", kNow)),
            "the container credentials endpoint answered 401: Unauthorized");
  EXPECT_EQ(std::get<std::string>(token_answer(s, 200, R"({"AccessKeyId":"A"})", kNow)),
            "the container credentials endpoint's answer has no complete credentials");

  // ECS: below 169.254.170.2, the token inline.
  vars = {{"AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", "/v2/credentials/abc"},
          {"AWS_CONTAINER_AUTHORIZATION_TOKEN", "inline"}};
  c = container_credentials_from_environment(env, &error);
  ASSERT_TRUE(c);
  EXPECT_EQ(c->url, "http://169.254.170.2/v2/credentials/abc");
  f = std::get<TokenFetch>(token_request(aws_container_source(*c), kNow, files({})));
  EXPECT_EQ(f.headers.at(0).second, "inline");
  // Plain http elsewhere would send the token across a network: refused.
  vars = {{"AWS_CONTAINER_CREDENTIALS_FULL_URI", "http://10.0.0.5/creds"}};
  EXPECT_FALSE(container_credentials_from_environment(env, &error));
  EXPECT_EQ(error,
            "AWS_CONTAINER_CREDENTIALS_FULL_URI is plain http to 10.0.0.5, which is not a "
            "loopback or ECS/EKS agent address");
  vars = {{"AWS_CONTAINER_CREDENTIALS_FULL_URI", "http://127.0.0.1:8080/creds"}};
  EXPECT_TRUE(container_credentials_from_environment(env, &error));
  vars = {{"AWS_CONTAINER_CREDENTIALS_FULL_URI", "https://creds.internal/x"}};
  EXPECT_TRUE(container_credentials_from_environment(env, &error));
  vars = {};
  EXPECT_FALSE(container_credentials_from_environment(env, &error));
}

TEST(TokenSource, InstanceMetadataIsASessionTokenThenTheRoleThenItsCredentials) {
  const TokenSource s = aws_instance_source("http://169.254.169.254/");
  auto f = std::get<TokenFetch>(token_request(s, kNow, files({})));
  EXPECT_EQ(f.method, "PUT");
  EXPECT_EQ(f.url, "http://169.254.169.254/latest/api/token");
  EXPECT_EQ(f.headers.at(0).first, "X-aws-ec2-metadata-token-ttl-seconds");
  auto roles = token_next(s, f, 200, "AQAEsession\n");
  ASSERT_TRUE(roles);
  EXPECT_EQ(roles->url, "http://169.254.169.254/latest/meta-data/iam/security-credentials/");
  EXPECT_EQ(roles->headers.at(0),
            std::make_pair(std::string("X-aws-ec2-metadata-token"), std::string("AQAEsession")));
  auto creds = token_next(s, *roles, 200, "gateway-role\n");
  ASSERT_TRUE(creds);
  EXPECT_EQ(creds->url,
            "http://169.254.169.254/latest/meta-data/iam/security-credentials/gateway-role");
  EXPECT_EQ(creds->headers.at(0).second, "AQAEsession");
  // The last answer is read as the credentials.
  EXPECT_FALSE(token_next(s, *creds, 200, "{}"));
  const auto c = std::get<Credential>(token_answer(
      s, 200,
      R"({"Code":"Success","AccessKeyId":"ASIA3","SecretAccessKey":"sk","Token":"st","Expiration":"2025-11-30T07:00:00Z"})",
      kNow));
  EXPECT_EQ(c.aws->access_key_id, "ASIA3");
  // A refusal at any step ends the flow with what it said.
  EXPECT_FALSE(token_next(s, f, 403, ""));
  EXPECT_EQ(std::get<std::string>(token_answer(s, 404, "", kNow)),
            "the instance metadata service answered 404 (no instance profile role)");
  EXPECT_EQ(connect_timeout(s), std::chrono::seconds(1));
  // Other flows are one request.
  config::Provider p;
  p.auth.kind = config::ProviderAuth::Kind::kGoogleMetadata;
  EXPECT_FALSE(token_next(*token_source(p), f, 200, "x"));
}

TEST(TokenSource, AnOAuthAnswerIsABearerToken) {
  config::Provider p;
  p.auth.kind = config::ProviderAuth::Kind::kGoogleMetadata;
  const auto s = *token_source(p);
  const auto c = std::get<Credential>(
      token_answer(s, 200, R"({"access_token":"ya29.x","expires_in":3599})", kNow));
  EXPECT_EQ(c.bearer, "ya29.x");
  EXPECT_EQ(c.expires, kNow + 3599s);
  EXPECT_FALSE(c.aws);
  EXPECT_EQ(std::get<std::string>(token_answer(
                s, 400, R"({"error":"invalid_grant","error_description":"no"})", kNow)),
            "the token endpoint refused: invalid_grant: no");
}

TEST(TokenSource, RefreshedHalfwayAndAtLeastFiveMinutesAhead) {
  // An hour's token: five minutes before it expires.
  EXPECT_EQ(refresh_time(kNow, kNow + 1h), kNow + 55min);
  // A short one: halfway.
  EXPECT_EQ(refresh_time(kNow, kNow + 4s), kNow + 2s);
  EXPECT_EQ(refresh_time(kNow, kNow + 8min), kNow + 4min);
  // Already expired: now. Never expires: never.
  EXPECT_EQ(refresh_time(kNow, kNow - 1s), kNow);
  EXPECT_EQ(refresh_time(kNow, SystemClock::time_point::max()), SystemClock::time_point::max());
}

}  // namespace
}  // namespace llmgate::providers::cloud
