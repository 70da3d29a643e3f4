// Lifecycle: graceful drain, hot reload under traffic, rejected reloads, the
// admin listener. The gateway and simulated providers run in-process on
// loopback port 0; real HTTP clients drive them. Behaviour only, no timings.
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "config/config.h"
#include "gateway/server/gateway.h"
#include "tests/support/http_client.h"
#include "tests/support/metrics_text.h"
#include "tools/sim/sim_server.h"

namespace llmgate {
namespace {

using testing::eventually;
using testing::HttpClient;
using json = nlohmann::json;

sim::Profile profile(int tokens, double tps) {
  sim::Profile p;
  p.ttft = {sim::Distribution::Kind::kFixed, 2, 0};
  p.tps = {sim::Distribution::Kind::kFixed, tps, 0};
  p.output_tokens_min = p.output_tokens_max = tokens;
  return p;
}

std::string chat_body(const std::string& model, bool stream) {
  return R"({"model":")" + model + R"(","messages":[{"role":"user","content":"hi"}],"stream":)" +
         (stream ? "true" : "false") + "}";
}

using testing::metric_value;

class LifecycleTest : public ::testing::Test {
 protected:
  void SetUp() override {
    setenv("LLMGATE_TEST_KEY", "key", 1);
    sim_a_ = start_sim("a-model", profile(5, 5000));
    sim_b_ = start_sim("b-model", profile(5, 5000));
  }
  void TearDown() override {
    gw_.reset();
    sim_a_.reset();
    sim_b_.reset();
  }

  static std::unique_ptr<sim::SimServer> start_sim(const std::string& model,
                                                   const sim::Profile& p) {
    sim::SimOptions o;
    o.api_key = "key";
    o.profiles[model] = p;
    auto s = std::make_unique<sim::SimServer>(o);
    s->start();
    return s;
  }

  // One model "chat" on provider "p", pointed at sim A or B; `extra` adds YAML
  // under the model list; `server_extra` under server.
  std::string yaml(bool on_b, const std::string& price = "1", const std::string& extra = "",
                   const std::string& server_extra = "") const {
    const auto port = on_b ? sim_b_->port() : sim_a_->port();
    return R"(
routing: {exploration: 0, defaults: {policy: ordered}}
server:
  listeners: [{address: 127.0.0.1, port: 0}]
  admin_listener: {address: 127.0.0.1, port: 0}
  workers: 2
)" + server_extra +
           R"(
timeouts: {connect: 1s, ttft: 2s, idle: 2s, total: 20s}
providers:
  - {name: p, base_url: "http://127.0.0.1:)" +
           std::to_string(port) + R"(/v1", api_key_env: LLMGATE_TEST_KEY}
models:
  - name: chat
    deployments:
      - {provider: p, model: )" +
           (on_b ? "b-model" : "a-model") + ", price: {input_per_1m: " + price +
           R"(, output_per_1m: 2}}
)" + extra;
  }

  void start(const std::string& text) {
    gw_ = std::make_unique<gateway::Gateway>(config::parse_config(text, "test.yaml"));
    port_ = gw_->start().at(0);
    admin_ = gw_->admin_port().value();
  }

  std::string scrape() {
    HttpClient c(admin_);
    return c.request("GET", "/metrics").body;
  }

  std::unique_ptr<sim::SimServer> sim_a_, sim_b_;
  std::unique_ptr<gateway::Gateway> gw_;
  std::uint16_t port_ = 0, admin_ = 0;
};

TEST_F(LifecycleTest, DrainLetsAStreamInFlightFinishAndStopsTakingNewConnections) {
  sim_a_->set_profile("a-model", profile(40, 40));  // about a second of output
  start(yaml(false, "1", "", "  drain: {delay: 0s, timeout: 20s}\n"));
  HttpClient stream(port_);
  auto head = stream.start("POST", "/v1/chat/completions", chat_body("chat", true));
  ASSERT_EQ(head.status, 200);
  ASSERT_TRUE(stream.next_event().has_value());  // the stream is under way

  std::atomic<bool> drained{false}, clean{false};
  std::thread drainer([&] {
    clean = gw_->drain();
    drained = true;
  });
  ASSERT_TRUE(eventually([&] { return gw_->draining(); }));
  // Readiness is off at once; the stream goes on to its end.
  EXPECT_FALSE(gw_->ready());
  auto events = stream.rest_of_events();
  ASSERT_FALSE(events.empty());
  EXPECT_EQ(events.back(), "[DONE]");
  drainer.join();
  EXPECT_TRUE(clean.load());
  EXPECT_EQ(gw_->open_api_connections(), 0u);
  // The listener is closed: a new client cannot get an answer.
  EXPECT_THROW(
      {
        HttpClient late(port_, std::chrono::milliseconds(500));
        late.request("GET", "/v1/models");
      },
      std::exception);
}

