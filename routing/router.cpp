#include "routing/router.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>
#include <numeric>

#include "config/decimal.h"
#include "routing/decide_stages.h"

namespace llmgate::routing {
namespace {

// An estimate this far above a p95 known only as a lower bound did not come
// from those waits (they are lost races far under the TTFT): the deadline
// keeps to the estimate. Nearer, the estimate is the waits themselves.
constexpr double kEstimateAboveBounds = 1.5;

using config::Policy;
using stages::SoftResult;
using stages::Working;
using std::chrono::milliseconds;

// `before`, `v` with `precision` decimals ("%.*f"), `after`; appended, no
// temporary string.
void append_num(std::string& out, std::string_view before, double v, int precision,
                std::string_view after = {}) {
  out += before;
  config::append_fixed(out, v, precision);
  out += after;
}

void append_int(std::string& out, long long v) {
  char buf[24];
  const auto r = std::to_chars(buf, buf + sizeof buf, v);
  out.append(buf, r.ptr);
}

// "950", "12.3k", "1.2M": a token count as a reader takes it in.
void append_tokens(std::string& out, std::int64_t n) {
  if (n < 1000) {
    append_int(out, static_cast<long long>(n));
  } else if (n < 1'000'000) {
    append_num(out, "", static_cast<double>(n) / 1000, n < 100'000 ? 1 : 0, "k");
  } else {
    append_num(out, "", static_cast<double>(n) / 1'000'000, 1, "M");
  }
}

std::string area_of(const std::string& region) { return region.substr(0, region.find('-')); }

bool contains(const std::vector<std::string>& list, const std::string& s) {
  return std::find(list.begin(), list.end(), s) != list.end();
}

// route.order names a provider ("groq") or a deployment id ("groq/llama").
std::optional<std::size_t> order_rank(const std::vector<std::string>& order,
                                      const config::Deployment& d) {
  for (std::size_t i = 0; i < order.size(); ++i) {
    if (order[i] == d.provider || order[i] == d.id()) return i;
  }
  return std::nullopt;
}

// One of four values by percentile.
std::optional<double> at(config::Percentile p, std::optional<double> p50, std::optional<double> p90,
                         std::optional<double> p95, std::optional<double> p99) {
  switch (p) {
    case config::Percentile::kP50:
      return p50;
    case config::Percentile::kP90:
      return p90;
    case config::Percentile::kP95:
      return p95;
    case config::Percentile::kP99:
      return p99;
  }
  return std::nullopt;
}

// The window's percentile (Kaplan-Meier with the timeouts).
std::optional<double> ttft_at(const DeploymentStats& s, config::Percentile p) {
  return at(p, s.ttft_p50_ms, s.ttft_p90_ms, s.ttft_p95_ms, s.ttft_p99_ms);
}

// The percentile of the attempts that answered (hedge delays).
std::optional<double> answered_ttft_at(const DeploymentStats& s, config::Percentile p) {
  return at(p, s.ttft_answered_p50_ms, s.ttft_answered_p90_ms, s.ttft_answered_p95_ms,
            s.ttft_answered_p99_ms);
}

// The recent-evidence percentile (the last kRecentSamples samples), else the
// window's.
std::optional<double> recent_ttft_at(const DeploymentStats& s, config::Percentile p) {
  auto v =
      at(p, s.ttft_recent_p50_ms, s.ttft_recent_p90_ms, s.ttft_recent_p95_ms, s.ttft_recent_p99_ms);
  return v ? v : ttft_at(s, p);
}

bool data_driven(Policy p) {
  return p == Policy::kLatency || p == Policy::kThroughput || p == Policy::kE2e ||
         p == Policy::kBalanced;
}

// The policies whose score counts the expected TTFT.
bool times_first_token(Policy p) {
  return p == Policy::kLatency || p == Policy::kE2e || p == Policy::kBalanced;
}

// Min-max normalisation to [0, 1]; all equal -> 0.
std::vector<double> normalised(const std::vector<double>& v) {
  auto [lo, hi] = std::minmax_element(v.begin(), v.end());
  std::vector<double> out(v.size(), 0.0);
  if (v.empty() || *hi - *lo <= 0) return out;
  for (std::size_t i = 0; i < v.size(); ++i) out[i] = (v[i] - *lo) / (*hi - *lo);
  return out;
}

// std::stable_sort, without its temporary buffer (an allocation per call) for
// the few candidates a model has: a stable insertion sort up to 16.
template <class It, class Less>
void stable_sort_few(It first, It last, Less less) {
  if (last - first > 16) {
    std::stable_sort(first, last, less);
    return;
  }
  for (It i = first; i != last; ++i) {
    if (i == first || !less(*i, *(i - 1))) continue;
    auto moving = std::move(*i);
    It j = i;
    for (; j != first && less(moving, *(j - 1)); --j) *j = std::move(*(j - 1));
    *j = std::move(moving);
  }
}

}  // namespace

namespace {

// `bytes` of prompt text and `media` inline media in `stats`' deployment's tokens.
std::int64_t tokens_of(std::size_t bytes, std::uint32_t media, const DeploymentStats& stats) {
  return static_cast<std::int64_t>(static_cast<double>(bytes) / stats.bytes_per_input_token()) +
         static_cast<std::int64_t>(media) * kMediaPartTokens;
}

}  // namespace

std::int64_t estimated_input_tokens(const RouteRequest& request, const DeploymentStats& stats) {
  return tokens_of(request.prompt_bytes, request.prompt_media, stats);
}

double ttft_prior_ms(const config::Deployment& d, const config::Provider& p,
                     const std::string& gateway_region, milliseconds base) {
  if (d.expected_ttft) return static_cast<double>(d.expected_ttft->count());
  double extra = 60;
  if (!gateway_region.empty() && !p.region.empty()) {
    extra = p.region == gateway_region                     ? 0
            : area_of(p.region) == area_of(gateway_region) ? 30
                                                           : 120;
  }
  return static_cast<double>(base.count()) + extra;
}

namespace stages {

// Stage 1, candidates under the hard constraints and health: the request's
// provider, region, price and order filters, then what health allows. Every
// other deployment is in out.skipped with why; none left sets out's error
// (429 when only Retry-After cooldowns stand in the way, else 503).
void eligible(const RouteRequest& request, const std::vector<DeploymentView>& views,
              Clock::time_point now, RouteDecision& out, std::vector<Working>& hard_ok) {
  const config::Model& model = *request.model;
  const config::RoutingPolicy& policy = request.policy;
  const config::Constraints& cons = policy.constraints;
  hard_ok.clear();
  hard_ok.reserve(model.deployments.size());
  std::optional<Clock::time_point> earliest_cooldown_end;
  bool only_cooling = true;  // among those the request's filters allow
  // Deployments the request's filters allow, by whether the prompt fits.
  std::size_t too_large = 0, fit = 0;
  std::int64_t largest_window = 0, largest_input = 0;
  std::int64_t model_largest_window = 0;  // of every deployment with one
  for (const auto& d : model.deployments)
    model_largest_window = std::max(model_largest_window, d.context_window.value_or(0));
  for (std::size_t i = 0; i < model.deployments.size(); ++i) {
    const config::Deployment& d = model.deployments[i];
    const config::Provider* p = request.cfg->find_provider(d.provider);
    if (p == nullptr) continue;
    const DeploymentView& v = views[i];
    auto skip = [&](std::string reason) { out.skipped.push_back({d.id(), std::move(reason)}); };
    if (!d.serves(request.operation)) {
      skip(std::string("does not serve ") + config::to_string(request.operation));
      continue;
    }
    if (!request.pinned_provider.empty() && d.provider != request.pinned_provider) {
      skip(request.pinned_because);
      continue;
    }
    if (!cons.allow_providers.empty() && !contains(cons.allow_providers, d.provider)) {
      skip("provider not allowed");
      continue;
    }
    if (contains(cons.deny_providers, d.provider)) {
      skip("provider denied");
      continue;
    }
    if (!cons.regions.empty() && !contains(cons.regions, p->region)) {
      skip("region " + (p->region.empty() ? std::string("(unknown)") : p->region) + " not allowed");
      continue;
    }
    if (cons.max_output_price_per_1m && d.price.output_per_1m > *cons.max_output_price_per_1m) {
      skip("price $" + config::fixed(d.price.output_per_1m, 2) + "/M out over the cap of $" +
           config::fixed(*cons.max_output_price_per_1m, 2));
      continue;
    }
    if (!policy.allow_fallbacks && !request.order.empty() && !order_rank(request.order, d)) {
      skip("not in route.order and fallbacks are off");
      continue;
    }
    // Too large for its context window (prompt and output together): a
    // provider would refuse it with a 400 (docs/routing.md, "Context windows").
    // The estimate is rough: a deployment with the model's largest window
    // is skipped only when the prompt is clearly over it (kContextMargin),
    // and a near miss is the provider's to judge.
    const std::int64_t input = estimated_input_tokens(request, v.stats);
    const std::int64_t need = input + request.max_tokens.value_or(0);
    const bool largest = d.context_window && *d.context_window >= model_largest_window;
    if (d.context_window && static_cast<double>(need) > static_cast<double>(*d.context_window) *
                                                            (largest ? kContextMargin : 1.0)) {
      std::string why = "prompt ~";
      append_tokens(why, input);
      if (request.max_tokens) {
        why += " + max_tokens ";
        append_int(why, static_cast<long long>(*request.max_tokens));
      }
      why += " over its context window of ";
      append_tokens(why, *d.context_window);
      skip(std::move(why));
      if (*d.context_window >= largest_window) {
        largest_window = *d.context_window;
        largest_input = input;
      }
      ++too_large;
      continue;
    }
    ++fit;
    if (!v.health.routable) {
      skip(v.health.reason);
      if (v.health.state == HealthState::kCoolingDown && v.health.until) {
        earliest_cooldown_end =
            std::min(earliest_cooldown_end.value_or(*v.health.until), *v.health.until);
      } else {
        only_cooling = false;
      }
      continue;
    }
    PlannedCandidate pc;
    pc.candidate = Candidate{&d, p, request.cfg->timeouts_for(*p, d)};
    pc.input_tokens = input;
    if (const PromptAffinity::Held* held = request.cached.of(d.id_hash())) {
      const std::int64_t tokens =
          std::min(input, tokens_of(held->prefix.bytes, held->prefix.media, v.stats));
      if (tokens >= DeploymentStats::kMinCachedTokens) {
        pc.cache_held_tokens = tokens;
        pc.cached_tokens = std::llround(static_cast<double>(tokens) * v.stats.cache_share());
        pc.affinity_by_key = held->by_key;
      }
    }
    pc.probe = v.health.probe;
    pc.panic = v.health.panic;
    hard_ok.push_back(Working{pc, &v, std::nullopt});
  }

  if (hard_ok.empty()) {
    std::string why;
    for (const auto& s : out.skipped)
      why += (why.empty() ? "" : "; ") + s.deployment + ": " + s.reason;
    if (too_large > 0 && fit == 0) {
      // The request itself is too large for every deployment that could
      // serve it: the client's to change, as a provider would say.
      out.error_status = 400;
      out.error_message = "the prompt (~";
      append_tokens(out.error_message, largest_input);
      out.error_message += " tokens";
      if (request.max_tokens) {
        out.error_message += " + max_tokens ";
        append_int(out.error_message, static_cast<long long>(*request.max_tokens));
      }
      out.error_message += ") is larger than the context window of every deployment of model \"" +
                           model.name + "\" (the largest holds ";
      append_tokens(out.error_message, largest_window);
      out.error_message += " tokens)";
    } else if (earliest_cooldown_end && only_cooling) {
      out.error_status = 429;
      auto left = std::chrono::duration_cast<milliseconds>(*earliest_cooldown_end - now).count();
      out.retry_after_s = static_cast<int>(std::max<std::int64_t>(1, (left + 999) / 1000));
      out.error_message = "every deployment of model \"" + model.name +
                          "\" is rate limited upstream (Retry-After): " + why;
    } else {
      out.error_status = 503;
      out.error_message = "no deployment of model \"" + model.name +
                          "\" can serve this request under its routing constraints: " + why;
    }
  }
}

// Stage 2, estimates: each candidate's expected TTFT (estimate, lower bound
// from attempts in flight, load), speed, TTFT deadline and hedge delay.
void estimate(std::vector<Working>& hard_ok, const config::RoutingPolicy& policy,
              const RouterOptions& options) {
  // Speeds: tokens/s when every candidate runs the same upstream model (one
  // tokenizer), else output chars/s, so a chattier tokenizer does not look faster.
  bool same_model = std::all_of(hard_ok.begin(), hard_ok.end(), [&](const Working& w) {
    return w.pc.candidate.deployment->model == hard_ok.front().pc.candidate.deployment->model;
  });
  for (auto& w : hard_ok) {
    const DeploymentStats& s = w.view->stats;
    // Load: attempts still waiting for their first token are what queues at
    // a provider (prefill); streams already decoding barely delay a new one.
    // Only the queue beyond the usual one counts: the measured TTFT already
    // includes that (charging it again would push traffic off whichever
    // deployment carries it, by Little's law alone).
    // (With one standard deviation of slack: arrivals are random, and the
    // queue is over its mean half the time.)
    const double waiting = std::max(0.0, static_cast<double>(s.awaiting_first_token) -
                                             s.usual_awaiting - std::sqrt(s.usual_awaiting));
    // Attempts in flight that have waited longer than the estimate are
    // evidence before any of them times out; two that have waited past
    // what the deployment's answers take (their p99) are a stall or a
    // slowdown in progress, not the tail: it is charged as one that times
    // out (charge_timeouts), so traffic leaves it now, not once the wait
    // has grown past the next candidate's estimate.
    // (Their p99 as measured, or as the estimate and its spread say if
    // higher: a window's p99 is its few largest answers, and a wide
    // deployment's tail reaches past them often enough that two of many
    // attempts in flight are there at once.)
    const double usual =
        std::max(TtftLevel::quantile(s.ttft_estimate_ms, s.ttft_spread, TtftLevel::kP99Spreads),
                 s.ttft_answered_p99_ms.value_or(0));
    w.pc.stalled = s.awaiting_lower_bound_ms > usual;
    // The request's own prefill: the estimates are a prompt of no size's
    // (docs/routing.md, "TTFT and the prompt").
    // Of its uncached part: a prefix the deployment holds in its prompt
    // cache is not prefilled again ("Prompt-cache affinity").
    const double k = static_cast<double>(w.pc.input_tokens) / 1000;
    w.pc.prefill_ms =
        s.prefill_ms_per_1k * static_cast<double>(w.pc.input_tokens - w.pc.cached_tokens) / 1000;
    // The estimate is of the median: an attempt that has waited past it is
    // the tail as often as a slowdown. The waits are evidence of a median
    // of at least TtftLevel::median_bound of them: a steady deployment's
    // almost the wait itself, a wide one's (sigma 0.5) from 2.7x its median.
    const double bound = TtftLevel::median_bound(s.awaiting_lower_bound_ms, s.ttft_spread);
    w.pc.estimate_ms = std::max(s.ttft_estimate_ms, bound) + w.pc.prefill_ms;
    w.pc.load_multiplier = 1 + options.load_factor * waiting;
    w.pc.expected_ttft_ms = w.pc.estimate_ms * w.pc.load_multiplier;
    w.pc.p50_ms = s.ttft_p50_ms;
    if (same_model) {
      w.pc.speed = s.tps_estimate;
    } else {
      w.pc.speed_is_chars = true;
      w.pc.speed = s.chars_per_s_estimate.value_or(s.tps_estimate * kDefaultCharsPerToken);
    }
    // TTFT deadline from the live p95, else from the configured expectation.
    // A p95 known only as a lower bound (most recent attempts gave up
    // waiting) is the longest wait itself: the deadline stays at what was
    // waited and does not grow toward a TTFT nobody has seen.
    const milliseconds configured = w.pc.candidate.timeouts.ttft;
    std::optional<double> basis = s.ttft_p95_ms;
    // (Never below the p95 of the attempts that answered, though, nor below
    // an estimate well above those lower bounds (kEstimateAboveBounds): bounds from lost hedges can
    // be far under the TTFT — a race lost at 130 ms says nothing more — and a deadline cut to them
    // would time out every later attempt. An estimate that took the misses in is the waits
    // themselves and no floor: a deadline from it would triple with every miss.)
    if (basis && s.ttft_p95_lower_bound) {
      const double waited = *basis;
      *basis = std::max(waited / options.deadline_factor, s.ttft_answered_p95_ms.value_or(0));
      if (s.ttft_estimate_ms > waited * kEstimateAboveBounds)
        *basis = std::max(*basis, s.ttft_estimate_ms);
    }
    if (!basis && w.pc.candidate.deployment->expected_ttft) {
      basis = static_cast<double>(w.pc.candidate.deployment->expected_ttft->count());
    }
    // A deployment without a first-token deadline (a reasoning model) keeps
    // none: the live p95 of thinking time is no reason to give up.
    if (!w.pc.candidate.deployment->first_token_deadline) basis.reset();
    if (basis) {
      auto derived =
          milliseconds(static_cast<std::int64_t>(std::ceil(*basis * options.deadline_factor)));
      w.pc.candidate.timeouts.ttft =
          std::clamp(derived, std::min(options.min_ttft_deadline, configured), configured);
    }
    // The stall deadline: a stream that pauses far longer than the
    // deployment's streams do is stalled, seconds before timeouts.idle.
    if (s.pause_p95_ms && s.pause_samples >= kMinPauseSamples) {
      const auto derived =
          milliseconds(static_cast<std::int64_t>(std::ceil(kStallFactor * *s.pause_p95_ms)));
      w.pc.candidate.stall =
          std::min(w.pc.candidate.timeouts.idle, std::max(kMinStallDeadline, derived));
    }
    // A long prompt gets its prefill on top, generously (twice the larger of
    // the fitted and the prior slope): the deadline is there to catch a
    // stall, and a prompt's prefill is not one. timeouts.ttft bounds the
    // wait of a prompt of no size. (All of the prompt: a provider may have
    // dropped a prefix expected cached, and its prefill is no stall either.)
    w.pc.prefill_allowance = milliseconds(static_cast<std::int64_t>(std::ceil(
        kDeadlinePrefillFactor * std::max(s.prefill_ms_per_1k, s.prefill_prior_ms_per_1k) * k)));
    w.pc.candidate.timeouts.ttft += w.pc.prefill_allowance;
    // Hedge delay: fixed, or the live percentile of the attempts that
    // answered (else the estimate), with a floor. (Of those that answered:
    // with 10% of attempts stalling, the p99 of all of them is "beyond the
    // deadline", and a hedge at it would never start.)
    double delay_ms =
        policy.hedging.delay
            ? static_cast<double>(policy.hedging.delay->count())
            : answered_ttft_at(s, policy.hedging.delay_percentile).value_or(s.ttft_estimate_ms);
    w.pc.hedge_delay =
        std::max(policy.hedging.min_delay,
                 milliseconds(static_cast<std::int64_t>(std::ceil(delay_ms + w.pc.prefill_ms))));
  }
}

// Stage 3, deadlines as costs: what trying a deployment costs the client.
// One whose estimate is at or past its own TTFT deadline will time out, and
// the client then pays the deadline and the next candidate's first token.
// (Without this, the load factor on the deployment carrying the traffic can
// make one that only ever times out look better, and every request pays for it.)
void charge_timeouts(std::vector<Working>& hard_ok) {
  if (hard_ok.size() > 1) {
    std::vector<double> expected;  // before any is charged: the order does not matter
    for (const auto& w : hard_ok) expected.push_back(w.pc.expected_ttft_ms);
    for (std::size_t i = 0; i < hard_ok.size(); ++i) {
      auto& pc = hard_ok[i].pc;
      const double deadline = static_cast<double>(pc.candidate.timeouts.ttft.count());
      // Compared without the request's prefill (the deadline allows twice
      // the expected one). An estimate made of lower bounds that reached the
      // deadline is its attempts timing out, give or take the deadline's
      // rounding and a timer's lateness: charged as such, not as lost races.
      const bool bounded = hard_ok[i].view->stats.ttft_bounded;
      const double base_deadline = deadline - static_cast<double>(pc.prefill_allowance.count());
      const bool times_out =
          pc.estimate_ms - pc.prefill_ms >= base_deadline * (bounded ? kBoundAtDeadline : 1.0) ||
          pc.stalled;
      pc.bounded = !times_out && bounded;
      if (!times_out && !pc.bounded) continue;
      double next = std::numeric_limits<double>::infinity();
      for (std::size_t j = 0; j < hard_ok.size(); ++j) {
        if (j != i) next = std::min(next, expected[j]);
      }
      // What the client pays before the next one answers: the deadline, or
      // for a deployment held by lower bounds the wait until it is hedged.
      const double wait =
          times_out ? deadline : std::min(deadline, static_cast<double>(pc.hedge_delay.count()));
      pc.expected_ttft_ms = std::max(pc.expected_ttft_ms, wait + next);
      pc.times_out = times_out;
    }
  }
}

// Stage 4, soft constraints (min TPS, TTFT limits on recent evidence): the
// candidates that meet them (all, relaxed, when none does) and at most one
// due re-check of a deployment they left out or know only from failures.
double expected_output_tokens(const RouteRequest& request) {
  const config::RoutingPolicy& policy = request.policy;
  return static_cast<double>(request.max_tokens && *request.max_tokens > 0
                                 ? std::min(*request.max_tokens, policy.typical_output_tokens * 4)
                                 : policy.typical_output_tokens);
}

namespace {

// The policy's measure of `w` (lower is better) now, and as its window last
// measured it (nullopt: not measured).
double measure_now(const Working& w, const Measure& m) {
  const DeploymentStats& s = w.view->stats;
  switch (m.policy) {
    case Policy::kE2e:
      return w.pc.expected_ttft_ms + m.expected_tokens / std::max(0.1, s.tps_estimate) * 1000.0;
    case Policy::kThroughput:
      return -s.tps_estimate;
    default:
      return w.pc.expected_ttft_ms;
  }
}

std::optional<double> measure_window(const Working& w, const Measure& m) {
  const DeploymentStats& s = w.view->stats;
  switch (m.policy) {
    case Policy::kE2e: {
      if (!s.ttft_p50_ms) return std::nullopt;
      const double tps = s.tps_p50.value_or(s.tps_estimate);
      return *s.ttft_p50_ms + m.expected_tokens / std::max(0.1, tps) * 1000.0;
    }
    case Policy::kThroughput:
      if (!s.tps_p50) return std::nullopt;
      return -*s.tps_p50;
    default:
      return s.ttft_p50_ms;
  }
}

}  // namespace

SoftResult soft_constraints(std::vector<Working>& hard_ok, const config::Constraints& cons,
                            Clock::time_point now, RouteDecision& out, const Measure& measure,
                            std::vector<Working> cands_space) {
  const bool measured_policy = measure.measured;
  SoftResult r;
  std::vector<Working>& cands = r.cands;
  cands = std::move(cands_space);
  cands.clear();
  cands.reserve(hard_ok.size());
  std::optional<Working>& recheck = r.recheck;
  std::optional<Skipped>& recheck_skip = r.recheck_skip;
  // Soft constraints.
  std::vector<Skipped> soft_skipped;
  // A deployment without measurements is not judged on a guess: it passes
  // (unless its configured expectation fails), gets traffic and is measured.
  for (auto& w : hard_ok) {
    const DeploymentStats& s = w.view->stats;
    const config::Deployment& dep = *w.pc.candidate.deployment;
    const bool tps_known = s.tps_p50.has_value() || dep.expected_tps.has_value();
    if (cons.min_tps && tps_known && s.tps_estimate < *cons.min_tps) {
      soft_skipped.push_back({w.pc.candidate.deployment->id(),
                              "tps " + config::fixed(s.tps_estimate, 0) + " under the minimum of " +
                                  config::fixed(*cons.min_tps, 0)});
      continue;
    }
    // The configured TTFT limit, and a request's at another percentile,
    // judged on recent evidence: the percentile of the latest samples, and a
    // deployment whose last few answers all met the limit meets it (so one
    // that recovers is back within a few re-checks, not when its slow
    // samples age out of the window).
    auto over_ttft = [&](std::optional<milliseconds> limit, config::Percentile at) {
      if (!limit) return false;
      const auto max = static_cast<double>(limit->count());
      std::optional<double> ttft = recent_ttft_at(s, at);
      if (!ttft && dep.expected_ttft) ttft = static_cast<double>(dep.expected_ttft->count());
      // At this request's size: the recent base plus its prefill.
      if (ttft) *ttft += w.pc.prefill_ms;
      if (!ttft || *ttft <= max) return false;
      if (s.ttft_last_few_max_ms && *s.ttft_last_few_max_ms + w.pc.prefill_ms <= max) return false;
      w.missed_ttft_limit = *limit;
      soft_skipped.push_back({dep.id(), "ttft p" + std::to_string(static_cast<int>(at)) + " " +
                                            config::fixed(*ttft, 0) + "ms over the limit of " +
                                            std::to_string(limit->count()) + "ms"});
      return true;
    };
    if (over_ttft(cons.max_ttft, cons.max_ttft_percentile) ||
        over_ttft(cons.extra_max_ttft, cons.extra_max_ttft_percentile)) {
      continue;
    }
    cands.push_back(w);
  }
  if (cands.empty()) {
    cands = hard_ok;
    out.relaxed = true;
  } else {
    // Re-check one deployment the soft constraints left out, one known
    // only from its failures (its estimate holds their penalties) or from
    // lower bounds (attempts that gave up waiting on it), or one never
    // measured, if it is due. A recovered deployment is found within about
    // kRecheckInterval, whatever the policy.
    //
    // One left out by a TTFT limit whose last answer met it again is
    // promising: re-checked first, twice as often (its next answers may
    // bring it back); the rest take turns, the one heard from least
    // recently (sample or attempt) first, so one that only ever loses its
    // races cannot starve the others.
    auto promising = [&](const Working& x) {
      const auto& last = x.view->stats.last_ttft_ms;
      return x.missed_ttft_limit && last &&
             *last <= static_cast<double>(x.missed_ttft_limit->count());
    };
    auto heard = [](const DeploymentStats& d) {
      return std::max(d.last_sample.value_or(Clock::time_point::min()),
                      d.last_attempt_start.value_or(Clock::time_point::min()));
    };
    // What the best candidate is expected to give now, in the policy's
    // measure: a deployment whose window median beats it, but that has not
    // been heard from for a while, may be back (a slow spell over): worth a
    // re-check.
    double best_expected = std::numeric_limits<double>::infinity();
    for (const auto& w : hard_ok) best_expected = std::min(best_expected, measure_now(w, measure));
    bool recheck_out_soft = false;
    for (auto& w : hard_ok) {
      const DeploymentStats& st = w.view->stats;
      const bool out_soft = std::none_of(cands.begin(), cands.end(), [&](const Working& c) {
        return c.pc.candidate.deployment == w.pc.candidate.deployment;
      });
      // (Lower bounds and priors matter to the policies that compare
      // measurements; the others pick by price or order.)
      const std::optional<double> measured_then = measure_window(w, measure);
      const bool may_be_back = st.last_sample && now - *st.last_sample >= kStaleRecheck &&
                               measured_then && *measured_then < best_expected;
      const bool in_doubt =
          out_soft || st.ttft_penalized ||
          (measured_policy && (st.ttft_bounded || !st.last_sample.has_value() || may_be_back));
      if (!in_doubt) continue;
      // Why, the strongest evidence first. One never answered waits twice as
      // long after each lesson in a row that taught nothing, so a deployment
      // that always loses its race unmeasured is not raced twice a second
      // for ever; the rest (left out, failing, held by lower bounds: a
      // slowdown whose end is the question) every kRecheckInterval.
      w.recheck_reason = out_soft            ? "left out by a constraint"
                         : st.ttft_penalized ? "known from failures"
                         : !st.last_sample   ? "never answered"
                         : st.ttft_bounded   ? "estimate a lower bound"
                                             : "may be back";
      auto interval = promising(w) ? kRecheckInterval / 2 : kRecheckInterval;
      if (!st.last_sample) interval *= 1u << std::min(st.lessons_missed, kMaxRecheckBackoff);
      // Due: none still awaiting its first token there (one at a time; one
      // streaming its answer says nothing more), the last attempt started
      // long enough ago.
      const bool due = st.awaiting_first_token == 0 &&
                       (!st.last_attempt_start || now - *st.last_attempt_start >= interval);
      if (!due) continue;
      auto before = [&](const std::optional<Working>& other) {
        return !other || std::pair(!promising(w), heard(st)) <
                             std::pair(!promising(*other), heard(other->view->stats));
      };
      if (before(recheck)) {
        if (recheck && !recheck_out_soft) r.recheck_next = recheck;
        recheck = w;
        recheck_out_soft = out_soft;
      } else if (!out_soft && before(r.recheck_next)) {
        r.recheck_next = w;
      }
    }
    for (auto& sk : soft_skipped) {
      if (recheck && sk.deployment == recheck->pc.candidate.deployment->id()) {
        recheck_skip = sk;
        continue;
      }
      out.skipped.push_back(sk);
    }
  }
  // Scored with the rest (for display), then set apart.
  if (recheck && std::none_of(cands.begin(), cands.end(), [&](const Working& c) {
        return c.pc.candidate.deployment == recheck->pc.candidate.deployment;
      })) {
    cands.push_back(*recheck);
  }

  return r;
}

// Stage 5, scores under the policy: lower is better.
void score(std::vector<Working>& cands, const RouteRequest& request, std::uint64_t rr_counter,
           std::mt19937_64& rng, RouteDecision& out) {
  const config::RoutingPolicy& policy = request.policy;
  // Scores: lower is better.
  const double expected_tokens = expected_output_tokens(request);
  out.e2e_tokens = expected_tokens;
  switch (policy.policy) {
    case Policy::kLatency:
      for (auto& w : cands) w.pc.score = w.pc.expected_ttft_ms;
      break;
    case Policy::kThroughput:
      for (auto& w : cands) w.pc.score = -w.pc.speed;
      break;
    case Policy::kE2e:
      for (auto& w : cands) {
        double tps = std::max(0.1, w.view->stats.tps_estimate);
        w.pc.score = w.pc.expected_ttft_ms + expected_tokens / tps * 1000.0;
        w.pc.speed = tps;  // the speed, in the unit, that the score used
        w.pc.speed_is_chars = false;
      }
      break;
    case Policy::kCost:
      // Output price first; input price, then expected TTFT break ties.
      for (auto& w : cands) {
        const auto& price = w.pc.candidate.deployment->price;
        w.pc.score = price.output_per_1m + price.input_per_1m * 1e-3 + w.pc.expected_ttft_ms * 1e-9;
      }
      break;
    case Policy::kBalanced: {
      std::vector<double> ttft, slowness, price;
      for (auto& w : cands) {
        ttft.push_back(w.pc.expected_ttft_ms);
        slowness.push_back(-w.pc.speed);
        price.push_back(w.pc.candidate.deployment->price.output_per_1m);
      }
      auto nt = normalised(ttft), ns = normalised(slowness), np = normalised(price);
      const auto& wt = policy.weights;
      for (std::size_t i = 0; i < cands.size(); ++i) {
        cands[i].pc.score = wt.ttft * nt[i] + wt.tps * ns[i] + wt.price * np[i];
      }
      break;
    }
    case Policy::kOrdered:
      for (std::size_t i = 0; i < cands.size(); ++i) cands[i].pc.score = static_cast<double>(i);
      break;
    case Policy::kRoundRobin: {
      const std::size_t n = cands.size();
      const std::size_t start = static_cast<std::size_t>(rr_counter % n);
      for (std::size_t i = 0; i < n; ++i)
        cands[i].pc.score = static_cast<double>((i + n - start) % n);
      break;
    }
    case Policy::kRandom: {
      std::vector<std::size_t> perm(cands.size());
      std::iota(perm.begin(), perm.end(), 0);
      std::shuffle(perm.begin(), perm.end(), rng);
      for (std::size_t i = 0; i < cands.size(); ++i)
        cands[perm[i]].pc.score = static_cast<double>(i);
      break;
    }
  }
}

// Stage 6, ordering: by score, route.order first, then what this request
// learns (a re-check, exploration or a probe goes first, capped and hedged),
// cut to max_attempts; the last candidate keeps the configured TTFT timeout.
void order(std::vector<Working>& cands, std::optional<Working> recheck,
           const std::optional<Skipped>& recheck_skip, std::optional<Working> recheck_next,
           const RouteRequest& request, const RouterOptions& options, std::mt19937_64& rng,
           RouteDecision& out) {
  const config::RoutingPolicy& policy = request.policy;
  stable_sort_few(cands.begin(), cands.end(),
                  [](const Working& a, const Working& b) { return a.pc.score < b.pc.score; });
  // The candidate's ranked place, for a re-check that is not soft-excluded.
  auto ranked = [&](const Working& r) {
    return std::find_if(cands.begin(), cands.end(), [&](const Working& w) {
      return w.pc.candidate.deployment == r.pc.candidate.deployment;
    });
  };
  if (recheck) {
    auto it = ranked(*recheck);
    const char* reason = recheck->recheck_reason;
    recheck = *it;
    recheck->recheck_reason = reason;
    if (recheck_skip) {
      cands.erase(it);  // left out by a constraint: set apart
    } else if (it == cands.begin()) {
      // First anyway: this request measures it; re-check the next one due.
      recheck.reset();
      if (recheck_next) {
        if (auto next = ranked(*recheck_next); next != cands.begin() && next != cands.end()) {
          recheck = *next;
          recheck->recheck_reason = recheck_next->recheck_reason;
        }
      }
    }
  }

  // route.order: the named deployments first, in the order named.
  if (!request.order.empty()) {
    stable_sort_few(cands.begin(), cands.end(), [&](const Working& a, const Working& b) {
      auto ra = order_rank(request.order, *a.pc.candidate.deployment);
      auto rb = order_rank(request.order, *b.pc.candidate.deployment);
      return ra.value_or(std::numeric_limits<std::size_t>::max()) <
             rb.value_or(std::numeric_limits<std::size_t>::max());
    });
    for (auto& w : cands)
      w.pc.preferred = order_rank(request.order, *w.pc.candidate.deployment).has_value();
  }

  const std::size_t max_n = policy.allow_fallbacks ? std::max(1u, policy.max_attempts) : 1u;
  // Learning about a deployment (exploring, re-checking, probing) needs a
  // second candidate to fall back to; a single-attempt plan does not learn.
  const bool may_learn = max_n > 1 && request.order.empty() && options.learn;
  // Re-checks, explorations and size races spend the model's learning
  // budget (an extra upstream request each); probes do not wait for it.
  const bool may_lesson = may_learn && request.may_learn;
  // A request with a prompt cached somewhere is not explored with: it would
  // pay its whole prefill elsewhere (other requests explore).
  const bool cached_somewhere = std::any_of(
      cands.begin(), cands.end(), [](const Working& w) { return w.pc.cached_tokens > 0; });

  // Exploring a prompt size (docs/routing.md): the first choice's expected
  // TTFT at this size is a guess from its prior slope (it has answered
  // nothing near this size), and the next one may well be faster here: the
  // two race, from the start, and the first token answers. The winner's
  // answer fits its slope; the loser's wait floors its own. At most
  // kMaxSizeRaces at once on the guessed deployment (a cold start whose
  // first long answers are slow costs few extra prompts).
  auto size_race = [&] {
    if (cands.size() < 2 || !may_lesson || cached_somewhere || !times_first_token(policy.policy))
      return false;
    const Working& top = cands.front();
    const DeploymentStats& s = top.view->stats;
    if (top.pc.probe || top.pc.times_out || s.prefill_floor_ms_per_1k > 0 ||
        s.awaiting_guessed >= kMaxSizeRaces)
      return false;
    const double k = static_cast<double>(top.pc.input_tokens - top.pc.cached_tokens) / 1000;
    const double doubt =
        PrefillFit::doubt_ms(s.prefill_spread, s.prefill_mean_k, k, s.prefill_prior_ms_per_1k);
    if (!PrefillFit::guess(doubt, s.ttft_estimate_ms)) return false;
    const Working& next = cands[1];
    return !next.pc.probe && !next.pc.times_out &&
           next.pc.expected_ttft_ms < top.pc.expected_ttft_ms + doubt;
  };

  if (recheck && may_lesson) {
    // A re-check goes first, and is this request's one lesson.
    if (auto it = ranked(*recheck); it != cands.end()) {
      std::rotate(cands.begin(), it, it + 1);
    } else {
      cands.insert(cands.begin(), *recheck);
    }
    cands.front().pc.recheck = cands.front().pc.explored = true;
    cands.front().pc.learn_reason = recheck->recheck_reason;
  } else if (size_race()) {
    cands.front().pc.explored = cands.front().pc.size_race = true;
    cands.front().pc.learn_reason = "TTFT at this prompt size a guess";
  } else if (cands.size() > 1 && may_lesson && data_driven(policy.policy) &&
             options.exploration > 0 && !cached_somewhere &&
             std::uniform_real_distribution<double>(0, 1)(rng) < options.exploration) {
    // Exploration: the least recently measured candidate goes first.
    // Never measured counts as the oldest; ties keep the better-ranked one.
    auto older = [](const std::optional<Clock::time_point>& a,
                    const std::optional<Clock::time_point>& b) {
      if (!a) return b.has_value();
      return b && *a < *b;
    };
    std::size_t pick = 1;
    for (std::size_t i = 2; i < cands.size(); ++i) {
      if (older(cands[i].view->stats.last_sample, cands[pick].view->stats.last_sample)) pick = i;
    }
    std::rotate(cands.begin(), cands.begin() + static_cast<std::ptrdiff_t>(pick),
                cands.begin() + static_cast<std::ptrdiff_t>(pick) + 1);
    cands.front().pc.explored = true;
    cands.front().pc.learn_reason = "least recently measured";
  } else if (recheck_skip) {
    out.skipped.push_back(*recheck_skip);
  }

  // A half-open probe goes first: otherwise a first choice that succeeds
  // keeps it from ever running, and the deployment from ever coming back.
  if (may_learn) {
    // (A stable partition, without std::stable_partition's temporary buffer.)
    stable_sort_few(cands.begin(), cands.end(),
                    [](const Working& a, const Working& b) { return a.pc.probe && !b.pc.probe; });
  }

  // Learning costs the client little: a candidate tried to learn about it
  // (explored, re-checked, probed) has the best other candidate started
  // beside it (a hedge outside the hedge budget: these are few) and a capped
  // connect deadline. Under the latency policy at once, the first token of
  // either answering: the race is the policy's own question, so learning
  // costs nothing. Under the others after the best one's typical TTFT: a
  // first-token race would answer a question they do not ask (the speed of
  // a stream, a price) and could only teach "lost". A re-check left out by
  // a TTFT limit is given until that limit (the question is whether it
  // meets it again, which a faster rival would never let it show).
  const Working* best = nullptr;
  for (const auto& w : cands) {
    if (!w.pc.explored && !w.pc.probe) {
      best = &w;
      break;
    }
  }
  if (best != nullptr && may_learn) {
    // (At this request's size: the answered median is a prompt of no size's.)
    const double typical = best->view->stats.ttft_answered_p50_ms
                               ? *best->view->stats.ttft_answered_p50_ms + best->pc.prefill_ms
                               : best->pc.expected_ttft_ms;
    const auto cap =
        std::max(milliseconds(50), milliseconds(static_cast<std::int64_t>(std::ceil(typical))));
    for (auto& w : cands) {
      if (!w.pc.explored && !w.pc.probe) continue;
      auto& t = w.pc.candidate.timeouts;
      w.pc.capped = true;
      w.pc.hedge_delay = w.pc.recheck && w.missed_ttft_limit
                             ? std::min(std::max(cap, *w.missed_ttft_limit), t.ttft)
                         : policy.policy == Policy::kLatency ? milliseconds(0)
                                                             : std::min(cap, t.ttft);
      t.connect = std::min(t.connect, std::max(kMinCappedConnect, 2 * cap));
      if (w.pc.explored && !w.pc.probe) {
        const auto wait =
            milliseconds(static_cast<std::int64_t>(std::ceil(kLearnWaitFactor * w.pc.estimate_ms)));
        w.pc.learn_wait = std::min(std::max(kMinLearnWait, wait), t.ttft);
      }
    }
  }

  out.candidates.reserve(std::min<std::size_t>(cands.size(), max_n));
  for (std::size_t i = 0; i < cands.size(); ++i) {
    if (i < max_n) {
      out.candidates.push_back(cands[i].pc);
    } else {
      out.skipped.push_back({cands[i].pc.candidate.deployment->id(),
                             policy.allow_fallbacks ? "beyond max_attempts" : "fallbacks are off"});
      if (policy.allow_fallbacks) out.reserve.push_back(cands[i].pc);
    }
  }
  // The derived deadline is there to fail over in time; the last candidate
  // has nothing to fail over to, and cutting it would only turn a slow
  // answer into an error. It gets the configured TTFT timeout. (A retry
  // budget that runs out can still end a plan earlier: that attempt keeps
  // its derived deadline.)
  if (!out.candidates.empty()) {
    auto& last = out.candidates.back().candidate;
    last.timeouts.ttft = request.cfg->timeouts_for(*last.provider, *last.deployment).ttft +
                         out.candidates.back().prefill_allowance;
    last.stall = milliseconds(0);  // likewise: a pause is not cut short
  }
}

}  // namespace stages

RouteDecision decide(const RouteRequest& request, const std::vector<DeploymentView>& views,
                     const RouterOptions& options, Clock::time_point now, std::uint64_t rr_counter,
                     std::mt19937_64& rng) {
  RouteDecision out;
  out.policy = request.policy.policy;
  // The stages' working vectors, kept per thread: a decision (never
  // suspended, never re-entered) allocates only what it returns.
  thread_local std::vector<Working> hard_ok, cands_space;
  stages::eligible(request, views, now, out, hard_ok);
  if (hard_ok.empty()) return out;
  stages::estimate(hard_ok, request.policy, options);
  stages::charge_timeouts(hard_ok);
  const stages::Measure measure{data_driven(request.policy.policy), request.policy.policy,
                                stages::expected_output_tokens(request)};
  SoftResult soft = stages::soft_constraints(hard_ok, request.policy.constraints, now, out, measure,
                                             std::move(cands_space));
  stages::score(soft.cands, request, rr_counter, rng, out);
  stages::order(soft.cands, std::move(soft.recheck), soft.recheck_skip,
                std::move(soft.recheck_next), request, options, rng, out);
  cands_space = std::move(soft.cands);
  return out;
}

namespace {

// Why candidate `c` is where it is: the score the policy compared, how it was
// made, the measured median beside it (the estimate is a level robust to noise and
// load-adjusted) and how it was moved. Appended to `item`.
void append_why(std::string& item, const RouteDecision& d, const PlannedCandidate& c) {
  const std::size_t why_at = item.size();
  auto speed = [&] {
    append_num(item, "", c.speed, 0);
    item += c.speed_is_chars ? "c/s" : "t/s";
  };
  const double price = c.candidate.deployment->price.output_per_1m;
  switch (d.policy) {
    case config::Policy::kLatency:
      append_num(item, "score ", c.score, 0, "ms");
      append_num(item, " = est ", c.estimate_ms, 0, "ms");
      if (c.stalled) item += " waiting";
      if (c.times_out) item += " past its deadline";
      if (c.bounded) item += " or more";
      if (c.load_multiplier > 1) append_num(item, " x", c.load_multiplier, 2, " load");
      break;
    case config::Policy::kE2e:
      append_num(item, "score ", c.score, 0, "ms");
      append_num(item, " = ttft ", c.expected_ttft_ms, 0, "ms");
      append_num(item, " + ", d.e2e_tokens, 0);
      item += " tokens at ";
      speed();
      break;
    case config::Policy::kThroughput:
      item += "speed ";
      speed();
      break;
    case config::Policy::kCost:
      append_num(item, "$", price, 2, "/M");
      break;
    case config::Policy::kBalanced:
      append_num(item, "score ", c.score, 2);
      append_num(item, " of ttft ", c.expected_ttft_ms, 0, "ms");
      item += ", ";
      speed();
      append_num(item, ", $", price, 2, "/M");
      break;
    case config::Policy::kOrdered:
    case config::Policy::kRoundRobin:
    case config::Policy::kRandom:
      break;
  }
  if (c.p50_ms) {
    if (item.size() > why_at) item += "; ";
    append_num(item, "p50 ", *c.p50_ms, 0, "ms");
  }
  // A prompt large enough to matter: its size in this deployment's tokens.
  if (c.input_tokens >= kShownInputTokens) {
    if (item.size() > why_at) item += "; ";
    item += "in ~";
    append_tokens(item, c.input_tokens);
    item += " tok";
    if (c.cached_tokens > 0) {
      item += " cached ~";
      append_tokens(item, c.cached_tokens);
    }
    if (c.prefill_ms >= 1) append_num(item, " prefill ~", c.prefill_ms, 0, "ms");
  }
  if (c.cached_tokens > 0) item += c.affinity_by_key ? " affinity hit (key)" : " affinity hit";
  if (c.preferred) item += " preferred";
  if (c.recheck)
    item += " recheck";
  else if (c.size_race)
    item += " explore-size";
  else if (c.explored)
    item += " explore";
  if (c.probe) item += " probe";
  if (c.panic) item += " panic";
  if (c.capped) {
    item += " hedge@";
    append_int(item, static_cast<long long>(c.hedge_delay.count()));
    item += "ms";
  }
  if (c.learn_reason != nullptr) {
    item += " (";
    item += c.learn_reason;
    item += ')';
  }
}

}  // namespace

std::string explain_candidate(const RouteDecision& d, std::size_t i) {
  std::string why;
  append_why(why, d, d.candidates[i]);
  return why;
}

// Built in place (one output string and one scratch per call, reused across
// the candidates): a request renders this once, for its header and its log.
// The first item's storage becomes the output's: one allocation for a route
// of one candidate (the scratch takes a new one only when a second follows).
std::string explain(const RouteDecision& d) {
  std::string out, item;
  auto add = [&] {
    if (out.size() + item.size() > 1024) return;  // a header, not a report
    if (out.empty()) {
      out.swap(item);
      return;
    }
    out += ", ";
    out += item;
  };
  for (std::size_t i = 0; i < d.candidates.size(); ++i) {
    const auto& c = d.candidates[i];
    item.clear();
    item.reserve(160);  // "provider/model=#1(score ... = est ...; p50 ...)": no regrowth
    item += c.candidate.deployment->provider;
    item += '/';
    item += c.candidate.deployment->model;
    item += "=#";
    append_int(item, static_cast<long long>(i + 1));
    item += '(';
    append_why(item, d, c);
    item += ')';
    add();
  }
  for (const auto& s : d.skipped) {
    item.clear();
    item.reserve(160);
    item.append(s.deployment).append("=skip(").append(s.reason).append(")");
    add();
  }
  if (d.relaxed) {
    item = "constraints=relaxed(none met them)";
    add();
  }
  return out;
}

}  // namespace llmgate::routing
