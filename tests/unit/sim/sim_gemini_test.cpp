// Gemini generateContent as the simulator speaks it: targets, request
// validation, Google's error bodies, and the responses of GeminiFormatter
// checked against what the OpenAI path says for the same plan.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "tools/sim/sim_protocol.h"

namespace llmgate::sim {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;
using ::testing::StartsWith;

// Splits an alt=sse body into its GenerateContentResponses, checking that
// each is exactly "data: <json>\r\n\r\n".
std::vector<json> sse_events(const std::string& body) {
  std::vector<json> events;
  std::size_t pos = 0;
  for (std::size_t end; (end = body.find("\r\n\r\n", pos)) != std::string::npos; pos = end + 4) {
    const std::string raw = body.substr(pos, end - pos);
    EXPECT_THAT(raw, StartsWith("data: "));
    EXPECT_EQ(raw.find('\n'), std::string::npos) << raw;
    events.push_back(json::parse(raw.substr(6)));
  }
  EXPECT_EQ(pos, body.size()) << "trailing bytes: " << body.substr(pos);
  return events;
}

ChatPlan text_plan(int tokens, int reasoning = 0) {
  ChatPlan plan;
  plan.completion_tokens = tokens;
  plan.reasoning_tokens = reasoning;
  return plan;
}

std::string stream_of(const ChatPlan& plan, bool sse = true, std::int64_t prompt = 10,
                      std::int64_t cached = 0) {
  const Answer a(plan, "call_1");
  GeminiFormatter f("resp-sim-1", "gemini-sim", a, plan.capped, prompt, cached, sse);
  std::string out;
  f.open(out);
  for (int k = 0; k < plan.completion_tokens; ++k) {
    if (a.sent(k)) f.token(out, k);
  }
  for (int i = 0; i < f.tail_events(); ++i) f.tail(out, i);
  return out;
}

// What the OpenAI path streams for the same plan: the content (or the tool
// call's arguments), concatenated.
std::string openai_content(const ChatPlan& plan) {
  const Answer a(plan, "call_1");
  const ChunkFormatter f("id", 1, "m", false);
  std::string text;
  for (int k = a.reasoning; k < a.tokens; ++k) {
    std::string event;
    f.output(event, a, k);
    const json delta = json::parse(event.substr(6))["choices"][0]["delta"];
    if (delta.contains("content")) text += delta["content"].get<std::string>();
    if (delta.contains("tool_calls")) {
      text += delta["tool_calls"][0]["function"]["arguments"].get<std::string>();
    }
  }
  return text;
}

struct Collected {
  std::string thoughts, text;
};

Collected collect(const std::vector<json>& events) {
  Collected c;
  for (const auto& e : events) {
    for (const auto& part : e["candidates"][0]["content"]["parts"]) {
      if (!part.contains("text")) continue;
      (part.value("thought", false) ? c.thoughts : c.text) += part["text"].get<std::string>();
    }
  }
  return c;
}

TEST(SimGeminiTarget, ReadsModelMethodAltAndKey) {
  auto t = parse_gemini_target("/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse");
  ASSERT_TRUE(t);
  EXPECT_EQ(t->model, "gemini-2.5-flash");
  EXPECT_TRUE(t->stream);
  EXPECT_TRUE(t->sse);
  EXPECT_FALSE(t->key);

  t = parse_gemini_target("/gemini/v1/models/org%2Fm%201:generateContent?key=AI%3Dza&x=1");
  ASSERT_TRUE(t);
  EXPECT_EQ(t->model, "org/m 1");
  EXPECT_FALSE(t->stream);
  EXPECT_FALSE(t->sse);
  EXPECT_EQ(t->key, "AI=za");

  t = parse_gemini_target("/v1beta/models/m:streamGenerateContent?alt=json");
  ASSERT_TRUE(t);
  EXPECT_FALSE(t->sse);  // alt=json: a streamed JSON array

  EXPECT_FALSE(parse_gemini_target("/v1beta/models/m:countTokens"));
  EXPECT_FALSE(parse_gemini_target("/v1beta/models/:generateContent"));
  EXPECT_FALSE(parse_gemini_target("/v1beta/models/a/b:generateContent"));
  EXPECT_FALSE(parse_gemini_target("/v1beta/m:generateContent"));
  EXPECT_FALSE(parse_gemini_target("/v1beta/models/bad%zz:generateContent"));
  EXPECT_FALSE(parse_gemini_target("/v1/chat/completions"));
}

std::variant<ChatRequest, ApiError> parse(std::string_view body) {
  return parse_generate_request(body, GeminiTarget{"gem", true, true, std::nullopt});
}

ChatRequest parse_ok(std::string_view body) {
  auto r = parse(body);
  if (auto* e = std::get_if<ApiError>(&r)) ADD_FAILURE() << "unexpected error: " << e->message;
  return std::get_if<ChatRequest>(&r) ? std::get<ChatRequest>(r) : ChatRequest{};
}

std::string parse_error(std::string_view body) {
  auto r = parse(body);
  const auto* e = std::get_if<ApiError>(&r);
  if (!e) {
    ADD_FAILURE() << "expected an error for " << body;
    return "";
  }
  EXPECT_EQ(e->status, 400);
  EXPECT_EQ(e->type, "INVALID_ARGUMENT");
  return e->message;
}

TEST(SimGeminiRequest, ReadsContentsSystemCapAndThoughts) {
  const ChatRequest r = parse_ok(R"({"contents":[{"role":"user","parts":[{"text":"12345678"}]}],
      "systemInstruction":{"parts":[{"text":"1234"}]},
      "generationConfig":{"maxOutputTokens":30,"temperature":0,
                          "thinkingConfig":{"includeThoughts":true,"thinkingBudget":-1}},
      "tools":[{"functionDeclarations":[{"name":"f"}]}],"safetySettings":[]})");
  EXPECT_EQ(r.model, "gem");  // from the target
  EXPECT_TRUE(r.stream);
  EXPECT_EQ(r.prompt_tokens, 3);  // 12 characters
  EXPECT_EQ(r.max_tokens, 30);
  EXPECT_TRUE(r.show_reasoning);

