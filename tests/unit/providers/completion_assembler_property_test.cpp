// Property: a non-streamed answer assembled from a stream equals the
// upstream's own non-streamed answer, field for field, for generated answers
// and generated ways of streaming them (text split anywhere, tool calls,
// reasoning under either name, audio, annotations, fields no one knows yet,
// Azure's empty first chunk, content filters, usage) — on the parsed path and
// on the fast path for plain content chunks alike.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "providers/chat_chunk.h"
#include "providers/completion_assembler.h"

namespace llmgate::providers {
namespace {

using json = nlohmann::json;

class Generator {
 public:
  explicit Generator(std::uint64_t seed) : rng_(seed) {}

  bool coin(double p = 0.5) { return std::bernoulli_distribution(p)(rng_); }
  int between(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng_); }

  std::string text(int max_len) {
    static const std::vector<std::string> kPieces = {"a",  "b", " ", "hello", "\n", "\"", "\\", "é",
                                                     "中", "😀", "{", "}",     ",",  "/",  "\t"};
    std::string s;
    const int n = between(1, max_len);
    for (int i = 0; i < n; ++i) s += kPieces[static_cast<std::size_t>(between(0, 14))];
    return s;
  }

  // `s` in pieces (at character boundaries of the pieces above: whole UTF-8).
  std::vector<std::string> split(const std::string& s) {
    std::vector<std::string> out;
    std::size_t i = 0;
    while (i < s.size()) {
      std::size_t n = static_cast<std::size_t>(between(1, 6));
      std::size_t end = i;
      for (std::size_t k = 0; k < n && end < s.size(); ++k) {
        ++end;
        while (end < s.size() && (static_cast<unsigned char>(s[end]) & 0xC0) == 0x80) ++end;
      }
      out.push_back(s.substr(i, end - i));
      i = end;
    }
    return out;
  }

