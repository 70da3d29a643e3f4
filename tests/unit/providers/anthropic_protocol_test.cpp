// The Anthropic Messages protocol: OpenAI chat requests translated to
// Messages requests, and Anthropic's events, answers and errors back to
// OpenAI's shapes. The streams are Anthropic's published examples
// (docs.anthropic.com, "Streaming Messages" and "Extended thinking").
#include <gtest/gtest.h>

#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "config/config.h"
#include "providers/anthropic_conversation.h"
#include "providers/chat_chunk.h"
#include "providers/completion_assembler.h"
#include "providers/sse_parser.h"
#include "providers/upstream_protocol.h"
#include "tests/unit/providers/written_body.h"

namespace llmgate::providers {
namespace {

using nlohmann::json;
using Kind = UpstreamEvent::Kind;

constexpr std::int64_t kCreated = 1'700'000'000;

// One neutral event, copied out of the sink call (its views die with it).
struct Seen {
  Kind kind;
  std::string data, raw, message;
  ChatChunk chunk;
  json parsed;  // `data` as JSON (null when empty)
};

class Collector final : public UpstreamStream::Sink {
 public:
  void on(UpstreamEvent& ev) override {
    Seen s{ev.kind, std::string(ev.data), std::string(ev.raw), ev.message, ev.chunk, nullptr};
    s.chunk.forget_views();  // they viewed the translator's buffer: dead after this call
    if (!s.data.empty()) s.parsed = json::parse(s.data);
    events.push_back(std::move(s));
  }
  std::vector<Seen> events;
};

struct Fixture {
  config::Provider provider;
  UpstreamRequest request() const {
    UpstreamRequest r;
    r.upstream_model = "claude-sonnet-4-5";
    r.created = kCreated;
    r.provider = &provider;
    return r;
  }
};

// Feeds an SSE text through the parser and the translator, then end().
std::vector<Seen> translate(std::string_view sse, bool include_usage = false) {
  const Fixture f;
  UpstreamRequest r = f.request();
  r.include_usage = include_usage;
  auto stream = anthropic_protocol().open_stream(r);
  Collector sink;
  SseParser parser(1 << 20);
  parser.feed(sse, [&](const Frame& ev) { stream->translate(ev, sink); });
  stream->end(sink);
  return sink.events;
}

std::vector<Seen> data_events(const std::vector<Seen>& all) {
  std::vector<Seen> out;
  for (const auto& e : all) {
    if (e.kind == Kind::kData) out.push_back(e);
  }
  return out;
}

json delta_of(const Seen& e) { return e.parsed["choices"][0]["delta"]; }

// The docs' basic streaming example.
constexpr std::string_view kTextStream = R"(event: message_start
data: {"type": "message_start", "message": {"id": "msg_1nZdL29xx5MUA1yADyHTEsnR8uuvGzszyY", "type": "message", "role": "assistant", "content": [], "model": "claude-sonnet-4-5-20250929", "stop_reason": null, "stop_sequence": null, "usage": {"input_tokens": 25, "output_tokens": 1}}}

event: content_block_start
data: {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}

event: ping
data: {"type": "ping"}

event: content_block_delta
data: {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Hello"}}

event: content_block_delta
data: {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "!"}}

event: content_block_stop
data: {"type": "content_block_stop", "index": 0}

event: message_delta
data: {"type": "message_delta", "delta": {"stop_reason": "end_turn", "stop_sequence":null}, "usage": {"output_tokens": 15}}

event: message_stop
data: {"type": "message_stop"}

)";

// The docs' tool use example (arguments split as Anthropic splits them).
constexpr std::string_view kToolStream = R"(event: message_start
data: {"type":"message_start","message":{"id":"msg_014p7gG3wDgGV9EUtLvnow3U","type":"message","role":"assistant","model":"claude-opus-4-6","stop_sequence":null,"usage":{"input_tokens":472,"output_tokens":2},"content":[],"stop_reason":null}}

event: content_block_start
data: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}

event: ping
data: {"type": "ping"}

event: content_block_delta
data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Okay"}}

event: content_block_delta
data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":", let's check the weather."}}

event: content_block_stop
data: {"type":"content_block_stop","index":0}

event: content_block_start
data: {"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"toolu_01T1x1fJ34qAmk2tNTrN7Up6","name":"get_weather","input":{}}}

event: content_block_delta
data: {"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":""}}

event: content_block_delta
data: {"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\"location\":"}}

event: content_block_delta
data: {"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":" \"San"}}

event: content_block_delta
data: {"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":" Francisc"}}

event: content_block_delta
data: {"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"o,"}}

event: content_block_delta
data: {"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":" CA\""}}

event: content_block_delta
data: {"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":", \"unit\": \"fah"}}

event: content_block_delta
data: {"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"renheit\"}"}}

event: content_block_stop
data: {"type":"content_block_stop","index":1}

event: message_delta
data: {"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},"usage":{"output_tokens":89}}

event: message_stop
data: {"type":"message_stop"}

)";

// The extended thinking docs' streaming example.
constexpr std::string_view kThinkingStream = R"(event: message_start
data: {"type": "message_start", "message": {"id": "msg_01", "type": "message", "role": "assistant", "content": [], "model": "claude-sonnet-4-5", "stop_reason": null, "stop_sequence": null}}

event: content_block_start
data: {"type": "content_block_start", "index": 0, "content_block": {"type": "thinking", "thinking": ""}}

event: content_block_delta
data: {"type": "content_block_delta", "index": 0, "delta": {"type": "thinking_delta", "thinking": "Let me solve this step by step:\n\n1. First break down 27 * 453"}}

event: content_block_delta
data: {"type": "content_block_delta", "index": 0, "delta": {"type": "thinking_delta", "thinking": "\n2. 453 = 400 + 50 + 3"}}

event: content_block_delta
data: {"type": "content_block_delta", "index": 0, "delta": {"type": "signature_delta", "signature": "EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds"}}

event: content_block_stop
data: {"type": "content_block_stop", "index": 0}

event: content_block_start
data: {"type": "content_block_start", "index": 1, "content_block": {"type": "text", "text": ""}}

event: content_block_delta
data: {"type": "content_block_delta", "index": 1, "delta": {"type": "text_delta", "text": "27 * 453 = 12,231"}}

event: content_block_stop
data: {"type": "content_block_stop", "index": 1}

event: message_delta
data: {"type": "message_delta", "delta": {"stop_reason": "end_turn", "stop_sequence": null}}

event: message_stop
data: {"type": "message_stop"}

)";

std::string sse(std::string_view data) { return "event: x\ndata: " + std::string(data) + "\n\n"; }

// ---- the stream -------------------------------------------------------------

