// A request's prompt prefixes (prompt-cache affinity): a conversation's
// growing prompt meets its previous turn's, different ones never meet.
#include "providers/prompt_prefix.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace llmgate::providers {
namespace {

using nlohmann::json;

PromptPrefixes prefixes_of(const std::string& text) {
  auto parsed = RequestBody::parse(text);
  return prompt_prefixes(std::get<RequestBody>(parsed));
}

std::string chat(const std::vector<std::string>& contents, const std::string& extra = "") {
  json messages = json::array();
  messages.push_back({{"role", "system"}, {"content", "You are terse."}});
  for (std::size_t i = 0; i < contents.size(); ++i)
    messages.push_back({{"role", i % 2 == 0 ? "user" : "assistant"}, {"content", contents[i]}});
  return R"({"model":"m",)" + extra + R"("messages":)" + messages.dump() + "}";
}

bool has_hash(const PromptPrefixes& p, std::uint64_t hash) {
  for (const auto& c : p.view()) {
    if (c.hash == hash) return true;
  }
  return false;
}

TEST(PromptPrefix, TheNextTurnMeetsThePreviousTurnsWholePrompt) {
  const auto turn1 = prefixes_of(chat({"hi"}));
  const auto turn2 = prefixes_of(chat({"hi", "hello", "how are you?"}));
  ASSERT_EQ(turn1.count, 2u);  // after the system prompt, after "hi"
  ASSERT_EQ(turn2.count, 4u);
  EXPECT_EQ(turn1.firsts, 1u);
  // The previous turn's whole prompt is a prefix of this one, with its bytes.
  EXPECT_EQ(turn2.cuts[1].hash, turn1.whole()->hash);
  EXPECT_EQ(turn2.cuts[1].bytes, turn1.whole()->bytes);
  // The system prompt is the first cut of both.
  EXPECT_EQ(turn2.cuts[0].hash, turn1.cuts[0].hash);
  // Growing prefixes grow.
  for (std::size_t i = 1; i < turn2.count; ++i)
    EXPECT_GT(turn2.cuts[i].bytes, turn2.cuts[i - 1].bytes);
}

TEST(PromptPrefix, DifferentConversationsDoNotMeet) {
  const auto a = prefixes_of(chat({"what is 2+2?", "4", "and 3+3?"}));
  const auto b = prefixes_of(chat({"what is 2+3?", "5", "and 3+3?"}));
  // The system prompt is shared; nothing after it is.
  EXPECT_EQ(a.cuts[0].hash, b.cuts[0].hash);
  for (std::size_t i = 1; i < a.count; ++i) EXPECT_FALSE(has_hash(b, a.cuts[i].hash)) << i;
  // Another system prompt: nothing shared at all.
  auto other = json::parse(chat({"what is 2+2?"}));
  other["messages"][0]["content"] = "You are verbose.";
  const auto c = prefixes_of(other.dump());
  for (const auto& cut : c.view()) EXPECT_FALSE(has_hash(a, cut.hash));
}

TEST(PromptPrefix, ToolsAndInstructionsArePartOfThePrefixInAFixedOrder) {
  const std::string tools = R"("tools":[{"type":"function","function":{"name":"f"}}],)";
  const std::string schema = R"("response_format":{"type":"json_object"},)";
  const auto plain = prefixes_of(chat({"hi"}));
  const auto with_tools = prefixes_of(chat({"hi"}, tools));
  EXPECT_EQ(with_tools.firsts, 2u);  // the preamble, the first message
  EXPECT_EQ(with_tools.count, 3u);
  EXPECT_FALSE(has_hash(plain, with_tools.whole()->hash));
  // The same members in another order of the body: the same prefixes.
  const auto ab = prefixes_of(chat({"hi"}, tools + schema));
  const auto ba = prefixes_of(chat({"hi"}, schema + tools));
  ASSERT_EQ(ab.count, ba.count);
  for (std::size_t i = 0; i < ab.count; ++i) EXPECT_EQ(ab.cuts[i].hash, ba.cuts[i].hash);
  // The members that are not part of a prompt change nothing.
  const auto tuned = prefixes_of(chat({"hi"}, R"("temperature":0.2,"stream":true,)"));
  EXPECT_EQ(tuned.whole()->hash, plain.whole()->hash);
}

TEST(PromptPrefix, AResponsesInputArrayHasPrefixesAStringOrNoConversationNone) {
  const auto responses = prefixes_of(
      R"({"model":"m","instructions":"be brief","input":[{"role":"user","content":"a"},)"
      R"({"role":"assistant","content":"b"}]})");
  EXPECT_EQ(responses.count, 3u);  // instructions, and after each message
  EXPECT_EQ(prefixes_of(R"({"model":"m","input":"just a string"})").count, 0u);
  EXPECT_EQ(prefixes_of(R"({"model":"m","messages":[]})").count, 0u);
  EXPECT_EQ(prefixes_of(R"({"model":"m","messages":"not an array"})").count, 0u);
  EXPECT_EQ(prefixes_of(R"({"model":"m","prompt":"legacy"})").count, 0u);
}

TEST(PromptPrefix, ALongConversationKeepsItsFirstsAndItsLatestCuts) {
  std::vector<std::string> contents;
  for (int i = 0; i < 40; ++i) contents.push_back("message " + std::to_string(i));
  const auto all = prefixes_of(chat(contents));
  ASSERT_EQ(all.count, PromptPrefixes::kMaxCuts);
  EXPECT_EQ(all.firsts, 1u);
  // Shortest first, the whole prompt last.
  for (std::size_t i = 1; i < all.count; ++i) EXPECT_GT(all.cuts[i].bytes, all.cuts[i - 1].bytes);
  // The previous turn (two messages shorter) is among them, and so is the
  // one 14 messages back; not 15.
  for (std::size_t back : {2u, 14u, 15u}) {
    std::vector<std::string> earlier(contents.begin(), contents.end() - static_cast<long>(back));
    const bool expect = back < PromptPrefixes::kMaxCuts - 1;
    EXPECT_EQ(has_hash(all, prefixes_of(chat(earlier)).whole()->hash), expect) << back;
  }
  // What is remembered: the first, and the last two.
  PromptPrefixes::Remembered buf;
  const auto kept = all.remembered(buf);
  ASSERT_EQ(kept.size(), 3u);
  EXPECT_EQ(kept[0].hash, all.cuts[0].hash);
  EXPECT_EQ(kept[1].hash, all.cuts[all.count - 2].hash);
  EXPECT_EQ(kept[2].hash, all.whole()->hash);
}

TEST(PromptPrefix, BytesLeaveInlineMediaOutAndCountThem) {
  const std::string image = "data:image/png;base64," + std::string(40'000, 'A');
  json body = {{"model", "m"},
               {"messages",
                {{{"role", "user"},
                  {"content", {{{"type", "image_url"}, {"image_url", {{"url", image}}}}}}}}}};
  const auto p = prefixes_of(body.dump());
  ASSERT_EQ(p.count, 1u);
  EXPECT_EQ(p.whole()->media, 1u);
  EXPECT_LT(p.whole()->bytes, 200u);
}

TEST(PromptPrefix, WhitespaceBetweenMessagesDoesNotMatterScalarsAndEscapesAreRead) {
  const auto compact = prefixes_of(R"({"messages":[{"role":"user","content":"a\"]}"},1,true]})");
  const auto spaced = prefixes_of(
      "{\"messages\" : [ {\"role\":\"user\",\"content\":\"a\\\"]}\"} ,\n 1 ,\ttrue ] }");
  ASSERT_EQ(compact.count, 3u);
  ASSERT_EQ(spaced.count, 3u);
  for (std::size_t i = 0; i < 3; ++i) EXPECT_EQ(compact.cuts[i].hash, spaced.cuts[i].hash) << i;
}

