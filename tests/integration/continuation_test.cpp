// Stream continuation end to end (docs/failure-semantics.md,
// "Continuation"): a simulated provider breaks a stream after its first
// tokens -- cut, stalled, malformed, an in-band error -- and another
// deployment continues it in its own way (OpenAI-compatible prefix and
// continue_final_message, Anthropic prefill, a trailing Gemini model turn).
// The simulator continues as those servers do (tools/sim/README.md), so the
// client's text is checked against the answer an unbroken stream gives.
#include <gtest/gtest.h>

#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "config/config.h"
#include "gateway/server/gateway.h"
#include "tests/support/http_client.h"
#include "tests/support/metrics_text.h"
#include "tests/support/sim_profiles.h"
#include "tools/sim/sim_server.h"

namespace llmgate {
namespace {

using json = nlohmann::json;
using testing::HttpClient;

constexpr int kTokens = 24;  // the answer's length
constexpr int kBreakAt = 6;  // tokens before the break

sim::Profile whole() { return testing::quick_profile(kTokens); }

// What a client made of a streamed body.
struct Told {
  std::string text, reasoning;
  int done = 0;
  std::vector<json> errors;
  std::set<std::string> ids, models;
  std::set<std::int64_t> created;
  std::string finish;
  int role_chunks = 0;
};

Told read_stream(const std::string& body) {
  Told t;
  std::size_t at = 0;
  while ((at = body.find("data: ", at)) != std::string::npos) {
    const std::size_t end = body.find("\n\n", at);
    const std::string data = body.substr(at + 6, end - at - 6);
    at = end;
    if (data == "[DONE]") {
      ++t.done;
      continue;
    }
    const json j = json::parse(data);
    if (j.contains("error")) {
      t.errors.push_back(j["error"]);
      continue;
    }
    t.ids.insert(j["id"].get<std::string>());
    t.models.insert(j["model"].get<std::string>());
    t.created.insert(j["created"].get<std::int64_t>());
    for (const auto& c : j["choices"]) {
      const json& d = c["delta"];
      if (d.contains("role")) ++t.role_chunks;
      if (d.contains("content") && d["content"].is_string()) t.text += d["content"];
      if (d.contains("reasoning_content")) t.reasoning += d["reasoning_content"];
      if (c.contains("finish_reason") && c["finish_reason"].is_string())
        t.finish = c["finish_reason"];
    }
  }
  return t;
}

class ContinuationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    sim::SimOptions o;
    o.profiles["whole"] = whole();
    sim::Profile p = whole();
    p.cut_after_tokens = kBreakAt;
    o.profiles["cut"] = p;
    p = whole();
    p.stall_after_tokens = kBreakAt;
    p.stall_ms = 60000;
    o.profiles["stall"] = p;
    p = whole();
    p.malformed_after_tokens = kBreakAt;
    o.profiles["malformed"] = p;
    p = whole();
    p.error_after_tokens = kBreakAt;
    o.profiles["error"] = p;
    p = whole();
    p.refuse_prefill = true;
    o.profiles["refuse"] = p;
    p = whole();
    p.tps = {sim::Distribution::Kind::kFixed, 2, 0};  // a fast first word, then a crawl
    o.profiles["crawl"] = p;
    p = whole();
    p.output = sim::Profile::Output::kToolCall;
    p.cut_after_tokens = 3;
    o.profiles["tool"] = p;
    p = whole();
    p.reasoning_tokens = 4;
    p.cut_after_tokens = 2;  // during the reasoning: the client has no text yet
    o.profiles["think"] = p;
    sim_ = std::make_unique<sim::SimServer>(o);
    const std::string port = std::to_string(sim_->start());
    std::string models;
    // Each fault, continued each way.
    for (const char* fault : {"cut", "stall", "malformed", "error"}) {
      for (const auto& [way, provider] :
           std::vector<std::pair<std::string, std::string>>{{"prefix", "o"},
                                                            {"continue_final_message", "o"},
                                                            {"prefill", "a"},
                                                            {"prefill", "g"}}) {
        models += "  - {name: " + std::string(fault) + "-" + way + "-" + provider +
                  ", deployments: [{provider: o, model: " + fault + "}, {provider: " + provider +
                  ", model: whole, continuation: " + way + "}]}\n";
      }
    }
    models += R"(  - {name: reference, deployments: [{provider: o, model: whole}]}
  - {name: anthropic-cut, deployments: [{provider: a, model: cut}, {provider: o, model: whole, continuation: prefix}]}
  - {name: gemini-cut, deployments: [{provider: g, model: cut}, {provider: a, model: whole, continuation: prefill}]}
  - {name: refused-then-continued, deployments: [{provider: o, model: cut}, {provider: a, model: refuse, continuation: prefill}, {provider: o, model: whole, continuation: prefix}]}
  - {name: refused-only, deployments: [{provider: o, model: cut}, {provider: a, model: refuse, continuation: prefill}]}
  - {name: tool-cut, deployments: [{provider: o, model: tool}, {provider: o, model: whole, continuation: prefix}]}
  - {name: reasoning-cut, deployments: [{provider: o, model: think}, {provider: o, model: whole, continuation: prefix}]}
  - {name: not-configured, deployments: [{provider: o, model: cut}, {provider: o, model: whole}]}
  - name: crawling-continuer
    routing: {commit_after: {tokens: 4, within: 300ms}}
    deployments: [{provider: o, model: cut}, {provider: o, model: crawl, continuation: prefix}, {provider: o, model: whole, continuation: prefix}]
)";
    const std::string yaml = R"(
routing: {exploration: 0, defaults: {policy: ordered, max_attempts: 3}}
server: {listeners: [{address: 127.0.0.1, port: 0}], workers: 1}
timeouts: {connect: 1s, ttft: 2s, idle: 400ms, total: 20s}
providers:
  - {name: o, base_url: "http://127.0.0.1:)" +
                             port + R"(/v1"}
  - {name: a, protocol: anthropic, base_url: "http://127.0.0.1:)" +
                             port + R"(/v1"}
  - {name: g, protocol: gemini, base_url: "http://127.0.0.1:)" +
                             port + R"(/v1beta"}
models:
)" + models;
    gw_ = std::make_unique<gateway::Gateway>(config::parse_config(yaml, "continuation.yaml"));
    port_ = gw_->start().at(0);
  }
  void TearDown() override {
    gw_.reset();
    sim_.reset();
  }

  testing::HttpResponse stream(const std::string& model, const std::string& extra = "") {
    HttpClient c(port_);
    return c.request("POST", "/v1/chat/completions",
                     R"({"model":")" + model +
                         R"(","stream":true,"messages":[{"role":"user","content":"Say hello"}])" +
                         extra + "}");
  }
  std::string unbroken() {
    const auto r = stream("reference");
    EXPECT_EQ(r.status, 200);
    return read_stream(r.body).text;
  }
  // llmgate_stream_continuations_total for a stream of `model` broken on
  // `deployment` reaches 1 (counted as the request concludes, just after
  // the client's last byte).
  bool counted(const std::string& model, const std::string& deployment, const std::string& result) {
    return testing::eventually([&] {
      HttpClient c(port_);
      return testing::metric_value(c.request("GET", "/metrics").body,
                                   "llmgate_stream_continuations_total",
                                   "deployment=\"" + deployment + "\",model=\"" + model +
                                       "\",result=\"" + result + "\"") == 1;
    });
  }

  std::unique_ptr<sim::SimServer> sim_;
  std::unique_ptr<gateway::Gateway> gw_;
  std::uint16_t port_ = 0;
};

