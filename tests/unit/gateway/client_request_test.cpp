#include "gateway/http/client_request.h"

#include <gtest/gtest.h>

#include <boost/asio/buffer.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "gateway/server/request_parser.h"

namespace llmgate::gateway {
namespace {

namespace net = boost::asio;

// A request as an SDK sends one: a dozen fields and more.
std::string sdk_head(std::size_t extra_fields, std::size_t value_size = 8) {
  std::string head =
      "POST /v1/chat/completions HTTP/1.1\r\nHost: gw\r\nContent-Type: application/json\r\n"
      "Authorization: Bearer sk-0123456789abcdef\r\nContent-Length: 2\r\n";
  for (std::size_t i = 0; i < extra_fields; ++i)
    head += "X-Stainless-" + std::to_string(i) + ": " + std::string(value_size, 'v') + "\r\n";
  return head + "\r\n{}";
}

std::size_t head_bytes(std::string_view bytes) { return bytes.find("\r\n\r\n") + 4; }

void parse(RequestParser& parser, std::string_view bytes) {
  beast::error_code ec;
  parser.eager(true);
  parser.header_limit(1 << 20);
  parser.put(net::buffer(bytes.data(), bytes.size()), ec);
  ASSERT_FALSE(ec) << ec.message();
  ASSERT_TRUE(parser.is_done());
}

using Seen = std::vector<std::pair<std::string, std::string>>;
Seen fields_of(const ClientRequest& req) {
  Seen out;
  for (const auto& f : req) out.emplace_back(f.name_string(), f.value());
  return out;
}

TEST(ClientRequest, AnSdkHeadIsOneBlockSizedBeforeItIsParsed) {
  const std::string bytes = sdk_head(11, 20);  // fifteen fields, as the OpenAI SDK's
  ClientRequest req;
  req.reserve(head_bytes(bytes));
  const std::size_t reserved = req.block_size();
  EXPECT_GE(reserved, 2 * head_bytes(bytes));
  RequestParser parser(req);
  parse(parser, bytes);
  EXPECT_EQ(req.block_size(), reserved);  // no second block
  EXPECT_EQ(req.size(), 15u);
  EXPECT_EQ(req.method(), http::verb::post);
  EXPECT_EQ(req.method_string(), "POST");
  EXPECT_EQ(req.target(), "/v1/chat/completions");
  EXPECT_EQ(req.version(), 11u);
  EXPECT_EQ(req.body(), "{}");
  // By enum, and by name without case.
  EXPECT_EQ(req[http::field::authorization], "Bearer sk-0123456789abcdef");
  EXPECT_EQ(req["AUTHORIZATION"], "Bearer sk-0123456789abcdef");
  EXPECT_EQ(req["x-stainless-10"], std::string(20, 'v'));
  EXPECT_EQ(req.count("X-STAINLESS-3"), 1u);
  EXPECT_EQ(req.count(http::field::host), 1u);
  // Absent: "" and end(); field::unknown names no field.
  EXPECT_EQ(req["x-missing"], "");
  EXPECT_TRUE(req.find(http::field::expect) == req.end());
  EXPECT_TRUE(req.find(http::field::unknown) == req.end());
  EXPECT_EQ(req.count(http::field::unknown), 0u);
  EXPECT_EQ(req.find(http::field::content_type)->value(), "application/json");
  // A reserve while a block is held changes nothing.
  req.reserve(100000);
  EXPECT_EQ(req.block_size(), reserved);
}

TEST(ClientRequest, FieldsKeepArrivalOrderAndANamesValuesTheirs) {
  ClientRequest req;
  RequestParser parser(req);
  parse(parser,
        "GET /v1/models HTTP/1.0\r\nVia: 1.1 a\r\nHost: gw\r\nvia: 1.1 b\r\nX-Y:\r\n"
        "VIA: 1.1 c\r\n\r\n");
  const Seen want = {
      {"Via", "1.1 a"}, {"Host", "gw"}, {"via", "1.1 b"}, {"X-Y", ""}, {"VIA", "1.1 c"}};
  EXPECT_EQ(fields_of(req), want);
  EXPECT_EQ(req[http::field::via], "1.1 a");  // the first
  EXPECT_EQ(req.count(http::field::via), 3u);
  EXPECT_EQ(req.count("via"), 3u);
  EXPECT_EQ(req.find("x-y")->value(), "");
  EXPECT_TRUE(req.find("x-y") != req.end());
  EXPECT_EQ(req.version(), 10u);
  EXPECT_EQ((*req.begin()).name(), http::field::via);
  EXPECT_EQ((*std::next(req.begin(), 3)).name(), http::field::unknown);
}

TEST(ClientRequest, AHeadNotSizedBeforehandGrowsItsBlockAndKeepsEveryField) {
  const std::string bytes = sdk_head(400, 100);  // ~45 KiB of fields
  ClientRequest req;
  RequestParser parser(req);
  parse(parser, bytes);
  EXPECT_EQ(req.size(), 404u);
  for (std::size_t i = 0; i < 400; ++i)
    EXPECT_EQ(req["x-stainless-" + std::to_string(i)], std::string(100, 'v')) << i;
  EXPECT_EQ(req[http::field::host], "gw");
  EXPECT_EQ(req.target(), "/v1/chat/completions");
  EXPECT_EQ(req.body(), "{}");
}

TEST(ClientRequest, AHeadOfTinyLinesGrowsTheBlockItWasGiven) {
  // "a:\r\n": 1 byte of text and 16 of index for 4 of head, more than the
  // twice-the-head block holds.
  std::string bytes = "GET / HTTP/1.1\r\nHost: gw\r\n";
  for (int i = 0; i < 300; ++i) bytes += std::string(1, static_cast<char>('a' + i % 26)) + ":\r\n";
  bytes += "\r\n";
  ClientRequest req;
  req.reserve(bytes.size());
  const std::size_t reserved = req.block_size();
  RequestParser parser(req);
  parse(parser, bytes);
  EXPECT_GT(req.block_size(), reserved);
  EXPECT_EQ(req.size(), 301u);
  EXPECT_EQ(req.count("z"), 11u);
  EXPECT_EQ(req["a"], "");
  EXPECT_EQ(req[http::field::host], "gw");
}

// Offsets are 32 bits: a head past 4 GiB is refused before it is added (a
// real one needs max_header_size near its 1 GiB maximum; the arithmetic is
// what can be tested here).
TEST(ClientRequest, RoomEndsWhereThirtyTwoBitOffsetsDo) {
  ClientRequest req;
  const std::size_t max = ClientRequest::kMaxBytes;
  EXPECT_TRUE(req.has_room(max, 0));
  EXPECT_TRUE(req.has_room(max - 16, 1));
  EXPECT_FALSE(req.has_room(max - 15, 1));
  EXPECT_FALSE(req.has_room(max + 1, 0));
  EXPECT_FALSE(req.has_room(0, max / 16 + 1));
  EXPECT_FALSE(req.has_room(std::size_t{1} << 63, 0));  // no overflow in the sum
  req.insert("x-a", "1");
  EXPECT_TRUE(req.has_room(max - 4 - 32, 1));
  EXPECT_FALSE(req.has_room(max - 4 - 31, 1));
}

TEST(ClientRequest, ANameOrValueOver64KiBIsKept) {
  // Beast's field set refused these with std::length_error (a throw from
  // inside a read); the request's block takes what the header limit lets in.
  const std::string value(70'000, 'a');
  ClientRequest req;
  RequestParser parser(req);
  parse(parser,
        "POST /x HTTP/1.1\r\nHost: gw\r\nX-Big: " + value + "\r\nContent-Length: 0\r\n\r\n");
  EXPECT_EQ(req["x-big"], value);
  EXPECT_EQ(req[http::field::content_length], "0");
}

TEST(ClientRequest, AMethodBeastHasNoVerbForIsKeptAsSent) {
  ClientRequest req;
  RequestParser parser(req);
  parse(parser, "BREW /pot HTTP/1.1\r\nHost: gw\r\n\r\n");
  EXPECT_EQ(req.method(), http::verb::unknown);
  EXPECT_EQ(req.method_string(), "BREW");
  EXPECT_EQ(req.target(), "/pot");
}

TEST(ClientRequest, ACopyIsItsOwnAndAMoveLeavesAnEmptyRequest) {
  std::optional<ClientRequest> copy;
  {
    ClientRequest req;
    RequestParser parser(req);
    parse(parser, sdk_head(3));
    copy.emplace(req);
    req.insert("x-after", "1");  // the original changes; the copy does not
    EXPECT_EQ(copy->count("x-after"), 0u);
  }
  EXPECT_EQ((*copy)["x-stainless-2"], "vvvvvvvv");
  EXPECT_EQ(copy->target(), "/v1/chat/completions");
  EXPECT_EQ(copy->body(), "{}");
  ClientRequest moved = std::move(*copy);
  EXPECT_EQ(moved.size(), 7u);
  EXPECT_EQ(moved[http::field::host], "gw");
  EXPECT_EQ(copy->size(), 0u);  // NOLINT(bugprone-use-after-move): what a move leaves
  EXPECT_EQ(copy->target(), "");
  EXPECT_EQ(copy->body(), "");
  EXPECT_TRUE(copy->begin() == copy->end());
}

TEST(ClientRequest, MadeOutsideASession) {
  ClientRequest req{http::verb::get, "/v1/models", 11};
  req.insert(http::field::host, "Host", "gw");
  req.insert("X-Api-Key", "k");
  EXPECT_EQ(req[http::field::host], "gw");
  EXPECT_EQ(req["x-api-key"], "k");
  EXPECT_EQ(req.method_string(), "GET");
  EXPECT_EQ(req.target(), "/v1/models");
  // The enum found for a name Beast knows.
  req.insert("content-type", "text/plain");
  EXPECT_EQ(req[http::field::content_type], "text/plain");
}

}  // namespace
}  // namespace llmgate::gateway
