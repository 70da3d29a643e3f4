// providers[].auth: Google service accounts, Application Default
// Credentials, the metadata server and Entra ID, with the values the
// environment supplies; and the combinations that cannot work.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "config/config.h"
#include "config/missing_secrets.h"
#include "tests/unit/config/config_test_support.h"

namespace llmgate::config {
namespace {

using testing::config_error;
using testing::fake_env;
using ::testing::HasSubstr;
using ::testing::Not;
using testing::parse;
using testing::TempFile;
using Kind = ProviderAuth::Kind;

std::string provider(const std::string& rest) {
  return "providers:\n  - {name: vertex, protocol: gemini, base_url: "
         "\"https://us-central1-aiplatform.googleapis.com/v1/projects/p/locations/us-central1/"
         "publishers/google\", " +
         rest + "}\n";
}

class ProviderAuthTest : public ::testing::Test {
 protected:
  void SetUp() override { fake_env().clear(); }
};

TEST_F(ProviderAuthTest, AServiceAccountKeyFile) {
  TempFile key(R"({"type":"service_account"})");
  const auto cfg = parse(provider("auth: {google_service_account_file: \"" + key.path() + "\"}"));
  const ProviderAuth& a = cfg->providers.at(0).auth;
  EXPECT_EQ(a.kind, Kind::kGoogleServiceAccount);
  EXPECT_EQ(a.file, key.path());
  EXPECT_EQ(a.token_url, "");  // the key file's token_uri
  EXPECT_TRUE(a.enabled());
}

TEST_F(ProviderAuthTest, AnUnreadableKeyFileIsAnErrorNowButNotUnderCheckConfig) {
  const std::string yaml = provider("auth: {google_service_account_file: /nonexistent/sa.json}");
  EXPECT_THAT(config_error(yaml), HasSubstr("cannot read \"/nonexistent/sa.json\""));
  MissingSecrets without_secrets;
  EXPECT_EQ(parse(yaml)->providers.at(0).auth.kind, Kind::kGoogleServiceAccount);
}

TEST_F(ProviderAuthTest, ApplicationDefaultCredentialsAreTheVariablesKeyFileElseTheMetadataServer) {
  EXPECT_EQ(parse(provider("auth: {google: default}"))->providers.at(0).auth.token_url,
            "http://metadata.google.internal/computeMetadata/v1/instance/service-accounts/"
            "default/token");
  TempFile key("{}");
  fake_env()["GOOGLE_APPLICATION_CREDENTIALS"] = key.path();
  const auto cfg = parse(provider("auth: {google: default}"));
  EXPECT_EQ(cfg->providers.at(0).auth.kind, Kind::kGoogleServiceAccount);
  EXPECT_EQ(cfg->providers.at(0).auth.file, key.path());
  // `metadata` asks the metadata server whatever the variable says, at GCE_METADATA_HOST.
  fake_env()["GCE_METADATA_HOST"] = "10.0.0.1:8080";
  const auto m = parse(provider("auth: {google: metadata}"));
  EXPECT_EQ(m->providers.at(0).auth.kind, Kind::kGoogleMetadata);
  EXPECT_EQ(m->providers.at(0).auth.token_url,
            "http://10.0.0.1:8080/computeMetadata/v1/instance/service-accounts/default/token");
}

TEST_F(ProviderAuthTest, EntraClientSecretWithTheEnvironmentsDefaults) {
  fake_env()["AZURE_TENANT_ID"] = "tenant-1";
  fake_env()["AZURE_CLIENT_ID"] = "client-1";
  fake_env()["AOAI_SECRET"] = "s3cret";
  const auto cfg = parse(
      "providers:\n  - {name: azure, base_url: \"https://r.openai.azure.com/openai\", "
      "auth: {entra: {client_secret_env: AOAI_SECRET}}}\n");
  const ProviderAuth& a = cfg->providers.at(0).auth;
  EXPECT_EQ(a.kind, Kind::kEntra);
  EXPECT_EQ(a.tenant_id, "tenant-1");
  EXPECT_EQ(a.client_id, "client-1");
  EXPECT_EQ(a.client_secret, "s3cret");
  EXPECT_EQ(a.client_secret_source, "env:AOAI_SECRET");
  EXPECT_EQ(a.authority, "https://login.microsoftonline.com");
  EXPECT_THAT(a.source, Not(HasSubstr("s3cret")));
}

TEST_F(ProviderAuthTest, EntraWorkloadIdentityFromTheFederatedTokenFileVariable) {
  TempFile token("eyJ...");
  fake_env()["AZURE_FEDERATED_TOKEN_FILE"] = token.path();
  fake_env()["AZURE_AUTHORITY_HOST"] = "https://login.microsoftonline.us/";
  const auto cfg = parse(
      "providers:\n  - {name: azure, base_url: \"https://r.openai.azure.com/openai\", "
      "auth: {entra: {tenant_id: t, client_id: c}}}\n");
  const ProviderAuth& a = cfg->providers.at(0).auth;
  EXPECT_EQ(a.file, token.path());
  EXPECT_EQ(a.client_secret, "");
  EXPECT_EQ(a.authority, "https://login.microsoftonline.us");
}

TEST_F(ProviderAuthTest, WhatCannotWorkIsRefused) {
  EXPECT_THAT(config_error(provider("auth: {}")),
              HasSubstr("set exactly one of google_service_account_file, google and entra"));
  EXPECT_THAT(config_error(provider("auth: {google: adc}")),
              HasSubstr("expected default or metadata, got \"adc\""));
  fake_env()["KEY"] = "k";
  EXPECT_THAT(config_error(provider("api_key_env: KEY, auth: {google: metadata}")),
              HasSubstr("set either api_key_env/api_key_file or auth, not both"));
  EXPECT_THAT(config_error(provider("api_key_header: Authorization, auth: {google: metadata}")),
              HasSubstr("api_key_header is for api_key"));
  EXPECT_THAT(config_error("providers:\n  - {name: b, protocol: bedrock, base_url: "
                           "\"https://bedrock-runtime.us-east-1.amazonaws.com\", auth: {google: "
                           "metadata}}\n"),
              HasSubstr("protocol: bedrock signs with AWS credentials"));
  EXPECT_THAT(config_error(provider("auth: {entra: {tenant_id: t, client_id: c}}")),
              HasSubstr("names no credential"));
  fake_env()["S"] = "x";
  EXPECT_THAT(config_error(provider("auth: {entra: {client_id: c, client_secret_env: S}}")),
              HasSubstr("names no tenant"));
  EXPECT_THAT(config_error(provider("auth: {google: metadata, token_url: \"ftp://x\"}")),
              HasSubstr("token_url"));
}

TEST_F(ProviderAuthTest, AnUnsetSecretVariableIsOnlyListedUnderCheckConfig) {
  const std::string yaml =
      provider("auth: {entra: {tenant_id: t, client_id: c, client_secret_env: ENTRA_SECRET}}");
  EXPECT_THAT(config_error(yaml), HasSubstr("environment variable \"ENTRA_SECRET\" is not set"));
  MissingSecrets without_secrets;
  parse(yaml);
  EXPECT_EQ(without_secrets.names(), std::vector<std::string>{"ENTRA_SECRET"});
}

}  // namespace
}  // namespace llmgate::config
