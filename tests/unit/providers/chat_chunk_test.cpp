#include "providers/chat_chunk.h"

#include <gtest/gtest.h>

#include <iterator>
#include <string>
#include <string_view>

#include "providers/completion_assembler.h"
#include "providers/json_depth.h"

namespace llmgate::providers {
namespace {

TEST(ChatChunk, RoleOnlyChunkIsNotTheFirstToken) {
  auto c = inspect_chunk(
      R"({"id":"x","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]})");
  EXPECT_EQ(c.kind, ChatChunk::Kind::kChunk);
  EXPECT_FALSE(c.has_output);
  EXPECT_FALSE(c.has_finish);
}

TEST(ChatChunk, ContentToolCallsAndReasoningAreOutput) {
  EXPECT_TRUE(inspect_chunk(R"({"choices":[{"delta":{"content":"Hi"}}]})").has_output);
  EXPECT_TRUE(inspect_chunk(R"({"choices":[{"delta":{"reasoning_content":"hmm"}}]})").has_output);
  EXPECT_TRUE(inspect_chunk(R"({"choices":[{"delta":{"reasoning":"hmm"}}]})").has_output);
  EXPECT_TRUE(inspect_chunk(R"({"choices":[{"delta":{"refusal":"no"}}]})").has_output);
  EXPECT_TRUE(
      inspect_chunk(
          R"({"choices":[{"delta":{"tool_calls":[{"index":0,"id":"c1","function":{"name":"f","arguments":""}}]}}]})")
          .has_output);
  EXPECT_FALSE(inspect_chunk(R"({"choices":[{"delta":{"tool_calls":[]}}]})").has_output);
}

TEST(ChatChunk, ARepeatedOutputFieldIsReadAsItsLastValueByBothPaths) {
  // A JSON parser keeps the last of repeated names; the scanner would see
  // every value. Both must say the same, or the first token would depend on
  // which path read the event.
  for (std::string_view data :
       {R"({"choices":[{"delta":{"audio":{"id":"a"},"audio":{}}}]})",
        R"({"choices":[{"delta":{"audio":{},"audio":{"id":"a"}}}]})",
        R"({"choices":[{"delta":{"annotations":[1],"x":"","annotations":[]}}]})"}) {
    EXPECT_EQ(inspect_chunk(data).has_output, parse_chunk(data).has_output) << data;
  }
  EXPECT_FALSE(
      inspect_chunk(R"({"choices":[{"delta":{"audio":{"id":"a"},"audio":{}}}]})").has_output);
  EXPECT_TRUE(
      inspect_chunk(R"({"choices":[{"delta":{"audio":{},"audio":{"id":"a"}}}]})").has_output);
}

TEST(ChatChunk, RecognisesTheUsageOnlyChunk) {
  auto c = inspect_chunk(
      R"({"choices":[],"usage":{"prompt_tokens":5,"completion_tokens":7,"total_tokens":12}})");
  EXPECT_TRUE(c.usage_only);
  ASSERT_TRUE(c.usage);
  EXPECT_EQ(c.usage->completion_tokens, 7);
  EXPECT_FALSE(
      inspect_chunk(R"({"choices":[{"delta":{"content":"a"}}],"usage":null})").usage.has_value());
}

TEST(ChatChunk, ReadsReasoningAndCachedTokensFromTheUsageDetails) {
  const std::string_view chunk =
      R"({"choices":[],"usage":{"prompt_tokens":50,"completion_tokens":90,"total_tokens":140,)"
      R"("prompt_tokens_details":{"cached_tokens":32,"audio_tokens":0},)"
      R"("completion_tokens_details":{"reasoning_tokens":64,"accepted_prediction_tokens":0}}})";
  for (const ChatChunk& c : {inspect_chunk(chunk), parse_chunk(chunk)}) {
    ASSERT_TRUE(c.usage);
    EXPECT_EQ(c.usage->reasoning_tokens, 64);
    EXPECT_EQ(c.usage->cached_tokens, 32);
    EXPECT_EQ(c.usage->completion_tokens, 90);
  }
  // Details that are null, not objects or hold nonsense read as 0.
  for (std::string_view odd :
       {R"({"choices":[],"usage":{"completion_tokens":9,"completion_tokens_details":null}})",
        R"({"choices":[],"usage":{"completion_tokens":9,"prompt_tokens_details":[1]}})",
        R"({"choices":[],"usage":{"completion_tokens_details":{"reasoning_tokens":-4}}})"}) {
    EXPECT_EQ(inspect_chunk(odd).usage->reasoning_tokens, 0) << odd;
    EXPECT_EQ(inspect_chunk(odd).usage->cached_tokens, 0) << odd;
  }
}

