// One OpenAI endpoint in front of providers that speak their own APIs
// (providers[].protocol: anthropic, gemini): the simulator answers in
// Anthropic Messages and Gemini generateContent framing, the gateway
// translates both ways, and the client sees OpenAI chat completions with the
// same failure semantics as for any OpenAI-compatible provider.
#include <gtest/gtest.h>

#include <cstdlib>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
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

std::string body(bool stream, const std::string& extra = "") {
  return std::string(R"({"model":"chat","messages":[{"role":"user","content":"hi"}],"stream":)") +
         (stream ? "true" : "false") + extra + "}";
}

struct StreamText {
  std::string content, arguments, finish;
  json usage;
  bool done = false, error = false;
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
    if (j.contains("usage") && j["usage"].is_object()) out.usage = j["usage"];
    if (!j.contains("choices") || j["choices"].empty()) continue;
    const auto& ch = j["choices"][0];
    out.content += ch["delta"].value("content", "");
    if (ch["delta"].contains("tool_calls"))
      out.arguments += ch["delta"]["tool_calls"][0]["function"].value("arguments", "");
    if (ch.contains("finish_reason") && ch["finish_reason"].is_string())
      out.finish = ch["finish_reason"];
  }
  return out;
}

// The protocol under test, its base_url path and the provider keys it needs.
struct Protocol {
  const char* name;
  const char* base_path;
};
constexpr Protocol kAnthropic{"anthropic", "/v1"};
constexpr Protocol kGemini{"gemini", "/v1beta"};

class NativeProtocolsTest : public ::testing::TestWithParam<Protocol> {
 protected:
  void SetUp() override { setenv("LLMGATE_TEST_NATIVE_KEY", "native-key", 1); }
  void TearDown() override {
    gw_.reset();
    sim_.reset();
    backup_.reset();
  }

  void start(const sim::Profile& p, const std::string& deployment_extra = "",
             const std::string& ttft = "2s") {
    sim::SimOptions o;
    o.api_key = "native-key";
    o.profiles["native-model"] = p;
    sim_ = std::make_unique<sim::SimServer>(o);
    const auto port = sim_->start();
    sim::SimOptions b;
    b.profiles["backup-model"] = testing::quick_profile();
    backup_ = std::make_unique<sim::SimServer>(b);
    const auto backup_port = backup_->start();
    const std::string yaml = R"(
routing: {exploration: 0, defaults: {policy: ordered}}
server: {listeners: [{address: 127.0.0.1, port: 0}], workers: 1}
timeouts: {connect: 1s, ttft: )" +
                             ttft + R"(, idle: 2s, total: 20s}
providers:
  - {name: native, protocol: )" +
                             GetParam().name + R"(, base_url: "http://127.0.0.1:)" +
                             std::to_string(port) + GetParam().base_path +
                             R"(", api_key_env: LLMGATE_TEST_NATIVE_KEY}
  - {name: backup, base_url: "http://127.0.0.1:)" +
                             std::to_string(backup_port) + R"(/v1"}
models:
  - name: chat
    deployments: [{provider: native, model: native-model)" +
                             deployment_extra + R"(}, {provider: backup, model: backup-model}]
  - name: only-native
    deployments: [{provider: native, model: native-model}]
  - name: only-backup
    deployments: [{provider: backup, model: backup-model}]
)";
    gw_ = std::make_unique<gateway::Gateway>(config::parse_config(yaml, "native.yaml"));
    port_ = gw_->start().at(0);
  }

  std::unique_ptr<sim::SimServer> sim_, backup_;
  std::unique_ptr<gateway::Gateway> gw_;
  std::uint16_t port_ = 0;
};

