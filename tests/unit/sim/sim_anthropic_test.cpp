// Anthropic Messages as the simulator speaks it: request validation, error
// bodies, and the events of AnthropicFormatter checked against what the
// OpenAI path says for the same plan.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "tools/sim/sim_protocol.h"

namespace llmgate::sim {
namespace {

using nlohmann::json;
using ::testing::ElementsAre;
using ::testing::EndsWith;
using ::testing::HasSubstr;
using ::testing::StartsWith;

struct Event {
  std::string type;
  json data;
};

// Splits an Anthropic SSE body into events, checking the framing of each:
// "event: <type>\ndata: <json>\n\n" with data.type equal to the event name.
std::vector<Event> events_of(const std::string& body) {
  std::vector<Event> events;
  std::size_t pos = 0;
  for (std::size_t end; (end = body.find("\n\n", pos)) != std::string::npos; pos = end + 2) {
    const std::string raw = body.substr(pos, end - pos);
    const auto newline = raw.find('\n');
    EXPECT_THAT(raw, StartsWith("event: "));
    EXPECT_NE(newline, std::string::npos) << raw;
    if (newline == std::string::npos) continue;
    Event e{raw.substr(7, newline - 7), json()};
    EXPECT_EQ(raw.compare(newline + 1, 6, "data: "), 0) << raw;
    e.data = json::parse(raw.substr(newline + 7));
    EXPECT_EQ(e.data["type"], e.type) << raw;
    events.push_back(std::move(e));
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

// The whole stream of `plan`, as the server drives it.
std::string stream_of(const ChatPlan& plan, std::int64_t prompt = 10, std::int64_t cached = 0) {
  const Answer a(plan, "toolu_sim_1");
  AnthropicFormatter f("msg_sim_1", "claude-sim", a, anthropic_stop_reason(plan), prompt, cached);
  std::string out;
  f.open(out);
  for (int k = 0; k < plan.completion_tokens; ++k) {
    if (a.sent(k)) f.token(out, k);
  }
  for (int i = 0; i < f.tail_events(); ++i) f.tail(out, i);
  return out;
}

// What the OpenAI path streams for the same plan: content and tool call
// arguments, concatenated.
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

std::vector<std::string> types_of(const std::vector<Event>& events) {
  std::vector<std::string> types;
  for (const auto& e : events) types.push_back(e.type);
  return types;
}

ChatRequest parse_ok(std::string_view body) {
  auto r = parse_messages_request(body);
  if (auto* e = std::get_if<ApiError>(&r)) ADD_FAILURE() << "unexpected error: " << e->message;
  return std::get_if<ChatRequest>(&r) ? std::get<ChatRequest>(r) : ChatRequest{};
}

std::string parse_error(std::string_view body) {
  auto r = parse_messages_request(body);
  const auto* e = std::get_if<ApiError>(&r);
  if (!e) {
    ADD_FAILURE() << "expected an error for " << body;
    return "";
  }
  EXPECT_EQ(e->status, 400);
  EXPECT_EQ(e->type, "invalid_request_error");
  return e->message;
}

TEST(SimAnthropicRequest, ReadsModelStreamMaxTokensAndCountsSystemInThePrompt) {
  const ChatRequest r = parse_ok(R"({"model":"claude-x","max_tokens":64,"stream":true,
      "system":[{"type":"text","text":"12345678"}],
      "messages":[{"role":"user","content":[{"type":"text","text":"12345678"}]}],
      "tools":[{"name":"t","input_schema":{"type":"object"}}],"temperature":0.3})");
  EXPECT_EQ(r.model, "claude-x");
  EXPECT_TRUE(r.stream);
  EXPECT_EQ(r.max_tokens, 64);
  EXPECT_EQ(r.prompt_tokens, 4);   // 16 characters
  EXPECT_FALSE(r.show_reasoning);  // no `thinking`: Claude's reasoning is not shown
  EXPECT_FALSE(r.include_usage);
}

TEST(SimAnthropicRequest, ThinkingEnabledShowsReasoning) {
  EXPECT_TRUE(parse_ok(R"({"model":"m","max_tokens":2048,"messages":[{"role":"user","content":"x"}],
      "thinking":{"type":"enabled","budget_tokens":1024}})")
                  .show_reasoning);
  EXPECT_TRUE(parse_ok(R"({"model":"m","max_tokens":20,"messages":[{"role":"user","content":"x"}],
      "thinking":{"type":"adaptive"}})")
                  .show_reasoning);
  EXPECT_FALSE(parse_ok(R"({"model":"m","max_tokens":20,"messages":[{"role":"user","content":"x"}],
      "thinking":{"type":"disabled"}})")
                   .show_reasoning);
}

