// State that llmgate replicas share through Redis (config shared_state:):
//
//  - per-key request rates: a token bucket per key lives in Redis (a Lua
//    script, on Redis's clock); each replica leases the tokens the key earns
//    in `lease_window` at a time and spends them locally, so Redis is on a
//    request's path only when its lease runs out. Tokens a replica holds
//    unspent may let the fleet exceed a minute's allowance by at most
//    replicas x lease size (lease = max(1, rate x lease_window)).
//  - max_concurrent per deployment: a slot is a member of a Redis sorted set
//    scored by its expiry, taken by a script that first drops expired ones,
//    renewed every slot_ttl/3 while held and removed when released; a replica
//    that dies leaks its slots for at most slot_ttl.
//  - per-key token rates and spend budgets: tokens and cost are charged after
//    each answer (a script adds them to the key's token bucket and to its
//    spend of the UTC day and month); each replica decides on a view of them
//    at most `lease_window` old, refreshed in the background, so the fleet
//    may pass a limit by what replicas admit within one lease_window (plus
//    the answers in flight, as for one process: no answer is cut).
//  - prompt-cache affinity: where each prompt prefix (and conversation key)
//    was last served, one deployment each, for the affinity TTL; a replica
//    that has no entry of its own for a conversation asks Redis (one MGET)
//    before routing, so N replicas behind a load balancer keep a
//    conversation where its prefix is cached. Best effort: Redis down or
//    slow, the replica routes on what it knows itself (on_failure does not
//    apply).
//  - Retry-After cooldowns and outlier ejections: one replica's upstream
//    429/503 + Retry-After, or its ejection of a deployment, is published on
//    a channel and applied by every replica's health tracker; running ones
//    are also stored, so that a replica that (re)connects learns them.
//
// When Redis is down, paused or slow (no reply within `timeout`), each
// decision falls back per `on_failure`: open = this replica's own limits (a
// metric and a warning say so), closed = refuse (503 / skip the deployment).
// A hung Redis costs a request at most one `timeout`: the connection is then
// dropped and remade, and decisions fail fast until it is back.
//
// Latency statistics are deliberately not shared: each replica routes on its
// own measurements of its own network path.
//
// Includes Asio: include only from gateway .cpp files.
#pragma once

#include <boost/asio/awaitable.hpp>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "config/config.h"
#include "gateway/access/auth.h"
#include "gateway/http/api_error.h"
#include "gateway/observe/metrics.h"

namespace llmgate::gateway {

// What replicas tell each other about a deployment.
enum class HealthEvent {
  kCooldown,  // an upstream Retry-After
  kEjection,  // outlier ejection
};

class SharedLimits : public std::enable_shared_from_this<SharedLimits> {
 public:
  using Clock = std::chrono::steady_clock;
  struct Hooks {
    MetricsRegistry* metrics = nullptr;
    // A cooldown or ejection another replica saw (called on the shared-state
    // thread).
    std::function<void(HealthEvent, const std::string& deployment, std::chrono::milliseconds after)>
        on_health;
  };
  // Starts the shared-state thread and connects in the background.
  static std::shared_ptr<SharedLimits> start(const config::SharedState& cfg, Hooks hooks);
  ~SharedLimits();
  void stop();  // joins the thread; pending operations fail

  bool up() const;
  bool fail_open() const { return cfg_.on_failure == config::SharedState::OnFailure::kOpen; }
  const config::SharedState& config() const { return cfg_; }

  enum class Verdict { kAllowed, kLimited, kUnavailable };

  // One request of `key` against its shared bucket of `per_minute` requests
  // (a minute's allowance is the burst, as for local limits).
  struct RateDecision {
    Verdict verdict = Verdict::kUnavailable;
    int retry_after_s = 0;  // kLimited
  };
  boost::asio::awaitable<RateDecision> take_request(const std::string& key, double per_minute);

