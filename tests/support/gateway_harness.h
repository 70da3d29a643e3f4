// The gateway under test for the conformance and security suites: the real
// gateway in-process on loopback, with a faulty or scripted upstream as
// deployment "bad/m" routed before a healthy simulated provider "good/m",
// and raw client sockets for what HttpClient will not do. Header-only: two
// suites include it.
#pragma once

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <ctime>
#include <filesystem>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "config/config.h"
#include "gateway/server/gateway.h"
#include "tests/support/http_client.h"
#include "tests/support/metrics_text.h"
#include "tests/support/ports.h"
#include "tests/support/scripted_upstream.h"
#include "tests/support/sim_profiles.h"
#include "tests/support/tls_relay.h"
#include "tools/sim/sim_server.h"

namespace llmgate::testing {

using K = Step::Kind;

// A raw client socket, for what HttpClient will not do (HTTP/1.0, slowloris).
class RawClient {
 public:
  // `rcvbuf`: a small receive buffer (set before connecting), for slow readers.
  explicit RawClient(std::uint16_t port, int rcvbuf = 0) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    if (rcvbuf > 0) ::setsockopt(fd_, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof rcvbuf);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
      ::close(fd_);
      fd_ = -1;
    }
    timeval tv{10, 0};
    ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  }
  ~RawClient() { close(); }
  bool connected() const { return fd_ >= 0; }
  bool send(const std::string& s) {
    return ::send(fd_, s.data(), s.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(s.size());
  }
  // Everything until the server closes (or the 10 s receive timeout; then
  // eof() is false).
  std::string read_all() {
    std::string out;
    char buf[4096];
    for (;;) {
      ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
      if (n <= 0) {
        eof_ = n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK);
        break;
      }
      out.append(buf, static_cast<std::size_t>(n));
    }
    return out;
  }
  bool eof() const { return eof_; }
  // What one read returns ("" if the server closed).
  std::string read_some() {
    char buf[4096];
    ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
    return n > 0 ? std::string(buf, static_cast<std::size_t>(n)) : std::string();
  }
  // True once the server has closed the connection (EOF or reset).
  bool closed_by_server() {
    char c;
    ssize_t n = ::recv(fd_, &c, 1, MSG_DONTWAIT | MSG_PEEK);
    return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK);
  }
  void close() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

 private:
  int fd_ = -1;
  bool eof_ = false;
};

// A port that accepts nothing: a listener whose accept queue is full, so the
// kernel drops further SYNs and a connect hangs until its deadline — an
// unreachable host, on loopback.
class Blackhole {
 public:
  Blackhole() {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    port_ = bind_loopback(fd_);
    ::listen(fd_, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons(port_);
    for (int i = 0; i < 4; ++i) {
      int c = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
      ::connect(c, reinterpret_cast<sockaddr*>(&a), sizeof a);
      fillers_.push_back(c);
    }
  }
  ~Blackhole() {
    for (int c : fillers_) ::close(c);
    ::close(fd_);
  }
  std::uint16_t port() const { return port_; }

 private:
  int fd_;
  std::uint16_t port_ = 0;
  std::vector<int> fillers_;
};

inline std::string chat_body(bool stream, const std::string& extra = "") {
  return std::string(R"({"model":"chat","messages":[{"role":"user","content":"hi"}],"stream":)") +
         (stream ? "true" : "false") + extra + "}";
}

inline std::string http_date_in(std::chrono::seconds from_now) {
  std::time_t t = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now() + from_now);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[64];
  std::strftime(buf, sizeof buf, "%a, %d %b %Y %H:%M:%S GMT", &tm);
  return buf;
}

// How the "bad" deployment's upstream is reached.
enum class Target { kScript, kRefused, kBlackhole, kTlsToPlain, kTlsWrongHost };