TEST(ChatChunk, ReasoningTextIsToldApartFromTheAnswer) {
  for (auto inspect : {&inspect_chunk, &parse_chunk}) {
    EXPECT_TRUE(inspect(R"({"choices":[{"delta":{"reasoning_content":"hmm"}}]})").has_reasoning);
    EXPECT_TRUE(inspect(R"({"choices":[{"delta":{"reasoning":"hmm"}}]})").has_reasoning);
    EXPECT_FALSE(inspect(R"({"choices":[{"delta":{"reasoning":""}}]})").has_reasoning);
    EXPECT_FALSE(inspect(R"({"choices":[{"delta":{"content":"Hi"}}]})").has_reasoning);
  }
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
  for (
      const char* c :
      {R"({"id":"chatcmpl-1","created":10,"model":"m","system_fingerprint":"fp","choices":[{"index":0,"delta":{"role":"assistant","content":""}}]})",
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
  a.add(nlohmann::json::parse(
      R"({"choices":[{"index":1,"delta":{"content":"B"}},{"index":0,"delta":{"content":"A"}}]})"));
  a.add(nlohmann::json::parse(
      R"({"choices":[{"index":0,"delta":{"content":"a"},"finish_reason":"stop"}]})"));
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
  auto neg = inspect_chunk(
      R"({"choices":[],"usage":{"prompt_tokens":-5,"completion_tokens":18446744073709551615}})");
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
  auto c =
      inspect_chunk(R"({"choices":)" + std::string(200'000, '[') + std::string(200'000, ']') + "}");
  EXPECT_EQ(c.kind, ChatChunk::Kind::kMalformed);
}

// inspect_chunk is a hand-written scanner standing in for parse_chunk (the
// nlohmann reference) on the hot path: it must agree on every field but
// `json`, for every input, valid or not.
void ExpectSameAsReference(std::string_view data) {
  SCOPED_TRACE(testing::Message() << "data: " << testing::PrintToString(std::string(data)));
  const ChatChunk fast = inspect_chunk(data);
  const ChatChunk ref = parse_chunk(data);
  EXPECT_EQ(fast.kind, ref.kind);
  EXPECT_EQ(fast.has_output, ref.has_output);
  EXPECT_EQ(fast.has_finish, ref.has_finish);
  EXPECT_EQ(fast.usage_only, ref.usage_only);
  ASSERT_EQ(fast.usage.has_value(), ref.usage.has_value());
  if (ref.usage) {
    EXPECT_EQ(fast.usage->prompt_tokens, ref.usage->prompt_tokens);
    EXPECT_EQ(fast.usage->completion_tokens, ref.usage->completion_tokens);
    EXPECT_EQ(fast.usage->total_tokens, ref.usage->total_tokens);
  }
  EXPECT_EQ(fast.output_chars, ref.output_chars);
  EXPECT_EQ(fast.error_message, ref.error_message);
}

TEST(ChatChunkScanner, AgreesWithTheReferenceOnTrickyInputs) {
  using namespace std::string_literals;
  // {"choices":[],"x":{"a":{"a":...1...}}} with `depth` objects in all.
  auto nested_objects = [](int depth) {
    std::string s = R"({"choices":[],"x":)";
    for (int i = 2; i < depth; ++i) s += R"({"a":)";
    return s + "{}" + std::string(depth - 1, '}');
  };
  const std::string inputs[] = {
      // The common shapes.
      R"({"id":"chatcmpl-1","object":"chat.completion.chunk","created":1727000000,"model":"gpt-4o-mini","system_fingerprint":"fp_1","choices":[{"index":0,"delta":{"content":" world"},"logprobs":null,"finish_reason":null}]})",
      R"({"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[],"usage":{"prompt_tokens":12,"completion_tokens":34,"total_tokens":46,"prompt_tokens_details":{"cached_tokens":0}}})",
      R"({"choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]})",
      R"({"choices":[{"delta":{},"finish_reason":"stop"}],"usage":null})",
      R"({"choices":[],"usage":{"completion_tokens":3,"completion_tokens_details":{"reasoning_tokens":2,"reasoning_tokens":1}}})",
      R"({"choices":[],"usage":{"prompt_tokens_details":{"cached_tokens":1},"prompt_tokens_details":{"cached_tokens":2}}})",
      R"({"choices":[],"usage":{"prompt_tokens_details":{"cached_tokens":1e3}}})",
      R"({"choices":[],"usage":{"completion_tokens_details":{"x":{"reasoning_tokens":5}}}})",
      "[DONE]",
      "[DONE] ",
      " [DONE]",
      // Escapes count as the bytes they decode to.
      R"({"choices":[{"delta":{"content":"a\"b\\c\/d\b\f\n\r\t"}}]})",
      R"({"choices":[{"delta":{"content":"\u0041\u00e9\u20AC\uFFFF"}}]})",
      R"({"choices":[{"delta":{"content":"\ud83d\ude00"}}]})",
      R"({"choices":[{"delta":{"content":"\uDBFF\uDFFF\u0000"}}]})",
      R"({"choices":[{"delta":{"content":"\ud83d"}}]})",        // lone high surrogate
      R"({"choices":[{"delta":{"content":"\ude00"}}]})",        // lone low surrogate
      R"({"choices":[{"delta":{"content":"\ud83d\u0041"}}]})",  // high + non-low
      R"({"choices":[{"delta":{"content":"\ud83d\n"}}]})",
      R"({"choices":[{"delta":{"content":"\u12"}}]})",
      R"({"choices":[{"delta":{"content":"\u12G4"}}]})",
      R"({"choices":[{"delta":{"content":"\x41"}}]})",
      R"({"choices":[{"delta":{"content":"\'"}}]})",
      // Raw UTF-8, well-formed and not.
      "{\"choices\":[{\"delta\":{\"content\":"
      "\"\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80\xF4\x8F\xBF\xBF\"}}]}",
      "{\"choices\":[{\"delta\":{\"content\":\"\xC3\"}}]}",              // truncated sequence
      "{\"choices\":[{\"delta\":{\"content\":\"\xC0\xAF\"}}]}",          // overlong
      "{\"choices\":[{\"delta\":{\"content\":\"\xE0\x80\x80\"}}]}",      // overlong
      "{\"choices\":[{\"delta\":{\"content\":\"\xED\xA0\x80\"}}]}",      // encoded surrogate
      "{\"choices\":[{\"delta\":{\"content\":\"\xF4\x90\x80\x80\"}}]}",  // past U+10FFFF
      "{\"choices\":[{\"delta\":{\"content\":\"\xF5\x80\x80\x80\"}}]}",
      "{\"choices\":[{\"delta\":{\"content\":\"\x80\"}}]}",
      "{\"choices\":[{\"delta\":{\"content\":\"a\x7F\"}}]}",  // DEL is allowed
      "{\"choices\":[{\"delta\":{\"content\":\"a\x1F\"}}]}",  // raw control character
      "{\"choices\":[{\"delta\":{\"content\":\"a\tb\"}}]}",
      "{\"choices\":[{\"delta\":{\"content\":\"\xFF\"}}]}",
      "\xEF\xBB\xBF{\"choices\":[]}",  // nlohmann skips a leading BOM
      "\xEF\xBB{\"choices\":[]}",
      " \xEF\xBB\xBF{\"choices\":[]}",
      // Keys are compared decoded; a key the scanner reads, repeated, keeps the last.
      R"({"choices":[{"delta":{"\u0063ontent":"abc"}}]})",
      R"({"ch\u006fices":[{"delta":{"content":"abc"}}]})",
      R"({"choices":[{"delta":{"content\u0000":"abc"}}]})",
      R"({"choices":[{"delta":{"content":"abc","content":""}}]})",
      R"({"choices":[{"delta":{"content":"","content":"abc"}}]})",
      R"({"choices":[{"delta":{"content":"a"},"delta":{}}]})",
      R"({"choices":[{"finish_reason":"stop","finish_reason":null}]})",
      R"({"choices":[{"delta":{"content":"a"}}],"choices":[]})",
      R"({"choices":[],"usage":{"prompt_tokens":1},"usage":null})",
      R"({"choices":[],"usage":{"prompt_tokens":1,"prompt_tokens":2}})",
      R"({"error":null,"choices":[],"error":{"message":"late"}})",
      R"({"choices":[{"delta":{"tool_calls":[],"tool_calls":[{}]}}]})",
      R"({"choices":[{"delta":{"x":1,"x":2,"content":"ok"}}],"id":"a","id":"b"})",
      // Numbers: the grammar, the integer / float split and the usage clamps.
      R"({"choices":[],"usage":{"prompt_tokens":1e3,"completion_tokens":1.0,"total_tokens":-0}})",
      R"({"choices":[],"usage":{"prompt_tokens":-0,"completion_tokens":0,"total_tokens":0}})",
      R"({"choices":[],"usage":{"prompt_tokens":18446744073709551616,"completion_tokens":18446744073709551615}})",
      R"({"choices":[],"usage":{"prompt_tokens":9223372036854775808,"completion_tokens":-9223372036854775809}})",
      R"({"choices":[],"usage":{"prompt_tokens":1000000000000,"completion_tokens":1000000000001,"total_tokens":999999999999}})",
      R"({"choices":[],"usage":{"prompt_tokens":"5","completion_tokens":null,"total_tokens":true}})",
      R"({"choices":[],"usage":{"prompt_tokens":01}})",
      R"({"choices":[],"usage":{"prompt_tokens":1.}})",
      R"({"choices":[],"usage":{"prompt_tokens":.5}})",
      R"({"choices":[],"usage":{"prompt_tokens":-}})",
      R"({"choices":[],"usage":{"prompt_tokens":+1}})",
      R"({"choices":[],"usage":{"prompt_tokens":1e}})",
      R"({"choices":[],"usage":{"prompt_tokens":1E+2,"completion_tokens":2e-2}})",
      R"({"choices":[],"x":1e308,"usage":{"prompt_tokens":3}})",
      R"({"choices":[],"x":1.7976931348623157e308})",
      R"({"choices":[],"x":1.8e308})",  // overflows a double: nlohmann rejects it
      R"({"choices":[],"x":1e400})",
      R"({"choices":[],"x":-1e400})",
      R"({"choices":[],"x":0e99999,"y":1e-400})",
      R"({"choices":[],"x":)" + std::string(400, '9') + "}",
      R"({"choices":[],"x":0.)" + std::string(400, '0') + "1e400}",
      R"({"choices":[],"x":NaN})",
      R"({"choices":[],"x":0x10})",
      // Whitespace: space, tab, CR, LF only.
      " \t\r\n{ \"choices\" :\n[ { \"delta\" : { \"content\" : \"a\" } , \"finish_reason\" : "
      "\"stop\" } ] }\r\n",
      "{\"choices\":[]}\f",
      "{\"choices\":[]}\v",
      "\xC2\xA0{\"choices\":[]}",
      // Shapes: choices that are not objects, deltas that are not objects, tool calls.
      R"({"choices":[1,"x",null,true,[],[{"delta":{"content":"no"}}],{"finish_reason":false}]})",
      R"({"choices":[{"delta":null,"finish_reason":0},{"delta":"content"},{"delta":[{"content":"x"}]}]})",
      R"({"choices":[{"delta":{"content":null,"refusal":5,"reasoning":[],"reasoning_content":{}}}]})",
      R"({"choices":[{"delta":{"content":"a","refusal":"bc","reasoning":"def","reasoning_content":"ghij"}},{"delta":{"content":"k"}}]})",
      R"({"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"name":"f","arguments":"{\"a\":[1,{\"b\":null}]}"}}]}}]})",
      R"({"choices":[{"delta":{"tool_calls":{}}}]})",
      R"({"choices":[{"delta":{"tool_calls":[null]}}]})",
      R"({"choices":[{"delta":{"function_call":null}},{"delta":{"function_call":false}}]})",
      R"({"choices":[{"delta":{"function_call":{}}}]})",
      R"({"choices":[{"delta":{"choices":[{"delta":{"content":"nested"}}]}}],"x":{"choices":[]}})",
      R"({"choices":[{"message":{"content":"not a delta"},"finish_reason":"stop"}]})",
      R"({"usage":{"prompt_tokens":1},"choices":[]})",
      R"({"choices":[{}],"usage":{}})",
      R"({"choices":[],"usage":[]})",
      R"({"choices":{}})",
      R"({"choices":null})",
      R"({"choices":"[]"})",
      R"({"id":"x"})",
      R"({})",
      // In-band errors.
      R"({"error":{"message":"overloaded","type":"server_error"}})",
      R"({"error":{"message":5}})",
      R"({"error":"boom","choices":[]})",
      R"({"error":null,"choices":[{"delta":{"content":"ok"}}]})",
      R"({"error":false,"choices":[]})",
      // Not JSON, not an object, or something after it.
      "",
      " ",
      "null",
      "[1,2]",
      R"("choices")",
      "{not json",
      R"({"choices":[]})"
      "x",
      R"({"choices":[]} {})",
      R"({"choices":[]}})",
      R"({"choices":[],})",
      R"({"choices":[,]})",
      R"({"choices":[1,]})",
      R"({"choices" []})",
      R"({'choices':[]})",
      R"({"choices":[]/*c*/})",
      R"({"choices":[{"delta":{"content":"abc}}]})",
      R"({"choices":[tru]})",
      R"({"choices":[nulls]})",
      R"({"choices":[{"delta":{"content":"a"}}])",
      "{\"choices\":[]}\0"s,
      "{\"choices\":[{\"delta\":{\"content\":\"a\0b\"}}]}"s,
      "\0{\"choices\":[]}"s,
      // Nesting around the limit.
      R"({"choices":)" + std::string(kMaxJsonDepth - 1, '[') + std::string(kMaxJsonDepth - 1, ']') +
          "}",
      R"({"choices":)" + std::string(kMaxJsonDepth, '[') + std::string(kMaxJsonDepth, ']') + "}",
      R"({"choices":[],"x":)" + std::string(kMaxJsonDepth - 1, '[') +
          std::string(kMaxJsonDepth - 1, ']') + "}",
      R"({"choices":[],"x":)" + std::string(kMaxJsonDepth, '[') + std::string(kMaxJsonDepth, ']') +
          "}",
      nested_objects(kMaxJsonDepth),
      nested_objects(kMaxJsonDepth + 1),
      R"({"choices":[{"delta":{"tool_calls":)" + std::string(50'000, '[') +
          std::string(50'000, ']') + "}}]}",
      R"({"choices":[],"x":)" + std::string(50'000, '[') + "}",
  };
  static_assert(std::size(inputs) >= 60);
  for (const std::string& data : inputs) ExpectSameAsReference(data);
}

TEST(ChatChunkScanner, AgreesWithTheReferenceOnEveryTruncation) {
  const std::string chunks[] = {
      R"({"id":"c","choices":[{"index":0,"delta":{"content":"h\u00e9\ud83d\ude00 \"q\"","tool_calls":[{"index":0}]},"finish_reason":"stop"}],"usage":{"prompt_tokens":12,"completion_tokens":3e0,"total_tokens":-1}})",
      "\xEF\xBB\xBF {\"choices\" : [ { \"delta\" : { \"reasoning\" : \"\xF0\x9F\x98\x80\" } } ] , "
      "\"error\" : null }\r\n",
  };
  for (const std::string& chunk : chunks) {
    for (std::size_t n = 0; n <= chunk.size(); ++n)
      ExpectSameAsReference(std::string_view(chunk).substr(0, n));
  }
}

