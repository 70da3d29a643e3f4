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

TEST(CompletionAssemblerPlain, AssemblesTheSameAnswerAsParsingEveryChunk) {
  CompletionAssembler slow, fast;
  int unparsed = 0;
  for (const auto& data : kStream) {
    slow.add(parse_chunk(data).json);
    const ChatChunk c = inspect_chunk(data);
    if (c.plain && fast.add_plain(c.content, c.meta_keys)) {
      ++unparsed;
    } else {
      fast.add(parse_chunk(data).json);
    }
  }
  EXPECT_EQ(unparsed, 3);  // the three content chunks after the role chunk
  EXPECT_EQ(fast.result(), slow.result());
  EXPECT_EQ(fast.result()["choices"][0]["message"]["content"],
            "Hello, \"w\\orld\"\n\t\u00e9\u4e2d\U0001F600 /!");
}

TEST(CompletionAssemblerPlain, OnlyContentChunksArePlain) {
  EXPECT_FALSE(inspect_chunk(kStream[0]).plain);  // role
  EXPECT_TRUE(inspect_chunk(kStream[1]).plain);
  EXPECT_EQ(inspect_chunk(kStream[1]).content, "Hello");
  EXPECT_FALSE(inspect_chunk(kStream[4]).plain);  // finish_reason
  EXPECT_FALSE(inspect_chunk(kStream[5]).plain);  // usage
  EXPECT_FALSE(
      inspect_chunk(R"({"choices":[{"delta":{"content":"a"}},{"delta":{"content":"b"}}]})").plain);
  EXPECT_FALSE(inspect_chunk(R"({"choices":[{"index":1,"delta":{"content":"a"}}]})").plain);
  EXPECT_FALSE(inspect_chunk(R"({"choices":[{"delta":{"content":"a","tool_calls":[]}}]})").plain);
  EXPECT_FALSE(
      inspect_chunk(R"({"choices":[{"delta":{"content":"a"},"logprobs":{"content":[]}}]})").plain);
  EXPECT_FALSE(inspect_chunk(R"({"choices":[{"delta":{"content":null}}]})").plain);
  EXPECT_FALSE(parse_chunk(kStream[1]).plain);  // the reference never sets it
}

TEST(CompletionAssemblerPlain, RefusesAChunkWithMetadataNotSeenYet) {
  CompletionAssembler a;
  const ChatChunk c = inspect_chunk(kStream[1]);
  ASSERT_TRUE(c.plain);
  EXPECT_EQ(c.meta_keys, ChatChunk::kMetaId | ChatChunk::kMetaCreated | ChatChunk::kMetaModel |
                             ChatChunk::kMetaSystemFingerprint);
  EXPECT_FALSE(a.add_plain(c.content, c.meta_keys));
  a.add(parse_chunk(kStream[0]).json);
  EXPECT_TRUE(a.add_plain(c.content, c.meta_keys));
}

}  // namespace
}  // namespace llmgate::providers
