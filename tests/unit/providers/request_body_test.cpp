// RequestBody: the client's request admitted from a scanner's index, and the
// upstream body spliced from the client's own text.
#include "providers/request_body.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace llmgate::providers {
namespace {

using nlohmann::json;
using Type = RequestBody::Type;
using Reason = RequestBody::Invalid::Reason;

RequestBody body(const std::string& text) {
  auto r = RequestBody::parse(text);
  if (auto* inv = std::get_if<RequestBody::Invalid>(&r)) {
    ADD_FAILURE() << "refused: " << inv->message;
    return {};
  }
  return std::get<RequestBody>(std::move(r));
}

Reason refusal(const std::string& text) {
  auto r = RequestBody::parse(text);
  EXPECT_TRUE(std::holds_alternative<RequestBody::Invalid>(r)) << text;
  return std::holds_alternative<RequestBody::Invalid>(r) ? std::get<RequestBody::Invalid>(r).reason
                                                         : Reason::kSyntax;
}

TEST(RequestBody, IndexesTheTopLevelMembersWithTheirTypes) {
  auto b = body(R"( {"model" : "gpt-4o", "n":3, "t":0.5, "s":true, "f":false, "z":null,
                   "messages":[{"role":"user"},{}], "o":{"a":1,"b":[]}} )");
  ASSERT_EQ(b.members().size(), 8u);
  EXPECT_EQ(b.string_of(*b.find("model")), "gpt-4o");
  EXPECT_EQ(b.find("n")->v.type, Type::kNumber);
  EXPECT_TRUE(b.find("n")->v.integer);
  EXPECT_EQ(b.find("n")->v.int64, 3);
  EXPECT_FALSE(b.find("t")->v.integer);
  EXPECT_EQ(b.find("s")->v.type, Type::kTrue);
  EXPECT_EQ(b.find("f")->v.type, Type::kFalse);
  EXPECT_EQ(b.find("z")->v.type, Type::kNull);
  EXPECT_EQ(b.find("messages")->v.size, 2u);
  EXPECT_EQ(b.find("o")->v.size, 2u);
  EXPECT_EQ(b.text_of(*b.find("o")), R"({"a":1,"b":[]})");
  EXPECT_EQ(b.find("absent"), nullptr);
}

TEST(RequestBody, ReadsNumbersAsNlohmannDoes) {
  auto b = body(R"({"a":-0,"b":9223372036854775807,"c":9223372036854775808,
                    "d":-9223372036854775808,"e":18446744073709551616,"f":1e2,"g":1.7e308})");
  EXPECT_TRUE(b.find("a")->v.integer && b.find("a")->v.fits_int64);
  EXPECT_EQ(b.find("a")->v.int64, 0);
  EXPECT_EQ(b.find("b")->v.int64, INT64_MAX);
  // uint64 beyond int64: an integer nlohmann keeps unsigned.
  EXPECT_TRUE(b.find("c")->v.integer);
  EXPECT_FALSE(b.find("c")->v.fits_int64);
  EXPECT_EQ(b.find("d")->v.int64, INT64_MIN);
  EXPECT_FALSE(b.find("e")->v.integer);  // past uint64: a double
  EXPECT_FALSE(b.find("f")->v.integer);
  EXPECT_FALSE(b.find("g")->v.integer);
  // A double that overflows is not JSON nlohmann accepts.
  EXPECT_EQ(refusal(R"({"x":1.8e308})"), Reason::kSyntax);
  EXPECT_EQ(refusal(R"({"x":)" + std::string(400, '9') + "}"), Reason::kSyntax);
}

TEST(RequestBody, TheLastOfARepeatedKeyCountsAsForNlohmann) {
  auto b = body(R"({"model":"a","model":"b","messages":[{"role":1,"role":"user"}]})");
  EXPECT_EQ(b.string_of(*b.find("model")), "b");
  std::optional<RequestBody::Member> first;
  b.each_element(*b.find("messages"), [&](std::size_t, const RequestBody::Member& m) {
    first = m;
    return false;
  });
  ASSERT_TRUE(first);
  auto role = b.member_of(*first, "role");
  ASSERT_TRUE(role);
  EXPECT_EQ(role->v.type, Type::kString);
  EXPECT_EQ(b.dom()["model"], "b");
}