// Strings are scanned eight bytes at a time: every byte value, at every offset
// in and across those eight-byte blocks, in a value and in a key.
TEST(ChatChunkScanner, AgreesWithTheReferenceOnEveryByteAtEveryOffset) {
  for (int offset = 0; offset < 20; ++offset) {
    for (int byte = 0; byte < 256; ++byte) {
      std::string text(20, 'a');
      text[offset] = static_cast<char>(byte);
      ExpectSameAsReference(R"({"choices":[{"delta":{"content":")" + text + R"("}}]})");
      ExpectSameAsReference(R"({"choices":[{"delta":{")" + text + R"(":"x"}}]})");
    }
  }
}

// The hot path: the everyday chunks are classified by the scanner alone (it
// leaves `json` null; falling back to parse_chunk would fill it).
TEST(ChatChunkScanner, ClassifiesTheCommonChunksWithoutParsing) {
  auto content = inspect_chunk(
      R"({"id":"chatcmpl-1","object":"chat.completion.chunk","created":1727000000,"model":"gpt-4o-mini","choices":[{"index":0,"delta":{"content":"Hello"},"finish_reason":null}]})");
  EXPECT_EQ(content.kind, ChatChunk::Kind::kChunk);
  EXPECT_TRUE(content.has_output);
  EXPECT_EQ(content.output_chars, 5u);
  EXPECT_TRUE(content.json.is_null());

  auto usage = inspect_chunk(
      R"({"id":"chatcmpl-1","object":"chat.completion.chunk","created":1727000000,"model":"gpt-4o-mini","choices":[],"usage":{"prompt_tokens":9,"completion_tokens":12,"total_tokens":21}})");
  EXPECT_TRUE(usage.usage_only);
  ASSERT_TRUE(usage.usage);
  EXPECT_EQ(usage.usage->total_tokens, 21);
  EXPECT_TRUE(usage.json.is_null());

  // parse_chunk is the one that keeps the document.
  auto parsed =
      parse_chunk(R"({"choices":[{"delta":{"content":"Hello"}}],"usage":{"prompt_tokens":1}})");
  ASSERT_TRUE(parsed.json.is_object());
  EXPECT_EQ(parsed.json["choices"][0]["delta"]["content"], "Hello");
}

