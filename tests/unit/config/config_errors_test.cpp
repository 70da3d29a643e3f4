// The error matrix: for each kind of mistake, the exact message, which must
// begin with the origin and the path of the offending key.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "config/config.h"
#include "tests/unit/config/config_test_support.h"

namespace llmgate::config {
namespace {

using testing::config_error;
using testing::config_error_at;
using testing::fake_env;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;

// Set in the environment for every case: no message may ever contain it.
constexpr const char* kSecret = "gsk-SECRET-do-not-print";

// A valid provider (with a key from the environment) and model, for cases
// that need something to refer to.
const std::string kProviders = R"yaml(
providers:
  - name: groq
    base_url: https://api.groq.com/openai/v1
    api_key_env: GROQ_API_KEY
)yaml";

std::string provider_with(const std::string& extra) {
  return "providers:\n  - name: groq\n    base_url: https://api.groq.com/openai/v1\n"
         "    api_key_env: GROQ_API_KEY\n" +
         extra;
}

std::string deployment_with(const std::string& extra) {
  return kProviders + "models:\n  - name: fast\n    deployments:\n      - provider: groq\n" + extra;
}

struct ErrorCase {
  const char* name;  // the claim, used as the test name
  std::string yaml;
  std::string message;
};

const ErrorCase kCases[] = {
    // --- unknown keys, with the path of the mapping that holds them
    {"RejectsUnknownTopLevelKeyAndSuggestsTheClosest", "provider: []\n",
     R"(cfg.yaml: unknown key "provider" (did you mean "providers"?))"},
    {"RejectsUnknownTopLevelKeyBeforeReadingAnySection",
     "models: [{name: m, deployments: [{provider: groq, model: x}]}]\nprovders: []\n",
     R"(cfg.yaml: unknown key "provders" (did you mean "providers"?))"},
    {"RejectsUnknownKeyWithItsPath",
     kProviders + "  - {name: b, base_url: 'http://b'}\n  - name: c\n    base_url: http://c\n"
                  "    timeouts: { ttf: 3s }\n",
     R"(cfg.yaml: providers[2].timeouts: unknown key "ttf" (did you mean "ttft"?))"},
    {"ListsTheKnownKeysWhenNoneIsClose",
     "server: { listeners: [{address: 127.0.0.1, colour: red}] }\n",
     R"(cfg.yaml: server.listeners[0]: unknown key "colour" (expected one of: address, port))"},
    {"RejectsUnknownKeyInDeployment", deployment_with("        model: x\n        weight: 2\n"),
     R"(cfg.yaml: models[0].deployments[0]: unknown key "weight" (expected one of: provider, model, price, expected_ttft, expected_tps, max_concurrent, max_queue, context_window, prefill_ms_per_1k_tokens, stream, ttft_timeout, continuation, operations))"},
    {"RejectsAnUnknownWayToContinue",
     deployment_with("        model: x\n        continuation: resume\n"),
     R"(cfg.yaml: models[0].deployments[0].continuation: expected one of none, prefix, continue_final_message, prefill, got "resume")"},
    {"RejectsPrefillOnAnOpenAiCompatibleServer",
     deployment_with("        model: x\n        continuation: prefill\n"),
     R"(cfg.yaml: models[0].deployments[0].continuation: prefill is Anthropic's and Gemini's way; an OpenAI-compatible server continues with prefix (DeepSeek, Mistral) or continue_final_message (vLLM), and OpenAI's own API not at all (none))"},
    {"RejectsAnUnknownOperation",
     deployment_with("        model: x\n        operations: [chat, images]\n"),
     R"(cfg.yaml: models[0].deployments[0].operations[1]: expected one of chat, responses, embeddings, completions, got "images")"},
    {"RejectsAnOperationListedTwice",
     deployment_with("        model: x\n        operations: [chat, chat]\n"),
     R"(cfg.yaml: models[0].deployments[0].operations[1]: listed twice)"},
    {"RejectsOperationsBeyondChatOnANativeProtocol",
     "providers:\n  - {name: claude, protocol: anthropic, base_url: "
     "'https://api.anthropic.com/v1'}\n"
     "models:\n  - name: m\n    deployments:\n      - {provider: claude, model: x, operations: "
     "[chat, responses]}\n",
     R"(cfg.yaml: models[0].deployments[0].operations: only chat is served through the anthropic protocol (the others need an OpenAI-compatible provider))"},
    {"RejectsUnknownKeyInLimits", "server: { limits: { max_body: 1MiB } }\n",
     R"(cfg.yaml: server.limits: unknown key "max_body" (expected one of: max_body_size, max_embeddings_body_size, max_header_size, max_event_size, max_connections, client_header_timeout, client_idle_timeout))"},
    {"SuggestsKeysCaseInsensitively", "server: { Workers: 2 }\n",
     R"(cfg.yaml: server: unknown key "Workers" (did you mean "workers"?))"},
    {"ReportsAMisspeltRequiredKeyAsUnknownRatherThanMissing",
     "providers: [{name: groq, base_ur: 'https://h'}]\n",
     R"(cfg.yaml: providers[0]: unknown key "base_ur" (did you mean "base_url"?))"},

    // --- missing required keys
    {"RejectsProviderWithoutBaseUrl", "providers: [{name: groq}]\n",
     R"(cfg.yaml: providers[0]: missing required key "base_url")"},
    {"RejectsProviderWithoutName", "providers: [{base_url: 'https://h'}]\n",
     R"(cfg.yaml: providers[0]: missing required key "name")"},
    {"RejectsModelWithoutDeployments", kProviders + "models: [{name: m}]\n",
     R"(cfg.yaml: models[0]: missing required key "deployments")"},
    {"RejectsDeploymentWithoutUpstreamModel", deployment_with(""),
     R"(cfg.yaml: models[0].deployments[0]: missing required key "model")"},

    // --- references and duplicates
    {"RejectsDeploymentNamingAnUnknownProvider",
     deployment_with("        model: a\n      - provider: grok\n        model: b\n"),
     R"(cfg.yaml: models[0].deployments[1].provider: unknown provider "grok" (did you mean "groq"?))"},
    {"RejectsUnknownProviderWithoutAHintWhenNoneIsClose",
     kProviders + "models: [{name: m, deployments: [{provider: openai, model: x}]}]\n",
     R"(cfg.yaml: models[0].deployments[0].provider: unknown provider "openai")"},
    {"RejectsDuplicateProviderNames", kProviders + "  - {name: groq, base_url: 'https://other'}\n",
     R"(cfg.yaml: providers[1].name: duplicate provider name "groq")"},
    {"RejectsDuplicateModelNames",
     kProviders + "models:\n  - {name: fast, deployments: [{provider: groq, model: a}]}\n"
                  "  - {name: fast, deployments: [{provider: groq, model: b}]}\n",
     R"(cfg.yaml: models[1].name: duplicate model name "fast")"},
    {"RejectsTheSameDeploymentTwiceInOneModel",
     deployment_with("        model: llama\n      - provider: groq\n        model: llama\n"),
     R"(cfg.yaml: models[0].deployments[1]: duplicate deployment "groq/llama")"},
    {"RejectsDuplicateYamlKeys", "server:\n  workers: 1\n  workers: 2\n",
     R"(cfg.yaml: server: duplicate key "workers")"},
    {"RejectsDuplicateListeners",
     "server: { listeners: [{port: 8080}, {address: 127.0.0.1, port: 8080}] }\n",
     R"(cfg.yaml: server.listeners[1]: duplicate listener 127.0.0.1:8080)"},
    {"RejectsHeadersThatDifferOnlyInCase", provider_with("    headers: { X-Team: a, x-team: b }\n"),
     R"(cfg.yaml: providers[0].headers.x-team: duplicate header "x-team")"},

    // --- wrong types
    {"RejectsAListWhereAMappingBelongs", "server: [1, 2]\n",
     R"(cfg.yaml: server: expected a mapping, got a list)"},
    {"RejectsAMappingWhereAListBelongs", "providers: { name: groq }\n",
     R"(cfg.yaml: providers: expected a list, got a mapping)"},
    {"RejectsAScalarWhereAListBelongs", kProviders + "models: [{name: m, deployments: groq}]\n",
     R"(cfg.yaml: models[0].deployments: expected a list, got "groq")"},
    {"RejectsTextWhereANumberBelongs", "server: { workers: many }\n",
     R"(cfg.yaml: server.workers: expected a number, got "many")"},
    {"RejectsAQuotedNumber", "server: { workers: \"4\" }\n",
     R"(cfg.yaml: server.workers: expected a number, got the quoted string "4")"},
    {"RejectsAFractionWhereAWholeNumberBelongs", "server: { listeners: [{port: 80.5}] }\n",
     R"(cfg.yaml: server.listeners[0].port: expected a whole number, got 80.5)"},
    {"RejectsAnEmptyValue", "server:\n", R"(cfg.yaml: server: expected a mapping, got null)"},
    {"RejectsNullForAString", "providers: [{name: ~, base_url: 'https://h'}]\n",
     R"(cfg.yaml: providers[0].name: expected a string, got null)"},
    {"RejectsYesAsABoolean", provider_with("    tls: { verify: yes }\n"),
     R"(cfg.yaml: providers[0].tls.verify: expected true or false, got "yes")"},
    {"RejectsANonFinitePrice",
     deployment_with("        model: x\n        price: { input_per_1m: .nan }\n"),
     R"(cfg.yaml: models[0].deployments[0].price.input_per_1m: expected a number, got ".nan")"},
    {"RejectsATopLevelList", "- server\n", R"(cfg.yaml: expected a mapping, got a list)"},
    {"RejectsNonStringKeys", "server: { [a]: 1 }\n",
     R"(cfg.yaml: server: expected string keys, got a list)"},

    // --- out of range values
    {"RejectsMoreThan1024Workers", "server: { workers: 2000 }\n",
     R"(cfg.yaml: server.workers: must be between 0 and 1024, got 2000)"},
    {"RejectsNegativeWorkers", "server: { workers: -1 }\n",
     R"(cfg.yaml: server.workers: must be between 0 and 1024, got -1)"},
    {"RejectsPortAbove65535", "server: { listeners: [{port: 70000}] }\n",
     R"(cfg.yaml: server.listeners[0].port: must be between 0 and 65535, got 70000)"},
    {"RejectsAPortThatOverflowsAnInteger",
     "server: { listeners: [{port: 99999999999999999999}] }\n",
     R"(cfg.yaml: server.listeners[0].port: must be between 0 and 65535, got 99999999999999999999)"},
    {"RejectsNegativePrices",
     deployment_with("        model: x\n        price: { input_per_1m: -0.5 }\n"),
     R"(cfg.yaml: models[0].deployments[0].price.input_per_1m: must not be negative)"},
    {"RejectsZeroTimeouts", "timeouts: { ttft: 0s }\n",
     R"(cfg.yaml: timeouts.ttft: must be greater than zero)"},
    {"RejectsZeroProviderTimeouts", provider_with("    timeouts: { idle: 0ms }\n"),
     R"(cfg.yaml: providers[0].timeouts.idle: must be greater than zero)"},
    {"RejectsZeroMaxConnections", provider_with("    pool: { max_connections: 0 }\n"),
     R"(cfg.yaml: providers[0].pool.max_connections: must be between 1 and 10000, got 0)"},
    {"RejectsZeroSizeLimits", "server: { limits: { max_header_size: 0 } }\n",
     R"(cfg.yaml: server.limits.max_header_size: must be greater than zero)"},
    {"RejectsSizeLimitsAbove1GiB", "server: { limits: { max_body_size: 2GiB } }\n",
     R"(cfg.yaml: server.limits.max_body_size: must be at most 1GiB, got 2GiB)"},
    {"RejectsAnEmptyListenerList", "server: { listeners: [] }\n",
     R"(cfg.yaml: server.listeners: must list at least one listener)"},
    {"RejectsAModelWithNoDeployments", kProviders + "models: [{name: m, deployments: []}]\n",
     R"(cfg.yaml: models[0].deployments: must list at least one deployment)"},

    // --- malformed values
    {"RejectsAMalformedDurationWithAnExample", "timeouts: { connect: 2 s }\n",
     R"(cfg.yaml: timeouts.connect: invalid duration "2 s" (expected e.g. 250ms, 2s, 1m))"},
    {"RejectsADurationWithoutUnit", "timeouts: { connect: 2 }\n",
     R"(cfg.yaml: timeouts.connect: invalid duration "2" (expected e.g. 250ms, 2s, 1m))"},
    {"RejectsSubMillisecondDurations", "server: { limits: { client_idle_timeout: 100us } }\n",
     R"(cfg.yaml: server.limits.client_idle_timeout: duration "100us" is not a whole number of milliseconds)"},
    {"RejectsAMappingWhereADurationBelongs", "timeouts: { total: { minutes: 5 } }\n",
     R"(cfg.yaml: timeouts.total: expected a duration such as 2s, got a mapping)"},
    {"RejectsAMalformedSize", "server: { limits: { max_body_size: 4 MB } }\n",
     R"(cfg.yaml: server.limits.max_body_size: invalid size "4 MB" (expected e.g. 1048576, 512KiB, 4MiB))"},
    {"RejectsAHostNameAsListenerAddress", "server: { listeners: [{address: localhost}] }\n",
     R"(cfg.yaml: server.listeners[0].address: expected an IP address such as 127.0.0.1, 0.0.0.0 or ::, got "localhost")"},
    {"RejectsAnUnsupportedUrlScheme", "providers: [{name: p, base_url: 'ftp://h'}]\n",
     R"(cfg.yaml: providers[0].base_url: invalid URL: unsupported scheme "ftp" (expected http or https))"},
    {"RejectsProviderNamesOutsideTheLabelAlphabet",
     "providers: [{name: 'gr oq', base_url: 'https://h'}]\n",
     R"(cfg.yaml: providers[0].name: expected letters, digits, '_', '.' or '-', got "gr oq")"},
    {"RejectsAnEmptyProviderName", "providers: [{name: '', base_url: 'https://h'}]\n",
     R"(cfg.yaml: providers[0].name: expected letters, digits, '_', '.' or '-', got "")"},
    {"RejectsAnEmptyModelName",
     kProviders + "models: [{name: '', deployments: [{provider: groq, model: x}]}]\n",
     R"(cfg.yaml: models[0].name: must not be empty)"},
    {"RejectsModelNamesWithSpaces",
     kProviders + "models: [{name: 'fast chat', deployments: [{provider: groq, model: x}]}]\n",
     R"(cfg.yaml: models[0].name: must not contain spaces or control characters, got "fast chat")"},
    {"RejectsAnEmptyUpstreamModelName", deployment_with("        model: ''\n"),
     R"(cfg.yaml: models[0].deployments[0].model: must not be empty)"},
    {"RejectsAnInvalidSniName", provider_with("    tls: { sni: 'a b' }\n"),
     R"(cfg.yaml: providers[0].tls.sni: expected a host name, got "a b")"},
    {"RejectsAnUnreadableCaFile", provider_with("    tls: { ca_file: /nonexistent/ca.pem }\n"),
     R"(cfg.yaml: providers[0].tls.ca_file: cannot read "/nonexistent/ca.pem": No such file or directory)"},
    {"RejectsTlsSettingsForAnHttpUpstream",
     "providers: [{name: p, base_url: 'http://h', tls: {verify: false}}]\n",
     R"(cfg.yaml: providers[0].tls: base_url is http://; tls settings need https://)"},

    // --- headers
    {"RejectsAnAuthorizationHeaderPointingToApiKeySettings",
     provider_with("    headers: { Authorization: Bearer x }\n"),
     R"(cfg.yaml: providers[0].headers.Authorization: header "Authorization" is managed by the gateway and cannot be set; use api_key_env or api_key_file)"},
    {"RejectsTheHostHeader", provider_with("    headers: { host: example.com }\n"),
     R"(cfg.yaml: providers[0].headers.host: header "host" is managed by the gateway and cannot be set)"},
    {"RejectsHopByHopHeaders", provider_with("    headers: { Connection: close }\n"),
     R"(cfg.yaml: providers[0].headers.Connection: header "Connection" is managed by the gateway and cannot be set)"},
    {"RejectsFramingHeaders", provider_with("    headers: { Transfer-Encoding: chunked }\n"),
     R"(cfg.yaml: providers[0].headers.Transfer-Encoding: header "Transfer-Encoding" is managed by the gateway and cannot be set)"},
    {"RejectsInvalidHeaderNames", provider_with("    headers: { 'X Extra': v }\n"),
     R"(cfg.yaml: providers[0].headers.X Extra: invalid header name "X Extra")"},
    {"RejectsHeaderValuesThatCouldSplitTheRequest",
     provider_with("    headers: { X-Extra: \"a\\r\\nEvil: 1\" }\n"),
     R"(cfg.yaml: providers[0].headers.X-Extra: header value contains control characters)"},

    // --- wire options (docs/providers.md)
    {"RejectsAHeaderSecretWithTwoSources",
     provider_with("    headers: { X-Key: {env: A, file: /b} }\n"),
     R"(cfg.yaml: providers[0].headers.X-Key: set one of env and file)"},
    {"RejectsAHeaderSecretFromAnUnsetVariable",
     provider_with("    headers: { X-Key: {env: NOPE_HEADER} }\n"),
     R"(cfg.yaml: providers[0].headers.X-Key.env: environment variable "NOPE_HEADER" is not set)"},
    {"RejectsAChatPathWithAQuery", provider_with("    chat_path: /chat?x=1\n"),
     R"(cfg.yaml: providers[0].chat_path: expected a path starting with '/' (no query, no spaces), got "/chat?x=1")"},
    {"RejectsAKeyHeaderAlsoSetInHeaders",
     provider_with("    headers: { Api-Key: x }\n    api_key_header: api-key\n"),
     R"(cfg.yaml: providers[0].api_key_header: header "api-key" is also set in headers)"},
    {"RejectsAKeyHeaderTheGatewayManages", provider_with("    api_key_header: Host\n"),
     R"(cfg.yaml: providers[0].api_key_header: header "Host" is managed by the gateway and cannot be set)"},
    {"RejectsAFirstTokenDeadlineThatIsNeitherADurationNorNone",
     deployment_with("        model: x\n        ttft_timeout: never\n"),
     R"(cfg.yaml: models[0].deployments[0].ttft_timeout: expected a duration (250ms, 2s, 1m) or none, got "never")"},

    {"RejectsAnUnknownProtocol", provider_with("    protocol: vertex\n"),
     R"(cfg.yaml: providers[0].protocol: expected one of openai, anthropic, gemini, bedrock, got "vertex")"},
    {"RejectsANegativeThinkingBudget", provider_with("    thinking_budgets: {high: -1}\n"),
     R"(cfg.yaml: providers[0].thinking_budgets.high: must be between 0 and 10000000, got -1)"},

    // --- secrets
    {"RejectsBothKeySources", provider_with("    api_key_file: /run/secrets/groq\n"),
     R"(cfg.yaml: providers[0]: set at most one of api_key_env and api_key_file)"},
    {"RejectsAnUnsetKeyVariableNamingIt",
     "providers: [{name: p, base_url: 'https://h', api_key_env: NOPE_KEY}]\n",
     R"(cfg.yaml: providers[0].api_key_env: environment variable "NOPE_KEY" is not set)"},

    // --- the document itself
    {"RejectsMoreThanOneDocument", "server: {}\n---\nserver: {}\n",
     R"(cfg.yaml: expected one YAML document, found 2 (or stray text after the first, such as a ',' at the top level))"},
    // Found by fuzz_config: yaml-cpp 0.7's LoadAll never returned on this.
    {"RejectsAStrayTopLevelCommaInsteadOfLoopingForever", "{server: {workers: 2}},\n",
     R"(cfg.yaml: expected one YAML document, found 2 (or stray text after the first, such as a ',' at the top level))"},
};

class ConfigErrorTest : public ::testing::TestWithParam<ErrorCase> {
 protected:
  void SetUp() override {
    fake_env().clear();
    fake_env()["GROQ_API_KEY"] = kSecret;
  }
};

TEST_P(ConfigErrorTest, ReportsTheExactMessage) {
  const std::string message = config_error(GetParam().yaml);
  EXPECT_EQ(message, GetParam().message) << "config:\n" << GetParam().yaml;
  EXPECT_THAT(message, Not(HasSubstr(kSecret)));
}

INSTANTIATE_TEST_SUITE_P(Matrix, ConfigErrorTest, ::testing::ValuesIn(kCases),
                         [](const auto& info) { return std::string(info.param.name); });

TEST(ConfigSyntaxError, ReportsLineAndColumn) {
  const std::string message = config_error_at("server:\n  workers: [1, 2\n");
  EXPECT_THAT(message, StartsWith("cfg.yaml:3:1: invalid YAML: "));
}

TEST(ConfigSyntaxError, ReportsTheLineOfABadIndent) {
  const std::string message = config_error_at("server:\n  workers: 2\n   limits: {}\n");
  EXPECT_THAT(message, StartsWith("cfg.yaml:3:"));
  EXPECT_THAT(message, HasSubstr("invalid YAML"));
}

TEST(ConfigSyntaxError, RejectsUnboundedNestingInsteadOfOverflowingTheStack) {
  const std::string message =
      config_error_at(std::string(100'000, '[') + std::string(100'000, ']'));
  EXPECT_THAT(message, StartsWith("cfg.yaml:1:"));
}

TEST(ConfigErrorOrigin, NamesTheOriginGivenByTheCaller) {
  try {
    parse_config("server: { workers: x }", "/etc/llmgate/gateway.yaml", &testing::fake_env_lookup);
    FAIL() << "expected a ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_THAT(e.what(), StartsWith("/etc/llmgate/gateway.yaml:1:20: server.workers: "));
  }
}

TEST(ConfigErrorOrigin, DefaultsToAPlaceholderOrigin) {
  try {
    parse_config("server: { workers: x }");
    FAIL() << "expected a ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_THAT(e.what(), StartsWith("<config>:1:20: server.workers: "));
  }
}

// With the provider's key set, as in the matrix.
class ConfigErrorLocation : public ::testing::Test {
 protected:
  void SetUp() override {
    fake_env().clear();
    fake_env()["GROQ_API_KEY"] = kSecret;
  }
};
using ConfigErrorAll = ConfigErrorLocation;

// --- where: every problem carries the line and column of what it is about

TEST_F(ConfigErrorLocation, AValueIsReportedWhereTheValueIs) {
  EXPECT_EQ(config_error_at("server:\n  workers: 2000\n"),
            "cfg.yaml:2:12: server.workers: must be between 0 and 1024, got 2000");
}

TEST_F(ConfigErrorLocation, AnUnknownKeyIsReportedWhereTheKeyIs) {
  EXPECT_EQ(config_error_at("server:\n  workers: 2\n  wrokers: 3\n"),
            R"(cfg.yaml:3:3: server: unknown key "wrokers" (did you mean "workers"?))");
}

TEST_F(ConfigErrorLocation, AMissingKeyIsReportedWhereItsMappingBegins) {
  EXPECT_EQ(config_error_at(kProviders + "  - name: b\n"),
            R"(cfg.yaml:6:5: providers[1]: missing required key "base_url")");
}

TEST_F(ConfigErrorLocation, ARepeatedKeyIsReportedAtItsSecondAppearance) {
  EXPECT_EQ(config_error_at("server:\n  workers: 2\n  workers: 3\n"),
            R"(cfg.yaml:3:3: server: duplicate key "workers")");
}

// --- all of them: one run reports every problem, in the file's order

TEST_F(ConfigErrorAll, ReportsEveryProblemInTheFileInOrder) {
  const std::string yaml = R"yaml(server:
  workers: 2000
  limits: { max_body: 1MiB }
providers:
  - name: groq
    base_url: https://api.groq.com/openai/v1
    api_key_env: GROQ_API_KEY
    timeouts: { connect: 2 s, ttft: 0s }
  - name: other
models:
  - name: fast
    deployments:
      - provider: grok
        model: x
      - provider: groq
        model: y
        expected_tps: -1
routing:
  defaults: { policy: fastest }
)yaml";
  EXPECT_EQ(config_error_at(yaml),
            "cfg.yaml:2:12: server.workers: must be between 0 and 1024, got 2000\n"
            R"(cfg.yaml:3:13: server.limits: unknown key "max_body" (expected one of: )"
            "max_body_size, max_embeddings_body_size, max_header_size, max_event_size, "
            "max_connections, client_header_timeout, client_idle_timeout)\n"
            R"(cfg.yaml:8:26: providers[0].timeouts.connect: invalid duration "2 s" )"
            "(expected e.g. 250ms, 2s, 1m)\n"
            "cfg.yaml:8:37: providers[0].timeouts.ttft: must be greater than zero\n"
            R"(cfg.yaml:9:5: providers[1]: missing required key "base_url")"
            "\n"
            R"(cfg.yaml:13:19: models[0].deployments[0].provider: unknown provider "grok" )"
            R"((did you mean "groq"?))"
            "\n"
            "cfg.yaml:17:23: models[0].deployments[1].expected_tps: must be greater than zero\n"
            R"(cfg.yaml:19:23: routing.defaults.policy: unknown policy "fastest" (expected )"
            "one of: latency, throughput, e2e, cost, balanced, ordered, round_robin, random)");
}

TEST_F(ConfigErrorAll, ReferencesToADefinitionThatFailedAreNotReportedAgain) {
  const std::string yaml = R"yaml(providers:
  - name: groq
    base_url: not a url
models:
  - name: fast
    deployments:
      - { provider: groq, model: x }
auth:
  keys:
    - { name: k, sha256: 0000000000000000000000000000000000000000000000000000000000000000, models: [fast] }
)yaml";
  const std::string message = config_error_at(yaml);
  EXPECT_THAT(message, StartsWith("cfg.yaml:3:15: providers[0].base_url: "));
  EXPECT_EQ(message.find('\n'), std::string::npos) << message;
}

TEST_F(ConfigErrorAll, AMisspeltSectionIsReportedAloneBeforeAnySectionIsRead) {
  EXPECT_EQ(config_error_at("server: { workers: 2000 }\nprovders: []\n"),
            R"(cfg.yaml:2:1: unknown key "provders" (did you mean "providers"?))");
}

TEST_F(ConfigErrorAll, EveryUnknownKeyOfAMappingIsReported) {
  EXPECT_EQ(config_error("server: { wrokers: 2, colour: red }\n"),
            R"(cfg.yaml: server: unknown key "wrokers" (did you mean "workers"?))"
            "\n"
            R"(cfg.yaml: server: unknown key "colour" (expected one of: )"
            "listeners, admin_listener, workers, limits, drain, explain)");
}

}  // namespace
}  // namespace llmgate::config
