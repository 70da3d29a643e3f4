// Amazon Bedrock's Converse API as an upstream protocol
// (providers/bedrock_protocol.cpp): the chat document as a Converse request,
// a ConverseStream's event-stream messages as chat.completion.chunks (through
// the framer, as the relay reads them), a Converse response as a
// chat.completion, Bedrock's errors in OpenAI's shape.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "providers/bedrock_conversation.h"
#include "providers/bedrock_event.h"
#include "providers/event_stream.h"
#include "providers/framer.h"
#include "providers/upstream_protocol.h"
#include "tests/unit/providers/written_body.h"

namespace llmgate::providers {
namespace {

using nlohmann::json;

const UpstreamProtocol& bedrock() { return bedrock_protocol(); }

std::variant<std::string, Untranslatable> translate_body(const json& doc) {
  config::Provider provider;
  provider.default_max_tokens = 4096;
  auto body = RequestBody::from(doc);
  const UpstreamRequest r{"anthropic.claude-3-5-sonnet-20240620-v1:0", true, true, 1700000000,
                          &provider};
  return bedrock().body(body, r);
}

json converse(const json& doc) {
  auto out = translate_body(doc);
  EXPECT_TRUE(std::holds_alternative<std::string>(out)) << std::get<Untranslatable>(out).message;
  return std::holds_alternative<std::string>(out) ? json::parse(std::get<std::string>(out))
                                                  : json();
}

TEST(BedrockProtocol, TheTargetIsTheModelIdAsOnePathSegment) {
  std::string built;  // the target is made from the model: written here
  EXPECT_EQ(bedrock().target("anthropic.claude-3-5-sonnet-20240620-v1:0", true, built),
            "/model/anthropic.claude-3-5-sonnet-20240620-v1%3A0/converse-stream");
  EXPECT_EQ(bedrock().target("us.meta.llama3-2-90b-instruct-v1:0", false, built),
            "/model/us.meta.llama3-2-90b-instruct-v1%3A0/converse");
  EXPECT_EQ(bedrock().target("arn:aws:bedrock:us-east-1:1:inference-profile/x", true, built),
            "/model/arn%3Aaws%3Abedrock%3Aus-east-1%3A1%3Ainference-profile%2Fx/converse-stream");
  EXPECT_EQ(bedrock().framing(), Framing::kEventStream);
}

TEST(BedrockProtocol, AChatBecomesAConverseRequest) {
  const json c = converse(
      {{"model", "claude"},
       {"stream", true},
       {"messages",
        {{{"role", "system"}, {"content", "Be brief."}},
         {{"role", "user"}, {"content", "Hi"}},
         {{"role", "assistant"}, {"content", "Hello."}},
         {{"role", "user"},
          {"content",
           {{{"type", "text"}, {"text", "And this?"}},
            {{"type", "image_url"}, {"image_url", {{"url", "data:image/png;base64,iVBO"}}}}}}}}},
       {"max_tokens", 100},
       {"temperature", 0.5},
       {"top_p", 0.9},
       {"stop", "END"}});
  EXPECT_EQ(c["system"], json::parse(R"([{"text":"Be brief."}])"));
  ASSERT_EQ(c["messages"].size(), 3u);
  EXPECT_EQ(c["messages"][0], json::parse(R"({"role":"user","content":[{"text":"Hi"}]})"));
  EXPECT_EQ(c["messages"][1]["role"], "assistant");
  EXPECT_EQ(c["messages"][2]["content"][1],
            json::parse(R"({"image":{"format":"png","source":{"bytes":"iVBO"}}})"));
  EXPECT_EQ(
      c["inferenceConfig"],
      json::parse(R"({"maxTokens":100,"temperature":0.5,"topP":0.9,"stopSequences":["END"]})"));
  EXPECT_FALSE(c.contains("toolConfig"));
  // No limit asked: the provider's default_max_tokens.
  EXPECT_EQ(converse({{"messages", {{{"role", "user"}, {"content", "Hi"}}}}})["inferenceConfig"],
            json::parse(R"({"maxTokens":4096})"));
}

TEST(BedrockProtocol, ToolsCallsAndResultsBecomeToolUseAndToolResult) {
  const json c =
      converse({{"messages",
                 {{{"role", "user"}, {"content", "Weather?"}},
                  {{"role", "assistant"},
                   {"content", nullptr},
                   {"tool_calls",
                    {{{"id", "call_1"},
                      {"type", "function"},
                      {"function", {{"name", "weather"}, {"arguments", R"({"city":"Oslo"})"}}}}}}},
                  {{"role", "tool"}, {"tool_call_id", "call_1"}, {"content", R"({"temp":3})"}},
                  {{"role", "tool"}, {"tool_call_id", "call_2"}, {"content", "sunny"}}}},
                {"tools",
                 {{{"type", "function"},
                   {"function",
                    {{"name", "weather"},
                     {"description", "Weather now"},
                     {"parameters", {{"type", "object"}}}}}}}},
                {"tool_choice", "required"}});
  ASSERT_EQ(c["messages"].size(), 3u);
  EXPECT_EQ(c["messages"][1]["content"][0],
            json::parse(
                R"({"toolUse":{"toolUseId":"call_1","name":"weather","input":{"city":"Oslo"}}})"));
  // Two tool results: one user turn.
  EXPECT_EQ(c["messages"][2]["content"],
            json::parse(R"([{"toolResult":{"toolUseId":"call_1","content":[{"json":{"temp":3}}]}},
                            {"toolResult":{"toolUseId":"call_2","content":[{"text":"sunny"}]}}])"));
  EXPECT_EQ(c["toolConfig"],
            json::parse(R"({"tools":[{"toolSpec":{"name":"weather","description":"Weather now",
                            "inputSchema":{"json":{"type":"object"}}}}],"toolChoice":{"any":{}}})"));
}

