// The per-snapshot metric series: resolved once per config and indexed by
// the config's own models and deployments, so each event lands on the series
// labelled with its model and deployment, and a model of another config
// (an older snapshot) touches nothing.
#include "gateway/observe/metrics.h"

#include <gtest/gtest.h>

#include <string>

#include "config/config.h"
#include "routing/routing_state.h"

namespace llmgate::gateway {
namespace {

std::shared_ptr<const config::Config> make_cfg() {
  return config::parse_config(R"(
providers:
  - name: p
    base_url: http://127.0.0.1:9/v1
  - name: q
    base_url: http://127.0.0.1:10/v1
models:
  - name: chat
    deployments:
      - {provider: p, model: m, max_concurrent: 4}
      - {provider: q, model: m}
  - name: other
    deployments:
      - {provider: q, model: o, operations: [chat, responses]}
)");
}

// The value of the sample line that starts with `series` ("name{labels}").
std::string sample(const std::string& text, const std::string& series) {
  const auto at = text.find("\n" + series + " ");
  if (at == std::string::npos) return "<absent>";
  const auto start = at + 1 + series.size() + 1;
  return text.substr(start, text.find('\n', start) - start);
}

class MetricsTest : public ::testing::Test {
 protected:
  std::shared_ptr<const config::Config> cfg = make_cfg();
  routing::RoutingState state{*cfg};
  MetricsRegistry registry;
  Metrics metrics{registry, *cfg};

  const config::Model& chat() const { return cfg->models[0]; }
  const config::Model& other() const { return cfg->models[1]; }
  std::string scrape() { return registry.scrape(*cfg, state); }
};

TEST_F(MetricsTest, RequestsAndLatenciesAreCountedPerOperation) {
  routing::AttemptRecord rec;
  rec.deployment = other().deployments[0].id();
  rec.outcome = routing::AttemptOutcome::kSuccess;
  rec.request_sent = routing::Clock::now();
  rec.first_token = rec.request_sent + std::chrono::milliseconds(20);
  rec.output_tokens = 7;
  metrics.on_attempt(other(), other().deployments[0], rec, config::Operation::kResponses);
  metrics.on_request(other(), RequestOutcome::kSuccess, config::Operation::kResponses);
  const std::string text = scrape();
  EXPECT_EQ(sample(text,
                   "llmgate_requests_total{gen_ai_operation_name=\"responses\",model=\"other\","
                   "outcome=\"success\"}"),
            "1");
  EXPECT_EQ(sample(text,
                   "llmgate_requests_total{gen_ai_operation_name=\"chat\",model=\"other\","
                   "outcome=\"success\"}"),
            "0");
  const std::string ttft = "gen_ai_server_time_to_first_token_seconds_count{deployment=\"" +
                           rec.deployment + "\",gen_ai_operation_name=\"";
  EXPECT_EQ(
      sample(text, ttft + "responses\",gen_ai_provider_name=\"q\",gen_ai_request_model=\"other\"}"),
      "1");
  EXPECT_EQ(
      sample(text, ttft + "chat\",gen_ai_provider_name=\"q\",gen_ai_request_model=\"other\"}"),
      "0");
  // No series for an operation the deployment does not serve.
  EXPECT_EQ(
      sample(text,
             ttft + "embeddings\",gen_ai_provider_name=\"q\",gen_ai_request_model=\"other\"}"),
      "<absent>");
  EXPECT_EQ(sample(text,
                   "gen_ai_client_token_usage_count{gen_ai_operation_name=\"responses\","
                   "gen_ai_request_model=\"other\",gen_ai_token_type=\"output\"}"),
            "1");
}

TEST_F(MetricsTest, AnAttemptCountsOnItsDeploymentAndOutcome) {
  routing::AttemptRecord rec;
  rec.deployment = chat().deployments[1].id();
  rec.outcome = routing::AttemptOutcome::kTtftTimeout;
  metrics.on_attempt(chat(), chat().deployments[1], rec);
  metrics.on_attempt(chat(), chat().deployments[1], rec);
  const std::string text = scrape();
  const std::string q = chat().deployments[1].id();
  const std::string p = chat().deployments[0].id();
  EXPECT_EQ(sample(text, "llmgate_upstream_attempts_total{deployment=\"" + q +
                             "\",outcome=\"ttft_timeout\"}"),
            "2");
  EXPECT_EQ(sample(text, "llmgate_upstream_attempts_total{deployment=\"" + p +
                             "\",outcome=\"ttft_timeout\"}"),
            "0");
}

TEST_F(MetricsTest, RequestsRoutesAndSaturationLandOnTheirModelAndDeployment) {
  metrics.on_request(other(), RequestOutcome::kSuccess);
  metrics.on_route(chat(), chat().deployments[0], config::Policy::kCost);
  metrics.on_saturated(chat(), chat().deployments[0], Saturation::kQueueFull);
  const std::string text = scrape();
  const std::string p = chat().deployments[0].id();
  EXPECT_EQ(sample(text,
                   "llmgate_requests_total{gen_ai_operation_name=\"chat\",model=\"other\",outcome="
                   "\"success\"}"),
            "1");
  EXPECT_EQ(sample(text,
                   "llmgate_requests_total{gen_ai_operation_name=\"chat\",model=\"chat\",outcome="
                   "\"success\"}"),
            "0");
  EXPECT_EQ(sample(text, "llmgate_route_decisions_total{deployment=\"" + p +
                             "\",model=\"chat\",policy=\"cost\"}"),
            "1");
  EXPECT_EQ(sample(text, "llmgate_deployment_saturated_total{deployment=\"" + p +
                             "\",reason=\"queue_full\"}"),
            "1");
}

TEST_F(MetricsTest, AModelOfAnotherConfigTouchesNothing) {
  const auto older = make_cfg();  // same names, other objects: another snapshot's config
  metrics.on_request(older->models[0], RequestOutcome::kSuccess);
  routing::AttemptRecord rec;
  rec.outcome = routing::AttemptOutcome::kSuccess;
  metrics.on_attempt(older->models[0], older->models[0].deployments[0], rec);
  const std::string text = scrape();
  EXPECT_EQ(sample(text,
                   "llmgate_requests_total{gen_ai_operation_name=\"chat\",model=\"chat\",outcome="
                   "\"success\"}"),
            "0");
}

}  // namespace
}  // namespace llmgate::gateway
