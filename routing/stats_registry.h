// Live per-deployment statistics, shared by all worker threads.
//
// The gateway reports every finished attempt here, once per attempt (not per
// chunk), and holds an InFlight guard while an attempt runs. The router reads
// snapshots. What is kept per deployment:
//   - TTFT: a TtftLevel (the typical TTFT, robust to its spread, quick to
//     follow a change) for decisions and windowed p50/p95/p99 for
//     constraints, deadlines and display. Failures enter the TTFT estimate as
//     penalty samples, so a failing deployment never looks fast.
//   - Output speed, from streams long enough to mean something: tokens/s as
//     the upstream counts them (EWMA and windowed quantiles), and output
//     characters/s (EWMA) — a tokenizer-neutral unit for comparing models.
//   - A time-decayed error rate and consecutive failures; in-flight count.
// Time comes in as arguments (`now`), so everything is testable with a
// simulated clock.
//
// Locking: each deployment's (and effort's) entry has its own lock, so
// requests to different deployments share only the map's lock, held just
// to find or create an entry (twice per attempt). A request with one
// candidate and one attempt takes its deployment's lock four times, each
// briefly: the snapshot it routes on (one per candidate), the attempt's
// start, its first token, its end with the record. all() and efforts_of()
// snapshot each entry under its own lock, after the map's is released.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "config/config.h"
#include "routing/adaptive_mutex.h"
#include "routing/attempt_record.h"
#include "routing/decayed_ewma.h"
#include "routing/failure_tracker.h"
#include "routing/prefill_fit.h"
#include "routing/ttft_level.h"
#include "routing/windowed_quantiles.h"

