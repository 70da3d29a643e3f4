// protocol: bedrock against a scripted Bedrock runtime: a chat request goes
// out as a Converse request signed with AWS Signature Version 4 (checked
// here by signing it again with the same credentials and time), the
// ConverseStream's event-stream messages come back as OpenAI chunks, and
// Bedrock's failures fail over as documented -- a 403 (a signature the
// service refused) and a throttlingException before the first token to the
// next deployment, a throttlingException after it as an error event.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "config/config.h"
#include "gateway/server/gateway.h"
#include "providers/cloud/sigv4.h"
#include "providers/event_stream.h"
#include "tests/support/http_client.h"
#include "tests/support/scripted_upstream.h"
#include "tests/support/sim_profiles.h"
#include "tools/sim/sim_server.h"

namespace llmgate {
namespace {

using testing::HttpClient;
using testing::Script;
using K = testing::Step::Kind;
using json = nlohmann::json;

std::string event(std::string_view type, std::string_view payload) {
  const providers::EventStreamHeader h[] = {
      {":event-type", type}, {":content-type", "application/json"}, {":message-type", "event"}};
  return providers::encode_event_stream_message(h, payload);
}

std::string throttling() {
  const providers::EventStreamHeader h[] = {{":exception-type", "throttlingException"},
                                            {":content-type", "application/json"},
                                            {":message-type", "exception"}};
  return providers::encode_event_stream_message(h, R"({"message":"Too many requests"})");
}

std::string stream_head() {
  return "HTTP/1.1 200 OK\r\nContent-Type: application/vnd.amazon.eventstream\r\n"
         "Transfer-Encoding: chunked\r\n\r\n";
}

std::string opening() {
  return event("messageStart", R"({"role":"assistant"})") +
         event("contentBlockDelta", R"({"contentBlockIndex":0,"delta":{"text":"Hello"}})");
}

std::string closing() {
  return event("contentBlockDelta", R"({"contentBlockIndex":0,"delta":{"text":" there"}})") +
         event("messageStop", R"({"stopReason":"end_turn"})") +
         event("metadata", R"({"usage":{"inputTokens":5,"outputTokens":2,"totalTokens":7}})");
}

// A request as the scripted upstream read it: head fields and body.
struct SeenRequest {
  std::string method, target, body;
  std::map<std::string, std::string> fields;  // lower-case names
};

SeenRequest parse_request(const std::string& raw) {
  SeenRequest r;
  const std::size_t end = raw.find("\r\n\r\n");
  std::string_view head = std::string_view(raw).substr(0, end);
  r.body = raw.substr(end + 4);
  std::size_t nl = head.find("\r\n");
  const std::string_view line = head.substr(0, nl);
  r.method = std::string(line.substr(0, line.find(' ')));
  r.target = std::string(line.substr(r.method.size() + 1, line.rfind(' ') - r.method.size() - 1));
  head.remove_prefix(nl + 2);
  while (!head.empty()) {
    nl = head.find("\r\n");
    const std::string_view f = head.substr(0, nl);
    const std::size_t colon = f.find(':');
    std::string name(f.substr(0, colon));
    for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    r.fields[name] = std::string(f.substr(colon + 2));
    if (nl == std::string_view::npos) break;
    head.remove_prefix(nl + 2);
  }
  return r;
}

// The gateway: "bedrock" (protocol: bedrock, signing for us-east-1) at
// `bedrock_port` serving `model`, before "good" (an OpenAI-compatible
// simulator) at `good_port`.
std::unique_ptr<gateway::Gateway> gateway_for(std::uint16_t bedrock_port, std::uint16_t good_port,
                                              const std::string& model) {
  const std::string yaml = R"(
routing: {exploration: 0, defaults: {policy: ordered}}
server: {listeners: [{address: 127.0.0.1, port: 0}], workers: 1}
timeouts: {connect: 1s, ttft: 1s, idle: 1s, total: 10s}
providers:
  - {name: bedrock, protocol: bedrock, aws_region: us-east-1, base_url: "http://127.0.0.1:)" +
                           std::to_string(bedrock_port) + R"("}
  - {name: good, base_url: "http://127.0.0.1:)" +
                           std::to_string(good_port) + R"(/v1"}
models:
  - name: chat
    deployments: [{provider: bedrock, model: ")" +
                           model + R"("}, {provider: good, model: m}]
)";
  return std::make_unique<gateway::Gateway>(config::parse_config(yaml, "bedrock.yaml"));
}

class BedrockTest : public ::testing::Test {
 protected:
  void SetUp() override {
    setenv("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE", 1);
    setenv("AWS_SECRET_ACCESS_KEY", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY", 1);
    setenv("AWS_SESSION_TOKEN", "SESSIONTOKEN", 1);
  }
  void TearDown() override {
    gw_.reset();
    up_.reset();
    good_.reset();
    unsetenv("AWS_ACCESS_KEY_ID");
    unsetenv("AWS_SECRET_ACCESS_KEY");
    unsetenv("AWS_SESSION_TOKEN");
  }

  // bedrock/m (the script) before good/m (an OpenAI-compatible simulator).
  void start(const Script& script) {
    up_ = std::make_unique<testing::ScriptedUpstream>(script);
    const auto port = up_->start();
    sim::SimOptions o;
    o.profiles["m"] = testing::quick_profile();
    good_ = std::make_unique<sim::SimServer>(o);
    const auto good_port = good_->start();
    gw_ = gateway_for(port, good_port, "anthropic.claude-3-5-sonnet-20240620-v1:0");
    port_ = gw_->start().at(0);
  }

  std::unique_ptr<testing::ScriptedUpstream> up_;
  std::unique_ptr<sim::SimServer> good_;
  std::unique_ptr<gateway::Gateway> gw_;
  std::uint16_t port_ = 0;
};

const char* kChat = R"({"model":"chat","messages":[{"role":"user","content":"hi"}],"stream":true})";

TEST_F(BedrockTest, ASignedConverseStreamBecomesChatChunks) {
  start({{K::kSend, stream_head() + testing::chunk(opening()) + testing::chunk(closing()) +
                        testing::last_chunk()},
         {K::kClose}});
  HttpClient c(port_);
  auto head = c.start("POST", "/v1/chat/completions", kChat);
  ASSERT_EQ(head.status, 200) << head.body;
  EXPECT_EQ(head.header("x-llmgate-deployment"),
            "bedrock/anthropic.claude-3-5-sonnet-20240620-v1:0");
  std::string text;
  bool done = false;
  json usage;
  for (const auto& e : c.rest_of_events()) {
    if (e == "[DONE]") {
      done = true;
      continue;
    }
    const json j = json::parse(e);
    if (j.contains("usage") && j["usage"].is_object()) usage = j["usage"];
    if (!j["choices"].empty()) text += j["choices"][0]["delta"].value("content", "");
  }
  EXPECT_EQ(text, "Hello there");
  EXPECT_TRUE(done);

  // What went upstream: a Converse request, signed.
  const SeenRequest r = parse_request(up_->last_request());
  EXPECT_EQ(r.method, "POST");
  EXPECT_EQ(r.target, "/model/anthropic.claude-3-5-sonnet-20240620-v1%3A0/converse-stream");
  EXPECT_EQ(r.fields.at("accept"), "application/vnd.amazon.eventstream");
  const json body = json::parse(r.body);
  EXPECT_EQ(body["messages"][0], json::parse(R"({"role":"user","content":[{"text":"hi"}]})"));
  EXPECT_EQ(r.fields.at("x-amz-security-token"), "SESSIONTOKEN");
  EXPECT_EQ(r.fields.at("x-amz-content-sha256"), providers::cloud::sha256_hex(r.body));
  // Signed again here with the same credentials and time: the same signature.
  providers::cloud::SigV4Request again;
  again.method = r.method;
  again.host = r.fields.at("host");
  again.path = r.target;
  again.headers = {{"content-type", r.fields.at("content-type")}};
  again.payload = r.body;
  const providers::cloud::AwsCredentials creds{
      "AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY", "SESSIONTOKEN"};
  const auto expected = providers::cloud::sigv4_sign(
      again, creds, "us-east-1", "bedrock",
      *providers::cloud::sigv4_parse_amz_date(r.fields.at("x-amz-date")));
  EXPECT_EQ(r.fields.at("authorization"), expected.authorization);
  EXPECT_NE(r.fields.at("authorization").find("Credential=AKIDEXAMPLE/"), std::string::npos);
  // The secret itself never goes anywhere.
  EXPECT_EQ(up_->last_request().find("wJalrXUtnFEMI"), std::string::npos);
}

TEST_F(BedrockTest, ARefusedSignatureFailsOverToTheNextDeployment) {
  start(
      {{K::kSend,
        testing::status_response(
            403, "x-amzn-ErrorType: InvalidSignatureException\r\n",
            R"({"message":"The request signature we calculated does not match the signature you provided."})")},
       {K::kClose}});
  HttpClient c(port_);
  auto r = c.request("POST", "/v1/chat/completions",
                     R"({"model":"chat","messages":[{"role":"user","content":"hi"}]})");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.header("x-llmgate-deployment"), "good/m");
}

TEST_F(BedrockTest, ThrottlingBeforeTheFirstTokenFailsOverAfterItIsAnErrorEvent) {
  start(
      {{K::kSend, stream_head() + testing::chunk(event("messageStart", R"({"role":"assistant"})") +
                                                 throttling())},
       {K::kHold},
       {K::kNext},
       {K::kSend, stream_head() + testing::chunk(opening())},
       {K::kSleep, "", std::chrono::milliseconds(50)},
       {K::kSend, testing::chunk(throttling())},
       {K::kHold}});
  HttpClient c(port_);
  auto head = c.start("POST", "/v1/chat/completions", kChat);
  ASSERT_EQ(head.status, 200);
  EXPECT_EQ(head.header("x-llmgate-deployment"), "good/m");  // nothing of bedrock's was sent
  c.rest_of_events();

  HttpClient c2(port_);
  head = c2.start("POST", "/v1/chat/completions", kChat);
  ASSERT_EQ(head.status, 200);
  std::string text;
  json error;
  bool done = false;
  for (const auto& e : c2.rest_of_events()) {
    if (e == "[DONE]") {
      done = true;
      continue;
    }
    const json j = json::parse(e);
    if (j.contains("error"))
      error = j["error"];
    else if (!j["choices"].empty())
      text += j["choices"][0]["delta"].value("content", "");
  }
  EXPECT_EQ(text, "Hello");
  EXPECT_FALSE(done);  // never a clean end
  ASSERT_TRUE(error.is_object());
  // The upstream's own words stay in the gateway's log, as for every protocol.
  EXPECT_EQ(error["code"], "upstream_stream_error") << error.dump();
}

// The simulator's Bedrock mode: it checks each request's signature against
// its --aws-key and answers in event-stream frames.
class BedrockSimTest : public ::testing::Test {
 protected:
  void TearDown() override {
    gw_.reset();
    sim_.reset();
    good_.reset();
    unsetenv("AWS_ACCESS_KEY_ID");
    unsetenv("AWS_SECRET_ACCESS_KEY");
  }

