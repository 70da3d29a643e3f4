#include "gateway/shared/resp.h"

#include <gtest/gtest.h>

namespace llmgate::gateway::resp {
namespace {

Status parse_all(std::string_view in, Value& v, std::size_t& used, std::string& err) {
  return parse(in, v, used, err);
}

TEST(RespTest, EncodesCommandsAsArraysOfBulkStrings) {
  std::string out;
  append_command(out, {"SET", "k", "a\r\nb"});
  EXPECT_EQ(out, "*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$4\r\na\r\nb\r\n");
  std::string empty;
  append_command(empty, {""});
  EXPECT_EQ(empty, "*1\r\n$0\r\n\r\n");
}

TEST(RespTest, ParsesEveryReplyType) {
  const std::string in =
      "+OK\r\n-ERR bad\r\n:-42\r\n$5\r\nhe\r\no\r\n$-1\r\n*2\r\n:1\r\n*1\r\n$0\r\n\r\n*-1\r\n";
  std::string_view rest = in;
  std::vector<Value> got;
  for (;;) {
    Value v;
    std::size_t used = 0;
    std::string err;
    const Status s = parse_all(rest, v, used, err);
    if (s != Status::kValue) {
      EXPECT_EQ(s, Status::kNeedMore);
      break;
    }
    got.push_back(v);
    rest.remove_prefix(used);
  }
  ASSERT_EQ(got.size(), 7u);
  EXPECT_EQ(got[0].type, Value::Type::kSimple);
  EXPECT_EQ(got[0].str, "OK");
  EXPECT_TRUE(got[1].is_error());
  EXPECT_EQ(got[1].str, "ERR bad");
  EXPECT_EQ(got[2].integer, -42);
  EXPECT_EQ(got[3].str, "he\r\no");
  EXPECT_EQ(got[4].type, Value::Type::kNull);
  ASSERT_EQ(got[5].elements.size(), 2u);
  EXPECT_EQ(got[5].elements[1].elements[0].str, "");
  EXPECT_EQ(got[6].type, Value::Type::kNull);
  EXPECT_TRUE(rest.empty());
}

TEST(RespTest, EveryPrefixOfAValueNeedsMore) {
  Value v;
  v.type = Value::Type::kArray;
  v.elements.resize(3);
  v.elements[0] = Value{Value::Type::kBulk, "message", 0, {}};
  v.elements[1] = Value{Value::Type::kInteger, "", 7, {}};
  v.elements[2] = Value{Value::Type::kSimple, "x", 0, {}};
  std::string wire;
  append_value(wire, v);
  for (std::size_t n = 0; n < wire.size(); ++n) {
    Value out;
    std::size_t used = 0;
    std::string err;
    EXPECT_EQ(parse(std::string_view(wire).substr(0, n), out, used, err), Status::kNeedMore) << n;
    EXPECT_EQ(used, 0u);
  }
  Value out;
  std::size_t used = 0;
  std::string err;
  ASSERT_EQ(parse(wire, out, used, err), Status::kValue);
  EXPECT_EQ(used, wire.size());
  EXPECT_EQ(out, v);
}

TEST(RespTest, RejectsWhatIsNotResp) {
  for (std::string_view bad : {"?x\r\n", "$abc\r\n", "$-2\r\n", ":1x\r\n", "+OK\rX", "$1\r\nab\r\n",
                               "*99999999999\r\n", "$99999999999\r\n"}) {
    Value v;
    std::size_t used = 0;
    std::string err;
    EXPECT_EQ(parse(bad, v, used, err), Status::kError) << bad;
    EXPECT_FALSE(err.empty());
  }
  // Nesting beyond kMaxDepth.
  std::string deep;
  for (int i = 0; i <= kMaxDepth + 1; ++i) deep += "*1\r\n";
  deep += ":1\r\n";
  Value v;
  std::size_t used = 0;
  std::string err;
  EXPECT_EQ(parse(deep, v, used, err), Status::kError);
}

}  // namespace
}  // namespace llmgate::gateway::resp
