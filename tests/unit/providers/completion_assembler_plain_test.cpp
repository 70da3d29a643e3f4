// The non-streamed answer's fast path: plain content chunks are appended
// without being parsed, and the assembled completion is the same as when
// every chunk is parsed.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "providers/chat_chunk.h"
#include "providers/completion_assembler.h"

namespace llmgate::providers {
namespace {

const std::vector<std::string> kStream = {
    R"({"id":"c1","object":"chat.completion.chunk","created":7,"model":"m","system_fingerprint":"fp","choices":[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]})",
    R"({"id":"c1","object":"chat.completion.chunk","created":7,"model":"m","system_fingerprint":"fp","choices":[{"index":0,"delta":{"content":"Hello"},"logprobs":null,"finish_reason":null}]})",
    R"({"id":"c1","object":"chat.completion.chunk","created":7,"model":"m","system_fingerprint":"fp","choices":[{"index":0,"delta":{"content":", \"w\\orld\"\n\t\u00e9\u4e2d\ud83d\ude00 \/"},"finish_reason":null}],"obfuscation":"x"})",
    R"({"id":"c1","object":"chat.completion.chunk","created":7,"model":"m","choices":[{"delta":{"content":"!"}}]})",
    R"({"id":"c1","object":"chat.completion.chunk","created":7,"model":"m","system_fingerprint":"fp","choices":[{"index":0,"delta":{},"logprobs":null,"finish_reason":"stop"}]})",
    R"({"id":"c1","object":"chat.completion.chunk","created":7,"model":"m","system_fingerprint":"fp","choices":[],"usage":{"prompt_tokens":3,"completion_tokens":4,"total_tokens":7}})",
};

// The assembler fed the way the gateway feeds it: plain chunks unparsed.
int assemble_fast(CompletionAssembler& a, const std::vector<std::string>& stream) {
  int unparsed = 0;
  for (const auto& data : stream) {
    const ChatChunk c = inspect_chunk(data);
    if (c.plain) {
      a.add_plain(c);
      ++unparsed;
    } else {
      a.add(parse_chunk(data).json);
    }
  }
  return unparsed;
}

TEST(CompletionAssemblerPlain, AssemblesTheSameAnswerAsParsingEveryChunk) {
  CompletionAssembler slow, fast;
  for (const auto& data : kStream) slow.add(parse_chunk(data).json);
  EXPECT_EQ(assemble_fast(fast, kStream), 6);  // role, content, finish and usage chunks
  EXPECT_EQ(fast.result(), slow.result());
  EXPECT_EQ(fast.usage(), slow.usage());
  EXPECT_EQ(fast.result()["choices"][0]["message"]["content"],
            "Hello, \"w\\orld\"\n\t\u00e9\u4e2d\U0001F600 /!");
  EXPECT_EQ(fast.result()["choices"][0]["finish_reason"], "stop");
  EXPECT_EQ(fast.result()["usage"]["total_tokens"], 7);
}

