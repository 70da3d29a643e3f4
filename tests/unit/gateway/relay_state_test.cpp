// The relay's state without sockets: which bytes a client gets, when the
// attempt may claim the client, faults, usage stripping, trailers and the
// non-streamed answer.
#include "gateway/proxy/relay_state.h"

#include <gtest/gtest.h>

#include "tests/support/sse_events.h"

namespace llmgate::gateway {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
const Clock::time_point kT0{std::chrono::seconds(1000)};

using Events = testing::SseEvents;

constexpr std::string_view kRole =
    R"({"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]})";
constexpr std::string_view kHello =
    R"({"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"Hello"},"finish_reason":null}]})";
constexpr std::string_view kStop =
    R"({"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]})";
constexpr std::string_view kUsage =
    R"({"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[],"usage":{"prompt_tokens":5,"completion_tokens":3,"total_tokens":8}})";

ChatRequest request(bool stream, bool include_usage = false) {
  ChatRequest r;
  r.model = "m";
  r.stream = stream;
  r.include_usage = include_usage;
  return r;
}

struct Fixture {
  ChatRequest req;
  routing::AttemptRecord rec;
  RelayState state;
  Events ev;
  explicit Fixture(ChatRequest r)
      : req(std::move(r)),
        state(chat_completions_api(), providers::openai_chat_protocol(), req, rec) {}
};

TEST(RelayState, TheRoleChunkIsHeldAndIsNotAFirstToken) {
  Fixture f(request(true));
  f.state.on_event(f.ev.data(kRole), kT0);
  EXPECT_FALSE(f.state.has_output());
  EXPECT_FALSE(f.state.should_commit());
  EXPECT_FALSE(f.rec.first_token);
  EXPECT_EQ(f.state.outbox().str(), "data: " + std::string(kRole) + "\n\n");  // held, in order
  f.state.on_event(f.ev.data(kHello), kT0 + 40ms);
  EXPECT_TRUE(f.state.has_output());
  EXPECT_TRUE(f.state.should_commit());
  EXPECT_EQ(f.rec.first_token, kT0 + 40ms);
  f.state.mark_committed();
  EXPECT_FALSE(f.state.should_commit());
}

TEST(RelayState, HeldEventsSurviveTheParsersBufferBeingReused) {
  Fixture f(request(true));
  std::string buffer = "data: " + std::string(kRole) + "\n\n";
  providers::Frame ev;
  ev.raw = buffer;
  ev.data = std::string_view(buffer).substr(6, kRole.size());
  ev.has_data = true;
  f.state.on_event(ev, kT0);
  f.state.outbox().hold();
  const std::string expected = buffer;
  std::fill(buffer.begin(), buffer.end(), 'x');
  EXPECT_EQ(f.state.outbox().str(), expected);
}

TEST(RelayState, AStreamEndsWithItsOwnDoneOrOneAdded) {
  Fixture f(request(true));
  f.state.on_event(f.ev.data(kHello), kT0);
  f.state.on_event(f.ev.data(kStop), kT0 + 10ms);
  EXPECT_TRUE(f.state.complete());
  EXPECT_FALSE(f.state.done());
  f.state.outbox().clear();
  f.state.end_stream();  // the upstream ended cleanly after finish_reason, without [DONE]
  EXPECT_EQ(f.state.outbox().str(), "data: [DONE]\n\n");

  Fixture g(request(true));
  g.state.on_event(g.ev.data(kHello), kT0);
  g.state.on_event(g.ev.data("[DONE]"), kT0 + 10ms);
  EXPECT_TRUE(g.state.done());
  EXPECT_TRUE(g.state.stopped());
  g.state.outbox().clear();
  g.state.end_stream();
  EXPECT_TRUE(g.state.outbox().empty());            // not twice
  g.state.on_event(g.ev.data(kHello), kT0 + 20ms);  // after the end: ignored
  EXPECT_TRUE(g.state.outbox().empty());
}

TEST(RelayState, TheUsageChunkTheClientDidNotAskForIsDropped) {
  Fixture f(request(true, /*include_usage=*/false));
  f.state.on_event(f.ev.data(kUsage), kT0);
  EXPECT_TRUE(f.state.outbox().empty());
  EXPECT_EQ(f.rec.input_tokens, 5);
  EXPECT_EQ(f.rec.output_tokens, 3);  // measured all the same

  Fixture g(request(true, /*include_usage=*/true));
  g.state.on_event(g.ev.data(kUsage), kT0);
  EXPECT_EQ(g.state.outbox().str(), "data: " + std::string(kUsage) + "\n\n");
}

