// The Gemini generateContent protocol: requests built from OpenAI chat
// documents, SSE streams of GenerateContentResponses translated into
// chat.completion.chunks, whole answers and error bodies. The upstream
// documents follow Google's published examples (the streamGenerateContent
// ?alt=sse output, the thinking, function-calling and error pages).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "providers/chat_chunk.h"
#include "providers/completion_assembler.h"
#include "providers/gemini_conversation.h"
#include "providers/gemini_response.h"
#include "providers/sse_parser.h"
#include "providers/upstream_protocol.h"
#include "tests/unit/providers/written_body.h"

namespace llmgate::providers {
namespace {

using nlohmann::json;
using Kind = UpstreamEvent::Kind;

// A copy of one neutral event (its views die with the sink call, so
// chunk.content must not be read).
struct Event {
  Kind kind;
  std::string data, raw, message;
  ChatChunk chunk;
  json doc() const { return json::parse(data); }
  json choice() const { return doc()["choices"][0]; }
};

class Collect final : public UpstreamStream::Sink {
 public:
  void on(UpstreamEvent& e) override {
    events.push_back(
        {e.kind, std::string(e.data), std::string(e.raw), e.message, std::move(e.chunk)});
  }
  std::vector<Event> events;
};

// "data: <json>\r\n\r\n" per document, as Google frames them.
std::string sse(const std::vector<std::string>& docs) {
  std::string out;
  for (const auto& d : docs) out += "data: " + d + "\r\n\r\n";
  return out;
}

class GeminiBase : public ::testing::Test {
 protected:
  const UpstreamProtocol& gemini = gemini_protocol();
  config::Provider provider;
  UpstreamRequest req{"gemini-2.5-flash", true, true, 1700000000, &provider};

  // The stream's events; end() too when `end`.
  std::vector<Event> stream(std::string_view bytes, bool end = true) {
    auto translator = gemini.open_stream(req);
    Collect sink;
    SseParser parser(1 << 20);
    parser.feed(bytes, [&](const Frame& ev) { translator->translate(ev, sink); });
    if (end) translator->end(sink);
    return sink.events;
  }

  json body(const std::string& client) {
    auto doc = RequestBody::from(json::parse(client));
    auto out = gemini.body(doc, req);
    if (auto* u = std::get_if<Untranslatable>(&out)) {
      ADD_FAILURE() << "refused: " << u->message;
      return nullptr;
    }
    return json::parse(std::get<std::string>(out));
  }

