#include "routing/stats_registry.h"

#include <algorithm>
#include <array>
#include <span>

namespace llmgate::routing {

const char* to_string(AttemptOutcome o) {
  switch (o) {
    case AttemptOutcome::kSuccess:
      return "success";
    case AttemptOutcome::kConnectError:
      return "connect_error";
    case AttemptOutcome::kUpstreamStatus:
      return "upstream_status";
    case AttemptOutcome::kClientError:
      return "client_error";
    case AttemptOutcome::kTtftTimeout:
      return "ttft_timeout";
    case AttemptOutcome::kIdleTimeout:
      return "idle_timeout";
    case AttemptOutcome::kTruncated:
      return "truncated";
    case AttemptOutcome::kMalformed:
      return "malformed";
    case AttemptOutcome::kClientGone:
      return "client_gone";
    case AttemptOutcome::kTotalTimeout:
      return "total_timeout";
    case AttemptOutcome::kHedgeLost:
      return "hedge_lost";
    case AttemptOutcome::kCredentialError:
      return "credential_error";
  }
  return "unknown";
}

namespace {

double ms(std::chrono::steady_clock::duration d) {
  return std::chrono::duration<double, std::milli>(d).count();
}

// How long an attempt that produced no token waited for one: from the request
// written (else from the start of the attempt) to `now`; 0 if unknown.
double waited_ms(const AttemptRecord& r, Clock::time_point now) {
  auto since = r.request_sent != Clock::time_point{} ? r.request_sent : r.started;
  return since != Clock::time_point{} ? ms(now - since) : 0.0;
}

// A first token's base (less its prefill) is never under this share of it:
// a slope learnt too steep must not make a slow answer look instant.
constexpr double kMinBaseShare = 0.2;

// A prompt's bytes per token outside these is not its tokenizer's (a stored
// conversation counted too, a body of escapes): it calibrates nothing.
constexpr double kMinBytesPerToken = 1.0;
constexpr double kMaxBytesPerToken = 16.0;

// The smallest prompt whose token count calibrates bytes per token.
constexpr std::size_t kMinCalibrationBytes = 200;

bool waited_for_first_token(AttemptOutcome o) { return outcome_traits(o).waited_for_first_token; }
bool says_nothing(AttemptOutcome o) { return !outcome_traits(o).about_deployment; }

}  // namespace

StatsRegistry::Entry::Entry(const StatsOptions& o)
    : ttft(static_cast<double>(o.ttft_prior.count()), o.ttft_tau, o.relax_tau),
      ttft_window(o.window, o.window_max_samples),
      tps(o.ttft_tau),
      chars_per_s(o.ttft_tau),
      tps_window(o.window, o.window_max_samples),
      pause_window(o.window, o.window_max_samples),
      failures(o.error_tau),
      tps_prior(o.tps_prior),
      // The usual queue follows the load within about a second: the lag
      // before TTFT samples taken under a new load show it.
      usual_awaiting(o.ttft_tau / 10) {}

StatsRegistry::InFlight::InFlight(StatsRegistry& r, const std::string& deployment,
                                  Clock::time_point now, std::int64_t input_tokens)
    : registry_(r),
      since_(now),
      input_k_(static_cast<double>(std::max<std::int64_t>(0, input_tokens)) / 1000),
      awaiting_at_(now) {
  slot_ = &registry_.slot(deployment);
  std::lock_guard lock(slot_->mu);
  Entry& e = slot_->entry;
  joined_ = e.counters.awaiting_first_token;  // the queue this attempt joins
  ++e.counters.in_flight;
  ++e.counters.awaiting_first_token;
  // A long prompt's wait says nothing of a stall before its prefill is over.
  if (input_k_ > 0) {
    awaiting_at_ += std::chrono::duration_cast<Clock::duration>(
        std::chrono::duration<double, std::milli>(e.prefill.slope(e.prefill_prior) * input_k_));
  }
  e.awaiting_since.push_back(awaiting_at_);
  if (e.guesses_at(input_k_, now)) {
    guessed_ = true;
    ++e.counters.awaiting_guessed;
  }
  e.last_attempt_start = std::max(e.last_attempt_start.value_or(since_), since_);
}

void StatsRegistry::Entry::stop_awaiting(Clock::time_point since, bool guessed) {
  --counters.awaiting_first_token;
  if (guessed) --counters.awaiting_guessed;
  // Any one of equal start times will do.
  if (auto it = std::find(awaiting_since.begin(), awaiting_since.end(), since);
      it != awaiting_since.end()) {
    *it = awaiting_since.back();
    awaiting_since.pop_back();
  }
}

void StatsRegistry::InFlight::first_token(std::optional<std::chrono::microseconds> ttft,
                                          Clock::time_point now) {
  if (!awaiting_ && !ttft) return;
  std::lock_guard lock(slot_->mu);
  Entry& e = slot_->entry;
  if (std::exchange(awaiting_, false)) {
    e.stop_awaiting(awaiting_at_, guessed_);
    // The queue an answered attempt joined: what the deployment's measured
    // TTFT already includes.
    e.usual_awaiting.observe(static_cast<double>(joined_), since_);
  }
  // The fit waits for the record: how much of the prompt the provider read
  // from its cache is known from its usage, at the end (record_into).
  if (ttft) e.add_ttft(ms(*ttft), now, input_k_, /*fit=*/false);
}

void StatsRegistry::InFlight::end(Clock::time_point now) {
  if (ended_) return;
  std::lock_guard lock(slot_->mu);
  end_locked(now);
}

void StatsRegistry::InFlight::end_locked(Clock::time_point now) {
  ended_ = true;
  Entry& e = slot_->entry;
  --e.counters.in_flight;
  if (awaiting_) {
    e.stop_awaiting(awaiting_at_, guessed_);
    if (now > awaiting_at_)
      e.unanswered[e.unanswered_next++ % e.unanswered.size()] = {awaiting_at_, now};
  }
}

StatsRegistry::Recorded StatsRegistry::InFlight::finish(const AttemptRecord& r,
                                                        Clock::time_point now) {
  {
    std::lock_guard lock(slot_->mu);
    if (!ended_) end_locked(now);
    // The attempt's record goes where its InFlight counted it (its stats key).
    if (r.stats_id() == slot_->entry.counters.deployment)
      return registry_.record_into(slot_->entry, r, now);
  }
  return registry_.record(r, now);  // recorded under another key after all
}

StatsRegistry::InFlight::~InFlight() { end(Clock::now()); }

namespace {
constexpr std::string_view kEffortTag = " reasoning=";
}  // namespace

template <typename F>
void StatsRegistry::for_each_effort(const std::string& deployment, F&& f) const {
  std::string prefix = deployment;
  prefix.append(kEffortTag);
  for (auto it = stats_.lower_bound(prefix);
       it != stats_.end() && it->first.compare(0, prefix.size(), prefix) == 0; ++it) {
    f(it->first, prefix.size(), it->second);
  }
}

std::string stats_key(const std::string& deployment, std::string_view effort) {
  if (effort.empty()) return deployment;
  std::string key;
  key.reserve(deployment.size() + kEffortTag.size() + effort.size());
  return key.append(deployment).append(kEffortTag).append(effort);
}

StatsRegistry::Slot& StatsRegistry::slot(const std::string& key) const {
  std::lock_guard lock(mu_);
  return slot_locked(key);
}

StatsRegistry::Slot& StatsRegistry::slot_locked(const std::string& key) const {
  if (auto it = stats_.find(key); it != stats_.end()) return it->second;
  // What may throw comes before the entry enters the map: a half-made one
  // would stay there.
  std::optional<std::pair<double, double>> priors;  // an effort's: its deployment's
  double prefill_prior = config::kDefaultPrefillMsPer1k;
  if (auto tag = key.find(kEffortTag); tag != std::string::npos) {
    Slot& base = slot_locked(key.substr(0, tag));
    std::lock_guard base_lock(base.mu);
    priors.emplace(base.entry.ttft.prior(), base.entry.tps_prior);
    prefill_prior = base.entry.prefill_prior;
  }
  std::string name = key;
  Slot& s = stats_.try_emplace(key, options_).first->second;
  // No one else sees it before mu_ is released.
  s.entry.counters.deployment = std::move(name);
  if (priors) {
    s.entry.ttft.set_prior(priors->first);
    s.entry.tps_prior = priors->second;
    s.entry.prefill_prior = prefill_prior;
  }
  return s;
}

StatsRegistry::Slot* StatsRegistry::find(const std::string& key) const {
  std::lock_guard lock(mu_);
  auto it = stats_.find(key);
  return it == stats_.end() ? nullptr : &it->second;
}

StatsRegistry::Recorded StatsRegistry::record(const AttemptRecord& r, Clock::time_point now) {
  Slot& s = slot(r.stats_id());
  std::lock_guard lock(s.mu);
  return record_into(s.entry, r, now);
}

StatsRegistry::Recorded StatsRegistry::record_into(Entry& e, const AttemptRecord& r,
                                                   Clock::time_point now) {
  DeploymentStats& s = e.counters;
  auto recorded = [&] { return Recorded{e.failures.error_rate(now), s.attempts}; };
  ++s.attempts;
  s.last_outcome = r.outcome;
  if (r.output_tokens)
    s.output_tokens += static_cast<std::uint64_t>(std::max<std::int64_t>(0, *r.output_tokens));
  // The prompt's bytes per input token, from what the provider counted.
  // (A prompt too small to say much, or with media, teaches nothing.)
  // (Nor one whose tokens are not its body's: a continued conversation the
  // provider stored, a ratio no tokenizer makes.)
  if (r.calibrates && r.input_tokens && *r.input_tokens > 0 && r.prompt_media == 0 &&
      r.prompt_bytes >= kMinCalibrationBytes &&
      static_cast<double>(r.prompt_bytes) >=
          kMinBytesPerToken * static_cast<double>(*r.input_tokens) &&
      static_cast<double>(r.prompt_bytes) <=
          kMaxBytesPerToken * static_cast<double>(*r.input_tokens)) {
    s.calibration_bytes = s.calibration_bytes * DeploymentStats::kCalibrationDecay +
                          static_cast<double>(r.prompt_bytes);
    s.calibration_tokens = s.calibration_tokens * DeploymentStats::kCalibrationDecay +
                           static_cast<double>(*r.input_tokens);
    ++s.calibration_samples;
  }
  // A first token that arrived is a real TTFT sample, whatever happened after
  // it — even if the client then left. An unstreamed answer's is the whole
  // answer (the client sees nothing before it).
  const auto ttft = r.ttft();
  // Prompt caching: does it report cached input, and how much of what the
  // router took it to hold did it read from its cache.
  if (r.outcome == AttemptOutcome::kSuccess && r.input_tokens && *r.input_tokens > 0) {
    if (r.cached_input_tokens > 0) s.reports_cached = true;
    if (r.cache_held_tokens >= DeploymentStats::kMinCachedTokens) {
      const double share = std::clamp(
          static_cast<double>(r.cached_input_tokens) / static_cast<double>(r.cache_held_tokens),
          0.0, 1.0);
      s.cache_share_measured = s.cache_share_measured * DeploymentStats::kCacheShareDecay +
                               share * (1 - DeploymentStats::kCacheShareDecay);
      ++s.cache_share_samples;
    }
  }
  const double k = r.uncached_k();
  if (ttft) e.lessons_missed = 0;
  if (ttft && !r.ttft_recorded) e.add_ttft(ms(*ttft), now, k);
  // (Taken at the first token by the estimators, against the prefill the
  // router expected: the fit's sample is this, against what was read.)
  if (ttft && r.ttft_recorded) e.prefill.add(k, ms(*ttft), e.prefill_prior);
  if (r.unstreamed && r.outcome == AttemptOutcome::kSuccess) {
    if (auto answer = r.answer_time()) {
      e.add_ttft(ms(*answer), now, k);
      ++s.unstreamed_samples;
      s.last_ttft_ms = ms(*answer);
    }
  }
  if (r.outcome == AttemptOutcome::kHedgeLost && !ttft) {
    // A side cancelled before its request was written (connecting, waiting
    // for a connection) says nothing about its first token: the time it took
    // to notice the cancellation is a connect's, not a TTFT's. Nor does one
    // that had its answer, a refusal held while the other side answered.
    if (r.request_sent == Clock::time_point{} || (r.http_status != 0 && r.http_status != 200))
      return recorded();
    // Its TTFT is at least the time it ran: a lower bound, so it may raise
    // the estimate but never lower it. Not a failure. The estimate is of
    // the median, and one attempt slower than the other side is its tail
    // as often as a slowdown: it raises the estimate only to the median
    // that wait bounds (TtftLevel::median_bound).
    const double waited = waited_ms(r, now);
    const double elapsed = e.base_of(waited, k);
    if (elapsed <= 0) return recorded();  // decided before it was sent: no bound
    // A size race lost (the fit guessed at this size): the prefill is at
    // least the wait beyond the level, per 1k tokens -- a floor under the
    // slope while the fit has nothing better, so the guess that lost the
    // race is not raced again (docs/routing.md, "Exploring a prompt size").
    if (e.guesses_at(k, now)) {
      const bool held = e.prefill_floor_now(now) > 0;
      const double floor = std::max(0.0, (waited - e.ttft_estimate(now)) / k);
      e.prefill_floor = std::max(held ? e.prefill_floor : 0, floor);
      e.prefill_floor_k = std::max(held ? e.prefill_floor_k : 0, k);
      e.prefill_floor_at = now;
    }
    e.ttft_window.add_censored(elapsed, now, /*race=*/true);
    const bool raised = e.ttft_at_least(TtftLevel::median_bound(elapsed, e.ttft.spread()), now);
    if (raised) e.bounded = true;
    // A lesson that stopped before its first token taught something only if
    // its wait raised the estimate (slower than believed: a slowdown found);
    // one that waited less than the estimate says nothing new (the winner's
    // answer ended first) and makes the next re-check wait longer.
    if (r.learning) e.lessons_missed = raised ? 0 : e.lessons_missed + 1;
    return recorded();
  }
  // A lesson that lost its race and ran on to its first token: that is its
  // last answer's TTFT (what a re-check for a TTFT limit asks).
  if (r.outcome == AttemptOutcome::kHedgeLost && ttft) s.last_ttft_ms = ms(*ttft);
  if (says_nothing(r.outcome)) return recorded();
  const bool ok = r.outcome == AttemptOutcome::kSuccess;
  ok ? ++s.successes : ++s.failures;
  e.failures.record(!ok, now);

  if (ttft) {
    s.last_ttft_ms = ms(*ttft);
    // An answer at the size of a lost race's floor: the fit has it now.
    if (k >= e.prefill_floor_k / 2) e.prefill_floor = 0;
  } else if (waited_for_first_token(r.outcome)) {
    // Gave up waiting: the TTFT is not known, only that it is more than the
    // wait (a censored sample). The window keeps it as such (Kaplan-Meier),
    // so deadlines and percentiles see a deployment that got slower than its
    // deadline instead of keeping the fast level they had. The estimate
    // takes the wait — what the client paid — like any slow sample: at once
    // for a second miss in a row, decayed in for an isolated one (a rare
    // stall must not bench a deployment that answers the other 99 fast).
    const double waited = e.base_of(waited_ms(r, now), k);
    e.ttft_window.add_censored(waited, now);
    if (e.failures.consecutive_failures() >= 2) {
      if (e.ttft_at_least(waited, now)) e.bounded = true;
    } else if (waited > e.ttft_estimate(now)) {
      e.ttft.observe_decayed(waited, now);
      e.bounded = true;
    }
  } else if (!ok) {
    // Failed without a first token (connect error, 5xx, a malformed
    // stream): a penalty sample, at least as slow as the time it took to
    // fail and `failure_penalty_factor` x the typical TTFT — the window's
    // median, or the prior when nothing was measured — so repeated failures
    // do not compound (a base of the estimate itself would double it each
    // time). It never lowers the estimate. A failure in a row takes effect
    // at once (raises the level); an isolated one decays in, so a deployment that
    // fails 1 request in 10 is not abandoned for the other 9.
    // (Nothing sent, nothing prefilled.)
    const double elapsed =
        e.base_of(waited_ms(r, now), r.request_sent == Clock::time_point{} ? 0.0 : k);
    const double typical = e.ttft_anchor(now);
    const double current = e.ttft.estimate(now, typical);
    const double penalty = std::max(elapsed, options_.failure_penalty_factor * typical);
    if (penalty > current) {
      if (e.failures.consecutive_failures() >= 2) {
        e.ttft.observe_at_least(penalty, now, typical);
      } else {
        e.ttft.observe_decayed(penalty, now);
      }
      e.penalized = true;
    }
  }

  if (ok && r.longest_pause) e.pause_window.add(ms(*r.longest_pause), now);
  if (ok && r.output_tokens && *r.output_tokens >= options_.min_tokens_for_tps) {
    if (auto tps = r.tps()) {
      e.tps.observe(*tps, now);
      e.tps_window.add(*tps, now);
      s.last_tps = *tps;
      double span = std::chrono::duration<double>(*r.last_token - *r.first_token).count();
      if (span > 0) e.chars_per_s.observe(static_cast<double>(r.output_chars) / span, now);
    }
  }
  return recorded();
}

void StatsRegistry::Entry::refresh_window_figures(Clock::time_point now) {
  if (ttft_window.version() == figures_ttft_version_ &&
      tps_window.version() == figures_tps_version_ &&
      pause_window.version() == figures_pause_version_ && now < figures_until_) {
    return;
  }
  DeploymentStats& s = counters;
  // p50, p90, p95, p99, into arrays: nothing allocated.
  static constexpr std::array<double, 4> kQs{0.5, 0.9, 0.95, 0.99};
  std::array<std::optional<double>, 4> q;
  ttft_window.quantiles(kQs, now, q, &s.ttft_quantile_lower_bound);
  s.ttft_p50_ms = q[0];
  s.ttft_p90_ms = q[1];
  s.ttft_p95_ms = q[2];
  s.ttft_p99_ms = q[3];
  s.ttft_censored = ttft_window.censored(now);
  s.ttft_lost_races = ttft_window.lost_races(now);
  if (s.ttft_censored != 0) ttft_window.observed_quantiles(kQs, now, q);
  s.ttft_answered_p50_ms = q[0];
  s.ttft_answered_p90_ms = q[1];
  s.ttft_answered_p95_ms = q[2];
  s.ttft_answered_p99_ms = q[3];
  s.ttft_p95_lower_bound = false;
  if (s.ttft_quantile_lower_bound) {
    std::optional<double> p95;
    ttft_window.quantiles(std::span<const double>(&kQs[2], 1), now,
                          std::span<std::optional<double>>(&p95, 1), &s.ttft_p95_lower_bound);
  }
  ttft_window.recent_quantiles(kQs, now, kRecentSamples, q);
  s.ttft_recent_p50_ms = q[0];
  s.ttft_recent_p90_ms = q[1];
  s.ttft_recent_p95_ms = q[2];
  s.ttft_recent_p99_ms = q[3];
  s.ttft_last_few_max_ms = ttft_window.recent_max_observed(now, kConfirmSamples);
  s.tps_p50 = tps_window.quantile(0.5, now);
  s.pause_p95_ms = pause_window.quantile(0.95, now);
  s.pause_samples = pause_window.count(now);
  // The queries above evicted what `now` expires: the figures hold until a
  // sample comes or goes.
  figures_ttft_version_ = ttft_window.version();
  figures_tps_version_ = tps_window.version();
  figures_pause_version_ = pause_window.version();
  figures_until_ =
      std::min({ttft_window.expires_at(), tps_window.expires_at(), pause_window.expires_at()});
}

DeploymentStats StatsRegistry::snapshot(Entry& e, Clock::time_point now) const {
  DeploymentStats s;
  snapshot_into(e, now, s);
  return s;
}

void StatsRegistry::snapshot_into(Entry& e, Clock::time_point now, DeploymentStats& s) const {
  e.refresh_window_figures(now);
  s = e.counters;  // (assigned: the id's string reuses what `s` holds)
  s.ttft_estimate_ms = e.ttft_estimate(now);
  s.ttft_spread = e.ttft.spread();
  s.ttft_samples = e.ttft.samples();
  s.last_sample = e.ttft.last_sample();
  s.ttft_penalized = e.penalized;
  s.ttft_bounded = e.bounded;
  s.lessons_missed = e.lessons_missed;
  s.prefill_prior_ms_per_1k = e.prefill_prior;
  s.prefill_floor_ms_per_1k = e.prefill_floor_now(now);
  s.prefill_ms_per_1k = std::max(e.prefill.slope(e.prefill_prior), s.prefill_floor_ms_per_1k);
  s.prefill_spread = e.prefill.spread();
  s.prefill_mean_k = e.prefill.mean_k();
  s.prefill_samples = e.prefill.samples();
  s.last_attempt_start = e.last_attempt_start;
  s.usual_awaiting = e.usual_awaiting.value().value_or(0);
  if (e.awaiting_since.size() >= 2) {
    // The age of the second-oldest attempt still waiting for a first token:
    // two attempts have waited at least this long, which a stall shows long
    // before any of them times out, and one slow request in the tail alone
    // does not. (The oldest alone would be any tail request; the median
    // would follow a stall at half its speed.)
    // The two oldest in one pass (no copy to partition).
    Clock::time_point oldest = Clock::time_point::max(), second = Clock::time_point::max();
    for (const auto t : e.awaiting_since) {
      if (t < oldest) {
        second = oldest;
        oldest = t;
      } else if (t < second) {
        second = t;
      }
    }
    s.awaiting_lower_bound_ms = std::max(0.0, ms(now - second));
  }
  s.ttft_prior_ms = e.ttft.prior();
  s.tps_estimate = e.tps.value().value_or(e.tps_prior);
  s.chars_per_s_estimate = e.chars_per_s.value();
  s.error_rate = e.failures.error_rate(now);
  s.consecutive_failures = e.failures.consecutive_failures();
}

void StatsRegistry::record_first_token(const std::string& deployment,
                                       std::chrono::microseconds ttft, Clock::time_point now) {
  Slot& s = slot(deployment);
  std::lock_guard lock(s.mu);
  s.entry.add_ttft(ms(ttft), now);
}

void StatsRegistry::record_speed(const std::string& deployment, double chars_per_s,
                                 Clock::time_point now) {
  if (!(chars_per_s > 0)) return;
  Slot& s = slot(deployment);
  std::lock_guard lock(s.mu);
  Entry& e = s.entry;
  double per_token = kDefaultCharsPerToken;
  if (e.tps.value() && e.chars_per_s.value() && *e.tps.value() > 0) {
    per_token = *e.chars_per_s.value() / *e.tps.value();
  }
  e.tps.observe(chars_per_s / per_token, now);
  e.chars_per_s.observe(chars_per_s, now);
}

double StatsRegistry::Entry::base_of(double ms, double k) const {
  if (k <= 0) return ms;
  return std::max(ms * kMinBaseShare, ms - prefill.slope(prefill_prior) * k);
}

void StatsRegistry::Entry::add_ttft(double raw_ms, Clock::time_point now, double k, bool fit) {
  // The prefill fit sees the first token as it came; the estimators its
  // base, so requests of every size compare on one level.
  if (fit) prefill.add(k, raw_ms, prefill_prior);
  const double ttft_ms = base_of(raw_ms, k);
  // After failures the estimate holds their penalties, not a measurement: a
  // real first token replaces them (a deployment that came back wins its
  // traffic back at once, instead of decaying out of a penalty for tens of
  // seconds). Likewise, when the first token is far under an estimate made
  // of lower bounds (timeouts, lost hedges) or a stale one (nothing
  // measured for kStaleEstimate, as for a deployment left during a slow
  // spell): the deployment is not what that said (it recovered), and decay
  // would keep it away for tau. Otherwise the level takes the sample in
  // (its change detector decides whether it is noise or a change).
  const auto last = ttft.last_sample();
  const bool stale = last && now - *last >= kStaleEstimate;
  // A first token that is mostly prefill says little of the base: the
  // slope's error, times its many tokens, is easily more than the base
  // itself. It moves the estimate gradually, outside the change detector.
  // (Mostly: more than the base, this sample's or the estimate's -- an
  // estimate far too low, as after a mismeasured first sample, must not
  // turn every ordinary answer into "mostly prefill" and keep it there.)
  const double estimate = ttft_estimate(now);
  const bool mostly_prefill = raw_ms - ttft_ms > std::max(estimate, ttft_ms);
  if (penalized || ((bounded || stale) && ttft_ms < estimate * TtftLevel::kRecoveryRatio)) {
    ttft.restart(ttft_ms, now);
    penalized = false;
  } else if (mostly_prefill) {
    ttft.observe_decayed(ttft_ms, now);
  } else {
    ttft.observe(ttft_ms, now);
  }
  bounded = false;
  ttft_window.add(ttft_ms, now);
}

void StatsRegistry::set_prior(const std::string& deployment, double ttft_ms, double tps,
                              double prefill_ms_per_1k) {
  Slot& s = slot(deployment);
  std::lock_guard lock(s.mu);
  Entry& e = s.entry;
  e.ttft.set_prior(ttft_ms);
  e.tps_prior = tps;
  e.prefill_prior = prefill_ms_per_1k;
}

StatsRegistry::Entry StatsRegistry::fresh_from(Entry& old, const std::string& key) const {
  Entry fresh(options_);
  fresh.counters.deployment = key;
  fresh.counters.in_flight = old.counters.in_flight;
  fresh.counters.awaiting_first_token = old.counters.awaiting_first_token;
  fresh.counters.awaiting_guessed = old.counters.awaiting_guessed;
  fresh.awaiting_since = std::move(old.awaiting_since);
  fresh.ttft.set_prior(old.ttft.prior());
  fresh.tps_prior = old.tps_prior;
  fresh.prefill_prior = old.prefill_prior;
  return fresh;
}

void StatsRegistry::reset(const std::string& deployment) {
  std::lock_guard lock(mu_);
  // The deployment's entry and its efforts' (the attempts in flight stay counted).
  if (auto it = stats_.find(deployment); it != stats_.end()) {
    std::lock_guard entry_lock(it->second.mu);
    it->second.entry = fresh_from(it->second.entry, deployment);
  }
  for_each_effort(deployment, [&](const std::string& key, std::size_t, Slot& s) {
    std::lock_guard entry_lock(s.mu);
    s.entry = fresh_from(s.entry, key);
  });
}

DeploymentStats StatsRegistry::snapshot(Slot& s, Clock::time_point now) const {
  std::lock_guard lock(s.mu);
  return snapshot(s.entry, now);
}

DeploymentStats StatsRegistry::get_or_prior(const std::string& deployment,
                                            Clock::time_point now) const {
  return snapshot(slot(deployment), now);
}

void StatsRegistry::get_or_prior(const std::string& deployment, Clock::time_point now,
                                 DeploymentStats& into) const {
  Slot& s = slot(deployment);
  std::lock_guard lock(s.mu);
  snapshot_into(s.entry, now, into);
}

std::optional<DeploymentStats> StatsRegistry::get(const std::string& deployment,
                                                  Clock::time_point now) const {
  Slot* s = find(deployment);
  if (!s) return std::nullopt;
  return snapshot(*s, now);
}

std::size_t StatsRegistry::waited_at_least(const std::string& deployment,
                                           std::chrono::milliseconds d,
                                           Clock::time_point now) const {
  const Slot* s = find(deployment);
  if (!s) return 0;
  std::lock_guard lock(s->mu);
  const Entry& e = s->entry;
  auto n = std::count_if(e.awaiting_since.begin(), e.awaiting_since.end(),
                         [&](Clock::time_point t) { return now - t >= d; });
  n += std::count_if(e.unanswered.begin(), e.unanswered.end(),
                     [&](const auto& u) { return u.second - u.first >= d && now - u.second <= d; });
  return static_cast<std::size_t>(n);
}

std::vector<std::pair<std::string, DeploymentStats>> StatsRegistry::efforts_of(
    const std::string& deployment, Clock::time_point now) const {
  // The entries found under the map's lock, each snapshot under its own
  // after it (map nodes stay put): a scrape does not hold up requests.
  std::vector<std::pair<std::string, Slot*>> found;
  {
    std::lock_guard lock(mu_);
    for_each_effort(deployment, [&](const std::string& key, std::size_t effort_at, Slot& s) {
      found.emplace_back(key.substr(effort_at), &s);
    });
  }
  std::vector<std::pair<std::string, DeploymentStats>> out;
  out.reserve(found.size());
  for (auto& [effort, s] : found) out.emplace_back(std::move(effort), snapshot(*s, now));
  return out;
}

std::vector<DeploymentStats> StatsRegistry::all(Clock::time_point now) const {
  std::vector<Slot*> found;  // as in efforts_of()
  {
    std::lock_guard lock(mu_);
    found.reserve(stats_.size());
    for (auto& [k, v] : stats_) found.push_back(&v);
  }
  std::vector<DeploymentStats> out;
  out.reserve(found.size());
  for (Slot* s : found) out.push_back(snapshot(*s, now));
  return out;
}

}  // namespace llmgate::routing
