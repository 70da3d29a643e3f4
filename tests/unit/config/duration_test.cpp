#include <gtest/gtest.h>

#include <stdexcept>
#include <string>

#include "config/config.h"

namespace llmgate::config {
namespace {

using std::chrono::milliseconds;

std::string duration_error(const std::string& text) {
  try {
    parse_duration(text);
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "<no error>";
}

TEST(ParseDuration, ParsesEachUnit) {
  EXPECT_EQ(parse_duration("250ms"), milliseconds(250));
  EXPECT_EQ(parse_duration("2s"), milliseconds(2'000));
  EXPECT_EQ(parse_duration("1m"), milliseconds(60'000));
  EXPECT_EQ(parse_duration("1h"), milliseconds(3'600'000));
  EXPECT_EQ(parse_duration("3000us"), milliseconds(3));
}

TEST(ParseDuration, ParsesDecimalFractionsExactly) {
  EXPECT_EQ(parse_duration("1.5s"), milliseconds(1'500));
  EXPECT_EQ(parse_duration("0.25s"), milliseconds(250));
  EXPECT_EQ(parse_duration("0.1s"), milliseconds(100));  // no 99.999... rounding
  EXPECT_EQ(parse_duration("1.5m"), milliseconds(90'000));
  EXPECT_EQ(parse_duration("2.0ms"), milliseconds(2));
  EXPECT_EQ(parse_duration("1.000000000000000s"), milliseconds(1'000));  // zeros cost nothing
}

TEST(ParseDuration, ParsesCompoundDurations) {
  EXPECT_EQ(parse_duration("1m30s"), milliseconds(90'000));
  EXPECT_EQ(parse_duration("1h1m1s1ms"), milliseconds(3'661'001));
  EXPECT_EQ(parse_duration("500us500us"), milliseconds(1));
}

TEST(ParseDuration, ParsesZeroLeavingTheDecisionToTheCaller) {
  EXPECT_EQ(parse_duration("0s"), milliseconds(0));
  EXPECT_EQ(parse_duration("0ms"), milliseconds(0));
}

TEST(ParseDuration, AcceptsUpToOneWeek) {
  EXPECT_EQ(parse_duration("168h"), milliseconds(168LL * 3'600'000));
}

TEST(ParseDuration, RejectsMalformedTextWithAnExample) {
  EXPECT_EQ(duration_error("2 s"), R"(invalid duration "2 s" (expected e.g. 250ms, 2s, 1m))");
  for (const char* text : {"", "2", "0", "s", "-1s", "+1s", " 2s", "2s ", "2d", "2sec", "2S", "2Ms",
                           ".5s", "1.s", "1.5.5s", "1,5s", "2s-", "1e3ms", "∞s"}) {
    EXPECT_THROW(parse_duration(text), std::invalid_argument) << text;
  }
}

TEST(ParseDuration, RejectsSubMillisecondResultsInsteadOfRounding) {
  EXPECT_EQ(duration_error("100us"), R"(duration "100us" is not a whole number of milliseconds)");
  EXPECT_EQ(duration_error("1.0005s"),
            R"(duration "1.0005s" is not a whole number of milliseconds)");
  EXPECT_EQ(duration_error("0.5ms"), R"(duration "0.5ms" is not a whole number of milliseconds)");
  EXPECT_EQ(duration_error("1.5us"), R"(duration "1.5us" is not a whole number of milliseconds)");
  EXPECT_EQ(duration_error("1.0000000001s"),
            R"(duration "1.0000000001s" is not a whole number of milliseconds)");
}

TEST(ParseDuration, RejectsMoreThanOneWeek) {
  EXPECT_EQ(duration_error("169h"), R"(duration "169h" is too large (at most 168h))");
  EXPECT_EQ(duration_error("168h1ms"), R"(duration "168h1ms" is too large (at most 168h))");
  EXPECT_EQ(duration_error("99999999999999999999h"),
            R"(duration "99999999999999999999h" is too large (at most 168h))");
}

TEST(ParseDuration, EscapesControlCharactersInItsMessage) {
  EXPECT_EQ(duration_error("2s\n"), R"(invalid duration "2s\x0a" (expected e.g. 250ms, 2s, 1m))");
}

}  // namespace
}  // namespace llmgate::config
