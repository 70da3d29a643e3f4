#include "routing/health.h"

#include <algorithm>
#include <cmath>
#include <utility>

namespace llmgate::routing {

const char* to_string(HealthState s) {
  switch (s) {
    case HealthState::kHealthy:
      return "healthy";
    case HealthState::kEjected:
      return "ejected";
    case HealthState::kProbing:
      return "probing";
    case HealthState::kCoolingDown:
      return "cooling_down";
  }
  return "unknown";
}

namespace {

// "3.2s" under ten seconds, "27s" above; rounded up, so never "0.0s".
std::string time_left(Clock::duration d) {
  const auto ms = std::chrono::ceil<std::chrono::milliseconds>(d).count();
  if (ms < 10'000) {
    const auto tenths = (ms + 99) / 100;
    return std::to_string(tenths / 10) + "." + std::to_string(tenths % 10) + "s";
  }
  return std::to_string((ms + 999) / 1000) + "s";
}

// Kept out only because of an ejection (so the cap and panic mode may route it).
bool out_for_ejection(const Availability& a) {
  return !a.routable && (a.state == HealthState::kEjected || a.state == HealthState::kProbing);
}

}  // namespace

HealthTracker::HealthTracker(config::Ejection options, std::uint64_t seed)
    : options_(options), rng_(seed) {}

const HealthTracker::Entry* HealthTracker::find(const std::string& deployment) const {
  auto it = entries_.find(deployment);
  return it == entries_.end() ? nullptr : &it->second;
}

bool HealthTracker::clean(const Entry& e) {
  return e.consecutive_failures == 0 && !e.ejected_until && !e.probe_taken_at &&
         !e.cooldown_until && !e.attempts_since_readmitted;
}

void HealthTracker::settle(Entry& e) {
  const bool unclean = !clean(e);
  if (unclean == e.unclean) return;
  e.unclean = unclean;
  if (unclean) {
    unclean_.fetch_add(1, std::memory_order_relaxed);
  } else {
    unclean_.fetch_sub(1, std::memory_order_relaxed);
  }
}

Clock::duration HealthTracker::ejection_time(std::uint32_t k) {
  const double base = std::chrono::duration<double, std::milli>(options_.base_duration).count();
  const double max = std::chrono::duration<double, std::milli>(options_.max_duration).count();
  const double backoff = std::min(max, base * std::exp2(static_cast<double>(k) - 1));
  // A uniform draw in [0, 1) from the top 53 bits: unlike
  // std::uniform_real_distribution, the same on every standard library, so
  // tests can predict it.
  const double u = static_cast<double>(rng_() >> 11) * 0x1.0p-53;
  const double jitter = std::clamp(options_.jitter, 0.0, 1.0);
  const double factor = 1 - jitter + 2 * jitter * u;
  return std::chrono::duration_cast<Clock::duration>(
      std::chrono::duration<double, std::milli>(backoff * factor));
}

void HealthTracker::eject(Entry& e, std::string cause, Clock::time_point now) {
  // The backoff starts over only after max_duration back in service.
  if (e.readmitted_at && now - *e.readmitted_at >= options_.max_duration) {
    e.ejections_in_a_row = 0;
  }
  ++e.ejections_in_a_row;
  ++e.ejections_total;
  e.ejected_until = now + ejection_time(e.ejections_in_a_row);
  e.ejected_at = now;
  e.ejection_cause = std::move(cause);
  e.consecutive_failures = 0;
  e.ejected_ops |= std::exchange(e.failed_ops, 0u);
  e.probe_taken_at.reset();
  e.last_probe_at.reset();
  e.readmitted_at.reset();
}

void HealthTracker::readmit(Entry& e, Clock::time_point now) {
  e.ejected_until.reset();
  e.consecutive_failures = 0;
  e.failed_ops = e.ejected_ops = 0;
  e.probe_taken_at.reset();
  e.readmitted_at = now;
  e.attempts_since_readmitted = 0;
}

std::optional<Clock::duration> HealthTracker::on_attempt(const std::string& deployment, bool failed,
                                                         double error_rate, std::uint64_t attempts,
                                                         Clock::time_point now, bool probe,
                                                         unsigned exercised) {
  // Every deployment clean: a success resets nothing.
  if (!failed && unclean_.load(std::memory_order_relaxed) == 0) return std::nullopt;
  std::lock_guard lock(mu_);
  Entry& e = entries_[deployment];
  struct Settle {
    HealthTracker& t;
    Entry& e;
    ~Settle() { t.settle(e); }
  } settle_after{*this, e};
  const auto ejected = [&](std::string cause) -> std::optional<Clock::duration> {
    eject(e, std::move(cause), now);
    return *e.ejected_until - now;
  };
  if (failed) e.failed_ops |= exercised;
  if (e.ejected_until) {
    if (now < *e.ejected_until) {
      // Still ejected: only a probe's result counts — a success that
      // exercised what failed ends the ejection; a failure, or a success
      // that proves nothing of it, frees the slot for the next probe.
      if (probe) (failed || !proves(e, exercised)) ? e.probe_taken_at.reset() : readmit(e, now);
      return std::nullopt;
    }
    // Half-open: this result is the probe's.
    if (failed) return ejected("probe failed");
    if (!proves(e, exercised)) {
      e.probe_taken_at.reset();  // half-open still: the next request probes
      return std::nullopt;
    }
    readmit(e, now);
    return std::nullopt;
  }
  if (e.attempts_since_readmitted) ++*e.attempts_since_readmitted;
  const bool waited_since_readmitted =
      !e.attempts_since_readmitted || *e.attempts_since_readmitted >= options_.min_requests;
  // The wait after a readmission is over once it has seen min_requests.
  if (e.attempts_since_readmitted && waited_since_readmitted) e.attempts_since_readmitted.reset();
  if (!failed) {
    e.consecutive_failures = 0;
    e.failed_ops = 0;
    return std::nullopt;
  }
  ++e.consecutive_failures;
  // A threshold of 0 consecutive failures disables that rule.
  if (options_.consecutive_failures > 0 &&
      e.consecutive_failures >= options_.consecutive_failures) {
    return ejected(std::to_string(e.consecutive_failures) + " consecutive failures");
  }
  const bool enough_attempts = attempts >= options_.min_requests && waited_since_readmitted;
  if (enough_attempts && error_rate >= options_.error_rate) {
    return ejected("error rate " + std::to_string(std::lround(error_rate * 100)) + "%");
  }
  return std::nullopt;
}

void HealthTracker::on_shared_ejection(const std::string& deployment,
                                       std::chrono::milliseconds after, Clock::time_point now) {
  if (after <= std::chrono::milliseconds::zero()) return;
  std::lock_guard lock(mu_);
  Entry& e = entries_[deployment];
  const auto until = now + std::min<Clock::duration>(after, options_.max_duration);
  if (e.ejected_until && *e.ejected_until >= until) return;
  if (!e.ejected_until || now >= *e.ejected_until) {
    // Not ejected here (or half-open): a new ejection starts now.
    e.ejected_at = now;
    e.probe_taken_at.reset();
    e.last_probe_at.reset();
  }
  e.ejected_until = until;
  e.ejection_cause = "by another replica";
  e.consecutive_failures = 0;
  e.readmitted_at.reset();
  settle(e);
}

void HealthTracker::on_retry_after(const std::string& deployment, std::chrono::milliseconds after,
                                   Clock::time_point now) {
  if (after <= std::chrono::milliseconds::zero()) return;
  std::lock_guard lock(mu_);
  Entry& e = entries_[deployment];
  const auto until = now + std::min<Clock::duration>(after, options_.max_duration);
  if (!e.cooldown_until || until > *e.cooldown_until) e.cooldown_until = until;
  settle(e);
}

bool HealthTracker::probe_slot_free(const Entry& e, Clock::time_point now) const {
  if (!e.probe_taken_at) return true;
  const Clock::duration timeout =
      std::max<Clock::duration>(options_.base_duration, kMinProbeTimeout);
  return now - *e.probe_taken_at >= timeout;
}

Availability HealthTracker::own_state(const Entry* e, Clock::time_point now) const {
  Availability a;
  if (!e) return a;
  if (e->cooldown_until && now < *e->cooldown_until) {
    a.state = HealthState::kCoolingDown;
    a.routable = false;
    a.until = e->cooldown_until;
    a.reason = "cooling down: upstream Retry-After, " + time_left(*a.until - now) + " left";
  } else if (e->ejected_until && now < *e->ejected_until) {
    a.state = HealthState::kEjected;
    a.routable = false;
    a.until = e->ejected_until;
    a.reason = "ejected: " + e->ejection_cause + ", " + time_left(*a.until - now) + " left";
    const auto interval = options_.probe_interval;
    const auto since = e->last_probe_at.value_or(e->ejected_at);
    if (interval > Clock::duration::zero() && now - since >= interval && probe_slot_free(*e, now)) {
      a.state = HealthState::kProbing;
      a.probe = a.routable = true;
      a.reason += "; probe";
    }
  } else if (e->ejected_until) {
    a.state = HealthState::kProbing;
    a.probe = probe_slot_free(*e, now);
    a.routable = a.probe;
    a.reason = a.probe ? "half-open: probe" : "half-open: probe in flight";
  }
  return a;
}

template <class IdAt>
void HealthTracker::check_ids(std::size_t n, IdAt id_at, Clock::time_point now,
                              std::vector<Availability>& out) {
  out.resize(n);
  if (unclean_.load(std::memory_order_relaxed) == 0) {
    // All healthy, nothing pending: each one's own state, without an entry.
    const Availability healthy = own_state(nullptr, now);
    for (Availability& a : out) a = healthy;
    return;
  }
  std::lock_guard lock(mu_);
  std::vector<std::size_t> ejected;  // indices kept out for ejection
  for (std::size_t i = 0; i < n; ++i) {
    const std::string& id = id_at(i);
    auto it = entries_.find(id);
    Entry* e = it == entries_.end() ? nullptr : &it->second;
    // A cooldown that is over is no longer anything (and the entry may be
    // clean again).
    if (e && e->cooldown_until && now >= *e->cooldown_until) {
      e->cooldown_until.reset();
      settle(*e);
    }
    Availability a = own_state(e, now);
    if (a.probe) {
      e->probe_taken_at = e->last_probe_at = now;  // so a repeated id sees it taken
      settle(*e);
    }
    if (out_for_ejection(a)) ejected.push_back(i);
    out[i] = std::move(a);
  }

  // The cap: the earliest ejected stay out, the rest are routed anyway. The
  // epsilon keeps 0.29 x 100 from flooring to 28.
  const double fraction = std::clamp(options_.max_ejected_fraction, 0.0, 1.0);
  const auto cap = static_cast<std::size_t>(std::floor(fraction * static_cast<double>(n) + 1e-9));
  if (ejected.size() > cap) {
    std::stable_sort(ejected.begin(), ejected.end(), [&](std::size_t a, std::size_t b) {
      return find(id_at(a))->ejected_at < find(id_at(b))->ejected_at;
    });
    for (std::size_t i = cap; i < ejected.size(); ++i) {
      out[ejected[i]].routable = true;
      out[ejected[i]].reason = "ejection cap: routed anyway";
    }
  }

  // Panic: never leave a request with nothing when ejection is all that
  // stands in the way. Cooldowns are the upstream's explicit "not now".
  const bool none_routable =
      std::none_of(out.begin(), out.end(), [](const Availability& a) { return a.routable; });
  if (none_routable && !ejected.empty()) {
    for (std::size_t i : ejected) {
      out[i].routable = true;
      out[i].panic = true;
      out[i].reason = "panic: all candidates ejected";
    }
  }
}

std::vector<Availability> HealthTracker::check(const std::vector<std::string>& ids,
                                               Clock::time_point now) {
  std::vector<Availability> out;
  check_ids(
      ids.size(), [&](std::size_t i) -> const std::string& { return ids[i]; }, now, out);
  return out;
}

void HealthTracker::check_model(const config::Model& model, Clock::time_point now,
                                std::vector<Availability>& out) {
  check_ids(
      model.deployments.size(),
      [&](std::size_t i) -> const std::string& { return model.deployments[i].id(); }, now, out);
}

void HealthTracker::release_probe(const std::string& deployment) {
  std::lock_guard lock(mu_);
  auto it = entries_.find(deployment);
  if (it == entries_.end()) return;
  it->second.probe_taken_at.reset();
  settle(it->second);
}

Availability HealthTracker::peek(const std::string& deployment, Clock::time_point now) const {
  std::lock_guard lock(mu_);
  Availability a = own_state(find(deployment), now);
  if (a.probe) {
    a.probe = false;
    a.reason = "half-open: next request probes";
  }
  return a;
}

void HealthTracker::set_options(const config::Ejection& options) {
  std::lock_guard lock(mu_);
  options_ = options;
}

void HealthTracker::forget(const std::string& deployment) {
  std::lock_guard lock(mu_);
  auto it = entries_.find(deployment);
  if (it == entries_.end()) return;
  if (it->second.unclean) unclean_.fetch_sub(1, std::memory_order_relaxed);
  entries_.erase(it);
}

std::uint64_t HealthTracker::ejections_total(const std::string& deployment) const {
  std::lock_guard lock(mu_);
  const Entry* e = find(deployment);
  return e ? e->ejections_total : 0;
}

}  // namespace llmgate::routing