  const ChatRequest plain = parse_ok(R"({"contents":[{"parts":[{"text":"hi"}]}],
      "generationConfig":{"maxOutputTokens":0}})");
  EXPECT_FALSE(plain.max_tokens);      // 0 is proto3's unset
  EXPECT_FALSE(plain.show_reasoning);  // Gemini hides thoughts unless asked
}

TEST(SimGeminiRequest, BadRequestsGetInvalidArgument) {
  EXPECT_THAT(parse_error("{nope"), HasSubstr("Invalid JSON payload"));
  EXPECT_THAT(parse_error("[]"), HasSubstr("Invalid JSON payload"));
  EXPECT_THAT(parse_error("{}"), HasSubstr("contents is not specified"));
  EXPECT_THAT(parse_error(R"({"contents":[]})"), HasSubstr("contents is not specified"));
  EXPECT_THAT(parse_error(R"({"contents":"hi"})"), HasSubstr("'contents'"));
  EXPECT_THAT(parse_error(R"({"contents":[{}],"generationConfig":{"maxOutputTokens":"x"}})"),
              HasSubstr("generation_config.max_output_tokens' (TYPE_INT32)"));
  EXPECT_THAT(parse_error(R"({"contents":[{}],"generationConfig":{"maxOutputTokens":-2}})"),
              HasSubstr("max_output_tokens must be positive"));
  EXPECT_THAT(parse_error(R"({"contents":[{}],
      "generationConfig":{"thinkingConfig":{"includeThoughts":"yes"}}})"),
              HasSubstr("include_thoughts' (TYPE_BOOL)"));
}

TEST(SimGeminiErrors, BodiesArePrettyGoogleErrorsWithDetails) {
  const std::string body = gemini_error_body(gemini_injected_error(429), 7);
  EXPECT_THAT(body, StartsWith("{\n  \"error\": {\n    \"code\": 429,"));
  const json e = json::parse(body)["error"];
  EXPECT_EQ(e["status"], "RESOURCE_EXHAUSTED");
  EXPECT_EQ(e["details"][0]["@type"], "type.googleapis.com/google.rpc.RetryInfo");
  EXPECT_EQ(e["details"][0]["retryDelay"], "7s");

  ApiError key = gemini_error(400, "API key not valid. Please pass a valid API key.");
  key.code = "API_KEY_INVALID";
  const json k = json::parse(gemini_error_body(key))["error"];
  EXPECT_EQ(k["status"], "INVALID_ARGUMENT");
  EXPECT_EQ(k["details"][0]["reason"], "API_KEY_INVALID");
  EXPECT_FALSE(
      json::parse(gemini_error_body(gemini_injected_error(500)))["error"].contains("details"));
}

