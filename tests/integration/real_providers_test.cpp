// How the gateway meets providers that are not the OpenAI stream exactly
// (docs/providers.md): upstreams asked for JSON instead of a stream, a
// deployment that refuses to stream, Azure OpenAI's URL and key header,
// header secrets, reasoning models' first-token deadlines and the
// statistics kept per reasoning effort. The simulator plays each provider.
#include <gtest/gtest.h>

#include <cstdlib>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "config/config.h"
#include "gateway/server/gateway.h"
#include "tests/support/http_client.h"
#include "tests/support/sim_profiles.h"
#include "tools/sim/sim_server.h"

namespace llmgate {
namespace {

using testing::HttpClient;
using json = nlohmann::json;

using testing::quick_profile;
sim::Profile quick(int tokens = 5) { return quick_profile(tokens); }

std::string body(bool stream, const std::string& extra = "") {
  return std::string(R"({"model":"chat","messages":[{"role":"user","content":"hi"}],"stream":)") +
         (stream ? "true" : "false") + extra + "}";
}

// The content of a stream's events, concatenated; whether it ended in [DONE].
struct StreamText {
  std::string content;
  bool done = false;
  bool error = false;
};
StreamText read_stream(HttpClient& c) {
  StreamText out;
  for (const auto& e : c.rest_of_events()) {
    if (e == "[DONE]") {
      out.done = true;
      continue;
    }
    auto j = json::parse(e);
    if (j.contains("error")) out.error = true;
    if (j.contains("choices") && !j["choices"].empty())
      out.content += j["choices"][0]["delta"].value("content", "");
  }
  return out;
}

class RealProvidersTest : public ::testing::Test {
 protected:
  void SetUp() override { setenv("LLMGATE_TEST_PROVIDER_KEY", "sim-key", 1); }
  void TearDown() override {
    gw_.reset();
    sim_.reset();
    backup_.reset();
  }

  // One simulated provider serving `model` (and a healthy backup, "backup").
  void start_sim(const sim::Profile& p, const std::string& model = "up-model",
                 const std::string& azure_api_version = "") {
    sim::SimOptions o;
    o.api_key = "sim-key";
    o.azure_api_version = azure_api_version;
    o.profiles[model] = p;
    sim_ = std::make_unique<sim::SimServer>(o);
    sim_port_ = sim_->start();
    sim::SimOptions b;
    b.profiles["backup-model"] = quick();
    backup_ = std::make_unique<sim::SimServer>(b);
    backup_port_ = backup_->start();
  }

  // `provider`: keys of provider "p" after its base_url (", stream: false");
  // `deployment`: keys of its deployment; `base_path`: base_url's path.
  void start_gateway(const std::string& provider, const std::string& deployment = "",
                     const std::string& model = "up-model", const std::string& base_path = "/v1",
                     const std::string& ttft = "2s") {
    const std::string yaml = R"(
routing: {exploration: 0, defaults: {policy: ordered}}
server: {listeners: [{address: 127.0.0.1, port: 0}], workers: 1}
timeouts: {connect: 1s, ttft: )" +
                             ttft + R"(, idle: 5s, total: 20s}
providers:
  - {name: p, base_url: "http://127.0.0.1:)" +
                             std::to_string(sim_port_) + base_path + "\"" + provider + R"(}
  - {name: backup, base_url: "http://127.0.0.1:)" +
                             std::to_string(backup_port_) + R"(/v1"}
models:
  - name: chat
    deployments:
      - {provider: p, model: )" +
                             model + deployment + R"(}
      - {provider: backup, model: backup-model}
)";
    gw_ = std::make_unique<gateway::Gateway>(config::parse_config(yaml, "test.yaml"));
    port_ = gw_->start().at(0);
  }

  // The deployment's row in /admin/routes.
  json route_row(const std::string& deployment) {
    HttpClient c(port_);
    auto routes = json::parse(c.request("GET", "/admin/routes").body);
    for (const auto& row : routes["models"][0]["deployments"]) {
      if (row["deployment"] == deployment) return row;
    }
    return nullptr;
  }