TEST(AnthropicStream, PlainTextStreamBecomesChatCompletionChunks) {
  const auto all = translate(kTextStream);
  ASSERT_EQ(all.size(), 7u);
  const auto data = data_events(all);
  ASSERT_EQ(data.size(), 5u);
  for (const auto& e : data) {
    EXPECT_EQ(e.chunk.kind, ChatChunk::Kind::kChunk) << e.data;
    EXPECT_TRUE(e.raw.empty());  // translated: the client API frames `data`
    EXPECT_EQ(e.parsed["id"], "msg_1nZdL29xx5MUA1yADyHTEsnR8uuvGzszyY");
    EXPECT_EQ(e.parsed["object"], "chat.completion.chunk");
    EXPECT_EQ(e.parsed["created"], kCreated);
    EXPECT_EQ(e.parsed["model"], "claude-sonnet-4-5-20250929");
  }
  EXPECT_EQ(delta_of(data[0]), json::parse(R"({"role":"assistant","content":""})"));
  EXPECT_FALSE(data[0].chunk.has_output);
  EXPECT_EQ(delta_of(data[1]), json::parse(R"({"content":"Hello"})"));
  EXPECT_TRUE(data[1].chunk.has_output);
  EXPECT_TRUE(data[1].chunk.plain);  // the assembler's unparsed fast path applies
  EXPECT_EQ(delta_of(data[2]), json::parse(R"({"content":"!"})"));
  EXPECT_EQ(data[3].parsed["choices"][0]["finish_reason"], "stop");
  EXPECT_TRUE(data[3].chunk.has_finish);
  EXPECT_TRUE(data[4].chunk.usage_only);
  ASSERT_TRUE(data[4].chunk.usage);
  EXPECT_EQ(data[4].chunk.usage->prompt_tokens, 25);
  EXPECT_EQ(data[4].chunk.usage->completion_tokens, 15);
  EXPECT_EQ(data[4].chunk.usage->total_tokens, 40);
  EXPECT_EQ(all.back().kind, Kind::kDone);
  EXPECT_TRUE(all.back().data.empty() && all.back().raw.empty());
}

// The chunks are laid out as an OpenAI deployment's are (OpenAI's own,
// llmgate-sim's): the members in OpenAI's order, "logprobs": null in the
// choice, and "usage": null on every chunk but the usage chunk when the
// client asked for usage.
TEST(AnthropicStream, ChunksAreLaidOutAsOpenAisAre) {
  const std::string stream =
      sse(R"({"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"claude-x","content":[],"usage":{"input_tokens":5,"output_tokens":1}}})") +
      sse(R"({"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}})") +
      sse(R"({"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hi"}})") +
      sse(R"({"type":"content_block_stop","index":0})") +
      sse(R"({"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"toolu_1","name":"now","input":{}}})") +
      sse(R"({"type":"content_block_stop","index":1})") +
      sse(R"({"type":"message_delta","delta":{"stop_reason":"tool_use"},"usage":{"output_tokens":3}})") +
      sse(R"({"type":"message_stop"})");
  const std::string head =
      R"({"id":"msg_1","object":"chat.completion.chunk","created":1700000000,"model":"claude-x",)";
  auto choice = [&](const std::string& delta, const std::string& finish, const std::string& tail) {
    return head + R"("choices":[{"index":0,"delta":)" + delta +
           R"(,"logprobs":null,"finish_reason":)" + finish + "}]" + tail;
  };
  for (const bool include_usage : {false, true}) {
    SCOPED_TRACE(include_usage ? "include_usage" : "no usage asked for");
    const std::string tail = include_usage ? R"(,"usage":null})" : "}";
    const auto data = data_events(translate(stream, include_usage));
    ASSERT_EQ(data.size(), 6u);
    EXPECT_EQ(data[0].data, choice(R"({"role":"assistant","content":""})", "null", tail));
    EXPECT_EQ(data[1].data, choice(R"({"content":"Hi"})", "null", tail));
    EXPECT_EQ(
        data[2].data,
        choice(
            R"({"tool_calls":[{"index":0,"id":"toolu_1","type":"function","function":{"name":"now","arguments":""}}]})",
            "null", tail));
    EXPECT_EQ(data[3].data, choice(R"({"tool_calls":[{"index":0,"function":{"arguments":"{}"}}]})",
                                   "null", tail));
    EXPECT_EQ(data[4].data, choice("{}", R"("tool_calls")", tail));
    EXPECT_EQ(
        data[5].data,
        head +
            R"("choices":[],"usage":{"prompt_tokens":5,"completion_tokens":3,"total_tokens":8,"prompt_tokens_details":{"cached_tokens":0}}})");
  }
}

TEST(AnthropicStream, PingIsAKeepAliveWithTheGatewaysOwnBytes) {
  const auto all = translate(kTextStream);
  ASSERT_EQ(all[1].kind, Kind::kKeepAlive);  // after message_start's role chunk
  EXPECT_EQ(all[1].raw, ": ping\n\n");
  EXPECT_TRUE(all[1].data.empty());
  const auto comment = translate(": hello\n\n");
  ASSERT_EQ(comment.size(), 1u);
  EXPECT_EQ(comment[0].kind, Kind::kKeepAlive);
  EXPECT_EQ(comment[0].raw, ": ping\n\n");
}

TEST(AnthropicStream, ThinkingStreamsAsReasoningContentBeforeTheText) {
  const auto data = data_events(translate(kThinkingStream));
  ASSERT_EQ(data.size(), 6u);  // role, 2 thinking, text, finish, usage: no signature
  EXPECT_EQ(delta_of(data[1]), json({{"reasoning_content",
                                      "Let me solve this step by step:\n\n1. First break down "
                                      "27 * 453"}}));
  EXPECT_TRUE(data[1].chunk.has_reasoning);
  EXPECT_TRUE(data[1].chunk.has_output);
  EXPECT_EQ(delta_of(data[2]), json({{"reasoning_content", "\n2. 453 = 400 + 50 + 3"}}));
  EXPECT_EQ(delta_of(data[3]), json({{"content", "27 * 453 = 12,231"}}));
  EXPECT_FALSE(data[3].chunk.has_reasoning);
  // No usage at all in this stream: zeros, still a usage chunk.
  ASSERT_TRUE(data[5].chunk.usage);
  EXPECT_EQ(data[5].chunk.usage->total_tokens, 0);
}

TEST(AnthropicStream, ToolUseArgumentsStreamAsToolCallDeltas) {
  const auto data = data_events(translate(kToolStream));
  ASSERT_EQ(data.size(), 13u);  // role, 2 text, start, 7 arguments (not the empty one), finish,
                                // usage
  const json start = delta_of(data[3])["tool_calls"][0];
  EXPECT_EQ(start, json::parse(R"({"index":0,"id":"toolu_01T1x1fJ34qAmk2tNTrN7Up6",
      "type":"function","function":{"name":"get_weather","arguments":""}})"));
  std::string arguments;
  for (std::size_t i = 4; i < 11; ++i) {
    const json call = delta_of(data[i])["tool_calls"][0];
    EXPECT_EQ(call["index"], 0);  // the first tool call, though content block 1
    EXPECT_FALSE(call.contains("id"));
    arguments += call["function"]["arguments"].get<std::string>();
  }
  EXPECT_EQ(json::parse(arguments),
            json::parse(R"({"location": "San Francisco, CA", "unit": "fahrenheit"})"));
  EXPECT_EQ(data[11].parsed["choices"][0]["finish_reason"], "tool_calls");
  EXPECT_EQ(data[12].chunk.usage->prompt_tokens, 472);
  EXPECT_EQ(data[12].chunk.usage->completion_tokens, 89);
}

