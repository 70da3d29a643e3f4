// The simulator's stored responses: read, listed, deleted, and a background
// one queued, running, then finished or cancelled.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "tools/sim/sim_openai_apis.h"

namespace llmgate::sim {
namespace {

using json = nlohmann::json;
using Clock = ResponseStore::Clock;

const std::string kBody =
    R"({"id":"resp_1","object":"response","status":"completed","output":[{"type":"message"}],)"
    R"("usage":{"output_tokens":3}})";

TEST(SimResponseStore, AStoredResponseIsReadListedAndDeleted) {
  ResponseStore store;
  const auto now = Clock::now();
  const ResponsesOptions o = responses_options(R"({"model":"m","input":"hello"})");
  EXPECT_TRUE(o.store);
  EXPECT_FALSE(o.background);
  store.put("resp_1", {kBody, o.input_items, now, false});
  auto got = store.answer("GET", "resp_1", "", false, now);
  EXPECT_EQ(got.status, 200);
  EXPECT_EQ(json::parse(got.body)["status"], "completed");
  auto items = json::parse(store.answer("GET", "resp_1", "/input_items", false, now).body);
  ASSERT_EQ(items["data"].size(), 1u);
  EXPECT_EQ(items["data"][0]["content"][0]["text"], "hello");
  EXPECT_EQ(items["first_id"], items["data"][0]["id"]);
  auto replay = store.answer("GET", "resp_1", "", true, now);
  EXPECT_TRUE(replay.event_stream);
  EXPECT_EQ(replay.body.rfind("event: response.created\n", 0), 0u);
  EXPECT_NE(replay.body.find("event: response.completed\n"), std::string::npos);
  EXPECT_EQ(store.answer("POST", "resp_1", "/cancel", false, now).status, 400);
  EXPECT_EQ(json::parse(store.answer("DELETE", "resp_1", "", false, now).body)["deleted"], true);
  auto gone = store.answer("GET", "resp_1", "", false, now);
  EXPECT_EQ(gone.status, 404);
  EXPECT_EQ(json::parse(gone.body)["error"]["type"], "invalid_request_error");
}

TEST(SimResponseStore, ABackgroundResponseRunsUntilItIsReadyOrCancelled) {
  ResponseStore store;
  const auto now = Clock::now();
  const ResponsesOptions o = responses_options(R"({"input":"x","background":true,"store":true})");
  EXPECT_TRUE(o.background);
  EXPECT_EQ(json::parse(queued_response(kBody))["status"], "queued");
  store.put("resp_1", {kBody, o.input_items, now + std::chrono::seconds(1), true});
  store.put("resp_2", {kBody, o.input_items, now + std::chrono::seconds(1), true});
  auto running = json::parse(store.answer("GET", "resp_1", "", false, now).body);
  EXPECT_EQ(running["status"], "in_progress");
  EXPECT_TRUE(running["output"].empty());
  auto done =
      json::parse(store.answer("GET", "resp_1", "", false, now + std::chrono::seconds(1)).body);
  EXPECT_EQ(done["status"], "completed");
  EXPECT_EQ(done["background"], true);
  EXPECT_EQ(json::parse(store.answer("POST", "resp_2", "/cancel", false, now).body)["status"],
            "cancelled");
  // Cancelled for good, even once its time has passed.
  EXPECT_EQ(
      json::parse(
          store.answer("GET", "resp_2", "", false, now + std::chrono::hours(1)).body)["status"],
      "cancelled");
}

TEST(SimResponseStore, TheOldestGoPastTheCapacity) {
  ResponseStore store;
  const auto now = Clock::now();
  for (std::size_t i = 0; i <= ResponseStore::kCapacity; ++i)
    store.put("r" + std::to_string(i), {kBody, "[]", now, false});
  EXPECT_EQ(store.answer("GET", "r0", "", false, now).status, 404);
  EXPECT_EQ(store.answer("GET", "r1", "", false, now).status, 200);
}

}  // namespace
}  // namespace llmgate::sim
