// Anthropic's Messages API in (POST /v1/messages): admission's checks in
// Anthropic's words, the translation to chat, the rendering of chat chunks
// as Anthropic's events, the assembly of Anthropic's events into one
// Message, and the errors in Anthropic's shape. The round trips are the
// oracle: a chat answer streamed as Anthropic's events and assembled again
// is the Message its whole chat.completion translates to.
#include "gateway/apis/messages_api.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "config/config.h"
#include "gateway/access/auth.h"
#include "gateway/apis/client_api.h"
#include "gateway/apis/messages_request.h"
#include "gateway/http/api_error.h"
#include "providers/completion_assembler.h"
#include "providers/request_body.h"
#include "providers/sse_parser.h"
#include "providers/upstream_protocol.h"

namespace llmgate::gateway {
namespace {

using nlohmann::json;
using nlohmann::ordered_json;

// A translation with its chat document parsed.
struct Translated {
  json chat;
  std::optional<ChatRequest::Untranslated> untranslated;
  bool unsigned_thinking = false;
};

Translated translated(std::string body) {
  auto parsed = providers::RequestBody::parse(std::move(body));
  auto* in = std::get_if<providers::RequestBody>(&parsed);
  if (!in) {
    ADD_FAILURE() << "not a JSON object";
    return {};
  }
  auto r = translate_messages_request(*in);
  if (auto* e = std::get_if<ApiError>(&r)) {
    ADD_FAILURE() << e->message;
    return {};
  }
  auto& t = std::get<MessagesTranslation>(r);
  json chat = json::parse(t.chat, nullptr, false);
  EXPECT_TRUE(chat.is_object()) << t.chat;
  return {std::move(chat), std::move(t.untranslated), t.unsigned_thinking};
}

Translated translate(const json& in) { return translated(in.dump()); }

std::string refusal(const json& in) {
  auto r = translate_messages_request(providers::RequestBody::from(in));
  if (auto* e = std::get_if<ApiError>(&r)) {
    EXPECT_EQ(e->status, 400);
    return e->message;
  }
  return "(translated)";
}

json base() {
  return {{"model", "claude"},
          {"max_tokens", 64},
          {"messages", {{{"role", "user"}, {"content", "hi"}}}}};
}

TEST(MessagesRequest, RefusesWhatAnthropicRefusesInItsWords) {
  json j = base();
  j.erase("max_tokens");
  EXPECT_EQ(refusal(j), "max_tokens: Field required");
  j = base();
  j["max_tokens"] = 0;
  EXPECT_EQ(refusal(j), "max_tokens: Input should be greater than or equal to 1");
  j = base();
  j["max_tokens"] = "many";
  EXPECT_EQ(refusal(j), "max_tokens: Input should be a valid integer");
  j = base();
  j.erase("model");
  EXPECT_EQ(refusal(j), "model: Field required");
  j = base();
  j["messages"] = json::array();
  EXPECT_EQ(refusal(j), "messages: at least one message is required");
  j = base();
  j["messages"][0]["role"] = "system";
  EXPECT_EQ(refusal(j), "messages.0.role: Input should be 'user' or 'assistant'");
  j = base();
  j["messages"][0].erase("content");
  EXPECT_EQ(refusal(j), "messages.0.content: Field required");
  j = base();
  j["stream"] = "yes";
  EXPECT_EQ(refusal(j), "stream: Input should be a valid boolean");
  j = base();
  j["system"] = json::array({{{"type", "image"}}});
  EXPECT_EQ(refusal(j), "system: each block should be a text block");
  auto not_object = parse_messages_request("application/json", "[]");
  ASSERT_TRUE(std::holds_alternative<ApiError>(not_object));
  EXPECT_EQ(std::get<ApiError>(not_object).status, 400);
}

TEST(MessagesRequest, TranslatesAConversationWithToolsToChat) {
  const json in = json::parse(R"({
    "model": "claude", "max_tokens": 300, "stream": true, "temperature": 0.5, "top_p": 0.9,
    "stop_sequences": ["END"], "metadata": {"user_id": "u-1"}, "service_tier": "auto",
    "system": [{"type": "text", "text": "Be brief.", "cache_control": {"type": "ephemeral"}},
               {"type": "text", "text": "Use tools."}],
    "tools": [{"name": "lookup", "description": "Look up", "cache_control": {"type": "ephemeral"},
               "input_schema": {"type": "object", "properties": {"q": {"type": "string"}}}}],
    "tool_choice": {"type": "any", "disable_parallel_tool_use": true},
    "thinking": {"type": "enabled", "budget_tokens": 8000},
    "messages": [
      {"role": "user", "content": [
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AAAA"}},
        {"type": "text", "text": "What is it?", "cache_control": {"type": "ephemeral"}}]},
      {"role": "assistant", "content": [
        {"type": "thinking", "thinking": "hmm", "signature": "sig"},
        {"type": "text", "text": "Let me look."},
        {"type": "tool_use", "id": "toolu_1", "name": "lookup", "input": {"q": "it"}}]},
      {"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "toolu_1", "content": [{"type": "text", "text": "a cat"}]},
        {"type": "text", "text": "And now?"}]}
    ]})");
  const Translated t = translate(in);
  EXPECT_FALSE(t.untranslated);
  const json want = json::parse(R"({
    "model": "claude", "max_completion_tokens": 300, "stream": true, "temperature": 0.5,
    "top_p": 0.9, "stop": ["END"], "user": "u-1", "reasoning_effort": "medium",
    "tools": [{"type": "function", "function": {"name": "lookup", "description": "Look up",
               "parameters": {"type": "object", "properties": {"q": {"type": "string"}}}}}],
    "tool_choice": "required", "parallel_tool_calls": false,
    "messages": [
      {"role": "system", "content": [{"type": "text", "text": "Be brief."},
                                     {"type": "text", "text": "Use tools."}]},
      {"role": "user", "content": [
        {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}},
        {"type": "text", "text": "What is it?"}]},
      {"role": "assistant", "content": "Let me look.", "tool_calls": [
        {"id": "toolu_1", "type": "function",
         "function": {"name": "lookup", "arguments": "{\"q\":\"it\"}"}}]},
      {"role": "tool", "tool_call_id": "toolu_1", "content": "a cat"},
      {"role": "user", "content": "And now?"}
    ]})");
  EXPECT_EQ(t.chat, want) << t.chat.dump(2);
}