TEST_P(NativeProtocolsTest, StreamsTheAnswerAsOpenAiChunksWithUsageAndDone) {
  start(testing::quick_profile(6));
  HttpClient c(port_);
  auto head = c.start("POST", "/v1/chat/completions",
                      body(true, R"(,"stream_options":{"include_usage":true})"));
  ASSERT_EQ(head.status, 200);
  EXPECT_EQ(head.header("x-llmgate-deployment"), "native/native-model");
  EXPECT_FALSE(head.header("x-llmgate-ttft-ms").empty());
  const StreamText s = read_stream(c);
  EXPECT_TRUE(s.done);
  EXPECT_FALSE(s.error);
  EXPECT_EQ(s.content, " lorem ipsum dolor sit amet, consectetur");
  EXPECT_EQ(s.finish, "stop");
  ASSERT_TRUE(s.usage.is_object());
  EXPECT_EQ(s.usage["completion_tokens"], 6);
  EXPECT_GT(s.usage["prompt_tokens"].get<int>(), 0);
  EXPECT_EQ(backup_->stats().requests, 0u);
}

TEST_P(NativeProtocolsTest, ANonStreamedAnswerIsOneChatCompletion) {
  start(testing::quick_profile(4));
  HttpClient c(port_);
  auto r = c.request("POST", "/v1/chat/completions", body(false));
  ASSERT_EQ(r.status, 200) << r.body;
  const json j = json::parse(r.body);
  EXPECT_EQ(j["object"], "chat.completion");
  EXPECT_EQ(j["choices"][0]["message"]["content"], " lorem ipsum dolor sit");
  EXPECT_EQ(j["choices"][0]["finish_reason"], "stop");
  EXPECT_EQ(j["usage"]["completion_tokens"], 4);
}

TEST_P(NativeProtocolsTest, ToolCallsComeBackAsOpenAiToolCallsWithWholeArguments) {
  sim::Profile p = testing::quick_profile(3);
  p.output = sim::Profile::Output::kToolCall;
  start(p);
  HttpClient c(port_);
  const std::string tools =
      R"(,"tools":[{"type":"function","function":{"name":"lookup","parameters":{"type":"object","properties":{"query":{"type":"string"}}}}}])";
  auto head = c.start("POST", "/v1/chat/completions", body(true, tools));
  ASSERT_EQ(head.status, 200);
  const StreamText s = read_stream(c);
  EXPECT_TRUE(s.done);
  EXPECT_EQ(s.finish, "tool_calls");
  EXPECT_EQ(json::parse(s.arguments), json::parse(R"({"query":" lorem ipsum dolor"})"))
      << s.arguments;
  auto r = c.request("POST", "/v1/chat/completions", body(false, tools));
  ASSERT_EQ(r.status, 200) << r.body;
  const json answer = json::parse(r.body);
  const json& call = answer["choices"][0]["message"]["tool_calls"][0];
  EXPECT_EQ(call["function"]["name"], "lookup");
  EXPECT_EQ(json::parse(call["function"]["arguments"].get<std::string>())["query"],
            " lorem ipsum dolor");
}

// A chunk's layout: its members in order, each choice's, each delta's, and
// whether logprobs and usage are null; not the values. llmgate-sim's
// system_fingerprint aside (neither Anthropic nor Gemini has one).
std::string layout(const std::string& event) {
  const auto j = nlohmann::ordered_json::parse(event);
  std::string out;
  for (const auto& [key, value] : j.items()) {
    if (key == "system_fingerprint") continue;
    out += key;
    if (key == "choices") {
      out += '[';
      for (const auto& choice : value) {
        for (const auto& [k, v] : choice.items()) {
          out += k;
          if (k == "delta") {
            out += '{';
            for (const auto& [member, _] : v.items()) out += member + ',';
            out += '}';
          }
          if (k == "logprobs" && v.is_null()) out += "=null";
          out += ',';
        }
      }
      out += ']';
    }
    if (key == "usage") out += value.is_null() ? "=null" : "={}";
    out += ',';
  }
  return out;
}

// The layouts of a stream's chunks, the client asking for usage.
std::set<std::string> layouts(HttpClient& c, const std::string& model) {
  auto head = c.start("POST", "/v1/chat/completions",
                      R"({"model":")" + model +
                          R"(","messages":[{"role":"user","content":"hi"}],"stream":true,)"
                          R"("stream_options":{"include_usage":true}})");
  EXPECT_EQ(head.status, 200) << model;
  std::set<std::string> out;
  for (const auto& e : c.rest_of_events()) {
    if (e != "[DONE]") out.insert(layout(e));
  }
  return out;
}

