// The console's history: samples of the ranking and route events, read with
// a cursor, bounded in samples, bytes and events.
#include "gateway/observe/route_history.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "config/config.h"
#include "routing/routing_state.h"

namespace llmgate::gateway {
namespace {

using json = nlohmann::json;
using namespace std::chrono_literals;

std::shared_ptr<const config::Config> two_deployments() {
  return config::parse_config(R"(
routing: {defaults: {policy: latency}}
providers:
  - {name: a, base_url: "http://127.0.0.1:9001/v1"}
  - {name: b, base_url: "http://127.0.0.1:9002/v1"}
models:
  - name: m
    deployments: [{provider: a, model: x}, {provider: b, model: y}]
)",
                              "test.yaml");
}

routing::AttemptRecord answered(const std::string& id, routing::Clock::time_point t0,
                                std::chrono::milliseconds ttft) {
  routing::AttemptRecord r;
  r.deployment = id;
  r.outcome = routing::AttemptOutcome::kSuccess;
  r.request_sent = t0;
  r.first_token = t0 + ttft;
  return r;
}

TEST(RouteHistory, SamplesEachDeploymentsRankStateAndMeasurements) {
  auto cfg = two_deployments();
  routing::RoutingState state(*cfg);
  const auto t0 = routing::Clock::now();
  for (int i = 0; i < 5; ++i) {
    state.stats.record(answered("a/x", t0, 300ms), t0 + 1s);
    state.stats.record(answered("b/y", t0, 80ms), t0 + 1s);
  }
  RouteHistory h;
  h.sample(*cfg, state, t0 + 1s, 1'000);
  auto j = json::parse(h.json());
  EXPECT_EQ(j["interval_ms"], 2000);
  const auto& fields = j["fields"];
  auto col = [&](const char* name) {
    return std::find(fields.begin(), fields.end(), name) - fields.begin();
  };
  ASSERT_EQ(j["samples"].size(), 1u);
  EXPECT_EQ(j["samples"][0]["t"], 1000);
  const auto& rows = j["samples"][0]["models"]["m"];
  ASSERT_EQ(rows.size(), 2u);
  // The faster one ranks first under the latency policy.
  EXPECT_EQ(rows["b/y"][col("rank")], 1);
  EXPECT_EQ(rows["a/x"][col("rank")], 2);
  EXPECT_EQ(rows["a/x"][col("state")], "healthy");
  EXPECT_NEAR(rows["b/y"][col("ttft_p50")].get<double>(), 80, 5);
  EXPECT_NEAR(rows["a/x"][col("ttft_p50")].get<double>(), 300, 15);
  EXPECT_EQ(rows["a/x"][col("in_flight")], 0);
  EXPECT_TRUE(j["events"].empty());
}

TEST(RouteHistory, ACursorGivesOnlyWhatCameAfterIt) {
  auto cfg = two_deployments();
  routing::RoutingState state(*cfg);
  RouteHistory h;
  const auto now = routing::Clock::now();
  h.sample(*cfg, state, now, 1'000);
  RouteEvent e;
  e.unix_ms = 1'500;
  e.request_id = "r1";
  e.model = "m";
  e.outcome = "success";
  e.deployment = "b/y";
  e.failed = "a/x=upstream_status(500)";
  e.attempts = 2;
  e.ttft_ms = 81.25;
  h.record(e);
  auto first = json::parse(h.json());
  ASSERT_EQ(first["samples"].size(), 1u);
  ASSERT_EQ(first["events"].size(), 1u);
  EXPECT_EQ(first["events"][0]["failed"], "a/x=upstream_status(500)");
  EXPECT_EQ(first["events"][0]["deployment"], "b/y");
  EXPECT_EQ(first["events"][0]["ttft_ms"], 81.3);
  EXPECT_FALSE(first["events"][0].contains("hedge"));
  const auto cursor = first["cursor"].get<std::uint64_t>();

  auto nothing = json::parse(h.json(cursor));
  EXPECT_TRUE(nothing["samples"].empty());
  EXPECT_TRUE(nothing["events"].empty());
  EXPECT_EQ(nothing["cursor"], cursor);

  // An event stamped earlier than the last sample but added after it still
  // comes: the cursor orders by arrival, not by clock.
  h.sample(*cfg, state, now, 2'000);
  e.unix_ms = 1'900;
  e.request_id = "r2";
  e.deployment.clear();
  e.outcome = "error";
  h.record(e);
  auto next = json::parse(h.json(cursor));
  ASSERT_EQ(next["samples"].size(), 1u);
  EXPECT_EQ(next["samples"][0]["t"], 2000);
  ASSERT_EQ(next["events"].size(), 1u);
  EXPECT_EQ(next["events"][0]["request_id"], "r2");
  EXPECT_TRUE(next["events"][0]["deployment"].is_null());
  EXPECT_GT(next["cursor"].get<std::uint64_t>(), cursor);
}

TEST(RouteHistory, KeepsAtMostItsSamplesBytesAndEvents) {
  auto cfg = two_deployments();
  routing::RoutingState state(*cfg);
  const auto now = routing::Clock::now();
  RouteHistory by_count({std::chrono::milliseconds(1000), 3, 1u << 20, 2});
  for (int i = 1; i <= 10; ++i) {
    by_count.sample(*cfg, state, now, i * 1000);
    RouteEvent e;
    e.unix_ms = i * 1000;
    e.request_id = std::to_string(i);
    by_count.record(e);
  }
  auto j = json::parse(by_count.json());
  ASSERT_EQ(j["samples"].size(), 3u);
  EXPECT_EQ(j["samples"][0]["t"], 8000);  // the newest three
  ASSERT_EQ(j["events"].size(), 2u);
  EXPECT_EQ(j["events"][1]["request_id"], "10");

  // A byte bound smaller than one sample keeps the newest one.
  RouteHistory by_bytes({std::chrono::milliseconds(1000), 300, 10, 10});
  for (int i = 1; i <= 5; ++i) by_bytes.sample(*cfg, state, now, i * 1000);
  auto k = json::parse(by_bytes.json());
  ASSERT_EQ(k["samples"].size(), 1u);
  EXPECT_EQ(k["samples"][0]["t"], 5000);
}

}  // namespace
}  // namespace llmgate::gateway

namespace llmgate::gateway {
namespace {

// A race's row names the side that lost, and says when the race was a
// re-check (exploration, re-check, probe) rather than a hedge.
TEST(RouteHistory, ARaceNamesItsLoserAndWhetherItWasARecheck) {
  RouteHistory h;
  RouteEvent e;
  e.unix_ms = 1'500;
  e.request_id = "r1";
  e.model = "m";
  e.outcome = "success";
  e.deployment = "b/y";
  e.attempts = 2;
  e.hedge = "hedge-won";
  e.hedge_lost = "a/x";
  e.recheck = true;
  h.record(e);
  RouteEvent plain = e;
  plain.request_id = "r2";
  plain.hedge = "primary-won";
  plain.hedge_lost = "b/y";
  plain.recheck = false;
  h.record(plain);
  auto j = json::parse(h.json());
  ASSERT_EQ(j["events"].size(), 2u);
  EXPECT_EQ(j["events"][0]["hedge"], "hedge-won");
  EXPECT_EQ(j["events"][0]["hedge_lost"], "a/x");
  EXPECT_EQ(j["events"][0]["recheck"], true);
  EXPECT_EQ(j["events"][1]["hedge_lost"], "b/y");
  EXPECT_EQ(j["events"][1]["recheck"], false);
}

}  // namespace
}  // namespace llmgate::gateway
