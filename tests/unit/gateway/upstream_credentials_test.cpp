// Upstream credentials per provider (gateway/proxy/upstream_credentials.h):
// what an attempt gets from a cell at each point of its life, and which
// providers have one -- fixed AWS keys, web identity, auth: -- kept across
// a reload while their source is unchanged.
#include "gateway/proxy/upstream_credentials.h"

#include <gtest/gtest.h>

#include <map>

namespace llmgate::gateway {
namespace {

using namespace std::chrono_literals;
using providers::cloud::Credential;
const SystemClock::time_point kNow = SystemClock::time_point(std::chrono::seconds(1764480000));

providers::cloud::TokenSource source(std::string description) {
  providers::cloud::TokenSource s;
  s.kind = providers::cloud::TokenSource::Kind::kGoogleMetadata;
  s.description = std::move(description);
  return s;
}

std::string why(const CredentialCell::Current& c) {
  return std::holds_alternative<std::string>(c) ? std::get<std::string>(c) : "<a credential>";
}

TEST(CredentialCell, FromFetchingToValidToExpired) {
  CredentialCell cell("vertex", source("the metadata server"));
  EXPECT_FALSE(cell.settled());
  EXPECT_EQ(why(cell.current(kNow)), "no credential from the metadata server yet (being fetched)");
  cell.failed("token endpoint x: refused");
  EXPECT_TRUE(cell.settled());
  EXPECT_EQ(why(cell.current(kNow)),
            "no credential from the metadata server: token endpoint x: refused");
  Credential c;
  c.bearer = "ya29.a";
  c.expires = kNow + 1h;
  cell.store(c);
  const auto got = cell.current(kNow);
  ASSERT_TRUE(std::holds_alternative<std::shared_ptr<const Credential>>(got));
  EXPECT_EQ(std::get<std::shared_ptr<const Credential>>(got)->bearer, "ya29.a");
  // A failed refresh leaves the credential in hand while it lives...
  cell.failed("token endpoint x: timed out");
  EXPECT_TRUE(
      std::holds_alternative<std::shared_ptr<const Credential>>(cell.current(kNow + 59min)));
  // ...and says why once it has expired. Never the token itself.
  const std::string expired = why(cell.current(kNow + 1h));
  EXPECT_EQ(expired,
            "the credential from the metadata server expired at 2025-11-30T06:20:00Z; refreshing "
            "it failed: token endpoint x: timed out");
  EXPECT_EQ(expired.find("ya29"), std::string::npos);
}

TEST(UpstreamCredentials, WhoHasOneAndReloadsKeepIt) {
  config::Config cfg;
  config::Provider bedrock;
  bedrock.name = "bedrock";
  bedrock.protocol = config::Protocol::kBedrock;
  bedrock.aws_region = "us-east-1";
  config::Provider keyed = bedrock;
  keyed.name = "keyed";
  keyed.api_key = "bedrock-api-key";  // a bearer key: nothing to sign with
  config::Provider vertex;
  vertex.name = "vertex";
  vertex.auth.kind = config::ProviderAuth::Kind::kGoogleMetadata;
  vertex.auth.token_url = "http://169.254.169.254/token";
  config::Provider plain;
  plain.name = "plain";
  cfg.providers = {bedrock, keyed, vertex, plain};
  std::map<std::string, std::string> env = {{"AWS_ACCESS_KEY_ID", "AKID"},
                                            {"AWS_SECRET_ACCESS_KEY", "secret"}};
  const providers::cloud::Getenv getenv = [&](const char* name) -> std::optional<std::string> {
    auto it = env.find(name);
    if (it == env.end()) return std::nullopt;
    return it->second;
  };
  const providers::cloud::ReadFile none = [](const std::string&) { return std::nullopt; };
  const UpstreamCredentials first = upstream_credentials(cfg, nullptr, getenv, none);
  ASSERT_EQ(first.size(), 2u);
  const auto aws = std::get<std::shared_ptr<const Credential>>(first.at("bedrock")->current(kNow));
  EXPECT_EQ(aws->aws->access_key_id, "AKID");
  EXPECT_FALSE(first.at("bedrock")->source());
  ASSERT_TRUE(first.at("vertex")->source());
  EXPECT_EQ(std::get<std::shared_ptr<const Credential>>(credential_for(first, plain, kNow)),
            nullptr);  // needs none

  // A reload: the same source keeps its cell (and the token in hand).
  const UpstreamCredentials second = upstream_credentials(cfg, &first, getenv, none);
  EXPECT_EQ(second.at("vertex"), first.at("vertex"));
  cfg.providers[2].auth.token_url = "http://metadata.google.internal/token";
  const UpstreamCredentials third = upstream_credentials(cfg, &second, getenv, none);
  EXPECT_NE(third.at("vertex"), second.at("vertex"));

  // No AWS credentials: web identity when the environment names one, else
  // a cell that says why.
  env.clear();
  env["AWS_WEB_IDENTITY_TOKEN_FILE"] = "/var/run/secrets/eks/token";
  env["AWS_ROLE_ARN"] = "arn:aws:iam::1:role/r";
  const UpstreamCredentials irsa = upstream_credentials(cfg, nullptr, getenv, none);
  ASSERT_TRUE(irsa.at("bedrock")->source());
  EXPECT_EQ(irsa.at("bedrock")->source()->kind,
            providers::cloud::TokenSource::Kind::kAwsWebIdentity);
  // Else the instance profile, from EC2's instance metadata...
  env.clear();
  const UpstreamCredentials ec2 = upstream_credentials(cfg, nullptr, getenv, none);
  ASSERT_TRUE(ec2.at("bedrock")->source());
  EXPECT_EQ(ec2.at("bedrock")->source()->kind, providers::cloud::TokenSource::Kind::kAwsInstance);
  EXPECT_EQ(ec2.at("bedrock")->source()->token_url, "http://169.254.169.254");
  // ...unless there is none to ask.
  env["AWS_EC2_METADATA_DISABLED"] = "true";
  const UpstreamCredentials nothing = upstream_credentials(cfg, nullptr, getenv, none);
  EXPECT_TRUE(nothing.at("bedrock")->settled());
  EXPECT_TRUE(
      why(nothing.at("bedrock")->current(kNow)).starts_with("no credential: no AWS credentials"))
      << why(nothing.at("bedrock")->current(kNow));
}

}  // namespace
}  // namespace llmgate::gateway
