#include <gtest/gtest.h>

#include <stdexcept>
#include <string>

#include "config/config.h"

namespace llmgate::config {
namespace {

std::string size_error(const std::string& text) {
  try {
    parse_size(text);
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "<no error>";
}

TEST(ParseSize, ParsesPlainBytes) {
  EXPECT_EQ(parse_size("0"), 0u);
  EXPECT_EQ(parse_size("1024"), 1024u);
  EXPECT_EQ(parse_size("10B"), 10u);
}

TEST(ParseSize, ParsesBinaryUnitsAsPowersOf1024) {
  EXPECT_EQ(parse_size("512KiB"), 512u * 1024);
  EXPECT_EQ(parse_size("4MiB"), 4u * 1024 * 1024);
  EXPECT_EQ(parse_size("1GiB"), 1024u * 1024 * 1024);
}

TEST(ParseSize, ParsesDecimalUnitsAsPowersOf1000) {
  EXPECT_EQ(parse_size("64KB"), 64'000u);
  EXPECT_EQ(parse_size("1MB"), 1'000'000u);
  EXPECT_EQ(parse_size("2GB"), 2'000'000'000u);
}

TEST(ParseSize, RejectsMalformedTextWithAnExample) {
  EXPECT_EQ(size_error("4 MB"), R"(invalid size "4 MB" (expected e.g. 1048576, 512KiB, 4MiB))");
  for (const char* text : {"", "MiB", "4mb", "4kib", "4M", "4MiBs", "-1", "+1", "1.5MiB", "0x10",
                           " 4MiB", "4MiB ", "1e6"}) {
    EXPECT_THROW(parse_size(text), std::invalid_argument) << text;
  }
}

TEST(ParseSize, RejectsValuesThatOverflow) {
  EXPECT_EQ(size_error("99999999999999999999"), R"(size "99999999999999999999" is too large)");
  EXPECT_EQ(size_error("17179869184GiB"), R"(size "17179869184GiB" is too large)");
}

}  // namespace
}  // namespace llmgate::config