  Untranslatable refusal(const std::string& client) {
    auto doc = RequestBody::from(json::parse(client));
    auto out = gemini.body(doc, req);
    if (auto* u = std::get_if<Untranslatable>(&out)) return *u;
    ADD_FAILURE() << "translated: " << std::get<std::string>(out);
    return {};
  }
};

class GeminiStream : public GeminiBase {};
class GeminiRequest : public GeminiBase {};
class GeminiAnswer : public GeminiBase {};

// The streamGenerateContent?alt=sse output Google shows for "Hello": text
// in pieces, then a last piece with an empty text (a thought signature),
// the finish and the usage.
const std::vector<std::string> kDocsStream = {
    R"({"candidates": [{"content": {"role": "model","parts": [{"text": "Hello!"}]}}],"usageMetadata": {"trafficType": "ON_DEMAND"},"modelVersion": "gemini-3.1-flash-lite-preview","createTime": "2026-03-10T14:54:45.066123Z","responseId": "tTCwacuEBMvnitYP06qsgQY"})",
    R"({"candidates": [{"content": {"role": "model","parts": [{"text": " How can I help you today"}]}}],"usageMetadata": {"trafficType": "ON_DEMAND"},"modelVersion": "gemini-3.1-flash-lite-preview","createTime": "2026-03-10T14:54:45.066123Z","responseId": "tTCwacuEBMvnitYP06qsgQY"})",
    R"({"candidates": [{"content": {"role": "model","parts": [{"text": "?"}]}}],"usageMetadata": {"trafficType": "ON_DEMAND"},"modelVersion": "gemini-3.1-flash-lite-preview","createTime": "2026-03-10T14:54:45.066123Z","responseId": "tTCwacuEBMvnitYP06qsgQY"})",
    R"({"candidates": [{"content": {"role": "model","parts": [{"text": "","thoughtSignature": "AY89a18iOcFus5wr5bW5xN6zZ4aUiCyhgmg6HE2YjtYDV/dwZ5oZlZHeTmiUKv34qq0="}]},"finishReason": "STOP"}],"usageMetadata": {"promptTokenCount": 1,"candidatesTokenCount": 9,"totalTokenCount": 10,"trafficType": "ON_DEMAND","promptTokensDetails": [{"modality": "TEXT","tokenCount": 1}],"candidatesTokensDetails": [{"modality": "TEXT","tokenCount": 9}]},"modelVersion": "gemini-3.1-flash-lite-preview","createTime": "2026-03-10T14:54:45.066123Z","responseId": "tTCwacuEBMvnitYP06qsgQY"})",
};

TEST_F(GeminiStream, TranslatesTheDocumentedTextStream) {
  const auto ev = stream(sse(kDocsStream));
  ASSERT_EQ(ev.size(), 6u);
  for (std::size_t i = 0; i < 5; ++i) {
    EXPECT_EQ(ev[i].kind, Kind::kData) << i;
    EXPECT_TRUE(ev[i].raw.empty()) << i;  // translated: the client API frames `data`
    EXPECT_EQ(ev[i].chunk.kind, ChatChunk::Kind::kChunk) << i;
  }
  EXPECT_EQ(ev[0].doc(), json::parse(R"({"id":"tTCwacuEBMvnitYP06qsgQY",
      "object":"chat.completion.chunk","created":1700000000,
      "model":"gemini-3.1-flash-lite-preview",
      "choices":[{"index":0,"delta":{"role":"assistant","content":"Hello!"},
                  "logprobs":null,"finish_reason":null}]})"));
  EXPECT_TRUE(ev[0].chunk.has_output);
  EXPECT_EQ(ev[1].choice()["delta"], json::parse(R"({"content":" How can I help you today"})"));
  EXPECT_TRUE(ev[1].chunk.plain);  // the relay's fast path takes it unparsed
  EXPECT_EQ(ev[2].choice()["delta"], json::parse(R"({"content":"?"})"));
  // The signature-only part says nothing; its finish still goes out.
  EXPECT_EQ(ev[3].choice(),
            json::parse(R"({"index":0,"delta":{},"logprobs":null,"finish_reason":"stop"})"));
  EXPECT_FALSE(ev[3].chunk.has_output);
  EXPECT_TRUE(ev[3].chunk.has_finish);
  EXPECT_TRUE(ev[4].chunk.usage_only);
  EXPECT_EQ(ev[4].doc()["usage"],
            json::parse(R"({"prompt_tokens":1,"completion_tokens":9,"total_tokens":10})"));
  EXPECT_EQ(ev[5].kind, Kind::kDone);
  EXPECT_TRUE(ev[5].data.empty());
  EXPECT_TRUE(ev[5].raw.empty());
}

TEST_F(GeminiStream, NamesTheChunksAfterTheDeploymentWhenTheResponseDoesNot) {
  const auto ev = stream(sse(
      {R"({"candidates":[{"content":{"parts":[{"text":"Hi"}],"role":"model"},"finishReason":"STOP"}]})"}));
  ASSERT_EQ(ev.size(), 2u);  // no usage seen: no usage chunk, still done
  EXPECT_EQ(ev[0].doc()["id"], "chatcmpl-gemini-1700000000");
  EXPECT_EQ(ev[0].doc()["model"], "gemini-2.5-flash");
  EXPECT_EQ(ev[1].kind, Kind::kDone);
}

// Thinking with includeThoughts: thought summaries arrive as parts marked
// thought: true, before the answer.
TEST_F(GeminiStream, ThoughtsBecomeReasoningContentBeforeTheText) {
  const auto ev = stream(sse({
      R"({"candidates":[{"content":{"parts":[{"text":"**Weighing Occam's Razor**\n\nI'm","thought":true},{"text":" picking an example.","thought":true}],"role":"model"},"index":0}],"responseId":"r1"})",
      R"({"candidates":[{"content":{"parts":[{"text":"Occam's Razor says","thought":false},{"text":" the simplest"}],"role":"model"},"index":0}],"responseId":"r1"})",
      R"({"candidates":[{"content":{"parts":[{"text":" explanation wins."}],"role":"model"},"finishReason":"STOP","index":0}],"usageMetadata":{"promptTokenCount":12,"candidatesTokenCount":20,"totalTokenCount":182,"thoughtsTokenCount":150},"responseId":"r1"})",
  }));
  ASSERT_EQ(ev.size(), 5u);
  EXPECT_EQ(ev[0].choice()["delta"], json::parse(R"({"role":"assistant","content":"",
      "reasoning_content":"**Weighing Occam's Razor**\n\nI'm picking an example."})"));
  EXPECT_TRUE(ev[0].chunk.has_reasoning);
  EXPECT_TRUE(ev[0].chunk.has_output);
  EXPECT_EQ(ev[1].choice()["delta"],
            json::parse(R"({"content":"Occam's Razor says the simplest"})"));
  EXPECT_FALSE(ev[1].chunk.has_reasoning);
  EXPECT_EQ(ev[2].choice()["finish_reason"], "stop");
  EXPECT_EQ(ev[3].doc()["usage"], json::parse(R"({"prompt_tokens":12,"completion_tokens":170,
      "total_tokens":182,"completion_tokens_details":{"reasoning_tokens":150}})"));
  ASSERT_TRUE(ev[3].chunk.usage);
  EXPECT_EQ(ev[3].chunk.usage->reasoning_tokens, 150);
}

// The function-calling guide's meeting example: the call comes whole in one
// part, and STOP after a call is OpenAI's "tool_calls".
TEST_F(GeminiStream, FunctionCallsBecomeToolCallsAndFinishAsToolCalls) {
  const auto ev = stream(sse({
      R"({"candidates":[{"content":{"parts":[{"functionCall":{"name":"schedule_meeting","args":{"attendees":["Bob","Alice"],"date":"2025-03-27","time":"10:00","topic":"Q3 planning"}}}],"role":"model"},"index":0}],"responseId":"r9"})",
      R"({"candidates":[{"content":{"parts":[{"functionCall":{"id":"fc-7","name":"notify","args":{}}},{"functionCall":{"name":"log"}}],"role":"model"},"finishReason":"STOP","index":0}],"responseId":"r9"})",
  }));
  ASSERT_EQ(ev.size(), 3u);
  EXPECT_EQ(ev[0].choice()["delta"], json::parse(R"({"role":"assistant","content":"",
      "tool_calls":[{"index":0,"id":"call_0_r9","type":"function","function":{
        "name":"schedule_meeting",
        "arguments":"{\"attendees\":[\"Bob\",\"Alice\"],\"date\":\"2025-03-27\",\"time\":\"10:00\",\"topic\":\"Q3 planning\"}"}}]})"));
  EXPECT_TRUE(ev[0].chunk.has_output);
  EXPECT_EQ(ev[1].choice(), json::parse(R"({"index":0,"delta":{"tool_calls":[
      {"index":1,"id":"fc-7","type":"function","function":{"name":"notify","arguments":"{}"}},
      {"index":2,"id":"call_2_r9","type":"function","function":{"name":"log","arguments":"{}"}}]},
      "logprobs":null,"finish_reason":"tool_calls"})"));
}

TEST_F(GeminiStream, AFinishOnAContentlessLastChunkStillGoesOut) {
  const auto ev = stream(sse({
      R"({"candidates":[{"content":{"parts":[{"text":"Paris."}],"role":"model"},"index":0}],"responseId":"r2"})",
      R"({"candidates":[{"finishReason":"STOP","index":0}],"usageMetadata":{"promptTokenCount":8,"candidatesTokenCount":2,"totalTokenCount":10},"responseId":"r2"})",
  }));
  ASSERT_EQ(ev.size(), 4u);
  EXPECT_EQ(ev[1].choice(),
            json::parse(R"({"index":0,"delta":{},"logprobs":null,"finish_reason":"stop"})"));
  EXPECT_TRUE(ev[1].chunk.has_finish);
  EXPECT_EQ(ev[3].kind, Kind::kDone);
}

// Gemini has no end marker: a body that ends before any finishReason is a
// cut, and end() must not dress it up as a finished answer.
TEST_F(GeminiStream, ACutStreamEndsWithNothing) {
  const std::string bytes = sse({kDocsStream[0], kDocsStream[1]});
  const auto without_end = stream(bytes, false);
  const auto with_end = stream(bytes, true);
  ASSERT_EQ(without_end.size(), 2u);
  ASSERT_EQ(with_end.size(), 2u);
  for (const auto& e : with_end) EXPECT_FALSE(e.chunk.has_finish);
}

TEST_F(GeminiStream, UsageIsCumulativeAndTheLastOneWins) {
  const auto ev = stream(sse({
      R"({"candidates":[{"content":{"parts":[{"text":"a"}],"role":"model"}}],"usageMetadata":{"promptTokenCount":900,"cachedContentTokenCount":512,"candidatesTokenCount":1,"thoughtsTokenCount":30,"totalTokenCount":931}})",
      R"({"candidates":[{"content":{"parts":[{"text":"b"}],"role":"model"},"finishReason":"STOP"}],"usageMetadata":{"promptTokenCount":900,"cachedContentTokenCount":512,"candidatesTokenCount":5,"thoughtsTokenCount":30,"totalTokenCount":935}})",
      // Usage alone after the finish: no chunk, but it is the last word.
      R"({"usageMetadata":{"promptTokenCount":900,"cachedContentTokenCount":512,"candidatesTokenCount":7,"thoughtsTokenCount":40,"totalTokenCount":947}})",
  }));
  ASSERT_EQ(ev.size(), 4u);
  for (std::size_t i = 0; i < 2; ++i) EXPECT_FALSE(ev[i].chunk.usage) << i;
  EXPECT_EQ(ev[2].doc(), json::parse(R"({"id":"chatcmpl-gemini-1700000000",
      "object":"chat.completion.chunk","created":1700000000,"model":"gemini-2.5-flash",
      "choices":[],"usage":{"prompt_tokens":900,"completion_tokens":47,"total_tokens":947,
        "prompt_tokens_details":{"cached_tokens":512},
        "completion_tokens_details":{"reasoning_tokens":40}}})"));
  ASSERT_TRUE(ev[2].chunk.usage);
  EXPECT_EQ(ev[2].chunk.usage->cached_tokens, 512);
  EXPECT_EQ(ev[2].chunk.usage->completion_tokens, 47);
}

// The chunks are laid out as an OpenAI deployment's are (OpenAI's own,
// llmgate-sim's): the members in OpenAI's order (nlohmann's default object
// would sort them), "logprobs": null in the choice, and "usage": null on
// every chunk but the usage chunk when the client asked for usage.
TEST_F(GeminiStream, ChunksAreLaidOutAsOpenAisAre) {
  const std::string bytes = sse({
      R"({"candidates":[{"content":{"parts":[{"text":"Hello!"},{"text":"Think.","thought":true}],"role":"model"}}],"responseId":"r9","modelVersion":"gemini-x"})",
      R"({"candidates":[{"content":{"parts":[{"functionCall":{"name":"now","args":{}}}],"role":"model"},"finishReason":"STOP"}],"usageMetadata":{"promptTokenCount":5,"cachedContentTokenCount":2,"candidatesTokenCount":3,"thoughtsTokenCount":4,"totalTokenCount":12},"responseId":"r9"})",
  });
  const std::string head =
      R"({"id":"r9","object":"chat.completion.chunk","created":1700000000,"model":"gemini-x",)";
  for (const bool include_usage : {false, true}) {
    SCOPED_TRACE(include_usage ? "include_usage" : "no usage asked for");
    req.include_usage = include_usage;
    const std::string tail = include_usage ? R"(,"usage":null})" : "}";
    const auto ev = stream(bytes);
    ASSERT_EQ(ev.size(), 4u);
    EXPECT_EQ(
        ev[0].data,
        head +
            R"("choices":[{"index":0,"delta":{"role":"assistant","content":"Hello!","reasoning_content":"Think."},"logprobs":null,"finish_reason":null}])" +
            tail);
    EXPECT_EQ(
        ev[1].data,
        head +
            R"("choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_0_r9","type":"function","function":{"name":"now","arguments":"{}"}}]},"logprobs":null,"finish_reason":"tool_calls"}])" +
            tail);
    EXPECT_EQ(
        ev[2].data,
        head +
            R"("choices":[],"usage":{"prompt_tokens":5,"completion_tokens":7,"total_tokens":12,"prompt_tokens_details":{"cached_tokens":2},"completion_tokens_details":{"reasoning_tokens":4}}})");
    EXPECT_EQ(ev[3].kind, Kind::kDone);
  }
}

// A 200 whose prompt was blocked: no candidate, only promptFeedback. It must
// read as a filtered answer, never as an empty success.
TEST_F(GeminiStream, ABlockedPromptIsAContentFilterFinish) {
  const auto ev = stream(sse({
      R"({"promptFeedback":{"blockReason":"SAFETY","safetyRatings":[{"category":"HARM_CATEGORY_DANGEROUS_CONTENT","probability":"HIGH"}]},"usageMetadata":{"promptTokenCount":7,"totalTokenCount":7},"modelVersion":"gemini-2.5-flash"})",
  }));
  ASSERT_EQ(ev.size(), 3u);
  EXPECT_EQ(ev[0].choice(), json::parse(R"({"index":0,"delta":{"role":"assistant"},
      "logprobs":null,"finish_reason":"content_filter"})"));
  EXPECT_FALSE(ev[0].chunk.has_output);
  EXPECT_TRUE(ev[0].chunk.has_finish);
  EXPECT_EQ(ev[1].doc()["usage"]["prompt_tokens"], 7);
  EXPECT_EQ(ev[2].kind, Kind::kDone);
}

TEST_F(GeminiStream, FinishReasonsMapToOpenAis) {
  const std::pair<const char*, json> cases[] = {
      {"MAX_TOKENS", "length"},
      {"SAFETY", "content_filter"},
      {"RECITATION", "content_filter"},
      {"BLOCKLIST", "content_filter"},
      {"PROHIBITED_CONTENT", "content_filter"},
      {"SPII", "content_filter"},
      {"IMAGE_SAFETY", "content_filter"},
      {"OTHER", "stop"},
      {"LANGUAGE", "stop"},
      {"MALFORMED_FUNCTION_CALL", "stop"},
      {"SOMETHING_NEW", "stop"},
      {"FINISH_REASON_UNSPECIFIED", nullptr},
  };
  for (const auto& [gemini_reason, openai] : cases) {
    const auto ev = stream(
        sse({std::string(R"({"candidates":[{"content":{"parts":[{"text":"x"}]},"finishReason":")") +
             gemini_reason + R"("}]})"}));
    ASSERT_FALSE(ev.empty()) << gemini_reason;
    EXPECT_EQ(ev[0].choice()["finish_reason"], openai) << gemini_reason;
    // Not finished: a cut, so nothing at the end.
    EXPECT_EQ(ev.size(), openai.is_null() ? 1u : 2u) << gemini_reason;
  }
}

TEST_F(GeminiStream, AnErrorEventEndsTheStream) {
  const auto ev = stream(sse({
      kDocsStream[0],
      R"({"error":{"code":429,"message":"Resource has been exhausted (e.g. check quota).","status":"RESOURCE_EXHAUSTED"}})",
      kDocsStream[3],
  }));
  ASSERT_EQ(ev.size(), 2u);  // nothing after the error, not even at end()
  EXPECT_EQ(ev[1].kind, Kind::kError);
  EXPECT_EQ(ev[1].message, "RESOURCE_EXHAUSTED: Resource has been exhausted (e.g. check quota).");
}

TEST_F(GeminiStream, WhatIsNotAResponseIsMalformed) {
  const std::string deep = std::string(200, '[') + std::string(200, ']');
  const auto ev = stream(
      "data: not json\n\n"
      "data: {\"foo\":1}\n\n"
      "data: [1,2]\n\n"
      "data: {\"candidates\":{}}\n\n"
      "data: " +
      deep + "\n\n");
  ASSERT_EQ(ev.size(), 5u);
  for (const auto& e : ev) {
    EXPECT_EQ(e.kind, Kind::kMalformed);
    EXPECT_FALSE(e.message.empty());
  }
}

TEST_F(GeminiStream, ACommentBlockIsAKeepAliveOfOurOwn) {
  const auto ev = stream(": ping from somewhere\r\n\r\n", false);
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].kind, Kind::kKeepAlive);
  EXPECT_EQ(ev[0].raw, ": keep-alive\n\n");
}