// A stream's chunks share their opening members: with the stream's prefix,
// each chunk after the first is scanned from its "choices", with the same
// answer as a whole scan.
ChatChunk Resumed(std::string_view data, ChunkPrefix& prefix) {
  ChatChunk c;
  inspect_chunk(data, c, prefix);
  return c;
}

void ExpectSameChunk(const ChatChunk& a, const ChatChunk& b) {
  EXPECT_EQ(a.kind, b.kind);
  EXPECT_EQ(a.has_output, b.has_output);
  EXPECT_EQ(a.has_finish, b.has_finish);
  EXPECT_EQ(a.usage, b.usage);
  EXPECT_EQ(a.output_chars, b.output_chars);
  EXPECT_EQ(a.json, b.json);
  EXPECT_EQ(a.plain, b.plain);
  EXPECT_EQ(a.content, b.content);
  EXPECT_EQ(a.finish_reason, b.finish_reason);
  EXPECT_EQ(a.meta_keys, b.meta_keys);
  EXPECT_EQ(a.meta, b.meta);
  EXPECT_EQ(a.has_reasoning, b.has_reasoning);
  EXPECT_EQ(a.usage_only, b.usage_only);
  EXPECT_EQ(a.error_message, b.error_message);
  EXPECT_EQ(a.plain_choice, b.plain_choice);
  EXPECT_EQ(a.has_role, b.has_role);
  EXPECT_EQ(a.has_content, b.has_content);
  EXPECT_EQ(a.has_finish_reason, b.has_finish_reason);
  EXPECT_EQ(a.role, b.role);
  EXPECT_EQ(a.usage_json, b.usage_json);
}