namespace llmgate::routing {

struct StatsOptions {
  // The configurable ones default to config.h's (routing:).
  std::chrono::milliseconds ttft_prior = config::kDefaultTtftPrior;  // estimate before any sample
  double tps_prior = config::kDefaultTpsPrior;                       // tokens/s before any sample
  std::chrono::milliseconds ttft_tau = config::kDefaultTtftTau;      // TtftLevel decay
  std::chrono::milliseconds relax_tau =
      config::kDefaultRelaxTau;  // stale estimates relax toward the prior
  std::chrono::milliseconds window = config::kDefaultWindow;  // percentile window
  std::size_t window_max_samples = 1024;
  std::chrono::milliseconds error_tau = config::kDefaultErrorTau;  // error-rate decay
  std::int64_t min_tokens_for_tps =
      config::kDefaultMinTokensForTps;  // shorter streams say little about speed
  double failure_penalty_factor = 2.0;  // failure sample = max(elapsed, factor x median)
  bool operator==(const StatsOptions&) const = default;
};

// Output characters per token when a deployment has no measurement of its
// own: about 4 for English text in the common BPE tokenizers.
inline constexpr double kDefaultCharsPerToken = 4.0;

// An estimate with no sample for this long is stale: a first token far
// under it restarts it.
inline constexpr std::chrono::milliseconds kStaleEstimate{1000};

// How many of the latest TTFT samples count as recent evidence.
inline constexpr std::size_t kRecentSamples = 20;

// How long a lost size race's slope floor holds (DeploymentStats::
// prefill_floor_ms_per_1k): a deployment may have changed after that.
inline constexpr std::chrono::minutes kPrefillFloorTtl{5};
inline constexpr std::size_t kConfirmSamples = 3;

// The statistics of one kind of traffic to a deployment. Requests that ask
// for a reasoning effort are measured apart from the rest, one entry per
// effort — a model thinking at "high" has another TTFT (and deadline) than
// the same model answering at once: "<deployment> reasoning=<effort>" (no
// deployment id has a space). An empty effort is the deployment's own entry.
std::string stats_key(const std::string& deployment, std::string_view effort);

struct DeploymentStats {
  std::string deployment;
  std::uint64_t attempts = 0;
  std::uint64_t successes = 0;
  std::uint64_t failures = 0;
  std::int64_t in_flight = 0;
  std::int64_t awaiting_first_token =
      0;  // in flight and still without output (queued or prefilling)
  // How long the second-oldest attempt awaiting its first token has waited
  // so far (0 with fewer than two): a lower bound on the TTFT of a
  // deployment that stalls, before any attempt times out.
  double awaiting_lower_bound_ms = 0;
  std::uint64_t output_tokens = 0;
  std::optional<double> last_ttft_ms;
  std::optional<double> last_tps;
  std::optional<AttemptOutcome> last_outcome;
  // Estimates at the time of the snapshot.
  double ttft_estimate_ms = 0;
  std::optional<double> ttft_p50_ms, ttft_p90_ms, ttft_p95_ms, ttft_p99_ms;
  // Attempts in the window that gave up waiting for a first token (censored
  // samples), and whether a percentile above is only a lower bound.
  // Percentiles of the attempts that answered, leaving out those that gave
  // up waiting: when an answer is late (hedge delays).
  std::optional<double> ttft_answered_p50_ms, ttft_answered_p90_ms, ttft_answered_p95_ms,
      ttft_answered_p99_ms;
  std::size_t ttft_censored = 0;
  // Of those, the attempts that stopped waiting because another attempt
  // answered first (a lost hedge or re-check); the rest timed out.
  std::size_t ttft_lost_races = 0;
  bool ttft_quantile_lower_bound = false;  // some of p50..p99 is only a lower bound
  bool ttft_p95_lower_bound = false;       // the p95 is
  // Recent evidence, for the soft TTFT constraints (docs/routing.md): the
  // same percentiles over the last kRecentSamples samples, and the slowest
  // of the last kConfirmSamples when all of them answered (unset otherwise).
  std::optional<double> ttft_recent_p50_ms, ttft_recent_p90_ms, ttft_recent_p95_ms,
      ttft_recent_p99_ms;
  std::optional<double> ttft_last_few_max_ms;
  // The estimate holds penalties of failures, not a measurement: the router
  // re-checks such a deployment (a policy that never explores would never
  // learn that it came back).
  bool ttft_penalized = false;
  // The estimate was last raised by lower bounds (attempts that gave up
  // waiting, lost hedges), not by a first token: the router re-checks such
  // a deployment too, and a first token far under them restarts it.
  bool ttft_bounded = false;
  // Lessons in a row that taught nothing: attempts made to learn about it
  // (AttemptRecord::learning) that ended without a first token and without
  // raising its estimate (they waited less than it: the winner's answer
  // ended first). Each doubles the wait before the next re-check of one
  // never answered (router.h, kMaxRecheckBackoff); a first token, or a wait
  // that raised the estimate (a slowdown found), resets it.
  std::uint32_t lessons_missed = 0;
  double ttft_prior_ms = 0;  // what the estimate relaxes toward with an empty window
  // The spread of its TTFT around the estimate: a standard deviation of
  // ln(TTFT) (TtftLevel::spread; 0.1 is steady, 0.5 wide).
  double ttft_spread = 0;
  std::uint64_t ttft_samples = 0;
  // Of those, answers asked for unstreamed (providers[].stream: false): the
  // sample is the time to the whole answer, when a client first sees output.
  std::uint64_t unstreamed_samples = 0;
  double tps_estimate = 0;
  std::optional<double> tps_p50;
  // The longest pause between two reads of its completed streams (after
  // the first token): the window's p95 and how many streams it holds. The
  // stall deadline derives from it (Router: kStallFactor).
  std::optional<double> pause_p95_ms;
  std::size_t pause_samples = 0;
  std::optional<double> chars_per_s_estimate;
  double error_rate = 0;
  std::uint32_t consecutive_failures = 0;
  std::optional<std::chrono::steady_clock::time_point> last_sample;
  // When the last attempt at it started: re-checks are spaced from it.
  std::optional<std::chrono::steady_clock::time_point> last_attempt_start;
  // How many attempts an answered one usually found awaiting their first
  // token when it started (time-decayed): the queue its measured TTFT
  // already includes. Load beyond it is what the load factor charges.
  double usual_awaiting = 0;
  // How many bytes of a request body make one of this deployment's input
  // tokens (its tokenizer, its chat template, JSON's syntax), learnt from the
  // usage its answers report: a prior of kPriorBytesPerToken worth
  // kPriorTokens tokens, then recent answers (each older one's weight decays
  // by kCalibrationDecay per answer). Requests with inline media teach
  // nothing (their tokens are not their bytes').
  static constexpr double kPriorBytesPerToken = 4.0;
  static constexpr double kPriorTokens = 2000;
  static constexpr double kCalibrationDecay = 0.98;
  double calibration_bytes = 0;   // decayed sums of the answers'
  double calibration_tokens = 0;  // prompt bytes and input tokens
  std::uint64_t calibration_samples = 0;
  // Prefill (docs/routing.md, "TTFT and the prompt"): the TTFT estimates
  // above are a prompt of no size's (the base); a request's expected TTFT is
  // the base plus prefill_ms_per_1k x its uncached input tokens / 1000. The
  // slope is the fit's over the sizes seen (PrefillFit), shrunk toward the
  // prior; `prefill_spread` is the evidence behind one of its own.
  double prefill_ms_per_1k = config::kDefaultPrefillMsPer1k;
  double prefill_prior_ms_per_1k = config::kDefaultPrefillMsPer1k;
  double prefill_spread = 0;
  std::uint64_t prefill_samples = 0;
  double prefill_mean_k = 0;  // the sizes seen, their mean (thousands of tokens)
  // A lower bound on the slope while the fit guesses at a size: an attempt
  // at that size lost a race after waiting this long per 1k tokens beyond
  // the level (0: none within kPrefillFloorTtl). prefill_ms_per_1k is at
  // least this; the router does not race such a size on it again.
  double prefill_floor_ms_per_1k = 0;
  // Attempts awaiting their first token at a size the fit guesses at
  // (PrefillFit::guess when they started): the size races in flight.
  std::int64_t awaiting_guessed = 0;
  // Prompt caching (docs/routing.md, "Prompt-cache affinity"): whether
  // its answers have ever reported input read from its cache, and of the
  // prefixes the router expected it to hold (from kMinCachedTokens), the
  // share its answers reported cached -- decayed by kCacheShareDecay per
  // answer, 1 until one says otherwise. A deployment that never reports
  // cached tokens has a cache_share of 0: affinity earns it nothing.
  static constexpr std::int64_t kMinCachedTokens = 1024;
  static constexpr double kCacheShareDecay = 0.8;
  bool reports_cached = false;
  double cache_share_measured = 1;
  std::uint64_t cache_share_samples = 0;
  double cache_share() const { return reports_cached ? cache_share_measured : 0; }
  double bytes_per_input_token() const {
    return (kPriorBytesPerToken * kPriorTokens + calibration_bytes) /
           (kPriorTokens + calibration_tokens);
  }
};

class StatsRegistry {
  struct Entry;
  struct Slot;