// An element's member found in the array's own scan: what member_of finds
// in the element -- the last of a repeated key, an escaped key decoded,
// only the element's own members -- and no member for other elements.
TEST(RequestBody, AnElementsMemberFoundInTheSameScanIsMemberOfs) {
  auto b = body(R"({"messages":[{"role":1,"role":"user"},{"content":{"role":"x"}},)"
                R"([1],"s",{"r\u006fle":"tool","n":[{"role":2}]},{}]})");
  const RequestBody::Member& messages = *b.find("messages");
  std::vector<std::pair<RequestBody::Member, std::optional<RequestBody::Member>>> want;
  b.each_element(messages, [&](std::size_t, const RequestBody::Member& m) {
    want.emplace_back(m, b.member_of(m, "role"));
    return true;
  });
  ASSERT_EQ(want.size(), 6u);
  std::size_t n = 0;
  EXPECT_TRUE(b.each_element_with(
      messages, "role",
      [&](std::size_t i, const RequestBody::Member& m, const RequestBody::Member* role) {
        EXPECT_EQ(i, n);
        const auto& [element, found] = want[n++];
        EXPECT_EQ(m.begin, element.begin);
        EXPECT_EQ(m.end, element.end);
        EXPECT_EQ(m.v.type, element.v.type);
        EXPECT_EQ(m.v.size, element.v.size);
        EXPECT_EQ(role != nullptr, found.has_value()) << i;
        if (role && found) {
          EXPECT_EQ(role->value, found->value);
          EXPECT_EQ(role->end, found->end);
          EXPECT_EQ(role->v.type, found->v.type);
        }
        return true;
      }));
  EXPECT_EQ(n, 6u);
  EXPECT_EQ(want[0].second->v.type, Type::kString);  // the last "role"
  EXPECT_FALSE(want[1].second);                      // a deeper "role" is not the element's
  EXPECT_TRUE(want[4].second);                       // "r\u006fle" is "role"
  // Stopped by its callback: false, as each_element.
  EXPECT_FALSE(b.each_element_with(
      messages, "role",
      [](std::size_t, const RequestBody::Member&, const RequestBody::Member*) { return false; }));
}

// A walk of what parse() validated: members with decoded keys, repeats as
// they come, elements where each_element finds them, types, escapes and
// integers; a callback that returns false stops the elements.
TEST(RequestBody, AWalkReadsWhatTheScanValidated) {
  auto b = body(R"({"messages":[ {"r\u006fle" : "us\u0065r", "n":-7, "n":2.5e0,)"
                R"( "c":[true,false,null,{"x":[]}], "s":"plain"} , "t\"q" ,12]})");
  const RequestBody::Member& messages = *b.find("messages");
  std::vector<RequestBody::Member> scanned;
  b.each_element(messages, [&](std::size_t, const RequestBody::Member& m) {
    scanned.push_back(m);
    return true;
  });
  std::vector<RequestBody::Member> walked;
  EXPECT_TRUE(b.walk_elements(messages, [&](std::size_t i, const RequestBody::Member& m) {
    EXPECT_EQ(i, walked.size());
    walked.push_back(m);
    return true;
  }));
  ASSERT_EQ(walked.size(), 3u);
  for (std::size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(walked[i].begin, scanned[i].begin) << i;
    EXPECT_EQ(walked[i].end, scanned[i].end) << i;
    EXPECT_EQ(walked[i].v.type, scanned[i].v.type) << i;
  }
  EXPECT_TRUE(walked[1].v.escaped);
  EXPECT_EQ(b.string_of(walked[1]), "t\"q");
  EXPECT_TRUE(walked[2].v.integer && walked[2].v.fits_int64);
  EXPECT_EQ(walked[2].v.int64, 12);
  std::vector<std::pair<std::string, RequestBody::Member>> members;
  EXPECT_TRUE(b.walk_members(walked[0], [&](std::string_view key, const RequestBody::Member& m) {
    members.emplace_back(key, m);
  }));
  ASSERT_EQ(members.size(), 5u);
  EXPECT_EQ(members[0].first, "role");
  EXPECT_EQ(b.string_of(members[0].second), "user");
  EXPECT_EQ(members[1].second.v.int64, -7);
  EXPECT_FALSE(members[2].second.v.integer);
  EXPECT_EQ(members[3].second.v.type, Type::kArray);
  EXPECT_EQ(b.text_of(members[3].second), R"([true,false,null,{"x":[]}])");
  EXPECT_FALSE(members[4].second.v.escaped);
  std::vector<Type> types;
  b.walk_elements(members[3].second, [&](std::size_t, const RequestBody::Member& m) {
    types.push_back(m.v.type);
    return true;
  });
  EXPECT_EQ(types, (std::vector<Type>{Type::kTrue, Type::kFalse, Type::kNull, Type::kObject}));
  EXPECT_FALSE(
      b.walk_elements(messages, [](std::size_t, const RequestBody::Member&) { return false; }));
  EXPECT_FALSE(b.walk_members(messages, [](std::string_view, const RequestBody::Member&) {}));
}

