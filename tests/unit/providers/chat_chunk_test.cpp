#include "providers/chat_chunk.h"

#include <gtest/gtest.h>

#include "providers/completion_assembler.h"

namespace llmgate::providers {
namespace {

TEST(ChatChunk, RoleOnlyChunkIsNotTheFirstToken) {
  auto c = inspect_chunk(R"({"id":"x","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]})");
  EXPECT_EQ(c.kind, ChatChunk::Kind::kChunk);
  EXPECT_FALSE(c.has_output);
  EXPECT_FALSE(c.has_finish);
}

TEST(ChatChunk, ContentToolCallsAndReasoningAreOutput) {
  EXPECT_TRUE(inspect_chunk(R"({"choices":[{"delta":{"content":"Hi"}}]})").has_output);
  EXPECT_TRUE(inspect_chunk(R"({"choices":[{"delta":{"reasoning_content":"hmm"}}]})").has_output);
  EXPECT_TRUE(inspect_chunk(R"({"choices":[{"delta":{"reasoning":"hmm"}}]})").has_output);
  EXPECT_TRUE(inspect_chunk(R"({"choices":[{"delta":{"refusal":"no"}}]})").has_output);
  EXPECT_TRUE(inspect_chunk(
      R"({"choices":[{"delta":{"tool_calls":[{"index":0,"id":"c1","function":{"name":"f","arguments":""}}]}}]})")
                  .has_output);
  EXPECT_FALSE(inspect_chunk(R"({"choices":[{"delta":{"tool_calls":[]}}]})").has_output);
}

TEST(ChatChunk, RecognisesTheUsageOnlyChunk) {
  auto c = inspect_chunk(R"({"choices":[],"usage":{"prompt_tokens":5,"completion_tokens":7,"total_tokens":12}})");
  EXPECT_TRUE(c.usage_only);
  ASSERT_TRUE(c.usage);
  EXPECT_EQ(c.usage->completion_tokens, 7);
  EXPECT_FALSE(inspect_chunk(R"({"choices":[{"delta":{"content":"a"}}],"usage":null})").usage.has_value());
}

TEST(ChatChunk, ClassifiesDoneErrorAndMalformed) {
  EXPECT_EQ(inspect_chunk("[DONE]").kind, ChatChunk::Kind::kDone);
  auto e = inspect_chunk(R"({"error":{"message":"overloaded","type":"server_error"}})");
  EXPECT_EQ(e.kind, ChatChunk::Kind::kError);
  EXPECT_EQ(e.error_message, "overloaded");
  EXPECT_EQ(inspect_chunk("{not json").kind, ChatChunk::Kind::kMalformed);
  EXPECT_EQ(inspect_chunk("[1,2]").kind, ChatChunk::Kind::kMalformed);
  EXPECT_EQ(inspect_chunk(R"({"id":"x"})").kind, ChatChunk::Kind::kMalformed);
}

TEST(ChatChunk, FinishReasonIsSeen) {
  EXPECT_TRUE(inspect_chunk(R"({"choices":[{"delta":{},"finish_reason":"stop"}]})").has_finish);
}

TEST(CompletionAssembler, JoinsContentToolCallsAndUsage) {
  CompletionAssembler a;
  for (const char* c : {
           R"({"id":"chatcmpl-1","created":10,"model":"m","system_fingerprint":"fp","choices":[{"index":0,"delta":{"role":"assistant","content":""}}]})",
           R"({"id":"chatcmpl-1","choices":[{"index":0,"delta":{"content":"Hel"}}]})",
           R"({"id":"chatcmpl-1","choices":[{"index":0,"delta":{"content":"lo"}}]})",
           R"({"id":"chatcmpl-1","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"get","arguments":"{\"a\""}}]}}]})",
           R"({"id":"chatcmpl-1","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":":1}"}}]}}]})",
           R"({"id":"chatcmpl-1","choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]})",
           R"({"id":"chatcmpl-1","choices":[],"usage":{"prompt_tokens":3,"completion_tokens":4,"total_tokens":7}})"}) {
    a.add(nlohmann::json::parse(c));
  }
  auto r = a.result();
  EXPECT_EQ(r["object"], "chat.completion");
  EXPECT_EQ(r["id"], "chatcmpl-1");
  EXPECT_EQ(r["model"], "m");
  EXPECT_EQ(r["system_fingerprint"], "fp");
  ASSERT_EQ(r["choices"].size(), 1u);
  const auto& msg = r["choices"][0]["message"];
  EXPECT_EQ(msg["content"], "Hello");
  EXPECT_EQ(msg["tool_calls"][0]["id"], "call_1");
  EXPECT_EQ(msg["tool_calls"][0]["function"]["name"], "get");
  EXPECT_EQ(msg["tool_calls"][0]["function"]["arguments"], "{\"a\":1}");
  EXPECT_EQ(r["choices"][0]["finish_reason"], "tool_calls");
  EXPECT_EQ(r["usage"]["completion_tokens"], 4);
  ASSERT_TRUE(a.usage());
  EXPECT_EQ(a.usage()->total_tokens, 7);
}

TEST(CompletionAssembler, KeepsChoicesApartByIndex) {
  CompletionAssembler a;
  a.add(nlohmann::json::parse(R"({"choices":[{"index":1,"delta":{"content":"B"}},{"index":0,"delta":{"content":"A"}}]})"));
  a.add(nlohmann::json::parse(R"({"choices":[{"index":0,"delta":{"content":"a"},"finish_reason":"stop"}]})"));
  auto r = a.result();
  ASSERT_EQ(r["choices"].size(), 2u);
  EXPECT_EQ(r["choices"][0]["message"]["content"], "Aa");
  EXPECT_EQ(r["choices"][1]["message"]["content"], "B");
  EXPECT_EQ(r["choices"][1]["finish_reason"], nullptr);
}

// Found by review with fuzz_sse_parser: total = prompt + completion
// overflowed (undefined behaviour) for huge counts from an upstream.
TEST(ChatChunkHardening, ImplausibleUsageCountsReadAsZeroAndNeverOverflow) {
  auto c = inspect_chunk(
      R"({"choices":[],"usage":{"prompt_tokens":9223372036854775807,"completion_tokens":9223372036854775807}})");
  ASSERT_TRUE(c.usage.has_value());
  EXPECT_EQ(c.usage->prompt_tokens, 0);
  EXPECT_EQ(c.usage->completion_tokens, 0);
  auto neg = inspect_chunk(R"({"choices":[],"usage":{"prompt_tokens":-5,"completion_tokens":18446744073709551615}})");
  ASSERT_TRUE(neg.usage.has_value());
  EXPECT_EQ(neg.usage->prompt_tokens, 0);
  EXPECT_EQ(neg.usage->completion_tokens, 0);
  auto ok = inspect_chunk(R"({"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":4}})");
  EXPECT_EQ(ok.usage->total_tokens, 7);
}

TEST(ChatChunkHardening, AnEventWithANulByteIsMalformed) {
  std::string data = R"({"choices":[{"delta":{"content":"hi"}}]})";
  data += std::string("\0{", 2);
  EXPECT_EQ(inspect_chunk(data).kind, ChatChunk::Kind::kMalformed);
}

TEST(ChatChunkHardening, ADeeplyNestedEventIsMalformedNotAStackOverflow) {
  auto c = inspect_chunk(R"({"choices":)" + std::string(200'000, '[') + std::string(200'000, ']') + "}");
  EXPECT_EQ(c.kind, ChatChunk::Kind::kMalformed);
}

}  // namespace
}  // namespace llmgate::providers