TEST(ChatChunkPrefix, ResumesAfterTheMembersAStreamsChunksShare) {
  const std::string head =
      R"({"id":"chatcmpl-1","object":"chat.completion.chunk","created":1727000000,"model":"gpt-4o-mini","system_fingerprint":"fp_1",)";
  const std::string chunks[] = {
      head +
          R"("choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]})",
      head + R"("choices":[{"index":0,"delta":{"content":"Hel"},"finish_reason":null}]})",
      head +
          R"("choices":[{"index":0,"delta":{"content":"lo"},"finish_reason":null}],"obfuscation":"x"})",
      head + R"("choices":[{"index":0,"delta":{},"finish_reason":"stop"}]})",
      head + R"("choices":[],"usage":{"prompt_tokens":9,"completion_tokens":2,"total_tokens":11}})",
  };
  ChunkPrefix prefix;
  for (const std::string& data : chunks) {
    const ChatChunk c = Resumed(data, prefix);
    ExpectSameChunk(c, inspect_chunk(data));
    EXPECT_TRUE(c.plain);
    EXPECT_EQ(c.meta[2], R"("gpt-4o-mini")");
    EXPECT_EQ(prefix.text(), head);  // up to the key of "choices"
  }
}

TEST(ChatChunkPrefix, AChunkThatOpensDifferentlyIsScannedWholeAndBecomesThePrefix) {
  ChunkPrefix prefix;
  const std::string a = R"({"id":"a","created":123,"choices":[{"delta":{"content":"x"}}]})";
  // A longer number in the same place: the prefix ends after a comma, so
  // "123" is never taken for the start of "1234".
  const std::string b = R"({"id":"a","created":1234,"choices":[{"delta":{"content":"y"}}]})";
  const std::string c = R"({"choices":[{"delta":{"content":"z"}}],"id":"a"})";
  ExpectSameChunk(Resumed(a, prefix), inspect_chunk(a));
  EXPECT_EQ(prefix.text(), R"({"id":"a","created":123,)");
  const ChatChunk rb = Resumed(b, prefix);
  ExpectSameChunk(rb, inspect_chunk(b));
  EXPECT_EQ(rb.meta[1], "1234");
  EXPECT_EQ(prefix.text(), R"({"id":"a","created":1234,)");
  ExpectSameChunk(Resumed(c, prefix), inspect_chunk(c));
  EXPECT_EQ(prefix.text(), "{");  // "choices" first: nothing before it to skip
}