 public:
  explicit StatsRegistry(StatsOptions options = {}) : options_(options) {}

  // What health (ejection) decides on, as of the attempt just recorded.
  struct Recorded {
    double error_rate = 0;
    std::uint64_t attempts = 0;
  };

  // RAII: counts an attempt as in flight for its lifetime, on every path.
  class InFlight {
   public:
    // `input_tokens`: the request's prompt in the deployment's (estimated)
    // tokens. Its wait for a first token is counted from when its prefill
    // should be over (the awaiting lower bound and stall evidence are of the
    // base, as the estimates are), and its first token is read against it.
    InFlight(StatsRegistry& r, const std::string& deployment, Clock::time_point now = Clock::now(),
             std::int64_t input_tokens = 0);
    ~InFlight();
    // The attempt produced its first output token: no longer awaiting one.
    // With `ttft`, that sample enters the statistics at once, as
    // record_first_token() would, under the same lock.
    void first_token(std::optional<std::chrono::microseconds> ttft = std::nullopt,
                     Clock::time_point now = Clock::now());
    // The attempt ended (the destructor does this at Clock::now() if not
    // called): no longer in flight; if it was still awaiting a first token,
    // how long it waited stays evidence for a moment (waited_at_least).
    void end(Clock::time_point now);
    // end() and then the attempt's record() under one lock, the entry's:
    // what an attempt does when it is over. (A record under another
    // stats key than the InFlight's goes to that entry, after.)
    Recorded finish(const AttemptRecord& record, Clock::time_point now);
    InFlight(const InFlight&) = delete;
    InFlight& operator=(const InFlight&) = delete;

   private:
    void end_locked(Clock::time_point now);  // the entry's lock held
    StatsRegistry& registry_;
    Slot* slot_;  // found once: entries are never removed (reset() renews one in place)
    Clock::time_point since_;
    bool awaiting_ = true;
    bool ended_ = false;
    std::int64_t joined_ = 0;  // attempts already awaiting when it started
    double input_k_ = 0;       // thousands of input tokens
    bool guessed_ = false;     // counted in awaiting_guessed
    // Its entry in awaiting_since: since_ plus the prefill expected then.
    Clock::time_point awaiting_at_;
  };

