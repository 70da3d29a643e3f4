// Short-lived upstream credentials against the simulator's token endpoints
// (tools/sim/sim_oauth.h), which issue tokens that expire and refuse model
// requests without a live one: a Google service account's JWT (checked
// against the key) for Gemini on a Vertex AI path, the metadata server,
// Entra ID client credentials and workload identity for Azure OpenAI, AWS
// STS web identity for Bedrock (requests signed with the temporary
// credentials). Tokens are refreshed ahead of expiry under continuous
// traffic with no failed request; a refused credential fails that
// deployment over (credential_error), its secret nowhere in the answer.
#include <gtest/gtest.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "config/config.h"
#include "gateway/server/gateway.h"
#include "tests/support/http_client.h"
#include "tests/support/metrics_text.h"
#include "tests/support/scripted_upstream.h"
#include "tests/support/sim_profiles.h"
#include "tools/sim/sim_server.h"

namespace llmgate {
namespace {

using testing::HttpClient;
using json = nlohmann::json;

// A new RSA key as PKCS#8 PEM (a service account key file's private_key).
std::string new_private_key() {
  EVP_PKEY* key = EVP_RSA_gen(2048);
  BIO* bio = BIO_new(BIO_s_mem());
  PEM_write_bio_PKCS8PrivateKey(bio, key, nullptr, nullptr, 0, nullptr, nullptr);
  char* data = nullptr;
  const long n = BIO_get_mem_data(bio, &data);
  std::string pem(data, static_cast<std::size_t>(n));
  BIO_free(bio);
  EVP_PKEY_free(key);
  return pem;
}

class CloudAuthTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("llmgate-cloud-auth-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override {
    gw_.reset();
    sim_.reset();
    good_.reset();
    for (const char* name :
         {"SIM_ENTRA_SECRET", "GCE_METADATA_HOST", "AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_ROLE_ARN",
          "AWS_ENDPOINT_URL_STS", "AWS_SHARED_CREDENTIALS_FILE",
          "AWS_CONTAINER_CREDENTIALS_FULL_URI", "AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE",
          "AWS_EC2_METADATA_SERVICE_ENDPOINT"})
      unsetenv(name);
    std::filesystem::remove_all(dir_);
  }

  std::string write(const std::string& name, const std::string& text) {
    const auto path = dir_ / name;
    std::ofstream(path) << text;
    return path.string();
  }

  // The simulator serving model m, with `tokens`.
  std::uint16_t start_sim(sim::TokenOptions tokens, const std::string& azure = {}) {
    sim::SimOptions o;
    o.profiles["m"] = testing::quick_profile();
    o.tokens = std::move(tokens);
    o.azure_api_version = azure;
    sim_ = std::make_unique<sim::SimServer>(o);
    return sim_->start();
  }

  // The gateway: provider `provider_yaml` (named "cloud") serving model "chat"
  // as m, then -- with `fallback` -- an OpenAI-compatible simulator.
  void start_gateway(const std::string& provider_yaml, bool fallback = false) {
    std::string yaml = R"(
routing: {exploration: 0, defaults: {policy: ordered}}
server: {listeners: [{address: 127.0.0.1, port: 0}], workers: 2}
timeouts: {connect: 1s, ttft: 2s, idle: 2s, total: 10s}
providers:
  - )" + provider_yaml +
                       "\n";
    if (fallback) {
      sim::SimOptions o;
      o.profiles["m"] = testing::quick_profile();
      good_ = std::make_unique<sim::SimServer>(o);
      yaml += "  - {name: good, base_url: \"http://127.0.0.1:" + std::to_string(good_->start()) +
              "/v1\"}\n";
    }
    yaml += "models:\n  - name: chat\n    deployments: [{provider: cloud, model: m}" +
            std::string(fallback ? ", {provider: good, model: m}" : "") + "]\n";
    gw_ = std::make_unique<gateway::Gateway>(config::parse_config(yaml, "cloud.yaml"));
    port_ = gw_->start().at(0);
  }