TEST(ChatChunkPrefix, WhatThePrefixSawStillCounts) {
  // A repeated id (nlohmann keeps the last: not plain) and a null error in
  // the prefix; a malformed chunk after it falls back and keeps the prefix.
  const std::string head = R"({"id":"a","error":null,"id":"b",)";
  ChunkPrefix prefix;
  for (const std::string& data : {head + R"("choices":[{"delta":{"content":"x"}}]})",
                                  head + R"("choices":[{"delta":{"content":"y"}}]})",
                                  head + R"("choices":[{"delta":{"content":"y"}}],})",
                                  head + R"("choices":[{"delta":{"content":"z"}}],"error":null})",
                                  head + R"("choices":[{"delta":{"content":"w"}}]})"}) {
    const ChatChunk c = Resumed(data, prefix);
    ExpectSameChunk(c, inspect_chunk(data));
    EXPECT_FALSE(c.plain);
    EXPECT_EQ(prefix.text(), head);
  }
  EXPECT_EQ(Resumed(head + R"("choices":[]})", prefix).kind, ChatChunk::Kind::kChunk);
}

TEST(ChatChunkPrefix, AContentChunkLikeTheLastIsReadThroughItsChoiceTemplate) {
  const std::string head = R"({"id":"c","object":"chat.completion.chunk","created":1,)";
  const std::string role =
      R"("choices":[{"index":0,"delta":{"role":"assistant","content":"","refusal":null},"logprobs":null,"finish_reason":null}]})";
  const std::string like = R"("choices":[{"index":0,"delta":{"content":")";
  const std::string rest = R"("},"logprobs":null,"finish_reason":null}])";
  ChunkPrefix prefix;
  ExpectSameChunk(Resumed(head + role, prefix), inspect_chunk(head + role));
  EXPECT_EQ(
      prefix.choice(),
      R"([{"index":0,"delta":{"role":"assistant","content":","refusal":null},"logprobs":null,"finish_reason":null}])");
  EXPECT_TRUE(prefix.role.set);
  const std::string first = head + like + "Hel" + rest + "}";
  ExpectSameChunk(Resumed(first, prefix), inspect_chunk(first));
  // The member without the string between the content's quotes.
  const std::string learnt =
      R"([{"index":0,"delta":{"content":"},"logprobs":null,"finish_reason":null}])";
  EXPECT_EQ(prefix.choice(), learnt);
  EXPECT_EQ(prefix.choice_head, 32u);  // up to the opening quote
  EXPECT_FALSE(prefix.role.set);
  // Content chunks that only differ in the string (and in what follows the
  // member): the same answers as a whole scan, and the template stays.
  for (const std::string content : {"lo", "", R"(\"},\"logprobs\":null}])",
                                    R"(\u00e9\ud83d\ude00 \n\/)", "\xc3\xa9\xe4\xb8\xad"}) {
    for (const std::string after : {"}", R"(,"obfuscation":"pad"})", R"(,"usage":null} )"}) {
      const std::string data = head + like + content + rest + after;
      const ChatChunk c = Resumed(data, prefix);
      ExpectSameChunk(c, inspect_chunk(data));
      EXPECT_TRUE(c.plain) << data;
      EXPECT_EQ(c.content.data(), data.data() + head.size() + like.size());
      EXPECT_EQ(prefix.choice(), learnt);
    }
  }
  // Not a string the whole scan accepts, or not the same bytes after it:
  // exactly what the whole scan says.
  for (const std::string& data : {
           head + like + "\xc3" + rest + "}",                // broken UTF-8
           head + like + "a\nb" + rest + "}",                // a raw control character
           head + like + R"(\x)" + rest + "}",               // a bad escape
           head + like + "lo" + rest,                        // the object never closes
           head + like + "lo" + rest + "},",                 // trailing bytes
           head + like + "lo" + rest + R"(,"choices":[]})",  // "choices" twice
           head + like + "lo" + rest + R"(,"usage":{"prompt_tokens":1}})",
           head + like + "lo" + R"("},"logprobs":null,"finish_reason":"stop"}]})",
           head + like + "lo" + R"(","role":"assistant"},"finish_reason":null}]})",
           head + like + "lo" + R"("},"logprobs":{"content":[]},"finish_reason":null}]})",
           head + like + "lo" + R"("},"logprobs":null,"finish_reason":null},{"delta":{}}]})",
       }) {
    ExpectSameChunk(Resumed(data, prefix), inspect_chunk(data));
  }
  // A role and a finish reason around the content: their views point into
  // each new chunk.
  const std::string last =
      head +
      R"("choices":[{"delta":{"role":"assistant","content":"a"},"finish_reason":"stop","index":0}]})";
  ExpectSameChunk(Resumed(last, prefix), inspect_chunk(last));
  const std::string again =
      head +
      R"("choices":[{"delta":{"role":"assistant","content":"bc"},"finish_reason":"stop","index":0}]})";
  const ChatChunk c = Resumed(again, prefix);
  ExpectSameChunk(c, inspect_chunk(again));
  EXPECT_EQ(c.role, "assistant");
  EXPECT_EQ(c.finish_reason, "stop");
  EXPECT_EQ(c.role.data(), again.data() + again.find("assistant"));
  EXPECT_EQ(c.finish_reason.data(), again.data() + again.find("stop"));
}