// The chat document is written from the client's text: strings keep their
// escapes, values carried as they are keep their text, a tool call's input
// becomes its arguments compacted in the client's order; a repeated key is
// read as its last occurrence and a null member as absent, as a parsed
// document reads them.
TEST(MessagesRequest, TranslationCarriesTheClientsText) {
  const std::string body =
      R"({"model":"claude","max_tokens":8,"temperature":1e0,)"
      R"("system":null,"top_k":null,"messages":[)"
      R"({"role":"user","role":"us\u0065r","content":"caf\u00e9\n\"q\""},)"
      R"({"role":"assistant","content":[{"type":"text","text":"a\tb"},)"
      R"({"type":"tool_use","id":"t1","name":"f","input":{ "z" : [1, 2],)"
      R"( "a" : "x y", "c" : "a\" b \\ c" }}]},)"
      R"({"role":"user","content":[{"type":"tool_result","tool_use_id":"t1",)"
      R"("content":[{"type":"text","text":"l1\n"},{"type":"text","text":"l2"}]}]}]})";
  const Translated t = translated(body);
  EXPECT_FALSE(t.untranslated);
  const json want = json::parse(R"({
    "model": "claude", "max_completion_tokens": 8, "temperature": 1.0,
    "messages": [
      {"role": "user", "content": "caf\u00e9\n\"q\""},
      {"role": "assistant", "content": "a\tb", "tool_calls": [
        {"id": "t1", "type": "function",
         "function": {"name": "f", "arguments": "{\"z\":[1,2],\"a\":\"x y\",\"c\":\"a\\\" b \\\\ c\"}"}}]},
      {"role": "tool", "tool_call_id": "t1", "content": "l1\nl2"}
    ]})");
  EXPECT_EQ(t.chat, want) << t.chat.dump(2);
  // The text itself: the client's escapes, not a serialiser's.
  auto parsed = providers::RequestBody::parse(body);
  auto r = translate_messages_request(std::get<providers::RequestBody>(parsed));
  const std::string& text = std::get<MessagesTranslation>(r).chat;
  EXPECT_NE(text.find(R"("caf\u00e9\n\"q\"")"), std::string::npos) << text;
  EXPECT_NE(text.find(R"("temperature":1e0)"), std::string::npos) << text;
}

// An unknown field's name is the whole key, however long; the first in key
// order is named.
TEST(MessagesRequest, UnknownFieldsAreNamedWhole) {
  json j = base();
  const std::string long_key = std::string(40, 'k') + "_\\u00e9";
  std::string body = j.dump();
  body.insert(1, "\"" + long_key + "\":1,\"zeta\":2,");
  const Translated t = translated(body);
  ASSERT_TRUE(t.untranslated);
  EXPECT_EQ(t.untranslated->param, std::string(40, 'k') + "_\xc3\xa9");
}

