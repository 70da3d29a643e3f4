// Which deployments may be routed to now: outlier ejection with exponential
// backoff and jitter, a half-open probe after each ejection, an ejected-
// fraction cap, panic mode, and Retry-After cooldowns (Envoy's outlier
// detection, reduced to what a gateway with a few deployments per model needs).
//
// Life of a deployment:
//   healthy --(N consecutive failures, or error rate over threshold)--> ejected
//   ejected --(ejection time passes)--> half-open: exactly one request probes
//   half-open --(probe succeeds)--> healthy;  --(probe fails)--> ejected, longer
// and, with probe_interval set, while still ejected: one request may probe it
// every probe_interval (one at a time); a success ends the ejection at once,
// a failure leaves it as it was. Probes go first in their plan and are hedged
// (router.h), so this costs clients little and finds a recovery in about
// probe_interval, whatever the backoff has grown to.
// Ejection times grow base x 2^(k-1) for the k-th ejection in a row; k returns
// to 0 only after max_duration without an ejection, so a flapping deployment
// keeps its long backoff. A Retry-After from upstream is a separate, hard
// cooldown: not a failure signal, never relaxed by the cap or panic mode.
//
// Results of attempts that finish while a deployment is ejected (requests
// already in flight, or routed anyway by the cap or panic mode) change
// nothing: the ejection runs its course and the probe decides.
//
// Thread-safe: one tracker is shared by all worker threads (one mutex; every
// call is short and allocation-light). While every deployment it knows is
// healthy with nothing pending (no failure in a row, ejection, probe,
// cooldown or post-readmission wait), check() and a success's on_attempt()
// take no lock: both would change nothing. One deployment with something
// pending sends every call through the lock until it clears (its next
// success, its probe, a check after its cooldown; a reload forgets the
// deployments it removes). Time is passed in.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "config/config.h"
#include "routing/attempt_record.h"

namespace llmgate::routing {

enum class HealthState { kHealthy, kEjected, kProbing, kCoolingDown };
const char* to_string(HealthState s);  // "healthy", "ejected", "probing", "cooling_down"

struct Availability {
  HealthState state = HealthState::kHealthy;
  bool routable = true;  // may be put in a plan now
  bool panic = false;    // routable only because every candidate was ejected
  // Routable as the half-open probe: the caller must later call on_attempt()
  // or release_probe() for it, or the slot stays taken until it times out.
  bool probe = false;
  std::optional<Clock::time_point> until;  // end of ejection / cooldown
  // Compact, for headers and logs; "" when healthy. E.g.
  //   "ejected: 5 consecutive failures, 3.2s left"   "ejected: error rate 62%, 3.2s left"
  //   "cooling down: upstream Retry-After, 27s left" "half-open: probe in flight"
  //   "ejection cap: routed anyway"                   "panic: all candidates ejected"
  std::string reason;
};

class HealthTracker {
 public:
  // `seed` drives the ejection-time jitter only.
  explicit HealthTracker(config::Ejection options, std::uint64_t seed = 1);

  // One finished attempt. `failed` = the attempt counts against the
  // deployment. `error_rate` and `attempts` are the caller's live decayed
  // error rate and attempt count for it (StatsRegistry). Only a failure can
  // eject. After a probe let the deployment back in, the error-rate rule also
  // waits for `min_requests` new attempts, so the slowly decaying rate that
  // caused the last ejection cannot cause the next one on its own (the
  // wait ends when it has seen them: a reload that raises min_requests
  // later does not start it again).
  // `probe`: the attempt was the probe check() handed out for it.
  // `exercised`: what the attempt exercised, as config::operation_bit()s
  // (0: say nothing). An ejection remembers what its failures exercised,
  // and only a success that exercised one of those proves a recovery: an
  // embeddings probe (one JSON answer) says nothing of the chat streams
  // that were cut -- it frees the probe slot for the next request.
  // Returns how long the deployment is now ejected for, if this result
  // ejected it (shared_state tells the other replicas).
  std::optional<Clock::duration> on_attempt(const std::string& deployment, bool failed,
                                            double error_rate, std::uint64_t attempts,
                                            Clock::time_point now, bool probe = false,
                                            unsigned exercised = 0);

  // Another replica ejected `deployment` for `after` (shared_state): out of
  // plans until then and half-open after, like an ejection of its own, but
  // the backoff does not grow and a running, longer ejection is kept.
  void on_shared_ejection(const std::string& deployment, std::chrono::milliseconds after,
                          Clock::time_point now);

  // An upstream 429/503 with Retry-After: out of plans until now + after
  // (at most max_duration, so one bad header cannot bench a deployment for a
  // day). Not an ejection: the backoff does not grow. A later, shorter
  // Retry-After does not shorten a running cooldown.
  void on_retry_after(const std::string& deployment, std::chrono::milliseconds after,
                      Clock::time_point now);