  std::unique_ptr<sim::SimServer> sim_, backup_;
  std::unique_ptr<gateway::Gateway> gw_;
  std::uint16_t sim_port_ = 0, backup_port_ = 0, port_ = 0;
};

TEST_F(RealProvidersTest, AnUnstreamedProviderIsAskedForJsonAndAStreamClientStillGetsAStream) {
  start_sim(quick(6));
  start_gateway(", api_key_env: LLMGATE_TEST_PROVIDER_KEY, stream: false");
  HttpClient c(port_);
  auto head = c.start("POST", "/v1/chat/completions",
                      body(true, R"(,"stream_options":{"include_usage":true})"));
  ASSERT_EQ(head.status, 200);
  EXPECT_EQ(head.header("content-type"), "text/event-stream");
  EXPECT_EQ(head.header("x-llmgate-deployment"), "p/up-model");
  EXPECT_EQ(head.header("x-llmgate-ttft-ms"), "") << "no first token was timed";
  const StreamText text = read_stream(c);
  EXPECT_TRUE(text.done);
  EXPECT_FALSE(text.error);
  EXPECT_EQ(text.content, " lorem ipsum dolor sit amet, consectetur");

  auto sent = json::parse(sim_->last_request()->body);
  EXPECT_EQ(sent["stream"], false);
  EXPECT_FALSE(sent.contains("stream_options")) << sent;
  EXPECT_EQ(sim_->last_request()->headers["accept"], "application/json");

  // A non-stream client gets the provider's own answer.
  auto r = c.request("POST", "/v1/chat/completions", body(false));
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(json::parse(r.body)["choices"][0]["message"]["content"],
            " lorem ipsum dolor sit amet, consectetur");

  // The router measured the answers as what a client waited for, and says so.
  const json row = route_row("p/up-model");
  EXPECT_EQ(row["ttft_ms"]["unstreamed_samples"], 2) << row.dump(2);
  EXPECT_EQ(row["ttft_ms"]["samples"], 2);
  EXPECT_EQ(row["wire"]["stream"], false);
  EXPECT_EQ(row["wire"]["stream_options"], false);
}

TEST_F(RealProvidersTest, ADeploymentThatRefusesToStreamIsAskedForJsonFromThenOn) {
  sim::Profile refuses = quick();
  refuses.reject_stream = true;
  start_sim(refuses);
  start_gateway(", api_key_env: LLMGATE_TEST_PROVIDER_KEY");
  HttpClient c(port_);
  // A non-stream call that works directly must work through the gateway.
  auto r = c.request("POST", "/v1/chat/completions", body(false));
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.header("x-llmgate-deployment"), "p/up-model");
  EXPECT_EQ(r.header("x-llmgate-attempts"), "1");
  EXPECT_EQ(sim_->stats().requests, 2u);  // refused as a stream, then answered as JSON
  EXPECT_EQ(backup_->stats().requests, 0u);
  EXPECT_EQ(json::parse(r.body)["object"], "chat.completion");

  // Learnt: the next one goes as JSON at once, and a stream client gets events.
  auto head = c.start("POST", "/v1/chat/completions", body(true));
  ASSERT_EQ(head.status, 200);
  const StreamText text = read_stream(c);
  EXPECT_TRUE(text.done);
  EXPECT_FALSE(text.content.empty());
  EXPECT_EQ(sim_->stats().requests, 3u);
  EXPECT_EQ(json::parse(sim_->last_request()->body)["stream"], false);
  const json row = route_row("p/up-model");
  EXPECT_EQ(row["wire"]["learnt"], json::array({"refuses stream"})) << row.dump(2);
  EXPECT_EQ(row["wire"]["stream"], false);
}

TEST_F(RealProvidersTest, AzureOpenAiIsReachedByDeploymentPathApiVersionAndApiKeyHeader) {
  start_sim(quick(4), "gpt-4o-prod", "2024-10-21");
  start_gateway(
      ", api_key_env: LLMGATE_TEST_PROVIDER_KEY, api_key_header: api-key,"
      " chat_path: \"/deployments/{model}/chat/completions\","
      " query: {api-version: \"2024-10-21\"}",
      "", "gpt-4o-prod", "/openai");
  HttpClient c(port_);
  auto r = c.request("POST", "/v1/chat/completions", body(false));
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.header("x-llmgate-deployment"), "p/gpt-4o-prod");
  auto last = sim_->last_request();
  ASSERT_TRUE(last);
  EXPECT_EQ(last->target,
            "/openai/deployments/gpt-4o-prod/chat/completions?api-version=2024-10-21");
  EXPECT_EQ(last->headers["api-key"], "sim-key");
  EXPECT_EQ(last->headers.count("authorization"), 0u);
  // Azure's first chunk (no choices, id "", model "", created 0) does not
  // blank the assembled answer's fields.
  const json answer = json::parse(r.body);
  EXPECT_NE(answer["id"], "");
  EXPECT_EQ(answer["model"], "gpt-4o-prod");
  EXPECT_NE(answer["created"], 0);
  EXPECT_EQ(answer["choices"][0]["message"]["content"], " lorem ipsum dolor sit");

  auto head = c.start("POST", "/v1/chat/completions", body(true));
  ASSERT_EQ(head.status, 200);
  const StreamText text = read_stream(c);
  EXPECT_TRUE(text.done);
  EXPECT_EQ(text.content, " lorem ipsum dolor sit");
}

