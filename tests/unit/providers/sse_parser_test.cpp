#include "providers/sse_parser.h"

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

namespace llmgate::providers {
namespace {

struct Collected {
  std::string raw, data, event, id;
  bool has_data;
};

std::vector<Collected> feed_all(SseParser& p, std::string_view bytes,
                                SseParser::Status* status = nullptr) {
  std::vector<Collected> out;
  auto s = p.feed(bytes, [&](const Frame& e) {
    out.push_back({std::string(e.raw), std::string(e.data), std::string(e.event), std::string(e.id),
                   e.has_data});
  });
  if (status) *status = s;
  return out;
}

TEST(SseParser, ReportsEachEventWhenItsBlankLineArrives) {
  SseParser p(1024);
  auto a = feed_all(p, "data: {\"a\":1}\n");
  EXPECT_TRUE(a.empty());
  EXPECT_TRUE(p.has_partial_event());
  auto b = feed_all(p, "\ndata: [DONE]\n\n");
  ASSERT_EQ(b.size(), 2u);
  EXPECT_EQ(b[0].data, "{\"a\":1}");
  EXPECT_EQ(b[0].raw, "data: {\"a\":1}\n\n");
  EXPECT_EQ(b[1].data, "[DONE]");
  EXPECT_FALSE(p.has_partial_event());
}

TEST(SseParser, GivesTheSameEventsForEverySplitOfTheInput) {
  const std::string stream =
      ": keep-alive\r\n\r\n"
      "event: message\r\nid: 7\r\ndata: line one\r\ndata:line two\r\n\r\n"
      "data: {\"x\":\"y\"}\n\n"
      "data: cr only\r\r"
      "data: [DONE]\n\n";
  SseParser whole(4096);
  auto expected = feed_all(whole, stream);
  ASSERT_EQ(expected.size(), 5u);
  EXPECT_FALSE(expected[0].has_data);
  EXPECT_EQ(expected[1].data, "line one\nline two");
  EXPECT_EQ(expected[1].event, "message");
  EXPECT_EQ(expected[1].id, "7");
  EXPECT_EQ(expected[3].data, "cr only");

  std::mt19937 rng(42);
  for (int trial = 0; trial < 500; ++trial) {
    SseParser p(4096);
    std::vector<Collected> got;
    std::size_t pos = 0;
    while (pos < stream.size()) {
      std::size_t n = std::uniform_int_distribution<std::size_t>(1, 7)(rng);
      auto part = feed_all(p, std::string_view(stream).substr(pos, n));
      got.insert(got.end(), part.begin(), part.end());
      pos += n;
    }
    ASSERT_EQ(got.size(), expected.size()) << "trial " << trial;
    for (std::size_t i = 0; i < got.size(); ++i) {
      EXPECT_EQ(got[i].data, expected[i].data);
      EXPECT_EQ(got[i].raw, expected[i].raw);
    }
  }
}

TEST(SseParser, SplitsCrlfAcrossFeedsWithoutAnExtraBlankLine) {
  SseParser p(1024);
  auto a = feed_all(p, "data: a\r");
  auto b = feed_all(p, "\ndata: b\r");
  auto c = feed_all(p, "\n\r");
  auto d = feed_all(p, "\n");
  EXPECT_TRUE(a.empty());
  EXPECT_TRUE(b.empty());
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].data, "a\nb");
  EXPECT_TRUE(d.empty());
}

TEST(SseParser, IgnoresCommentsAndUnknownFieldsInsideAnEvent) {
  SseParser p(1024);
  auto ev = feed_all(p, ": hello\nretry: 100\nfoo: bar\ndata: x\n\n");
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].data, "x");
  EXPECT_TRUE(ev[0].has_data);
}

TEST(SseParser, FieldWithoutColonHasEmptyValue) {
  SseParser p(1024);
  auto ev = feed_all(p, "data\n\n");
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_TRUE(ev[0].has_data);
  EXPECT_EQ(ev[0].data, "");
}

TEST(SseParser, SkipsStrayBlankLinesBetweenEvents) {
  SseParser p(1024);
  auto ev = feed_all(p, "\n\n\ndata: a\n\n\n\ndata: b\n\n");
  ASSERT_EQ(ev.size(), 2u);
  EXPECT_EQ(ev[1].raw, "data: b\n\n");
}

TEST(SseParser, RejectsAnEventLargerThanTheLimit) {
  SseParser p(64);
  SseParser::Status s;
  auto ev = feed_all(p, "data: " + std::string(100, 'x'), &s);
  EXPECT_TRUE(ev.empty());
  EXPECT_EQ(s, SseParser::Status::kEventTooLarge);
}

TEST(SseParser, AcceptsManyEventsEachUnderTheLimit) {
  SseParser p(64);
  std::string many;
  for (int i = 0; i < 100; ++i) many += "data: " + std::string(40, 'y') + "\n\n";
  SseParser::Status s;
  auto ev = feed_all(p, many, &s);
  EXPECT_EQ(s, SseParser::Status::kOk);
  EXPECT_EQ(ev.size(), 100u);
}

TEST(SseParser, ShrinksAfterABurstAndKeepsTheUnfinishedEvent) {
  SseParser p(1 << 20);
  // A burst grows the buffer; a quiet stream gives it back.
  auto burst = feed_all(p, std::string("data: ") + std::string(20000, 'b') + "\n\n");
  ASSERT_EQ(burst.size(), 1u);
  EXPECT_GE(p.capacity(), 20000u);
  p.shrink();
  EXPECT_EQ(p.capacity(), 0u);  // nothing buffered: nothing kept
  // Half an event (CR at its end, as the split may leave it) survives a shrink.
  EXPECT_TRUE(feed_all(p, "event: e\r\nid: 9\r\ndata: he\r").empty());
  p.shrink();
  EXPECT_TRUE(feed_all(p, "\n").empty());
  const std::size_t small = p.capacity();
  EXPECT_LE(small, 4096u);
  feed_all(p, std::string(": ") + std::string(3000, 'c') + "\r\n");  // a long comment
  EXPECT_TRUE(feed_all(p, "data: llo\r").empty());
  EXPECT_GT(p.capacity(), small);
  p.shrink();  // an unfinished event: kept as it is
  EXPECT_GT(p.capacity(), small);
  auto rest = feed_all(p, "\n\r\n");
  ASSERT_EQ(rest.size(), 1u);
  EXPECT_EQ(rest[0].data, "he\nllo");
  EXPECT_EQ(rest[0].event, "e");
  EXPECT_EQ(rest[0].id, "9");
  const std::size_t grown = p.capacity();
  EXPECT_TRUE(feed_all(p, "data: x").empty());
  p.shrink();  // an unfinished event: nothing changes
  EXPECT_EQ(p.capacity(), grown);
  EXPECT_TRUE(feed_all(p, "\r").empty());
  p.shrink();
  auto last = feed_all(p, "\n\n");
  ASSERT_EQ(last.size(), 1u);
  EXPECT_EQ(last[0].data, "x");
  EXPECT_TRUE(std::string_view(last[0].raw).ends_with("data: x\r\n\n"));
  p.shrink();  // between events: all of it goes
  EXPECT_EQ(p.capacity(), 0u);
  ASSERT_EQ(feed_all(p, "data: y\n\n").size(), 1u);
  EXPECT_EQ(p.capacity(), 512u);  // a small stream's buffer
}

}  // namespace
}  // namespace llmgate::providers