TEST(AnthropicStream, EachToolUseBlockIsTheNextToolCallIndex) {
  std::string s = sse(R"({"type":"message_start","message":{"id":"m","model":"c"}})");
  for (int block = 0; block < 2; ++block) {
    const std::string i = std::to_string(block);
    s += sse(R"({"type":"content_block_start","index":)" + i +
             R"(,"content_block":{"type":"tool_use","id":"t)" + i + R"(","name":"f","input":{}}})");
    s += sse(R"({"type":"content_block_delta","index":)" + i +
             R"(,"delta":{"type":"input_json_delta","partial_json":"{\"n\":)" + i + R"(}"}})");
  }
  const auto data = data_events(translate(s));
  ASSERT_EQ(data.size(), 5u);
  EXPECT_EQ(delta_of(data[1])["tool_calls"][0]["index"], 0);
  EXPECT_EQ(delta_of(data[2])["tool_calls"][0]["function"]["arguments"], "{\"n\":0}");
  EXPECT_EQ(delta_of(data[3])["tool_calls"][0]["index"], 1);
  EXPECT_EQ(delta_of(data[3])["tool_calls"][0]["id"], "t1");
  EXPECT_EQ(delta_of(data[4])["tool_calls"][0]["index"], 1);
  EXPECT_EQ(delta_of(data[4])["tool_calls"][0]["function"]["arguments"], "{\"n\":1}");
}

// A tool that takes no parameters: Anthropic streams its input as one
// partial_json "" (or nothing at all). The client still gets arguments it can
// parse, "{}" as the whole answer says, before the call's finish (strict
// clients parse them: openai-node's parse() threw on ""), and the assembled
// answer says the same. A call whose arguments came gets nothing more.
TEST(AnthropicStream, AToolCallWithoutParametersHasEmptyObjectArgumentsBeforeItsFinish) {
  const std::string start =
      sse(R"({"type":"message_start","message":{"id":"m","model":"c","content":[]}})") +
      sse(R"({"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"t0","name":"now","input":{}}})");
  const std::string empty_delta = sse(
      R"({"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":""}})");
  const std::string stop = sse(R"({"type":"content_block_stop","index":0})");
  const std::string second_call =
      sse(R"({"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"t1","name":"f","input":{}}})") +
      sse(R"({"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\"a\":1}"}})") +
      sse(R"({"type":"content_block_stop","index":1})");
  const std::string end =
      sse(R"({"type":"message_delta","delta":{"stop_reason":"tool_use"},"usage":{"output_tokens":3}})") +
      sse(R"({"type":"message_stop"})");
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"an empty partial_json", start + empty_delta + stop + second_call + end},
      {"no input_json_delta", start + stop + second_call + end},
      {"no content_block_stop", start + empty_delta + second_call + end},
      {"whitespace",
       start +
           sse(R"({"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":" "}})") +
           stop + second_call + end},
  };
  for (const auto& [name, stream] : cases) {
    SCOPED_TRACE(name);
    std::map<int, std::string> arguments;
    bool finished = false;
    CompletionAssembler assembler;
    for (const auto& e : data_events(translate(stream))) {
      const json& choices = e.parsed["choices"];
      if (!choices.empty() && choices[0]["finish_reason"].is_string()) finished = true;
      const json delta = choices.empty() ? json::object() : delta_of(e);
      if (delta.contains("tool_calls")) {
        EXPECT_FALSE(finished) << "after the finish: " << e.data;
        for (const auto& call : delta["tool_calls"])
          arguments[call["index"].get<int>()] += call["function"]["arguments"].get<std::string>();
      }
      const ChatChunk c = inspect_chunk(e.data);
      if (c.plain)
        assembler.add_plain(c);
      else
        assembler.add(parse_chunk(e.data).json);
    }
    EXPECT_TRUE(finished);
    ASSERT_EQ(arguments.size(), 2u);
    // (Not parse(): "" throws, as the SDKs' JSON.parse does.)
    EXPECT_EQ(json::parse(arguments[0], nullptr, false), json::object()) << arguments[0];
    EXPECT_EQ(arguments[1], R"({"a":1})");
    const json calls = assembler.result()["choices"][0]["message"]["tool_calls"];
    EXPECT_EQ(json::parse(calls[0]["function"]["arguments"].get<std::string>(), nullptr, false),
              json::object())
        << calls;
    EXPECT_EQ(calls[1]["function"]["arguments"], R"({"a":1})");
  }
}

// The events around the text are answered from read_event()'s facts: by
// its scan, or by its document's reading when the scan declines an event
// (an escaped key or stop reason, a key given twice). Either way the chunks
// are the same.
TEST(AnthropicStream, TheEventsAroundTheTextSayTheSameHoweverTheyAreWritten) {
  const std::string head =
      sse(R"({"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}})") +
      sse(R"({"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"hi"}})") +
      sse(R"({"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"t0","name":"now","input":{}}})");
  const std::string plain =
      sse(R"({"type":"message_start","message":{"id":"m","model":"c","content":[],"usage":{"input_tokens":5}}})") +
      head + sse(R"({"type":"ping"})") + sse(R"({"type":"content_block_stop","index":1})") +
      sse(R"({"type":"message_delta","delta":{"stop_reason":"tool_use"},"usage":{"output_tokens":3}})") +
      sse(R"({"type":"message_stop"})");
  const std::string odd =
      sse(R"({"type":"message_start","message":{"id":"\u006d","model":"c","model":"c","usage":{"input_tokens":5}}})") +
      head + sse(R"({"type":"pi\u006eg"})") +
      sse(R"({"index":0,"type":"content_block_stop","index":1})") +
      sse(R"({"type":"message_delta","delta":{"stop_reason":"tool\u005fuse"},"usage":{"output_tokens":2,"output_tokens":3}})") +
      sse(R"({"type":"message_stop","type":"message_stop"})");
  const auto a = translate(plain, /*include_usage=*/true);
  const auto b = translate(odd, /*include_usage=*/true);
  ASSERT_EQ(a.size(), b.size());
  EXPECT_EQ(a[0].parsed["id"], "m");
  EXPECT_EQ(a[0].parsed["model"], "c");
  for (std::size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].kind, b[i].kind) << i;
    EXPECT_EQ(a[i].parsed, b[i].parsed) << i;
    EXPECT_EQ(a[i].raw, b[i].raw) << i;
  }
  // The call closed with "{}" at its block's stop, then the finish, the usage and done.
  const auto data = data_events(a);
  ASSERT_GE(data.size(), 3u);
  EXPECT_EQ(delta_of(data[data.size() - 3])["tool_calls"][0]["function"]["arguments"], "{}");
  EXPECT_EQ(data[data.size() - 2].parsed["choices"][0]["finish_reason"], "tool_calls");
  EXPECT_EQ(data.back().parsed["usage"]["completion_tokens"], 3);
  EXPECT_EQ(a.back().kind, Kind::kDone);
  EXPECT_EQ(a[a.size() - 1 - 4].kind, Kind::kKeepAlive);  // the ping
}