// After the first response (which fixes the chunks' head) a usual one is
// read by a scan, its text carried as Google escaped it: its chunk says what
// the same response read from its document (as a stream's first) says.
TEST_F(GeminiStream, AUsualResponseSaysWhatItsDocumentSays) {
  const std::string opener = R"({"candidates":[{"content":{"parts":[{"text":"Hi"}]}}]})";
  const std::vector<std::string> responses = {
      R"({"candidates":[{"content":{"parts":[{"text":"caf\u00e9 \"q\" \/ \n \ud83d\ude00"}],"role":"model"}}]})",
      R"({"candidates":[{"content":{"parts":[{"text":"a"},{"text":"b","thought":true},{"thought":false,"text":"c"},{"thoughtSignature":"AY8"}]},"index":0}]})",
      R"({"candidates":[{"content":{"parts":[{"text":"late"}]},"finishReason":"MAX_TOKENS"},{"content":7}]})",
      R"({"candidates":[{"content":{"parts":[{"text":"x","functionCall":null}]},"finishReason":"SAFETY"}],"usageMetadata":{"promptTokenCount":-0,"candidatesTokenCount":1.0,"thoughtsTokenCount":4,"cachedContentTokenCount":2},"error":null})",
  };
  for (const auto& r : responses) {
    const auto read = stream(sse({r}));
    const auto scanned = stream(sse({opener, r}));
    ASSERT_EQ(scanned.size(), read.size() + 1) << r;
    json by_document = read[0].choice();
    by_document["delta"].erase("role");  // the first chunk's alone
    EXPECT_EQ(scanned[1].choice(), by_document) << r;
    EXPECT_EQ(scanned[1].chunk.has_output, read[0].chunk.has_output) << r;
    EXPECT_EQ(scanned[1].chunk.has_finish, read[0].chunk.has_finish) << r;
    for (std::size_t i = 1; i < read.size(); ++i) {  // the usage chunk and done, from end()
      EXPECT_EQ(scanned[i + 1].kind, read[i].kind) << r;
      if (read[i].kind == Kind::kData) {
        EXPECT_EQ(scanned[i + 1].doc()["usage"], read[i].doc()["usage"]) << r;
      }
    }
  }
  // The scan's chunk carries the text as escaped upstream.
  const auto ev = stream(sse({opener, responses[0]}));
  EXPECT_NE(ev[1].data.find(R"(caf\u00e9 \"q\" \/ \n \ud83d\ude00)"), std::string::npos)
      << ev[1].data;
}

