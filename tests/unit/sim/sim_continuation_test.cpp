// The simulator continues an assistant message as each real dialect does:
// OpenAI-compatible prefix / continue_final_message, Anthropic prefill, a
// trailing Gemini model turn; a last assistant message without them is
// answered anew (OpenAI's own behaviour).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "tools/sim/sim_protocol.h"

namespace llmgate::sim {
namespace {

using nlohmann::json;

std::string text_of(int from, int to) {
  std::string s;
  for (int k = from; k < to; ++k) s += token_text(static_cast<std::size_t>(k));
  return s;
}

json chat(const json& last, const json& extra = json::object()) {
  json j = {{"model", "m"},
            {"messages", json::array({{{"role", "user"}, {"content", "hi"}}, last})}};
  j.update(extra);
  return j;
}

std::optional<std::string> prefill_of(const json& body) {
  auto r = parse_chat_request(body.dump());
  EXPECT_TRUE(std::holds_alternative<ChatRequest>(r));
  return std::holds_alternative<ChatRequest>(r) ? std::get<ChatRequest>(r).prefill : std::nullopt;
}

TEST(SimContinuation, OpenAiCompatibleServersContinueOnlyWhenAsked) {
  const json assistant = {{"role", "assistant"}, {"content", " lorem ipsum"}};
  EXPECT_EQ(prefill_of(chat(assistant)), std::nullopt);  // OpenAI: answered anew
  json prefix = assistant;
  prefix["prefix"] = true;
  EXPECT_EQ(prefill_of(chat(prefix)), " lorem ipsum");
  EXPECT_EQ(prefill_of(chat(assistant,
                            {{"continue_final_message", true}, {"add_generation_prompt", false}})),
            " lorem ipsum");
  // vLLM's rule: continue_final_message with the generation prompt on
  // (its default) is an error.
  auto both = parse_chat_request(chat(assistant, {{"continue_final_message", true}}).dump());
  ASSERT_TRUE(std::holds_alternative<ApiError>(both));
  EXPECT_EQ(std::get<ApiError>(both).status, 400);
}

TEST(SimContinuation, AnthropicPrefillIsTheLastAssistantMessageWithoutTrailingSpace) {
  json body = {{"model", "m"},
               {"max_tokens", 100},
               {"messages", json::array({{{"role", "user"}, {"content", "hi"}},
                                         {{"role", "assistant"}, {"content", " lorem"}}})}};
  auto r = parse_messages_request(body.dump());
  ASSERT_TRUE(std::holds_alternative<ChatRequest>(r));
  EXPECT_EQ(std::get<ChatRequest>(r).prefill, " lorem");
  body["messages"][1]["content"] = " lorem ";
  auto bad = parse_messages_request(body.dump());
  ASSERT_TRUE(std::holds_alternative<ApiError>(bad));
  EXPECT_NE(std::get<ApiError>(bad).message.find("trailing whitespace"), std::string::npos);
}

TEST(SimContinuation, AContinuationSaysOnlyTheWordsThePrefillLacks) {
  ChatPlan plan;
  plan.completion_tokens = 10;
  continue_after(plan, text_of(0, 4));
  EXPECT_EQ(plan.offset, 4);
  EXPECT_EQ(plan.completion_tokens, 6);
  const Answer a(plan, "id");
  EXPECT_EQ(text_of(0, 4) + a.answer_text(), text_of(0, 10));
  // Reasoning is not said again, and the words after it are matched.
  ChatPlan thinking;
  thinking.completion_tokens = 12;
  thinking.reasoning_tokens = 2;
  continue_after(thinking, text_of(2, 5));
  EXPECT_EQ(thinking.offset, 5);
  EXPECT_EQ(thinking.reasoning_tokens, 0);
  EXPECT_EQ(Answer(thinking, "id").answer_text(), text_of(5, 12));
  // A prefill that is not this answer's: the answer from its start.
  ChatPlan other;
  other.completion_tokens = 3;
  continue_after(other, "something else");
  EXPECT_EQ(other.offset, 0);
  EXPECT_EQ(Answer(other, "id").answer_text(), text_of(0, 3));
}

TEST(SimContinuation, ModelsThatAllowNoPrefillRefuseInTheirProtocolsWords) {
  EXPECT_EQ(prefill_refused(Protocol::kOpenAI).status, 400);
  EXPECT_NE(prefill_refused(Protocol::kAnthropic).message.find("prefill"), std::string::npos);
  EXPECT_EQ(prefill_refused(Protocol::kGemini).status, 400);
}

}  // namespace
}  // namespace llmgate::sim