TEST(CompletionAssemblerPlain, TheUsualChunksArePlainAndTheRestParsed) {
  const ChatChunk role = inspect_chunk(kStream[0]);
  ASSERT_TRUE(role.plain);
  EXPECT_TRUE(role.has_role);
  EXPECT_EQ(role.role, "assistant");
  EXPECT_TRUE(role.has_content);
  EXPECT_EQ(role.content, "");
  EXPECT_EQ(role.meta_keys, ChatChunk::kMetaId | ChatChunk::kMetaCreated | ChatChunk::kMetaModel |
                                ChatChunk::kMetaSystemFingerprint);
  EXPECT_EQ(role.meta[0], R"("c1")");
  EXPECT_EQ(role.meta[1], "7");
  EXPECT_TRUE(inspect_chunk(kStream[1]).plain);
  EXPECT_EQ(inspect_chunk(kStream[1]).content, "Hello");
  const ChatChunk finish = inspect_chunk(kStream[4]);
  ASSERT_TRUE(finish.plain);
  EXPECT_TRUE(finish.has_finish_reason);
  EXPECT_EQ(finish.finish_reason, "stop");
  EXPECT_FALSE(finish.has_content);
  const ChatChunk usage = inspect_chunk(kStream[5]);
  ASSERT_TRUE(usage.plain);
  EXPECT_FALSE(usage.plain_choice);
  EXPECT_EQ(usage.usage_json, R"({"prompt_tokens":3,"completion_tokens":4,"total_tokens":7})");
  // What the assembler reads more of goes to the parser.
  EXPECT_FALSE(
      inspect_chunk(R"({"choices":[{"delta":{"content":"a"}},{"delta":{"content":"b"}}]})").plain);
  EXPECT_FALSE(inspect_chunk(R"({"choices":[{"index":1,"delta":{"content":"a"}}]})").plain);
  EXPECT_FALSE(inspect_chunk(R"({"choices":[{"delta":{"content":"a","tool_calls":[]}}]})").plain);
  EXPECT_FALSE(inspect_chunk(R"({"choices":[{"delta":{"refusal":"no"}}]})").plain);
  EXPECT_FALSE(
      inspect_chunk(R"({"choices":[{"delta":{"content":"a"},"logprobs":{"content":[]}}]})").plain);
  EXPECT_FALSE(inspect_chunk(R"({"choices":[{"delta":{},"finish_reason":1}]})").plain);
  EXPECT_FALSE(inspect_chunk(R"({"choices":[{"delta":{"role":7}}]})").plain);
  EXPECT_FALSE(inspect_chunk(R"({"choices":[{"delta":{}}],"usage":{"total_tokens":1}})").plain);
  EXPECT_FALSE(inspect_chunk(R"({"choices":[5]})").plain);
  EXPECT_FALSE(inspect_chunk(R"({"choices":[{"delta":{}}],"extra":1})").plain);
  EXPECT_TRUE(inspect_chunk(R"({"choices":[{"delta":{"content":null}}]})").plain);
  EXPECT_FALSE(parse_chunk(kStream[1]).plain);  // the reference never sets it
}

TEST(CompletionAssemblerPlain, EdgesAssembleAsTheParsedChunks) {
  // Each stream assembled both ways: the same answer.
  const std::vector<std::vector<std::string>> streams = {
      // A null role after a string one: no role from that chunk (nlohmann
      // keeps the last key), the default stays.
      {R"({"id":"a","choices":[{"delta":{"role":"tool","role":null,"content":"x"}}]})"},
      {R"({"id":"a","choices":[{"delta":{"role":"tool"}}]})",
       R"({"choices":[{"delta":{"role":"assi\u0073tant"}}]})"},
      // Empty metadata is no metadata: a later chunk's fills it.
      {R"({"id":"","created":0,"model":null,"choices":[{"delta":{"content":"a"}}]})",
       R"({"id":"i2","created":9,"model":"m2","service_tier":"flex","choices":[{"delta":{}}]})"},
      // Numbers and objects as metadata, as nlohmann reads them.
      {R"({"id":{"x":[1,2]},"created":1.5e3,"choices":[{"delta":{"content":"\ud83d\ude00"}}]})"},
      // Usage, then a later finish; a second usage chunk replaces the first.
      {R"({"choices":[],"usage":{"prompt_tokens":1,"completion_tokens":2}})",
       R"({"choices":[{"delta":{},"finish_reason":"len\"gth"}]})",
       R"({"choices":[],"usage":{"prompt_tokens":5,"completion_tokens":6,"total_tokens":11,"completion_tokens_details":{"reasoning_tokens":3}}})"},
      // A choice with nothing in it still opens choice 0.
      {R"({"id":"a","choices":[{"delta":{}}]})"},
      {R"({"id":"a","choices":[]})"},
  };
  for (const auto& stream : streams) {
    CompletionAssembler slow, fast;
    for (const auto& data : stream) slow.add(parse_chunk(data).json);
    EXPECT_EQ(assemble_fast(fast, stream), static_cast<int>(stream.size())) << stream[0];
    EXPECT_EQ(fast.result(), slow.result()) << stream[0] << "\n" << fast.result().dump();
    EXPECT_EQ(fast.usage(), slow.usage()) << stream[0];
  }
}

}  // namespace
}  // namespace llmgate::providers
