#include "routing/router.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <numeric>

namespace llmgate::routing {
namespace {

using config::Policy;
using std::chrono::milliseconds;

// Output characters per token when a deployment has no measurement of its
// own: about 4 for English text in the common BPE tokenizers.
constexpr double kDefaultCharsPerToken = 4.0;

std::string fmt(const char* format, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, format, v);
  return buf;
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

std::optional<double> ttft_at(const DeploymentStats& s, config::Percentile p) {
  std::optional<double> v;
  switch (p) {
    case config::Percentile::kP50: v = s.ttft_p50_ms; break;
    case config::Percentile::kP90: v = s.ttft_p90_ms; break;
    case config::Percentile::kP95: v = s.ttft_p95_ms; break;
    case config::Percentile::kP99: v = s.ttft_p99_ms; break;
  }
  return v;
}

bool data_driven(Policy p) {
  return p == Policy::kLatency || p == Policy::kThroughput || p == Policy::kE2e ||
         p == Policy::kBalanced;
}

// Min-max normalisation to [0, 1]; all equal -> 0.
std::vector<double> normalised(const std::vector<double>& v) {
  auto [lo, hi] = std::minmax_element(v.begin(), v.end());
  std::vector<double> out(v.size(), 0.0);
  if (v.empty() || *hi - *lo <= 0) return out;
  for (std::size_t i = 0; i < v.size(); ++i) out[i] = (v[i] - *lo) / (*hi - *lo);
  return out;
}

struct Working {
  PlannedCandidate pc;
  const DeploymentView* view;
};

}  // namespace

double ttft_prior_ms(const config::Deployment& d, const config::Provider& p,
                     const std::string& gateway_region, milliseconds base) {
  if (d.expected_ttft) return static_cast<double>(d.expected_ttft->count());
  double extra = 60;
  if (!gateway_region.empty() && !p.region.empty()) {
    extra = p.region == gateway_region                       ? 0
            : area_of(p.region) == area_of(gateway_region) ? 30
                                                             : 120;
  }
  return static_cast<double>(base.count()) + extra;
}

RouteDecision decide(const RouteRequest& request, const std::vector<DeploymentView>& views,
                     const RouterOptions& options, Clock::time_point now, std::uint64_t rr_counter,
                     std::mt19937_64& rng) {
  const config::Model& model = *request.model;
  const config::RoutingPolicy& policy = request.policy;
  const config::Constraints& cons = policy.constraints;
  RouteDecision out;
  out.policy = policy.policy;

  std::vector<Working> hard_ok;
  std::optional<Clock::time_point> earliest_cooldown_end;
  bool only_cooling = true;  // among those the request's filters allow
  for (std::size_t i = 0; i < model.deployments.size(); ++i) {
    const config::Deployment& d = model.deployments[i];
    const config::Provider* p = request.cfg->find_provider(d.provider);
    if (p == nullptr) continue;
    const DeploymentView& v = views[i];
    auto skip = [&](std::string reason) { out.skipped.push_back({d.id(), std::move(reason)}); };
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
      skip("price " + fmt("$%.2f", d.price.output_per_1m) + "/M out over the cap of " +
           fmt("$%.2f", *cons.max_output_price_per_1m));
      continue;
    }
    if (!policy.allow_fallbacks && !request.order.empty() && !order_rank(request.order, d)) {
      skip("not in route.order and fallbacks are off");
      continue;
    }
    if (!v.health.routable) {
      skip(v.health.reason);
      if (v.health.state == HealthState::kCoolingDown && v.health.until) {
        earliest_cooldown_end = std::min(earliest_cooldown_end.value_or(*v.health.until), *v.health.until);
      } else {
        only_cooling = false;
      }
      continue;
    }
    PlannedCandidate pc;
    pc.candidate = Candidate{&d, p, request.cfg->timeouts_for(*p)};
    pc.probe = v.health.probe;
    pc.panic = v.health.panic;
    hard_ok.push_back(Working{pc, &v});
  }

