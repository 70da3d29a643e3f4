// HTTPS upstreams: a real TLS handshake (tests/support/tls_relay) in front of
// a simulated provider, with the gateway verifying certificate and hostname.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "config/config.h"
#include "gateway/server/gateway.h"
#include "tests/support/http_client.h"
#include "tests/support/tls_relay.h"
#include "tools/sim/sim_server.h"

namespace llmgate {
namespace {

using testing::HttpClient;

class TlsUpstreamTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("llmgate-tls-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir_);
    if (!testing::make_self_signed_cert(dir_.string(), "localhost", cert_, key_)) {
      GTEST_SKIP() << "the openssl command is not available to make a test certificate";
    }
    sim::SimOptions o;
    o.profiles["m"].ttft = {sim::Distribution::Kind::kFixed, 2, 0};
    o.profiles["m"].tps = {sim::Distribution::Kind::kFixed, 5000, 0};
    o.profiles["m"].output_tokens_min = o.profiles["m"].output_tokens_max = 4;
    sim_ = std::make_unique<sim::SimServer>(o);
    sim_port_ = sim_->start();
    relay_ = std::make_unique<testing::TlsRelay>(cert_, key_, sim_port_);
    tls_port_ = relay_->start();
  }
  void TearDown() override {
    gw_.reset();
    relay_.reset();
    sim_.reset();
    std::filesystem::remove_all(dir_);
  }

  // Provider "secure" over TLS with `tls_yaml`, then a plain fallback
  // (in that order: the plain one is only a fallback).
  void start_gateway(const std::string& host, const std::string& tls_yaml) {
    std::string yaml = R"(
routing: {exploration: 0, defaults: {policy: ordered}}
server: {listeners: [{address: 127.0.0.1, port: 0}], workers: 1}
timeouts: {connect: 2s, ttft: 2s, idle: 2s, total: 10s}
providers:
  - name: secure
    base_url: "https://)" +
                       host + ":" + std::to_string(tls_port_) + R"(/v1"
    tls: )" + tls_yaml +
                       R"(
  - {name: plain, base_url: "http://127.0.0.1:)" +
                       std::to_string(sim_port_) + R"(/v1"}
models:
  - name: chat
    deployments: [{provider: secure, model: m}, {provider: plain, model: m}]
)";
    gw_ = std::make_unique<gateway::Gateway>(config::parse_config(yaml, "tls.yaml"));
    port_ = gw_->start().at(0);
  }

  std::string served_by() {
    HttpClient c(port_);
    auto r = c.request("POST", "/v1/chat/completions",
                       R"({"model":"chat","messages":[{"role":"user","content":"hi"}]})");
    EXPECT_EQ(r.status, 200) << r.body;
    return r.header("x-llmgate-deployment");
  }

  // Replaces the relay with one whose certificate names only the IP address
  // `ip` (a SAN of type IP); returns the certificate's file.
  std::string relay_with_ip_certificate(const std::string& ip) {
    const auto dir = dir_ / "ip";
    std::filesystem::create_directories(dir);
    std::string cert, key;
    EXPECT_TRUE(testing::make_self_signed_cert(dir.string(), ip, cert, key, "IP:" + ip));
    relay_ = std::make_unique<testing::TlsRelay>(cert, key, sim_port_);
    tls_port_ = relay_->start();
    return cert;
  }

  std::filesystem::path dir_;
  std::string cert_, key_;
  std::unique_ptr<sim::SimServer> sim_;
  std::unique_ptr<testing::TlsRelay> relay_;
  std::unique_ptr<gateway::Gateway> gw_;
  std::uint16_t sim_port_ = 0, tls_port_ = 0, port_ = 0;
};

TEST_F(TlsUpstreamTest, ServesOverHttpsWhenTheCertificateVerifies) {
  start_gateway("localhost", "{ca_file: \"" + cert_ + "\"}");
  EXPECT_EQ(served_by(), "secure/m");
  EXPECT_EQ(served_by(), "secure/m");  // and again, on a pooled TLS connection
  EXPECT_EQ(sim_->stats().requests, 2u);
  EXPECT_EQ(relay_->last_sni(), "localhost");
}

// The keep-alive race with a TLS provider: it ends an idle connection (TCP
// only, no close_notify: what most servers do) just as the gateway sends a
// request on it. Nothing came back, so the request goes again on a new
// connection to the same deployment, as over plain TCP -- not a failed
// attempt, a fallback, or an error for a model with one deployment.
TEST_F(TlsUpstreamTest, AKeptAliveConnectionEndedAsARequestArrivesIsRetriedOnANewOne) {
  start_gateway("localhost", "{ca_file: \"" + cert_ + "\"}");
  EXPECT_EQ(served_by(), "secure/m");
  relay_->drop_next_reused_request();
  EXPECT_EQ(served_by(), "secure/m");
  EXPECT_EQ(relay_->dropped(), 1);        // it was sent on the kept connection
  EXPECT_EQ(sim_->stats().requests, 2u);  // the dropped request never reached it
  EXPECT_EQ(sim_->stats().connections_accepted, 2u);
  EXPECT_EQ(gw_->stats().get("secure/m")->last_outcome, routing::AttemptOutcome::kSuccess);
}

TEST_F(TlsUpstreamTest, SendsNoServerNameForAnIpAddressYetVerifiesIt) {
  // RFC 6066 §3: a literal IP address is not a server name. The certificate
  // is still checked, against its IP SAN.
  const std::string cert = relay_with_ip_certificate("127.0.0.1");
  start_gateway("127.0.0.1", "{ca_file: \"" + cert + "\"}");
  EXPECT_EQ(served_by(), "secure/m");
  EXPECT_EQ(relay_->last_sni(), "");
}

TEST_F(TlsUpstreamTest, RejectsAnIpCertificateForAnotherAddress) {
  const std::string cert = relay_with_ip_certificate("10.9.9.9");
  start_gateway("127.0.0.1", "{ca_file: \"" + cert + "\"}");
  EXPECT_EQ(served_by(), "plain/m");
}

TEST_F(TlsUpstreamTest, RejectsAnUntrustedCertificateAndFailsOver) {
  start_gateway("localhost", "{verify: true}");  // system store: our cert is unknown
  EXPECT_EQ(served_by(), "plain/m");
  auto s = gw_->stats().get("secure/m");
  ASSERT_TRUE(s);
  EXPECT_EQ(s->last_outcome, routing::AttemptOutcome::kConnectError);
}

TEST_F(TlsUpstreamTest, RejectsACertificateForAnotherHostAndFailsOver) {
  // Trusted certificate, but issued for "localhost", not "127.0.0.1".
  start_gateway("127.0.0.1", "{ca_file: \"" + cert_ + "\"}");
  EXPECT_EQ(served_by(), "plain/m");
  EXPECT_EQ(gw_->stats().get("secure/m")->last_outcome, routing::AttemptOutcome::kConnectError);
}

TEST_F(TlsUpstreamTest, SniOverrideNamesTheHostToVerify) {
  start_gateway("127.0.0.1", "{ca_file: \"" + cert_ + "\", sni: localhost}");
  EXPECT_EQ(served_by(), "secure/m");
}

TEST_F(TlsUpstreamTest, VerificationCanBeTurnedOff) {
  start_gateway("localhost", "{verify: false}");
  EXPECT_EQ(served_by(), "secure/m");
}

}  // namespace
}  // namespace llmgate