TEST(SimGeminiErrors, InjectedErrorsUseGoogleStatusNames) {
  EXPECT_EQ(gemini_injected_error(400).type, "INVALID_ARGUMENT");
  EXPECT_EQ(gemini_injected_error(401).type, "UNAUTHENTICATED");
  EXPECT_EQ(gemini_injected_error(403).type, "PERMISSION_DENIED");
  EXPECT_EQ(gemini_injected_error(404).type, "NOT_FOUND");
  EXPECT_EQ(gemini_injected_error(429).type, "RESOURCE_EXHAUSTED");
  EXPECT_EQ(gemini_injected_error(500).type, "INTERNAL");
  EXPECT_EQ(gemini_injected_error(503).type, "UNAVAILABLE");
  EXPECT_EQ(gemini_injected_error(504).type, "DEADLINE_EXCEEDED");
  EXPECT_EQ(gemini_injected_error(502).type, "INTERNAL");
}

TEST(SimGeminiFormatter, StreamsOneResponsePerTokenWithCumulativeUsage) {
  ChatPlan plan = text_plan(6, 2);
  const auto events = sse_events(stream_of(plan, true, 10, 3));
  ASSERT_EQ(events.size(), 6u + 1);  // one per token, then the finish
  for (std::size_t i = 0; i < events.size(); ++i) {
    const json& e = events[i];
    const json& c = e["candidates"][0];
    EXPECT_EQ(c["content"]["role"], "model");
    EXPECT_EQ(c["index"], 0);
    EXPECT_EQ(c.contains("finishReason"), i + 1 == events.size());
    EXPECT_EQ(e["modelVersion"], "gemini-sim");
    EXPECT_EQ(e["responseId"], "resp-sim-1");
    const json& u = e["usageMetadata"];
    const int produced = static_cast<int>(std::min<std::size_t>(i + 1, 6));
    EXPECT_EQ(u["promptTokenCount"], 10);
    EXPECT_EQ(u["cachedContentTokenCount"], 3);
    EXPECT_EQ(u["thoughtsTokenCount"], std::min(produced, 2));
    EXPECT_EQ(u.value("candidatesTokenCount", 0), std::max(produced - 2, 0));
    EXPECT_EQ(u["totalTokenCount"], 10 + produced);
  }
  EXPECT_EQ(events.back()["candidates"][0]["finishReason"], "STOP");
  const Collected c = collect(events);
  EXPECT_EQ(c.thoughts, completion_text(2));
  EXPECT_EQ(c.text, openai_content(plan));
}

TEST(SimGeminiFormatter, HiddenThoughtsAreCountedButNotSent) {
  ChatPlan plan = text_plan(5, 3);
  plan.reasoning_hidden = true;
  const auto events = sse_events(stream_of(plan));
  ASSERT_EQ(events.size(), 2u + 1);
  EXPECT_TRUE(collect(events).thoughts.empty());
  EXPECT_EQ(events[0]["usageMetadata"]["thoughtsTokenCount"], 3);
  EXPECT_EQ(events.back()["usageMetadata"]["candidatesTokenCount"], 2);
  EXPECT_EQ(events.back()["usageMetadata"]["totalTokenCount"], 15);
}

TEST(SimGeminiFormatter, ToolCallComesWholeWithTheFinish) {
  ChatPlan plan = text_plan(4, 1);
  plan.output = Profile::Output::kToolCall;
  const auto events = sse_events(stream_of(plan));
  ASSERT_EQ(events.size(), 1u + 1);  // the thought, then the call with the finish
  const json& last = events.back()["candidates"][0];
  EXPECT_EQ(last["finishReason"], "STOP");
  const json& part = last["content"]["parts"][0];
  EXPECT_EQ(part["functionCall"]["name"], "lookup");
  EXPECT_EQ(part["functionCall"]["args"], json::parse(openai_content(plan)));
  EXPECT_TRUE(part.contains("thoughtSignature"));  // the model thought first
}