// The conversation is written from the client's text (bedrock_chat_body_text)
// for what clients send, and says what the document's translation says;
// what it does not answer exactly is left to that translation.
TEST(BedrockProtocol, TheConversationIsWrittenAsTheDocumentsTranslationWritesIt) {
  const char* written[] = {
      R"({"model":"m","messages":[{"role":"user","content":"Hi"}],"stream":true})",
      R"({"model":"m","messages":[{"role":"system","content":"Be \"brief\"."},
          {"role":"user","content":"Hi \u00e9"},{"role":"developer","content":""},
          {"role":"developer","content":[{"type":"text","text":"French."}]},
          {"role":"assistant","content":""},{"role":"user","content":[]},
          {"role":"user","content":"again"}],"temperature":0.5,"max_tokens":100,"stop":"x"})",
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
        "tool_choice":"auto"})",
      R"({"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"What?"},
          {"type":"image_url","image_url":{"url":"data:image/png;base64,iVBORw0KGgo="}},
          {"type":"image_url","image_url":{"url":"data:image/jpg;base64,/9j/4AAQ"}}]}]})",
      // results that are JSON but not an object go as text
      R"({"model":"m","messages":[{"role":"user","content":"q"},{"role":"assistant",
          "tool_calls":[{"id":"a","function":{"name":"f","arguments":""}}]},
          {"role":"tool","tool_call_id":"a","content":"[1,2]"},
          {"role":"tool","tool_call_id":"b","content":[{"type":"text","text":"7"}]},
          {"role":"tool","tool_call_id":"c","content":"{}"}]})",
      // refused by a field outside the conversation, as the document's is
      R"({"model":"m","messages":[{"role":"user","content":"x"}],"verbosity":"low"})",
      R"({"model":"m","messages":[{"role":"user","content":"x"}],"tool_choice":"auto"})",
  };
  // Declined (the document's translation answers): a refusal in the
  // conversation, no turn with content, an escaped data URL, an image URL.
  const char* declined[] = {
      R"({"model":"m","messages":[{"role":"critic","content":"x"}]})",
      R"({"model":"m","messages":[{"role":"system","content":"only this"}]})",
      R"({"model":"m","messages":[{"role":"user","content":[
          {"type":"image_url","image_url":{"url":"data:image\/png;base64,AAAA"}}]}]})",
      R"({"model":"m","messages":[{"role":"user","content":[
          {"type":"image_url","image_url":{"url":"https://example.com/cat.png"}}]}]})",
      R"({"model":"m","messages":[{"role":"user","content":"x"},{"role":"assistant",
          "tool_calls":[{"id":"c","function":{"name":"f","arguments":"[1]"}}]}]})",
  };
  config::Provider provider;
  provider.default_max_tokens = 4096;
  const UpstreamRequest r{"anthropic.claude-3-5-sonnet-20240620-v1:0", true, true, 1700000000,
                          &provider};
  text_writer::expect_as_translated(bedrock_chat_body_text, bedrock_chat_body_from_document, r,
                                    written, declined);
  // A call's input is written from its document: a key the client sent
  // twice in its arguments goes once, the last (as admission reads it).
  const auto input = bedrock_chat_body_text(
      text_writer::indexed(
          R"({"model":"m","messages":[{"role":"user","content":"x"},{"role":"assistant",
          "tool_calls":[{"id":"c","function":{"name":"f","arguments":"{\"a\":1,\"a\":2}"}}]}]})"),
      r);
  ASSERT_TRUE(input && std::holds_alternative<std::string>(*input));
  EXPECT_NE(std::get<std::string>(*input).find(R"("input":{"a":2})"), std::string::npos);
}

