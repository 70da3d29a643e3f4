#include "gateway/http/head_arena.h"

#include <gtest/gtest.h>

#include <boost/asio/buffer.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>

#include "gateway/server/chunked_request.h"

namespace llmgate::gateway {
namespace {

namespace net = boost::asio;
using Request = RequestParser::value_type;  // http_response.h's Request
using Fields = Request::fields_type;

// A request as an SDK sends one: a field set of a dozen fields.
std::string sdk_head(std::size_t extra_fields, std::size_t value_size = 8) {
  std::string head =
      "POST /v1/chat/completions HTTP/1.1\r\nHost: gw\r\nContent-Type: application/json\r\n"
      "Authorization: Bearer sk-0123456789abcdef\r\nContent-Length: 2\r\n";
  for (std::size_t i = 0; i < extra_fields; ++i)
    head += "X-Stainless-" + std::to_string(i) + ": " + std::string(value_size, 'v') + "\r\n";
  return head + "\r\n{}";
}

RequestParser parser_in(HeadArena& arena) {
  return RequestParser(std::piecewise_construct, std::make_tuple(),
                       std::make_tuple(HeadAllocator<char>(&arena)));
}

void parse(RequestParser& parser, std::string_view bytes) {
  beast::error_code ec;
  parser.eager(true);
  parser.header_limit(1 << 20);
  parser.put(net::buffer(bytes.data(), bytes.size()), ec);
  ASSERT_FALSE(ec) << ec.message();
  ASSERT_TRUE(parser.is_done());
}

TEST(HeadArena, AHeadsFieldsShareOneBlockThatGoesWithTheRequest) {
  HeadArena arena;
  // The first block may be too small for an SDK's head: it grows.
  for (int i = 0; i < 3; ++i) {
    RequestParser parser = parser_in(arena);
    parse(parser, sdk_head(7));
  }
  const std::size_t size = arena.block_size();
  {
    RequestParser parser = parser_in(arena);
    parse(parser, sdk_head(7));
    Request req = parser.release();
    EXPECT_TRUE(arena.holds_block());
    // Every field (and the request line) is an allocation from the block.
    EXPECT_EQ(arena.live(), 12u);
    EXPECT_EQ(req["authorization"], "Bearer sk-0123456789abcdef");
    EXPECT_EQ(req["x-stainless-6"], "vvvvvvvv");
    EXPECT_EQ(req.target(), "/v1/chat/completions");
    EXPECT_EQ(req.body(), "{}");
  }
  // The request is gone: so is the block (an idle connection holds none).
  EXPECT_EQ(arena.live(), 0u);
  EXPECT_FALSE(arena.holds_block());
  EXPECT_EQ(arena.block_size(), size);
}

// A head found whole sizes the block before it is parsed: a connection's
// first SDK head (larger than the first block) is one allocation, not the
// first block and then the heap field by field.
TEST(HeadArena, AHeadSeenWholeSizesItsBlock) {
  const std::string bytes = sdk_head(12, 20);
  const std::string_view head(bytes.data(), bytes.find("\r\n\r\n") + 4);
  ASSERT_GT(head.size(), HeadArena::kFirstBlock / 2);
  HeadArena sized;
  sized.expect(head.size());
  EXPECT_GT(sized.block_size(), HeadArena::kFirstBlock);
  {
    RequestParser parser = parser_in(sized);
    parse(parser, bytes);
    EXPECT_TRUE(sized.holds_block());
    EXPECT_EQ(sized.live(), 17u);  // every field and the request line from the block
    // Expecting while a block is held changes nothing.
    const std::size_t held = sized.block_size();
    sized.expect(8000);
    EXPECT_EQ(sized.block_size(), held);
  }
  // Without: the same head overflows the first block into the heap.
  HeadArena unsized;
  {
    RequestParser parser = parser_in(unsized);
    parse(parser, bytes);
    EXPECT_LT(unsized.live(), 17u);
  }
  // A small head never shrinks the block, and a huge one stops at kMaxBlock.
  HeadArena a;
  a.expect(std::string_view("GET / HTTP/1.1\r\n\r\n").size());
  EXPECT_EQ(a.block_size(), HeadArena::kFirstBlock);
  a.expect(100000);
  EXPECT_EQ(a.block_size(), HeadArena::kMaxBlock);
}

TEST(HeadArena, AHeadLargerThanTheBlockTakesTheRestFromTheHeapAndTheNextBlockGrows) {
  HeadArena arena;
  {
    RequestParser parser = parser_in(arena);
    parse(parser, sdk_head(20, 100));  // ~3 KiB of fields
    const Request req = parser.release();
    EXPECT_EQ(req["x-stainless-19"], std::string(100, 'v'));
    EXPECT_EQ(req.count("host"), 1u);
  }
  EXPECT_FALSE(arena.holds_block());
  EXPECT_EQ(arena.block_size(), 2 * HeadArena::kFirstBlock);
  // Grown until a head fits, then kept.
  for (int i = 0; i < 8; ++i) {
    RequestParser parser = parser_in(arena);
    parse(parser, sdk_head(20, 100));
  }
  const std::size_t fits = arena.block_size();
  EXPECT_GT(fits, 2 * HeadArena::kFirstBlock);
  {
    RequestParser parser = parser_in(arena);
    parse(parser, sdk_head(20, 100));
  }
  EXPECT_EQ(arena.block_size(), fits);
  // Never past kMaxBlock.
  for (int i = 0; i < 8; ++i) {
    RequestParser parser = parser_in(arena);
    parse(parser, sdk_head(400, 100));  // ~45 KiB
  }
  EXPECT_EQ(arena.block_size(), HeadArena::kMaxBlock);
  EXPECT_FALSE(arena.holds_block());
  // Small heads again: the block shrinks back, halving per request while
  // a head uses under a quarter of it.
  for (int i = 0; i < 8; ++i) {
    RequestParser parser = parser_in(arena);
    parse(parser, sdk_head(0));
  }
  EXPECT_LE(arena.block_size(), 2 * HeadArena::kFirstBlock);
}

TEST(HeadArena, ACopyIsTheHeapsAndOutlivesTheArena) {
  std::optional<Request> copy;
  {
    HeadArena arena;
    RequestParser parser = parser_in(arena);
    parse(parser, sdk_head(3));
    const Request req = parser.release();
    const std::size_t live = arena.live();
    copy.emplace(req);
    EXPECT_EQ(arena.live(), live);  // nothing of the copy is in the block
    EXPECT_EQ(copy->get_allocator().arena(), nullptr);
  }
  EXPECT_EQ((*copy)["x-stainless-2"], "vvvvvvvv");
  EXPECT_EQ(copy->target(), "/v1/chat/completions");
}

TEST(HeadArena, FieldsSetAndErasedAfterTheHeadStayCorrect) {
  HeadArena arena;
  RequestParser parser = parser_in(arena);
  parse(parser, sdk_head(2));
  Request req = parser.release();
  // What a handler may do to a head: replace, add and erase fields.
  for (int i = 0; i < 50; ++i) {
    req.set("x-llmgate-n", std::to_string(i));
    req.erase("x-stainless-0");
    req.insert("x-stainless-0", std::string(64, 'a' + i % 26));
  }
  EXPECT_EQ(req["x-llmgate-n"], "49");
  EXPECT_EQ(req["x-stainless-0"], std::string(64, 'a' + 49 % 26));
  EXPECT_EQ(req["x-stainless-1"], "vvvvvvvv");
  // Moved into another field set (the chunked reader's trailer swap) and
  // back: still the arena's, still whole.
  Fields moved(std::move(static_cast<Fields&>(req)));
  EXPECT_EQ(moved.get_allocator().arena(), &arena);
  static_cast<Fields&>(req) = std::move(moved);
  EXPECT_EQ(req["host"], "gw");
}

TEST(HeadAllocator, WithoutAnArenaIsTheHeap) {
  // A field set made outside a session (tests, tools): the heap's.
  Request req{http::verb::get, "/v1/models", 11};
  req.set(http::field::host, "gw");
  EXPECT_EQ(req.get_allocator().arena(), nullptr);
  EXPECT_EQ(req[http::field::host], "gw");
  HeadAllocator<char> heap;
  char* p = heap.allocate(100);
  heap.deallocate(p, 100);
}

}  // namespace
}  // namespace llmgate::gateway