// What the scan declines is read from the response's document, after the
// first response as before it.
TEST_F(GeminiStream, WhatTheScanDeclinesIsReadFromTheDocument) {
  const std::string opener = R"({"candidates":[{"content":{"parts":[{"text":"Hi"}]}}]})";
  auto after_opener = [&](const std::string& r) { return stream(sse({opener, r}), false); };

  auto ev = after_opener(
      R"({"candidates":[{"content":{"parts":[{"functionCall":{"name":"f","args":{"a":1}}}]},"finishReason":"STOP"}]})");
  ASSERT_EQ(ev.size(), 2u);
  EXPECT_EQ(ev[1].choice()["delta"]["tool_calls"][0]["function"]["name"], "f");
  EXPECT_EQ(ev[1].choice()["finish_reason"], "tool_calls");

  ev = after_opener(R"({"candidates":[{"content":{"parts":[{"text":"x","text":"y"}]}}]})");
  ASSERT_EQ(ev.size(), 2u);
  EXPECT_EQ(ev[1].choice()["delta"], json::parse(R"({"content":"y"})"));  // nlohmann's: the last

  ev = after_opener(R"({"promptFeedback":{"blockReason":"SAFETY"}})");
  ASSERT_EQ(ev.size(), 2u);
  EXPECT_EQ(ev[1].choice()["finish_reason"], "content_filter");

  ev = after_opener(R"({"candidates":[{"finishReason":"ST\u004fP"}]})");
  ASSERT_EQ(ev.size(), 2u);
  EXPECT_EQ(ev[1].choice()["finish_reason"], "stop");

  ev = after_opener(R"({"error":{"code":500,"message":"boom","status":"INTERNAL"}})");
  ASSERT_EQ(ev.size(), 2u);
  EXPECT_EQ(ev[1].kind, Kind::kError);

  for (const char* bad : {"not json", R"({"foo":1})", R"({"candidates":{}})",
                          R"({"candidates":[{"content":{"parts":[]}}]} x)"}) {
    ev = after_opener(bad);
    ASSERT_EQ(ev.size(), 2u) << bad;
    EXPECT_EQ(ev[1].kind, Kind::kMalformed) << bad;
  }
}

TEST(GeminiUsualResponse, ReadsTextThoughtsFinishAndUsageAndDeclinesTheRest) {
  gemini::UsualResponse u;
  ASSERT_TRUE(gemini::read_usual(
      R"({"candidates":[{"content":{"parts":[{"text":"a\nb"},{"text":"t","thought":true},{"text":"c"}]},"finishReason":"STOP"}],"usageMetadata":{"promptTokenCount":3,"candidatesTokenCount":2,"thoughtsTokenCount":1.5,"totalTokenCount":5}})",
      u));
  EXPECT_EQ(u.content, R"(a\nbc)");
  EXPECT_EQ(u.reasoning, "t");
  EXPECT_EQ(u.finish_reason, "STOP");
  ASSERT_TRUE(u.usage);
  EXPECT_EQ(u.usage->prompt, 3);
  EXPECT_EQ(u.usage->candidates, 2);
  EXPECT_FALSE(u.usage->thoughts);  // not an integer: no count
  EXPECT_FALSE(u.usage->cached);

  ASSERT_TRUE(gemini::read_usual(R"({"usageMetadata":{"promptTokenCount":7}})", u));
  EXPECT_TRUE(u.content.empty() && u.reasoning.empty() && u.finish_reason.empty());
  EXPECT_EQ(u.usage->prompt, 7);

  for (
      const char* declined : {
          R"({"error":{"message":"x"}})",
          R"({"candidates":[{"content":{"parts":[{"text":"a"}]}}],"promptFeedback":{}})",
          R"({"candidates":[{"content":{"parts":[{"functionCall":{"name":"f"}}]}}]})",
          R"({"candidates":[{"content":{"parts":[{"text":"a","thought":true,"thought":false}]}}]})",
          R"({"candidates":[],"candidates":[{"content":{"parts":[{"text":"a"}]}}]})",
          R"({"usageMetadata":{"promptTokenCount":1,"promptTokenCount":2}})",
          R"({"candidates":[{"finishReason":"\u0053TOP"}]})",
          R"({"candidates":[]})",
          R"({"candidates":[7]})",
          R"({"candidates":[{"content":{"parts":[{"text":7}]}}]})",
          R"({"modelVersion":"m"})",
          "{\"candidates\":[{\"content\":{\"parts\":[{\"text\":\"a\x01\"}]}}]}",
      }) {
    EXPECT_FALSE(gemini::read_usual(declined, u)) << declined;
  }
  const std::string usual = R"({"candidates":[{"content":{"parts":[{"text":"a"}]}}]})";
  EXPECT_TRUE(gemini::read_usual(usual, u));
  EXPECT_FALSE(gemini::read_usual(usual + '\0', u));  // what nlohmann refuses
}

