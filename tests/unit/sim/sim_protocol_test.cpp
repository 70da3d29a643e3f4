#include "tools/sim/sim_protocol.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace llmgate::sim {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;
using ::testing::StartsWith;

ChatRequest parse_ok(std::string_view body) {
  auto r = parse_chat_request(body);
  if (auto* e = std::get_if<ApiError>(&r)) ADD_FAILURE() << "unexpected error: " << e->message;
  return std::get_if<ChatRequest>(&r) ? std::get<ChatRequest>(r) : ChatRequest{};
}

ApiError parse_fails(std::string_view body) {
  auto r = parse_chat_request(body);
  if (!std::get_if<ApiError>(&r)) {
    ADD_FAILURE() << "expected an error for " << body;
    return {};
  }
  return std::get<ApiError>(r);
}

// The JSON payload of one "data: ...\n\n" event.
json event_json(const std::string& event) {
  EXPECT_THAT(event, StartsWith("data: "));
  EXPECT_EQ(event.substr(event.size() - 2), "\n\n");
  return json::parse(event.substr(6, event.size() - 8));
}

TEST(SimChatRequest, ReadsTheFieldsTheSimulatorUses) {
  const ChatRequest r =
      parse_ok(R"({"model":"gpt-x","messages":[{"role":"user","content":"12345678"}],
      "stream":true,"stream_options":{"include_usage":true},"max_tokens":50,
      "max_completion_tokens":20,"temperature":0.2})");
  EXPECT_EQ(r.model, "gpt-x");
  EXPECT_TRUE(r.stream);
  EXPECT_TRUE(r.include_usage);
  EXPECT_EQ(r.max_tokens, 20);  // the smaller of the two caps
  EXPECT_EQ(r.prompt_tokens, 2);
}

TEST(SimChatRequest, DefaultsToNonStreamingWithoutCap) {
  const ChatRequest r = parse_ok(R"({"model":"m","messages":[{"role":"user","content":"hi"}],
                                     "stream":null,"max_tokens":null})");
  EXPECT_FALSE(r.stream);
  EXPECT_FALSE(r.include_usage);
  EXPECT_FALSE(r.max_tokens);
}

TEST(SimChatRequest, BadRequestsGetOpenAIShapedErrorsNamingTheParam) {
  EXPECT_EQ(parse_fails("{not json").status, 400);
  EXPECT_EQ(parse_fails("[1,2]").status, 400);
  EXPECT_EQ(parse_fails(R"({"messages":[{"role":"user","content":"x"}]})").param, "model");
  EXPECT_EQ(parse_fails(R"({"model":7,"messages":[{"role":"user","content":"x"}]})").param,
            "model");
  EXPECT_EQ(parse_fails(R"({"model":"m"})").param, "messages");
  EXPECT_EQ(parse_fails(R"({"model":"m","messages":[]})").param, "messages");
  EXPECT_EQ(parse_fails(R"({"model":"m","messages":[{}],"stream":"yes"})").param, "stream");
  EXPECT_EQ(parse_fails(R"({"model":"m","messages":[{}],"max_tokens":0})").param, "max_tokens");
  EXPECT_EQ(parse_fails(R"({"model":"m","messages":[{}],"max_completion_tokens":1.5})").param,
            "max_completion_tokens");
  const ApiError e = parse_fails(R"({"model":"m"})");
  EXPECT_EQ(e.type, "invalid_request_error");
}

TEST(SimChatPlan, MaxTokensCapsTheLengthAndFinishesWithLength) {
  Profile p;
  p.output_tokens_min = p.output_tokens_max = 40;
  ChatRequest r;
  r.max_tokens = 10;
  Rng rng(1);
  const ChatPlan capped = plan_chat(r, p, rng);
  EXPECT_EQ(capped.completion_tokens, 10);
  EXPECT_EQ(capped.finish_reason(), "length");

  r.max_tokens = 40;
  const ChatPlan exact = plan_chat(r, p, rng);
  EXPECT_EQ(exact.completion_tokens, 40);
  EXPECT_EQ(exact.finish_reason(), "stop");
}