// What follows "choices" in most streams (",\"usage\":null}") is learnt
// with the choice template: a chunk that ends the same way is classified
// from its content string alone, with the same answer as a whole scan.
// A stream's usual content chunk: head + like + content + rest + usual.
struct UsualChunk {
  const std::string head = R"({"id":"c","object":"chat.completion.chunk","created":1,)";
  const std::string like = R"("choices":[{"index":0,"delta":{"content":")";
  const std::string rest = R"("},"logprobs":null,"finish_reason":null}])";
  const std::string usual = R"(,"usage":null})";
  // Two of them through `prefix`, each as a whole scan reads it.
  void learn(ChunkPrefix& prefix) const {
    for (const std::string content : {"Hel", "lo"}) {
      const std::string data = head + like + content + rest + usual;
      ExpectSameChunk(Resumed(data, prefix), inspect_chunk(data));
    }
  }
};

TEST(ChatChunkPrefix, AChunkThatEndsLikeTheLastIsReadFromItsContentAlone) {
  const UsualChunk u;
  const std::string &head = u.head, &like = u.like, &rest = u.rest, &usual = u.usual;
  ChunkPrefix prefix;
  u.learn(prefix);
  EXPECT_TRUE(prefix.after_set);
  EXPECT_EQ(prefix.after(), usual);
  for (const std::string content : {"", " world", R"(\",\"usage\":null})", R"(\u00e9)"}) {
    const std::string data = head + like + content + rest + usual;
    const ChatChunk c = Resumed(data, prefix);
    ExpectSameChunk(c, inspect_chunk(data));
    EXPECT_TRUE(c.plain) << data;
    EXPECT_EQ(c.content.data(), data.data() + head.size() + like.size());
    EXPECT_EQ(prefix.after(), usual);
  }
  // Ends the same way but is not the same chunk: what a whole scan says.
  for (const std::string& data : {
           head + like + "lo" + rest + R"(,"usage":null,"usage":null})",  // "usage" twice
           head + like + "lo" + rest + R"(,"error":{"message":"x"},"usage":null})",
           head + like + "lo" + R"(","refusal":"no"},"finish_reason":null}],"usage":null})",
           head + like + "lo" + rest + usual + usual,  // trailing bytes
           head + " " + like + "lo" + rest + usual,
       }) {
    ExpectSameChunk(Resumed(data, prefix), inspect_chunk(data));
  }
  // Only an ending that shows in nothing but which keys were seen (and
  // `plain`) is learnt: not a model or a usage object (each shows in the
  // answer); it is learnt again from the next chunk that has one.
  for (const std::string after : {R"(,"model":"m"})", R"(,"usage":{"prompt_tokens":1}})"}) {
    const std::string data = head + like + "lo" + rest + after;
    ExpectSameChunk(Resumed(data, prefix), inspect_chunk(data));
    EXPECT_FALSE(prefix.after_set) << after;
    const std::string next = head + like + "x" + rest + usual;
    ExpectSameChunk(Resumed(next, prefix), inspect_chunk(next));
    EXPECT_TRUE(prefix.after_set);
  }
}