TEST_F(LifecycleTest, AStreamStillRunningAtTheDrainTimeoutEndsWithAnErrorEventNotACut) {
  sim_a_->set_profile("a-model", profile(400, 40));  // ten seconds of output
  start(yaml(false, "1", "", "  drain: {delay: 0s, timeout: 300ms}\n"));
  HttpClient stream(port_);
  auto head = stream.start("POST", "/v1/chat/completions", chat_body("chat", true));
  ASSERT_EQ(head.status, 200);
  ASSERT_TRUE(stream.next_event().has_value());
  std::thread drainer([&] { EXPECT_FALSE(gw_->drain()); });
  auto events = stream.rest_of_events();
  drainer.join();
  ASSERT_FALSE(events.empty());
  for (const auto& e : events) EXPECT_NE(e, "[DONE]");
  auto j = json::parse(events.back());
  EXPECT_EQ(j["error"]["code"], "gateway_shutdown") << events.back();
  // The chunked body ended cleanly after the error: not a cut connection.
  EXPECT_NE(stream.raw_body().find("gateway_shutdown"), std::string::npos);
}

TEST_F(LifecycleTest, DrainClosesIdleKeepAliveConnectionsAndAnswersWithConnectionClose) {
  start(yaml(false, "1", "", "  drain: {delay: 300ms, timeout: 20s}\n"));
  HttpClient idle(port_);
  ASSERT_EQ(idle.request("GET", "/v1/models").status, 200);
  ASSERT_TRUE(idle.connection_open());
  std::thread drainer([&] { gw_->drain(); });
  ASSERT_TRUE(eventually([&] { return gw_->draining(); }));
  // During the delay: still served, but told to go elsewhere next time.
  HttpClient during(port_);
  auto r = during.request("POST", "/v1/chat/completions", chat_body("chat", false));
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.header("connection"), "close");
  {
    HttpClient readyz(admin_);
    EXPECT_EQ(readyz.request("GET", "/readyz").status, 503);
  }
  drainer.join();
  EXPECT_FALSE(idle.connection_open());
  EXPECT_EQ(gw_->open_api_connections(), 0u);
}

TEST_F(LifecycleTest, ReloadUnderContinuousTrafficFailsNoRequest) {
  start(yaml(false));
  std::atomic<bool> stop{false};
  std::atomic<int> ok{0}, failed{0};
  std::vector<std::thread> clients;
  for (int t = 0; t < 3; ++t) {
    clients.emplace_back([&, t] {
      HttpClient c(port_);
      for (int i = 0; !stop.load(); ++i) {
        bool stream = (i + t) % 2 == 0;
        auto r = stream ? c.start("POST", "/v1/chat/completions", chat_body("chat", true))
                        : c.request("POST", "/v1/chat/completions", chat_body("chat", false));
        bool good = r.status == 200;
        if (good && stream) {
          auto ev = c.rest_of_events();
          good = !ev.empty() && ev.back() == "[DONE]";
        }
        (good ? ok : failed)++;
      }
    });
  }
  ASSERT_TRUE(eventually([&] { return ok.load() >= 20; }));
  // Alternate prices, add and remove a model, and move the provider between
  // upstreams: every request must still be answered in full.
  for (int i = 0; i < 12; ++i) {
    const int before = ok.load();
    std::string extra =
        i % 3 == 0 ? "  - name: other\n    deployments: [{provider: p, model: a-model}]\n" : "";
    std::string err;
    ASSERT_TRUE(gw_->reload(
        config::parse_config(yaml(i % 4 >= 2, std::to_string(i + 1), extra), "r.yaml"), &err))
        << err;
    ASSERT_TRUE(eventually([&] { return ok.load() >= before + 3; }));
  }
  stop = true;
  for (auto& c : clients) c.join();
  EXPECT_EQ(failed.load(), 0);
  EXPECT_GE(ok.load(), 50);
  EXPECT_EQ(gw_->config_generation(), 13u);
  EXPECT_EQ(metric_value(scrape(), "llmgate_config_reloads_total", "result=\"success\""), 12);
}