TEST(SimChatPlan, FaultRateDecidesPerRequestWhetherFaultsApply) {
  Profile p;
  p.stall_before_first_token_ms = 600000;
  p.fault_rate = 0.25;
  const ChatRequest r;
  Rng rng(5);
  int faulted = 0;
  constexpr int kPlans = 20000;
  for (int i = 0; i < kPlans; ++i) faulted += plan_chat(r, p, rng).faults;
  EXPECT_NEAR(faulted / double(kPlans), 0.25, 0.015);

  p.fault_rate = 1;
  EXPECT_TRUE(plan_chat(r, p, rng).faults);
  p.fault_rate = 0;
  EXPECT_FALSE(plan_chat(r, p, rng).faults);
}

TEST(SimChunkFormatter, EveryEventIsOneCompleteJsonDataLine) {
  const ChunkFormatter f("chatcmpl-sim-7", 1700000000, "gpt-\"q\"", /*include_usage=*/false);
  std::string role, content, finish;
  f.role(role);
  f.content(content, " lorem");
  f.finish(finish, "length");

  const json r = event_json(role);
  EXPECT_EQ(r["id"], "chatcmpl-sim-7");
  EXPECT_EQ(r["object"], "chat.completion.chunk");
  EXPECT_EQ(r["created"], 1700000000);
  EXPECT_EQ(r["model"], "gpt-\"q\"");
  EXPECT_EQ(r["system_fingerprint"], "fp_sim");
  EXPECT_EQ(r["choices"][0]["delta"], json({{"role", "assistant"}, {"content", ""}}));
  EXPECT_TRUE(r["choices"][0]["finish_reason"].is_null());
  EXPECT_FALSE(r.contains("usage"));

  const json c = event_json(content);
  EXPECT_EQ(c["choices"][0]["delta"], json({{"content", " lorem"}}));
  EXPECT_TRUE(c["choices"][0]["logprobs"].is_null());

  const json fin = event_json(finish);
  EXPECT_EQ(fin["choices"][0]["delta"], json::object());
  EXPECT_EQ(fin["choices"][0]["finish_reason"], "length");
}

TEST(SimChunkFormatter, IncludeUsageAddsNullUsageAndAFinalUsageChunk) {
  const ChunkFormatter f("id", 1, "m", /*include_usage=*/true);
  std::string content, usage;
  f.content(content, "x");
  f.usage(usage, 12, 30);
  EXPECT_TRUE(event_json(content)["usage"].is_null());
  const json u = event_json(usage);
  EXPECT_EQ(u["choices"], json::array());
  EXPECT_EQ(u["usage"],
            json({{"prompt_tokens", 12}, {"completion_tokens", 30}, {"total_tokens", 42}}));
}

TEST(SimChunkFormatter, FaultEventsAreNotJson) {
  std::string malformed, truncated, done;
  ChunkFormatter::malformed(malformed);
  ChunkFormatter::truncated(truncated);
  ChunkFormatter::done(done);
  EXPECT_EQ(malformed, "data: {not json\n\n");
  EXPECT_EQ(truncated, "data: {\"id\":\"chatcm");
  EXPECT_EQ(done, "data: [DONE]\n\n");
}

TEST(SimJsonString, EscapesWhatJsonRequires) {
  const std::string raw = "a\"b\\c\nd\te\x01 \xc3\xa9";
  std::string out;
  append_json_string(out, raw);
  EXPECT_EQ(json::parse(out).get<std::string>(), raw);
}

TEST(SimCompletionBody, IsAChatCompletionWithUsage) {
  const json b =
      json::parse(completion_body("chatcmpl-sim-1", 5, "m", " lorem ipsum", "stop", 4, 2));
  EXPECT_EQ(b["object"], "chat.completion");
  EXPECT_EQ(b["choices"][0]["message"]["role"], "assistant");
  EXPECT_EQ(b["choices"][0]["message"]["content"], " lorem ipsum");
  EXPECT_EQ(b["choices"][0]["finish_reason"], "stop");
  EXPECT_EQ(b["usage"]["total_tokens"], 6);
}