// The same call in a non-streamed answer: "{}", as Gemini's are.
TEST(AnthropicCompletion, AToolCallWithoutParametersHasEmptyObjectArguments) {
  const Fixture f;
  for (const char* input : {R"("input":{})", R"("input":null)", ""}) {
    const std::string block = std::string(R"({"type":"tool_use","id":"t","name":"now")") +
                              (*input ? "," : "") + input + "}";
    const auto c = anthropic_protocol().completion(
        json::parse(R"({"id":"m","type":"message","role":"assistant","model":"c",
          "stop_reason":"tool_use","content":[)" +
                    block + "]}"),
        f.request());
    ASSERT_TRUE(c) << block;
    EXPECT_EQ((*c)["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"], "{}")
        << block;
  }
}

TEST(AnthropicStream, ServerToolInputIsNotAClientToolCall) {
  const auto data = data_events(translate(
      sse(R"({"type":"content_block_start","index":0,"content_block":{"type":"server_tool_use","id":"srvtoolu_1","name":"web_search","input":{}}})") +
      sse(R"({"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"{\"query\":\"x\"}"}})") +
      sse(R"({"type":"content_block_start","index":1,"content_block":{"type":"web_search_tool_result","tool_use_id":"srvtoolu_1","content":[]}})") +
      sse(R"({"type":"content_block_start","index":2,"content_block":{"type":"redacted_thinking","data":"abc"}})")));
  EXPECT_TRUE(data.empty());
}

TEST(AnthropicStream, OverloadedErrorEndsTheStream) {
  const auto all = translate(
      sse(R"({"type":"message_start","message":{"id":"m","model":"c"}})") +
      sse(R"({"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}})") +
      sse(R"({"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"late"}})") +
      sse(R"({"type":"message_stop"})"));
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[1].kind, Kind::kError);
  EXPECT_EQ(all[1].message, "overloaded_error: Overloaded");
}

TEST(AnthropicStream, NothingFollowsDone) {
  const auto all = translate(std::string(kTextStream) + sse(R"({"type":"ping"})") +
                             sse(R"({"type":"message_stop"})"));
  EXPECT_EQ(all.back().kind, Kind::kDone);
  EXPECT_EQ(all.size(), 7u);
}

TEST(AnthropicStream, UsageOfMessageStartAndMessageDeltaCombine) {
  const auto data = data_events(translate(
      sse(R"({"type":"message_start","message":{"id":"m","model":"c","usage":{"input_tokens":10,"output_tokens":1}}})") +
      sse(R"({"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":7}})") +
      sse(R"({"type":"message_stop"})")));
  const auto& u = data.back().chunk.usage;
  ASSERT_TRUE(u);
  EXPECT_EQ(u->prompt_tokens, 10);
  EXPECT_EQ(u->completion_tokens, 7);  // cumulative: replaces the 1, not added
  EXPECT_EQ(u->total_tokens, 17);
}

TEST(AnthropicStream, UsageAllOnMessageDeltaReplacesMessageStarts) {
  const auto data = data_events(translate(
      sse(R"({"type":"message_start","message":{"id":"m","model":"c","usage":{"input_tokens":0,"output_tokens":0}}})") +
      sse(R"({"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"input_tokens":100,"cache_read_input_tokens":50,"cache_creation_input_tokens":5,"output_tokens":20}})") +
      sse(R"({"type":"message_stop"})")));
  const auto& u = data.back().chunk.usage;
  ASSERT_TRUE(u);
  EXPECT_EQ(u->prompt_tokens, 155);
  EXPECT_EQ(u->completion_tokens, 20);
  EXPECT_EQ(u->cached_tokens, 50);
}

TEST(AnthropicStream, CacheTokensAreInPromptTokensAndCachedTokens) {
  const auto data = data_events(translate(
      sse(R"({"type":"message_start","message":{"id":"m","model":"c","usage":{"input_tokens":10,"cache_creation_input_tokens":200,"cache_read_input_tokens":1000,"output_tokens":1}}})") +
      sse(R"({"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":3}})") +
      sse(R"({"type":"message_stop"})")));
  const Seen& usage = data.back();
  EXPECT_TRUE(usage.chunk.usage_only);
  EXPECT_EQ(usage.parsed["usage"], json::parse(R"({"prompt_tokens":1210,"completion_tokens":3,
      "total_tokens":1213,"prompt_tokens_details":{"cached_tokens":1000}})"));
  EXPECT_EQ(usage.chunk.usage->cached_tokens, 1000);
}

TEST(AnthropicStream, StopReasonsMapToFinishReasons) {
  const std::pair<const char*, const char*> cases[] = {
      {"end_turn", "stop"},
      {"stop_sequence", "stop"},
      {"pause_turn", "stop"},
      {"max_tokens", "length"},
      {"tool_use", "tool_calls"},
      {"refusal", "content_filter"},
      {"model_context_window_exceeded_v9", "stop"}};
  for (const auto& [stop, finish] : cases) {
    const auto data = data_events(
        translate(sse(std::string(R"({"type":"message_delta","delta":{"stop_reason":")") + stop +
                      R"("},"usage":{"output_tokens":1}})")));
    ASSERT_EQ(data.size(), 1u) << stop;
    EXPECT_EQ(data[0].parsed["choices"][0]["finish_reason"], finish) << stop;
    EXPECT_EQ(delta_of(data[0]), json::object());
  }
}

TEST(AnthropicStream, UnknownEventsAndDeltasAreIgnored) {
  const auto all = translate(
      sse(R"({"type":"message_telemetry","whatever":1})") +
      sse(R"({"type":"content_block_stop","index":0})") +
      sse(R"({"type":"content_block_delta","index":0,"delta":{"type":"citations_delta","citation":{}}})") +
      sse(R"({"type":"content_block_delta","index":0,"delta":{"type":"hologram_delta","x":"y"}})") +
      sse(R"({"type":"message_delta","delta":{"stop_reason":null},"usage":{"output_tokens":1}})"));
  EXPECT_TRUE(all.empty());
}

TEST(AnthropicStream, MalformedDataIsReportedAndTheStreamGoesOn) {
  const auto all = translate(sse("not json") + sse(R"({"no":"type"})") + sse("[1,2]") +
                             sse(R"({"type":7})") + sse(R"({"type":"message_stop"})"));
  ASSERT_EQ(all.size(), 6u);
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(all[i].kind, Kind::kMalformed);
    EXPECT_FALSE(all[i].message.empty());
  }
  EXPECT_EQ(all[5].kind, Kind::kDone);
}

