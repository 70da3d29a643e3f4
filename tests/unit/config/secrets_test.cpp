// API keys by reference: api_key_env and api_key_file. A key's value must
// never appear in an error message.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

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

std::string provider_with_key(const std::string& key_line) {
  return "providers:\n  - name: groq\n    base_url: https://api.groq.com/openai/v1\n    " +
         key_line + "\n";
}

class SecretsTest : public ::testing::Test {
 protected:
  void SetUp() override { fake_env().clear(); }
};

TEST_F(SecretsTest, ResolvesTheKeyFromTheNamedEnvironmentVariable) {
  fake_env()["GROQ_API_KEY"] = "gsk-abc123";
  const auto config = parse(provider_with_key("api_key_env: GROQ_API_KEY"));
  EXPECT_EQ(config->providers.at(0).api_key, "gsk-abc123");
  EXPECT_EQ(config->providers.at(0).api_key_source, "env:GROQ_API_KEY");
}

TEST_F(SecretsTest, TrimsWhitespaceAroundAKeyFromTheEnvironment) {
  fake_env()["GROQ_API_KEY"] = " gsk-abc123\n";
  EXPECT_EQ(parse(provider_with_key("api_key_env: GROQ_API_KEY"))->providers.at(0).api_key,
            "gsk-abc123");
}

TEST_F(SecretsTest, RejectsAnUnsetVariableNamingIt) {
  EXPECT_EQ(
      config_error(provider_with_key("api_key_env: GROQ_API_KEY")),
      R"(cfg.yaml: providers[0].api_key_env: environment variable "GROQ_API_KEY" is not set)");
}

TEST_F(SecretsTest, AConfigCheckWithoutTheSecretsListsTheUnsetOnesAndChecksTheRest) {
  const std::string yaml =
      provider_with_key("api_key_env: GROQ_API_KEY") +
      "  - name: other\n    base_url: https://other.example/v1\n    api_key_env: OTHER_KEY\n"
      "    headers: {x-team: {env: TEAM_TOKEN}}\n";
  {
    MissingSecrets missing;
    const auto config = parse(yaml);
    EXPECT_EQ(missing.names(),
              (std::vector<std::string>{"GROQ_API_KEY", "OTHER_KEY", "TEAM_TOKEN"}));
    EXPECT_EQ(config->providers.at(0).api_key_source, "env:GROQ_API_KEY");
    // ... and a real mistake is still one.
    EXPECT_THAT(
        config_error(yaml + "models: [{name: m, deployments: [{provider: grok, model: x}]}]\n"),
        HasSubstr("grok"));
    // A variable that is set is read as ever; only the unset ones stand in.
    fake_env()["GROQ_API_KEY"] = "gsk-abc123";
    EXPECT_EQ(parse(yaml)->providers.at(0).api_key, "gsk-abc123");
  }
  // Out of its scope, an unset variable is the error it always was.
  fake_env().clear();
  EXPECT_EQ(
      config_error(provider_with_key("api_key_env: GROQ_API_KEY")),
      R"(cfg.yaml: providers[0].api_key_env: environment variable "GROQ_API_KEY" is not set)");
}

TEST_F(SecretsTest, RejectsAnEmptyVariable) {
  fake_env()["GROQ_API_KEY"] = " \n";
  EXPECT_EQ(config_error(provider_with_key("api_key_env: GROQ_API_KEY")),
            R"(cfg.yaml: providers[0].api_key_env: environment variable "GROQ_API_KEY" is empty)");
}

TEST_F(SecretsTest, RejectsAKeyWithInnerWhitespaceWithoutEchoingIt) {
  fake_env()["GROQ_API_KEY"] = "Bearer gsk-hidden-part";
  const std::string message = config_error(provider_with_key("api_key_env: GROQ_API_KEY"));
  EXPECT_EQ(
      message,
      R"(cfg.yaml: providers[0].api_key_env: environment variable "GROQ_API_KEY" contains spaces or control characters)");
  EXPECT_THAT(message, Not(HasSubstr("hidden")));
}

TEST_F(SecretsTest, RejectsAKeyPastedIntoApiKeyEnvWithoutEchoingIt) {
  const std::string message = config_error(provider_with_key("api_key_env: sk-proj-pasted-SECRET"));
  EXPECT_EQ(message,
            "cfg.yaml: providers[0].api_key_env: expected the name of an environment variable "
            "(letters, digits, '_'), not the key itself");
  EXPECT_THAT(message, Not(HasSubstr("SECRET")));
}

TEST_F(SecretsTest, ReadsTheKeyFileTrimmingTheTrailingNewline) {
  TempFile key("  gsk-from-file\n\n");
  const auto config = parse(provider_with_key("api_key_file: " + key.path()));
  EXPECT_EQ(config->providers.at(0).api_key, "gsk-from-file");
  EXPECT_EQ(config->providers.at(0).api_key_source, "file:" + key.path());
}