TEST_F(ContinuationTest, EveryBreakAfterTheFirstTokenIsContinuedEachWayToTheUnbrokenAnswer) {
  const std::string answer = unbroken();
  ASSERT_FALSE(answer.empty());
  for (const char* fault : {"cut", "stall", "malformed", "error"}) {
    for (const char* way : {"prefix-o", "continue_final_message-o", "prefill-a", "prefill-g"}) {
      const std::string model = std::string(fault) + "-" + way;
      SCOPED_TRACE(model);
      const auto r = stream(model);
      ASSERT_EQ(r.status, 200);
      const Told t = read_stream(r.body);
      EXPECT_EQ(t.text, answer) << "no text repeated or lost";
      EXPECT_TRUE(t.errors.empty()) << r.body;
      EXPECT_EQ(t.done, 1);
      EXPECT_EQ(t.finish, "stop");
      EXPECT_EQ(t.role_chunks, 1);  // the continuation's own was dropped
      // One answer: the first deployment's id, model and created throughout.
      EXPECT_EQ(t.ids.size(), 1u);
      EXPECT_EQ(t.models, std::set<std::string>{fault});
      EXPECT_EQ(t.created.size(), 1u);
      EXPECT_EQ(r.header("x-llmgate-deployment"), "o/" + std::string(fault));
      const std::string continued = r.trailers.count("x-llmgate-continued")
                                        ? r.trailers.at("x-llmgate-continued")
                                        : std::string();
      const std::string provider(1, model.back());
      EXPECT_EQ(continued.rfind(provider + "/whole; broken=o/" + fault, 0), 0u) << continued;
      EXPECT_NE(continued.find("after_chunks=" + std::to_string(kBreakAt)), std::string::npos)
          << continued;
      EXPECT_TRUE(counted(model, "o/" + std::string(fault), "continued"));
    }
  }
}