TEST(SimAnswer, HiddenReasoningIsSpentButNeverSent) {
  ChatPlan plan;
  plan.completion_tokens = 10;
  plan.reasoning_tokens = 6;
  plan.reasoning_hidden = true;
  const Answer a(plan, "call_1");
  EXPECT_FALSE(a.sent(0));
  EXPECT_FALSE(a.sent(5));
  EXPECT_TRUE(a.sent(6));
  const json b = json::parse(completion_body("id", 1, "o3", a, "stop", 4));
  EXPECT_FALSE(b["choices"][0]["message"].contains("reasoning_content"));
  EXPECT_EQ(b["usage"]["completion_tokens"], 10);
  EXPECT_EQ(b["usage"]["completion_tokens_details"]["reasoning_tokens"], 6);
}

TEST(SimAnswer, StreamedReasoningGoesInTheConfiguredField) {
  ChatPlan plan;
  plan.completion_tokens = 3;
  plan.reasoning_tokens = 1;
  plan.reasoning_field = "reasoning";
  const Answer a(plan, "call_1");
  std::string event;
  ChunkFormatter("id", 1, "m", false).output(event, a, 0);
  EXPECT_TRUE(event_json(event)["choices"][0]["delta"].contains("reasoning"));
  const json b = json::parse(completion_body("id", 1, "m", a, "stop", 4));
  EXPECT_EQ(b["choices"][0]["message"]["reasoning"], " lorem");
}

TEST(SimAnswer, AnnotationsAndCachedTokensAppearStreamedAndNot) {
  ChatPlan plan;
  plan.completion_tokens = 2;
  plan.annotations = true;
  const Answer a(plan, "call_1");
  const ChunkFormatter f("id", 1, "m", true);
  std::string annotations, usage;
  f.annotations(annotations, a);
  f.usage(usage, 40, 2, 0, 32);
  const json ann = event_json(annotations)["choices"][0]["delta"]["annotations"];
  EXPECT_EQ(ann[0]["type"], "url_citation");
  EXPECT_EQ(ann[0]["url_citation"]["end_index"], a.answer_text().size());
  EXPECT_EQ(event_json(usage)["usage"]["prompt_tokens_details"]["cached_tokens"], 32);
  const json b = json::parse(completion_body("id", 1, "m", a, "stop", 40, 32));
  EXPECT_EQ(b["choices"][0]["message"]["annotations"], ann);
  EXPECT_EQ(b["usage"]["prompt_tokens_details"]["cached_tokens"], 32);
}

TEST(SimErrors, AzureAndStreamRefusalsSpeakTheirProvidersShape) {
  const ApiError refused = stream_refused();
  EXPECT_EQ(refused.status, 400);
  EXPECT_EQ(refused.param, "stream");
  std::string azure;
  ChunkFormatter::azure_prompt_filter(azure);
  const json first = event_json(azure);
  EXPECT_EQ(first["choices"], json::array());
  EXPECT_EQ(first["id"], "");
  EXPECT_EQ(first["created"], 0);
  const json err =
      json::parse(error_body(ApiError{404, "Resource not found", "", std::nullopt, "404"}));
  EXPECT_EQ(err, json::parse(R"({"error":{"code":"404","message":"Resource not found"}})"));
}

TEST(SimErrors, InjectedErrorsUseOpenAITypesForTheirStatus) {
  EXPECT_EQ(injected_error(429).type, "rate_limit_error");
  EXPECT_EQ(injected_error(500).type, "server_error");
  EXPECT_EQ(injected_error(503).type, "server_error");
  EXPECT_EQ(injected_error(401).code, "invalid_api_key");
  const json body = json::parse(error_body(injected_error(429)));
  EXPECT_THAT(body["error"]["message"].get<std::string>(), HasSubstr("Rate limit"));
  EXPECT_TRUE(body["error"]["param"].is_null());
  EXPECT_EQ(body["error"]["code"], "rate_limit_exceeded");
}

}  // namespace
}  // namespace llmgate::sim
