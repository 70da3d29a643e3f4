// A TLS-terminating TCP relay for integration tests: accepts TLS on loopback
// with the given certificate and pipes the plaintext to a local port (e.g. an
// llmgate-sim). Lets tests exercise the gateway's HTTPS upstreams, SNI and
// certificate/hostname verification against a real handshake.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

namespace llmgate::testing {

// Writes a self-signed certificate for `dns_name` (and no IP SAN) with its
// key into `dir` using the openssl command; returns false if that failed.
// `san`: the subjectAltName instead ("IP:127.0.0.1").
bool make_self_signed_cert(const std::string& dir, const std::string& dns_name,
                           std::string& cert_file, std::string& key_file,
                           const std::string& san = "");

class TlsRelay {
 public:
  TlsRelay(const std::string& cert_file, const std::string& key_file, std::uint16_t target_port);
  ~TlsRelay();
  std::uint16_t start();  // returns the TLS port
  // The server name (SNI) of the last handshake: "" when the client sent none.
  std::string last_sni() const;
  // The next bytes the gateway sends on a connection it already used are
  // not relayed: that connection is closed at once, without a TLS
  // close_notify (a provider closing an idle keep-alive connection just as
  // a request arrives). Once.
  void drop_next_reused_request();
  int dropped() const;  // requests dropped so far

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace llmgate::testing