// The client cannot tell the protocols apart by their chunks either: every
// chunk translated from the native protocol is laid out as some chunk of an
// OpenAI deployment is (here llmgate-sim's, which follows OpenAI's): the
// same members in the same order, "logprobs": null, and "usage": null on
// every chunk but the usage chunk. (With include_usage: without it, the
// OpenAI path relays the "usage": null the gateway's own stream_options
// made the upstream send, which OpenAI's chunks to such a client lack.)
TEST_P(NativeProtocolsTest, ChunksAreLaidOutAsAnOpenAiDeploymentsAre) {
  start(testing::quick_profile(4));
  HttpClient c(port_);
  const std::set<std::string> openai = layouts(c, "only-backup");
  const std::set<std::string> native = layouts(c, "only-native");
  ASSERT_GE(openai.size(), 4u);  // role, content, finish, usage
  for (const auto& l : native) {
    EXPECT_TRUE(openai.count(l)) << l << "\nis none of\n" << ::testing::PrintToString(openai);
  }
}

TEST_P(NativeProtocolsTest, AnUpstreamErrorBeforeTheFirstTokenFailsOverInvisibly) {
  sim::Profile p = testing::quick_profile();
  p.error_rate = 1;
  p.error_status = std::string(GetParam().name) == "anthropic" ? 529 : 503;
  start(p);
  HttpClient c(port_);
  auto r = c.request("POST", "/v1/chat/completions", body(false));
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.header("x-llmgate-deployment"), "backup/backup-model");
  EXPECT_NE(r.header("x-llmgate-failed").find("native/native-model=upstream_status"),
            std::string::npos)
      << r.header("x-llmgate-failed");
}

TEST_P(NativeProtocolsTest, ACutAfterTheFirstTokenEndsWithAnErrorEventAndNoDone) {
  sim::Profile p = testing::quick_profile(10);
  p.cut_after_tokens = 3;
  start(p);
  HttpClient c(port_);
  auto head = c.start("POST", "/v1/chat/completions", body(true));
  ASSERT_EQ(head.status, 200);
  const StreamText s = read_stream(c);
  EXPECT_TRUE(s.error);
  EXPECT_FALSE(s.done);
  EXPECT_FALSE(s.content.empty());
}

TEST_P(NativeProtocolsTest, ARequestTheProtocolCannotSayIsServedElsewhereOrRefused) {
  start(testing::quick_profile());
  HttpClient c(port_);
  // logprobs has no equivalent: the native deployment is passed over.
  auto r = c.request("POST", "/v1/chat/completions", body(false, R"(,"logprobs":true)"));
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.header("x-llmgate-deployment"), "backup/backup-model");
  EXPECT_EQ(sim_->stats().requests, 0u);
  // A deployment passed over is no attempt: with one attempt allowed, the
  // next deployment still gets it.
  auto one = c.request("POST", "/v1/chat/completions",
                       body(false, R"(,"logprobs":true,"route":{"max_attempts":1})"));
  ASSERT_EQ(one.status, 200) << one.body;
  EXPECT_EQ(one.header("x-llmgate-deployment"), "backup/backup-model");
  EXPECT_EQ(one.header("x-llmgate-attempts"), "1");
  // With no other deployment: a 400 naming the parameter, nothing sent.
  auto refused = c.request(
      "POST", "/v1/chat/completions",
      R"({"model":"only-native","messages":[{"role":"user","content":"hi"}],"logprobs":true})");
  EXPECT_EQ(refused.status, 400) << refused.body;
  const json e = json::parse(refused.body)["error"];
  EXPECT_EQ(e["param"], "logprobs");
  EXPECT_EQ(e["code"], "unsupported_parameter");
  EXPECT_EQ(sim_->stats().requests, 0u);
}

