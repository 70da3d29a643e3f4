// The OpenAI API beyond chat through the gateway: POST /v1/responses (typed
// events held until the first output delta, failover before it, an error
// event and never response.completed after it, conversations pinned to the
// provider that stored them), /v1/embeddings (failover, base64 untouched)
// and /v1/completions (legacy), each against llmgate-sim.
#include <gtest/gtest.h>

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "config/config.h"
#include "gateway/access/auth.h"
#include "gateway/server/gateway.h"
#include "tests/support/http_client.h"
#include "tests/support/sim_profiles.h"
#include "tools/sim/sim_server.h"

namespace llmgate {
namespace {

using testing::HttpClient;
using json = nlohmann::json;

// The events of a Responses stream: their types in order.
std::vector<std::string> types_of(const std::vector<std::string>& events) {
  std::vector<std::string> out;
  for (const auto& e : events) {
    auto j = json::parse(e, nullptr, false);
    out.push_back(j.is_object() ? j.value("type", std::string("?")) : e);
  }
  return out;
}

std::string text_of(const std::vector<std::string>& events) {
  std::string text;
  for (const auto& e : events) {
    auto j = json::parse(e, nullptr, false);
    if (j.is_object() && j.value("type", "") == "response.output_text.delta")
      text += j["delta"].get<std::string>();
  }
  return text;
}

class OpenAiApisTest : public ::testing::Test {
 protected:
  void TearDown() override {
    gw_.reset();
    a_.reset();
    b_.reset();
  }

  // `server_extra`: keys added to the server section (", limits: {...}");
  // `extra_yaml`: top-level sections appended (auth:).
  void start(const sim::Profile& a, const sim::Profile& b, const std::string& server_extra = "",
             const std::string& extra_yaml = "") {
    sim::SimOptions oa, ob;
    oa.profiles["m"] = a;
    oa.profiles["e"] = a;
    ob.profiles["m"] = b;
    ob.profiles["e"] = b;
    a_ = std::make_unique<sim::SimServer>(oa);
    b_ = std::make_unique<sim::SimServer>(ob);
    const auto pa = a_->start(), pb = b_->start();
    const std::string yaml = R"(
routing: {exploration: 0, defaults: {policy: ordered}}
server: {listeners: [{address: 127.0.0.1, port: 0}], workers: 1)" +
                             server_extra + R"(}
timeouts: {connect: 1s, ttft: 300ms, idle: 2s, total: 20s}
providers:
  - {name: a, base_url: "http://127.0.0.1:)" +
                             std::to_string(pa) + R"(/v1"}
  - {name: b, base_url: "http://127.0.0.1:)" +
                             std::to_string(pb) + R"(/v1"}
models:
  - name: gpt
    deployments:
      - {provider: a, model: m, operations: [chat, responses, completions]}
      - {provider: b, model: m, operations: [chat, responses, completions]}
  - name: only-a
    deployments: [{provider: a, model: m, operations: [responses]}]
  - name: emb
    deployments:
      - {provider: a, model: e, operations: [embeddings]}
      - {provider: b, model: e, operations: [embeddings]}
)" + extra_yaml;
    gw_ = std::make_unique<gateway::Gateway>(config::parse_config(yaml, "apis.yaml"));
    port_ = gw_->start().at(0);
  }