// --- requests ---------------------------------------------------------------

// The conversation is written from the client's text (gemini_chat_body_text)
// for what clients send, and says what the document's translation says;
// what it does not answer exactly is left to that translation.
TEST_F(GeminiRequest, TheConversationIsWrittenAsTheDocumentsTranslationWritesIt) {
  const char* written[] = {
      R"({"model":"m","messages":[{"role":"user","content":"Hi"}],"stream":true})",
      R"({"model":"m","messages":[{"role":"system","content":"Be \"brief\"."},
          {"role":"user","content":"Hi \u00e9"},{"role":"developer","content":""},
          {"role":"developer","content":[{"type":"text","text":"French."}]},
          {"role":"assistant","content":""},{"role":"user","content":[]},
          {"role":"user","content":"again"}],"temperature":0.5,"max_tokens":100})",
      R"({"model":"m","messages":[{"role":"user","content":"Weather?"},
          {"role":"assistant","content":"Checking.","tool_calls":[
            {"id":"call_1","type":"function","function":{"name":"w","arguments":"{\"city\":\"Paris\"}"}},
            {"id":"call_2","function":{"name":"t","arguments":" "}},
            {"id":"call_3","type":"function","function":{"name":"o","arguments":{"a":1}}}]},
          {"role":"tool","tool_call_id":"call_2","content":"10:00"},
          {"role":"tool","tool_call_id":"call_1","content":[{"type":"text","text":"{\"t\":"},
            {"type":"text","text":"21}"}]},
          {"role":"tool","tool_call_id":"call_3"},
          {"role":"user","content":"Thanks"}],
        "tools":[{"type":"function","function":{"name":"w","parameters":{"type":"object"}}}],
        "tool_choice":"auto","reasoning_effort":"low"})",
      R"({"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"What?"},
          {"type":"image_url","image_url":{"url":"data:image/png;base64,iVBORw0KGgo="}},
          {"type":"image_url","image_url":{"url":"https://example.com/cat.WEBP?size=2"}},
          {"type":"input_audio","input_audio":{"data":"UklGRg==","format":"wav"}}]}]})",
      // refused by a field outside the conversation, as the document's is
      R"({"model":"m","messages":[{"role":"user","content":"x"}],"verbosity":"low"})",
      R"({"model":"m","messages":[{"role":"user","content":"x"}],"reasoning_effort":"extreme"})",
  };
  // Declined (the document's translation answers): a refusal in the
  // conversation, no turn with content, an escaped data URL.
  const char* declined[] = {
      R"({"model":"m","messages":[{"role":"critic","content":"x"}]})",
      R"({"model":"m","messages":[{"role":"system","content":"only this"}]})",
      R"({"model":"m","messages":[{"role":"user","content":[
          {"type":"image_url","image_url":{"url":"data:image\/png;base64,AAAA"}}]}]})",
  };
  text_writer::expect_as_translated(gemini_chat_body_text, gemini_chat_body_from_document, req,
                                    written, declined);
  EXPECT_EQ(body(declined[2])["contents"][0]["parts"][0]["inlineData"]["mimeType"], "image/png");
  // Arguments sent as an object are written from their document: a key the
  // client sent twice goes once, with the value admission read (the last).
  const auto args = gemini_chat_body_text(
      text_writer::indexed(
          R"({"model":"m","messages":[{"role":"user","content":"x"},{"role":"assistant",
          "tool_calls":[{"id":"c","function":{"name":"f","arguments":{"a":1,"a":2}}}]}]})"),
      req);
  ASSERT_TRUE(args && std::holds_alternative<std::string>(*args));
  EXPECT_NE(std::get<std::string>(*args).find(R"("args":{"a":2})"), std::string::npos);
}

TEST_F(GeminiRequest, TargetsTheModelsMethod) {
  std::string built;  // the target is made from the model: written here
  EXPECT_EQ(gemini.target("gemini-2.5-flash", true, built),
            "/models/gemini-2.5-flash:streamGenerateContent?alt=sse");
  EXPECT_EQ(gemini.target("gemini-2.5-flash", false, built),
            "/models/gemini-2.5-flash:generateContent");
  EXPECT_EQ(gemini.target("models/gemini-2.5-pro", false, built),
            "/models/gemini-2.5-pro:generateContent");
  EXPECT_EQ(gemini.target("my model?#%", false, built),
            "/models/my%20model%3F%23%25:generateContent");
}

TEST_F(GeminiRequest, SendsTheKeyAsXGoogApiKey) {
  using Headers = std::vector<std::pair<std::string, std::string>>;
  EXPECT_EQ(gemini.headers("AIza-key", provider), (Headers{{"x-goog-api-key", "AIza-key"}}));
  EXPECT_TRUE(gemini.headers("", provider).empty());
}

TEST_F(GeminiRequest, SystemMessagesJoinTheSystemInstructionInOrder) {
  EXPECT_EQ(body(R"({"model":"m","stream":true,"messages":[
      {"role":"system","content":"You are a cat."},
      {"role":"user","content":"Hello there"},
      {"role":"developer","content":[{"type":"text","text":"Your name is Neko."}]},
      {"role":"assistant","content":"Meow."},
      {"role":"user","content":"Who are you?"}]})"),
            json::parse(R"({
      "systemInstruction":{"parts":[{"text":"You are a cat."},{"text":"Your name is Neko."}]},
      "contents":[{"role":"user","parts":[{"text":"Hello there"}]},
                  {"role":"model","parts":[{"text":"Meow."}]},
                  {"role":"user","parts":[{"text":"Who are you?"}]}]})"));
}