TEST(MessagesRequest, ToolChoicesAndThinkingBudgets) {
  auto with = [](const char* key, json value) {
    json j = base();
    j[key] = std::move(value);
    return translate(j).chat;
  };
  EXPECT_EQ(with("tool_choice", {{"type", "auto"}})["tool_choice"], "auto");
  EXPECT_EQ(with("tool_choice", {{"type", "none"}})["tool_choice"], "none");
  EXPECT_EQ(with("tool_choice", {{"type", "tool"}, {"name", "f"}})["tool_choice"],
            json::parse(R"({"type":"function","function":{"name":"f"}})"));
  EXPECT_EQ(with("thinking", {{"type", "enabled"}, {"budget_tokens", 1024}})["reasoning_effort"],
            "low");
  EXPECT_EQ(with("thinking", {{"type", "enabled"}, {"budget_tokens", 32000}})["reasoning_effort"],
            "high");
  EXPECT_FALSE(with("thinking", {{"type", "disabled"}}).contains("reasoning_effort"));
}

TEST(MessagesRequest, WhatOnlyAnthropicSaysIsNamedNotDropped) {
  json j = base();
  j["tools"] = json::array({{{"type", "web_search_20250305"}, {"name", "web_search"}}});
  auto t = translate(j);
  ASSERT_TRUE(t.untranslated);
  EXPECT_EQ(t.untranslated->param, "tools.0");
  EXPECT_NE(t.untranslated->message.find("web_search_20250305"), std::string::npos);

  j = base();
  j["messages"][0]["content"] =
      json::parse(R"([{"type":"document","source":{"type":"text","data":"x"}}])");
  t = translate(j);
  ASSERT_TRUE(t.untranslated);
  EXPECT_EQ(t.untranslated->param, "messages.0.content.0");
  // The turn keeps its place (the request is refused elsewhere, not reordered).
  EXPECT_EQ(t.chat["messages"].size(), 1u);

  j = base();
  j["container"] = "c-1";
  t = translate(j);
  ASSERT_TRUE(t.untranslated);
  EXPECT_EQ(t.untranslated->param, "container");
}

TEST(MessagesRequest, AdmissionKeepsTheClientsDocumentAndTakesTheRouteOut) {
  const std::string body =
      R"({"model":"claude","max_tokens":10,"route":{"policy":"cheapest"},"stream":true,)"
      R"("messages":[{"role":"user","content":"hello"}]})";
  auto r = parse_messages_request("application/json", body);
  ASSERT_TRUE(std::holds_alternative<ChatRequest>(r));
  const ChatRequest& req = std::get<ChatRequest>(r);
  EXPECT_EQ(req.model, "claude");
  EXPECT_TRUE(req.stream);
  EXPECT_EQ(req.max_tokens, 10);
  EXPECT_EQ(req.route, json::parse(R"({"policy":"cheapest"})"));
  ASSERT_TRUE(req.native);
  EXPECT_FALSE(req.native->contains("route"));
  EXPECT_TRUE(req.native->contains("max_tokens"));
  // No chat translation is written at admission: only when a deployment
  // other than Anthropic's is tried.
  EXPECT_TRUE(req.chat_pending);
  EXPECT_TRUE(req.body.text().empty());
  ChatRequest translated = std::get<ChatRequest>(parse_messages_request("application/json", body));
  ASSERT_FALSE(translate_for_chat(translated));
  EXPECT_FALSE(translated.chat_pending);
  EXPECT_FALSE(translated.body.contains("route"));
  EXPECT_TRUE(translated.body.contains("max_completion_tokens"));
  EXPECT_EQ(translated.body.text(),
            std::get<MessagesTranslation>(translate_messages_request(*translated.native)).chat);
  const std::string once(translated.body.text());
  ASSERT_FALSE(translate_for_chat(translated));
  EXPECT_EQ(translated.body.text(), once) << "written once";
  // With thinking, the effort the statistics keep apart, as chat's would be.
  ChatRequest thinking = std::get<ChatRequest>(parse_messages_request(
      "", R"({"model":"c","max_tokens":9,"thinking":{"type":"enabled","budget_tokens":5000},)"
          R"("messages":[{"role":"user","content":"a"}]})"));
  EXPECT_EQ(thinking.reasoning_effort, "medium");
  EXPECT_FALSE(thinking.stream);
  // The bad ones in Anthropic's words, and a body that is no JSON as chat's.
  auto bad = parse_messages_request("application/json", R"({"model":"m","messages":[]})");
  ASSERT_TRUE(std::holds_alternative<ApiError>(bad));
  EXPECT_EQ(std::get<ApiError>(bad).message, "max_tokens: Field required");
  EXPECT_TRUE(std::holds_alternative<ApiError>(parse_messages_request("", "{")));
}

