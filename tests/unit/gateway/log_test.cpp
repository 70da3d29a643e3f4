// Structured log lines: text and JSON lines formats.
#include "gateway/observe/log.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace llmgate::gateway {
namespace {

const std::vector<LogField> kFields{{"request_id", "abc"},
                                    {"model", "fast chat"},
                                    {"stream", "true", true},
                                    {"ttft_ms", "12.5", true}};

TEST(LogFormat, JsonLinesCarryTypedFieldsInOneObject) {
  auto line = format_log_line(LogLevel::kInfo, "request", kFields, LogFormat::kJson);
  EXPECT_EQ(line.find('\n'), std::string::npos);
  auto j = nlohmann::json::parse(line);
  EXPECT_EQ(j["level"], "info");
  EXPECT_EQ(j["msg"], "request");
  EXPECT_EQ(j["request_id"], "abc");
  EXPECT_EQ(j["model"], "fast chat");
  EXPECT_EQ(j["stream"], true);
  EXPECT_DOUBLE_EQ(j["ttft_ms"].get<double>(), 12.5);
  EXPECT_TRUE(j["ts"].is_string());
}

TEST(LogFormat, TextLinesQuoteValuesThatWouldBreakKeyValueParsing) {
  auto line = format_log_line(LogLevel::kWarn, "request", kFields, LogFormat::kText);
  EXPECT_NE(line.find(" warn request request_id=abc model=\"fast chat\" stream=true ttft_ms=12.5"),
            std::string::npos)
      << line;
}

TEST(LogFormat, InvalidUtf8NeverBreaksAJsonLine) {
  std::vector<LogField> f{{"model", std::string("bad\xff\xfe", 5)}};
  auto line = format_log_line(LogLevel::kError, "x", f, LogFormat::kJson);
  EXPECT_TRUE(nlohmann::json::accept(line));
}

TEST(LogFormat, ParsesOnlyKnownFormatNames) {
  LogFormat f;
  EXPECT_TRUE(parse_log_format("json", f));
  EXPECT_EQ(f, LogFormat::kJson);
  EXPECT_TRUE(parse_log_format("text", f));
  EXPECT_EQ(f, LogFormat::kText);
  EXPECT_FALSE(parse_log_format("JSON", f));
}

TEST(LogFormat, TextValuesAreQuotedAsJsonStrings) {
  // The quoted value is the JSON string nlohmann writes, on the fast path
  // (printable ASCII) and off it (control bytes, UTF-8, invalid UTF-8).
  for (const std::string& v :
       {std::string("fast chat"), std::string(R"(say "hi" \ bye)"), std::string("a=b"),
        std::string("tab\there"), std::string("caf\xc3\xa9 ok"), std::string("bad\xff\xfe x"),
        std::string("")}) {
    const std::vector<LogField> f{{"v", v}};
    const auto line = format_log_line(LogLevel::kInfo, "m", f, LogFormat::kText);
    const std::string want =
        " info m v=" +
        nlohmann::json(v).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    ASSERT_GE(line.size(), want.size()) << line;
    EXPECT_EQ(line.substr(line.size() - want.size()), want) << line;
  }
}

TEST(LogField, AValueGivenAsATemporaryIsKeptAndAStringOutlivingTheCallIsBorrowed) {
  std::vector<LogField> f;
  const std::string model = "gpt-4o-mini-2024-07-18";
  f.push_back({"model", model});  // borrowed: no copy
  EXPECT_EQ(f[0].value().data(), model.data());
  // Owned: the temporaries are gone before the line is formatted, and the
  // vector moves its fields as it grows (short values live inside them).
  for (int i = 0; i < 40; ++i) f.push_back({"n", std::to_string(i), true});
  f.push_back({"long", std::string(100, 'x')});
  const auto line = format_log_line(LogLevel::kInfo, "m", f, LogFormat::kText);
  EXPECT_NE(line.find(" model=gpt-4o-mini-2024-07-18 n=0 n=1 "), std::string::npos) << line;
  EXPECT_NE(line.find(" n=39 long=" + std::string(100, 'x')), std::string::npos) << line;
  const auto json = format_log_line(LogLevel::kInfo, "m", f, LogFormat::kJson);
  EXPECT_NE(json.find(R"("model":"gpt-4o-mini-2024-07-18")"), std::string::npos) << json;
}

}  // namespace
}  // namespace llmgate::gateway