  // The first token was fetched: the gateway says it is ready.
  void wait_for_token() {
    ASSERT_TRUE(testing::eventually([&] {
      HttpClient c(port_);
      return c.request("GET", "/readyz").status == 200;
    }));
    ASSERT_GE(sim_->stats().tokens.issued, 1u);
  }

  testing::HttpResponse chat(HttpClient& c) {
    return c.request("POST", "/v1/chat/completions",
                     R"({"model":"chat","messages":[{"role":"user","content":"hi"}]})");
  }

  // Bedrock at the simulator, with no AWS credentials but the temporary ones
  // the environment leads to: one chat request answered, signed with them.
  sim::RecordedRequest signed_bedrock_request(std::uint16_t sim_port) {
    setenv("AWS_SHARED_CREDENTIALS_FILE", (dir_ / "absent").c_str(), 1);
    start_gateway(
        R"({name: cloud, protocol: bedrock, aws_region: us-east-1, base_url: "http://127.0.0.1:)" +
        std::to_string(sim_port) + R"("})");
    wait_for_token();
    HttpClient c(port_);
    auto r = chat(c);
    EXPECT_EQ(r.status, 200) << r.body;
    EXPECT_EQ(sim_->stats().signatures_refused, 0u);
    const auto seen = sim_->last_request();
    if (!seen) ADD_FAILURE() << "no request reached the simulator";
    sim::RecordedRequest out = seen.value_or(sim::RecordedRequest{});
    EXPECT_TRUE(out.headers["authorization"].starts_with("AWS4-HMAC-SHA256 Credential=ASIASIM"));
    return out;
  }

  double metric(const std::string& name, const std::string& labels) {
    HttpClient c(port_);
    return testing::metric_value(c.request("GET", "/metrics").body, name, labels);
  }

  std::filesystem::path dir_;
  std::unique_ptr<sim::SimServer> sim_, good_;
  std::unique_ptr<gateway::Gateway> gw_;
  std::uint16_t port_ = 0;
};

TEST_F(CloudAuthTest, ServiceAccountTokensAreRefreshedAheadOfExpiryUnderContinuousTraffic) {
  const std::string key = new_private_key();
  sim::TokenOptions tokens;
  tokens.require = true;
  tokens.lifetime = std::chrono::seconds(3);  // renewed every 1.5 s
  json sa = {{"type", "service_account"},
             {"project_id", "p"},
             {"private_key_id", "k1"},
             {"private_key", key},
             {"client_email", "llmgate@p.iam.gserviceaccount.com"}};
  tokens.google_service_account_json = sa.dump();
  const auto sim_port = start_sim(tokens);
  sa["token_uri"] = "http://127.0.0.1:" + std::to_string(sim_port) + "/token";
  const std::string file = write("sa.json", sa.dump());
  // Gemini on a Vertex AI path: .../publishers/google/models/m:streamGenerateContent.
  start_gateway(
      R"({name: cloud, protocol: gemini, base_url: "http://127.0.0.1:)" + std::to_string(sim_port) +
      R"(/v1/projects/p/locations/us-central1/publishers/google", auth: {google_service_account_file: ")" +
      file + R"("}})");
  wait_for_token();
  // Continuous traffic for two token lifetimes.
  HttpClient c(port_);
  int requests = 0;
  const auto end = std::chrono::steady_clock::now() + 2 * tokens.lifetime;
  while (std::chrono::steady_clock::now() < end) {
    auto r = chat(c);
    ASSERT_EQ(r.status, 200) << r.body;
    ++requests;
  }
  const sim::SimStats s = sim_->stats();
  EXPECT_EQ(s.tokens.expired_seen, 0u);
  EXPECT_EQ(s.tokens.missing_seen, 0u);
  EXPECT_EQ(s.tokens.refused, 0u);
  // Renewed before each expiry: the first token, and one each half lifetime.
  EXPECT_GE(s.tokens.issued, 4u);
  EXPECT_GT(requests, 10);
  const auto seen = sim_->last_request();
  ASSERT_TRUE(seen);
  EXPECT_TRUE(seen->headers.at("authorization").starts_with("Bearer ya29.sim-"));
  EXPECT_EQ(seen->headers.count("x-goog-api-key"), 0u);
  EXPECT_TRUE(
      seen->target.starts_with("/v1/projects/p/locations/us-central1/publishers/google/models/m:"))
      << seen->target;
  EXPECT_GE(metric("llmgate_credential_refreshes_total", R"(provider="cloud",result="success")"),
            3);
}