// A model none of whose deployments is Anthropic's has its translation
// written at admission, in the walk that checks the request (a second walk
// would cost as much); one with an Anthropic deployment has none written.
TEST(MessagesRequest, TheTranslationIsWrittenAtAdmissionOnlyWhenNoDeploymentIsAnthropics) {
  const auto cfg = config::parse_config(R"(
providers:
  - name: openai
    base_url: http://127.0.0.1:9/v1
  - name: anthropic
    protocol: anthropic
    base_url: http://127.0.0.1:10/v1
models:
  - name: gpt
    deployments:
      - {provider: openai, model: m}
  - name: claude
    deployments:
      - {provider: anthropic, model: c}
      - {provider: openai, model: m}
)");
  const auto body = [](const std::string& model) {
    return R"({"model":")" + model +
           R"(","max_tokens":10,"messages":[{"role":"user","content":"hello"}]})";
  };
  ChatRequest eager = std::get<ChatRequest>(parse_messages_request("", body("gpt"), cfg.get()));
  EXPECT_FALSE(eager.chat_pending);
  EXPECT_EQ(eager.body.text(),
            std::get<MessagesTranslation>(translate_messages_request(*eager.native)).chat);
  ASSERT_TRUE(eager.native) << "kept all the same";
  ChatRequest lazy = std::get<ChatRequest>(parse_messages_request("", body("claude"), cfg.get()));
  EXPECT_TRUE(lazy.chat_pending);
  EXPECT_TRUE(lazy.body.text().empty());
  ChatRequest unknown = std::get<ChatRequest>(parse_messages_request("", body("x"), cfg.get()));
  EXPECT_TRUE(unknown.chat_pending) << "a model not configured is refused later: nothing written";
}

// A tool schema nested to the depth limit: the client's document is
// admissible, its chat translation (one level deeper: input_schema becomes
// function.parameters) is not. Anthropic's deployments take it; the others
// are passed over, each time one is tried, naming why.
TEST(MessagesRequest, ATranslationNestedPastTheLimitPassesTheChatDeploymentsOver) {
  bool found = false;
  for (std::size_t n = 100; n < 140 && !found; ++n) {
    std::string schema;
    for (std::size_t i = 0; i < n; ++i) schema += R"({"a":)";
    schema += "1" + std::string(n, '}');
    const std::string body = R"({"model":"c","max_tokens":9,"tools":[{"name":"t","input_schema":)" +
                             schema + R"(}],"messages":[{"role":"user","content":"a"}]})";
    auto parsed = parse_messages_request("", body);
    if (!std::holds_alternative<ChatRequest>(parsed)) break;  // the client's own is too deep now
    ChatRequest req = std::get<ChatRequest>(parsed);
    auto refused = translate_for_chat(req);
    if (!refused) continue;
    found = true;
    EXPECT_NE(refused->message.find("levels deep"), std::string::npos) << refused->message;
    EXPECT_TRUE(req.chat_pending) << "asked again, refused again";
    config::Provider openai;
    providers::UpstreamRequest r;
    r.upstream_model = "m";
    r.provider = &openai;
    for (int attempt = 0; attempt < 2; ++attempt) {
      auto sent = messages_api().upstream_body(providers::openai_chat_protocol(), req, r);
      ASSERT_TRUE(std::holds_alternative<providers::Untranslatable>(sent));
      EXPECT_EQ(std::get<providers::Untranslatable>(sent).param, "body");
    }
    config::Provider anthropic;
    anthropic.protocol = config::Protocol::kAnthropic;
    r.provider = &anthropic;
    EXPECT_TRUE(std::holds_alternative<std::string>(
        messages_api().upstream_body(providers::anthropic_messages_protocol(), req, r)));
  }
  EXPECT_TRUE(found) << "no depth where the document passes and its translation does not";
}

// ---- the upstream body ---------------------------------------------------------

TEST(MessagesApi, AnthropicDeploymentsGetTheDocumentAsItCameOthersTheTranslation) {
  const std::string body =
      R"({"model":"claude","max_tokens":10,"system":[{"type":"text","text":"S",)"
      R"("cache_control":{"type":"ephemeral"}}],"messages":[{"role":"user","content":"hello"}]})";
  ChatRequest req = std::get<ChatRequest>(parse_messages_request("", body));
  const ClientApi& api = messages_api();
  config::Provider anthropic;
  anthropic.protocol = config::Protocol::kAnthropic;
  config::Provider openai;
  const providers::UpstreamProtocol* native = api.protocol_for(anthropic);
  ASSERT_EQ(native, &providers::anthropic_messages_protocol());
  providers::UpstreamRequest r;
  r.upstream_model = "claude-sonnet-4-5";
  r.provider = &anthropic;
  auto sent = api.upstream_body(*native, req, r);
  ASSERT_TRUE(std::holds_alternative<std::string>(sent));
  json want = json::parse(body);
  want["model"] = "claude-sonnet-4-5";
  want["stream"] = true;
  EXPECT_EQ(json::parse(std::get<std::string>(sent)), want);

  const providers::UpstreamProtocol* chat = api.protocol_for(openai);
  ASSERT_EQ(chat, &providers::openai_chat_protocol());
  r.provider = &openai;
  sent = api.upstream_body(*chat, req, r);
  ASSERT_TRUE(std::holds_alternative<std::string>(sent));
  const json up = json::parse(std::get<std::string>(sent));
  EXPECT_EQ(up["messages"][0], json::parse(R"({"role":"system","content":"S"})"));
  EXPECT_EQ(up["model"], "claude-sonnet-4-5");

  // What only Anthropic can say passes the others over, naming it.
  req.untranslated = ChatRequest::Untranslated{"a document", "messages.0.content.0"};
  sent = api.upstream_body(*chat, req, r);
  ASSERT_TRUE(std::holds_alternative<providers::Untranslatable>(sent));
  EXPECT_EQ(std::get<providers::Untranslatable>(sent).param, "messages.0.content.0");
  r.provider = &anthropic;
  EXPECT_TRUE(std::holds_alternative<std::string>(api.upstream_body(*native, req, r)));
}