TEST(BedrockProtocol, WhatConverseCannotSayIsRefusedAndNamed) {
  for (const auto& [field, value] :
       std::vector<std::pair<std::string, json>>{{"logprobs", true},
                                                 {"n", 2},
                                                 {"response_format", {{"type", "json_object"}}},
                                                 {"presence_penalty", 0.5},
                                                 {"tool_choice", "none"}}) {
    json doc = {{"messages", {{{"role", "user"}, {"content", "Hi"}}}}, {field, value}};
    auto out = translate_body(doc);
    ASSERT_TRUE(std::holds_alternative<Untranslatable>(out)) << field;
    EXPECT_EQ(std::get<Untranslatable>(out).param.substr(0, field.size()), field);
  }
  auto remote = translate_body(
      {{"messages",
        {{{"role", "user"},
          {"content",
           {{{"type", "image_url"}, {"image_url", {{"url", "https://x.example/a.png"}}}}}}}}}});
  ASSERT_TRUE(std::holds_alternative<Untranslatable>(remote));
  EXPECT_EQ(std::get<Untranslatable>(remote).param, "messages[0].content[0]");
}

// The chunks a stream of event-stream messages becomes, each message's
// bytes through the framer as the relay reads them.
struct Translated {
  std::vector<json> chunks;
  std::vector<std::string> texts;  // the chunks as written
  std::vector<UpstreamEvent::Kind> kinds;
  std::string error;
};

class Collect final : public UpstreamStream::Sink {
 public:
  explicit Collect(Translated& t) : t_(t) {}
  void on(UpstreamEvent& e) override {
    t_.kinds.push_back(e.kind);
    if (e.kind == UpstreamEvent::Kind::kData) {
      t_.chunks.push_back(json::parse(e.data));
      t_.texts.emplace_back(e.data);
    }
    if (e.kind == UpstreamEvent::Kind::kError || e.kind == UpstreamEvent::Kind::kMalformed)
      t_.error = e.message;
  }

 private:
  Translated& t_;
};

std::string event(std::string_view type, std::string_view payload) {
  const EventStreamHeader h[] = {
      {":event-type", type}, {":content-type", "application/json"}, {":message-type", "event"}};
  return encode_event_stream_message(h, payload);
}

std::string exception(std::string_view type, std::string_view payload) {
  const EventStreamHeader h[] = {{":exception-type", type},
                                 {":content-type", "application/json"},
                                 {":message-type", "exception"}};
  return encode_event_stream_message(h, payload);
}

Translated run(const std::string& bytes, bool include_usage = false) {
  config::Provider provider;
  const UpstreamRequest r{"amazon.nova-pro-v1:0", true, true, 1700000000, &provider, include_usage};
  auto stream = bedrock().open_stream(r);
  Translated t;
  Collect sink(t);
  Framer frames(Framing::kEventStream, 1 << 16);
  auto space = frames.prepare(bytes.size());
  std::copy(bytes.begin(), bytes.end(), space.data());
  frames.commit(bytes.size());
  EXPECT_EQ(frames.drain([&](const Frame& f) { stream->translate(f, sink); }), FrameStatus::kOk);
  stream->end(sink);
  return t;
}