TEST(AnthropicStream, WithoutMessageStartTheRequestsModelNamesTheChunks) {
  const auto data = data_events(translate(sse(
      R"({"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"hi"}})")));
  ASSERT_EQ(data.size(), 1u);
  EXPECT_EQ(data[0].parsed["model"], "claude-sonnet-4-5");
}

// ---- non-streamed answers and errors -------------------------------------------

TEST(AnthropicCompletion, MapsTextThinkingToolsAndUsage) {
  const Fixture f;
  const json answer = json::parse(R"({
    "id": "msg_01", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5",
    "content": [
      {"type": "thinking", "thinking": "Let me think", "signature": "sig"},
      {"type": "text", "text": "I'll check."},
      {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"location": "Paris"}}
    ],
    "stop_reason": "tool_use", "stop_sequence": null,
    "usage": {"input_tokens": 100, "cache_read_input_tokens": 20, "output_tokens": 30}})");
  const auto c = anthropic_protocol().completion(answer, f.request());
  ASSERT_TRUE(c);
  EXPECT_EQ(*c, json::parse(R"({
    "id": "msg_01", "object": "chat.completion", "created": 1700000000,
    "model": "claude-sonnet-4-5",
    "choices": [{"index": 0, "logprobs": null, "finish_reason": "tool_calls",
      "message": {"role": "assistant", "content": "I'll check.", "refusal": null,
        "reasoning_content": "Let me think",
        "tool_calls": [{"id": "toolu_1", "type": "function",
          "function": {"name": "get_weather", "arguments": "{\"location\":\"Paris\"}"}}]}}],
    "usage": {"prompt_tokens": 120, "completion_tokens": 30, "total_tokens": 150,
      "prompt_tokens_details": {"cached_tokens": 20}}})"));
}

TEST(AnthropicCompletion, ToolCallsWithoutTextHaveNullContent) {
  const Fixture f;
  const auto c = anthropic_protocol().completion(
      json::parse(
          R"({"id":"m","type":"message","role":"assistant","model":"c","stop_reason":"tool_use",
        "content":[{"type":"tool_use","id":"t","name":"f","input":{}}]})"),
      f.request());
  ASSERT_TRUE(c);
  EXPECT_TRUE((*c)["choices"][0]["message"]["content"].is_null());
  EXPECT_FALSE((*c)["choices"][0]["message"].contains("reasoning_content"));
}

TEST(AnthropicCompletion, AnErrorIsNotAnAnswer) {
  const Fixture f;
  const auto& p = anthropic_protocol();
  EXPECT_FALSE(p.completion(
      json::parse(R"({"type":"error","error":{"type":"api_error","message":"x"}})"), f.request()));
  EXPECT_FALSE(p.completion(json::parse("[1]"), f.request()));
  EXPECT_FALSE(p.completion(json::parse(R"({"type":"message","content":"no"})"), f.request()));
}

TEST(AnthropicError, ErrorBodyBecomesOpenAisShape) {
  const auto& p = anthropic_protocol();
  const auto e = p.error(
      json::parse(
          R"({"type":"error","error":{"type":"invalid_request_error","message":"max_tokens: Field required"}})"),
      400);
  ASSERT_TRUE(e);
  EXPECT_EQ(*e, json::parse(R"({"error":{"message":"max_tokens: Field required",
      "type":"invalid_request_error","param":null,"code":null}})"));
  EXPECT_FALSE(p.error(json::parse(R"({"error":{"message":"openai"}})"), 400));
  EXPECT_FALSE(p.error(json::parse(R"({"type":"error","error":"x"})"), 500));
}

// The stream, assembled the way the gateway answers a non-stream client, says
// what the same answer sent whole says: the two paths agree.
TEST(AnthropicCompletion, AssembledStreamEqualsTheWholeAnswer) {
  const std::string stream =
      sse(R"({"type":"message_start","message":{"id":"msg_9","type":"message","role":"assistant","model":"claude-x","content":[],"usage":{"input_tokens":40,"cache_read_input_tokens":8,"output_tokens":1}}})") +
      sse(R"({"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":""}})") +
      sse(R"({"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"Weather "}})") +
      sse(R"({"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"needed."}})") +
      sse(R"({"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature":"s"}})") +
      sse(R"({"type":"content_block_start","index":1,"content_block":{"type":"text","text":""}})") +
      sse(R"({"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"Checking \"Paris\"\u2026"}})") +
      sse(R"({"type":"content_block_start","index":2,"content_block":{"type":"tool_use","id":"toolu_1","name":"get_weather","input":{}}})") +
      sse(R"({"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":"{\"city\":"}})") +
      sse(R"({"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":"\"Paris\"}"}})") +
      sse(R"({"type":"message_delta","delta":{"stop_reason":"tool_use"},"usage":{"output_tokens":25}})") +
      sse(R"({"type":"message_stop"})");
  CompletionAssembler assembler;
  for (const auto& e : translate(stream)) {
    if (e.kind != Kind::kData) continue;
    // The relay's way; inspected again because the chunk's views were of the
    // translator's buffer, valid only during the sink call.
    const ChatChunk c = inspect_chunk(e.data);
    if (c.plain)
      assembler.add_plain(c);
    else
      assembler.add(parse_chunk(e.data).json);
  }
  // Compact input, as Anthropic's whole answer dumps it (whitespace in a
  // streamed partial_json would differ only in spacing).
  const json whole = json::parse(R"({"id":"msg_9","type":"message","role":"assistant",
    "model":"claude-x","stop_reason":"tool_use","stop_sequence":null,
    "content":[{"type":"thinking","thinking":"Weather needed.","signature":"s"},
      {"type":"text","text":"Checking \"Paris\"\u2026"},
      {"type":"tool_use","id":"toolu_1","name":"get_weather","input":{"city":"Paris"}}],
    "usage":{"input_tokens":40,"cache_read_input_tokens":8,"output_tokens":25}})");
  const Fixture f;
  const auto c = anthropic_protocol().completion(whole, f.request());
  ASSERT_TRUE(c);
  EXPECT_EQ(assembler.result(), *c);
}

// ---- the request -----------------------------------------------------------------

std::variant<std::string, Untranslatable> body_of(const config::Provider& p,
                                                  std::string_view client) {
  auto in = RequestBody::from(json::parse(client));
  UpstreamRequest r;
  r.upstream_model = "claude-sonnet-4-5";
  r.provider = &p;
  return anthropic_protocol().body(in, r);
}

json translated(std::string_view client, const config::Provider& p = {}) {
  auto b = body_of(p, client);
  if (auto* u = std::get_if<Untranslatable>(&b)) {
    ADD_FAILURE() << "refused: " << u->message;
    return nullptr;
  }
  return json::parse(std::get<std::string>(b));
}

Untranslatable refused(std::string_view client, const config::Provider& p = {}) {
  auto b = body_of(p, client);
  if (auto* u = std::get_if<Untranslatable>(&b)) return *u;
  ADD_FAILURE() << "translated: " << std::get<std::string>(b);
  return {};
}