  // One finished attempt (one that held an InFlight records with
  // InFlight::finish() instead, under the lock that ends it).
  Recorded record(const AttemptRecord& record, Clock::time_point now = Clock::now());
  // The TTFT sample as soon as the first token arrives, so the next decision
  // already knows it (a stream can run for seconds more). The attempt's
  // record() then skips its TTFT (AttemptRecord::ttft_recorded).
  void record_first_token(const std::string& deployment, std::chrono::microseconds ttft,
                          Clock::time_point now = Clock::now());
  // Output speed measured during a stream (output characters per second so
  // far): enters the speed estimates at once, converted to tokens/s with the
  // deployment's own characters per token (learnt from finished streams,
  // else 4), so speed-aware policies learn before the stream ends.
  void record_speed(const std::string& deployment, double chars_per_s,
                    Clock::time_point now = Clock::now());
  // A deployment's own cold-start prior (configured expected TTFT/TPS, or the
  // default plus a region-distance term), instead of the global one.
  void set_prior(const std::string& deployment, double ttft_ms, double tps,
                 double prefill_ms_per_1k = config::kDefaultPrefillMsPer1k);
  // Forgets what was measured of a deployment (its upstream changed on a
  // reload); the attempts now in flight are still counted.
  void reset(const std::string& deployment);
  // The snapshot, or what the router assumes of a deployment never used.
  DeploymentStats get_or_prior(const std::string& deployment,
                               Clock::time_point now = Clock::now()) const;
  // The same into a caller's kept one (the router's per-thread views): its
  // string reused, nothing allocated once it has held an id as long.
  void get_or_prior(const std::string& deployment, Clock::time_point now,
                    DeploymentStats& into) const;
  std::optional<DeploymentStats> get(const std::string& deployment,
                                     Clock::time_point now = Clock::now()) const;
  std::vector<DeploymentStats> all(Clock::time_point now = Clock::now()) const;
  // The reasoning efforts measured apart for `deployment` (stats_key), each
  // with its statistics, in effort name order.
  std::vector<std::pair<std::string, DeploymentStats>> efforts_of(
      const std::string& deployment, Clock::time_point now = Clock::now()) const;
  // How many attempts at the deployment have waited at least `d` for a
  // first token: those still waiting, and those that ended unanswered
  // within the last `d` (a hedge that won cancelled them). The evidence a
  // hedge on a stall waits for.
  std::size_t waited_at_least(const std::string& deployment, std::chrono::milliseconds d,
                              Clock::time_point now = Clock::now()) const;
  const StatsOptions& options() const { return options_; }

