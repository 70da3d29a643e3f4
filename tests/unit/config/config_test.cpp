// Valid configurations: what parse_config builds and what it defaults.
#include "config/config.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "tests/unit/config/config_test_support.h"

namespace llmgate::config {
namespace {

using std::chrono::milliseconds;
using testing::fake_env;
using testing::parse;
using ::testing::StartsWith;
using testing::TempFile;

constexpr const char* kFullConfig = R"yaml(
server:
  listeners:
    - address: 127.0.0.1
      port: 8080
    - address: "::"
      port: 0
  workers: 2
  limits:
    max_body_size: 4MiB
    max_header_size: 16KiB
    max_event_size: 1MB
    client_header_timeout: 30s
    client_idle_timeout: 1m30s
timeouts:
  connect: 2s
  ttft: 10s
  idle: 30s
  total: 10m
providers:
  - name: groq
    base_url: https://api.groq.com/openai/v1/
    api_key_env: GROQ_API_KEY
    region: us-east
    pool: { max_connections: 32, idle_timeout: 45s }
    timeouts: { connect: 1s, ttft: 3s }
    tls: { verify: true, sni: override.example }
    headers: { X-Extra: value, OpenAI-Organization: org-1 }
  - name: local-vllm
    base_url: http://127.0.0.1:8000/v1
models:
  - name: fast-chat
    deployments:
      - provider: groq
        model: llama-3.3-70b-versatile
        price: { input_per_1m: 0.59, output_per_1m: 0.79 }
      - provider: local-vllm
        model: meta-llama/Llama-3.3-70B-Instruct
  - name: local
    deployments:
      - provider: local-vllm
        model: qwen2.5
        price: { output_per_1m: 0 }
)yaml";

class ConfigTest : public ::testing::Test {
 protected:
  void SetUp() override {
    fake_env().clear();
    fake_env()["GROQ_API_KEY"] = "gsk-test-key";
  }
};

TEST_F(ConfigTest, ParsesEveryFieldOfAFullConfig) {
  const auto config = parse(kFullConfig);

  const Server& server = config->server;
  ASSERT_EQ(server.listeners.size(), 2u);
  EXPECT_EQ(server.listeners[0].address, "127.0.0.1");
  EXPECT_EQ(server.listeners[0].port, 8080);
  EXPECT_EQ(server.listeners[1].address, "::");
  EXPECT_EQ(server.listeners[1].port, 0);
  EXPECT_EQ(server.workers, 2u);
  EXPECT_EQ(server.limits.max_body_bytes, 4u << 20);
  EXPECT_EQ(server.limits.max_header_bytes, 16u << 10);
  EXPECT_EQ(server.limits.max_event_bytes, 1'000'000u);
  EXPECT_EQ(server.limits.client_header_timeout, milliseconds(30'000));
  EXPECT_EQ(server.limits.client_idle_timeout, milliseconds(90'000));

  EXPECT_EQ(config->timeouts.connect, milliseconds(2'000));
  EXPECT_EQ(config->timeouts.ttft, milliseconds(10'000));
  EXPECT_EQ(config->timeouts.idle, milliseconds(30'000));
  EXPECT_EQ(config->timeouts.total, milliseconds(600'000));

  ASSERT_EQ(config->providers.size(), 2u);
  const Provider& groq = config->providers[0];
  EXPECT_EQ(groq.name, "groq");
  EXPECT_EQ(groq.base_url.to_string(), "https://api.groq.com/openai/v1");
  EXPECT_EQ(groq.api_key, "gsk-test-key");
  EXPECT_EQ(groq.api_key_source, "env:GROQ_API_KEY");
  EXPECT_EQ(groq.region, "us-east");
  EXPECT_EQ(groq.pool.max_connections, 32u);
  EXPECT_EQ(groq.pool.idle_timeout, milliseconds(45'000));
  EXPECT_EQ(groq.timeouts.connect, milliseconds(1'000));
  EXPECT_EQ(groq.timeouts.ttft, milliseconds(3'000));
  EXPECT_FALSE(groq.timeouts.idle.has_value());
  EXPECT_FALSE(groq.timeouts.total.has_value());
  EXPECT_TRUE(groq.tls.verify);
  EXPECT_EQ(groq.tls.ca_file, "");
  EXPECT_EQ(groq.tls.sni, "override.example");
  EXPECT_EQ(groq.headers, (std::map<std::string, std::string>{{"OpenAI-Organization", "org-1"},
                                                              {"X-Extra", "value"}}));

  const Provider& local = config->providers[1];
  EXPECT_EQ(local.name, "local-vllm");
  EXPECT_FALSE(local.base_url.tls);
  EXPECT_EQ(local.base_url.host, "127.0.0.1");
  EXPECT_EQ(local.base_url.port, 8000);
  EXPECT_EQ(local.base_url.path_prefix, "/v1");
  EXPECT_EQ(local.api_key, "");
  EXPECT_EQ(local.api_key_source, "");
  EXPECT_EQ(local.region, "");

  ASSERT_EQ(config->models.size(), 2u);
  const Model& fast = config->models[0];
  EXPECT_EQ(fast.name, "fast-chat");
  ASSERT_EQ(fast.deployments.size(), 2u);
  EXPECT_EQ(fast.deployments[0].id(), "groq/llama-3.3-70b-versatile");
  EXPECT_DOUBLE_EQ(fast.deployments[0].price.input_per_1m, 0.59);
  EXPECT_DOUBLE_EQ(fast.deployments[0].price.output_per_1m, 0.79);
  EXPECT_EQ(fast.deployments[1].id(), "local-vllm/meta-llama/Llama-3.3-70B-Instruct");
  EXPECT_DOUBLE_EQ(fast.deployments[1].price.input_per_1m, 0);
}

TEST_F(ConfigTest, EmptyDocumentYieldsTheDefaults) {
  for (const char* text : {"", "\n", "# nothing configured yet\n", "---\n", "{}"}) {
    const auto config = parse(text);
    ASSERT_EQ(config->server.listeners.size(), 1u) << text;
    EXPECT_EQ(config->server.listeners[0].address, "127.0.0.1");
    EXPECT_EQ(config->server.listeners[0].port, 8080);
    EXPECT_EQ(config->server.workers, 0u);
    EXPECT_EQ(config->server.limits.max_body_bytes, 4u << 20);
    EXPECT_EQ(config->server.limits.max_header_bytes, 16u << 10);
    EXPECT_EQ(config->server.limits.max_event_bytes, 1u << 20);
    EXPECT_EQ(config->timeouts.connect, kDefaultConnectTimeout);
    EXPECT_EQ(config->timeouts.ttft, kDefaultTtftTimeout);
    EXPECT_EQ(config->timeouts.idle, kDefaultIdleTimeout);
    EXPECT_EQ(config->timeouts.total, kDefaultTotalTimeout);
    EXPECT_TRUE(config->providers.empty());
    EXPECT_TRUE(config->models.empty());
  }
}

TEST_F(ConfigTest, ProviderDefaultsApplyToEveryOmittedKey) {
  const auto config = parse("providers: [{name: p, base_url: 'https://h'}]");
  const Provider& p = config->providers.at(0);
  EXPECT_EQ(p.pool.max_connections, 2048u);
  EXPECT_EQ(p.pool.idle_timeout, milliseconds(60'000));
  EXPECT_TRUE(p.tls.verify);
  EXPECT_EQ(p.tls.sni, "");
  EXPECT_TRUE(p.headers.empty());
  EXPECT_EQ(config->timeouts_for(p).ttft, kDefaultTtftTimeout);
}

TEST_F(ConfigTest, ReadsEachProvidersWireOptions) {
  fake_env()["AZURE_KEY"] = "az-key";
  fake_env()["PORTKEY_SECRET"] = "pk-secret";
  const auto config = parse(R"yaml(
providers:
  - name: azure
    base_url: https://res.openai.azure.com/openai
    api_key_env: AZURE_KEY
    api_key_header: api-key
    chat_path: /deployments/{model}/chat/completions
    query: {api-version: "2024-10-21", "a b": "c&d"}
    headers: {x-portkey-api-key: {env: PORTKEY_SECRET}, x-team: search}
    stream_options: false
    stream: false
  - name: plain
    base_url: https://api.openai.com/v1
models:
  - name: m
    deployments:
      - {provider: azure, model: gpt-4o, stream: true, ttft_timeout: 45s,
         price: {input_per_1m: 2.5, cached_input_per_1m: 1.25, output_per_1m: 10}}
      - {provider: plain, model: o3, ttft_timeout: none}
      - {provider: plain, model: gpt-4o-mini}
)yaml");
  const Provider& az = config->providers.at(0);
  EXPECT_EQ(az.api_key_header, "api-key");
  EXPECT_EQ(az.chat_path, "/deployments/{model}/chat/completions");
  EXPECT_EQ(az.query, "api-version=2024-10-21&a%20b=c%26d");  // in document order, encoded once
  EXPECT_EQ(az.headers.at("x-portkey-api-key"), "pk-secret");
  EXPECT_EQ(az.header_secrets, std::vector<std::string>{"pk-secret"});  // scrubbed like a key
  EXPECT_FALSE(az.stream_options);
  EXPECT_FALSE(az.stream);
  const Provider& plain = config->providers.at(1);
  EXPECT_EQ(plain.api_key_header, "");
  EXPECT_EQ(plain.chat_path, "");
  EXPECT_EQ(plain.query, "");
  EXPECT_TRUE(plain.stream);

  const auto& ds = config->models.at(0).deployments;
  EXPECT_EQ(ds[0].stream, std::optional<bool>(true));
  EXPECT_EQ(ds[0].ttft_timeout, milliseconds(45'000));
  EXPECT_EQ(config->timeouts_for(az, ds[0]).ttft, milliseconds(45'000));
  EXPECT_EQ(ds[0].price.cached_input_per_1m, std::optional<double>(1.25));
  EXPECT_FALSE(ds[1].first_token_deadline);
  EXPECT_EQ(config->timeouts_for(plain, ds[1]).ttft, config->timeouts_for(plain).total);
  EXPECT_TRUE(ds[2].first_token_deadline);
  EXPECT_EQ(config->timeouts_for(plain, ds[2]).ttft, kDefaultTtftTimeout);
  EXPECT_FALSE(ds[2].stream.has_value());
}

TEST_F(ConfigTest, ReadsEachProvidersProtocolAndItsOptions) {
  const auto config = parse(R"yaml(
providers:
  - name: claude
    base_url: https://api.anthropic.com/v1
    protocol: anthropic
    anthropic_version: "2023-06-01"
    max_tokens: 8192
    thinking_budgets: {low: 1024, high: 16000}
  - name: gemini
    base_url: https://generativelanguage.googleapis.com/v1beta
    protocol: gemini
  - name: plain
    base_url: https://api.openai.com/v1
)yaml");
  const Provider& claude = config->providers.at(0);
  EXPECT_EQ(claude.protocol, Protocol::kAnthropic);
  EXPECT_EQ(claude.anthropic_version, "2023-06-01");
  EXPECT_EQ(claude.default_max_tokens, 8192);
  EXPECT_EQ(claude.thinking_budgets,
            (std::map<std::string, std::int64_t>{{"high", 16000}, {"low", 1024}}));
  EXPECT_EQ(config->providers.at(1).protocol, Protocol::kGemini);
  EXPECT_EQ(config->providers.at(1).thinking_budgets, kDefaultThinkingBudgets());
  EXPECT_EQ(config->providers.at(2).protocol, Protocol::kOpenAi);
  EXPECT_STREQ(to_string(Protocol::kGemini), "gemini");
}

TEST_F(ConfigTest, ABedrockProviderSignsForTheRegionItsEndpointNames) {
  const auto config = parse(R"yaml(
providers:
  - name: bedrock
    base_url: https://bedrock-runtime.eu-central-1.amazonaws.com
    protocol: bedrock
  - name: fips
    base_url: https://bedrock-runtime-fips.us-gov-west-1.amazonaws.com
    protocol: bedrock
    aws_profile: prod
  - name: proxied
    base_url: http://127.0.0.1:9000
    protocol: bedrock
    aws_region: us-east-1
)yaml");
  EXPECT_EQ(config->providers.at(0).protocol, Protocol::kBedrock);
  EXPECT_EQ(config->providers.at(0).aws_region, "eu-central-1");
  EXPECT_EQ(config->providers.at(0).aws_profile, "");
  EXPECT_EQ(config->providers.at(1).aws_region, "us-gov-west-1");
  EXPECT_EQ(config->providers.at(1).aws_profile, "prod");
  EXPECT_EQ(config->providers.at(2).aws_region, "us-east-1");
  EXPECT_STREQ(to_string(Protocol::kBedrock), "bedrock");
  EXPECT_THAT(testing::config_error(R"yaml(
providers:
  - {name: b, base_url: "http://127.0.0.1:9000", protocol: bedrock}
)yaml"),
              ::testing::HasSubstr("names no AWS region"));
  EXPECT_THAT(testing::config_error(R"yaml(
providers:
  - {name: o, base_url: "https://api.openai.com/v1", aws_region: us-east-1}
)yaml"),
              ::testing::HasSubstr("aws_region is for protocol: bedrock"));
}

TEST(Price, ChargesCachedInputAtItsOwnPrice) {
  Price p{2.0, 10.0, std::nullopt};
  EXPECT_DOUBLE_EQ(p.cost_usd(1'000'000, 400'000, 100'000), 2.0 + 1.0);  // no cached price: full
  p.cached_input_per_1m = 0.5;
  EXPECT_DOUBLE_EQ(p.cost_usd(1'000'000, 400'000, 100'000), 1.2 + 0.2 + 1.0);
  // Upstream counts are not trusted: cached beyond the input, negatives.
  EXPECT_DOUBLE_EQ(p.cost_usd(100, 500, 0), 100 * 0.5 / 1e6);
  EXPECT_DOUBLE_EQ(p.cost_usd(-5, -1, -7), 0.0);
}

TEST_F(ConfigTest, TopLevelTimeoutsKeepTheBuiltInDefaultForKeysTheyOmit) {
  const auto config = parse("timeouts: { ttft: 4s }");
  EXPECT_EQ(config->timeouts.ttft, milliseconds(4'000));
  EXPECT_EQ(config->timeouts.connect, kDefaultConnectTimeout);
  EXPECT_EQ(config->timeouts.total, kDefaultTotalTimeout);
}

TEST_F(ConfigTest, ProviderTimeoutsOverrideOnlyTheKeysTheyName) {
  const auto config = parse(R"yaml(
timeouts: { connect: 5s, ttft: 20s, idle: 40s, total: 15m }
providers:
  - name: p
    base_url: https://h
    timeouts: { ttft: 3s, total: 5m }
)yaml");
  const Timeouts t = config->timeouts_for(config->providers.at(0));
  EXPECT_EQ(t.connect, milliseconds(5'000));
  EXPECT_EQ(t.ttft, milliseconds(3'000));
  EXPECT_EQ(t.idle, milliseconds(40'000));
  EXPECT_EQ(t.total, milliseconds(300'000));
}

TEST_F(ConfigTest, ModelsMayComeBeforeTheProvidersTheyName) {
  const auto config = parse(R"yaml(
models:
  - name: m
    deployments: [{provider: p, model: up}]
providers:
  - {name: p, base_url: "http://h"}
)yaml");
  EXPECT_EQ(config->models.at(0).deployments.at(0).provider, "p");
}

TEST_F(ConfigTest, DeploymentsKeepTheirOrder) {
  const auto config = parse(R"yaml(
providers: [{name: a, base_url: "http://a"}, {name: b, base_url: "http://b"}]
models:
  - name: m
    deployments: [{provider: b, model: x}, {provider: a, model: x}, {provider: b, model: y}]
)yaml");
  const auto& d = config->models.at(0).deployments;
  ASSERT_EQ(d.size(), 3u);
  EXPECT_EQ(d[0].id(), "b/x");
  EXPECT_EQ(d[1].id(), "a/x");
  EXPECT_EQ(d[2].id(), "b/y");
}

TEST_F(ConfigTest, FindsProvidersAndModelsByExactName) {
  const auto config = parse(kFullConfig);
  ASSERT_NE(config->find_provider("groq"), nullptr);
  EXPECT_EQ(config->find_provider("groq")->region, "us-east");
  EXPECT_EQ(config->find_provider("Groq"), nullptr);
  EXPECT_EQ(config->find_provider("missing"), nullptr);
  ASSERT_NE(config->find_model("local"), nullptr);
  EXPECT_EQ(config->find_model("local")->deployments.at(0).model, "qwen2.5");
  EXPECT_EQ(config->find_model("fast"), nullptr);
}

TEST_F(ConfigTest, SizesMayBeWrittenAsPlainIntegers) {
  const auto config = parse("server: { limits: { max_body_size: 1048576 } }");
  EXPECT_EQ(config->server.limits.max_body_bytes, 1048576u);
}

TEST_F(ConfigTest, PortZeroMayRepeatBecauseEachGetsAFreshPort) {
  const auto config = parse("server: { listeners: [{port: 0}, {port: 0}] }");
  ASSERT_EQ(config->server.listeners.size(), 2u);
  EXPECT_EQ(config->server.listeners[1].address, "127.0.0.1");
}

TEST_F(ConfigTest, AcceptsAnchorsAndAliases) {
  const auto config = parse(R"yaml(
providers:
  - name: a
    base_url: https://a
    timeouts: &fast { connect: 1s, ttft: 2s }
  - name: b
    base_url: https://b
    timeouts: *fast
)yaml");
  EXPECT_EQ(config->providers.at(1).timeouts.ttft, milliseconds(2'000));
}

TEST_F(ConfigTest, AcceptsTrueAndFalseInAnyOfTheirYamlSpellings) {
  for (const char* word : {"false", "False", "FALSE"}) {
    const auto config = parse(
        std::string("providers: [{name: p, base_url: 'https://h', tls: {verify: ") + word + "}}]");
    EXPECT_FALSE(config->providers.at(0).tls.verify) << word;
  }
}

TEST_F(ConfigTest, AcceptsAReadableCaFile) {
  TempFile ca("-----BEGIN CERTIFICATE-----\n");
  const auto config =
      parse("providers: [{name: p, base_url: 'https://h', tls: {ca_file: '" + ca.path() + "'}}]");
  EXPECT_EQ(config->providers.at(0).tls.ca_file, ca.path());
}

TEST_F(ConfigTest, LoadConfigReadsTheFileAndNamesItInErrors) {
  TempFile good("providers: [{name: p, base_url: 'https://h'}]\n");
  EXPECT_EQ(load_config(good.path(), &testing::fake_env_lookup)->providers.at(0).name, "p");

  TempFile bad("server:\n  workers: lots\n");
  try {
    load_config(bad.path(), &testing::fake_env_lookup);
    FAIL() << "expected a ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_EQ(std::string(e.what()),
              bad.path() + R"(:2:12: server.workers: expected a number, got "lots")");
  }
}

TEST_F(ConfigTest, LoadConfigRejectsAFileItCannotRead) {
  const std::string path = "/nonexistent/llmgate.yaml";
  try {
    load_config(path, &testing::fake_env_lookup);
    FAIL() << "expected a ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_EQ(std::string(e.what()), path + ": cannot read config file: No such file or directory");
  }
}

TEST_F(ConfigTest, LoadConfigRejectsADirectory) {
  try {
    load_config("/tmp", &testing::fake_env_lookup);
    FAIL() << "expected a ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_EQ(std::string(e.what()), "/tmp: cannot read config file: Is a directory");
  }
}

// docs/config.md must not drift from the parser: its example has to load.
TEST_F(ConfigTest, TheDocumentedExampleIsValid) {
  const auto doc_path = std::filesystem::path(__FILE__).parent_path() / "../../../docs/config.md";
  std::ifstream doc(doc_path);
  ASSERT_TRUE(doc) << "cannot open " << doc_path;
  const std::string text((std::istreambuf_iterator<char>(doc)), std::istreambuf_iterator<char>());
  const std::size_t start = text.find("```yaml\n");
  ASSERT_NE(start, std::string::npos);
  const std::size_t end = text.find("```\n", start + 8);
  std::string example = text.substr(start + 8, end - start - 8);

  // The example refers to files on a production host; point them at temp files.
  TempFile key("sk-openai\n");
  TempFile ca("-----BEGIN CERTIFICATE-----\n");
  const auto replace = [&](const std::string& from, const std::string& to) {
    const std::size_t at = example.find(from);
    ASSERT_NE(at, std::string::npos) << from;
    example.replace(at, from.size(), to);
  };
  replace("/run/secrets/openai", key.path());
  replace("/etc/ssl/certs/ca-certificates.crt", ca.path());
  fake_env()["GROQ_API_KEY"] = "gsk-doc";

  const auto config = parse(example);
  EXPECT_EQ(config->server.listeners.size(), 2u);
  EXPECT_EQ(config->providers.size(), 3u);
  EXPECT_EQ(config->find_provider("openai")->api_key, "sk-openai");
  EXPECT_EQ(config->find_model("fast-chat")->deployments.size(), 2u);
}

// Every prefix of a valid file is either valid or a ConfigError — never a
// crash, a yaml-cpp exception or anything else leaking out.
TEST_F(ConfigTest, EveryTruncationOfAValidConfigParsesOrFailsWithAConfigError) {
  const std::string full = kFullConfig;
  for (std::size_t n = 0; n <= full.size(); ++n) {
    try {
      parse(full.substr(0, n));
    } catch (const ConfigError& e) {
      EXPECT_THAT(e.what(), StartsWith("cfg.yaml:")) << "prefix length " << n;
    } catch (const std::exception& e) {
      ADD_FAILURE() << "prefix length " << n << " threw " << e.what();
    }
  }
}

// A Config is shared read-only between threads; parse_config hands out const.
static_assert(std::is_same_v<decltype(parse_config("")), std::shared_ptr<const Config>>);

}  // namespace
}  // namespace llmgate::config

namespace llmgate::config {
namespace {

TEST(ContextWindowConfig, IsTokensFromAThousandUp) {
  const auto cfg = testing::parse(R"(
providers: [{name: p, base_url: 'https://h'}]
models:
  - name: m
    deployments:
      - {provider: p, model: a, context_window: 128000, prefill_ms_per_1k_tokens: 120.5}
      - {provider: p, model: b}
)");
  EXPECT_EQ(cfg->models.at(0).deployments.at(0).context_window, 128'000);
  EXPECT_EQ(cfg->models.at(0).deployments.at(0).prefill_ms_per_1k_tokens, 120.5);
  EXPECT_FALSE(cfg->models.at(0).deployments.at(1).prefill_ms_per_1k_tokens.has_value());
  EXPECT_THROW(testing::parse("providers: [{name: p, base_url: 'https://h'}]\n"
                              "models: [{name: m, deployments: [{provider: p, model: a, "
                              "prefill_ms_per_1k_tokens: -1}]}]\n"),
               ConfigError);
  EXPECT_FALSE(cfg->models.at(0).deployments.at(1).context_window.has_value());
  for (const char* bad : {"10", "0", "-5", "lots", "200000000"}) {
    try {
      testing::parse(std::string("providers: [{name: p, base_url: 'https://h'}]\n"
                                 "models: [{name: m, deployments: [{provider: p, model: a, "
                                 "context_window: ") +
                     bad + "}]}]\n");
      ADD_FAILURE() << bad << " was accepted";
    } catch (const ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find("context_window"), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace llmgate::config