// The conversation is written from the client's text (anthropic_chat_body_text)
// for what clients send, and says what the document's translation says;
// what it does not answer exactly is left to that translation.
TEST(AnthropicRequest, TheConversationIsWrittenAsTheDocumentsTranslationWritesIt) {
  const config::Provider p;
  UpstreamRequest r;
  r.upstream_model = "claude-sonnet-4-5";
  r.provider = &p;
  const char* written[] = {
      R"({"model":"m","messages":[{"role":"user","content":"Hi"}],"stream":true})",
      // system strings joined; developer; an escaped text kept as written
      R"({"model":"m","messages":[{"role":"system","content":"Be \"brief\"."},
          {"role":"user","content":"Hi \u00e9"},{"role":"developer","content":""},
          {"role":"developer","content":"French."}],"temperature":0.5})",
      // system blocks: a mark, parts
      R"({"model":"m","messages":[{"role":"system","content":"","cache_control":{"type":"ephemeral"}},
          {"role":"system","content":[{"type":"text","text":"More."}]},{"role":"user","content":"Hi"}]})",
      // a tool round trip: calls, results merged with the next user turn
      R"({"model":"m","messages":[{"role":"user","content":"Weather?","name":"ann"},
          {"role":"assistant","content":"Checking.","tool_calls":[
            {"id":"call_1","type":"function","function":{"name":"w","arguments":"{\"city\":\"Paris\"}"}},
            {"id":"call_2","function":{"name":"w","arguments":" "}}]},
          {"role":"tool","tool_call_id":"call_1","content":"18C","cache_control":{"type":"ephemeral"}},
          {"role":"tool","tool_call_id":"call_2","content":[{"type":"text","text":"24C"}]},
          {"role":"user","content":"Thanks"}],
        "tools":[{"type":"function","function":{"name":"w","parameters":{"type":"object"}}}],
        "tool_choice":"auto","parallel_tool_calls":false,"user":"u1"})",
      // runs of one role: a string turn becomes blocks, an empty one none
      R"({"model":"m","messages":[{"role":"user","content":""},{"role":"user","content":"a"},
          {"role":"user","content":[]},{"role":"assistant","content":"b"},
          {"role":"assistant","content":"c"},{"role":"assistant","content":null,"tool_calls":[]},
          {"role":"user","content":"d","cache_control":{"type":"ephemeral"}},
          {"role":"user","content":[{"type":"text","text":"e","cache_control":{"type":"ephemeral"}}]}]})",
      // images: base64, a URL, a URL as a plain string
      R"({"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"What?"},
          {"type":"image_url","image_url":{"url":"data:image/png;base64,iVBORw0KGgo=","detail":"high"}},
          {"type":"image_url","image_url":"https://example.com/cat.jpg"}]}]})",
      // refused by a field outside the conversation, as the document's is
      R"({"model":"m","messages":[{"role":"user","content":"x"}],"logprobs":true})",
      R"({"model":"m","messages":[{"role":"user","content":"x"}],"temperature":2})",
  };
  // Declined (the document's translation answers): a refusal in the
  // conversation, an escaped image URL, a message's mark over a part's.
  const char* declined[] = {
      R"({"model":"m","messages":[{"role":"critic","content":"x"}]})",
      R"({"model":"m","messages":[{"role":"user","content":[
          {"type":"image_url","image_url":{"url":"https:\/\/example.com\/a.png"}}]}]})",
      R"({"model":"m","messages":[{"role":"user","cache_control":{"type":"ephemeral"},
          "content":[{"type":"text","text":"e","cache_control":{"type":"ephemeral","ttl":"1h"}}]}]})",
  };
  text_writer::expect_as_translated(anthropic_chat_body_text, anthropic_chat_body_from_document, r,
                                    written, declined);
  EXPECT_EQ(translated(declined[1])["messages"][0]["content"][0]["source"]["url"],
            "https://example.com/a.png");
  // A mark is written from its document: a key the client sent twice goes
  // once, with the value admission read (the last).
  const auto marked = anthropic_chat_body_text(
      text_writer::indexed(R"({"model":"m","messages":[{"role":"user","content":"hi",
          "cache_control":{"type":"ephemeral","ttl":"5m","ttl":"1h"}}]})"),
      r);
  ASSERT_TRUE(marked && std::holds_alternative<std::string>(*marked));
  EXPECT_EQ(std::get<std::string>(*marked).find("5m"), std::string::npos);
  EXPECT_NE(std::get<std::string>(*marked).find(R"("ttl":"1h")"), std::string::npos);
}

TEST(AnthropicRequest, TargetAndHeaders) {
  const auto& p = anthropic_protocol();
  config::Provider provider;
  provider.anthropic_version = "2023-06-01";
  std::string built;
  EXPECT_EQ(p.target("claude-x", true, built), "/messages");
  EXPECT_TRUE(built.empty());  // a fixed target: nothing built
  EXPECT_EQ(p.name(), "anthropic");
  EXPECT_FALSE(p.passthrough());
  using Headers = std::vector<std::pair<std::string, std::string>>;
  EXPECT_EQ(p.headers("sk-ant", provider),
            (Headers{{"x-api-key", "sk-ant"}, {"anthropic-version", "2023-06-01"}}));
  EXPECT_EQ(p.headers("", provider), (Headers{{"anthropic-version", "2023-06-01"}}));
}

TEST(AnthropicRequest, PlainChatKeepsItsShape) {
  EXPECT_EQ(translated(R"({"model":"alias","messages":[{"role":"user","content":"Hi"}],
                           "stream":true,"stream_options":{"include_usage":true}})"),
            json::parse(R"({"model":"claude-sonnet-4-5","stream":true,"max_tokens":4096,
                           "messages":[{"role":"user","content":"Hi"}]})"));
}

TEST(AnthropicRequest, SystemAndDeveloperMessagesBecomeTheSystemString) {
  const json out = translated(R"({"model":"m","messages":[
      {"role":"system","content":"Be brief."},
      {"role":"user","content":"Hi"},
      {"role":"developer","content":"Answer in French."}]})");
  EXPECT_EQ(out["system"], "Be brief.\n\nAnswer in French.");
  EXPECT_EQ(out["messages"], json::parse(R"([{"role":"user","content":"Hi"}])"));
}

TEST(AnthropicRequest, SystemWithCacheControlOrPartsBecomesTextBlocks) {
  const json out = translated(R"({"model":"m","messages":[
      {"role":"system","content":"Long rules.","cache_control":{"type":"ephemeral"}},
      {"role":"system","content":[{"type":"text","text":"More."}]},
      {"role":"user","content":"Hi"}]})");
  EXPECT_EQ(out["system"], json::parse(R"([
      {"type":"text","text":"Long rules.","cache_control":{"type":"ephemeral"}},
      {"type":"text","text":"More."}])"));
}