  // Who may be routed now, for one request's candidates; the result is in the
  // order of `ids`. May hand out (and so take) half-open probe slots. Rules:
  //  - ejected, or half-open with the probe in flight: out, except that at
  //    most floor(max_ejected_fraction x ids.size()) are kept out for
  //    ejection — the earliest ejected; the rest are routed anyway;
  //  - half-open with a free slot (or one unresolved for max(base, 30 s)):
  //    routable as the probe;
  //  - cooling down: out until `until`, always;
  //  - panic: if nothing is routable and something is out only for
  //    ejection, every ejected / half-open one becomes routable (panic=true).
  std::vector<Availability> check(const std::vector<std::string>& ids, Clock::time_point now);
  // The same for a model's deployments, by their ids (none copied), into
  // `out` (its elements reused: a caller's kept vector allocates nothing
  // while every deployment is healthy; reasons for those that are not are
  // strings of their own).
  void check_model(const config::Model& model, Clock::time_point now,
                   std::vector<Availability>& out);

  // The probe handed out by check() was not attempted after all (another
  // candidate served the request, or it was cancelled): free the slot.
  void release_probe(const std::string& deployment);

  // For display (GET /admin/routes): one deployment's own state, without
  // taking a probe and without the cap or panic mode (they depend on the
  // request's candidate set). A half-open deployment with a free slot reads
  // routable with reason "half-open: next request probes".
  Availability peek(const std::string& deployment, Clock::time_point now) const;

  std::uint64_t ejections_total(const std::string& deployment) const;

  // A reload: new thresholds and durations apply from the next decision on;
  // running ejections and cooldowns run their course.
  void set_options(const config::Ejection& options);
  // A deployment whose upstream changed: healthy, with no history.
  void forget(const std::string& deployment);

  // How long the probe slot may stay taken before it is freed on its own.
  static constexpr std::chrono::seconds kMinProbeTimeout{30};

 private:
  struct Entry {
    std::uint32_t consecutive_failures = 0;
    std::uint32_t ejections_in_a_row = 0;  // k
    std::uint64_t ejections_total = 0;
    // Set from an ejection until a probe succeeds: before it, ejected; after
    // it, half-open.
    std::optional<Clock::time_point> ejected_until;
    Clock::time_point ejected_at{};
    std::string ejection_cause;  // "5 consecutive failures", "error rate 62%"
    std::optional<Clock::time_point> probe_taken_at;
    std::optional<Clock::time_point> last_probe_at;  // the last probe handed out
    std::optional<Clock::time_point> readmitted_at;  // last probe success
    std::optional<std::uint64_t> attempts_since_readmitted;
    std::optional<Clock::time_point> cooldown_until;
    // What the failures exercised (operation bits): those since the last
    // success, and those of the ejection running.
    unsigned failed_ops = 0;
    unsigned ejected_ops = 0;
    bool unclean = false;  // counted in unclean_
  };
  // A success that exercised `ops` proves `e` recovered from what ejected it.
  static bool proves(const Entry& e, unsigned ops) {
    const unsigned failed = e.ejected_ops | e.failed_ops;
    return failed == 0 || ops == 0 || (failed & ops) != 0;
  }

  // check() over `n` ids, the i-th `id_at(i)`.
  template <class IdAt>
  void check_ids(std::size_t n, IdAt id_at, Clock::time_point now, std::vector<Availability>& out);
  // One deployment's state (e: its entry, if any), before the cap and panic
  // mode.
  Availability own_state(const Entry* e, Clock::time_point now) const;
  void eject(Entry& e, std::string cause, Clock::time_point now);  // mu_ held
  void readmit(Entry& e, Clock::time_point now);                   // mu_ held
  Clock::duration ejection_time(std::uint32_t k);                  // mu_ held
  bool probe_slot_free(const Entry& e, Clock::time_point now) const;
  const Entry* find(const std::string& deployment) const;  // mu_ held
  // Healthy with nothing pending: a success changes nothing in it and
  // check() reads it healthy.
  static bool clean(const Entry& e);
  // After a change to `e`: keeps unclean_ counting the entries not clean
  // (mu_ held).
  void settle(Entry& e);

  config::Ejection options_;
  mutable std::mutex mu_;
  std::mt19937_64 rng_;
  std::map<std::string, Entry> entries_;
  // How many entries are not clean(): written under mu_, read without it —
  // at 0, check() and a success's on_attempt() need no lock.
  std::atomic<std::size_t> unclean_{0};
};

}  // namespace llmgate::routing
