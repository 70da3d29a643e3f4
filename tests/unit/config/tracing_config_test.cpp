// tracing: the OTEL_* variables as defaults, the file's keys over them.
#include <gtest/gtest.h>

#include "config/config.h"
#include "config_test_support.h"

namespace llmgate::config {
namespace {

using testing::config_error;
using testing::fake_env;
using testing::parse;

class TracingConfigTest : public ::testing::Test {
 protected:
  void SetUp() override { fake_env().clear(); }
};

TEST_F(TracingConfigTest, OffByDefault) {
  const Tracing t = parse("models: []\n")->tracing;
  EXPECT_FALSE(t.enabled());
  EXPECT_EQ(t.service_name, "llmgate");
  EXPECT_EQ(to_string(t.sampler), "parentbased_always_on");
}

TEST_F(TracingConfigTest, ReadsTheStandardVariables) {
  fake_env()["OTEL_EXPORTER_OTLP_ENDPOINT"] = "http://collector:4318";
  fake_env()["OTEL_SERVICE_NAME"] = "edge-gateway";
  fake_env()["OTEL_RESOURCE_ATTRIBUTES"] =
      "service.name=ignored, deployment.environment=prod,team=a%2Cb";
  fake_env()["OTEL_TRACES_SAMPLER"] = "parentbased_traceidratio";
  fake_env()["OTEL_TRACES_SAMPLER_ARG"] = "0.1";
  fake_env()["OTEL_EXPORTER_OTLP_HEADERS"] = "x-api-key=s3cret,x-team=llm";
  fake_env()["OTEL_EXPORTER_OTLP_TIMEOUT"] = "1500";
  fake_env()["OTEL_BSP_SCHEDULE_DELAY"] = "200";
  fake_env()["OTEL_BSP_MAX_QUEUE_SIZE"] = "100";
  fake_env()["OTEL_BSP_MAX_EXPORT_BATCH_SIZE"] = "50";
  const Tracing t = parse("models: []\n")->tracing;
  ASSERT_TRUE(t.enabled());
  EXPECT_EQ(t.endpoint.host, "collector");
  EXPECT_EQ(t.endpoint.port, 4318);
  EXPECT_EQ(t.endpoint.path_prefix, "/v1/traces");  // the signal path is appended to the base
  EXPECT_EQ(t.endpoint_source, "$OTEL_EXPORTER_OTLP_ENDPOINT");
  EXPECT_EQ(t.service_name, "edge-gateway");  // OTEL_SERVICE_NAME wins over the resource's
  ASSERT_EQ(t.resource.size(), 2u);
  EXPECT_EQ(t.resource[1], (std::pair<std::string, std::string>{"team", "a,b"}));
  EXPECT_EQ(to_string(t.sampler), "parentbased_traceidratio 0.1");
  ASSERT_EQ(t.headers.size(), 2u);
  EXPECT_EQ(t.headers[0].second, "s3cret");
  EXPECT_EQ(t.timeout, Duration{1500});
  EXPECT_EQ(t.schedule_delay, Duration{200});
  EXPECT_EQ(t.max_queue_size, 100u);
  EXPECT_EQ(t.max_export_batch_size, 50u);
}

TEST_F(TracingConfigTest, ATracesEndpointIsUsedAsGivenAndTheFileWins) {
  fake_env()["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"] = "https://otel.example:443/custom/traces";
  fake_env()["OTEL_EXPORTER_OTLP_ENDPOINT"] = "http://ignored:4318";
  Tracing t = parse("models: []\n")->tracing;
  EXPECT_TRUE(t.endpoint.tls);
  EXPECT_EQ(t.endpoint.path_prefix, "/custom/traces");
  fake_env()["TRACES_KEY"] = "k1";
  t = parse(R"(models: []
tracing:
  endpoint: http://local:4318
  service_name: from-file
  sampler: always_off
  headers: {x-api-key: {env: TRACES_KEY}}
  resource: {region: eu}
  max_queue_size: 10
  max_export_batch_size: 5
)")
          ->tracing;
  EXPECT_EQ(t.endpoint.host, "local");
  EXPECT_EQ(t.endpoint.path_prefix, "/v1/traces");  // no path in the file: the default one
  EXPECT_EQ(t.endpoint_source, "tracing.endpoint");
  EXPECT_EQ(t.service_name, "from-file");
  EXPECT_EQ(to_string(t.sampler), "always_off");
  ASSERT_EQ(t.headers.size(), 1u);
  EXPECT_EQ(t.headers[0].second, "k1");
  EXPECT_EQ(t.resource.back(), (std::pair<std::string, std::string>{"region", "eu"}));
}

TEST_F(TracingConfigTest, CanBeTurnedOffByTheStandardSwitches) {
  fake_env()["OTEL_EXPORTER_OTLP_ENDPOINT"] = "http://collector:4318";
  fake_env()["OTEL_SDK_DISABLED"] = "true";
  EXPECT_FALSE(parse("models: []\n")->tracing.enabled());
  fake_env().erase("OTEL_SDK_DISABLED");
  fake_env()["OTEL_TRACES_EXPORTER"] = "none";
  EXPECT_FALSE(parse("models: []\n")->tracing.enabled());
}

TEST_F(TracingConfigTest, RefusesWhatWouldNotWork) {
  fake_env()["OTEL_EXPORTER_OTLP_ENDPOINT"] = "http://collector:4317";
  fake_env()["OTEL_EXPORTER_OTLP_PROTOCOL"] = "grpc";
  EXPECT_NE(config_error("models: []\n").find("not gRPC"), std::string::npos);
  fake_env()["OTEL_EXPORTER_OTLP_PROTOCOL"] = "http/protobuf";  // a warning: JSON is sent
  const auto cfg = parse("models: []\n");
  ASSERT_EQ(cfg->warnings.size(), 1u);
  EXPECT_NE(cfg->warnings[0].find("JSON"), std::string::npos);
  fake_env().erase("OTEL_EXPORTER_OTLP_PROTOCOL");
  fake_env()["OTEL_TRACES_SAMPLER"] = "sometimes";
  EXPECT_NE(config_error("models: []\n").find("$OTEL_TRACES_SAMPLER: unknown sampler"),
            std::string::npos);
  fake_env().erase("OTEL_TRACES_SAMPLER");
  fake_env()["OTEL_BSP_MAX_QUEUE_SIZE"] = "lots";
  EXPECT_NE(config_error("models: []\n").find("$OTEL_BSP_MAX_QUEUE_SIZE"), std::string::npos);
  fake_env().clear();
  EXPECT_NE(config_error("tracing: {endpoint: \"ftp://x\"}\n").find("tracing.endpoint"),
            std::string::npos);
  EXPECT_NE(config_error("tracing: {endpoint: \"http://x\", max_queue_size: 4, "
                         "max_export_batch_size: 8}\n")
                .find("max_export_batch_size"),
            std::string::npos);
  EXPECT_NE(config_error("tracing: {sampler_arg: \"0.5\"}\n").find("sampler_arg needs sampler"),
            std::string::npos);
  EXPECT_NE(config_error("tracing: {sampler: traceidratio, sampler_arg: \"7\"}\n").find("0 to 1"),
            std::string::npos);
}

}  // namespace
}  // namespace llmgate::config