TEST_F(GeminiRequest, ImagesAndAudioBecomeInlineOrFileData) {
  EXPECT_EQ(body(R"({"messages":[{"role":"user","content":[
      {"type":"text","text":"What is this?"},
      {"type":"image_url","image_url":{"url":"data:image/png;base64,iVBORw0KGgo=","detail":"low"}},
      {"type":"image_url","image_url":{"url":"https://example.com/cat.WEBP?size=2#top"}},
      {"type":"image_url","image_url":{"url":"https://example.com/photo"}},
      {"type":"input_audio","input_audio":{"data":"UklGRg==","format":"wav"}},
      {"type":"input_audio","input_audio":{"data":"SUQz","format":"mp3"}}]}]})")["contents"],
            json::parse(R"([{"role":"user","parts":[
      {"text":"What is this?"},
      {"inlineData":{"mimeType":"image/png","data":"iVBORw0KGgo="}},
      {"fileData":{"mimeType":"image/webp","fileUri":"https://example.com/cat.WEBP?size=2#top"}},
      {"fileData":{"mimeType":"image/jpeg","fileUri":"https://example.com/photo"}},
      {"inlineData":{"mimeType":"audio/wav","data":"UklGRg=="}},
      {"inlineData":{"mimeType":"audio/mp3","data":"SUQz"}}]}])"));
}

TEST_F(GeminiRequest, AnUnknownFieldIsRefusedByNameTheEmptyNameToo) {
  EXPECT_EQ(refusal(R"({"messages":[{"role":"user","content":"x"}],"verbosity":"low"})").param,
            "verbosity");
  const auto empty = refusal(R"({"messages":[{"role":"user","content":"x"}],"":{"a":"b"}})");
  EXPECT_EQ(empty.param, R"("")");
  EXPECT_EQ(empty.message, R"("" is not supported by the Gemini protocol)");
}

TEST_F(GeminiRequest, RefusesContentItCannotSay) {
  const auto file = refusal(R"({"messages":[{"role":"user","content":[{"type":"text","text":"x"},
      {"type":"file","file":{"file_id":"f"}}]}]})");
  EXPECT_EQ(file.param, "messages[0].content[1]");
  EXPECT_EQ(refusal(R"({"messages":[{"role":"user","content":[
      {"type":"image_url","image_url":{"url":"ftp://example.com/a.png"}}]}]})")
                .param,
            "messages[0].content[0]");
  EXPECT_EQ(refusal(R"({"messages":[{"role":"user","content":[
      {"type":"input_audio","input_audio":{"data":"x","format":"flac"}}]}]})")
                .param,
            "messages[0].content[0].input_audio.format");
  EXPECT_EQ(refusal(R"({"messages":[{"role":"system","content":[
      {"type":"image_url","image_url":{"url":"https://example.com/a.png"}}]},
      {"role":"user","content":"hi"}]})")
                .param,
            "messages[0].content[0]");
  EXPECT_EQ(refusal(R"({"messages":[{"role":"function","name":"f","content":"x"}]})").param,
            "messages[0].role");
  EXPECT_EQ(refusal(R"({"messages":[{"role":"system","content":"only this"}]})").param, "messages");
}

// An assistant turn that called two functions and the two results: Gemini
// answers a function by its name, which only the assistant message knows.
TEST_F(GeminiRequest, ToolResultsAnswerTheCallsByFunctionName) {
  EXPECT_EQ(body(R"({"messages":[
      {"role":"user","content":"Weather in Paris and the time?"},
      {"role":"assistant","content":null,"tool_calls":[
        {"id":"call_a","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}},
        {"id":"call_b","type":"function","function":{"name":"get_time","arguments":""}}]},
      {"role":"tool","tool_call_id":"call_b","content":"10:00"},
      {"role":"tool","tool_call_id":"call_a","content":[{"type":"text","text":"{\"temp_c\":"},{"type":"text","text":"21}"}]},
      {"role":"user","content":"Thanks"}]})")["contents"],
            json::parse(R"([
      {"role":"user","parts":[{"text":"Weather in Paris and the time?"}]},
      {"role":"model","parts":[
        {"functionCall":{"name":"get_weather","args":{"city":"Paris"}}},
        {"functionCall":{"name":"get_time","args":{}}}]},
      {"role":"user","parts":[
        {"functionResponse":{"name":"get_time","response":{"content":"10:00"}}},
        {"functionResponse":{"name":"get_weather","response":{"temp_c":21}}},
        {"text":"Thanks"}]}])"));
}

TEST_F(GeminiRequest, RefusesToolMessagesItCannotPlace) {
  EXPECT_EQ(refusal(R"({"messages":[{"role":"user","content":"x"},
      {"role":"tool","tool_call_id":"nope","content":"1"}]})")
                .param,
            "messages[1].tool_call_id");
  EXPECT_EQ(refusal(R"({"messages":[{"role":"user","content":"x"},
      {"role":"assistant","tool_calls":[{"id":"c","type":"function",
        "function":{"name":"f","arguments":"[1,2]"}}]}]})")
                .param,
            "messages[1].tool_calls[0].function.arguments");
}

TEST_F(GeminiRequest, SamplingFieldsGoToGenerationConfig) {
  EXPECT_EQ(body(R"({"messages":[{"role":"user","content":"x"}],
      "temperature":0.7,"top_p":0.9,"max_tokens":50,"max_completion_tokens":100,
      "stop":"END","seed":42,"presence_penalty":0.5,"frequency_penalty":-0.5})")
                ["generationConfig"],
            json::parse(R"({"temperature":0.7,"topP":0.9,"maxOutputTokens":100,
      "stopSequences":["END"],"seed":42,"presencePenalty":0.5,"frequencyPenalty":-0.5})"));
  EXPECT_EQ(body(R"({"messages":[{"role":"user","content":"x"}],"max_tokens":50,
      "stop":["a","b"]})")["generationConfig"],
            json::parse(R"({"maxOutputTokens":50,"stopSequences":["a","b"]})"));
  EXPECT_EQ(refusal(R"({"messages":[{"role":"user","content":"x"}],"temperature":"hot"})").param,
            "temperature");
}

TEST_F(GeminiRequest, ResponseFormatSetsTheMimeTypeAndSchema) {
  const std::string messages = R"("messages":[{"role":"user","content":"x"}])";
  EXPECT_EQ(
      body("{" + messages + R"(,"response_format":{"type":"json_object"}})")["generationConfig"],
      json::parse(R"({"responseMimeType":"application/json"})"));
  EXPECT_EQ(body("{" + messages + R"(,"response_format":{"type":"json_schema","json_schema":{
      "name":"recipe","strict":true,"schema":{"type":"object","properties":{"name":{"type":"string"}}}}}})")
                ["generationConfig"],
            json::parse(R"({"responseMimeType":"application/json",
      "responseJsonSchema":{"type":"object","properties":{"name":{"type":"string"}}}})"));
  EXPECT_FALSE(
      body("{" + messages + R"(,"response_format":{"type":"text"}})").contains("generationConfig"));
}

