// Stream continuation's pure parts: what the client was told, the
// continuation's request in each deployment's way, and the splice of its
// chunks into the client's stream.
#include "gateway/proxy/continuation.h"

#include <gtest/gtest.h>

#include "gateway/proxy/relay_state.h"
#include "tests/support/sse_events.h"

namespace llmgate::gateway {
namespace {

using Clock = std::chrono::steady_clock;
using nlohmann::json;

using Events = testing::SseEvents;

std::string chunk(std::string_view id, std::string_view model, const json& delta,
                  const json& finish = nullptr) {
  // In the order providers send them (an ordered document).
  return nlohmann::ordered_json{
      {"id", id},
      {"object", "chat.completion.chunk"},
      {"created", 7},
      {"model", model},
      {"choices", nlohmann::ordered_json::array(
                      {{{"index", 0},
                        {"delta", nlohmann::ordered_json::parse(delta.dump())},
                        {"finish_reason", nlohmann::ordered_json::parse(finish.dump())}}})}}
      .dump();
}

ChatRequest stream_request(bool include_usage = false) {
  ChatRequest r;
  r.model = "m";
  r.stream = true;
  r.include_usage = include_usage;
  return r;
}

// The stream a client was given through a relay that keeps its transcript.
struct Told {
  ChatRequest req = stream_request();
  routing::AttemptRecord rec;
  RelayState state{chat_completions_api(), providers::openai_chat_protocol(), req, rec};
  Events ev;
  Told() { state.keep_transcript(); }
  void on(const std::string& j) { state.on_event(ev.data(j), Clock::now()); }
  const StreamTranscript& transcript() { return *state.transcript(); }
};

TEST(StreamTranscript, KeepsTheTextAndTheAnswersNamesAsTheClientGotThem) {
  Told t;
  t.on(chunk("c1", "up", {{"role", "assistant"}, {"content", ""}}));
  t.on(chunk("c1", "up", {{"content", "Hello"}}));
  t.on(chunk("c1", "up", {{"content", " \"world\"\n"}}));  // escapes: decoded
  t.on(chunk("c1", "up", {{"reasoning_content", "hm"}}));
  EXPECT_EQ(t.transcript().text(), "Hello \"world\"\n");
  EXPECT_EQ(t.transcript().text_chunks(), 2);
  EXPECT_EQ(t.transcript().why_not(), nullptr);
  EXPECT_EQ(t.transcript().meta(),
            (nlohmann::ordered_json{{"id", "c1"}, {"created", 7}, {"model", "up"}}));
}

TEST(StreamTranscript, ATextThatBecameAToolCallOrARefusalCannotBeContinued) {
  Told call;
  call.on(chunk("c1", "up", {{"content", "Let me look."}}));
  call.on(chunk(
      "c1", "up",
      {{"tool_calls", json::array({{{"index", 0},
                                    {"id", "call_1"},
                                    {"function", {{"name", "f"}, {"arguments", "{\"a"}}}}})}}));
  EXPECT_STREQ(call.transcript().why_not(), "a tool call");
  Told refusal;
  refusal.on(chunk("c1", "up", {{"refusal", "I can't"}}));
  EXPECT_STREQ(refusal.transcript().why_not(), "a refusal");
  Told two;
  two.on(
      R"({"id":"c1","object":"chat.completion.chunk","created":7,"model":"up","choices":[{"index":1,"delta":{"content":"b"},"finish_reason":null}]})");
  EXPECT_STREQ(two.transcript().why_not(), "several choices");
}

providers::RequestBody body(const json& j) { return providers::RequestBody::from(j); }

const json kAsked = {{"model", "m"},
                     {"stream", true},
                     {"reasoning_effort", "low"},
                     {"messages", json::array({{{"role", "user"}, {"content", "hi"}}})}};

TEST(ContinuationBody, EachDeploymentIsAskedInItsOwnWay) {
  std::string trimmed;
  const auto prefix = json::parse(
      continuation_body(body(kAsked), "Hello ", config::Continuation::kPrefix, trimmed)->text());
  EXPECT_EQ(prefix["messages"].back(),
            (json{{"role", "assistant"}, {"content", "Hello "}, {"prefix", true}}));
  EXPECT_EQ(prefix["messages"].size(), 2u);
  EXPECT_FALSE(prefix.contains("reasoning_effort"));  // a continuation does not think first
  EXPECT_EQ(trimmed, "");

  const auto vllm = json::parse(
      continuation_body(body(kAsked), "Hello", config::Continuation::kContinueFinalMessage, trimmed)
          ->text());
  EXPECT_EQ(vllm["messages"].back(), (json{{"role", "assistant"}, {"content", "Hello"}}));
  EXPECT_EQ(vllm["continue_final_message"], true);
  EXPECT_EQ(vllm["add_generation_prompt"], false);

  // Anthropic refuses prefill that ends with whitespace: trimmed, and said.
  const auto prefill = json::parse(
      continuation_body(body(kAsked), "Hello \n\n", config::Continuation::kPrefill, trimmed)
          ->text());
  EXPECT_EQ(prefill["messages"].back(), (json{{"role", "assistant"}, {"content", "Hello"}}));
  EXPECT_EQ(trimmed, " \n\n");
}

TEST(ContinuationBody, WithoutTextTheRequestIsAskedAnew) {
  std::string trimmed;
  EXPECT_FALSE(continuation_body(body(kAsked), "", config::Continuation::kPrefix, trimmed));
  EXPECT_FALSE(continuation_body(body(kAsked), " \n", config::Continuation::kPrefill, trimmed));
}

TEST(ContinuationBody, OnlyOneChoiceOfFreeTextIsContinuable) {
  EXPECT_TRUE(continuable_request(body(kAsked)));
  json two = kAsked;
  two["n"] = 2;
  EXPECT_FALSE(continuable_request(body(two)));
  json schema = kAsked;
  schema["response_format"] = {{"type", "json_schema"}, {"json_schema", {{"name", "x"}}}};
  EXPECT_FALSE(continuable_request(body(schema)));
  json text = kAsked;
  text["response_format"] = {{"type", "text"}};
  EXPECT_TRUE(continuable_request(body(text)));
}

// A continuation's events through a splice: what the client gets.
struct Spliced {
  StreamTranscript transcript;
  std::optional<ContinuationSplice> splice;
  Events ev;
  std::string out;