TEST(BedrockProtocol, AConverseStreamBecomesChatChunks) {
  const std::string bytes =
      event("messageStart", R"({"role":"assistant","p":"abcdefgh"})") +
      event("contentBlockDelta", R"({"contentBlockIndex":0,"delta":{"text":"Hel"},"p":"ab"})") +
      event("contentBlockDelta", R"({"contentBlockIndex":0,"delta":{"text":"lo"}})") +
      event("contentBlockStop", R"({"contentBlockIndex":0})") +
      event("messageStop", R"({"stopReason":"end_turn"})") +
      event(
          "metadata",
          R"({"usage":{"inputTokens":10,"outputTokens":2,"totalTokens":12,"cacheReadInputTokens":4},"metrics":{"latencyMs":300}})");
  const Translated t = run(bytes);
  ASSERT_EQ(t.chunks.size(), 5u) << t.error;
  EXPECT_EQ(t.chunks[0]["object"], "chat.completion.chunk");
  EXPECT_EQ(t.chunks[0]["model"], "amazon.nova-pro-v1:0");
  EXPECT_EQ(t.chunks[0]["choices"][0]["delta"],
            json::parse(R"({"role":"assistant","content":""})"));
  EXPECT_EQ(t.chunks[1]["choices"][0]["delta"]["content"], "Hel");
  EXPECT_EQ(t.chunks[2]["choices"][0]["delta"]["content"], "lo");
  EXPECT_EQ(t.chunks[3]["choices"][0]["finish_reason"], "stop");
  EXPECT_EQ(t.chunks[4]["choices"], json::array());
  EXPECT_EQ(t.chunks[4]["usage"],
            json::parse(R"({"prompt_tokens":14,"completion_tokens":2,"total_tokens":16,
                            "prompt_tokens_details":{"cached_tokens":4}})"));
  EXPECT_EQ(t.kinds.back(), UpstreamEvent::Kind::kDone);
}

TEST(BedrockProtocol, AToolUseStreamsAsToolCalls) {
  const std::string bytes =
      event("messageStart", R"({"role":"assistant"})") +
      event(
          "contentBlockStart",
          R"({"contentBlockIndex":1,"start":{"toolUse":{"toolUseId":"tooluse_1","name":"weather"}}})") +
      event("contentBlockDelta",
            R"({"contentBlockIndex":1,"delta":{"toolUse":{"input":"{\"city\":"}}})") +
      event("contentBlockDelta",
            R"({"contentBlockIndex":1,"delta":{"toolUse":{"input":"\"Oslo\"}"}}})") +
      event("messageStop", R"({"stopReason":"tool_use"})");
  const Translated t = run(bytes);
  ASSERT_EQ(t.chunks.size(), 5u) << t.error;
  EXPECT_EQ(t.chunks[1]["choices"][0]["delta"]["tool_calls"][0],
            json::parse(R"({"index":0,"id":"tooluse_1","type":"function",
                            "function":{"name":"weather","arguments":""}})"));
  EXPECT_EQ(t.chunks[2]["choices"][0]["delta"]["tool_calls"][0]["function"]["arguments"],
            "{\"city\":");
  EXPECT_EQ(t.chunks[3]["choices"][0]["delta"]["tool_calls"][0]["index"], 0);
  EXPECT_EQ(t.chunks[4]["choices"][0]["finish_reason"], "tool_calls");
  // No metadata: the body's end completes it.
  EXPECT_EQ(t.kinds.back(), UpstreamEvent::Kind::kDone);
}

TEST(BedrockProtocol, AnExceptionInTheStreamIsAnInBandError) {
  const Translated t =
      run(event("messageStart", R"({"role":"assistant"})") +
          exception("throttlingException", R"({"message":"Too many requests, please wait."})"));
  ASSERT_EQ(t.kinds.back(), UpstreamEvent::Kind::kError);
  EXPECT_EQ(t.error, "throttlingException: Too many requests, please wait.");
}