TEST(RelayState, UsageOnAContentChunkIsStrippedNotTheContent) {
  Fixture f(request(true));
  f.state.on_event(
      f.ev.data(
          R"({"id":"c1","choices":[{"index":0,"delta":{"content":"Hi"},"finish_reason":null}],"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}})"),
      kT0);
  const std::string out = f.state.outbox().str();
  EXPECT_EQ(out.find("usage"), std::string::npos);
  EXPECT_NE(out.find("\"Hi\""), std::string::npos);
  EXPECT_EQ(out.rfind("data: ", 0), 0u);
  // Spliced out: the rest of the chunk exactly as it came.
  Fixture g(request(true));
  g.state.on_event(
      g.ev.data(
          R"({"id":"c1", "usage":{"prompt_tokens":1,"completion_tokens":1}, "choices":[{"index":0,"delta":{"content":"caf\u00e9"},"finish_reason":"stop"}],"x":1.50})"),
      kT0);
  EXPECT_EQ(
      g.state.outbox().str(),
      "data: "
      R"({"id":"c1","choices":[{"index":0,"delta":{"content":"caf\u00e9"},"finish_reason":"stop"}],"x":1.50})"
      "\n\n");
}

TEST(RelayState, KeepAliveCommentsPassThroughToAStreamingClient) {
  Fixture f(request(true));
  f.state.on_event(f.ev.comment(), kT0);
  EXPECT_EQ(f.state.outbox().str(), ": keep-alive\n\n");
  EXPECT_FALSE(f.state.has_output());
}

TEST(RelayState, FaultsStopTheStreamAndKeepTheObserversWords) {
  Fixture f(request(true));
  f.state.on_event(f.ev.data(kHello), kT0);
  f.state.on_event(f.ev.data(R"({"error":{"message":"overloaded","type":"server_error"}})"), kT0);
  ASSERT_TRUE(f.state.fault());
  EXPECT_EQ(*f.state.fault(), failover::Fault::kInBandError);
  EXPECT_EQ(f.state.fault_text(), "overloaded");
  EXPECT_TRUE(f.state.stopped());

  Fixture g(request(true));
  g.state.on_event(g.ev.data("{not json"), kT0);
  ASSERT_TRUE(g.state.fault());
  EXPECT_EQ(*g.state.fault(), failover::Fault::kMalformedEvent);

  Fixture h(request(true));
  h.state.on_event_too_large();
  EXPECT_EQ(*h.state.fault(), failover::Fault::kEventTooLarge);
  h.state.on_event(h.ev.data(kHello), kT0);  // after a fault: ignored
  EXPECT_TRUE(h.state.outbox().empty());
}

TEST(RelayState, AnAnswerThatFinishesWithoutOutputMayStillClaimTheClient) {
  Fixture f(request(true));
  f.state.on_event(f.ev.data(kStop), kT0);
  EXPECT_TRUE(f.state.has_output());
  EXPECT_FALSE(f.rec.first_token);
}

TEST(RelayState, TrailersCarryTokensAndSpeed) {
  Fixture f(request(true));
  f.state.on_event(f.ev.data(kHello), kT0);
  f.state.on_event(f.ev.data(kHello), kT0 + 1s);
  f.state.on_event(f.ev.data(kUsage), kT0 + 1s);
  // 3 output tokens over 1 s between the first and the last output: 2 gaps in 1 s.
  EXPECT_EQ(f.state.trailers(), "x-llmgate-output-tokens: 3\r\nx-llmgate-tps: 2.0\r\n");
}

TEST(RelayState, TheSpeedIsSampledOnceMidStream) {
  Fixture f(request(true));
  for (int i = 0; i < 15; ++i) f.state.on_event(f.ev.data(kHello), kT0 + i * 100ms);
  EXPECT_FALSE(f.state.take_speed_sample());  // 15 events: not yet
  f.state.on_event(f.ev.data(kHello), kT0 + 1500ms);
  auto s = f.state.take_speed_sample();
  ASSERT_TRUE(s);
  EXPECT_NEAR(*s, 16 * 5 / 1.5, 0.01);  // 16 x "Hello" in 1.5 s
  f.state.on_event(f.ev.data(kHello), kT0 + 1600ms);
  EXPECT_FALSE(f.state.take_speed_sample());  // once
}