  Spliced(std::string_view first_text, std::string sent, std::string trimmed,
          bool include_usage = false, providers::Usage spent = {}) {
    transcript.add(nlohmann::ordered_json::parse(
        chunk("orig", "first-model", {{"role", "assistant"}, {"content", first_text}})));
    splice.emplace(transcript, std::move(sent), std::move(trimmed), include_usage, spent);
  }
  void on(const std::string& j) {
    providers::UpstreamEvent e;
    providers::Frame raw = ev.data(j);
    e.kind = providers::UpstreamEvent::Kind::kData;
    e.data = raw.data;
    e.raw = raw.raw;
    Outbox o;
    splice->render(e, o);
    out += o.str();
  }
  // The client's chunks, parsed.
  std::vector<json> chunks() const {
    std::vector<json> v;
    std::size_t at = 0;
    while ((at = out.find("data: ", at)) != std::string::npos) {
      const std::size_t end = out.find("\n\n", at);
      v.push_back(json::parse(out.substr(at + 6, end - at - 6)));
      at = end;
    }
    return v;
  }
};

TEST(ContinuationSplice, GoesOnUnderTheOriginalNamesWithoutASecondRole) {
  Spliced s("Hello", "Hello", "");
  s.on(chunk("other", "second-model", {{"role", "assistant"}, {"content", ""}}));
  s.on(chunk("other", "second-model", {{"content", " world"}}));
  s.on(chunk("other", "second-model", json::object(), "stop"));
  const auto c = s.chunks();
  ASSERT_EQ(c.size(), 2u);  // the role chunk said nothing: dropped
  EXPECT_EQ(c[0]["id"], "orig");
  EXPECT_EQ(c[0]["model"], "first-model");
  EXPECT_EQ(c[0]["choices"][0]["delta"], (json{{"content", " world"}}));
  EXPECT_EQ(c[1]["choices"][0]["finish_reason"], "stop");
  EXPECT_EQ(s.transcript.text(), "Hello world");
  // Its members stay in the order they came.
  EXPECT_EQ(s.out.rfind("data: {\"id\":\"orig\",", 0), 0u);
}

TEST(ContinuationSplice, AnEchoOfTheTextSentAndTheTrimmedWhitespaceAreNotSaidTwice) {
  // A server that repeats its prefix, in pieces, then the whitespace that
  // prefill could not carry, then the continuation proper.
  Spliced s("Hello,\n\n", "Hello,", "\n\n");
  s.on(chunk("o", "m", {{"content", "Hel"}}));
  s.on(chunk("o", "m", {{"content", "lo,\n"}}));
  s.on(chunk("o", "m", {{"content", "\nNext"}}));
  s.on(chunk("o", "m", json::object(), "stop"));
  EXPECT_EQ(s.transcript.text(), "Hello,\n\nNext");
}

TEST(ContinuationSplice, TextThatOnlyBeganLikeAnEchoIsPassedWhole) {
  Spliced s("Hello", "Hello", "");
  s.on(chunk("o", "m", {{"content", "He"}}));  // held: may be an echo
  EXPECT_TRUE(s.chunks().empty());
  s.on(chunk("o", "m", {{"content", "y there"}}));
  EXPECT_EQ(s.transcript.text(), "HelloHey there");
  // ... and a partial match at the end of the answer is text too.
  Spliced end("Hello", "Hello", "");
  end.on(chunk("o", "m", {{"content", "Hell"}}, "stop"));
  EXPECT_EQ(end.transcript.text(), "HelloHell");
}

TEST(ContinuationSplice, ReasoningAfterTextIsDroppedAndUsageCountsEveryAttempt) {
  Spliced s("Hello", "Hello", "", /*include_usage=*/true, providers::Usage{10, 4, 14, 0, 0});
  s.on(chunk("o", "m", {{"reasoning_content", "thinking again"}}));
  s.on(chunk("o", "m", {{"content", " world"}}));
  s.on(
      R"({"id":"o","object":"chat.completion.chunk","created":7,"model":"m","choices":[],"usage":{"prompt_tokens":12,"completion_tokens":2,"total_tokens":14}})");
  const auto c = s.chunks();
  ASSERT_EQ(c.size(), 2u);
  EXPECT_EQ(c[1]["usage"],
            (json{{"prompt_tokens", 22}, {"completion_tokens", 6}, {"total_tokens", 28}}));
  EXPECT_EQ(c[1]["id"], "orig");
  // Usage the client did not ask for is not sent.
  Spliced quiet("Hello", "Hello", "");
  quiet.on(
      R"({"id":"o","object":"chat.completion.chunk","created":7,"model":"m","choices":[],"usage":{"prompt_tokens":12,"completion_tokens":2,"total_tokens":14}})");
  EXPECT_TRUE(quiet.out.empty());
}

TEST(ContinuationSplice, ReasoningPassesWhenTheClientHadNoTextYet) {
  Spliced s("", "", "");
  s.on(chunk("o", "m", {{"reasoning_content", "thinking"}}));
  ASSERT_EQ(s.chunks().size(), 1u);
  EXPECT_EQ(s.chunks()[0]["choices"][0]["delta"]["reasoning_content"], "thinking");
}

TEST(StreamContinuation, DescribesWhoContinuedWhatBroke) {
  config::Deployment d;
  d.provider = "p";
  d.model = "a";
  d.set_id();
  StreamContinuation k;
  EXPECT_EQ(k.describe(), "");
  k.first_broken = &d;
  k.first_fault = "truncated";
  k.broken_after = 40;
  k.by = {"q/b"};
  EXPECT_EQ(k.describe(), "q/b; broken=p/a; fault=truncated; after_chunks=40");
}

}  // namespace
}  // namespace llmgate::gateway