  std::unique_ptr<sim::SimServer> a_, b_;
  std::unique_ptr<gateway::Gateway> gw_;
  std::uint16_t port_ = 0;
};

sim::Profile stalls() {
  sim::Profile p = testing::quick_profile();
  p.stall_before_first_token_ms = 5000;
  return p;
}

TEST_F(OpenAiApisTest, AResponsesStreamIsTheUpstreamsTypedEventsEndingWithCompleted) {
  start(testing::quick_profile(6), testing::quick_profile());
  HttpClient c(port_);
  auto head = c.start("POST", "/v1/responses", R"({"model":"gpt","input":"hi","stream":true})");
  ASSERT_EQ(head.status, 200);
  EXPECT_EQ(head.header("x-llmgate-deployment"), "a/m");
  EXPECT_FALSE(head.header("x-llmgate-ttft-ms").empty());
  const auto events = c.rest_of_events();
  const auto types = types_of(events);
  ASSERT_GE(types.size(), 4u);
  EXPECT_EQ(types.front(), "response.created");
  EXPECT_EQ(types[1], "response.in_progress");
  EXPECT_EQ(types.back(), "response.completed");
  for (const auto& t : types) EXPECT_NE(t, "[DONE]");
  EXPECT_EQ(text_of(events), " lorem ipsum dolor sit amet, consectetur");
  // Usage came from response.completed.
  HttpClient m(port_);
  EXPECT_NE(m.request("GET", "/metrics").body.find(R"(llmgate_tokens_total{type="output"} 6)"),
            std::string::npos);
}

// A deployment asked for JSON (`stream: false`, set or learnt) still gives a
// stream client the whole typed sequence, numbered, as a stream would have:
// the SDKs' stream readers require response.created first and build the
// answer from the deltas and the items' events.
TEST_F(OpenAiApisTest, AResponsesStreamFromADeploymentAnsweringJsonIsTheWholeTypedSequence) {
  sim::Profile tools = testing::quick_profile(6);
  tools.output = sim::Profile::Output::kToolCall;
  start(testing::quick_profile(6), tools, "",
        "  - name: json-only\n"
        "    deployments: [{provider: a, model: m, operations: [responses], stream: false}]\n"
        "  - name: json-tools\n"
        "    deployments: [{provider: b, model: m, operations: [responses], stream: false}]\n");
  HttpClient c(port_);
  auto head =
      c.start("POST", "/v1/responses", R"({"model":"json-only","input":"hi","stream":true})");
  ASSERT_EQ(head.status, 200) << head.body;
  EXPECT_EQ(head.header("content-type"), "text/event-stream");
  const auto events = c.rest_of_events();
  const std::vector<std::string> want = {
      "response.created",           "response.in_progress",
      "response.output_item.added", "response.content_part.added",
      "response.output_text.delta", "response.output_text.done",
      "response.content_part.done", "response.output_item.done",
      "response.completed"};
  EXPECT_EQ(types_of(events), want);
  EXPECT_EQ(text_of(events), " lorem ipsum dolor sit amet, consectetur");
  for (std::size_t i = 0; i < events.size(); ++i)
    EXPECT_EQ(json::parse(events[i])["sequence_number"], i) << events[i];

  HttpClient t(port_);
  auto tool_head =
      t.start("POST", "/v1/responses", R"({"model":"json-tools","input":"hi","stream":true})");
  ASSERT_EQ(tool_head.status, 200) << tool_head.body;
  const auto tool_events = t.rest_of_events();
  const auto types = types_of(tool_events);
  ASSERT_FALSE(types.empty());
  EXPECT_EQ(types.front(), "response.created");
  EXPECT_EQ(types.back(), "response.completed");
  std::string arguments;
  for (const auto& e : tool_events) {
    auto j = json::parse(e);
    if (j["type"] == "response.function_call_arguments.delta") arguments += j["delta"];
  }
  EXPECT_FALSE(arguments.empty()) << "the function call's arguments were never streamed";
  EXPECT_TRUE(json::parse(arguments, nullptr, false).is_object()) << arguments;
}

TEST_F(OpenAiApisTest, ANonStreamedResponseIsTheResponseObject) {
  start(testing::quick_profile(4), testing::quick_profile());
  HttpClient c(port_);
  auto r = c.request("POST", "/v1/responses", R"({"model":"gpt","input":"hi"})");
  ASSERT_EQ(r.status, 200) << r.body;
  auto j = json::parse(r.body);
  EXPECT_EQ(j["object"], "response");
  EXPECT_EQ(j["status"], "completed");
  EXPECT_EQ(j["usage"]["output_tokens"], 4);
  EXPECT_EQ(j["output"].back()["content"][0]["text"], " lorem ipsum dolor sit");
}

TEST_F(OpenAiApisTest, AResponsesFailoverBeforeTheFirstDeltaIsInvisible) {
  start(stalls(), testing::quick_profile());
  HttpClient c(port_);
  auto head = c.start("POST", "/v1/responses", R"({"model":"gpt","input":"hi","stream":true})");
  ASSERT_EQ(head.status, 200);
  EXPECT_EQ(head.header("x-llmgate-attempts"), "2");
  EXPECT_EQ(head.header("x-llmgate-deployment"), "b/m");
  const auto types = types_of(c.rest_of_events());
  // a's response.created and in_progress were held, then dropped: the client
  // sees one response, b's.
  EXPECT_EQ(std::count(types.begin(), types.end(), "response.created"), 1);
  EXPECT_EQ(types.back(), "response.completed");
}

TEST_F(OpenAiApisTest, AnErrorEventBeforeTheFirstDeltaFailsOver) {
  sim::Profile broken = testing::quick_profile();
  broken.error_after_tokens = 0;
  start(broken, testing::quick_profile());
  HttpClient c(port_);
  auto head = c.start("POST", "/v1/responses", R"({"model":"gpt","input":"hi","stream":true})");
  ASSERT_EQ(head.status, 200);
  EXPECT_EQ(head.header("x-llmgate-deployment"), "b/m");
  const auto types = types_of(c.rest_of_events());
  EXPECT_EQ(std::count(types.begin(), types.end(), "error"), 0);
  EXPECT_EQ(types.back(), "response.completed");
}

TEST_F(OpenAiApisTest, ACutAfterTheFirstDeltaEndsWithAnErrorEventNeverCompleted) {
  sim::Profile cut = testing::quick_profile(8);
  cut.cut_after_tokens = 3;
  start(cut, testing::quick_profile());
  HttpClient c(port_);
  auto head = c.start("POST", "/v1/responses", R"({"model":"only-a","input":"hi","stream":true})");
  ASSERT_EQ(head.status, 200);
  const auto events = c.rest_of_events();
  const auto types = types_of(events);
  ASSERT_FALSE(types.empty());
  EXPECT_EQ(types.back(), "error");
  EXPECT_EQ(std::count(types.begin(), types.end(), "response.completed"), 0);
  auto last = json::parse(events.back());
  EXPECT_TRUE(last.contains("error"));  // the SDKs raise on it
  EXPECT_NE(c.raw_body().find("event: error"), std::string::npos);
}

TEST_F(OpenAiApisTest, APreviousResponseIdPinsTheConversationToItsProvider) {
  start(testing::quick_profile(), testing::quick_profile());
  HttpClient c(port_);
  auto first = c.request("POST", "/v1/responses", R"({"model":"gpt","input":"hi"})");
  ASSERT_EQ(first.status, 200);
  ASSERT_EQ(first.header("x-llmgate-deployment"), "a/m");
  const std::string id = json::parse(first.body)["id"];
  // a now fails every request: the continuation must not go to b, which
  // cannot know the id.
  sim::Profile down = testing::quick_profile();
  down.error_rate = 1;
  down.error_status = 500;
  a_->set_profile("m", down);
  auto next = c.request("POST", "/v1/responses",
                        R"({"model":"gpt","input":"more","previous_response_id":")" + id + R"("})");
  EXPECT_NE(next.status, 200) << next.body;
  EXPECT_NE(next.header("x-llmgate-route")
                .find("b/m=skip(previous_response_id is stored at "
                      "provider a)"),
            std::string::npos)
      << next.header("x-llmgate-route");
  EXPECT_EQ(b_->stats().requests, 0u);
  // Unknown to this gateway (another replica, a restart): routed as usual.
  auto unknown = c.request("POST", "/v1/responses",
                           R"({"model":"gpt","input":"x","previous_response_id":"resp_other"})");
  EXPECT_EQ(unknown.status, 200) << unknown.body;
  EXPECT_EQ(unknown.header("x-llmgate-deployment"), "b/m");
}

TEST_F(OpenAiApisTest, AStoredResponseIsReadListedAndDeletedAtTheProviderThatCreatedIt) {
  start(stalls(), testing::quick_profile(4));
  HttpClient c(port_);
  auto created = c.request("POST", "/v1/responses", R"({"model":"gpt","input":"hello there"})");
  ASSERT_EQ(created.status, 200) << created.body;
  ASSERT_EQ(created.header("x-llmgate-deployment"), "b/m");  // a missed its first-token deadline
  const std::string id = json::parse(created.body)["id"];
  const auto a_requests = a_->stats().requests;

  auto got = c.request("GET", "/v1/responses/" + id);
  ASSERT_EQ(got.status, 200) << got.body;
  auto r = json::parse(got.body);
  EXPECT_EQ(r["id"], id);
  EXPECT_EQ(r["status"], "completed");
  EXPECT_NE(got.header("x-llmgate-route").find("pinned to provider b"), std::string::npos)
      << got.header("x-llmgate-route");
  // Its events again, relayed as they come.
  auto head = c.start("GET", "/v1/responses/" + id + "?stream=true", "");
  ASSERT_EQ(head.status, 200);
  EXPECT_EQ(head.header("content-type"), "text/event-stream");
  const auto types = types_of(c.rest_of_events());
  ASSERT_FALSE(types.empty());
  EXPECT_EQ(types.front(), "response.created");
  EXPECT_EQ(types.back(), "response.completed");

  auto items = c.request("GET", "/v1/responses/" + id + "/input_items?limit=10");
  ASSERT_EQ(items.status, 200) << items.body;
  auto list = json::parse(items.body);
  ASSERT_EQ(list["data"].size(), 1u);
  EXPECT_EQ(list["data"][0]["content"][0]["text"], "hello there");
  // Only a background response can be cancelled: the provider's 400, passed on.
  EXPECT_EQ(c.request("POST", "/v1/responses/" + id + "/cancel").status, 400);
  EXPECT_EQ(a_->stats().requests, a_requests);  // nothing went to a

  auto deleted = c.request("DELETE", "/v1/responses/" + id);
  ASSERT_EQ(deleted.status, 200) << deleted.body;
  EXPECT_EQ(json::parse(deleted.body)["deleted"], true);
  auto gone = c.request("GET", "/v1/responses/" + id);
  EXPECT_EQ(gone.status, 404);
  EXPECT_EQ(json::parse(gone.body)["error"]["code"], "response_not_found");
  auto unknown = c.request("GET", "/v1/responses/resp_never_seen");
  EXPECT_EQ(unknown.status, 404);
  EXPECT_EQ(json::parse(unknown.body)["error"]["code"], "response_not_found");
  auto put = c.request("PUT", "/v1/responses/" + id);
  EXPECT_EQ(put.status, 405);
  EXPECT_EQ(put.header("allow"), "GET, DELETE");
}

TEST_F(OpenAiApisTest, AStoredResponseIsItsKeysAloneAndCountsAgainstItsRate) {
  start(testing::quick_profile(), testing::quick_profile(), "",
        "auth:\n  keys:\n    - {name: tenant-a, sha256: " + gateway::sha256_hex("sk-a") +
            ", requests_per_minute: 4}\n    - {name: tenant-b, sha256: " +
            gateway::sha256_hex("sk-b") + "}\n");
  const std::map<std::string, std::string> a{{"content-type", "application/json"},
                                             {"authorization", "Bearer sk-a"}};
  const std::map<std::string, std::string> b{{"content-type", "application/json"},
                                             {"authorization", "Bearer sk-b"}};
  HttpClient c(port_);
  auto created = c.request("POST", "/v1/responses", R"({"model":"gpt","input":"mine"})", a);
  ASSERT_EQ(created.status, 200) << created.body;
  const std::string id = json::parse(created.body)["id"];
  // Another key: as if the id did not exist, to read and to continue.
  EXPECT_EQ(c.request("GET", "/v1/responses/" + id, "", b).status, 404);
  EXPECT_EQ(c.request("DELETE", "/v1/responses/" + id, "", b).status, 404);
  auto next =
      c.request("POST", "/v1/responses",
                R"({"model":"gpt","input":"theirs","previous_response_id":")" + id + R"("})", b);
  EXPECT_EQ(next.status, 404) << next.body;
  EXPECT_EQ(json::parse(next.body)["error"]["code"], "response_not_found");
  // Its own key reads it, with only the query parameters the API defines
  // passed on; and each read counts against the key's request rate.
  auto got = c.request("GET", "/v1/responses/" + id + "/input_items?api-version=x&limit=5", "", a);
  EXPECT_EQ(got.status, 200) << got.body;
  const auto recorded = b_->last_request().value_or(sim::RecordedRequest{}).target +
                        a_->last_request().value_or(sim::RecordedRequest{}).target;
  EXPECT_NE(recorded.find("/input_items?limit=5"), std::string::npos) << recorded;
  EXPECT_EQ(recorded.find("api-version"), std::string::npos) << recorded;
  EXPECT_EQ(c.request("GET", "/v1/responses/" + id, "", a).status, 200);
  EXPECT_EQ(c.request("GET", "/v1/responses/" + id, "", a).status, 200);
  EXPECT_EQ(c.request("GET", "/v1/responses/" + id, "", a).status, 429);  // the 5th this minute
}

TEST_F(OpenAiApisTest, ABackgroundResponseIsQueuedThenPolledAndCancelledAtItsProvider) {
  sim::Profile slow = testing::quick_profile(4);
  slow.ttft = {sim::Distribution::Kind::kFixed, 60'000, 0};  // still running when polled
  start(slow, testing::quick_profile());
  HttpClient c(port_);
  auto created =
      c.request("POST", "/v1/responses", R"({"model":"gpt","input":"long job","background":true})");
  ASSERT_EQ(created.status, 200) << created.body;
  auto r = json::parse(created.body);
  EXPECT_EQ(r["status"], "queued");
  EXPECT_EQ(created.header("x-llmgate-deployment"), "a/m");
  const std::string id = r["id"];
  auto polled = c.request("GET", "/v1/responses/" + id);
  ASSERT_EQ(polled.status, 200) << polled.body;
  EXPECT_EQ(json::parse(polled.body)["status"], "in_progress");
  auto cancelled = c.request("POST", "/v1/responses/" + id + "/cancel");
  ASSERT_EQ(cancelled.status, 200) << cancelled.body;
  EXPECT_EQ(json::parse(cancelled.body)["status"], "cancelled");
  EXPECT_EQ(json::parse(c.request("GET", "/v1/responses/" + id).body)["status"], "cancelled");
  EXPECT_EQ(b_->stats().requests, 0u);
}

TEST_F(OpenAiApisTest, EmbeddingsFailOverAndPassBase64Untouched) {
  sim::Profile down = testing::quick_profile();
  down.error_rate = 1;
  down.error_status = 503;
  start(down, testing::quick_profile());
  HttpClient c(port_);
  const std::string req = R"({"model":"emb","input":["alpha","beta"],"encoding_format":"base64"})";
  auto r = c.request("POST", "/v1/embeddings", req);
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.header("x-llmgate-deployment"), "b/e");
  EXPECT_EQ(r.header("x-llmgate-attempts"), "2");
  // Byte for byte what the provider answered.
  HttpClient direct(b_->port());
  auto d = direct.request("POST", "/v1/embeddings",
                          R"({"model":"e","input":["alpha","beta"],"encoding_format":"base64"})");
  EXPECT_EQ(r.body, d.body);
  auto j = json::parse(r.body);
  ASSERT_EQ(j["data"].size(), 2u);
  EXPECT_TRUE(j["data"][0]["embedding"].is_string());
  // Never streamed.
  auto s = c.request("POST", "/v1/embeddings", R"({"model":"emb","input":"a","stream":true})");
  EXPECT_EQ(s.status, 400);
}

TEST_F(OpenAiApisTest, AnEmbeddingsBatchHasItsOwnBodyLimit) {
  start(testing::quick_profile(), testing::quick_profile(),
        ", limits: {max_body_size: 2KiB, max_embeddings_body_size: 64KiB}");
  json inputs = json::array();
  for (int i = 0; i < 200; ++i) inputs.push_back("input number " + std::to_string(i));
  const std::string batch = json{{"model", "emb"}, {"input", inputs}}.dump();
  ASSERT_GT(batch.size(), 2048u);
  HttpClient c(port_);
  auto r = c.request("POST", "/v1/embeddings", batch);
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(json::parse(r.body)["data"].size(), 200u);
  // The same size is too large for chat, and a batch over its own limit is a 413 too.
  json messages = json::array({{{"role", "user"}, {"content", std::string(4096, 'x')}}});
  HttpClient c2(port_);
  auto chat = c2.request("POST", "/v1/chat/completions",
                         json{{"model", "gpt"}, {"messages", messages}}.dump());
  EXPECT_EQ(chat.status, 413);
  EXPECT_NE(chat.body.find("max_body_size"), std::string::npos) << chat.body;
  HttpClient c3(port_);
  auto huge = c3.request("POST", "/v1/embeddings",
                         json{{"model", "emb"}, {"input", std::string(70'000, 'x')}}.dump());
  EXPECT_EQ(huge.status, 413);
  EXPECT_NE(huge.body.find("max_embeddings_body_size"), std::string::npos) << huge.body;
}

TEST_F(OpenAiApisTest, LegacyCompletionsStreamAndAssembleTheText) {
  start(stalls(), testing::quick_profile(5));
  HttpClient c(port_);
  auto r = c.request("POST", "/v1/completions", R"({"model":"gpt","prompt":"hi"})");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.header("x-llmgate-deployment"), "b/m");  // a missed its first-token deadline
  auto j = json::parse(r.body);
  EXPECT_EQ(j["object"], "text_completion");
  EXPECT_EQ(j["choices"][0]["text"], " lorem ipsum dolor sit amet,");
  EXPECT_EQ(j["choices"][0]["finish_reason"], "stop");
  EXPECT_EQ(j["usage"]["completion_tokens"], 5);

  auto head = c.start("POST", "/v1/completions", R"({"model":"gpt","prompt":"hi","stream":true})");
  ASSERT_EQ(head.status, 200);
  std::string text;
  bool done = false;
  for (const auto& e : c.rest_of_events()) {
    if (e == "[DONE]") {
      done = true;
      continue;
    }
    text += json::parse(e)["choices"][0]["text"].get<std::string>();
  }
  EXPECT_TRUE(done);
  EXPECT_EQ(text, " lorem ipsum dolor sit amet,");
}

TEST_F(OpenAiApisTest, AModelNotServedAtAnEndpointIsAClear400) {
  start(testing::quick_profile(), testing::quick_profile());
  HttpClient c(port_);
  auto r = c.request("POST", "/v1/embeddings", R"({"model":"gpt","input":"a"})");
  EXPECT_EQ(r.status, 400);
  auto j = json::parse(r.body);
  EXPECT_EQ(j["error"]["code"], "unsupported_operation");
  EXPECT_NE(j["error"]["message"].get<std::string>().find("/v1/embeddings"), std::string::npos);
  auto missing = c.request("POST", "/v1/responses", R"({"model":"gpt"})");
  EXPECT_EQ(missing.status, 400);
  EXPECT_EQ(json::parse(missing.body)["error"]["param"], "input");
  EXPECT_EQ(a_->stats().requests + b_->stats().requests, 0u);
}

}  // namespace
}  // namespace llmgate