TEST(RelayState, ANonStreamedAnswerIsAssembledAndNothingIsQueued) {
  Fixture f(request(false));
  f.state.on_event(f.ev.data(kRole), kT0);
  f.state.on_event(f.ev.data(kHello), kT0);
  f.state.on_event(f.ev.data(kStop), kT0);
  f.state.on_event(f.ev.data(kUsage), kT0);
  f.state.on_event(f.ev.data("[DONE]"), kT0);
  EXPECT_TRUE(f.state.outbox().empty());
  EXPECT_FALSE(f.state.should_commit());  // a non-streamed answer never commits early
  auto j = nlohmann::json::parse(f.state.completion());
  EXPECT_EQ(j["object"], "chat.completion");
  EXPECT_EQ(j["choices"][0]["message"]["content"], "Hello");
  EXPECT_EQ(j["choices"][0]["finish_reason"], "stop");
  EXPECT_EQ(j["usage"]["completion_tokens"], 3);
}

TEST(RelayState, ATracedAttemptKeepsTheAnswersIdAndFinishReasons) {
  Fixture f(request(true));
  f.rec.keep_meta = true;
  f.state.on_event(f.ev.data(kRole), kT0);
  f.state.on_event(f.ev.data(kHello), kT0 + 1ms);
  f.state.on_event(f.ev.data(kStop), kT0 + 2ms);
  f.state.on_event(f.ev.data(kUsage), kT0 + 3ms);
  EXPECT_EQ(f.rec.response_id, "c1");
  EXPECT_EQ(f.rec.finish_reasons, std::vector<std::string>{"stop"});

  // Not traced: nothing kept (no allocation per attempt for it).
  Fixture quiet(request(true));
  quiet.state.on_event(quiet.ev.data(kRole), kT0);
  quiet.state.on_event(quiet.ev.data(kStop), kT0 + 1ms);
  EXPECT_TRUE(quiet.rec.response_id.empty());
  EXPECT_TRUE(quiet.rec.finish_reasons.empty());
}

TEST(RelayState, IdsAndReasonsOutsidePlainChunksAreReadFromTheParsedChunk) {
  // Two choices and a tool call: not plain chunks; an escaped id.
  Fixture f(request(true));
  f.rec.keep_meta = true;
  f.state.on_event(
      f.ev.data(
          R"({"id":"c\u0032","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":"a"},"finish_reason":null},{"index":1,"delta":{"content":"b"},"finish_reason":null}]})"),
      kT0);
  f.state.on_event(
      f.ev.data(
          R"({"id":"c2","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"t","type":"function","function":{"name":"f","arguments":"{}"}}]},"finish_reason":"tool_calls"},{"index":1,"delta":{},"finish_reason":"length"}]})"),
      kT0 + 1ms);
  EXPECT_EQ(f.rec.response_id, "c2");
  EXPECT_EQ(f.rec.finish_reasons, (std::vector<std::string>{"tool_calls", "length"}));
}

TEST(RelayState, AJsonAnswersIdAndReasonsAreKept) {
  routing::AttemptRecord rec;
  keep_answer_meta(
      nlohmann::json::parse(
          R"({"id":"chatcmpl-9","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"x"},"finish_reason":"stop"}]})"),
      rec);
  EXPECT_EQ(rec.response_id, "chatcmpl-9");
  EXPECT_EQ(rec.finish_reasons, std::vector<std::string>{"stop"});
  routing::AttemptRecord odd;
  keep_answer_meta(nlohmann::json::parse(R"({"id":7,"choices":[null,{"finish_reason":null}]})"),
                   odd);
  EXPECT_TRUE(odd.response_id.empty());
  EXPECT_TRUE(odd.finish_reasons.empty());
  keep_answer_meta(nlohmann::json::parse("[1]"), odd);
  EXPECT_TRUE(odd.response_id.empty());
}

}  // namespace
}  // namespace llmgate::gateway