  // "bedrock" signs with `secret`; the simulator accepts only the right one.
  void start(const std::string& secret, const sim::Profile& profile) {
    setenv("AWS_ACCESS_KEY_ID", "AKIDSIM", 1);
    setenv("AWS_SECRET_ACCESS_KEY", secret.c_str(), 1);
    sim::SimOptions o;
    o.aws_access_key_id = "AKIDSIM";
    o.aws_secret_access_key = "sim/secret";
    o.profiles["claude"] = profile;
    sim_ = std::make_unique<sim::SimServer>(o);
    const auto port = sim_->start();
    sim::SimOptions g;
    g.profiles["m"] = testing::quick_profile();
    good_ = std::make_unique<sim::SimServer>(g);
    const auto good_port = good_->start();
    gw_ = gateway_for(port, good_port, "claude");
    port_ = gw_->start().at(0);
  }

  std::unique_ptr<sim::SimServer> sim_, good_;
  std::unique_ptr<gateway::Gateway> gw_;
  std::uint16_t port_ = 0;
};

TEST_F(BedrockSimTest, SignedRequestsAreAnsweredStreamedAndWhole) {
  start("sim/secret", testing::quick_profile(6));
  HttpClient c(port_);
  auto head = c.start("POST", "/v1/chat/completions", kChat);
  ASSERT_EQ(head.status, 200) << head.body;
  EXPECT_EQ(head.header("x-llmgate-deployment"), "bedrock/claude");
  std::string streamed;
  bool done = false;
  for (const auto& e : c.rest_of_events()) {
    if (e == "[DONE]") {
      done = true;
      continue;
    }
    const json j = json::parse(e);
    if (!j["choices"].empty()) streamed += j["choices"][0]["delta"].value("content", "");
  }
  EXPECT_TRUE(done);
  EXPECT_FALSE(streamed.empty());
  auto whole = c.request("POST", "/v1/chat/completions",
                         R"({"model":"chat","messages":[{"role":"user","content":"hi"}]})");
  ASSERT_EQ(whole.status, 200) << whole.body;
  const json answer = json::parse(whole.body);
  EXPECT_EQ(answer["choices"][0]["message"]["content"], streamed);  // the same words
  EXPECT_EQ(answer["choices"][0]["finish_reason"], "stop");
  EXPECT_GT(answer["usage"]["completion_tokens"].get<int>(), 0);
  EXPECT_EQ(sim_->stats().signatures_refused, 0u);
  EXPECT_EQ(sim_->stats().requests, 2u);
}

TEST_F(BedrockSimTest, AWrongSecretIsRefusedByTheServiceAndFailsOver) {
  start("not/the/secret", testing::quick_profile());
  HttpClient c(port_);
  auto r = c.request("POST", "/v1/chat/completions",
                     R"({"model":"chat","messages":[{"role":"user","content":"hi"}]})");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.header("x-llmgate-deployment"), "good/m");
  EXPECT_EQ(sim_->stats().signatures_refused, 1u);
}

TEST_F(BedrockSimTest, AModelStreamErrorAfterTheFirstTokenEndsWithAnErrorEvent) {
  sim::Profile p = testing::quick_profile(6);
  p.error_after_tokens = 2;
  start("sim/secret", p);
  HttpClient c(port_);
  auto head = c.start("POST", "/v1/chat/completions", kChat);
  ASSERT_EQ(head.status, 200);
  bool done = false, error = false;
  for (const auto& e : c.rest_of_events()) {
    if (e == "[DONE]")
      done = true;
    else if (json::parse(e).contains("error"))
      error = true;
  }
  EXPECT_TRUE(error);
  EXPECT_FALSE(done);
}

}  // namespace
}  // namespace llmgate
