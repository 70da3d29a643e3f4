// llmgate-sim: a simulated LLM provider speaking OpenAI chat completions,
// Anthropic Messages and Gemini generateContent.
//
// Used by the demo, the integration tests and the benchmarks. Each model served
// has a Profile (TTFT distribution, output speed, length, faults, region) that
// can be replaced while the server runs, through set_profile() or the admin
// endpoint, so a test can script "provider B slows down 5x at t = 20 s".
//
// This header is Beast-free on purpose: tests and tools include it cheaply.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>

#include "tools/sim/sim_oauth.h"
#include "tools/sim/sim_profile.h"

namespace llmgate::sim {

// Distribution, Profile, profile_from_json() and profile_to_json() live in
// sim_profile.h, which is Beast-free too.

struct SimOptions {
  std::string address = "127.0.0.1";
  std::uint16_t port = 0;  // 0 = pick a free port
  unsigned threads = 1;
  std::uint64_t seed = 1;
  std::string region;  // default region for profiles without one
  // If set, model requests need it: "Authorization: Bearer <key>" (OpenAI),
  // x-api-key (Anthropic), x-goog-api-key or ?key= (Gemini).
  std::string api_key;
  // Non-empty: behave like Azure OpenAI (classic deployments): chat requests
  // at /openai/deployments/{deployment}/chat/completions?api-version=<this>
  // (the deployment names the profile; another path or version is a 404),
  // the key in an `api-key` header, and Azure's prompt-filter first event.
  std::string azure_api_version;
  // Each streamed OpenAI chunk carries "x_sim_ns": the CLOCK_MONOTONIC time
  // (ns) it was written at, last in its object, so that a client on the
  // same host can tell how long the event took to reach it (bench/trickle).
  bool stamp_events = false;
  // Set: Bedrock requests (POST /model/{id}/converse[-stream]) must be signed
  // with AWS Signature Version 4 by this access key and secret (a wrong
  // signature is AWS's 403); unset, they are not checked.
  std::string aws_access_key_id, aws_secret_access_key;
  // The token endpoints (sim_oauth.h: Google, the metadata server, Entra
  // ID, AWS STS) and whether model requests need one of their tokens.
  TokenOptions tokens;
  Profile default_profile;                  // for models with no profile of their own
  std::map<std::string, Profile> profiles;  // by upstream model name
};

struct SimStats {
  std::uint64_t requests = 0;           // model requests received (any protocol)
  std::uint64_t streams_completed = 0;  // responses written to the end
  std::uint64_t streams_aborted = 0;    // client went away before the end
  std::uint64_t in_flight = 0;
  std::uint64_t max_in_flight = 0;  // the most in flight at once since start
  std::uint64_t errors_injected = 0;
  std::uint64_t streams_cut = 0;           // closed mid-event by cut_after_tokens
  std::uint64_t streams_errored = 0;       // ended by error_after_tokens' in-band error
  std::uint64_t connections_accepted = 0;  // TCP connections (shows keep-alive reuse)
  std::uint64_t signatures_refused = 0;    // Bedrock requests whose SigV4 did not check out
  TokenStats tokens;                       // the token endpoints' (sim_oauth.h)
};

struct RecordedRequest {
  std::map<std::string, std::string> headers;  // lower-case names
  std::string target;
  std::string body;
};

class SimServer {
 public:
  explicit SimServer(SimOptions options);
  ~SimServer();  // stops
  SimServer(const SimServer&) = delete;
  SimServer& operator=(const SimServer&) = delete;

  std::uint16_t start();  // bind, listen and run in background threads; returns the port
  void run();             // bind and run in the calling thread until stop()
  void stop();            // closes the listener and every connection; not from an I/O thread

  std::uint16_t port() const;
  void set_profile(const std::string& model, const Profile& profile);
  SimStats stats() const;
  std::optional<RecordedRequest> last_request() const;
  // Added for tests and tools; the admin endpoint offers the same over HTTP.
  std::optional<Profile> profile(const std::string& model) const;  // nullopt: uses the default
  Profile default_profile() const;
  void set_default_profile(const Profile& profile);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace llmgate::sim
