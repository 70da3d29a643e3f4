#include "gateway/shared/shared_wire.h"

#include <gtest/gtest.h>

#include <string>

namespace llmgate::gateway::shared_wire {
namespace {

resp::Value bulk(std::string s) {
  resp::Value v;
  v.type = resp::Value::Type::kBulk;
  v.str = std::move(s);
  return v;
}

resp::Value integer(std::int64_t i) {
  resp::Value v;
  v.type = resp::Value::Type::kInteger;
  v.integer = i;
  return v;
}

RedisReply array(std::vector<resp::Value> e) {
  resp::Value v;
  v.type = resp::Value::Type::kArray;
  v.elements = std::move(e);
  return RedisReply{v, ""};
}

TEST(SharedWire, AHealthMessageReadsBackAsItWasSaid) {
  const std::string m =
      health_message(HealthEvent::kEjection, "r1", std::chrono::milliseconds(2500), "groq/llama 3");
  EXPECT_EQ(m, "eject r1 2500 groq/llama 3");
  const auto n = parse_health_message(m);
  ASSERT_TRUE(n);
  EXPECT_EQ(n->event, HealthEvent::kEjection);
  EXPECT_EQ(n->replica, "r1");
  EXPECT_EQ(n->after, std::chrono::milliseconds(2500));
  EXPECT_EQ(n->deployment, "groq/llama 3");  // the rest of the line, spaces and all
  EXPECT_EQ(parse_health_message("cooldown r2 10 d")->event, HealthEvent::kCooldown);
}

TEST(SharedWire, MalformedMessagesAreNoNews) {
  for (const char* line :
       {"", "eject", "eject r1", "eject r1 2500", "eject r1 2500 ", "eject r1 0 d", "eject r1 -5 d",
        "eject r1 5x d", "evict r1 5 d", " eject r1 5 d"}) {
    EXPECT_FALSE(parse_health_message(line)) << '"' << line << '"';
  }
  EXPECT_FALSE(parse_usage_message("usage r1"));
  EXPECT_FALSE(parse_usage_message("eject r1 5 d"));
  const std::string said = usage_message("r1", "team-a");  // the news views it
  const auto u = parse_usage_message(said);
  ASSERT_TRUE(u);
  EXPECT_EQ(u->replica, "r1");
  EXPECT_EQ(u->key, "team-a");
}

TEST(SharedWire, AStoredEntryNamesItsDeploymentAndTimeLeft) {
  const auto n = parse_stored_health("cooldown openai/gpt", "1200 r9");
  ASSERT_TRUE(n);
  EXPECT_EQ(n->event, HealthEvent::kCooldown);
  EXPECT_EQ(n->deployment, "openai/gpt");
  EXPECT_EQ(n->after, std::chrono::milliseconds(1200));
  EXPECT_EQ(n->replica, "r9");
  EXPECT_FALSE(parse_stored_health("cooldown openai/gpt", "0 r9"));
  EXPECT_FALSE(parse_stored_health("cooldown", "1200 r9"));
}

TEST(SharedWire, ScriptRepliesAreReadOnlyInTheirShape) {
  const auto lease = parse_lease(array({integer(3), integer(40)}));
  ASSERT_TRUE(lease);
  EXPECT_EQ(lease->got, 3);
  EXPECT_EQ(lease->wait_ms, 40);
  EXPECT_FALSE(parse_lease(array({integer(3)})));
  EXPECT_FALSE(parse_lease(RedisReply{std::nullopt, "timeout"}));

  const auto u = parse_usage(array({bulk("-12.5"), integer(1500), bulk("0.25"), bulk("3")}));
  ASSERT_TRUE(u);
  EXPECT_DOUBLE_EQ(u->token_level, -12.5);
  EXPECT_EQ(u->token_wait_s, 2);  // 1.5 s rounds up
  EXPECT_DOUBLE_EQ(u->day_usd, 0.25);
  EXPECT_DOUBLE_EQ(u->month_usd, 3);
  EXPECT_FALSE(parse_usage(array({bulk("inf"), integer(0), bulk("0"), bulk("0")})));
  EXPECT_FALSE(parse_usage(array({bulk("1x"), integer(0), bulk("0"), bulk("0")})));
  EXPECT_EQ(num(0.1), "0.10000000000000001");  // what Redis reads back is exactly the double
}

TEST(SharedWire, AReplysFailureIsClassified) {
  EXPECT_EQ(classify(array({})), SharedResult::kOk);
  resp::Value err;
  err.type = resp::Value::Type::kError;
  err.str = "NOSCRIPT";
  EXPECT_EQ(classify(RedisReply{err, ""}), SharedResult::kError);
  EXPECT_EQ(classify(RedisReply{std::nullopt, kRedisTimeout}), SharedResult::kTimeout);
  EXPECT_EQ(classify(RedisReply{std::nullopt, "connection refused"}), SharedResult::kUnavailable);
  EXPECT_EQ(random_id().size(), 16u);
}

}  // namespace
}  // namespace llmgate::gateway::shared_wire