  // A fleet-wide max_concurrent slot of `deployment`, waiting for one until
  // `deadline`. Releasing (destroying) the slot frees it.
  class Slot {
   public:
    Slot() = default;
    Slot(std::shared_ptr<SharedLimits> owner, std::string deployment, std::string id);
    Slot(Slot&&) = default;
    Slot& operator=(Slot&& o) noexcept;
    ~Slot() { release(); }
    explicit operator bool() const { return owner_ != nullptr; }

   private:
    void release();
    std::shared_ptr<SharedLimits> owner_;
    std::string deployment_;
    std::string id_;
  };
  struct SlotResult {
    Verdict verdict = Verdict::kUnavailable;
    Slot slot;
  };
  boost::asio::awaitable<SlotResult> acquire_slot(const std::string& deployment, unsigned limit,
                                                  Clock::time_point deadline);
  unsigned slots_held() const;

  // `key`'s fleet-wide token rate and budgets (when it has any): kAllowed,
  // kLimited with the refusal, or kUnavailable (no view of them recent
  // enough and Redis cannot be asked).
  struct UsageDecision {
    Verdict verdict = Verdict::kUnavailable;
    std::optional<ApiError> refusal;  // kLimited
  };
  boost::asio::awaitable<UsageDecision> check_usage(const config::GatewayKey& key);
  // The fallback for budgets while the shared state is unavailable
  // (on_failure: open): the fleet's spend as last known (of this period)
  // plus what this replica has charged since, against the key's budgets.
  // So an outage overshoots a budget by at most what the replicas spend
  // during it up to it each, not by each replica's own budget
  // (docs/scale-out.md). nullopt: within budget, or no view known.
  std::optional<ApiError> budget_refusal_without_redis(const config::GatewayKey& key) const;
  // Adds what an answer of `key` used to its shared totals (in the
  // background; held and sent on reconnect while Redis is unreachable).
  void charge_usage(const config::GatewayKey& key, KeyStore::Charge used);

  // Prompt-cache affinity (routing/prompt_affinity.h) across the fleet: a
  // prefix fingerprint (or conversation key hash) and where it was served.
  struct AffinityEntry {
    std::uint64_t hash = 0;
    std::uint64_t deployment = 0;  // config::Deployment::id_hash
    std::size_t bytes = 0;         // the prefix's (config::PrefixCut)
    std::uint32_t media = 0;
  };
  // The entries the fleet has of `hashes` (those it has; none when Redis
  // cannot be asked).
  boost::asio::awaitable<std::vector<AffinityEntry>> find_affinity(
      std::vector<std::uint64_t> hashes);
  // `entries` were served now: stored for `ttl` (in the background).
  void remember_affinity(const std::vector<AffinityEntry>& entries, std::chrono::milliseconds ttl);

  // Tells the other replicas of an upstream Retry-After on (kCooldown), or an
  // ejection of (kEjection), `deployment`.
  void publish(HealthEvent event, const std::string& deployment, std::chrono::milliseconds after);

  struct Impl;

 private:
  SharedLimits(const config::SharedState& cfg, Hooks hooks);
  config::SharedState cfg_;
  std::unique_ptr<Impl> impl_;
};

// A request of `key` against its fleet-wide token rate and budgets, then
// its request rate (when it has them): nullopt = go on; else the refusal
// (429; when the shared state is unavailable, this replica's own limits
// decide under on_failure: open, and a 503 under closed).
boost::asio::awaitable<std::optional<ApiError>> admit_shared_request(SharedLimits& shared,
                                                                     KeyStore& keys,
                                                                     const config::GatewayKey& key,
                                                                     MetricsRegistry& metrics);

// What a finished request of `key` used, charged to this replica's
// KeyStore and, with `shared`, to the fleet's totals.
void charge_key(SharedLimits* shared, KeyStore& keys, const config::GatewayKey& key,
                KeyStore::Charge used);

// The 503 a request gets when what it needs from the shared state cannot be
// had (on_failure: closed).
ApiError shared_state_unavailable();

}  // namespace llmgate::gateway