TEST(RequestBody, EscapedKeysAndStringsAreDecoded) {
  auto b = body(R"({"mod\u0065l":"gpt\u002d4o","messages":[]})");
  ASSERT_NE(b.find("model"), nullptr);
  EXPECT_EQ(b.string_of(*b.find("model")), "gpt-4o");
  EXPECT_TRUE(b.find("model")->v.escaped);
  // Copies and moves keep the index valid (offsets, not views).
  RequestBody copy = b;
  RequestBody moved = std::move(b);
  EXPECT_EQ(copy.string_of(*copy.find("model")), "gpt-4o");
  EXPECT_EQ(moved.string_of(*moved.find("model")), "gpt-4o");
  auto small = body(R"({"a":1})");  // short enough for the string's own buffer
  RequestBody small_moved = std::move(small);
  EXPECT_EQ(small_moved.find("a")->v.int64, 1);
}

TEST(RequestBody, RefusesWhatIsNotAJsonObjectWithTheReason) {
  EXPECT_EQ(refusal("[1]"), Reason::kNotObject);
  EXPECT_EQ(refusal(R"("x")"), Reason::kNotObject);
  EXPECT_EQ(refusal(R"({"a":1,})"), Reason::kSyntax);
  EXPECT_EQ(refusal(R"({"a":"\ud800"})"), Reason::kSyntax);     // a lone surrogate
  EXPECT_EQ(refusal("{\"a\":\"\xC0\x80\"}"), Reason::kSyntax);  // overlong UTF-8
  EXPECT_EQ(refusal(std::string("{\"a\":1}\0x", 9)), Reason::kNulByte);
  EXPECT_EQ(refusal(R"({"a":)" + std::string(200, '[') + std::string(200, ']') + "}"),
            Reason::kTooDeep);
  // A byte order mark and surrounding whitespace are fine, as for nlohmann.
  EXPECT_EQ(body("\xEF\xBB\xBF {\"a\":1}\n").members().size(), 1u);
}

TEST(RequestBody, SplicingKeepsEveryOtherMembersTextAsSent) {
  const std::string text =
      R"({"messages":[{"role":"user","content":"caf\u00e9 \"q\""}], "model" : "public",)"
      R"("temperature":1.0E0,"seed":12345678901234567890,"stream":false,"route":{"prefer":"x"}})";
  auto b = body(text);
  b.erase("route");
  const std::string out = b.spliced({{"model", R"("up")"}, {"stream", "true"}}, {"stream_options"});
  // The numbers as written (not 1.0 and a double), the escapes as written.
  EXPECT_EQ(out, R"({"messages":[{"role":"user","content":"caf\u00e9 \"q\""}],"model" : "up",)"
                 R"("temperature":1.0E0,"seed":12345678901234567890,"stream":true})");
  const json j = json::parse(out);
  EXPECT_FALSE(j.contains("route"));
}

