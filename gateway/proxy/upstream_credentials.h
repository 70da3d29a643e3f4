// The credentials upstream requests authenticate with, per provider
// (upstream_credentials.cpp): fixed ones (AWS keys from the environment or
// the shared credentials file) and short-lived ones that the gateway's
// refresher (credential_refresher.h) fetches from a token endpoint and
// renews ahead of expiry -- a Google service account's or the metadata
// server's access token, an Entra ID token, STS web identity credentials.
// An attempt reads the one in hand without waiting: none (not fetched yet,
// expired, refused) fails that deployment over at once
// (AttemptOutcome::kCredentialError), never stalls a request.
// Beast-free.
#pragma once

#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <variant>

#include "config/config.h"
#include "providers/cloud/aws_credentials.h"
#include "providers/cloud/token_source.h"

namespace llmgate::gateway {

using SystemClock = std::chrono::system_clock;

// One provider's credential. Shared by the snapshots whose config gives it
// the same source (a reload keeps the token in hand); read by every worker.
class CredentialCell {
 public:
  // Fixed: never refreshed.
  CredentialCell(std::string provider, providers::cloud::Credential fixed, std::string source);
  // Fetched from `source` by the refresher.
  CredentialCell(std::string provider, providers::cloud::TokenSource source);
  // None to be had: every attempt fails over with `why`.
  static std::shared_ptr<CredentialCell> unavailable(std::string provider, std::string why);

  const std::string& provider() const { return provider_; }
  const std::optional<providers::cloud::TokenSource>& source() const { return source_; }

  // What a request authenticates with at `now`, or why it cannot: not
  // fetched yet, the last fetch's error, expired. Never a secret in the why.
  using Current = std::variant<std::shared_ptr<const providers::cloud::Credential>, std::string>;
  Current current(SystemClock::time_point now) const;

  // The refresher's: a new credential; a fetch that failed (the credential
  // in hand serves until it expires).
  void store(providers::cloud::Credential c);
  void failed(std::string why);
  // Whether a fetch has ended (either way) since the cell was made.
  bool settled() const { return settled_.load(std::memory_order_acquire); }

  // The refresher's schedule: touched on the refresher's thread only.
  struct Schedule {
    std::chrono::steady_clock::time_point due{};  // the next fetch
    int failures = 0;                             // in a row
    bool in_flight = false;
  };
  Schedule schedule;

 private:
  CredentialCell(std::string provider, std::optional<providers::cloud::TokenSource> source);
  const std::string provider_;
  const std::optional<providers::cloud::TokenSource> source_;
  std::atomic<bool> settled_{false};
  mutable std::mutex mu_;
  std::shared_ptr<const providers::cloud::Credential> current_;  // mu_
  std::string error_;        // mu_: the last fetch's, if it failed
  std::string description_;  // where the credential comes from (never the secret)
};

// Providers with a credential of their own, by name.
using UpstreamCredentials = std::map<std::string, std::shared_ptr<CredentialCell>, std::less<>>;

// The credentials `cfg`'s providers need: auth: (refreshed), Bedrock
// without api_key (the AWS SDKs' chain: the environment, the shared
// credentials file, else web identity through STS, refreshed). A provider
// whose source is unchanged since `previous` keeps its cell (and token).
// Logs where each comes from, and a warning for each that has none.
UpstreamCredentials upstream_credentials(const config::Config& cfg,
                                         const UpstreamCredentials* previous,
                                         const providers::cloud::Getenv& env,
                                         const providers::cloud::ReadFile& read);

// `provider`'s credential in `all` at `now`: nullptr when it needs none,
// else the credential, or why there is none (the attempt fails over).
std::variant<std::shared_ptr<const providers::cloud::Credential>, std::string> credential_for(
    const UpstreamCredentials& all, const config::Provider& provider, SystemClock::time_point now);

}  // namespace llmgate::gateway