TEST(MessagesApi, UnsignedThinkingFromATranslatedAnswerIsNotSentToAnthropic) {
  // A conversation that went through an OpenAI deployment, whose reasoning
  // came back as an unsigned thinking block, continues at an Anthropic one.
  const std::string body =
      R"({"model":"c","max_tokens":9,"messages":[{"role":"user","content":"a"},)"
      R"({"role":"assistant","content":[{"type":"thinking","thinking":"t","signature":""},)"
      R"({"type":"thinking","thinking":"s","signature":"sig"},{"type":"text","text":"b"}]},)"
      R"({"role":"user","content":"c"}]})";
  ChatRequest req = std::get<ChatRequest>(parse_messages_request("", body));
  EXPECT_TRUE(req.native_unsigned_thinking) << "admission saw it";
  config::Provider anthropic;
  anthropic.protocol = config::Protocol::kAnthropic;
  providers::UpstreamRequest r;
  r.upstream_model = "claude";
  r.provider = &anthropic;
  const auto& native = providers::anthropic_messages_protocol();
  auto sent = messages_api().upstream_body(native, req, r);
  ASSERT_TRUE(std::holds_alternative<std::string>(sent));
  const json up = json::parse(std::get<std::string>(sent));
  EXPECT_EQ(up["messages"][1]["content"],
            json::parse(R"([{"type":"thinking","thinking":"s","signature":"sig"},)"
                        R"({"type":"text","text":"b"}])"))
      << "the signed block kept, the unsigned one left out";
  // The client's order of members is kept.
  EXPECT_EQ(std::get<std::string>(sent).rfind(R"({"model":"claude","max_tokens":9,)", 0), 0u);
  // The gateway's route override is not sent with them (it was, found by
  // fuzz_messages: Anthropic refuses a member it does not know).
  std::string routed = body;
  routed.insert(1, R"("route":{"policy":"cheapest"},)");
  ChatRequest with_route = std::get<ChatRequest>(parse_messages_request("", routed));
  ASSERT_TRUE(with_route.native_unsigned_thinking);
  sent = messages_api().upstream_body(native, with_route, r);
  ASSERT_TRUE(std::holds_alternative<std::string>(sent));
  EXPECT_FALSE(json::parse(std::get<std::string>(sent)).contains("route"))
      << std::get<std::string>(sent);
  // Signed thinking alone: the document as it came.
  const std::string plain =
      R"({"model":"c","max_tokens":9,"messages":[{"role":"assistant","content":[)"
      R"({"type":"thinking","thinking":"s","signature":"sig"}]}]})";
  ChatRequest same = std::get<ChatRequest>(parse_messages_request("", plain));
  EXPECT_FALSE(same.native_unsigned_thinking);
  sent = messages_api().upstream_body(native, same, r);
  json want = json::parse(plain);
  want["model"] = "claude";
  want["stream"] = true;
  EXPECT_EQ(json::parse(std::get<std::string>(sent)), want);
}

// ---- streams -------------------------------------------------------------------

// Chat chunks (SSE text) rendered for a Messages client: the bytes it gets.
std::string render_chat(const std::string& chunks, bool end_without_marker = false) {
  const ClientApi& api = messages_api();
  ChatRequest req;
  auto renderer = api.renderer(providers::openai_chat_protocol(), req);
  EXPECT_TRUE(renderer);
  Outbox out;
  providers::SseParser parser(1 << 20);
  providers::ChunkPrefix prefix;
  parser.feed(chunks, [&](const providers::Frame& ev) {
    providers::UpstreamEvent e = providers::openai_chat_protocol().classify(ev, prefix);
    renderer->render(e, out);
  });
  if (end_without_marker) renderer->end(out);
  return out.str();
}