TEST_P(NativeProtocolsTest, TheCallersOwnErrorComesBackInOpenAisShape) {
  start(testing::quick_profile());
  HttpClient c(port_);
  // An empty message list: the upstream's 400, as an OpenAI error object.
  sim::Profile p = testing::quick_profile();
  p.error_rate = 1;
  p.error_status = 400;
  sim_->set_profile("native-model", p);
  auto r = c.request("POST", "/v1/chat/completions",
                     R"({"model":"only-native","messages":[{"role":"user","content":"hi"}]})");
  EXPECT_EQ(r.status, 400) << r.body;
  const json e = json::parse(r.body);
  ASSERT_TRUE(e.contains("error")) << r.body;
  EXPECT_TRUE(e["error"]["message"].is_string()) << r.body;
  EXPECT_TRUE(e["error"].contains("type")) << r.body;
}

TEST_P(NativeProtocolsTest, AKeyTheProviderRefusesFailsOverAndNeedsTheOperator) {
  // Anthropic answers a wrong key with 401; Google with 400
  // INVALID_ARGUMENT (API_KEY_INVALID), which is still not the caller's error.
  start(testing::quick_profile());
  setenv("LLMGATE_TEST_NATIVE_KEY", "wrong-key", 1);
  gw_.reset();
  start(testing::quick_profile());
  HttpClient c(port_);
  auto r = c.request("POST", "/v1/chat/completions", body(false));
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.header("x-llmgate-deployment"), "backup/backup-model");
  EXPECT_EQ(sim_->stats().requests, 1u);
}

TEST_P(NativeProtocolsTest, ARateLimitCoolsTheDeploymentDownForTheWaitItNames) {
  // Anthropic names the wait in retry-after; Google in the body (RetryInfo).
  sim::Profile p = testing::quick_profile();
  p.error_rate = 1;
  p.error_status = 429;
  p.retry_after_s = 30;
  start(p);
  HttpClient c(port_);
  auto first = c.request("POST", "/v1/chat/completions", body(false));
  ASSERT_EQ(first.status, 200) << first.body;
  EXPECT_EQ(first.header("x-llmgate-deployment"), "backup/backup-model");
  // Cooling down: the next request does not try it.
  auto second = c.request("POST", "/v1/chat/completions", body(false));
  ASSERT_EQ(second.status, 200) << second.body;
  EXPECT_EQ(second.header("x-llmgate-attempts"), "1");
  EXPECT_EQ(sim_->stats().requests, 1u);
}

// Routing III: a provider's context-length 400, in its own words
// (Anthropic's "prompt is too long", Gemini's "input token count ... exceeds
// the maximum"), fails over to a deployment that may hold the prompt; with
// none after it, the 400 is the client's.
TEST_P(NativeProtocolsTest, AContextLengthRefusalFailsOverToADeploymentThatCanHoldThePrompt) {
  sim::Profile small = testing::quick_profile();
  small.context_window = 2'000;
  start(small);
  const std::string prompt(40'000, 'x');  // ~10k tokens for the simulator
  const std::string long_body =
      R"({"model":"chat","messages":[{"role":"user","content":")" + prompt + R"("}]})";
  HttpClient c(port_);
  auto r = c.request("POST", "/v1/chat/completions", long_body);
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.header("x-llmgate-deployment"), "backup/backup-model");
  EXPECT_EQ(r.header("x-llmgate-attempts"), "2");
  EXPECT_EQ(r.header("x-llmgate-failed"), "native/native-model=client_error(400)");
  EXPECT_EQ(sim_->stats().requests, 1u);
  // Alone, the deployment's refusal is what the client gets.
  auto alone = c.request(
      "POST", "/v1/chat/completions",
      R"({"model":"only-native","messages":[{"role":"user","content":")" + prompt + R"("}]})");
  EXPECT_EQ(alone.status, 400) << alone.body;
}

INSTANTIATE_TEST_SUITE_P(Protocol, NativeProtocolsTest, ::testing::Values(kAnthropic, kGemini),
                         [](const auto& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace llmgate