 private:
  struct Entry {
    explicit Entry(const StatsOptions& o);
    // The one TTFT-sample path: a first token after `ttft_ms` for a prompt
    // of `k` thousand (estimated, uncached) input tokens. The fit learns the
    // prefill from it; the estimators take the TTFT less the prefill (the
    // base: what a prompt of no size would have taken).
    // `fit`: false when the fit takes the sample later (InFlight::first_token:
    // the record says how much of the prompt was read from the cache).
    void add_ttft(double ttft_ms, Clock::time_point now, double k = 0, bool fit = true);
    // A time without its first token, as a base (less the prefill `k`
    // thousand tokens take; never below a fifth of it).
    double base_of(double ms, double k) const;
    PrefillFit prefill;
    double prefill_prior = config::kDefaultPrefillMsPer1k;
    // The slope floor of a lost size race (DeploymentStats::
    // prefill_floor_ms_per_1k), the size it was lost at and when.
    double prefill_floor = 0;
    double prefill_floor_k = 0;
    Clock::time_point prefill_floor_at{};
    double prefill_floor_now(Clock::time_point now) const {
      return now - prefill_floor_at < kPrefillFloorTtl ? prefill_floor : 0;
    }
    // The fit only guesses at the prefill of `k` thousand tokens (PrefillFit::guess
    // against the level now): such attempts are size races.
    bool guesses_at(double k, Clock::time_point now) {
      return k > 0 && PrefillFit::guess(prefill.doubt_ms(k, prefill_prior), ttft_estimate(now));
    }
    // The TTFT estimate (DeploymentStats::ttft_estimate_ms). Between
    // samples it relaxes toward what the window still holds (its median,
    // Kaplan-Meier), and toward the prior once the window is empty: a
    // deployment measured at 320 ms now and then, whose samples are rarer
    // than relax_tau, reads 320 ms, not a drift toward a prior of 1 s
    // between them (a deployment that is rarely the best is re-checked
    // rarely: issue 49), while data older than the window is trusted no
    // more than before. The anchor is one lookup in the window (its lock
    // held): also the typical TTFT a failure's penalty is based on.
    double ttft_estimate(Clock::time_point now) { return ttft.estimate(now, ttft_anchor(now)); }
    double ttft_anchor(Clock::time_point now) {
      return ttft_window.quantile(0.5, now).value_or(ttft.prior());
    }
    // TtftLevel::observe_at_least against that estimate.
    bool ttft_at_least(double bound, Clock::time_point now) {
      return ttft.observe_at_least(bound, now, ttft_anchor(now));
    }
    DeploymentStats counters;
    TtftLevel ttft;
    WindowedQuantiles ttft_window;
    DecayedEwma tps;
    DecayedEwma chars_per_s;
    WindowedQuantiles tps_window;
    WindowedQuantiles pause_window;  // AttemptRecord::longest_pause, ms
    FailureTracker failures;
    double tps_prior;
    // When each attempt still awaiting its first token started (unordered).
    std::vector<Clock::time_point> awaiting_since;
    // The last few attempts that ended without a first token: (start, end).
    std::array<std::pair<Clock::time_point, Clock::time_point>, 4> unanswered{};
    std::size_t unanswered_next = 0;
    // The estimate holds penalties of failures, not a measurement (cleared
    // by the next real first token, which replaces them).
    bool penalized = false;
    bool bounded = false;              // raised by lower bounds since the last first token
    std::uint32_t lessons_missed = 0;  // DeploymentStats::lessons_missed
    std::optional<Clock::time_point> last_attempt_start;
    DecayedEwma usual_awaiting;
    void stop_awaiting(Clock::time_point since, bool guessed);  // its lock held

    // The snapshot's figures of the two windows (percentiles, recent
    // evidence), written into `counters`. The router takes a snapshot per
    // candidate per request, under the entry's lock, and the windows change
    // only when a sample comes or goes: they are recomputed only when either
    // window's version or expiry says they may have changed, so a snapshot
    // between samples sorts nothing.
    void refresh_window_figures(Clock::time_point now);  // its lock held

   private:
    std::uint64_t figures_ttft_version_ = ~std::uint64_t{0};
    std::uint64_t figures_tps_version_ = ~std::uint64_t{0};
    std::uint64_t figures_pause_version_ = ~std::uint64_t{0};
    Clock::time_point figures_until_{};
  };
  // An entry and the lock that guards it. Each deployment (and effort) has
  // its own: requests to different deployments share no lock but mu_,
  // held only to find an entry. Never moved (std::map nodes stay put).
  struct Slot {
    explicit Slot(const StatsOptions& o) : entry(o) {}
    mutable AdaptiveMutex mu;
    Entry entry;
  };
  // Created on first use (an effort's entry starts from its deployment's
  // priors); takes mu_, or expects it held.
  Slot& slot(const std::string& key) const;
  Slot& slot_locked(const std::string& key) const;
  Slot* find(const std::string& key) const;  // nullptr if never used; takes mu_
  Entry fresh_from(Entry& old, const std::string& key) const;
  // The entry's lock held, from here down.
  Recorded record_into(Entry& e, const AttemptRecord& record, Clock::time_point now);
  DeploymentStats snapshot(Entry& e, Clock::time_point now) const;
  void snapshot_into(Entry& e, Clock::time_point now, DeploymentStats& s) const;
  DeploymentStats snapshot(Slot& s, Clock::time_point now) const;  // takes its lock
  // f(key, where the effort starts in it, slot) for each of the
  // deployment's effort entries (mu_ held; the entries' locks are f's).
  template <typename F>
  void for_each_effort(const std::string& deployment, F&& f) const;

  StatsOptions options_;
  // Guards the map (finding, creating an entry), held briefly; lock order:
  // mu_, then an entry's.
  mutable AdaptiveMutex mu_;
  mutable std::map<std::string, Slot> stats_;
};

}  // namespace llmgate::routing
