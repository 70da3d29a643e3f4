// AWS credentials from the environment and the shared credentials file
// (providers/cloud/aws_credentials.h), as the AWS SDKs' default chain reads them.
#include "providers/cloud/aws_credentials.h"

#include <gtest/gtest.h>

#include <map>
#include <string>

namespace llmgate::providers::cloud {
namespace {

Getenv env_of(std::map<std::string, std::string> vars) {
  return [vars = std::move(vars)](const char* name) -> std::optional<std::string> {
    auto it = vars.find(name);
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
}

TEST(AwsCredentials, FromTheEnvironmentWithAndWithoutASessionToken) {
  std::string error;
  auto f = credentials_from_environment(
      env_of({{"AWS_ACCESS_KEY_ID", "AKID"}, {"AWS_SECRET_ACCESS_KEY", "SECRET"}}), &error);
  ASSERT_TRUE(f);
  EXPECT_EQ(f->credentials.access_key_id, "AKID");
  EXPECT_EQ(f->credentials.secret_access_key, "SECRET");
  EXPECT_EQ(f->credentials.session_token, "");
  EXPECT_EQ(f->source, "environment");
  f = credentials_from_environment(env_of({{"AWS_ACCESS_KEY_ID", "AKID"},
                                           {"AWS_SECRET_ACCESS_KEY", "SECRET"},
                                           {"AWS_SESSION_TOKEN", "TOKEN"}}),
                                   &error);
  ASSERT_TRUE(f);
  EXPECT_EQ(f->credentials.session_token, "TOKEN");
}

TEST(AwsCredentials, NoneInTheEnvironmentIsNotAnErrorHalfOfThemIs) {
  std::string error;
  EXPECT_FALSE(credentials_from_environment(env_of({}), &error));
  EXPECT_EQ(error, "");
  // An empty variable counts as unset, as in the SDKs.
  EXPECT_FALSE(credentials_from_environment(env_of({{"AWS_ACCESS_KEY_ID", ""}}), &error));
  EXPECT_EQ(error, "");
  EXPECT_FALSE(credentials_from_environment(env_of({{"AWS_ACCESS_KEY_ID", "AKID"}}), &error));
  EXPECT_EQ(error, "AWS_SECRET_ACCESS_KEY is not set, though AWS_ACCESS_KEY_ID is");
}

constexpr const char* kFile = R"(# shared credentials
[default]
aws_access_key_id = AKIDDEFAULT
aws_secret_access_key=SECRETDEFAULT

[prod]
aws_access_key_id   =   AKIDPROD   ; a comment
aws_secret_access_key = SECRET/PROD+x=
aws_session_token = TOKEN==
[profile configured]
aws_access_key_id = AKIDCONF
aws_secret_access_key = SECRETCONF
[broken]
aws_access_key_id = ONLYID
)";

TEST(AwsCredentials, FromTheSharedFileByProfile) {
  std::string error;
  auto f = credentials_from_file(kFile, "default", "/h/.aws/credentials", &error);
  ASSERT_TRUE(f) << error;
  EXPECT_EQ(f->credentials.access_key_id, "AKIDDEFAULT");
  EXPECT_EQ(f->credentials.secret_access_key, "SECRETDEFAULT");
  EXPECT_EQ(f->source, "file /h/.aws/credentials [profile default]");
  f = credentials_from_file(kFile, "prod", "/h/.aws/credentials", &error);
  ASSERT_TRUE(f) << error;
  EXPECT_EQ(f->credentials.access_key_id, "AKIDPROD");
  EXPECT_EQ(f->credentials.secret_access_key, "SECRET/PROD+x=");  // '=' in a value stays
  EXPECT_EQ(f->credentials.session_token, "TOKEN==");
  f = credentials_from_file(kFile, "configured", "/h/.aws/config", &error);
  ASSERT_TRUE(f) << error;
  EXPECT_EQ(f->credentials.access_key_id, "AKIDCONF");
  EXPECT_FALSE(credentials_from_file(kFile, "absent", "/h/.aws/credentials", &error));
  EXPECT_FALSE(credentials_from_file(kFile, "broken", "/h/.aws/credentials", &error));
  EXPECT_EQ(error, "file /h/.aws/credentials [profile broken] has no aws_secret_access_key");
}

TEST(AwsCredentials, PathProfileAndWebIdentityFromTheEnvironment) {
  EXPECT_EQ(shared_credentials_path(env_of({{"HOME", "/home/u"}})), "/home/u/.aws/credentials");
  EXPECT_EQ(shared_credentials_path(env_of({{"AWS_SHARED_CREDENTIALS_FILE", "/etc/aws/creds"}})),
            "/etc/aws/creds");
  EXPECT_EQ(profile_name(env_of({})), "default");
  EXPECT_EQ(profile_name(env_of({{"AWS_PROFILE", "prod"}})), "prod");
  EXPECT_EQ(profile_name(env_of({{"AWS_PROFILE", "prod"}}), "configured"), "configured");
  EXPECT_FALSE(web_identity_from_environment(env_of({{"AWS_ROLE_ARN", "arn:aws:iam::1:role/r"}})));
  auto w = web_identity_from_environment(
      env_of({{"AWS_ROLE_ARN", "arn:aws:iam::1:role/r"},
              {"AWS_WEB_IDENTITY_TOKEN_FILE", "/var/run/secrets/eks.amazonaws.com/token"}}));
  ASSERT_TRUE(w);
  EXPECT_EQ(w->role_arn, "arn:aws:iam::1:role/r");
  EXPECT_EQ(w->session_name, "llmgate");
}

TEST(AwsCredentials, IniToleratesWhatIsNotIni) {
  const IniSections ini = parse_ini("key = before any section\n[unclosed\n[s]\nnovalue\nk=v\n\r\n");
  ASSERT_EQ(ini.size(), 1u);
  EXPECT_EQ(ini.at("s").at("k"), "v");
}

}  // namespace
}  // namespace llmgate::providers::cloud