TEST_F(CloudAuthTest, AJwtSignedByAnotherKeyIsRefusedAndTheDeploymentFailsOver) {
  sim::TokenOptions tokens;
  tokens.require = true;
  json sa = {{"type", "service_account"},
             {"private_key", new_private_key()},
             {"client_email", "llmgate@p.iam.gserviceaccount.com"}};
  tokens.google_service_account_json = sa.dump();
  const auto sim_port = start_sim(tokens);
  sa["private_key"] = new_private_key();  // not the account's key
  sa["token_uri"] = "http://127.0.0.1:" + std::to_string(sim_port) + "/token";
  const std::string file = write("sa.json", sa.dump());
  start_gateway(R"({name: cloud, protocol: gemini, base_url: "http://127.0.0.1:)" +
                    std::to_string(sim_port) + R"(/v1", auth: {google_service_account_file: ")" +
                    file + R"("}})",
                /*fallback=*/true);
  ASSERT_TRUE(testing::eventually([&] { return sim_->stats().tokens.refused >= 1; }));
  HttpClient c(port_);
  auto r = chat(c);
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.header("x-llmgate-deployment"), "good/m");
  EXPECT_GE(metric("llmgate_upstream_attempts_total",
                   R"(deployment="cloud/m",outcome="credential_error")"),
            1);
  EXPECT_GE(metric("llmgate_credential_refreshes_total", R"(provider="cloud",result="failure")"),
            1);
  // Never sent without a credential.
  EXPECT_EQ(sim_->stats().requests, 0u);
}

TEST_F(CloudAuthTest, ReadinessWaitsForTheFirstAnswerOfATokenEndpoint) {
  // A metadata server that takes the request and says nothing.
  testing::ScriptedUpstream silent(testing::Script{{testing::Step::Kind::kHold}});
  setenv("GCE_METADATA_HOST", ("127.0.0.1:" + std::to_string(silent.start())).c_str(), 1);
  start_gateway(
      R"({name: cloud, protocol: gemini, base_url: "http://127.0.0.1:9/v1", auth: {google: metadata}})");
  ASSERT_TRUE(testing::eventually([&] { return silent.stats().requests >= 1; }));
  HttpClient c(port_);
  auto r = c.request("GET", "/readyz");
  EXPECT_EQ(r.status, 503);
  EXPECT_EQ(json::parse(r.body),
            json::parse(R"({"status":"starting","fetching_credentials":"cloud"})"));
  // A request meanwhile fails over at once (here: nothing left), never waits.
  auto answer = chat(c);
  EXPECT_EQ(answer.status, 502) << answer.body;
  EXPECT_NE(answer.body.find("cloud/m=credential_error"), std::string::npos) << answer.body;
}

TEST_F(CloudAuthTest, TheMetadataServerGivesTheToken) {
  sim::TokenOptions tokens;
  tokens.require = true;
  const auto sim_port = start_sim(tokens);
  setenv("GCE_METADATA_HOST", ("127.0.0.1:" + std::to_string(sim_port)).c_str(), 1);
  start_gateway(R"({name: cloud, protocol: gemini, base_url: "http://127.0.0.1:)" +
                std::to_string(sim_port) + R"(/v1", auth: {google: metadata}})");
  wait_for_token();
  HttpClient c(port_);
  auto r = chat(c);
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(sim_->stats().tokens.missing_seen, 0u);
}

