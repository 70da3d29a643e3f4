#include "providers/event_stream.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "providers/framer.h"
#include "tests/support/crc32_oracle.h"

namespace llmgate::providers {
namespace {

// The CRC oracle (bit by bit, not the parser's table).
constexpr auto slow_crc32 = testing::oracle_crc32;

void put32(std::string& out, std::uint32_t v) {
  for (int shift = 24; shift >= 0; shift -= 8)
    out.push_back(static_cast<char>((v >> shift) & 0xFF));
}

// A message from raw header bytes and a payload, its CRCs by the oracle.
std::string message(const std::string& headers, const std::string& payload) {
  std::string m;
  put32(m, static_cast<std::uint32_t>(16 + headers.size() + payload.size()));
  put32(m, static_cast<std::uint32_t>(headers.size()));
  put32(m, slow_crc32(m));
  m += headers + payload;
  put32(m, slow_crc32(m));
  return m;
}

std::string string_header(const std::string& name, const std::string& value) {
  std::string h;
  h.push_back(static_cast<char>(name.size()));
  h += name;
  h.push_back(7);
  h.push_back(static_cast<char>(value.size() >> 8));
  h.push_back(static_cast<char>(value.size() & 0xFF));
  return h + value;
}

struct Got {
  std::string data, event;
  bool exception;
  std::size_t raw_size;
  bool operator==(const Got&) const = default;
};

struct Parsed {
  std::vector<Got> frames;
  FrameStatus status = FrameStatus::kOk;
  bool partial = false;
};

// Feeds `bytes` in the given pieces (sizes; the rest in one piece).
Parsed parse(const std::string& bytes, std::vector<std::size_t> pieces = {},
             std::size_t max = 1 << 20) {
  EventStreamParser p(max);
  Parsed out;
  std::size_t at = 0;
  pieces.push_back(bytes.size());
  for (std::size_t n : pieces) {
    n = std::min(n, bytes.size() - at);
    auto space = p.prepare(n);
    std::copy_n(bytes.data() + at, n, space.data());
    p.commit(n);
    at += n;
    out.status = p.drain([&](const Frame& f) {
      EXPECT_EQ(slow_crc32(f.raw.substr(0, f.raw.size() - 4)),
                testing::read_be32(f.raw.substr(f.raw.size() - 4)));
      out.frames.push_back({std::string(f.data), std::string(f.event), f.exception, f.raw.size()});
    });
    if (out.status != FrameStatus::kOk || at == bytes.size()) break;
  }
  out.partial = p.has_partial_event();
  return out;
}

TEST(EventStream, Crc32IsZlibs) {
  EXPECT_EQ(crc32("123456789"), 0xCBF43926u);  // the CRC-32/ISO-HDLC check value
  EXPECT_EQ(crc32(""), 0u);
  EXPECT_EQ(crc32("6789", crc32("12345")), 0xCBF43926u);  // continued
}

TEST(EventStream, DecodesAwssEmptyMessageVector) {
  // AWS's event-stream test vector "empty_message".
  const std::string m("\x00\x00\x00\x10\x00\x00\x00\x00\x05\xc2\x48\xeb\x7d\x98\xc8\xff", 16);
  const Parsed p = parse(m);
  ASSERT_EQ(p.status, FrameStatus::kOk);
  ASSERT_EQ(p.frames.size(), 1u);
  EXPECT_EQ(p.frames[0], (Got{"", "", false, 16}));
  EXPECT_FALSE(p.partial);
  // ... and the encoder writes exactly it.
  EXPECT_EQ(encode_event_stream_message({}, ""), m);
}

TEST(EventStream, AnEventAnExceptionAndAnErrorSayWhatTheyAre) {
  const std::string stream =
      message(string_header(":message-type", "event") +
                  string_header(":event-type", "contentBlockDelta") +
                  string_header(":content-type", "application/json"),
              R"({"contentBlockIndex":0,"delta":{"text":"Hi"}})") +
      message(string_header(":message-type", "exception") +
                  string_header(":exception-type", "throttlingException"),
              R"({"message":"Too many requests"})") +
      message(string_header(":message-type", "error") + string_header(":error-code", "Internal") +
                  string_header(":error-message", "it broke"),
              "");
  const Parsed p = parse(stream);
  ASSERT_EQ(p.status, FrameStatus::kOk);
  ASSERT_EQ(p.frames.size(), 3u);
  EXPECT_EQ(p.frames[0].event, "contentBlockDelta");
  EXPECT_EQ(p.frames[0].data, R"({"contentBlockIndex":0,"delta":{"text":"Hi"}})");
  EXPECT_FALSE(p.frames[0].exception);
  EXPECT_EQ(p.frames[1].event, "throttlingException");
  EXPECT_EQ(p.frames[1].data, R"({"message":"Too many requests"})");
  EXPECT_TRUE(p.frames[1].exception);
  EXPECT_EQ(p.frames[2].event, "Internal");
  EXPECT_EQ(p.frames[2].data, "it broke");
  EXPECT_TRUE(p.frames[2].exception);
}

TEST(EventStream, EncoderAndParserAgreeWithTheOracle) {
  const std::vector<EventStreamHeader> h{{":message-type", "event"},
                                         {":event-type", "messageStop"}};
  const std::string m = encode_event_stream_message(h, R"({"stopReason":"end_turn"})");
  EXPECT_EQ(m, message(string_header(":message-type", "event") +
                           string_header(":event-type", "messageStop"),
                       R"({"stopReason":"end_turn"})"));
}

TEST(EventStream, SkipsHeadersOfEveryType) {
  std::string h;
  const auto typed = [&](const std::string& name, char type, const std::string& value) {
    h.push_back(static_cast<char>(name.size()));
    h += name;
    h.push_back(type);
    h += value;
  };
  typed("t", 0, "");
  typed("f", 1, "");
  typed("b", 2, std::string(1, '\x7f'));
  typed("s", 3, std::string(2, '\x01'));
  typed("i", 4, std::string(4, '\x02'));
  typed("l", 5, std::string(8, '\x03'));
  typed("a", 6, std::string("\x00\x03xyz", 5));
  typed("ts", 8, std::string(8, '\x04'));
  typed("u", 9, std::string(16, '\x05'));
  h += string_header(":event-type", "metadata");
  const Parsed p = parse(message(h, "{}"));
  ASSERT_EQ(p.status, FrameStatus::kOk);
  ASSERT_EQ(p.frames.size(), 1u);
  EXPECT_EQ(p.frames[0].event, "metadata");
  EXPECT_EQ(p.frames[0].data, "{}");
}

TEST(EventStream, EverySplitOfAStreamGivesTheSameFrames) {
  std::string stream;
  for (int i = 0; i < 3; ++i) {
    stream += message(
        string_header(":message-type", "event") + string_header(":event-type", "contentBlockDelta"),
        R"({"delta":{"text":")" + std::string(i * 7, 'x') + R"("}})");
  }
  const Parsed whole = parse(stream);
  ASSERT_EQ(whole.frames.size(), 3u);
  for (std::size_t cut = 0; cut <= stream.size(); ++cut) {
    const Parsed two = parse(stream, {cut});
    EXPECT_EQ(two.frames, whole.frames) << "cut at " << cut;
    EXPECT_EQ(two.status, FrameStatus::kOk);
    EXPECT_FALSE(two.partial);
  }
  const Parsed bytewise = parse(stream, std::vector<std::size_t>(stream.size(), 1));
  EXPECT_EQ(bytewise.frames, whole.frames);
  // An unfinished message is held, not handed out.
  const Parsed short_one = parse(stream.substr(0, stream.size() - 1));
  EXPECT_EQ(short_one.frames.size(), 2u);
  EXPECT_TRUE(short_one.partial);
}

TEST(EventStream, AnyFlippedByteIsMalformedNeverAFrame) {
  const std::string m = message(string_header(":event-type", "contentBlockDelta"), R"({"a":1})");
  for (std::size_t i = 0; i < m.size(); ++i) {
    std::string bad = m;
    bad[i] = static_cast<char>(bad[i] ^ 0x20);
    const Parsed p = parse(bad);
    EXPECT_EQ(p.status, FrameStatus::kMalformed) << "byte " << i;
    EXPECT_TRUE(p.frames.empty()) << "byte " << i;
  }
}

TEST(EventStream, LengthsThatDoNotAddUpAndHeadersPastTheirEndAreMalformed) {
  // Headers longer than the message (the prelude CRC right).
  std::string m;
  put32(m, 16);
  put32(m, 8);
  put32(m, slow_crc32(m));
  put32(m, slow_crc32(m));
  EXPECT_EQ(parse(m).status, FrameStatus::kMalformed);
  // A string header whose length runs past the headers.
  std::string h = string_header(":event-type", "x");
  h[h.size() - 2] = 9;  // says 9 bytes, 1 follows
  EXPECT_EQ(parse(message(h, "")).status, FrameStatus::kMalformed);
  // An unknown header type.
  EXPECT_EQ(parse(message(std::string("\x01k\x0b", 3), "")).status, FrameStatus::kMalformed);
  EventStreamParser p(1024);
  std::string bad = message(std::string("\x01k\x0b", 3), "");
  auto s = p.prepare(bad.size());
  std::copy(bad.begin(), bad.end(), s.data());
  p.commit(bad.size());
  EXPECT_EQ(p.drain([](const Frame&) {}), FrameStatus::kMalformed);
  EXPECT_NE(p.error().find("unknown type 11"), std::string::npos) << p.error();
}

TEST(EventStream, AMessageOverTheLimitIsRefusedFromItsPrelude) {
  const std::string m = message("", std::string(4000, 'p'));
  // Only the prelude in: refused before the rest is buffered.
  const Parsed p = parse(m.substr(0, 12), {}, /*max=*/1024);
  EXPECT_EQ(p.status, FrameStatus::kTooLarge);
  EXPECT_EQ(parse(m, {}, 4016).status, FrameStatus::kOk);
}

TEST(EventStream, ABufferShrinksBetweenMessagesOnly) {
  EventStreamParser p(1 << 20);
  const std::string m = message("", std::string(3000, 'p'));
  auto s = p.prepare(1000);
  std::copy_n(m.data(), 1000, s.data());
  p.commit(1000);
  EXPECT_EQ(p.drain([](const Frame&) {}), FrameStatus::kOk);
  p.shrink();  // an unfinished message: kept
  EXPECT_GE(p.capacity(), 1000u);
  s = p.prepare(m.size() - 1000);
  std::copy(m.begin() + 1000, m.end(), s.data());
  p.commit(m.size() - 1000);
  int n = 0;
  EXPECT_EQ(p.drain([&](const Frame& f) { n += f.data.size() == 3000; }), FrameStatus::kOk);
  EXPECT_EQ(n, 1);
  p.shrink();
  EXPECT_EQ(p.capacity(), 0u);
}

TEST(Framer, EachFramingIsAnnouncedByItsMediaType) {
  EXPECT_TRUE(announces("text/event-stream", Framing::kSse));
  EXPECT_TRUE(announces("Text/Event-Stream; charset=utf-8", Framing::kSse));
  EXPECT_FALSE(announces("text/event-streamx", Framing::kSse));
  EXPECT_FALSE(announces("application/json", Framing::kSse));
  EXPECT_TRUE(announces("application/vnd.amazon.eventstream", Framing::kEventStream));
  EXPECT_FALSE(announces("text/event-stream", Framing::kEventStream));
}

TEST(Framer, CutsEachFramingsFrames) {
  Framer sse(Framing::kSse, 1024);
  const std::string events = "data: {\"a\":1}\n\n: ping\n\n";
  auto s = sse.prepare(events.size());
  std::copy(events.begin(), events.end(), s.data());
  sse.commit(events.size());
  std::vector<std::string> data;
  EXPECT_EQ(sse.drain([&](const Frame& f) { data.emplace_back(f.data); }), FrameStatus::kOk);
  EXPECT_EQ(data, (std::vector<std::string>{R"({"a":1})", ""}));

  Framer es(Framing::kEventStream, 1024);
  const std::string m = message(string_header(":event-type", "messageStart"), "{}");
  s = es.prepare(m.size());
  std::copy(m.begin(), m.end(), s.data());
  es.commit(m.size());
  std::vector<std::string> kinds;
  EXPECT_EQ(es.drain([&](const Frame& f) { kinds.emplace_back(f.event); }), FrameStatus::kOk);
  EXPECT_EQ(kinds, (std::vector<std::string>{"messageStart"}));
  EXPECT_FALSE(es.has_partial_frame());
}

}  // namespace
}  // namespace llmgate::providers