TEST_F(SecretsTest, WarnsOfAKeyFileOthersCanRead) {
  TempFile key("gsk-from-file\n");
  ASSERT_EQ(::chmod(key.path().c_str(), 0644), 0);
  auto config = parse(provider_with_key("api_key_file: " + key.path()));
  ASSERT_EQ(config->warnings.size(), 1u);
  EXPECT_THAT(config->warnings[0], HasSubstr("has mode 0644: readable by group or others"));
  EXPECT_THAT(config->warnings[0], Not(HasSubstr("gsk-from-file")));
  ASSERT_EQ(::chmod(key.path().c_str(), 0600), 0);
  EXPECT_TRUE(parse(provider_with_key("api_key_file: " + key.path()))->warnings.empty());
}

TEST_F(SecretsTest, RejectsAMissingKeyFileNamingIt) {
  EXPECT_EQ(
      config_error(provider_with_key("api_key_file: /nonexistent/groq")),
      R"(cfg.yaml: providers[0].api_key_file: cannot read "/nonexistent/groq": No such file or directory)");
}

TEST_F(SecretsTest, RejectsADirectoryAsKeyFile) {
  const std::string dir = std::filesystem::temp_directory_path().string();
  EXPECT_EQ(config_error(provider_with_key("api_key_file: " + dir)),
            "cfg.yaml: providers[0].api_key_file: cannot read \"" + dir + "\": Is a directory");
}

TEST_F(SecretsTest, RejectsAnEmptyKeyFile) {
  TempFile key("\n");
  EXPECT_EQ(config_error(provider_with_key("api_key_file: " + key.path())),
            "cfg.yaml: providers[0].api_key_file: file \"" + key.path() + "\" is empty");
}

TEST_F(SecretsTest, RejectsAnOversizedKeyFileWithoutReadingItAll) {
  TempFile key(std::string(100'000, 'k'));
  EXPECT_EQ(config_error(provider_with_key("api_key_file: " + key.path())),
            "cfg.yaml: providers[0].api_key_file: cannot read \"" + key.path() +
                "\": larger than 65536 bytes");
}

TEST_F(SecretsTest, RejectsAKeyFileHoldingTwoLinesWithoutEchoingThem) {
  TempFile key("gsk-line-one\ngsk-line-two\n");
  const std::string message = config_error(provider_with_key("api_key_file: " + key.path()));
  EXPECT_EQ(message, "cfg.yaml: providers[0].api_key_file: file \"" + key.path() +
                         "\" contains spaces or control characters inside the key");
  EXPECT_THAT(message, Not(HasSubstr("gsk-line")));
}

TEST_F(SecretsTest, ProviderWithoutAKeyHasNone) {
  const auto config = parse("providers: [{name: local, base_url: 'http://127.0.0.1:8000'}]");
  EXPECT_EQ(config->providers.at(0).api_key, "");
  EXPECT_EQ(config->providers.at(0).api_key_source, "");
}

// Errors raised after a key was resolved (later keys of the same provider, a
// later provider, models) must not carry it either.
TEST_F(SecretsTest, LaterErrorsNeverContainAResolvedKey) {
  const std::string secret = "gsk-RESOLVED-SECRET";
  fake_env()["GROQ_API_KEY"] = secret;
  TempFile key_file(secret + "\n");
  const std::string base = provider_with_key("api_key_env: GROQ_API_KEY");
  const std::string from_file = provider_with_key("api_key_file: " + key_file.path());
  for (const std::string& yaml : {
           base + "    region: 'us east'\n",
           base + "    headers: { Authorization: x }\n",
           base + "    bogus: 1\n",
           base + "  - {name: groq, base_url: 'https://h'}\n",
           base + "models: [{name: m, deployments: [{provider: nope, model: x}]}]\n",
           from_file + "    pool: { max_connections: 0 }\n",
           from_file + "    api_key_env: GROQ_API_KEY\n",
       }) {
    const std::string message = config_error(yaml);
    EXPECT_THAT(message, ::testing::StartsWith("cfg.yaml: ")) << yaml;
    EXPECT_THAT(message, Not(HasSubstr("RESOLVED"))) << message;
  }
}

TEST(ProcessEnv, ReadsTheRealEnvironment) {
  ::setenv("LLMGATE_CONFIG_TEST_VAR", "value-1", 1);
  EXPECT_EQ(process_env("LLMGATE_CONFIG_TEST_VAR"), "value-1");
  ::unsetenv("LLMGATE_CONFIG_TEST_VAR");
  EXPECT_EQ(process_env("LLMGATE_CONFIG_TEST_VAR"), std::nullopt);
}

TEST(ProcessEnv, IsTheDefaultLookupOfParseConfig) {
  ::setenv("LLMGATE_CONFIG_TEST_KEY", "gsk-real-env", 1);
  const auto config = parse_config(
      "providers: [{name: p, base_url: 'https://h', api_key_env: LLMGATE_CONFIG_TEST_KEY}]");
  ::unsetenv("LLMGATE_CONFIG_TEST_KEY");
  EXPECT_EQ(config->providers.at(0).api_key, "gsk-real-env");
}

}  // namespace
}  // namespace llmgate::config