TEST(AnthropicRequest, ImagesBecomeBase64OrUrlSources) {
  const json out = translated(R"({"model":"m","messages":[{"role":"user","content":[
      {"type":"text","text":"What is this?"},
      {"type":"image_url","image_url":{"url":"data:image/png;base64,iVBORw0KGgo=","detail":"high"}},
      {"type":"image_url","image_url":{"url":"https://example.com/cat.jpg"}}]}]})");
  EXPECT_EQ(out["messages"][0]["content"], json::parse(R"([
      {"type":"text","text":"What is this?"},
      {"type":"image","source":{"type":"base64","media_type":"image/png","data":"iVBORw0KGgo="}},
      {"type":"image","source":{"type":"url","url":"https://example.com/cat.jpg"}}])"));
}

TEST(AnthropicRequest, UnsupportedContentPartsAreRefusedByPosition) {
  auto u = refused(R"({"model":"m","messages":[{"role":"user","content":"a"},
      {"role":"user","content":[{"type":"text","text":"b"},
        {"type":"input_audio","input_audio":{"data":"x","format":"wav"}}]}]})");
  EXPECT_EQ(u.param, "messages[1].content[1]");
  EXPECT_NE(u.message.find("input_audio"), std::string::npos);
  u = refused(R"({"model":"m","messages":[{"role":"user","content":[
      {"type":"image_url","image_url":{"url":"ftp://x/y.png"}}]}]})");
  EXPECT_EQ(u.param, "messages[0].content[0].image_url");
}

TEST(AnthropicRequest, ToolRoundTripBecomesToolUseAndMergedToolResults) {
  const json out = translated(R"({"model":"m","messages":[
      {"role":"user","content":"Weather in Paris and Rome?","name":"ann"},
      {"role":"assistant","content":"Checking.","tool_calls":[
        {"id":"call_1","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}},
        {"id":"call_2","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Rome\"}"}}]},
      {"role":"tool","tool_call_id":"call_1","content":"18C"},
      {"role":"tool","tool_call_id":"call_2","content":[{"type":"text","text":"24C"}]},
      {"role":"user","content":"Thanks"}]})");
  EXPECT_EQ(out["messages"], json::parse(R"([
      {"role":"user","content":"Weather in Paris and Rome?"},
      {"role":"assistant","content":[
        {"type":"text","text":"Checking."},
        {"type":"tool_use","id":"call_1","name":"get_weather","input":{"city":"Paris"}},
        {"type":"tool_use","id":"call_2","name":"get_weather","input":{"city":"Rome"}}]},
      {"role":"user","content":[
        {"type":"tool_result","tool_use_id":"call_1","content":"18C"},
        {"type":"tool_result","tool_use_id":"call_2","content":[{"type":"text","text":"24C"}]},
        {"type":"text","text":"Thanks"}]}])"));
}

TEST(AnthropicRequest, AssistantToolCallWithoutTextHasOnlyToolUse) {
  const json out = translated(R"({"model":"m","messages":[{"role":"user","content":"x"},
      {"role":"assistant","content":null,"tool_calls":[
        {"id":"c","type":"function","function":{"name":"f","arguments":""}}]}]})");
  EXPECT_EQ(out["messages"][1]["content"],
            json::parse(R"([{"type":"tool_use","id":"c","name":"f","input":{}}])"));
}

TEST(AnthropicRequest, ToolCallArgumentsMustBeAJsonObject) {
  for (const char* args : {R"([1])", R"(not json)", R"(\"s\")"}) {
    const auto u = refused(std::string(R"({"model":"m","messages":[{"role":"user","content":"x"},
        {"role":"assistant","tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":")") +
                           args + R"("}}]}]})");
    EXPECT_EQ(u.param, "messages[1].tool_calls[0].function.arguments") << args;
  }
}

TEST(AnthropicRequest, CacheControlIsCopiedOntoTheBlocks) {
  const json out = translated(R"({"model":"m","messages":[
      {"role":"user","content":"A long document.","cache_control":{"type":"ephemeral"}},
      {"role":"assistant","content":"Read it."},
      {"role":"user","content":[{"type":"text","text":"Q1","cache_control":{"type":"ephemeral","ttl":"1h"}},
                                {"type":"text","text":"Q2"}]}],
      "tools":[{"type":"function","function":{"name":"f"},"cache_control":{"type":"ephemeral"}}]})");
  EXPECT_EQ(out["messages"][0]["content"], json::parse(R"([
      {"type":"text","text":"A long document.","cache_control":{"type":"ephemeral"}}])"));
  EXPECT_EQ(out["messages"][2]["content"][0]["cache_control"],
            json::parse(R"({"type":"ephemeral","ttl":"1h"})"));
  EXPECT_FALSE(out["messages"][2]["content"][1].contains("cache_control"));
  EXPECT_EQ(out["tools"][0]["cache_control"], json::parse(R"({"type":"ephemeral"})"));
}

TEST(AnthropicRequest, MaxTokensComesFromTheClientElseTheProvider) {
  config::Provider p;
  p.default_max_tokens = 1234;
  const char* user = R"("messages":[{"role":"user","content":"x"}])";
  EXPECT_EQ(translated(std::string("{") + user + "}", p)["max_tokens"], 1234);
  EXPECT_EQ(translated(std::string("{") + user + R"(,"max_tokens":50})", p)["max_tokens"], 50);
  EXPECT_EQ(translated(std::string("{") + user + R"(,"max_tokens":50,"max_completion_tokens":60})",
                       p)["max_tokens"],
            60);
  EXPECT_EQ(refused(std::string("{") + user + R"(,"max_tokens":0})", p).param, "max_tokens");
}

TEST(AnthropicRequest, ReasoningEffortBecomesTheProvidersThinkingBudget) {
  const char* user = R"("messages":[{"role":"user","content":"x"}])";
  json out = translated(std::string("{") + user +
                        R"(,"max_completion_tokens":16000,"reasoning_effort":"medium"})");
  EXPECT_EQ(out["thinking"], json::parse(R"({"type":"enabled","budget_tokens":8192})"));
  // Capped below max_tokens, as Anthropic requires.
  out =
      translated(std::string("{") + user + R"(,"max_tokens":10000,"reasoning":{"effort":"high"}})");
  EXPECT_EQ(out["thinking"]["budget_tokens"], 9999);
  config::Provider custom;
  custom.thinking_budgets = {{"low", 3000}};
  out = translated(std::string("{") + user + R"(,"reasoning_effort":"low"})", custom);
  EXPECT_EQ(out["thinking"]["budget_tokens"], 3000);
  out = translated(std::string("{") + user + R"(,"reasoning_effort":"none"})");
  EXPECT_FALSE(out.contains("thinking"));
}