TEST(BedrockProtocol, AStreamCutBeforeMessageStopIsNotCompleted) {
  const Translated t =
      run(event("messageStart", R"({"role":"assistant"})") +
          event("contentBlockDelta", R"({"contentBlockIndex":0,"delta":{"text":"Hi"}})"));
  EXPECT_NE(t.kinds.back(), UpstreamEvent::Kind::kDone);
  const Translated odd = run(event("surprise", "{}"));
  EXPECT_EQ(odd.kinds.back(), UpstreamEvent::Kind::kMalformed);
}

// The usual events are read by a scan (bedrock_event.h), a delta's text
// carried as the upstream escaped it; what the scan declines (here: keys
// given twice, an escaped stop reason) is read from its document. Either
// way the chunks say the same.
TEST(BedrockProtocol, TheUsualEventsSayTheSameScannedOrParsed) {
  const std::string scanned =
      event("messageStart", R"({"role":"assistant","p":"abc"})") +
      event("contentBlockDelta", R"({"contentBlockIndex":0,"delta":{"text":"caf\u00e9 \"q\""}})") +
      event(
          "contentBlockDelta",
          R"({"contentBlockIndex":0,"delta":{"reasoningContent":{"text":"hm","signature":"s"}}})") +
      event("contentBlockDelta",
            R"({"contentBlockIndex":0,"delta":{"text":"both","reasoningContent":{"text":"r"}}})") +
      event("contentBlockDelta",
            R"({"contentBlockIndex":0,"delta":{"reasoningContent":{"signature":"s"}}})") +
      event("contentBlockDelta", R"({"contentBlockIndex":0,"delta":{"text":""}})") +
      event("contentBlockStop", R"({"contentBlockIndex":0})") +
      event("messageStop", R"({"stopReason":"max_tokens"})") +
      event(
          "metadata",
          R"({"usage":{"inputTokens":-3,"outputTokens":5,"cacheReadInputTokens":2,"totalTokens":4}})");
  const std::string parsed =
      event("messageStart", R"({"role":"assistant","role":"assistant"})") +
      event("contentBlockDelta",
            R"({"contentBlockIndex":0,"delta":{"text":"x"},"delta":{"text":"caf\u00e9 \"q\""}})") +
      event("contentBlockDelta",
            R"({"delta":null,"delta":{"reasoningContent":{"text":"hm","signature":"s"}}})") +
      event("contentBlockDelta",
            R"({"delta":{"text":"both","text":"both","reasoningContent":{"text":"r"}}})") +
      event("contentBlockDelta",
            R"({"delta":{"reasoningContent":{"signature":"s","signature":"s"}}})") +
      event("contentBlockDelta", R"({"delta":{"text":"","text":""}})") +
      event("contentBlockStop", R"({"contentBlockIndex":0})") +
      event("messageStop", R"({"stopReason":"max\u005ftokens"})") +
      event(
          "metadata",
          R"({"usage":{"inputTokens":-3,"outputTokens":5,"outputTokens":5,"cacheReadInputTokens":2}})");
  const Translated a = run(scanned, /*include_usage=*/true);
  const Translated b = run(parsed, /*include_usage=*/true);
  EXPECT_EQ(a.kinds, b.kinds);
  EXPECT_EQ(a.chunks, b.chunks);
  ASSERT_EQ(a.chunks.size(), 6u) << a.error;
  EXPECT_EQ(a.chunks[1]["choices"][0]["delta"]["content"], "caf\u00e9 \"q\"");
  EXPECT_NE(a.texts[1].find(R"("content":"caf\u00e9 \"q\"")"), std::string::npos) << a.texts[1];
  EXPECT_EQ(a.chunks[2]["choices"][0]["delta"], json::parse(R"({"reasoning_content":"hm"})"));
  EXPECT_EQ(a.chunks[3]["choices"][0]["delta"], json::parse(R"({"content":"both"})"));
  EXPECT_EQ(a.chunks[4]["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(a.chunks[5]["usage"],
            json::parse(R"({"prompt_tokens":2,"completion_tokens":5,"total_tokens":7,
                            "prompt_tokens_details":{"cached_tokens":2}})"));
  EXPECT_EQ(a.kinds.back(), UpstreamEvent::Kind::kDone);
}

TEST(BedrockProtocol, TheScanDeclinesWhatItDoesNotRead) {
  bedrock::EventFacts f;
  EXPECT_TRUE(bedrock::read_event("contentBlockDelta", R"({"delta":{"text":"a\nb"}})", f));
  EXPECT_EQ(f.delta, bedrock::EventFacts::Delta::kText);
  EXPECT_EQ(f.text, R"(a\nb)");
  EXPECT_TRUE(
      bedrock::read_event("metadata", R"({"usage":{"outputTokens":9223372036854775808}})", f));
  EXPECT_EQ(f.usage->output, 0);  // past int64: nlohmann's int64 of it is negative
  for (const auto& [type, payload] : std::vector<std::pair<std::string, std::string>>{
           {"contentBlockDelta", R"({"delta":{"toolUse":{"input":"{}"}}})"},
           {"contentBlockDelta", R"({"contentBlockIndex":0})"},
           {"contentBlockDelta", R"({"delta":{"text":7}})"},
           {"contentBlockDelta", R"({"delta":{"text":"a"}} x)"},
           {"contentBlockStart", R"({"start":{"toolUse":{"toolUseId":"t","name":"f"}}})"},
           {"messageStop", R"({"stopReason":"end\u005fturn"})"},
           {"metadata", R"({"usage":7})"},
           {"messageStart", "[]"},
           {"surprise", "{}"},
       }) {
    EXPECT_FALSE(bedrock::read_event(type, payload, f)) << type << " " << payload;
  }
}

TEST(BedrockProtocol, AConverseResponseBecomesAChatCompletion) {
  config::Provider provider;
  const UpstreamRequest r{"amazon.nova-pro-v1:0", false, true, 1700000000, &provider};
  const json answer = json::parse(R"({
    "output":{"message":{"role":"assistant","content":[
      {"text":"Let me check."},
      {"toolUse":{"toolUseId":"tooluse_1","name":"weather","input":{"city":"Oslo"}}}]}},
    "stopReason":"tool_use",
    "usage":{"inputTokens":20,"outputTokens":9,"totalTokens":29},
    "metrics":{"latencyMs":410}})");
  const auto c = bedrock().completion(answer, r);
  ASSERT_TRUE(c);
  EXPECT_EQ((*c)["object"], "chat.completion");
  const json& m = (*c)["choices"][0]["message"];
  EXPECT_EQ(m["content"], "Let me check.");
  EXPECT_EQ(m["tool_calls"][0]["function"]["arguments"], R"({"city":"Oslo"})");
  EXPECT_EQ((*c)["choices"][0]["finish_reason"], "tool_calls");
  EXPECT_EQ((*c)["usage"]["prompt_tokens"], 20);
  const auto u = bedrock().answer_usage(answer);
  ASSERT_TRUE(u);
  EXPECT_EQ(u->completion_tokens, 9);
  EXPECT_FALSE(bedrock().completion(json::parse(R"({"message":"no"})"), r));
}

TEST(BedrockProtocol, ErrorsInOpenAisShape) {
  const auto e =
      bedrock().error(json::parse(R"({"__type":"com.amazon.coral.validate#ValidationException",
                      "message":"The provided model identifier is invalid."})"),
                      400);
  ASSERT_TRUE(e);
  EXPECT_EQ((*e)["error"]["message"], "The provided model identifier is invalid.");
  EXPECT_EQ((*e)["error"]["type"], "invalid_request_error");
  EXPECT_EQ((*e)["error"]["code"], "ValidationException");
  const auto t = bedrock().error(json::parse(R"({"message":"Too many requests"})"), 429);
  ASSERT_TRUE(t);
  EXPECT_EQ((*t)["error"]["type"], "rate_limit_error");
  EXPECT_FALSE(bedrock().error(json::parse(R"({"error":"x"})"), 500));
}

}  // namespace
}  // namespace llmgate::providers