TEST_F(ContinuationTest, AStreamBrokenInAnotherProtocolIsContinuedTheSame) {
  const std::string answer = unbroken();
  for (const char* model : {"anthropic-cut", "gemini-cut"}) {
    SCOPED_TRACE(model);
    const auto r = stream(model);
    const Told t = read_stream(r.body);
    EXPECT_EQ(t.text, answer);
    EXPECT_TRUE(t.errors.empty()) << r.body;
    EXPECT_EQ(t.done, 1);
    EXPECT_EQ(t.ids.size(), 1u);
  }
}

TEST_F(ContinuationTest, ADeploymentThatRefusesPrefillIsPassedForTheNext) {
  const auto r = stream("refused-then-continued");
  const Told t = read_stream(r.body);
  EXPECT_EQ(t.text, unbroken());
  EXPECT_TRUE(t.errors.empty()) << r.body;
  EXPECT_EQ(t.done, 1);
  ASSERT_EQ(r.trailers.count("x-llmgate-continued"), 1u);
  EXPECT_EQ(r.trailers.at("x-llmgate-continued").rfind("o/whole;", 0), 0u);
}

TEST_F(ContinuationTest, WhenNoneContinuesTheClientGetsTheBreaksErrorNotTheRefusal) {
  const auto r = stream("refused-only");
  ASSERT_EQ(r.status, 200);
  const Told t = read_stream(r.body);
  EXPECT_EQ(t.done, 0);
  ASSERT_EQ(t.errors.size(), 1u) << r.body;
  EXPECT_EQ(t.errors[0]["code"], "upstream_stream_truncated");  // the cut's, not the 400
  EXPECT_EQ(t.text, unbroken().substr(0, t.text.size()));
  EXPECT_TRUE(counted("refused-only", "o/cut", "failed"));
}

TEST_F(ContinuationTest, AToolCallCutMidArgumentsIsNeverContinued) {
  const auto r = stream("tool-cut");
  const Told t = read_stream(r.body);
  EXPECT_EQ(t.done, 0);
  ASSERT_EQ(t.errors.size(), 1u) << r.body;
  EXPECT_EQ(t.errors[0]["code"], "upstream_stream_truncated");
  EXPECT_EQ(sim_->stats().requests, 1u) << "no deployment was asked to continue a tool call";
  EXPECT_TRUE(counted("tool-cut", "o/tool", "not_continuable"));
}

TEST_F(ContinuationTest, StructuredOutputIsNeverContinued) {
  const auto r = stream("cut-prefix-o", R"(,"response_format":{"type":"json_object"})");
  const Told t = read_stream(r.body);
  EXPECT_EQ(t.done, 0);
  ASSERT_EQ(t.errors.size(), 1u) << r.body;
  EXPECT_EQ(sim_->stats().requests, 1u);
}

TEST_F(ContinuationTest, ABreakDuringReasoningIsAnsweredAnewAfterIt) {
  const auto r = stream("reasoning-cut");
  const Told t = read_stream(r.body);
  EXPECT_TRUE(t.errors.empty()) << r.body;
  EXPECT_EQ(t.done, 1);
  EXPECT_FALSE(t.reasoning.empty());  // what the client saw of the first
  EXPECT_EQ(t.text, unbroken());      // the answer, whole, from the second
}

TEST_F(ContinuationTest, WithoutContinuationConfiguredABreakEndsAsBefore) {
  const auto r = stream("not-configured");
  const Told t = read_stream(r.body);
  EXPECT_EQ(t.done, 0);
  ASSERT_EQ(t.errors.size(), 1u);
  EXPECT_EQ(t.errors[0]["code"], "upstream_stream_truncated");
  EXPECT_EQ(r.header("trailer"), "x-llmgate-output-tokens, x-llmgate-tps");
  EXPECT_EQ(r.trailers.count("x-llmgate-continued"), 0u);
}

TEST_F(ContinuationTest, AContinuerGivenUpBeforeItsCommitLeavesNoWordOfItsOwnBehind) {
  // The first continuer sends a word, then crawls: the speed guard gives it
  // up before its commit. The next is asked to continue what the client
  // has -- not the word it never got.
  const auto r = stream("crawling-continuer");
  const Told t = read_stream(r.body);
  EXPECT_EQ(t.text, unbroken());
  EXPECT_TRUE(t.errors.empty()) << r.body;
  EXPECT_EQ(t.done, 1);
  ASSERT_EQ(r.trailers.count("x-llmgate-continued"), 1u);
  EXPECT_EQ(r.trailers.at("x-llmgate-continued").rfind("o/whole; broken=o/cut", 0), 0u)
      << r.trailers.at("x-llmgate-continued");
}

}  // namespace
}  // namespace llmgate