TEST(RequestBody, SplicingAddsAbsentMembersAndFoldsRepeats) {
  auto b = body(R"({"model":"a","x":1,"model":"b","stream_options":{"include_usage":false}})");
  EXPECT_EQ(b.spliced({{"model", R"("m")"}, {"stream", "true"}}, {"stream_options"}),
            R"({"model":"m","x":1,"stream":true})");
}

// A value given as a string is quoted and escaped into the document, in the
// key's place or appended.
TEST(RequestBody, SplicingWritesAStringValueAsAJsonString) {
  auto b = body(R"({"model":"a","x":1})");
  const std::string name = "gpt-4o-mini-2024-07-18 \"q\" \n caf\u00e9";
  const std::string out = b.spliced({{"model", RequestBody::SpliceValue::string(name)},
                                     {"user", RequestBody::SpliceValue::string("\x01")}});
  EXPECT_EQ(out, R"({"model":"gpt-4o-mini-2024-07-18 \"q\" \n caf)"
                 "\u00e9"
                 R"(","x":1,"user":"\u0001"})");
  const json j = json::parse(out);
  EXPECT_EQ(j["model"], name);
  EXPECT_EQ(j["user"], "\x01");
}

// A chunk's members but one, for a rewrite without a parse: the same
// document as spliced() where it answers, and no answer where it could not
// be exact.
TEST(RequestBody, KeptMembersAreSplicedsDocumentWithoutAParse) {
  auto joined = [](std::string_view text, std::string_view drop) -> std::optional<std::string> {
    KeptMembers kept;
    if (!kept_members(text, drop, kept)) return std::nullopt;
    std::string out = "{";
    for (std::size_t i = 0; i < kept.count; ++i) out.append(i ? "," : "").append(kept.text[i]);
    return out + "}";
  };
  for (const std::string text : {
           R"({"id":"c1","choices":[],"usage":{"prompt_tokens":1}})",
           R"({"usage":{"prompt_tokens":1} , "id":"c1" })",
           R"( {"id":"c1", "usage" : null, "x":1.50} )",
           R"({"usage":{}})",
           R"({})",
           R"({"id":"café"})",
       }) {
    auto spliced = body(text).spliced({}, {"usage"});
    EXPECT_EQ(joined(text, "usage"), spliced) << text;
  }
  EXPECT_EQ(joined(R"({"a":1,"usage":2,"b":3})", "usage"), R"({"a":1,"b":3})");
  // Not answered: spliced() keeps only the last of a repeated key, decodes
  // escaped keys; and what is not an object at all.
  EXPECT_EQ(joined(R"({"usage":1,"a":2,"usage":3})", "usage"), std::nullopt);
  EXPECT_EQ(joined(R"({"us\u0061ge":1,"a":2})", "usage"), std::nullopt);
  EXPECT_EQ(joined(R"({"a":1,)", "usage"), std::nullopt);
  EXPECT_EQ(joined(R"([1])", "usage"), std::nullopt);
  EXPECT_EQ(joined(R"({"a":1} x)", "usage"), std::nullopt);
  std::string many = "{";
  for (int i = 0; i <= static_cast<int>(KeptMembers::kMax); ++i)
    many += (i ? ",\"k" : "\"k") + std::to_string(i) + "\":1";
  EXPECT_EQ(joined(many + "}", "usage"), std::nullopt);
}

