// The refresher of upstream credentials (credential_refresher.cpp): on one
// worker's thread, without blocking it, fetches each refreshed credential of
// the worker's current snapshot (upstream_credentials.h) from its token
// endpoint -- at start-up, then ahead of expiry (halfway through its life,
// at the latest five minutes before; providers/cloud/token_source.h), and
// after a failure again with backoff (1 s doubling to 30 s) while the
// credential in hand still serves. Token requests go over the gateway's own
// upstream connections (a pool per token endpoint, TLS verified against the
// system's roots); an answer or an error is logged without the secret and
// counted (llmgate_credential_refreshes_total).
// Includes Asio: include only from gateway .cpp files.
#pragma once

#include <boost/asio/awaitable.hpp>
#include <boost/asio/io_context.hpp>
#include <memory>

namespace llmgate::gateway {

class MetricsRegistry;
struct Worker;

class CredentialRefresher {
 public:
  CredentialRefresher(boost::asio::io_context& io, MetricsRegistry& metrics);
  ~CredentialRefresher();
  CredentialRefresher(const CredentialRefresher&) = delete;
  CredentialRefresher& operator=(const CredentialRefresher&) = delete;

  // Runs until the io_context stops, reading `worker`'s snapshot each round
  // (a reload posts the new one to it).
  boost::asio::awaitable<void> run(Worker& worker);
  // Closes the token endpoints' idle connections (before the io_context goes).
  void shutdown();

 private:
  struct Impl;
  std::shared_ptr<Impl> impl_;
};

}  // namespace llmgate::gateway