// The usual chunk (ChunkPrefix::usual) is known at the end of a scan that
// read a chunk whole: a choice learnt by a chunk whose scan then gave up (a
// repeated key, trailing bytes) leaves none, and the chunks after it are
// read as a whole scan reads them.
TEST(ChatChunkPrefix, AChoiceLearntByAChunkNotReadToItsEndLeavesNoUsualChunk) {
  const UsualChunk u;
  const std::string &head = u.head, &like = u.like, &rest = u.rest, &usual = u.usual;
  const std::string other = R"("choices":[{"index":0,"delta":{"role":"assistant","content":")";
  ChunkPrefix prefix;
  u.learn(prefix);
  ASSERT_TRUE(prefix.usual);
  EXPECT_EQ(prefix.text(), head);
  for (const std::string& broken : {
           head + other + "x" + rest + R"(,"usage":null,"usage":null})",
           head + other + "x" + rest + usual + " x",
       }) {
    ExpectSameChunk(Resumed(broken, prefix), inspect_chunk(broken));
    EXPECT_FALSE(prefix.usual) << broken;
    for (const std::string& next :
         {head + like + "a" + rest + usual, head + other + "b" + rest + usual,
          head + like + "c" + rest + usual}) {
      ExpectSameChunk(Resumed(next, prefix), inspect_chunk(next));
    }
    EXPECT_TRUE(prefix.usual);
  }
}

// A number or a string that changes from chunk to chunk after the choices
// (OpenAI's "obfuscation", a benchmark's time stamp) is a hole in the
// learnt ending: any value of that kind matches it.
TEST(ChatChunkPrefix, AValueThatChangesEveryChunkIsAHoleInTheLearntEnding) {
  const std::string head = R"({"id":"c","object":"chat.completion.chunk","created":1,)";
  const std::string like = R"("choices":[{"index":0,"delta":{"content":")";
  const std::string rest = R"("},"logprobs":null,"finish_reason":null}])";
  ChunkPrefix prefix;
  const auto both = [&](const std::string& tail, const std::string& content = "lo") {
    const std::string data = head + like + content + rest + tail;
    const ChatChunk c = Resumed(data, prefix);
    ExpectSameChunk(c, inspect_chunk(data));
    return c;
  };
  both(R"(,"usage":null,"obfuscation":"a1"})", "Hel");
  EXPECT_TRUE(prefix.after_set);
  EXPECT_EQ(prefix.after(), R"(,"usage":null,"obfuscation":})");
  EXPECT_EQ(prefix.hole_count, 1u);
  for (const std::string pad : {"b22", "", R"(\"},\"x)", R"(\u00e9)"}) {
    EXPECT_TRUE(both(R"(,"usage":null,"obfuscation":")" + pad + R"("})").plain) << pad;
    EXPECT_EQ(prefix.after(), R"(,"usage":null,"obfuscation":})");
  }
  // Another kind of value, or not a value at all: what a whole scan says.
  for (const std::string tail :
       {R"(,"usage":null,"obfuscation":7})", R"(,"usage":null,"obfuscation":null})",
        R"(,"usage":null,"obfuscation":"\x"})", R"(,"usage":null,"obfuscation":"a")",
        R"(,"usage":null,"obfuscation":"a"}})"}) {
    both(tail);
  }
  // A time stamp: the chunk is not plain (the field would be kept), and
  // stays so through the hole.
  both(R"(,"x_sim_ns":87577498608592})");
  EXPECT_TRUE(prefix.after_set);
  EXPECT_EQ(prefix.after(), R"(,"x_sim_ns":})");
  EXPECT_FALSE(prefix.after_plain);
  for (const std::string ns : {"87577499608441", "1", "-0", "1.5e3", "01", "1.", R"("s")"}) {
    const ChatChunk c = both(R"(,"x_sim_ns":)" + ns + "}");
    EXPECT_FALSE(c.plain) << ns;
  }
  // Two holes, and a bool (not a hole: the same text or no match).
  both(R"(,"a":1,"b":"x","c":true})");
  EXPECT_EQ(prefix.hole_count, 2u);
  EXPECT_EQ(prefix.after(), R"(,"a":,"b":,"c":true})");
  both(R"(,"a":22,"b":"yy","c":true})");
  both(R"(,"a":22,"b":"yy","c":false})");
}

// Found by fuzz_sse_parser (tests/fuzz/findings/sse_parser-resume-whitespace-
// before-first-key): a prefix that ends at the first key ("{") resumed a chunk
// with whitespace after its '{' as if a key were there; the scan failed and
// the chunk went to parse_chunk, a whole parse the scanner exists to avoid.
TEST(ChatChunkPrefix, WhitespaceBeforeTheFirstKeyIsResumedLikeAWholeScan) {
  ChunkPrefix prefix;
  const std::string a = R"({"choices":[{"delta":{"content":"x"}}]})";
  ExpectSameChunk(Resumed(a, prefix), inspect_chunk(a));
  EXPECT_EQ(prefix.text(), "{");
  for (const std::string b :
       {R"({ "choices":[{"delta":{"reasoning":"hmm"}}]})", "{\n\t\"choices\":[]}", "{ }"}) {
    const ChatChunk c = Resumed(b, prefix);
    ExpectSameChunk(c, inspect_chunk(b));
    if (b != "{ }") {
      EXPECT_TRUE(c.json.is_null()) << b;  // scanned, not parsed
    }
  }
}

}  // namespace
}  // namespace llmgate::providers