 private:
  std::mt19937_64 rng_;
};

struct Case {
  json reference;                   // the upstream's own non-streamed answer
  std::vector<std::string> chunks;  // its stream (the data of each event)
};

// The stream of one choice: (delta, extra choice fields) per event.
struct ChoiceEvents {
  std::vector<json> deltas;
};

Case generate(std::uint64_t seed) {
  Generator g(seed);
  Case out;
  const std::string id = "chatcmpl-" + std::to_string(seed);
  const bool azure = g.coin(0.3);
  json ref = {{"id", id},       {"object", "chat.completion"}, {"created", 1700000000 + seed},
              {"model", "m-1"}, {"choices", json::array()},    {"usage", nullptr}};
  if (g.coin()) ref["system_fingerprint"] = "fp_" + std::to_string(seed % 7);
  if (g.coin(0.3)) ref["x_provider"] = {{"id", "req_" + std::to_string(seed)}};
  if (azure) ref["prompt_filter_results"] = json::array({{{"prompt_index", 0}}});

  const int n_choices = g.between(1, 2);
  std::vector<ChoiceEvents> events(static_cast<std::size_t>(n_choices));
  for (int c = 0; c < n_choices; ++c) {
    auto& ev = events[static_cast<std::size_t>(c)].deltas;
    json msg = {{"role", "assistant"}, {"refusal", nullptr}};
    ev.push_back({{"role", "assistant"}, {"content", ""}});
    if (g.coin(0.4)) {  // reasoning, under the name the upstream uses
      const std::string name = g.coin() ? "reasoning_content" : "reasoning";
      const std::string r = g.text(12);
      msg[name] = r;
      for (const auto& piece : g.split(r)) ev.push_back({{name, piece}});
    }
    const bool tools = g.coin(0.3);
    const bool audio = !tools && g.coin(0.2);
    std::string content = tools || audio ? "" : g.text(20);
    if (!tools && !audio) {
      msg["content"] = content;
      for (const auto& piece : g.split(content)) ev.push_back({{"content", piece}});
    } else {
      msg["content"] = nullptr;
    }
    if (tools) {
      json calls = json::array();
      const int n = g.between(1, 2);
      for (int t = 0; t < n; ++t) {
        const std::string call_id = "call_" + std::to_string(seed) + "_" + std::to_string(t);
        const std::string args = "{\"q\":\"" + g.text(6) + "\"}";
        calls.push_back({{"id", call_id},
                         {"type", "function"},
                         {"function", {{"name", "f"}, {"arguments", args}}}});
        ev.push_back({{"tool_calls",
                       {{{"index", t},
                         {"id", call_id},
                         {"type", "function"},
                         {"function", {{"name", "f"}, {"arguments", ""}}}}}}});
        for (const auto& piece : g.split(args)) {
          ev.push_back({{"tool_calls", {{{"index", t}, {"function", {{"arguments", piece}}}}}}});
        }
      }
      msg["tool_calls"] = calls;
    }
    if (audio) {
      const std::string data = "UklGR" + std::to_string(seed), transcript = g.text(10);
      msg["audio"] = {{"id", "audio_" + std::to_string(seed)},
                      {"data", data},
                      {"transcript", transcript},
                      {"expires_at", 1700003600}};
      ev.push_back({{"audio", {{"id", "audio_" + std::to_string(seed)}}}});
      for (const auto& piece : g.split(data)) ev.push_back({{"audio", {{"data", piece}}}});
      for (const auto& piece : g.split(transcript))
        ev.push_back({{"audio", {{"transcript", piece}}}});
      ev.push_back({{"audio", {{"expires_at", 1700003600}}}});
    }
    if (g.coin(0.3)) {  // a field of tomorrow: merged by the same rules
      const std::string t = g.text(8);
      msg["x_future"] = {{"text", t}, {"level", 3}};
      bool first = true;
      for (const auto& piece : g.split(t)) {
        json d = {{"text", piece}};
        if (first) d["level"] = 3;
        first = false;
        ev.push_back({{"x_future", d}});
      }
    }
    if (g.coin(0.3)) {
      json a =
          json::array({{{"type", "url_citation"},
                        {"url_citation", {{"url", "https://x.test/" + std::to_string(seed)}}}}});
      msg["annotations"] = a;
      ev.push_back({{"annotations", a}});
    }
    json choice = {{"index", c},
                   {"message", msg},
                   {"logprobs", nullptr},
                   {"finish_reason", tools ? "tool_calls" : "stop"}};
    if (azure) choice["content_filter_results"] = {{"hate", {{"filtered", false}}}};
    ref["choices"].push_back(choice);
  }
  ref["usage"] = {{"prompt_tokens", 5}, {"completion_tokens", 9}, {"total_tokens", 14}};

  // The stream: Azure's empty first chunk, then each choice's deltas
  // interleaved in order, then the finish chunks and the usage chunk.
  auto chunk = [&](json choices) {
    json c = {{"id", id},
              {"object", "chat.completion.chunk"},
              {"created", ref["created"]},
              {"model", "m-1"},
              {"choices", std::move(choices)}};
    if (ref.contains("system_fingerprint")) c["system_fingerprint"] = ref["system_fingerprint"];
    if (ref.contains("x_provider")) c["x_provider"] = ref["x_provider"];
    if (g.coin(0.2)) c["obfuscation"] = "pad";  // a stream's own padding: never assembled
    return c;
  };
  if (azure) {
    out.chunks.push_back(json{{"id", ""},
                              {"object", ""},
                              {"created", 0},
                              {"model", ""},
                              {"choices", json::array()},
                              {"prompt_filter_results", ref["prompt_filter_results"]}}
                             .dump());
  }
  std::vector<std::size_t> next(static_cast<std::size_t>(n_choices), 0);
  for (bool more = true; more;) {
    more = false;
    for (int c = 0; c < n_choices; ++c) {
      auto& ev = events[static_cast<std::size_t>(c)].deltas;
      auto& i = next[static_cast<std::size_t>(c)];
      if (i >= ev.size()) continue;
      more = true;
      json choice = {{"index", c}, {"delta", ev[i++]}, {"finish_reason", nullptr}};
      if (g.coin(0.5)) choice["logprobs"] = nullptr;
      if (azure && g.coin(0.5)) choice["content_filter_results"] = json::object();
      out.chunks.push_back(chunk(json::array({choice})).dump());
    }
  }
  for (int c = 0; c < n_choices; ++c) {
    const auto& ref_choice = ref["choices"][static_cast<std::size_t>(c)];
    json choice = {
        {"index", c}, {"delta", json::object()}, {"finish_reason", ref_choice["finish_reason"]}};
    if (azure) choice["content_filter_results"] = ref_choice["content_filter_results"];
    out.chunks.push_back(chunk(json::array({choice})).dump());
  }
  json last = chunk(json::array());
  last["usage"] = ref["usage"];
  out.chunks.push_back(last.dump());
  out.reference = std::move(ref);
  return out;
}

TEST(CompletionAssemblerProperty, TheAssembledAnswerIsTheUpstreamsOwnNonStreamedAnswer) {
  for (std::uint64_t seed = 1; seed <= 400; ++seed) {
    const Case c = generate(seed);
    CompletionAssembler parsed, fast;
    for (const auto& data : c.chunks) {
      const ChatChunk inspected = inspect_chunk(data);
      ASSERT_EQ(inspected.kind, ChatChunk::Kind::kChunk) << data;
      parsed.add(parse_chunk(data).json);
      if (inspected.plain)
        fast.add_plain(inspected);
      else
        fast.add(parse_chunk(data).json);
    }
    ASSERT_EQ(parsed.result(), c.reference)
        << "seed " << seed << "\nassembled: " << parsed.result().dump()
        << "\nreference: " << c.reference.dump();
    ASSERT_EQ(fast.result(), c.reference) << "seed " << seed << " (fast path)";
    // The text the client gets: the same document (written directly when
    // every chunk was plain).
    ASSERT_EQ(json::parse(fast.body()), c.reference) << "seed " << seed << ": " << fast.body();
    ASSERT_EQ(json::parse(parsed.body()), c.reference) << "seed " << seed;
  }
}

// The usual answer (every chunk plain) is written without a document, and
// reads as the one the parsed chunks give: texts with quotes, escapes,
// control characters and non-ASCII; metadata as the upstream wrote it (the
// first non-empty: Azure's first chunk has "" and 0); several usage chunks
// (the last counts).
TEST(CompletionAssembler, WritesThePlainAnswerWithoutADocument) {
  const std::string chunks[] = {
      R"({"id":"","object":"chat.completion.chunk","created":0,"model":"","choices":[]})",
      R"({"id":"c\u0041","object":"chat.completion.chunk","created":1.7e9,"model":"m","system_fingerprint":"fp","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]})",
      R"({"id":"other","created":5,"choices":[{"index":0,"delta":{"content":"a \"q\" \\ \n\t\u0001 \u00e9 \ud83d\ude00 / <"},"finish_reason":null}]})",
      R"({"id":"c","choices":[{"delta":{"content":"!"},"finish_reason":"stop"}],"service_tier":"default"})",
      R"({"id":"c","choices":[],"usage":{"prompt_tokens":1,"completion_tokens":2,"total_tokens":3}})",
      R"({"id":"c","choices":[],"usage":{"total_tokens":4,"prompt_tokens":2,"completion_tokens":2}})",
  };
  CompletionAssembler fast, parsed;
  for (const std::string& data : chunks) {
    const ChatChunk c = inspect_chunk(data);
    ASSERT_TRUE(c.plain) << data;
    fast.add_plain(c);
    parsed.add(parse_chunk(data).json);
  }
  const std::string body = fast.body();
  EXPECT_EQ(json::parse(body), parsed.result()) << body;
  EXPECT_EQ(json::parse(body)["id"], "cA");
  EXPECT_EQ(json::parse(body)["usage"]["total_tokens"], 4);
  // The texts escaped as nlohmann escapes them (the control character as
  // \u0001, the rest as UTF-8).
  EXPECT_NE(body.find(R"("content":"a \"q\" \\ \n\t\u0001 é 😀 / <!")"), std::string::npos) << body;
  EXPECT_NE(body.find(R"("created":1.7e9)"), std::string::npos) << body;  // as it came
  // Nothing assembled yet: the empty answer, as result() has it.
  EXPECT_EQ(json::parse(CompletionAssembler().body()), CompletionAssembler().result());
}