// A coding agent (Anthropic's Messages API) marks its latest turn for the
// provider's cache and moves the mark on the next turn: the previous turn's
// prompt must still be found in the next one.
TEST(PromptPrefix, ACacheMarkMovedToTheLatestTurnDoesNotHideThePreviousTurn) {
  const std::string mark = R"("cache_control":{"type":"ephemeral"})";
  const auto text = [&](const std::string& t, bool marked) {
    return R"({"type":"text","text":")" + t + "\"" + (marked ? "," + mark : "") + "}";
  };
  const auto user = [&](const std::string& t, bool marked) {
    return R"({"role":"user","content":[)" + text(t, marked) + "]}";
  };
  const std::string head = R"({"model":"claude","max_tokens":9,"system":[{"type":"text",)"
                           R"("text":"You edit code.",)" +
                           mark + R"(}],"messages":[)";
  const auto turn1 = prefixes_of(head + user("fix the bug", true) + "]}");
  const auto turn2 =
      prefixes_of(head + user("fix the bug", false) + R"(,{"role":"assistant","content":"done"},)" +
                  user("now test it", true) + "]}");
  ASSERT_EQ(turn1.count, 2u);  // the preamble (system), the first message
  ASSERT_EQ(turn2.count, 4u);
  EXPECT_EQ(turn2.cuts[1].hash, turn1.whole()->hash) << "the previous turn, its mark gone";
  // The mark first in its object, and spaced, is taken out as well.
  const auto first =
      prefixes_of(head + R"({"role":"user","content":[{"cache_control" : )"
                         R"({"type":"ephemeral"} , "type":"text","text":"fix the bug"}]}]})");
  EXPECT_EQ(first.whole()->hash, turn1.whole()->hash);
  // A string that reads "cache_control" is not a mark (inside a string its
  // quotes would be escaped: a value, not a key).
  const auto words =
      prefixes_of(head + R"({"role":"user","content":"a","tags":["x","cache_control"]}]})");
  const auto none = prefixes_of(head + R"({"role":"user","content":"a","tags":["x"]}]})");
  EXPECT_NE(words.whole()->hash, none.whole()->hash);
}

}  // namespace
}  // namespace llmgate::providers
