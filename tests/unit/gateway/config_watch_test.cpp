#include "gateway/server/config_watch.h"

#include <gtest/gtest.h>

namespace llmgate::gateway {
namespace {

using namespace std::chrono_literals;
using Clock = ConfigWatch::Clock;

TEST(ConfigWatch, ReloadsAChangeOnlyOnceItHasSettled) {
  const Clock::time_point t0{};
  ConfigWatch watch(std::string("a"), 500ms);
  EXPECT_FALSE(watch.observe(std::string("a"), t0));
  // A file being written: each read differs, nothing is reloaded.
  EXPECT_FALSE(watch.observe(std::string("ab"), t0 + 100ms));
  EXPECT_TRUE(watch.settling());
  EXPECT_FALSE(watch.observe(std::string("abc"), t0 + 200ms));
  EXPECT_FALSE(watch.observe(std::string("abc"), t0 + 600ms));  // stable for 400 ms only
  EXPECT_TRUE(watch.observe(std::string("abc"), t0 + 700ms));
  EXPECT_FALSE(watch.settling());
  EXPECT_FALSE(watch.observe(std::string("abc"), t0 + 2s));  // reloaded once
}

TEST(ConfigWatch, AnUnreadableFileOrARevertedChangeIsNotReloaded) {
  const Clock::time_point t0{};
  ConfigWatch watch(std::string("a"), 500ms);
  EXPECT_FALSE(watch.observe(std::nullopt, t0));
  EXPECT_FALSE(watch.observe(std::nullopt, t0 + 1s));
  EXPECT_FALSE(watch.observe(std::string("b"), t0 + 2s));
  EXPECT_FALSE(watch.observe(std::string("a"), t0 + 2100ms));  // back to what runs
  EXPECT_FALSE(watch.settling());
  EXPECT_FALSE(watch.observe(std::string("a"), t0 + 5s));
}

TEST(ConfigWatch, ASighupReloadCountsAsApplied) {
  const Clock::time_point t0{};
  ConfigWatch watch(std::string("a"), 500ms);
  EXPECT_FALSE(watch.observe(std::string("b"), t0));
  watch.applied(std::string("b"));
  EXPECT_FALSE(watch.observe(std::string("b"), t0 + 1s));
}

}  // namespace
}  // namespace llmgate::gateway