TEST_F(LifecycleTest, LiveStatisticsSurviveAReloadForUnchangedDeploymentsOnly) {
  start(yaml(false));
  HttpClient c(port_);
  for (int i = 0; i < 5; ++i)
    ASSERT_EQ(c.request("POST", "/v1/chat/completions", chat_body("chat", false)).status, 200);
  const auto samples = [&] { return gw_->stats().get_or_prior("p/a-model").ttft_samples; };
  ASSERT_EQ(samples(), 5u);
  // A price change leaves the deployment as it was measured.
  ASSERT_TRUE(gw_->reload(config::parse_config(yaml(false, "7"), "r.yaml")));
  EXPECT_EQ(samples(), 5u);
  ASSERT_EQ(c.request("POST", "/v1/chat/completions", chat_body("chat", false)).status, 200);
  EXPECT_EQ(samples(), 6u);
  // Pointing the provider at another upstream is another deployment in all
  // but name: what was measured no longer applies.
  std::string moved = yaml(false, "7");
  const std::string from = "127.0.0.1:" + std::to_string(sim_a_->port());
  moved.replace(moved.find(from), from.size(), "127.0.0.1:" + std::to_string(sim_b_->port()));
  sim_b_->set_profile("a-model", profile(5, 5000));
  ASSERT_TRUE(gw_->reload(config::parse_config(moved, "r.yaml")));
  EXPECT_EQ(samples(), 0u);
  const auto b_before = sim_b_->stats().requests;
  ASSERT_EQ(c.request("POST", "/v1/chat/completions", chat_body("chat", false)).status, 200);
  EXPECT_EQ(sim_b_->stats().requests, b_before + 1);  // the new upstream served it
}

TEST_F(LifecycleTest, ABadConfigIsRejectedTheOldOneStaysAndItIsCounted) {
  start(yaml(false));
  char path[] = "/tmp/llmgate-reload-XXXXXX";
  int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  close(fd);
  {
    std::ofstream f(path);
    f << yaml(false) << "\nunknown_section: 1\n";
  }
  std::string err;
  EXPECT_FALSE(gw_->reload_from_file(path, &err));
  EXPECT_NE(err.find("unknown key \"unknown_section\""), std::string::npos) << err;
  {
    std::ofstream f(path);
    f << "models: [";  // not even YAML
  }
  EXPECT_FALSE(gw_->reload_from_file(path, &err));
  std::remove(path);
  EXPECT_EQ(gw_->config_generation(), 1u);
  HttpClient c(port_);
  EXPECT_EQ(c.request("POST", "/v1/chat/completions", chat_body("chat", false)).status, 200);
  auto m = scrape();
  EXPECT_EQ(metric_value(m, "llmgate_config_reloads_total", "result=\"failure\""), 2);
  EXPECT_EQ(metric_value(m, "llmgate_config_last_reload_successful"), 0);
  // A good one afterwards clears the flag.
  ASSERT_TRUE(gw_->reload(config::parse_config(yaml(false, "3"), "r.yaml")));
  EXPECT_EQ(metric_value(scrape(), "llmgate_config_last_reload_successful"), 1);
}

TEST_F(LifecycleTest, TheAdminListenerServesProbesAndMetricsButNotTheApi) {
  start(yaml(false));
  HttpClient admin(admin_);
  EXPECT_EQ(admin.request("GET", "/healthz").status, 200);
  EXPECT_EQ(admin.request("GET", "/readyz").status, 200);
  EXPECT_EQ(admin.request("GET", "/admin/routes").status, 200);
  auto m = admin.request("GET", "/metrics");
  EXPECT_EQ(m.status, 200);
  EXPECT_NE(m.body.find("llmgate_build_info"), std::string::npos);
  auto api = admin.request("POST", "/v1/chat/completions", chat_body("chat", false));
  EXPECT_EQ(api.status, 404);
  EXPECT_EQ(json::parse(api.body)["error"]["code"], "unknown_url");
  HttpClient main(port_);
  EXPECT_EQ(main.request("POST", "/v1/chat/completions", chat_body("chat", false)).status, 200);
}

TEST_F(LifecycleTest, RouterGaugesFollowTheConfigAcrossReloads) {
  start(yaml(false, "1", "  - name: other\n    deployments: [{provider: p, model: x-model}]\n"));
  auto m = scrape();
  EXPECT_NE(m.find("llmgate_router_rank{deployment=\"p/x-model\",model=\"other\"}"),
            std::string::npos);
  EXPECT_EQ(metric_value(m, "llmgate_router_rank", "deployment=\"p/a-model\",model=\"chat\""), 1);
  ASSERT_TRUE(gw_->reload(config::parse_config(yaml(false), "r.yaml")));
  m = scrape();
  // The removed deployment's router beliefs are gone; the counters stay.
  EXPECT_EQ(m.find("llmgate_router_rank{deployment=\"p/x-model\""), std::string::npos);
  EXPECT_EQ(m.find("llmgate_router_ttft_estimate_seconds{deployment=\"p/x-model\""),
            std::string::npos);
  EXPECT_NE(m.find("llmgate_router_ttft_estimate_seconds{deployment=\"p/a-model\"}"),
            std::string::npos);
}

}  // namespace
}  // namespace llmgate