// Of a repeated key only the occurrence admission read (the last) goes
// upstream: an upstream that kept the first would see a value never checked.
TEST(RequestBody, SplicingForwardsOnlyTheLastOfARepeatedKey) {
  auto b = body(R"({"max_tokens":-1,"x":1,"max_tokens":5,"mod\u0065l":"a","model":"b"})");
  EXPECT_EQ(b.spliced({{"model", R"("m")"}}), R"({"x":1,"max_tokens":5,"mod\u0065l":"m"})");
  // Keys longer than the scanner's key capture, and the empty key, are told
  // apart by their text.
  const std::string k1(40, 'a'), k2 = std::string(39, 'a') + "b";
  auto c =
      body("{\"" + k1 + "\":1,\"" + k2 + "\":2,\"\":3,\"\\\"\\\"\":4,\"\":5,\"" + k1 + "\":6}");
  EXPECT_EQ(c.spliced({}), "{\"" + k2 + "\":2,\"\\\"\\\"\":4,\"\":5,\"" + k1 + "\":6}");
  // The same with many members (sorted, not compared pairwise).
  std::string many = "{";
  for (int i = 0; i < 100; ++i)
    many += "\"k" + std::to_string(i % 50) + "\":" + std::to_string(i) + ",";
  many += "\"\":1,\"\\\"\\\"\":2}";
  const json spliced = json::parse(body(many).spliced({}));
  EXPECT_EQ(spliced.size(), 52u);
  EXPECT_EQ(spliced["k0"], 50);
  EXPECT_EQ(body(many).spliced({}).find("\"k0\":0,"), std::string::npos);
}

TEST(RequestBody, TheDomIsParsedOnDemandWithoutErasedMembers) {
  auto b = body(R"({"model":"a","route":{"prefer":"fast"},"messages":[]})");
  EXPECT_EQ(b.erase("route"), json::parse(R"({"prefer":"fast"})"));
  EXPECT_FALSE(b.contains("route"));
  EXPECT_EQ(b.dom(), json::parse(R"({"model":"a","messages":[]})"));
  EXPECT_EQ(b.erase("absent"), json());
}

TEST(RequestBody, JsonStringEscapesAsNlohmannDumps) {
  for (std::string s : {std::string("plain"), std::string("q\"b\\s/"), std::string("\n\t\x01\x1f"),
                        std::string("caf\xC3\xA9")}) {
    EXPECT_EQ(json_string(s), json(s).dump()) << s;
  }
}

// Where a container ends: the large ones as the index recorded them, the
// small ones scanned -- both where a scan of the text finds them, at every
// depth, after a byte order mark, with strings that hold brackets and
// escaped quotes.
TEST(RequestBody, ValueEndsAreWhereTheTextSaysAtEveryDepth) {
  const std::string code(200, 'x');
  const std::string text =
      "\xEF\xBB\xBF {\"messages\": "
      "[{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"" +
      code + R"(\"]}{[\\"}]}, {"role":"assistant","content":"ok"}], "small": {"a":[1,2]},)" +
      R"( "tools": [ ] })";
  auto parsed = RequestBody::parse(text);
  ASSERT_TRUE(std::holds_alternative<RequestBody>(parsed));
  const RequestBody& body = std::get<RequestBody>(parsed);
  std::size_t containers = 0;
  for (std::size_t at = 0; at < text.size(); ++at) {
    if (text[at] != '{' && text[at] != '[') continue;
    // (Brackets inside the string are not values; both readings agree on
    // them too: a scan from there.)
    EXPECT_EQ(body.value_end(at), json_value_end(text, at)) << at;
    ++containers;
  }
  EXPECT_GE(containers, 8u);
  // The walk reads the first message's content whole, past its brackets.
  const auto* messages = body.find("messages");
  ASSERT_NE(messages, nullptr);
  std::vector<std::size_t> ends;
  body.walk_elements(*messages, [&](std::size_t, const RequestBody::Member& m) {
    ends.push_back(m.end);
    return true;
  });
  ASSERT_EQ(ends.size(), 2u);
  EXPECT_EQ(text[ends[0] - 1], '}');
  EXPECT_EQ(text.substr(ends[1] - 5, 5), "\"ok\"}");
}

}  // namespace
}  // namespace llmgate::providers