  if (hard_ok.empty()) {
    std::string why;
    for (const auto& s : out.skipped) why += (why.empty() ? "" : "; ") + s.deployment + ": " + s.reason;
    if (earliest_cooldown_end && only_cooling) {
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
    return out;
  }

  // Speeds: tokens/s when every candidate runs the same upstream model (one
  // tokenizer), else output chars/s, so a chattier tokenizer does not look faster.
  bool same_model = std::all_of(hard_ok.begin(), hard_ok.end(), [&](const Working& w) {
    return w.pc.candidate.deployment->model == hard_ok.front().pc.candidate.deployment->model;
  });
  for (auto& w : hard_ok) {
    const DeploymentStats& s = w.view->stats;
    // Load: attempts still waiting for their first token are what queues at
    // a provider (prefill); streams already decoding barely delay a new one.
    const auto waiting = static_cast<double>(std::max<std::int64_t>(0, s.awaiting_first_token));
    w.pc.expected_ttft_ms = s.ttft_estimate_ms * (1 + options.load_factor * waiting);
    if (same_model) {
      w.pc.speed = s.tps_estimate;
    } else {
      w.pc.speed_is_chars = true;
      w.pc.speed = s.chars_per_s_estimate.value_or(s.tps_estimate * kDefaultCharsPerToken);
    }
    // TTFT deadline from the live p95, else from the configured expectation.
    const milliseconds configured = w.pc.candidate.timeouts.ttft;
    std::optional<double> basis = s.ttft_p95_ms;
    if (!basis && w.pc.candidate.deployment->expected_ttft) {
      basis = static_cast<double>(w.pc.candidate.deployment->expected_ttft->count());
    }
    if (basis) {
      auto derived = milliseconds(static_cast<std::int64_t>(std::ceil(*basis * options.deadline_factor)));
      w.pc.candidate.timeouts.ttft =
          std::clamp(derived, std::min(options.min_ttft_deadline, configured), configured);
    }
    // Hedge delay: fixed, or the live percentile (else the estimate), with a floor.
    double delay_ms = policy.hedging.delay
                          ? static_cast<double>(policy.hedging.delay->count())
                          : ttft_at(s, policy.hedging.delay_percentile).value_or(s.ttft_estimate_ms);
    w.pc.hedge_delay = std::max(policy.hedging.min_delay,
                                milliseconds(static_cast<std::int64_t>(std::ceil(delay_ms))));
  }

  // Soft constraints.
  std::vector<Working> cands;
  std::vector<Skipped> soft_skipped;
  // A deployment without measurements is not judged on a guess: it passes
  // (unless its configured expectation fails), gets traffic and is measured.
  for (auto& w : hard_ok) {
    const DeploymentStats& s = w.view->stats;
    const config::Deployment& dep = *w.pc.candidate.deployment;
    const bool tps_known = s.tps_p50.has_value() || dep.expected_tps.has_value();
    if (cons.min_tps && tps_known && s.tps_estimate < *cons.min_tps) {
      soft_skipped.push_back({w.pc.candidate.deployment->id(),
                              "tps " + fmt("%.0f", s.tps_estimate) + " under the minimum of " +
                                  fmt("%.0f", *cons.min_tps)});
      continue;
    }
    // The configured TTFT limit, and a request's at another percentile.
    auto over_ttft = [&](std::optional<milliseconds> limit, config::Percentile at) {
      if (!limit) return false;
      std::optional<double> ttft = ttft_at(s, at);
      if (!ttft && dep.expected_ttft) ttft = static_cast<double>(dep.expected_ttft->count());
      if (!ttft || *ttft <= static_cast<double>(limit->count())) return false;
      soft_skipped.push_back({dep.id(), "ttft p" + std::to_string(static_cast<int>(at)) + " " +
                                            fmt("%.0f", *ttft) + "ms over the limit of " +
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
    out.skipped.insert(out.skipped.end(), soft_skipped.begin(), soft_skipped.end());
  }

  // Scores: lower is better.
  const double expected_tokens = static_cast<double>(
      request.max_tokens && *request.max_tokens > 0
          ? std::min(*request.max_tokens, policy.typical_output_tokens * 4)
          : policy.typical_output_tokens);
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
      for (std::size_t i = 0; i < n; ++i) cands[i].pc.score = static_cast<double>((i + n - start) % n);
      break;
    }
    case Policy::kRandom: {
      std::vector<std::size_t> perm(cands.size());
      std::iota(perm.begin(), perm.end(), 0);
      std::shuffle(perm.begin(), perm.end(), rng);
      for (std::size_t i = 0; i < cands.size(); ++i) cands[perm[i]].pc.score = static_cast<double>(i);
      break;
    }
  }
  std::stable_sort(cands.begin(), cands.end(),
                   [](const Working& a, const Working& b) { return a.pc.score < b.pc.score; });

  // route.order: the named deployments first, in the order named.
  if (!request.order.empty()) {
    std::stable_sort(cands.begin(), cands.end(), [&](const Working& a, const Working& b) {
      auto ra = order_rank(request.order, *a.pc.candidate.deployment);
      auto rb = order_rank(request.order, *b.pc.candidate.deployment);
      return ra.value_or(std::numeric_limits<std::size_t>::max()) <
             rb.value_or(std::numeric_limits<std::size_t>::max());
    });
    for (auto& w : cands) w.pc.preferred = order_rank(request.order, *w.pc.candidate.deployment).has_value();
  }

  // Exploration: the least recently measured candidate goes first.
  if (cands.size() > 1 && request.order.empty() && data_driven(policy.policy) &&
      options.exploration > 0 &&
      std::uniform_real_distribution<double>(0, 1)(rng) < options.exploration) {
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
  }

  const std::size_t max_n = policy.allow_fallbacks ? std::max(1u, policy.max_attempts) : 1u;
  for (std::size_t i = 0; i < cands.size(); ++i) {
    if (i < max_n) {
      out.candidates.push_back(cands[i].pc);
    } else {
      out.skipped.push_back({cands[i].pc.candidate.deployment->id(),
                             policy.allow_fallbacks ? "beyond max_attempts" : "fallbacks are off"});
    }
  }
  return out;
}

std::string explain(const RouteDecision& d) {
  std::string out;
  auto add = [&](const std::string& item) {
    if (out.size() + item.size() > 1024) return;  // a header, not a report
    out += (out.empty() ? "" : ", ") + item;
  };
  for (std::size_t i = 0; i < d.candidates.size(); ++i) {
    const auto& c = d.candidates[i];
    std::string why = "ttft~" + fmt("%.0f", c.expected_ttft_ms) + "ms";
    if (d.policy == config::Policy::kThroughput || d.policy == config::Policy::kBalanced ||
        d.policy == config::Policy::kE2e) {
      why += " speed~" + fmt("%.0f", c.speed) + (c.speed_is_chars ? "c/s" : "t/s");
    }
    if (d.policy == config::Policy::kCost) {
      why += " $" + fmt("%.2f", c.candidate.deployment->price.output_per_1m) + "/M";
    }
    if (c.preferred) why += " preferred";
    if (c.explored) why += " explore";
    if (c.probe) why += " probe";
    if (c.panic) why += " panic";
    add(c.candidate.deployment->id() + "=#" + std::to_string(i + 1) + "(" + why + ")");
  }
  for (const auto& s : d.skipped) add(s.deployment + "=skip(" + s.reason + ")");
  if (d.relaxed) add("constraints=relaxed(none met them)");
  return out;
}

}  // namespace llmgate::routing