TEST(SimAnthropicRequest, BadRequestsGetAnthropicMessagesNamingTheField) {
  const std::string msgs = R"("messages":[{"role":"user","content":"x"}])";
  EXPECT_THAT(parse_error("{nope"), HasSubstr("JSON"));
  EXPECT_EQ(parse_error(R"({"max_tokens":5,)" + msgs + "}"), "model: Field required");
  EXPECT_THAT(parse_error(R"({"model":1,"max_tokens":5,)" + msgs + "}"), StartsWith("model:"));
  EXPECT_EQ(parse_error(R"({"model":"m","max_tokens":5})"), "messages: Field required");
  EXPECT_EQ(parse_error(R"({"model":"m","max_tokens":5,"messages":[]})"),
            "messages: at least one message is required");
  EXPECT_EQ(parse_error(R"({"model":"m",)" + msgs + "}"), "max_tokens: Field required");
  EXPECT_EQ(parse_error(R"({"model":"m","max_tokens":0,)" + msgs + "}"),
            "max_tokens: Input should be greater than or equal to 1");
  EXPECT_EQ(parse_error(R"({"model":"m","max_tokens":1.5,)" + msgs + "}"),
            "max_tokens: Input should be a valid integer");
  EXPECT_EQ(parse_error(R"({"model":"m","max_tokens":5,"stream":"yes",)" + msgs + "}"),
            "stream: Input should be a valid boolean");
  EXPECT_THAT(parse_error(R"({"model":"m","max_tokens":5000,)" + msgs +
                          R"(,"thinking":{"type":"enabled","budget_tokens":100}})"),
              HasSubstr("budget_tokens: Input should be greater than or equal to 1024"));
  EXPECT_THAT(parse_error(R"({"model":"m","max_tokens":1024,)" + msgs +
                          R"(,"thinking":{"type":"enabled","budget_tokens":1024}})"),
              HasSubstr("`max_tokens` must be greater than `thinking.budget_tokens`"));
  EXPECT_THAT(parse_error(R"({"model":"m","max_tokens":5,)" + msgs +
                          R"(,"thinking":{"type":"sometimes"}})"),
              HasSubstr("'sometimes'"));
}

TEST(SimAnthropicErrors, BodyIsTypedErrorWithRequestId) {
  const json body = json::parse(anthropic_error_body(anthropic_injected_error(529), "req_sim_7"));
  EXPECT_EQ(body, json::parse(R"({"type":"error","error":{"type":"overloaded_error",
      "message":"Overloaded"},"request_id":"req_sim_7"})"));
  EXPECT_FALSE(
      json::parse(anthropic_error_body(anthropic_injected_error(500), "")).contains("request_id"));
}

TEST(SimAnthropicErrors, InjectedErrorsUseAnthropicTypesForTheirStatus) {
  EXPECT_EQ(anthropic_injected_error(400).type, "invalid_request_error");
  EXPECT_EQ(anthropic_injected_error(401).type, "authentication_error");
  EXPECT_EQ(anthropic_injected_error(403).type, "permission_error");
  EXPECT_EQ(anthropic_injected_error(404).type, "not_found_error");
  EXPECT_EQ(anthropic_injected_error(413).type, "request_too_large");
  EXPECT_EQ(anthropic_injected_error(429).type, "rate_limit_error");
  EXPECT_EQ(anthropic_injected_error(500).type, "api_error");
  EXPECT_EQ(anthropic_injected_error(503).type, "api_error");
  EXPECT_EQ(anthropic_injected_error(529).type, "overloaded_error");
  EXPECT_EQ(anthropic_injected_error(422).type, "invalid_request_error");
  EXPECT_EQ(anthropic_injected_error(529).status, 529);
}