TEST(AnthropicRequest, ThinkingBudgetUnder1024IsRefusedNamingTheLimit) {
  const char* user = R"("messages":[{"role":"user","content":"x"}])";
  auto u = refused(std::string("{") + user + R"(,"max_tokens":1000,"reasoning_effort":"low"})");
  EXPECT_EQ(u.param, "max_tokens");
  EXPECT_NE(u.message.find("1024"), std::string::npos);
  u = refused(std::string("{") + user +
              R"(,"max_completion_tokens":1024,"reasoning_effort":"high"})");
  EXPECT_EQ(u.param, "max_completion_tokens");
  EXPECT_EQ(
      translated(std::string("{") + user +
                 R"(,"max_tokens":1025,"reasoning_effort":"high"})")["thinking"]["budget_tokens"],
      1024);
}

TEST(AnthropicRequest, EffortWithoutABudgetIsRefused) {
  const auto u =
      refused(R"({"messages":[{"role":"user","content":"x"}],"reasoning_effort":"max"})");
  EXPECT_EQ(u.param, "reasoning_effort");
}

TEST(AnthropicRequest, ThinkingRefusesWhatAnthropicRefusesWithIt) {
  const std::string head =
      R"({"messages":[{"role":"user","content":"x"}],"reasoning_effort":"low")";
  EXPECT_EQ(refused(head + R"(,"temperature":0.5})").param, "temperature");
  EXPECT_EQ(refused(head + R"(,"top_p":0.5})").param, "top_p");
  EXPECT_EQ(refused(head + R"(,"top_k":5})").param, "top_k");
  EXPECT_EQ(refused(head + R"(,"tools":[{"type":"function","function":{"name":"f"}}],
                               "tool_choice":"required"})")
                .param,
            "tool_choice");
  EXPECT_EQ(translated(head + R"(,"temperature":1})")["temperature"], 1);
}

TEST(AnthropicRequest, TemperatureAboveOneIsRefused) {
  const std::string head = R"({"messages":[{"role":"user","content":"x"}])";
  EXPECT_EQ(refused(head + R"(,"temperature":1.5})").param, "temperature");
  const json out = translated(head + R"(,"temperature":0.7,"top_p":0.9,"top_k":40})");
  EXPECT_EQ(out["temperature"], 0.7);
  EXPECT_EQ(out["top_p"], 0.9);
  EXPECT_EQ(out["top_k"], 40);
}

TEST(AnthropicRequest, UnknownTopLevelFieldIsRefusedByName) {
  const auto u = refused(R"({"messages":[{"role":"user","content":"x"}],"verbosity":"low"})");
  EXPECT_EQ(u.param, "verbosity");
  EXPECT_NE(u.message.find("verbosity"), std::string::npos);
  // Found by fuzz_anthropic_stream: a field named "" is named too.
  const auto empty = refused(R"({"messages":[{"role":"user","content":"x"}],"":{"a":"b"}})");
  EXPECT_EQ(empty.param, R"("")");
}

TEST(AnthropicRequest, FieldsWithoutAnEquivalentAreRefusedUnlessHarmless) {
  const std::string head = R"({"messages":[{"role":"user","content":"x"}])";
  const std::pair<const char*, const char*> refusals[] = {
      {"n", "2"},
      {"logprobs", "true"},
      {"top_logprobs", "3"},
      {"logit_bias", R"({"50256":-100})"},
      {"frequency_penalty", "0.5"},
      {"presence_penalty", "-1"},
      {"response_format", R"({"type":"json_object"})"},
      {"audio", R"({"voice":"alloy","format":"wav"})"},
      {"modalities", R"(["text","audio"])"},
      {"prediction", R"({"type":"content","content":"x"})"},
      {"functions", R"([{"name":"f"}])"},
      {"function_call", R"("auto")"},
      {"web_search_options", "{}"}};
  for (const auto& [field, value] : refusals) {
    EXPECT_EQ(refused(head + ",\"" + field + "\":" + value + "}").param, field) << field;
  }
  const json out = translated(head + R"(,"n":1,"logprobs":false,"frequency_penalty":0,
      "presence_penalty":0,"response_format":{"type":"text"},"modalities":["text"],
      "logit_bias":{},"audio":null,"functions":null,"top_logprobs":null})");
  EXPECT_EQ(out, translated(head + "}"));
}

TEST(AnthropicRequest, FieldsThatChangeNothingAreDropped) {
  const std::string head = R"({"messages":[{"role":"user","content":"x"}])";
  EXPECT_EQ(translated(head + R"(,"seed":7,"store":true,"metadata":{"k":"v"},
      "service_tier":"auto","stream_options":{"include_usage":true},"prompt_cache_key":"p"})"),
            translated(head + "}"));
}

TEST(AnthropicRequest, StopToolsToolChoiceAndUserTranslate) {
  const json out = translated(R"({"messages":[{"role":"user","content":"x"}],"stop":"END",
      "tools":[{"type":"function","function":{"name":"get_weather","description":"Weather",
        "parameters":{"type":"object","properties":{"city":{"type":"string"}}},"strict":true}},
        {"type":"function","function":{"name":"now"}}],
      "tool_choice":{"type":"function","function":{"name":"get_weather"}},
      "parallel_tool_calls":false,"user":"u-42"})");
  EXPECT_EQ(out["stop_sequences"], json::parse(R"(["END"])"));
  EXPECT_EQ(out["tools"], json::parse(R"([
      {"name":"get_weather","description":"Weather",
       "input_schema":{"type":"object","properties":{"city":{"type":"string"}}}},
      {"name":"now","input_schema":{"type":"object"}}])"));
  EXPECT_EQ(
      out["tool_choice"],
      json::parse(R"({"type":"tool","name":"get_weather","disable_parallel_tool_use":true})"));
  EXPECT_EQ(out["metadata"], json::parse(R"({"user_id":"u-42"})"));
}

TEST(AnthropicRequest, ToolChoiceWordsMapToAnthropics) {
  const std::string head = R"({"messages":[{"role":"user","content":"x"}],"tool_choice":)";
  EXPECT_EQ(translated(head + R"("auto"})")["tool_choice"], json::parse(R"({"type":"auto"})"));
  EXPECT_EQ(translated(head + R"("required"})")["tool_choice"], json::parse(R"({"type":"any"})"));
  EXPECT_EQ(translated(head + R"("none"})")["tool_choice"], json::parse(R"({"type":"none"})"));
  EXPECT_EQ(translated(R"({"messages":[],"parallel_tool_calls":false})")["tool_choice"],
            json::parse(R"({"type":"auto","disable_parallel_tool_use":true})"));
  EXPECT_EQ(refused(head + R"({"type":"allowed_tools"}})").param, "tool_choice");
  EXPECT_EQ(refused(R"({"messages":[],"tools":[{"type":"custom","custom":{"name":"x"}}]})").param,
            "tools[0]");
  EXPECT_EQ(translated(R"({"messages":[],"stop":["a","b"]})")["stop_sequences"],
            json::parse(R"(["a","b"])"));
}

TEST(AnthropicRequest, UnknownRoleIsRefused) {
  EXPECT_EQ(refused(R"({"messages":[{"role":"function","name":"f","content":"x"}]})").param,
            "messages[0].role");
}

}  // namespace
}  // namespace llmgate::providers