// The gateway under test, with "bad/m" (the fault) before "good/m" (a sim).
class Harness {
 public:
  // Keys of the generated config (for tests that reload variants of it).
  const std::string& yaml() const { return yaml_; }
  // `limits_extra`: keys added to server.limits (", max_connections: 2");
  // `server_extra`: lines added to server: ("\n  admin_listener: {...}");
  // `bad_extra`: keys added to the
  // bad/m deployment (", max_concurrent: 1"); `extra_yaml`: appended after the
  // models list (more model entries, or top-level sections such as auth:).
  Harness(Target target, const Script& script, const std::string& limits_extra = "",
          const std::string& bad_extra = "", const std::string& extra_yaml = "",
          const std::string& bad_provider_extra = "", const std::string& server_extra = "") {
    setenv("LLMGATE_CONFORMANCE_KEY", "key", 1);
    sim::SimOptions o;
    o.api_key = "key";
    o.profiles["m"] = quick_profile();
    good_ = std::make_unique<sim::SimServer>(o);
    good_->start();
    std::string bad_url, bad_tls;
    switch (target) {
      case Target::kScript:
        upstream_ = std::make_unique<ScriptedUpstream>(script);
        bad_url = "http://127.0.0.1:" + std::to_string(upstream_->start()) + "/v1";
        break;
      case Target::kRefused:
        refused_ = std::make_unique<RefusedPort>();
        bad_url = "http://127.0.0.1:" + std::to_string(refused_->port()) + "/v1";
        break;
      case Target::kBlackhole:
        blackhole_ = std::make_unique<Blackhole>();
        bad_url = "http://127.0.0.1:" + std::to_string(blackhole_->port()) + "/v1";
        break;
      case Target::kTlsToPlain:
        // A plain-HTTP server answers the TLS ClientHello.
        upstream_ = std::make_unique<ScriptedUpstream>(
            Script{{K::kSend, status_response(400)}, {K::kClose}}, /*read_request=*/false);
        bad_url = "https://127.0.0.1:" + std::to_string(upstream_->start()) + "/v1";
        break;
      case Target::kTlsWrongHost: {
        char dir[] = "/tmp/llmgate-conf-XXXXXX";
        tls_dir_ = mkdtemp(dir);
        std::string cert, key;
        if (!make_self_signed_cert(tls_dir_, "other.example", cert, key)) {
          throw std::runtime_error("openssl could not make a certificate");
        }
        relay_ = std::make_unique<TlsRelay>(cert, key, good_->port());
        bad_url = "https://127.0.0.1:" + std::to_string(relay_->start()) + "/v1";
        bad_tls = ", tls: {ca_file: \"" + cert + "\", sni: upstream.example}";
        break;
      }
    }
    yaml_ = R"(
routing: {exploration: 0, defaults: {policy: ordered}}
server:
  listeners: [{address: 127.0.0.1, port: 0}]
  workers: 1
  limits: {max_event_size: 64KiB, client_header_timeout: 1s, max_header_size: 8KiB, max_body_size: 64KiB)" +
            limits_extra + R"(})" + server_extra + R"(
timeouts: {connect: 300ms, ttft: 600ms, idle: 600ms, total: 3s}
providers:
  - {name: bad, base_url: ")" +
            bad_url + R"(", api_key_env: LLMGATE_CONFORMANCE_KEY)" + bad_tls + bad_provider_extra +
            R"(}
  - {name: good, base_url: "http://127.0.0.1:)" +
            std::to_string(good_->port()) +
            R"(/v1", api_key_env: LLMGATE_CONFORMANCE_KEY}
models:
  - name: chat
    deployments: [{provider: bad, model: m)" +
            bad_extra + R"(}, {provider: good, model: m}]
)" + extra_yaml;
    gw_ = std::make_unique<gateway::Gateway>(config::parse_config(yaml_, "conformance.yaml"));
    port_ = gw_->start().at(0);
  }
  ~Harness() {
    gw_.reset();
    relay_.reset();
    upstream_.reset();
    if (!tls_dir_.empty()) std::filesystem::remove_all(tls_dir_);
  }

  std::uint16_t port() const { return port_; }
  gateway::Gateway& gateway() { return *gw_; }
  ScriptedUpstream* upstream() { return upstream_.get(); }
  sim::SimServer& good() { return *good_; }
  std::string metrics() {
    HttpClient c(port_);
    return c.request("GET", "/metrics").body;
  }

  // Nothing crashed, nothing leaked: the gateway answers, every client and
  // upstream connection it had is closed, nothing is counted in flight.
  void expect_quiescent() {
    EXPECT_TRUE(eventually([&] {
      HttpClient probe(port_);
      return probe.request("GET", "/healthz").status == 200;
    })) << "the gateway no longer answers";
    EXPECT_TRUE(eventually([&] { return gw_->open_api_connections() == 0; }))
        << gw_->open_api_connections() << " client connection(s) left open";
    for (const char* id : {"bad/m", "good/m"}) {
      EXPECT_TRUE(eventually([&] { return gw_->stats().get_or_prior(id).in_flight == 0; }))
          << id << " still counts an attempt in flight";
    }
    EXPECT_TRUE(
        eventually([&] { return metric_value(metrics(), "llmgate_requests_in_flight") == 0; }));
    if (upstream_) {
      EXPECT_TRUE(eventually([&] { return upstream_->stats().open == 0; }))
          << "an upstream connection was not released";
    }
  }

 private:
  std::unique_ptr<sim::SimServer> good_;
  std::unique_ptr<ScriptedUpstream> upstream_;
  std::unique_ptr<Blackhole> blackhole_;
  std::unique_ptr<RefusedPort> refused_;
  std::unique_ptr<TlsRelay> relay_;
  std::string tls_dir_;
  std::unique_ptr<gateway::Gateway> gw_;
  std::uint16_t port_ = 0;
  std::string yaml_;
};

}  // namespace llmgate::testing
