#include "gateway/proxy/upstream_parser.h"

#include <gtest/gtest.h>

#include <boost/asio/buffer.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/string_body.hpp>
#include <random>
#include <string>
#include <string_view>

namespace llmgate::gateway {
namespace {

namespace beast = boost::beast;
namespace net = boost::asio;

struct Parsed {
  beast::error_code ec;  // the first error other than need_more / need_buffer
  std::string body;
  bool done = false;
};

// Feeds `wire` to `p` as the relay does: arriving `piece` bytes at a time,
// unconsumed bytes kept, the body put into a `space`-byte buffer per call.
Parsed drive(UpstreamParser& p, std::string_view wire, std::size_t piece, std::size_t space) {
  Parsed out;
  std::string pending;
  std::string buf(space, '\0');
  std::size_t off = 0;
  for (int guard = 0; guard < 100000 && !p.is_done(); ++guard) {
    if (pending.empty() || out.ec == http::error::need_more) {
      if (off == wire.size()) break;
      const std::size_t n = std::min(piece, wire.size() - off);
      pending.append(wire.substr(off, n));
      off += n;
    }
    p.get().body().data = buf.data();
    p.get().body().size = buf.size();
    beast::error_code ec;
    const std::size_t used = p.put(net::buffer(pending), ec);
    pending.erase(0, used);
    out.body.append(buf.data(), buf.size() - p.get().body().size);
    if (ec == http::error::need_buffer) ec = {};
    if (ec && ec != http::error::need_more) {
      out.ec = ec;
      return out;
    }
    out.ec = ec;
  }
  // The input ends: the connection closes.
  beast::error_code ec;
  if (!p.is_done() && p.got_some()) p.put_eof(ec);
  out.ec = ec;
  out.done = p.is_done();
  return out;
}

constexpr std::string_view kChunkedStream =
    "HTTP/1.1 200 OK\r\n"
    "Server: nginx\r\n"
    "Content-Type: text/event-stream; charset=utf-8\r\n"
    "X-RateLimit-Remaining-Requests: 99\r\n"
    "Transfer-Encoding: chunked\r\n"
    "openai-processing-ms: 12\r\n"
    "Set-Cookie: a=b\r\n"
    "Content-Type: text/plain\r\n"
    "\r\n"
    "f\r\ndata: {\"a\":1}\n\n\r\n"
    "e\r\ndata: [DONE]\n\n\r\n"
    "0\r\n\r\n";

TEST(UpstreamParser, KeepsTheStatusAndOnlyTheFieldsTheGatewayReadsOrRelays) {
  UpstreamParser p;
  const Parsed r = drive(p, kChunkedStream, kChunkedStream.size(), 4096);
  ASSERT_FALSE(r.ec) << r.ec.message();
  ASSERT_TRUE(r.done);
  const UpstreamHead& h = p.get();
  EXPECT_EQ(h.result_int(), 200u);
  EXPECT_EQ(h.result(), http::status::ok);
  // The first Content-Type, as a Beast field set's operator[] answers.
  EXPECT_EQ(h[http::field::content_type], "text/event-stream; charset=utf-8");
  EXPECT_EQ(h[http::field::retry_after], "");
  ASSERT_EQ(h.size(), 4u);  // not Server, Transfer-Encoding or Set-Cookie
  EXPECT_EQ(h[std::size_t{0}].name_string, "Content-Type");
  EXPECT_EQ(h[std::size_t{1}].name_string, "X-RateLimit-Remaining-Requests");
  EXPECT_EQ(h[std::size_t{1}].value, "99");
  EXPECT_EQ(h[std::size_t{2}].name_string, "openai-processing-ms");
  EXPECT_EQ(h[std::size_t{2}].value, "12");
  EXPECT_EQ(h[std::size_t{3}].value, "text/plain");
  EXPECT_EQ(r.body, "data: {\"a\":1}\n\ndata: [DONE]\n\n");
  EXPECT_TRUE(p.keep_alive());
}

TEST(UpstreamParser, RelayedFieldsAreRateLimitsProcessingTimeAndRetryAfterWhenAsked) {
  EXPECT_TRUE(relayed_upstream_field(http::field::unknown, "x-ratelimit-limit-tokens", false));
  EXPECT_TRUE(relayed_upstream_field(http::field::unknown, "X-RATELIMIT-reset", false));
  EXPECT_FALSE(relayed_upstream_field(http::field::unknown, "x-ratelimit-", false));
  EXPECT_TRUE(relayed_upstream_field(http::field::unknown, "OpenAI-Processing-Ms", false));
  EXPECT_FALSE(relayed_upstream_field(http::field::retry_after, "Retry-After", false));
  EXPECT_TRUE(relayed_upstream_field(http::field::retry_after, "Retry-After", true));
  EXPECT_FALSE(relayed_upstream_field(http::field::content_type, "Content-Type", true));
  EXPECT_TRUE(kept_upstream_field(http::field::content_type, "Content-Type"));
  EXPECT_FALSE(kept_upstream_field(http::field::server, "Server"));
  EXPECT_FALSE(kept_upstream_field(http::field::set_cookie, "Set-Cookie"));
}

TEST(UpstreamParser, ManyLongKeptFieldsOutgrowTheInlineBufferIntact) {
  std::string wire = "HTTP/1.1 429 Too Many Requests\r\nRetry-After: 7\r\n";
  for (int i = 0; i < 20; ++i) {
    wire += "x-ratelimit-field-" + std::to_string(i) + ": " + std::string(40, 'a' + i) + "\r\n";
  }
  wire += "Content-Length: 2\r\nConnection: close\r\n\r\n{}";
  UpstreamParser p;
  const Parsed r = drive(p, wire, 7, 1);
  ASSERT_FALSE(r.ec) << r.ec.message();
  ASSERT_TRUE(r.done);
  EXPECT_EQ(p.get().result_int(), 429u);
  EXPECT_EQ(p.get()[http::field::retry_after], "7");
  ASSERT_EQ(p.get().size(), 21u);
  for (int i = 0; i < 20; ++i) {
    EXPECT_EQ(p.get()[std::size_t(i + 1)].name_string, "x-ratelimit-field-" + std::to_string(i));
    EXPECT_EQ(p.get()[std::size_t(i + 1)].value, std::string(40, 'a' + i));
  }
  EXPECT_EQ(r.body, "{}");
  EXPECT_FALSE(p.keep_alive());
}

TEST(UpstreamParser, ABodyToTheEndOfTheConnectionEndsThere) {
  const std::string wire =
      "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\r\n" + std::string(5000, 'a');
  UpstreamParser p;  // no body limit: a 5,000-byte body through a 1-byte buffer
  const Parsed r = drive(p, wire, 64, 1);
  ASSERT_FALSE(r.ec) << r.ec.message();
  EXPECT_TRUE(r.done);
  EXPECT_EQ(r.body, std::string(5000, 'a'));
  EXPECT_FALSE(p.keep_alive());
}

TEST(UpstreamParser, ANoContentAnswerIsDoneAtItsHead) {
  UpstreamParser p;
  const Parsed r = drive(p, "HTTP/1.1 204 No Content\r\nContent-Type: text/plain\r\n\r\n", 8, 8);
  ASSERT_FALSE(r.ec) << r.ec.message();
  EXPECT_TRUE(r.done);
  EXPECT_EQ(p.get().result_int(), 204u);
  EXPECT_EQ(r.body, "");
}

TEST(UpstreamParser, AKeptFieldInAChunkedTrailerIsKept) {
  const std::string wire =
      "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
      "5\r\nhello\r\n0\r\nx-ratelimit-remaining-tokens: 5\r\nServer: x\r\n\r\n";
  UpstreamParser p;
  const Parsed r = drive(p, wire, 5, 3);
  ASSERT_FALSE(r.ec) << r.ec.message();
  ASSERT_TRUE(r.done);
  EXPECT_EQ(r.body, "hello");
  ASSERT_EQ(p.get().size(), 2u);
  EXPECT_EQ(p.get()[std::size_t{1}].name_string, "x-ratelimit-remaining-tokens");
  EXPECT_EQ(p.get()[std::size_t{1}].value, "5");
  EXPECT_EQ(p.get()[http::field::content_type], "text/event-stream");
  EXPECT_EQ(p.get()[http::field::unknown], "");  // a name, not a field: never the first unknown one
}

TEST(UpstreamParser, WithoutABodyBufferTheBodyWaits) {
  UpstreamParser p;
  beast::error_code ec;
  const std::string wire = "HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nabc";
  std::size_t used = p.put(net::buffer(wire), ec);
  ASSERT_FALSE(ec);
  ASSERT_TRUE(p.is_header_done());
  // No buffer: need_buffer, nothing taken (as http::buffer_body).
  used = p.put(net::buffer(wire.data() + used, wire.size() - used), ec);
  EXPECT_EQ(ec, http::error::need_buffer);
  EXPECT_EQ(used, 0u);
}

// The body and the framing verdict are Beast's string-body parser's, however
// the bytes arrive and whatever the body buffer's size.
TEST(UpstreamParser, BodyAndVerdictAsBeastsOwnParserForAnySplit) {
  const std::string cases[] = {
      std::string(kChunkedStream),
      "HTTP/1.1 200 OK\r\nContent-Length: 11\r\n\r\nhello world",
      "HTTP/1.1 500 Internal Server Error\r\nContent-Type: application/json\r\n"
      "Content-Length: 16\r\n\r\n{\"error\":\"boom\"}",
      "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5;ext=1\r\nhello\r\n0\r\nTrailer: "
      "x\r\n\r\n",
      "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",          // bad chunk size
      "HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab",  // conflicting lengths
  };
  std::mt19937 rng(1234);
  for (const std::string& wire : cases) {
    http::response_parser<http::string_body> ref;
    beast::error_code ref_ec;
    std::size_t off = 0;
    while (off < wire.size() && !ref.is_done()) {
      const std::size_t used = ref.put(net::buffer(wire.data() + off, wire.size() - off), ref_ec);
      off += used;
      if (ref_ec || used == 0) break;
    }
    for (int round = 0; round < 50; ++round) {
      UpstreamParser p;
      const std::size_t piece = 1 + rng() % 24, space = 1 + rng() % 32;
      const Parsed r = drive(p, wire, piece, space);
      SCOPED_TRACE(wire + " piece " + std::to_string(piece) + " space " + std::to_string(space));
      EXPECT_EQ(static_cast<bool>(r.ec), static_cast<bool>(ref_ec));
      if (!ref_ec) {
        EXPECT_TRUE(r.done);
        EXPECT_EQ(r.body, ref.get().body());
        EXPECT_EQ(p.get().result_int(), ref.get().result_int());
      }
    }
  }
}

}  // namespace
}  // namespace llmgate::gateway