// Anthropic's events (SSE text) as one Message, by the native assembly.
ordered_json assemble_native(const std::string& events) {
  auto assembly = messages_api().assembly(providers::anthropic_messages_protocol());
  auto stream = providers::anthropic_messages_protocol().open_stream({});
  struct Sink final : providers::UpstreamStream::Sink {
    ClientApi::Assembly* a;
    void on(providers::UpstreamEvent& ev) override { a->add(ev); }
  } sink;
  sink.a = assembly.get();
  providers::SseParser parser(1 << 20);
  parser.feed(events, [&](const providers::Frame& ev) { stream->translate(ev, sink); });
  return ordered_json::parse(assembly->body());
}

// The event types in order (pings left out).
std::vector<std::string> types_of(const std::string& events) {
  std::vector<std::string> out;
  providers::SseParser parser(1 << 20);
  parser.feed(events, [&](const providers::Frame& ev) {
    const json j = json::parse(ev.data);
    EXPECT_EQ(ev.event, j["type"].get<std::string>()) << "the event name is its type";
    if (j["type"] != "ping") out.push_back(j["type"]);
  });
  return out;
}

// A chat stream with reasoning, text, two tool calls and usage.
const std::string kChatStream =
    R"(data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gpt","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}

data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gpt","choices":[{"index":0,"delta":{"reasoning_content":"Think"},"finish_reason":null}]}

data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gpt","choices":[{"index":0,"delta":{"reasoning_content":"ing."},"finish_reason":null}]}

data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gpt","choices":[{"index":0,"delta":{"content":"Hello"},"finish_reason":null}]}

data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gpt","choices":[{"index":0,"delta":{"content":" \"world\""},"finish_reason":null}]}

: keep-alive

data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gpt","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_a","type":"function","function":{"name":"lookup","arguments":""}}]},"finish_reason":null}]}

data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gpt","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"q\":"}}]},"finish_reason":null}]}

data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gpt","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"\"x\"}"}}]},"finish_reason":null}]}

data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gpt","choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"id":"call_b","type":"function","function":{"name":"other","arguments":"{}"}}]},"finish_reason":null}]}

data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gpt","choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}

data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gpt","choices":[],"usage":{"prompt_tokens":30,"completion_tokens":12,"total_tokens":42,"prompt_tokens_details":{"cached_tokens":10}}}

data: [DONE]

)";

TEST(MessagesApi, AChatStreamIsAnthropicsEventSequence) {
  const std::string events = render_chat(kChatStream);
  EXPECT_EQ(
      types_of(events),
      (std::vector<std::string>{"message_start", "content_block_start", "content_block_delta",
                                "content_block_delta", "content_block_stop", "content_block_start",
                                "content_block_delta", "content_block_delta", "content_block_stop",
                                "content_block_start", "content_block_delta", "content_block_delta",
                                "content_block_stop", "content_block_start", "content_block_delta",
                                "content_block_stop", "message_delta", "message_stop"}));
  EXPECT_NE(events.find("event: ping\n"), std::string::npos) << "a keep-alive is a ping";
  const ordered_json m = assemble_native(events);
  const ordered_json want = ordered_json::parse(R"({
    "id": "msg_chatcmpl-1", "type": "message", "role": "assistant", "model": "gpt",
    "content": [
      {"type": "thinking", "thinking": "Thinking.", "signature": ""},
      {"type": "text", "text": "Hello \"world\""},
      {"type": "tool_use", "id": "call_a", "name": "lookup", "input": {"q": "x"}},
      {"type": "tool_use", "id": "call_b", "name": "other", "input": {}}],
    "stop_reason": "tool_use", "stop_sequence": null,
    "usage": {"input_tokens": 20, "cache_creation_input_tokens": 0,
              "cache_read_input_tokens": 10, "output_tokens": 12}})");
  EXPECT_EQ(m, want) << m.dump(2);
  // The oracle: the same chunks assembled as chat, then translated whole.
  providers::CompletionAssembler chat;
  providers::SseParser parser(1 << 20);
  parser.feed(kChatStream, [&](const providers::Frame& ev) {
    if (ev.has_data && ev.data != "[DONE]") chat.add(json::parse(ev.data));
  });
  EXPECT_EQ(message_of_completion(chat.result()), m);
  // ... and the whole Message streamed assembles to itself.
  EXPECT_EQ(assemble_native(stream_of_message(m)), m);
}

TEST(MessagesApi, AStreamThatEndsWithoutItsMarkerIsClosedWithTheStopReason) {
  const std::string chunks =
      R"(data: {"id":"r","model":"gemini","choices":[{"index":0,"delta":{"content":"Hi"},"finish_reason":null}]}

data: {"id":"r","model":"gemini","choices":[{"index":0,"delta":{},"finish_reason":"length"}],"usage":{"prompt_tokens":3,"completion_tokens":1,"total_tokens":4}}

)";
  const std::string events = render_chat(chunks, /*end_without_marker=*/true);
  const ordered_json m = assemble_native(events);
  EXPECT_EQ(m["stop_reason"], "max_tokens");
  EXPECT_EQ(m["content"][0]["text"], "Hi");
  EXPECT_EQ(m["usage"]["input_tokens"], 3);
  EXPECT_EQ(types_of(events).back(), "message_stop");
}