TEST_F(RealProvidersTest, HeaderValuesFromTheEnvironmentAreSentAndNeverEchoed) {
  setenv("LLMGATE_TEST_HEADER_SECRET", "hdr-s3cret-value", 1);
  start_sim(quick());
  start_gateway(
      ", api_key_env: LLMGATE_TEST_PROVIDER_KEY,"
      " headers: {x-portkey-key: {env: LLMGATE_TEST_HEADER_SECRET}, x-plain: visible}");
  HttpClient c(port_);
  auto r = c.request("POST", "/v1/chat/completions", body(false));
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(sim_->last_request()->headers["x-portkey-key"], "hdr-s3cret-value");
  EXPECT_EQ(sim_->last_request()->headers["x-plain"], "visible");
}

// A reasoning model that thinks ~0.8 s before its first visible token, on a
// provider whose first-token timeout is 300 ms.
sim::Profile thinker() {
  sim::Profile p = quick(4);
  p.tps = {sim::Distribution::Kind::kFixed, 50, 0};
  p.reasoning_tokens = 40;
  p.reasoning_hidden = true;
  return p;
}

TEST_F(RealProvidersTest, AReasoningDeploymentWithoutAFirstTokenDeadlineIsWaitedFor) {
  start_sim(thinker());
  start_gateway(", api_key_env: LLMGATE_TEST_PROVIDER_KEY, timeouts: {ttft: 300ms}",
                ", ttft_timeout: none");
  HttpClient c(port_);
  auto head = c.start("POST", "/v1/chat/completions", body(true));
  ASSERT_EQ(head.status, 200);
  EXPECT_EQ(head.header("x-llmgate-deployment"), "p/up-model");
  EXPECT_EQ(head.header("x-llmgate-attempts"), "1");
  EXPECT_GE(std::stod(head.header("x-llmgate-ttft-ms")), 700.0);
  EXPECT_TRUE(read_stream(c).done);
  EXPECT_EQ(backup_->stats().requests, 0u);
  EXPECT_EQ(route_row("p/up-model")["wire"]["first_token_deadline"], false);
}

TEST_F(RealProvidersTest, AReasoningDeploymentGetsItsOwnLongerFirstTokenDeadline) {
  start_sim(thinker());
  start_gateway(", api_key_env: LLMGATE_TEST_PROVIDER_KEY, timeouts: {ttft: 300ms}",
                ", ttft_timeout: 5s");
  HttpClient c(port_);
  auto r = c.request("POST", "/v1/chat/completions", body(false));
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.header("x-llmgate-deployment"), "p/up-model");
  EXPECT_EQ(r.header("x-llmgate-attempts"), "1");
}

TEST_F(RealProvidersTest, WithoutItsOwnDeadlineAThinkingDeploymentFailsOverAtTheProviders) {
  start_sim(thinker());
  start_gateway(", api_key_env: LLMGATE_TEST_PROVIDER_KEY, timeouts: {ttft: 300ms}");
  HttpClient c(port_);
  auto r = c.request("POST", "/v1/chat/completions", body(false));
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.header("x-llmgate-deployment"), "backup/backup-model");
  EXPECT_NE(r.header("x-llmgate-failed").find("p/up-model=ttft_timeout"), std::string::npos)
      << r.header("x-llmgate-failed");
}

TEST_F(RealProvidersTest, RequestsAtAReasoningEffortAreMeasuredApart) {
  sim::Profile p = thinker();
  p.cached_tokens = 3;
  start_sim(p);
  start_gateway(", api_key_env: LLMGATE_TEST_PROVIDER_KEY", ", ttft_timeout: none");
  HttpClient c(port_);
  for (const char* effort : {"high", "high", "low"}) {
    auto r = c.request("POST", "/v1/chat/completions",
                       body(false, std::string(R"(,"reasoning_effort":")") + effort + "\""));
    ASSERT_EQ(r.status, 200) << r.body;
  }
  ASSERT_EQ(c.request("POST", "/v1/chat/completions", body(false)).status, 200);
  const json row = route_row("p/up-model");
  // The deployment's own row: the one request without an effort.
  EXPECT_EQ(row["ttft_ms"]["samples"], 1) << row.dump(2);
  EXPECT_EQ(row["by_reasoning_effort"]["high"]["ttft_ms"]["samples"], 2) << row.dump(2);
  EXPECT_EQ(row["by_reasoning_effort"]["low"]["ttft_ms"]["samples"], 1);
  EXPECT_FALSE(row["by_reasoning_effort"].contains("medium"));
  // Thinking at "high" is its own first-token time.
  EXPECT_GT(row["by_reasoning_effort"]["high"]["ttft_ms"]["p50"].get<double>(), 700.0);
}

}  // namespace
}  // namespace llmgate
