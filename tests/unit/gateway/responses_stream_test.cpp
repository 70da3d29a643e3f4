// The Responses API's client side: the typed stream made of a whole answer
// (what a stream client gets from a deployment that answered JSON) and the
// number an error event takes after the events relayed.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "gateway/apis/client_api.h"

namespace llmgate::gateway {
namespace {

using json = nlohmann::json;

struct Event {
  std::string name;  // the `event:` line
  json data;
};

std::vector<Event> events_of(const std::string& stream) {
  std::vector<Event> out;
  std::size_t at = 0;
  while (at < stream.size()) {
    const std::size_t end = stream.find("\n\n", at);
    EXPECT_NE(end, std::string::npos) << "an event without its blank line";
    if (end == std::string::npos) break;
    const std::string block = stream.substr(at, end - at);
    at = end + 2;
    const std::size_t nl = block.find('\n');
    EXPECT_EQ(block.rfind("event: ", 0), 0u) << block;
    EXPECT_EQ(block.compare(nl + 1, 6, "data: "), 0) << block;
    out.push_back({block.substr(7, nl - 7), json::parse(block.substr(nl + 7))});
  }
  return out;
}

std::vector<std::string> types_of(const std::vector<Event>& events) {
  std::vector<std::string> out;
  for (const auto& e : events) out.push_back(e.name);
  return out;
}

json answer_with(json output, std::string status = "completed") {
  return {{"id", "resp_1"},
          {"object", "response"},
          {"created_at", 1700000000},
          {"model", "gpt-4o-mini"},
          {"status", std::move(status)},
          {"output", std::move(output)},
          {"usage", {{"input_tokens", 3}, {"output_tokens", 5}, {"total_tokens", 8}}}};
}

json message(const std::string& text) {
  return {{"id", "msg_1"},
          {"type", "message"},
          {"role", "assistant"},
          {"status", "completed"},
          {"content", json::array({{{"type", "output_text"},
                                    {"text", text},
                                    {"annotations", json::array()},
                                    {"logprobs", json::array()}}})}};
}

TEST(ResponsesStreamOfAnswer, ATextAnswerIsTheFullTypedSequenceNumberedFromZero) {
  const json answer = answer_with(json::array({message("Hello there")}));
  const auto events = events_of(responses_stream_of(answer));
  const std::vector<std::string> want = {
      "response.created",           "response.in_progress",
      "response.output_item.added", "response.content_part.added",
      "response.output_text.delta", "response.output_text.done",
      "response.content_part.done", "response.output_item.done",
      "response.completed"};
  ASSERT_EQ(types_of(events), want);
  for (std::size_t i = 0; i < events.size(); ++i) {
    EXPECT_EQ(events[i].data["type"], events[i].name);
    EXPECT_EQ(events[i].data["sequence_number"], i);
  }
  // The opening events carry the response in progress, without its output.
  EXPECT_EQ(events[0].data["response"]["id"], "resp_1");
  EXPECT_EQ(events[0].data["response"]["status"], "in_progress");
  EXPECT_EQ(events[0].data["response"]["output"], json::array());
  EXPECT_EQ(events[2].data["item"]["content"], json::array());
  EXPECT_EQ(events[2].data["item"]["status"], "in_progress");
  EXPECT_EQ(events[3].data["part"]["text"], "");
  EXPECT_EQ(events[4].data["delta"], "Hello there");
  EXPECT_EQ(events[4].data["item_id"], "msg_1");
  EXPECT_EQ(events[4].data["output_index"], 0);
  EXPECT_EQ(events[4].data["content_index"], 0);
  EXPECT_EQ(events[5].data["text"], "Hello there");
  EXPECT_EQ(events[7].data["item"], answer["output"][0]);
  EXPECT_EQ(events[8].data["response"], answer);
}

TEST(ResponsesStreamOfAnswer, AFunctionCallStreamsItsArguments) {
  const json call = {{"id", "fc_1"},          {"type", "function_call"},
                     {"status", "completed"}, {"call_id", "call_9"},
                     {"name", "get_weather"}, {"arguments", R"({"city":"Oslo"})"}};
  const auto events = events_of(responses_stream_of(answer_with(json::array({call}))));
  const std::vector<std::string> want = {"response.created",
                                         "response.in_progress",
                                         "response.output_item.added",
                                         "response.function_call_arguments.delta",
                                         "response.function_call_arguments.done",
                                         "response.output_item.done",
                                         "response.completed"};
  ASSERT_EQ(types_of(events), want);
  EXPECT_EQ(events[2].data["item"]["arguments"], "");
  EXPECT_EQ(events[2].data["item"]["call_id"], "call_9");
  EXPECT_EQ(events[2].data["item"]["name"], "get_weather");
  EXPECT_EQ(events[3].data["delta"], R"({"city":"Oslo"})");
  EXPECT_EQ(events[3].data["item_id"], "fc_1");
  EXPECT_EQ(events[4].data["arguments"], R"({"city":"Oslo"})");
  EXPECT_EQ(events[5].data["item"], call);
}

TEST(ResponsesStreamOfAnswer, ReasoningRefusalsAndOtherItemsEachHaveTheirEvents) {
  const json reasoning = {
      {"id", "rs_1"},
      {"type", "reasoning"},
      {"summary", json::array({{{"type", "summary_text"}, {"text", "Thinking."}}})}};
  const json refusal = {{"id", "msg_2"},
                        {"type", "message"},
                        {"role", "assistant"},
                        {"status", "completed"},
                        {"content", json::array({{{"type", "refusal"}, {"refusal", "I can't."}}})}};
  const json search = {{"id", "ws_1"}, {"type", "web_search_call"}, {"status", "completed"}};
  const auto events =
      events_of(responses_stream_of(answer_with(json::array({reasoning, refusal, search}))));
  const std::vector<std::string> want = {"response.created",
                                         "response.in_progress",
                                         "response.output_item.added",
                                         "response.reasoning_summary_part.added",
                                         "response.reasoning_summary_text.delta",
                                         "response.reasoning_summary_text.done",
                                         "response.reasoning_summary_part.done",
                                         "response.output_item.done",
                                         "response.output_item.added",
                                         "response.content_part.added",
                                         "response.refusal.delta",
                                         "response.refusal.done",
                                         "response.content_part.done",
                                         "response.output_item.done",
                                         "response.output_item.added",
                                         "response.output_item.done",
                                         "response.completed"};
  ASSERT_EQ(types_of(events), want);
  EXPECT_EQ(events[2].data["item"]["summary"], json::array());
  EXPECT_EQ(events[4].data["delta"], "Thinking.");
  EXPECT_EQ(events[4].data["summary_index"], 0);
  EXPECT_EQ(events[8].data["output_index"], 1);
  EXPECT_EQ(events[10].data["delta"], "I can't.");
  EXPECT_EQ(events[14].data["output_index"], 2);
  EXPECT_EQ(events[14].data["item"]["status"], "in_progress");
}

TEST(ResponsesStreamOfAnswer, AnnotationsComeAfterTheirTextAndBeforeItsDone) {
  json m = message("See the docs.");
  const json citation = {{"type", "url_citation"}, {"url", "https://example.com"}};
  m["content"][0]["annotations"] = json::array({citation});
  const auto events = events_of(responses_stream_of(answer_with(json::array({m}))));
  ASSERT_GE(events.size(), 7u);
  EXPECT_EQ(events[3].data["part"]["annotations"], json::array());
  EXPECT_EQ(events[4].name, "response.output_text.delta");
  EXPECT_EQ(events[5].name, "response.output_text.annotation.added");
  EXPECT_EQ(events[5].data["annotation"], citation);
  EXPECT_EQ(events[5].data["annotation_index"], 0);
  EXPECT_EQ(events[6].name, "response.output_text.done");
}

TEST(ResponsesStreamOfAnswer, PartsThatAreNotObjectsAreSkippedNotThrown) {
  json m = message("ok");
  m["content"].push_back("not a part");
  const json reasoning = {
      {"id", "rs_1"}, {"type", "reasoning"}, {"summary", json::array({1, nullptr})}};
  std::string stream;
  ASSERT_NO_THROW(stream = responses_stream_of(answer_with(json::array({reasoning, m}))));
  const auto events = events_of(stream);
  EXPECT_EQ(events.back().name, "response.completed");
}

TEST(ResponsesStreamOfAnswer, AnIncompleteAnswerEndsAsIncomplete) {
  const auto events =
      events_of(responses_stream_of(answer_with(json::array({message("Cut")}), "incomplete")));
  ASSERT_FALSE(events.empty());
  EXPECT_EQ(events.back().name, "response.incomplete");
  EXPECT_EQ(events.back().data["response"]["status"], "incomplete");
}

TEST(ResponsesStreamOfAnswer, AnAnswerWithoutOutputStillOpensAndCloses) {
  const auto events = events_of(responses_stream_of(json{{"id", "resp_2"}}));
  const std::vector<std::string> want = {"response.created", "response.in_progress",
                                         "response.completed"};
  EXPECT_EQ(types_of(events), want);
}

TEST(ResponsesErrorEvent, IsNumberedAfterTheLastEvent) {
  ApiError e;
  e.status = 502;
  e.type = "upstream_error";
  e.message = "boom";
  e.code = "upstream_stream_truncated";
  const std::string ev = responses_api().error_event(e, 7);
  ASSERT_EQ(ev.rfind("event: error\ndata: ", 0), 0u) << ev;
  const json j = json::parse(ev.substr(ev.find("data: ") + 6));
  EXPECT_EQ(j["type"], "error");
  EXPECT_EQ(j["sequence_number"], 7);
  EXPECT_EQ(j["message"], "boom");
}

std::string numbered(int n) {
  return "event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\","
         "\"sequence_number\":" +
         std::to_string(n) + ",\"delta\":\"x\"}\n\n";
}

TEST(SequenceFollower, FollowsTheGreatestNumberAcrossAnyCut) {
  std::string all;
  for (int i = 0; i < 12; ++i) all += numbered(i + 100);
  // Every way of cutting the bytes into two reads, and byte by byte.
  for (std::size_t cut = 0; cut <= all.size(); ++cut) {
    SequenceFollower f;
    f.feed(std::string_view(all).substr(0, cut));
    f.feed(std::string_view(all).substr(cut));
    EXPECT_EQ(f.next(), 112) << "cut at " << cut;
  }
  SequenceFollower bytewise;
  for (char c : all) bytewise.feed(std::string_view(&c, 1));
  EXPECT_EQ(bytewise.next(), 112);
}

TEST(SequenceFollower, WithoutNumbersCountsTheEvents) {
  SequenceFollower f;
  f.feed("event: a\ndata: {}\n");
  f.feed("\nevent: b\ndata: {}\n\n");
  EXPECT_EQ(f.next(), 2);
  // A blank line counted whole in one read is not counted again across the next.
  SequenceFollower g;
  g.feed("data: {}\n\n");
  g.feed("\ndata: {}\n\n");
  EXPECT_EQ(g.next(), 2);
  // Long reads, numbers far from the seam, and a number across it.
  SequenceFollower h;
  const std::string pad(5'000, ' ');
  h.feed(pad + numbered(7) + pad + "{\"sequence_number\":4");
  h.feed("1}" + pad);
  EXPECT_EQ(h.next(), 42);
  SequenceFollower none;
  EXPECT_EQ(none.next(), 0);
}

}  // namespace
}  // namespace llmgate::gateway