TEST(SimGeminiFormatter, MaxTokensFinishesWithMaxTokens) {
  ChatPlan plan = text_plan(3);
  plan.capped = true;
  EXPECT_EQ(gemini_finish_reason(plan), "MAX_TOKENS");
  EXPECT_EQ(sse_events(stream_of(plan)).back()["candidates"][0]["finishReason"], "MAX_TOKENS");
  plan.capped = false;
  EXPECT_EQ(gemini_finish_reason(plan), "STOP");
}

TEST(SimGeminiFormatter, WithoutAltSseTheBodyIsOneJsonArray) {
  const ChatPlan plan = text_plan(3);
  const std::string body = stream_of(plan, /*sse=*/false);
  EXPECT_THAT(body, StartsWith("[{\n  \"candidates\": ["));
  EXPECT_NE(body.find("}\n,\r\n{"), std::string::npos);
  const json array = json::parse(body);
  ASSERT_TRUE(array.is_array());
  ASSERT_EQ(array.size(), 3u + 1);
  EXPECT_EQ(collect(std::vector<json>(array.begin(), array.end())).text, openai_content(plan));
}

TEST(SimGeminiFormatter, FaultsAndErrorsFollowTheFraming) {
  const ChatPlan plan = text_plan(2);
  GeminiFormatter sse("r", "m", Answer(plan, "c"), false, 1, 0, true);
  std::string truncated, malformed, error;
  sse.truncated(truncated);
  sse.malformed(malformed);
  sse.error(error);
  EXPECT_THAT(truncated, StartsWith("data: {"));
  EXPECT_EQ(truncated.find("\r\n"), std::string::npos);
  EXPECT_EQ(malformed, "data: {not json\r\n\r\n");
  const auto errors = sse_events(error);
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0]["error"]["code"], 503);
  EXPECT_EQ(errors[0]["error"]["status"], "UNAVAILABLE");

  GeminiFormatter array("r", "m", Answer(plan, "c"), false, 1, 0, false);
  std::string body;
  array.token(body, 0);
  array.error(body);
  const json parsed = json::parse(body);  // the error closes the array
  ASSERT_EQ(parsed.size(), 2u);
  EXPECT_EQ(parsed[1]["error"]["status"], "UNAVAILABLE");
}

TEST(SimGeminiFormatter, SafetyBlockHasPromptFeedbackAndNoCandidates) {
  GeminiFormatter f("r", "m", Answer(text_plan(2), "c"), false, 7, 0, true);
  std::string out;
  f.blocked(out);
  const auto events = sse_events(out);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0]["promptFeedback"]["blockReason"], "SAFETY");
  EXPECT_FALSE(events[0].contains("candidates"));
  EXPECT_EQ(events[0]["usageMetadata"]["promptTokenCount"], 7);

  const json body = json::parse(gemini_blocked_body("r", "m", 7));
  EXPECT_EQ(body["promptFeedback"]["blockReason"], "SAFETY");
  EXPECT_FALSE(body.contains("candidates"));
}

TEST(SimGeminiResponseBody, HasEveryPartAndTheFinalUsage) {
  ChatPlan plan = text_plan(5, 2);
  const std::string raw = gemini_response_body("resp-sim-2", "m", Answer(plan, "c"), false, 4, 0);
  EXPECT_THAT(raw, StartsWith("{\n  \"candidates\": [\n"));
  const json b = json::parse(raw);
  const json& parts = b["candidates"][0]["content"]["parts"];
  ASSERT_EQ(parts.size(), 2u);
  EXPECT_EQ(parts[0], json({{"text", completion_text(2)}, {"thought", true}}));
  EXPECT_EQ(parts[1], json({{"text", openai_content(plan)}}));
  EXPECT_EQ(b["candidates"][0]["finishReason"], "STOP");
  EXPECT_EQ(b["usageMetadata"]["candidatesTokenCount"], 3);
  EXPECT_EQ(b["usageMetadata"]["thoughtsTokenCount"], 2);
  EXPECT_EQ(b["usageMetadata"]["totalTokenCount"], 9);

  plan.reasoning_hidden = true;
  plan.completion_tokens = 2;  // capped inside the thoughts: nothing to show
  plan.capped = true;
  const json empty = json::parse(gemini_response_body("r", "m", Answer(plan, "c"), true, 4, 0));
  EXPECT_FALSE(empty["candidates"][0]["content"].contains("parts"));
  EXPECT_EQ(empty["candidates"][0]["finishReason"], "MAX_TOKENS");
}

}  // namespace
}  // namespace llmgate::sim