TEST_F(GeminiRequest, ToolsBecomeFunctionDeclarationsAndToolChoiceAMode) {
  const std::string head = R"({"messages":[{"role":"user","content":"x"}],"tools":[
      {"type":"function","function":{"name":"schedule_meeting","description":"Schedules a meeting.",
        "parameters":{"type":"object","properties":{"topic":{"type":"string"}},"required":["topic"]}}},
      {"type":"function","function":{"name":"ping"}}])";
  const json b = body(head + "}");
  EXPECT_EQ(b["tools"], json::parse(R"([{"functionDeclarations":[
      {"name":"schedule_meeting","description":"Schedules a meeting.",
       "parameters":{"type":"object","properties":{"topic":{"type":"string"}},"required":["topic"]}},
      {"name":"ping"}]}])"));
  EXPECT_FALSE(b.contains("toolConfig"));
  const std::pair<const char*, const char*> choices[] = {
      {R"("auto")", R"({"mode":"AUTO"})"},
      {R"("required")", R"({"mode":"ANY"})"},
      {R"("none")", R"({"mode":"NONE"})"},
      {R"({"type":"function","function":{"name":"ping"}})",
       R"({"mode":"ANY","allowedFunctionNames":["ping"]})"},
  };
  for (const auto& [choice, config] : choices) {
    EXPECT_EQ(body(head + R"(,"tool_choice":)" + choice + "}")["toolConfig"],
              json::parse(std::string(R"({"functionCallingConfig":)") + config + "}"))
        << choice;
  }
  EXPECT_EQ(refusal(R"({"messages":[{"role":"user","content":"x"}],
      "tools":[{"type":"web_search_preview"}]})")
                .param,
            "tools[0]");
}

TEST_F(GeminiRequest, ReasoningEffortBecomesAThinkingBudget) {
  const std::string messages = R"("messages":[{"role":"user","content":"x"}])";
  EXPECT_EQ(body("{" + messages + R"(,"reasoning_effort":"none"})")["generationConfig"],
            json::parse(R"({"thinkingConfig":{"thinkingBudget":0}})"));
  EXPECT_EQ(body("{" + messages + R"(,"reasoning_effort":"medium"})")["generationConfig"],
            json::parse(R"({"thinkingConfig":{"thinkingBudget":8192,"includeThoughts":true}})"));
  provider.thinking_budgets = {{"high", 16000}};
  EXPECT_EQ(body("{" + messages + R"(,"reasoning":{"effort":"high"}})")["generationConfig"],
            json::parse(R"({"thinkingConfig":{"thinkingBudget":16000,"includeThoughts":true}})"));
  const auto unknown = refusal("{" + messages + R"(,"reasoning_effort":"medium"})");
  EXPECT_EQ(unknown.param, "reasoning_effort");
  EXPECT_NE(unknown.message.find("medium"), std::string::npos);
}

TEST_F(GeminiRequest, RefusesWhatGeminiCannotAnswer) {
  const std::string messages = R"("messages":[{"role":"user","content":"x"}])";
  const std::pair<const char*, const char*> cases[] = {
      {R"("n":2)", "n"},
      {R"("logprobs":true)", "logprobs"},
      {R"("top_logprobs":3)", "top_logprobs"},
      {R"("logit_bias":{"50256":-100})", "logit_bias"},
      {R"("modalities":["text","audio"])", "modalities"},
      {R"("audio":{"voice":"alloy","format":"wav"})", "audio"},
      {R"("prediction":{"type":"content","content":"x"})", "prediction"},
      {R"("functions":[{"name":"f"}])", "functions"},
      {R"("function_call":"auto")", "function_call"},
      {R"("web_search_options":{})", "web_search_options"},
      {R"("verbosity":"low")", "verbosity"},  // unknown to this protocol: named
  };
  for (const auto& [field, param] : cases) {
    const auto r = refusal("{" + messages + "," + field + "}");
    EXPECT_EQ(r.param, param) << field;
    EXPECT_NE(r.message.find(param), std::string::npos) << field;
  }
}

TEST_F(GeminiRequest, IgnoresBookkeepingAndDefaultValues) {
  EXPECT_EQ(body(R"({"model":"m","messages":[{"role":"user","content":"x"}],"stream":true,
      "stream_options":{"include_usage":true},"store":false,"metadata":{"k":"v"},
      "service_tier":"auto","user":"u1","parallel_tool_calls":true,"n":1,"logprobs":false,
      "logit_bias":{},"modalities":["text"],"temperature":null})"),
            json::parse(R"({"contents":[{"role":"user","parts":[{"text":"x"}]}]})"));
}

// --- whole answers and errors ---------------------------------------------

// One response with everything a stream can carry, and the same response
// cut into the events Gemini would stream.
const char* kWholeAnswer = R"({"candidates":[{"content":{"parts":[
    {"text":"Let me check.","thought":true},
    {"text":"Checking the calendar."},
    {"functionCall":{"name":"schedule_meeting","args":{"topic":"Q3"}}}],"role":"model"},
    "finishReason":"STOP","index":0}],
  "usageMetadata":{"promptTokenCount":40,"candidatesTokenCount":12,"thoughtsTokenCount":25,"totalTokenCount":77},
  "modelVersion":"gemini-2.5-flash-001","responseId":"abc"})";

const std::vector<std::string> kSameAnswerStreamed = {
    R"({"candidates":[{"content":{"parts":[{"text":"Let me ","thought":true}],"role":"model"}}],"modelVersion":"gemini-2.5-flash-001","responseId":"abc"})",
    R"({"candidates":[{"content":{"parts":[{"text":"check.","thought":true},{"text":"Checking"}],"role":"model"}}],"modelVersion":"gemini-2.5-flash-001","responseId":"abc"})",
    R"({"candidates":[{"content":{"parts":[{"text":" the calendar."}],"role":"model"}}],"modelVersion":"gemini-2.5-flash-001","responseId":"abc"})",
    R"({"candidates":[{"content":{"parts":[{"functionCall":{"name":"schedule_meeting","args":{"topic":"Q3"}}}],"role":"model"},"finishReason":"STOP"}],"usageMetadata":{"promptTokenCount":40,"candidatesTokenCount":12,"thoughtsTokenCount":25,"totalTokenCount":77},"modelVersion":"gemini-2.5-flash-001","responseId":"abc"})",
};