TEST(MessagesApi, AnthropicsOwnEventsPassAsTheyCame) {
  const std::string events =
      "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\","
      "\"type\":\"message\",\"role\":\"assistant\",\"model\":\"claude\",\"content\":[],"
      "\"stop_reason\":null,\"stop_sequence\":null,\"usage\":{\"input_tokens\":9,"
      "\"output_tokens\":1}}}\n\n"
      "event: ping\ndata: {\"type\": \"ping\"}\n\n"
      "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,"
      "\"content_block\":{\"type\":\"text\",\"text\":\"\",\"citations\":null}}\n\n"
      "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,"
      "\"delta\":{\"type\":\"text_delta\",\"text\":\"Hi\"}}\n\n"
      "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n"
      "event: future_event\ndata: {\"type\":\"future_event\",\"x\":1}\n\n"
      "event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":"
      "\"end_turn\",\"stop_sequence\":null},\"usage\":{\"output_tokens\":2}}\n\n"
      "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n";
  const auto& native = providers::anthropic_messages_protocol();
  ChatRequest req;
  auto renderer = messages_api().renderer(native, req);
  auto stream = native.open_stream({});
  Outbox out;
  struct Sink final : providers::UpstreamStream::Sink {
    ClientApi::StreamRenderer* r;
    Outbox* out;
    std::vector<providers::UpstreamEvent::Kind> kinds;
    std::vector<bool> output;
    void on(providers::UpstreamEvent& ev) override {
      kinds.push_back(ev.kind);
      output.push_back(ev.output());
      r->render(ev, *out);
    }
  } sink;
  sink.r = renderer.get();
  sink.out = &out;
  providers::SseParser parser(1 << 20);
  parser.feed(events, [&](const providers::Frame& ev) {
    stream->translate(ev, sink);
    out.hold();  // the parser's buffer moves on
  });
  EXPECT_EQ(out.str(), events) << "byte for byte, the unknown event too";
  using K = providers::UpstreamEvent::Kind;
  EXPECT_EQ(sink.kinds, (std::vector<K>{K::kData, K::kKeepAlive, K::kData, K::kData, K::kData,
                                        K::kData, K::kData, K::kDone}));
  // The first token is the first content delta.
  EXPECT_EQ(sink.output,
            (std::vector<bool>{false, false, false, true, false, false, false, false}));
  const ordered_json m = assemble_native(events);
  EXPECT_EQ(m["content"][0]["text"], "Hi");
  EXPECT_EQ(m["usage"]["input_tokens"], 9);
  EXPECT_EQ(m["usage"]["output_tokens"], 2);
}

TEST(MessagesApi, NativeEventsTellTheRelayUsageFinishAndFaults) {
  const auto& native = providers::anthropic_messages_protocol();
  struct Sink final : providers::UpstreamStream::Sink {
    std::vector<providers::UpstreamEvent> seen;
    std::vector<std::string> messages;
    void on(providers::UpstreamEvent& ev) override {
      messages.push_back(ev.message);
      ev.data = ev.raw = {};
      ev.chunk.forget_views();
      seen.push_back(ev);
    }
  };
  auto feed = [&](const std::string& sse) {
    Sink sink;
    auto stream = native.open_stream({});
    providers::SseParser parser(1 << 20);
    parser.feed(sse, [&](const providers::Frame& ev) { stream->translate(ev, sink); });
    return sink;
  };
  Sink s = feed(
      "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"usage\":"
      "{\"input_tokens\":5,\"cache_read_input_tokens\":7,\"output_tokens\":1}}}\n\n"
      "data: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"max_tokens\"},"
      "\"usage\":{\"output_tokens\":30}}\n\n");
  ASSERT_EQ(s.seen.size(), 2u);
  ASSERT_TRUE(s.seen[0].chunk.usage);
  EXPECT_EQ(s.seen[0].chunk.usage->prompt_tokens, 12);
  EXPECT_EQ(s.seen[0].chunk.usage->cached_tokens, 7);
  EXPECT_FALSE(s.seen[0].chunk.has_finish);
  EXPECT_TRUE(s.seen[1].chunk.has_finish);
  EXPECT_EQ(s.seen[1].chunk.usage->completion_tokens, 30);
  EXPECT_EQ(s.seen[1].chunk.usage->prompt_tokens, 12) << "cumulative: the start's input stays";

  s = feed(
      "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\","
      "\"message\":\"Overloaded\"}}\n\n");
  ASSERT_EQ(s.seen.size(), 1u);
  EXPECT_EQ(s.seen[0].kind, providers::UpstreamEvent::Kind::kError);
  EXPECT_EQ(s.messages[0], "overloaded_error: Overloaded");
  s = feed("data: {not json\n\n");
  EXPECT_EQ(s.seen.at(0).kind, providers::UpstreamEvent::Kind::kMalformed);
  s = feed("data: {\"no\":\"type\"}\n\n");
  EXPECT_EQ(s.seen.at(0).kind, providers::UpstreamEvent::Kind::kMalformed);
  s = feed(
      "data: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":"
      "\"tool_use\",\"id\":\"t\",\"name\":\"f\",\"input\":{}}}\n\n"
      "data: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":"
      "\"input_json_delta\",\"partial_json\":\"\"}}\n\n");
  EXPECT_TRUE(s.seen.at(0).output()) << "a tool call's start is output, as chat's";
  EXPECT_FALSE(s.seen.at(1).output()) << "the empty piece a tool_use block opens with is not";
}