TEST(SimAnthropicFormatter, StreamsThinkingThenTextInTheirOwnBlocks) {
  const ChatPlan plan = text_plan(6, 2);
  const auto events = events_of(stream_of(plan, 10, 4));
  EXPECT_THAT(types_of(events),
              ElementsAre("message_start", "ping", "content_block_start", "content_block_delta",
                          "content_block_delta", "content_block_delta", "content_block_stop",
                          "content_block_start", "content_block_delta", "content_block_delta",
                          "content_block_delta", "content_block_delta", "content_block_stop",
                          "message_delta", "message_stop"));
  const json& message = events[0].data["message"];
  EXPECT_EQ(message["id"], "msg_sim_1");
  EXPECT_EQ(message["type"], "message");
  EXPECT_EQ(message["role"], "assistant");
  EXPECT_EQ(message["model"], "claude-sim");
  EXPECT_EQ(message["content"], json::array());
  EXPECT_TRUE(message["stop_reason"].is_null());
  EXPECT_TRUE(message["stop_sequence"].is_null());
  // Anthropic counts cache reads apart from input_tokens.
  EXPECT_EQ(message["usage"]["input_tokens"], 6);
  EXPECT_EQ(message["usage"]["cache_read_input_tokens"], 4);
  EXPECT_EQ(message["usage"]["cache_creation_input_tokens"], 0);
  EXPECT_EQ(message["usage"]["output_tokens"], 1);

  EXPECT_EQ(events[2].data["content_block"],
            json({{"type", "thinking"}, {"thinking", ""}, {"signature", ""}}));
  std::string thinking, text;
  for (const auto& e : events) {
    if (e.type != "content_block_delta") continue;
    const json& d = e.data["delta"];
    if (d["type"] == "thinking_delta") {
      EXPECT_EQ(e.data["index"], 0);
      thinking += d["thinking"].get<std::string>();
    } else if (d["type"] == "text_delta") {
      EXPECT_EQ(e.data["index"], 1);
      text += d["text"].get<std::string>();
    }
  }
  EXPECT_EQ(events[5].data["delta"]["type"], "signature_delta");
  EXPECT_FALSE(events[5].data["delta"]["signature"].get<std::string>().empty());
  EXPECT_EQ(events[6].data["index"], 0);
  EXPECT_EQ(events[7].data["content_block"], json({{"type", "text"}, {"text", ""}}));
  EXPECT_EQ(events[7].data["index"], 1);
  EXPECT_EQ(thinking, completion_text(2));
  EXPECT_EQ(text, openai_content(plan));

  const json& delta = events[13].data;
  EXPECT_EQ(delta["delta"], json({{"stop_reason", "end_turn"}, {"stop_sequence", nullptr}}));
  EXPECT_EQ(delta["usage"]["output_tokens"], 6);
  EXPECT_EQ(delta["usage"]["input_tokens"], 6);
}

TEST(SimAnthropicFormatter, ToolUseArgumentsConcatenateToOpenAIsArguments) {
  ChatPlan plan = text_plan(4);
  plan.output = Profile::Output::kToolCall;
  const auto events = events_of(stream_of(plan));
  ASSERT_GE(events.size(), 4u);
  EXPECT_EQ(events[2].data["content_block"],
            json::parse(R"({"type":"tool_use","id":"toolu_sim_1","name":"lookup","input":{}})"));
  std::string arguments;
  for (const auto& e : events) {
    if (e.type == "content_block_delta") {
      EXPECT_EQ(e.data["delta"]["type"], "input_json_delta");
      arguments += e.data["delta"]["partial_json"].get<std::string>();
    }
  }
  EXPECT_EQ(arguments, openai_content(plan));
  EXPECT_EQ(json::parse(arguments), json({{"query", completion_text(4)}}));
  EXPECT_EQ(events[events.size() - 2].data["delta"]["stop_reason"], "tool_use");
}

