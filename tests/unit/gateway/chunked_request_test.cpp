#include "gateway/server/chunked_request.h"

#include <gtest/gtest.h>

#include <boost/asio/buffer.hpp>
#include <boost/beast/http/error.hpp>
#include <string>
#include <string_view>

namespace llmgate::gateway {
namespace {

namespace net = boost::asio;
using Status = ChunkedBodyReader::Status;
using O = ChunkedOverrun;

constexpr std::string_view kHead =
    "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nX-Head: 1\r\n"
    "Transfer-Encoding: chunked\r\n\r\n";

// A parser and the request it reads into, as a session has them.
struct WithRequest {
  ClientRequest req;
  RequestParser parser{req};
};

struct Read {
  Status status = Status::kNeedMore;
  beast::error_code ec;
  std::size_t most_pending = 0;  // the most bytes left unparsed after a put
};

// Parses kHead, then gives the reader `body` `piece` bytes at a time, as
// reads would add them to the buffer.
Read read_body(RequestParser& parser, std::string_view body, std::size_t piece,
               std::size_t max_trailers, std::size_t max_line) {
  beast::error_code ec;
  parser.put(net::buffer(kHead.data(), kHead.size()), ec);
  EXPECT_FALSE(ec);
  EXPECT_TRUE(parser.is_header_done());
  ChunkedBodyReader reader(parser, max_trailers, max_line);
  beast::flat_buffer buffer;
  Read out;
  for (std::size_t off = 0; off < body.size() && out.status == Status::kNeedMore; off += piece) {
    const std::string_view more = body.substr(off, piece);
    buffer.commit(
        net::buffer_copy(buffer.prepare(more.size()), net::buffer(more.data(), more.size())));
    out.status = reader.put(buffer, out.ec);
    out.most_pending = std::max(out.most_pending, buffer.size());
  }
  return out;
}

TEST(ChunkedOverrun, AChunkLineCountsItsCrlfButNotThePreviousChunksEnd) {
  EXPECT_EQ(chunked_overrun("", 8, 100), O::kNone);
  EXPECT_EQ(chunked_overrun("5;abcd", 8, 100), O::kNone);
  EXPECT_EQ(chunked_overrun("5;abcdefg", 8, 100), O::kChunkLine);  // 9 bytes, no end yet
  EXPECT_EQ(chunked_overrun("\r\n5;abcdef", 8, 100), O::kNone);
  EXPECT_EQ(chunked_overrun("\r\n5;abcdefg", 8, 100), O::kChunkLine);
  EXPECT_EQ(chunked_overrun("0;abcd\r\n", 8, 100), O::kNone);  // 8 with its CRLF
  EXPECT_EQ(chunked_overrun("0;abcde\r\n", 8, 100), O::kChunkLine);
  // A bare LF does not end a chunk line (Beast's reading).
  EXPECT_EQ(chunked_overrun("5;abc\nde\nf", 8, 100), O::kChunkLine);
}

TEST(ChunkedOverrun, TheTrailerSectionFollowsTheLastChunksLine) {
  EXPECT_EQ(chunked_overrun("0\r\nX-T: abc\r\n", 100, 10), O::kNone);  // 10 bytes
  EXPECT_EQ(chunked_overrun("0\r\nX-T: abcd\r\n", 100, 10), O::kTrailers);
  EXPECT_EQ(chunked_overrun("\r\n0\r\nX-T: abcd\r\n", 100, 10), O::kTrailers);
  EXPECT_EQ(chunked_overrun("\r\n0\r\nX-T: abcdefghij", 100, 10), O::kTrailers);
}

TEST(ChunkedBodyReader, ABodyWithExtensionsAndTrailersWithinTheLimitsIsReadWhole) {
  const std::string body =
      "5;name=value;q=\"quoted\"\r\nhello\r\n6;x\r\n world\r\n0;last\r\nX-Trailer: t\r\n"
      "X-Head: 2\r\n\r\n";
  for (std::size_t piece : {1u, 2u, 3u, 7u, 4096u}) {
    WithRequest parser_own;
    RequestParser& parser = parser_own.parser;
    const Read r = read_body(parser, body, piece, 64, 64);
    ASSERT_EQ(r.status, Status::kDone) << "piece " << piece << ": " << r.ec.message();
    EXPECT_EQ(parser.get().body(), "hello world");
    // The trailer fields are dropped; the head's are all there, as they were.
    EXPECT_EQ(parser.get().count("X-Trailer"), 0u);
    EXPECT_EQ(parser.get().count("X-Head"), 1u);
    EXPECT_EQ(parser.get()["X-Head"], "1");
    EXPECT_EQ(parser.get()[http::field::host], "x");
    EXPECT_EQ(parser.get().method(), http::verb::post);
    EXPECT_EQ(parser.get().target(), "/v1/chat/completions");
  }
}

TEST(ChunkedBodyReader, ALineOrTrailerSectionExactlyAtItsLimitIsRead) {
  // "5;" + 8 + CRLF = 12; "X-T: " + 5 + CRLF + CRLF = 14.
  const std::string body = "5;abcdefgh\r\nhello\r\n0\r\nX-T: abcde\r\n\r\n";
  for (std::size_t piece : {1u, 4096u}) {  // arriving bit by bit, and whole
    WithRequest parser_own;
    RequestParser& parser = parser_own.parser;
    const Read r = read_body(parser, body, piece, 14, 12);
    EXPECT_EQ(r.status, Status::kDone) << "piece " << piece << ": " << r.ec.message();
    EXPECT_EQ(parser.get().body(), "hello");
    WithRequest one_less_own;
    RequestParser& one_less = one_less_own.parser;
    EXPECT_EQ(read_body(one_less, body, piece, 13, 12).status, Status::kTrailers);
    WithRequest line_one_less_own;
    RequestParser& line_one_less = line_one_less_own.parser;
    EXPECT_EQ(read_body(line_one_less, body, piece, 14, 11).status, Status::kChunkLine);
  }
}

TEST(ChunkedBodyReader, ALongChunkLineIsRefusedAsSoonAsItPassesTheLimit) {
  const std::string body = "5;" + std::string(100'000, 'a') + "\r\nhello\r\n0\r\n\r\n";
  for (std::size_t piece : {1u, 100u, 4096u}) {
    WithRequest parser_own;
    RequestParser& parser = parser_own.parser;
    const Read r = read_body(parser, body, piece, 64, 64);
    EXPECT_EQ(r.status, Status::kChunkLine) << "piece " << piece;
    EXPECT_LE(r.most_pending, 64 + piece) << "piece " << piece;
  }
  // A whole line in one read, and the last chunk's line.
  for (std::string body : {"5;" + std::string(100, 'a') + "\r\nhello\r\n0\r\n\r\n",
                           "5\r\nhello\r\n0;" + std::string(100, 'a') + "\r\n\r\n"}) {
    WithRequest parser_own;
    RequestParser& parser = parser_own.parser;
    EXPECT_EQ(read_body(parser, body, 4096, 64, 64).status, Status::kChunkLine) << body;
  }
  WithRequest parser_own;
  RequestParser& parser = parser_own.parser;
  EXPECT_EQ(read_body(parser, "0;" + std::string(1000, 'a') + "\r\n\r\n", 10, 64, 64).status,
            Status::kChunkLine);
}

TEST(ChunkedBodyReader, ALargeTrailerSectionIsRefusedAsSoonAsItPassesTheLimit) {
  const std::string body = "5\r\nhello\r\n0\r\nX-T: " + std::string(100'000, 'a') + "\r\n\r\n";
  for (std::size_t piece : {1u, 100u, 4096u}) {
    WithRequest parser_own;
    RequestParser& parser = parser_own.parser;
    const Read r = read_body(parser, body, piece, 64, 64);
    EXPECT_EQ(r.status, Status::kTrailers) << "piece " << piece;
    EXPECT_LE(r.most_pending, 2 + 3 + 64 + piece) << "piece " << piece;
  }
  // Many small fields as well as one large one, arriving with the rest.
  std::string fields;
  for (int i = 0; i < 100; ++i) fields += "X-" + std::to_string(i) + ": y\r\n";
  WithRequest parser_own;
  RequestParser& parser = parser_own.parser;
  EXPECT_EQ(read_body(parser, "0\r\n" + fields + "\r\n", 4096, 64, 64).status, Status::kTrailers);
}

// Beast's field set threw std::length_error for a value over 64 KiB (once
// from inside http::async_read: it stopped the worker, and with it a
// one-worker gateway); a max_header_size over 64 KiB let one through. The
// request's own fields take any size, and a trailer field is dropped.
TEST(ChunkedBodyReader, ATrailerFieldOver64KiBWithinTheLimitIsDropped) {
  const std::string body = "5\r\nhello\r\n0\r\nX-T: " + std::string(70'000, 'a') + "\r\n\r\n";
  WithRequest parser_own;
  RequestParser& parser = parser_own.parser;
  Read r;
  EXPECT_NO_THROW(r = read_body(parser, body, 4096, 1024 * 1024, 64));
  EXPECT_EQ(r.status, Status::kDone) << r.ec.message();
  EXPECT_EQ(parser.get().body(), "hello");
  EXPECT_EQ(parser.get().count("X-T"), 0u);
}

TEST(ChunkedBodyReader, WhatBeastRefusesIsAnError) {
  for (std::string body : {"zz\r\nhello\r\n0\r\n\r\n", "5;=\r\nhello\r\n0\r\n\r\n",
                           "5\r\nhello\r\n0\r\nbad trailer\r\n\r\n"}) {
    WithRequest parser_own;
    RequestParser& parser = parser_own.parser;
    const Read r = read_body(parser, body, 4096, 64, 64);
    EXPECT_EQ(r.status, Status::kError) << body;
    EXPECT_TRUE(r.ec) << body;
  }
}

}  // namespace
}  // namespace llmgate::gateway