TEST_F(GeminiAnswer, TranslatesAWholeResponse) {
  req.stream = false;
  const auto out = gemini.completion(json::parse(kWholeAnswer), req);
  ASSERT_TRUE(out);
  EXPECT_EQ(*out, json::parse(R"({"id":"abc","object":"chat.completion","created":1700000000,
      "model":"gemini-2.5-flash-001",
      "choices":[{"index":0,"message":{"role":"assistant","content":"Checking the calendar.",
        "refusal":null,"reasoning_content":"Let me check.",
        "tool_calls":[{"id":"call_0_abc","type":"function",
          "function":{"name":"schedule_meeting","arguments":"{\"topic\":\"Q3\"}"}}]},
        "logprobs":null,"finish_reason":"tool_calls"}],
      "usage":{"prompt_tokens":40,"completion_tokens":37,"total_tokens":77,
        "completion_tokens_details":{"reasoning_tokens":25}}})"));
}

// What the gateway assembles from a translated stream (a non-streaming
// client of a streamed attempt) is what completion() makes of the same
// answer sent whole.
TEST_F(GeminiAnswer, AnAssembledStreamEqualsTheWholeAnswer) {
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {kSameAnswerStreamed, kWholeAnswer},
      {kDocsStream,
       R"({"candidates":[{"content":{"role":"model","parts":[{"text":"Hello! How can I help you today?"}]},"finishReason":"STOP"}],"usageMetadata":{"promptTokenCount":1,"candidatesTokenCount":9,"totalTokenCount":10},"modelVersion":"gemini-3.1-flash-lite-preview","responseId":"tTCwacuEBMvnitYP06qsgQY"})"},
      {{R"({"candidates":[{"content":{"parts":[{"text":""}],"role":"model"},"finishReason":"SAFETY"}]})"},
       R"({"candidates":[{"content":{"parts":[],"role":"model"},"finishReason":"SAFETY"}]})"},
      {{R"({"promptFeedback":{"blockReason":"OTHER"},"usageMetadata":{"promptTokenCount":3}})"},
       R"({"promptFeedback":{"blockReason":"OTHER"},"usageMetadata":{"promptTokenCount":3}})"},
  };
  for (const auto& [events, whole] : cases) {
    CompletionAssembler assembler;
    for (const auto& e : stream(sse(events))) {
      if (e.kind != Kind::kData) continue;
      // As the gateway's assembly does: plain chunks unparsed (inspected
      // again: the copied event's views died with the sink call).
      const ChatChunk c = inspect_chunk(e.data);
      if (c.plain)
        assembler.add_plain(c);
      else
        assembler.add(parse_chunk(e.data).json);
    }
    const auto out = gemini.completion(json::parse(whole), req);
    ASSERT_TRUE(out) << whole;
    EXPECT_EQ(assembler.result(), *out) << whole;
  }
}

TEST_F(GeminiAnswer, ABlockedPromptHasNoContent) {
  const auto out = gemini.completion(
      json::parse(R"({"promptFeedback":{"blockReason":"PROHIBITED_CONTENT"}})"), req);
  ASSERT_TRUE(out);
  EXPECT_EQ((*out)["choices"][0]["finish_reason"], "content_filter");
  EXPECT_TRUE((*out)["choices"][0]["message"]["content"].is_null());
  EXPECT_TRUE((*out)["usage"].is_null());
}

TEST_F(GeminiAnswer, WhatIsNotAResponseIsNoAnswer) {
  for (const char* doc :
       {R"({"error":{"code":500,"message":"x","status":"INTERNAL"}})", R"({"candidates":[]})",
        R"({"foo":1})", "[]", "null", R"({"usageMetadata":{"promptTokenCount":1}})"}) {
    EXPECT_FALSE(gemini.completion(json::parse(doc), req)) << doc;
  }
}

TEST_F(GeminiAnswer, ErrorBodiesTakeOpenAisShape) {
  const std::pair<const char*, const char*> cases[] = {
      {"INVALID_ARGUMENT", "invalid_request_error"},
      {"FAILED_PRECONDITION", "invalid_request_error"},
      {"OUT_OF_RANGE", "invalid_request_error"},
      {"UNAUTHENTICATED", "authentication_error"},
      {"PERMISSION_DENIED", "permission_error"},
      {"NOT_FOUND", "not_found_error"},
      {"RESOURCE_EXHAUSTED", "rate_limit_error"},
      {"INTERNAL", "api_error"},
      {"UNAVAILABLE", "api_error"},
  };
  for (const auto& [status, type] : cases) {
    const auto out = gemini.error(
        json{{"error", {{"code", 400}, {"message", "API key not valid."}, {"status", status}}}},
        400);
    ASSERT_TRUE(out) << status;
    EXPECT_EQ(*out, (json{{"error",
                           {{"message", "API key not valid."},
                            {"type", type},
                            {"param", nullptr},
                            {"code", status}}}}))
        << status;
  }
  // The JSON-array framing of a stream without alt=sse.
  const auto in_array = gemini.error(
      json::parse(
          R"([{"error":{"code":503,"message":"The model is overloaded.","status":"UNAVAILABLE"}}])"),
      503);
  ASSERT_TRUE(in_array);
  EXPECT_EQ((*in_array)["error"]["message"], "The model is overloaded.");
  EXPECT_FALSE(gemini.error(json::parse(R"({"candidates":[]})"), 500));
  EXPECT_FALSE(gemini.error(json::parse(R"({"error":"flat"})"), 500));
}

}  // namespace
}  // namespace llmgate::providers

namespace llmgate::providers {
namespace {

TEST(GeminiError, AnInvalidKeyIsTheOperatorsAndRetryInfoIsAWait) {
  const auto& g = gemini_protocol();
  const auto key = nlohmann::json::parse(
      R"({"error":{"code":400,"message":"API key not valid. Please pass a valid API key.","status":"INVALID_ARGUMENT","details":[{"@type":"type.googleapis.com/google.rpc.ErrorInfo","reason":"API_KEY_INVALID","domain":"googleapis.com"}]}})");
  EXPECT_EQ(g.error_meaning(key, 400).judge_as, 401);
  const auto bad_request = nlohmann::json::parse(
      R"({"error":{"code":400,"message":"Invalid JSON payload","status":"INVALID_ARGUMENT"}})");
  EXPECT_FALSE(g.error_meaning(bad_request, 400).judge_as.has_value());
  const auto quota = nlohmann::json::parse(
      R"({"error":{"code":429,"message":"Resource exhausted","status":"RESOURCE_EXHAUSTED","details":[{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"2.5s"}]}})");
  EXPECT_EQ(g.error_meaning(quota, 429).retry_after_s, 3);
  const auto odd = nlohmann::json::parse(
      R"({"error":{"details":[{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"soon"}]}})");
  EXPECT_FALSE(g.error_meaning(odd, 429).retry_after_s.has_value());
}

}  // namespace
}  // namespace llmgate::providers