TEST(CompletionAssemblerProperty, ACompletionStreamedByTheGatewayAssemblesBackToItself) {
  for (std::uint64_t seed = 1; seed <= 200; ++seed) {
    const json reference = generate(seed).reference;
    const std::string sse = stream_of_completion(reference, /*include_usage=*/true);
    CompletionAssembler a;
    std::size_t events = 0;
    for (std::size_t at = 0; (at = sse.find("data: ", at)) != std::string::npos;) {
      const std::size_t end = sse.find("\n\n", at);
      const std::string data = sse.substr(at + 6, end - at - 6);
      at = end + 2;
      ++events;
      if (data == "[DONE]") continue;
      const ChatChunk c = inspect_chunk(data);
      ASSERT_EQ(c.kind, ChatChunk::Kind::kChunk) << data;
      a.add(parse_chunk(data).json);
    }
    EXPECT_GE(events, 4u);
    ASSERT_EQ(a.result(), reference) << "seed " << seed << "\n" << sse;
  }
}

TEST(CompletionAssemblerProperty, EveryOutputKindIsAFirstToken) {
  for (const char* delta :
       {R"({"content":"x"})", R"({"refusal":"no"})", R"({"reasoning":"hm"})",
        R"({"reasoning_content":"hm"})",
        R"({"tool_calls":[{"index":0,"id":"c","function":{"name":"f"}}]})",
        R"({"function_call":{"name":"f"}})", R"({"audio":{"id":"a"}})",
        R"({"annotations":[{"type":"url_citation"}]})", R"({"x_future":{"text":"t"}})"}) {
    const std::string data = std::string(R"({"id":"c","choices":[{"index":0,"delta":)") + delta +
                             R"(,"finish_reason":null}]})";
    EXPECT_TRUE(inspect_chunk(data).has_output) << delta;
    EXPECT_TRUE(parse_chunk(data).has_output) << delta;
  }
  for (const char* delta :
       {R"({"role":"assistant"})", R"({"role":"assistant","content":""})", R"({"content":null})",
        R"({"tool_calls":[]})", R"({"audio":{}})", R"({"reasoning_content":null,"content":""})",
        R"({})",
        // Not the shape of their field: no text, no calls.
        R"({"reasoning":{"name":"f"}})", R"({"content":["x"]})", R"({"tool_calls":{"index":0}})"}) {
    const std::string data = std::string(R"({"id":"c","choices":[{"index":0,"delta":)") + delta +
                             R"(,"finish_reason":null}]})";
    EXPECT_FALSE(inspect_chunk(data).has_output) << delta;
    EXPECT_FALSE(parse_chunk(data).has_output) << delta;
  }
}

}  // namespace
}  // namespace llmgate::providers