TEST(MessagesApi, AWholeChatAnswerIsOneMessage) {
  const json completion = json::parse(R"({"id":"chatcmpl-9","object":"chat.completion",
    "model":"gpt","choices":[{"index":0,"message":{"role":"assistant","content":null,
    "tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"not json"}}]},
    "finish_reason":"tool_calls"}],"usage":{"prompt_tokens":4,"completion_tokens":2,
    "total_tokens":6}})");
  const ordered_json m = message_of_completion(completion);
  EXPECT_EQ(m["stop_reason"], "tool_use");
  ASSERT_EQ(m["content"].size(), 1u);
  // Arguments that are no JSON object are kept, never dropped.
  EXPECT_EQ(m["content"][0]["input"], ordered_json::parse(R"({"arguments":"not json"})"));
  EXPECT_EQ(m["usage"]["input_tokens"], 4);
  const std::string body =
      messages_api().answer_body(providers::openai_chat_protocol(), "{}", completion);
  EXPECT_EQ(ordered_json::parse(body), m);
  EXPECT_EQ(messages_api().answer_body(providers::anthropic_messages_protocol(), "{\"as\":1}",
                                       completion),
            "{\"as\":1}");
}

// ---- errors and keys --------------------------------------------------------------

TEST(MessagesApi, ErrorsInAnthropicsShape) {
  const ApiError busy{503, "service_unavailable", "no deployment", std::nullopt, "no_route", 1};
  EXPECT_EQ(busy.status_for(ErrorShape::kAnthropic), 529);
  EXPECT_EQ(busy.status_for(ErrorShape::kOpenAi), 503);
  EXPECT_EQ(json::parse(busy.body(ErrorShape::kAnthropic)),
            json::parse(R"({"type":"error","error":{"type":"overloaded_error",
                            "message":"no deployment"}})"));
  EXPECT_EQ(busy.body(ErrorShape::kOpenAi), busy.body());
  EXPECT_EQ(anthropic_error_type(401), "authentication_error");
  EXPECT_EQ(anthropic_error_type(403), "permission_error");
  EXPECT_EQ(anthropic_error_type(404), "not_found_error");
  EXPECT_EQ(anthropic_error_type(413), "request_too_large");
  EXPECT_EQ(anthropic_error_type(422), "invalid_request_error");
  EXPECT_EQ(anthropic_error_type(429), "rate_limit_error");
  EXPECT_EQ(anthropic_error_type(502), "api_error");
  const ApiError cut{502, "upstream_error", "cut", std::nullopt, std::nullopt, std::nullopt};
  EXPECT_EQ(messages_api().error_event(cut, 0),
            "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"api_error\","
            "\"message\":\"cut\"}}\n\n");
  // An upstream's error (in OpenAI's shape by then) passed on.
  EXPECT_EQ(json::parse(error_text_in(ErrorShape::kAnthropic,
                                      R"({"error":{"message":"too long","type":"x"}})", 400)),
            json::parse(R"({"type":"error","error":{"type":"invalid_request_error",
                            "message":"too long"}})"));
  EXPECT_EQ(error_text_in(ErrorShape::kOpenAi, "{}", 400), "{}");
}

TEST(MessagesApi, GatewayKeysAreTakenFromXApiKeyToo) {
  config::Auth auth;
  config::GatewayKey k;
  k.name = "agents";
  k.sha256 = sha256_hex("sk-agent");
  auth.keys.push_back(k);
  KeyStore keys(auth);
  EXPECT_TRUE(std::holds_alternative<const config::GatewayKey*>(keys.authenticate("", "sk-agent")));
  EXPECT_TRUE(
      std::holds_alternative<const config::GatewayKey*>(keys.authenticate("Bearer sk-agent", "")));
  EXPECT_TRUE(std::holds_alternative<ApiError>(keys.authenticate("", "sk-other")));
  // An Authorization header that says something else is not overridden.
  EXPECT_TRUE(std::holds_alternative<ApiError>(keys.authenticate("Basic abc", "sk-agent")));
}

}  // namespace
}  // namespace llmgate::gateway