TEST_F(CloudAuthTest, AnthropicOnVertexAiTakesTheModelInThePathAndTheVersionInTheBody) {
  sim::TokenOptions tokens;
  tokens.require = true;
  const auto sim_port = start_sim(tokens);
  setenv("GCE_METADATA_HOST", ("127.0.0.1:" + std::to_string(sim_port)).c_str(), 1);
  start_gateway(
      R"({name: cloud, protocol: anthropic, base_url: "http://127.0.0.1:)" +
      std::to_string(sim_port) +
      R"(/v1/projects/p/locations/us-east5/publishers/anthropic", auth: {google: metadata}})");
  wait_for_token();
  HttpClient c(port_);
  // Chat, translated and streamed: .../models/m:streamRawPredict.
  auto r = c.start("POST", "/v1/chat/completions",
                   R"({"model":"chat","messages":[{"role":"user","content":"hi"}],"stream":true})");
  ASSERT_EQ(r.status, 200);
  const auto events = c.rest_of_events();
  ASSERT_FALSE(events.empty());
  EXPECT_EQ(events.back(), "[DONE]");
  auto seen = sim_->last_request();
  ASSERT_TRUE(seen);
  EXPECT_EQ(seen->target,
            "/v1/projects/p/locations/us-east5/publishers/anthropic/models/m:streamRawPredict");
  const json body = json::parse(seen->body);
  EXPECT_EQ(body.value("anthropic_version", ""), "vertex-2023-10-16");
  EXPECT_FALSE(body.contains("model"));
  EXPECT_EQ(seen->headers.count("anthropic-version"), 0u);
  EXPECT_EQ(seen->headers.count("x-api-key"), 0u);
  EXPECT_TRUE(seen->headers.at("authorization").starts_with("Bearer ya29.sim-"));
  // Anthropic's own API in (a coding agent), passed through.
  HttpClient m(port_);
  auto whole =
      m.request("POST", "/v1/messages",
                R"({"model":"chat","max_tokens":64,"messages":[{"role":"user","content":"hi"}]})",
                {{"content-type", "application/json"}, {"anthropic-version", "2023-06-01"}});
  ASSERT_EQ(whole.status, 200) << whole.body;
  EXPECT_EQ(json::parse(whole.body).value("type", ""), "message");
  seen = sim_->last_request();
  EXPECT_TRUE(seen->target.ends_with("/models/m:streamRawPredict")) << seen->target;
  EXPECT_EQ(json::parse(seen->body).value("anthropic_version", ""), "vertex-2023-10-16");
  EXPECT_EQ(sim_->stats().tokens.missing_seen, 0u);
}

TEST_F(CloudAuthTest, EntraClientCredentialsForAzureOpenAi) {
  sim::TokenOptions tokens;
  tokens.require = true;
  tokens.entra_client_secret = "entra-secret-value";
  const auto sim_port = start_sim(tokens, "2024-10-21");
  setenv("SIM_ENTRA_SECRET", "entra-secret-value", 1);
  start_gateway(R"({name: cloud, base_url: "http://127.0.0.1:)" + std::to_string(sim_port) +
                R"(/openai", chat_path: "/deployments/{model}/chat/completions",
      query: {api-version: "2024-10-21"},
      auth: {entra: {tenant_id: t1, client_id: c1, client_secret_env: SIM_ENTRA_SECRET,
                     authority: "http://127.0.0.1:)" +
                std::to_string(sim_port) + R"("}}})");
  wait_for_token();
  HttpClient c(port_);
  auto r = chat(c);
  ASSERT_EQ(r.status, 200) << r.body;
  const auto seen = sim_->last_request();
  ASSERT_TRUE(seen);
  EXPECT_TRUE(seen->headers.at("authorization").starts_with("Bearer "));
  EXPECT_EQ(seen->headers.count("api-key"), 0u);
}