TEST(SimAnthropicFormatter, HiddenReasoningIsCountedButHasNoBlock) {
  ChatPlan plan = text_plan(5, 3);
  plan.reasoning_hidden = true;
  const auto events = events_of(stream_of(plan));
  for (const auto& e : events) {
    if (e.type == "content_block_start") {
      EXPECT_EQ(e.data["content_block"]["type"], "text");
    }
    if (e.type.starts_with("content_block")) {
      EXPECT_EQ(e.data["index"], 0);
    }
  }
  EXPECT_EQ(events[events.size() - 2].data["usage"]["output_tokens"], 5);
}

TEST(SimAnthropicFormatter, StopReasonFollowsThePlan) {
  ChatPlan plan = text_plan(3);
  EXPECT_EQ(anthropic_stop_reason(plan), "end_turn");
  plan.capped = true;
  EXPECT_EQ(anthropic_stop_reason(plan), "max_tokens");
  plan.capped = false;
  plan.output = Profile::Output::kToolCall;
  EXPECT_EQ(anthropic_stop_reason(plan), "tool_use");
  plan.reasoning_tokens = 3;  // all reasoning, no call made
  EXPECT_EQ(anthropic_stop_reason(plan), "end_turn");
}

TEST(SimAnthropicFormatter, FaultEventsFollowTheFraming) {
  const ChatPlan plan = text_plan(2);
  AnthropicFormatter f("id", "m", Answer(plan, "t"), "end_turn", 1, 0);
  std::string truncated, malformed, error;
  f.truncated(truncated);
  f.malformed(malformed);
  f.error(error);
  EXPECT_THAT(truncated, StartsWith("event: content_block_delta\ndata: {"));
  EXPECT_THAT(truncated, ::testing::Not(EndsWith("\n")));
  EXPECT_EQ(malformed, "event: content_block_delta\ndata: {not json\n\n");
  const auto events = events_of(error);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].type, "error");
  EXPECT_EQ(events[0].data["error"],
            json({{"type", "overloaded_error"}, {"message", "Overloaded"}}));
}

TEST(SimAnthropicMessageBody, SaysWhatTheStreamSays) {
  ChatPlan plan = text_plan(5, 2);
  const Answer a(plan, "toolu_sim_9");
  const json b = json::parse(anthropic_message_body("msg_sim_9", "m", a, "end_turn", 12, 2));
  EXPECT_EQ(b["id"], "msg_sim_9");
  EXPECT_EQ(b["type"], "message");
  EXPECT_EQ(b["role"], "assistant");
  EXPECT_EQ(b["stop_reason"], "end_turn");
  EXPECT_TRUE(b["stop_sequence"].is_null());
  ASSERT_EQ(b["content"].size(), 2u);
  EXPECT_EQ(b["content"][0]["type"], "thinking");
  EXPECT_EQ(b["content"][0]["thinking"], completion_text(2));
  EXPECT_FALSE(b["content"][0]["signature"].get<std::string>().empty());
  EXPECT_EQ(b["content"][1], json({{"type", "text"}, {"text", openai_content(plan)}}));
  EXPECT_EQ(b["usage"]["input_tokens"], 10);
  EXPECT_EQ(b["usage"]["cache_read_input_tokens"], 2);
  EXPECT_EQ(b["usage"]["output_tokens"], 5);

  plan.output = Profile::Output::kToolCall;
  plan.reasoning_hidden = true;
  const json t =
      json::parse(anthropic_message_body("id", "m", Answer(plan, "toolu_sim_9"), "tool_use", 1, 0));
  ASSERT_EQ(t["content"].size(), 1u);
  EXPECT_EQ(t["content"][0]["type"], "tool_use");
  EXPECT_EQ(t["content"][0]["id"], "toolu_sim_9");
  EXPECT_EQ(t["content"][0]["name"], "lookup");
  EXPECT_EQ(t["content"][0]["input"], json::parse(openai_content(plan)));
}

TEST(SimOpenAIStream, ErrorEventIsAnInBandOpenAIError) {
  std::string event;
  ChunkFormatter::error(event);
  EXPECT_THAT(event, StartsWith("data: {\"error\":"));
  EXPECT_THAT(event, EndsWith("\n\n"));
  const json e = json::parse(event.substr(6));
  EXPECT_EQ(e["error"]["type"], "server_error");
  EXPECT_TRUE(e["error"].contains("message"));
}

}  // namespace
}  // namespace llmgate::sim