TEST_F(CloudAuthTest, AWrongEntraSecretFailsOverAndIsNeverShown) {
  sim::TokenOptions tokens;
  tokens.require = true;
  tokens.entra_client_secret = "the-right-one";
  const auto sim_port = start_sim(tokens);
  setenv("SIM_ENTRA_SECRET", "wrong-secret-value", 1);
  start_gateway(R"({name: cloud, base_url: "http://127.0.0.1:)" + std::to_string(sim_port) +
                    R"(/v1", auth: {entra: {tenant_id: t1, client_id: c1,
                     client_secret_env: SIM_ENTRA_SECRET, authority: "http://127.0.0.1:)" +
                    std::to_string(sim_port) + R"("}}})",
                /*fallback=*/true);
  ASSERT_TRUE(testing::eventually([&] { return sim_->stats().tokens.refused >= 1; }));
  HttpClient c(port_);
  // Streamed: the route header names what was tried, and why.
  auto r = c.start("POST", "/v1/chat/completions",
                   R"({"model":"chat","messages":[{"role":"user","content":"hi"}],"stream":true})");
  ASSERT_EQ(r.status, 200);
  c.rest_of_events();
  EXPECT_EQ(r.header("x-llmgate-deployment"), "good/m");
  EXPECT_EQ(c.raw_body().find("wrong-secret-value"), std::string::npos);
  EXPECT_EQ(metric("llmgate_upstream_attempts_total",
                   R"(deployment="cloud/m",outcome="credential_error")"),
            1);
}

TEST_F(CloudAuthTest, WorkloadIdentityReadsTheFederatedTokenFile) {
  sim::TokenOptions tokens;
  tokens.require = true;
  tokens.entra_federated_token = "federated-jwt";
  const auto sim_port = start_sim(tokens);
  const std::string file = write("azure-identity-token", "federated-jwt\n");
  start_gateway(R"({name: cloud, base_url: "http://127.0.0.1:)" + std::to_string(sim_port) +
                R"(/v1", auth: {entra: {tenant_id: t1, client_id: c1, federated_token_file: ")" +
                file + R"(", authority: "http://127.0.0.1:)" + std::to_string(sim_port) +
                R"("}}})");
  wait_for_token();
  HttpClient c(port_);
  auto r = chat(c);
  ASSERT_EQ(r.status, 200) << r.body;
}

TEST_F(CloudAuthTest, BedrockSignsWithWebIdentityCredentialsFromSts) {
  sim::TokenOptions tokens;
  tokens.aws_web_identity_token = "eks-projected-token";
  tokens.lifetime = std::chrono::seconds(900);
  const auto sim_port = start_sim(tokens);
  setenv("AWS_WEB_IDENTITY_TOKEN_FILE", write("token", "eks-projected-token").c_str(), 1);
  setenv("AWS_ROLE_ARN", "arn:aws:iam::123456789012:role/llmgate", 1);
  setenv("AWS_ENDPOINT_URL_STS", ("http://127.0.0.1:" + std::to_string(sim_port)).c_str(), 1);
  const auto seen = signed_bedrock_request(sim_port);
  EXPECT_TRUE(seen.headers.at("x-amz-security-token").starts_with("FwoGZXIvYXdzSim"));
}

TEST_F(CloudAuthTest, BedrockSignsWithPodIdentityContainerCredentials) {
  sim::TokenOptions tokens;
  tokens.aws_container_token = "eks-pod-identity-token";
  const auto sim_port = start_sim(tokens);
  setenv("AWS_CONTAINER_CREDENTIALS_FULL_URI",
         ("http://127.0.0.1:" + std::to_string(sim_port) + "/v1/credentials").c_str(), 1);
  setenv("AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE", write("token", "eks-pod-identity-token").c_str(),
         1);
  const auto seen = signed_bedrock_request(sim_port);
}

TEST_F(CloudAuthTest, BedrockSignsWithTheInstanceProfileFromInstanceMetadata) {
  sim::TokenOptions tokens;
  tokens.aws_instance_role = "llmgate-instance-role";
  const auto sim_port = start_sim(tokens);
  setenv("AWS_EC2_METADATA_SERVICE_ENDPOINT",
         ("http://127.0.0.1:" + std::to_string(sim_port)).c_str(), 1);
  signed_bedrock_request(sim_port);
  EXPECT_GE(sim_->stats().tokens.issued, 1u);
}

}  // namespace
}  // namespace llmgate
