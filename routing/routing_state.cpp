#include "routing/routing_state.h"

#include <set>
#include <string_view>

namespace llmgate::routing {

StatsOptions stats_options(const config::Routing& r) {
  StatsOptions o;
  o.ttft_prior = r.ttft_prior;
  o.tps_prior = r.tps_prior;
  o.ttft_tau = r.ttft_tau;
  o.relax_tau = r.relax_tau;
  o.window = r.window;
  o.error_tau = r.error_tau;
  o.min_tokens_for_tps = r.min_tokens_for_tps;
  return o;
}

namespace {
std::shared_ptr<PromptAffinity> make_affinity(const config::Affinity& a) {
  return std::make_shared<PromptAffinity>(a.ttl, a.max_entries);
}
}  // namespace

RoutingState::RoutingState(const config::Config& cfg, std::uint64_t seed)
    : stats_owner_(std::make_shared<StatsRegistry>(stats_options(cfg.routing))),
      health_owner_(std::make_shared<HealthTracker>(cfg.routing.ejection, seed)),
      affinity_owner_(make_affinity(cfg.routing.affinity)),
      stats(*stats_owner_),
      health(*health_owner_),
      affinity(*affinity_owner_),
      retries(cfg.routing.retry_budget.ratio, cfg.routing.retry_budget.min_per_second),
      options(RouterOptions::from(cfg.routing)),
      region(cfg.routing.region) {
  set_up(cfg);
}

RoutingState::RoutingState(const config::Config& cfg, const config::Config& previous_cfg,
                           const RoutingState& previous)
    : stats_owner_(previous.stats.options() == stats_options(cfg.routing)
                       ? previous.stats_owner_
                       : std::make_shared<StatsRegistry>(stats_options(cfg.routing))),
      health_owner_(previous.health_owner_),
      affinity_owner_(cfg.routing.affinity == previous_cfg.routing.affinity
                          ? previous.affinity_owner_
                          : make_affinity(cfg.routing.affinity)),
      stats(*stats_owner_),
      health(*health_owner_),
      affinity(*affinity_owner_),
      retries(cfg.routing.retry_budget.ratio, cfg.routing.retry_budget.min_per_second),
      options(RouterOptions::from(cfg.routing)),
      region(cfg.routing.region) {
  health.set_options(cfg.routing.ejection);
  // A deployment the new config no longer has: its health is forgotten
  // (while any deployment has something pending, every check takes the
  // tracker's lock, and no request would ever clear a removed one's).
  std::set<std::string_view> ids;
  for (const auto& m : cfg.models) {
    for (const auto& d : m.deployments) ids.insert(d.id());
  }
  for (const auto& m : previous_cfg.models) {
    for (const auto& d : m.deployments) {
      if (!ids.contains(d.id())) health.forget(d.id());
    }
  }
  for (const auto& p : cfg.providers) {
    const config::Provider* old = previous_cfg.find_provider(p.name);
    if (old == nullptr || *old == p) continue;
    for (const auto& m : cfg.models) {
      for (const auto& d : m.deployments) {
        if (d.provider != p.name) continue;
        stats.reset(d.id());
        health.forget(d.id());
      }
    }
  }
  set_up(cfg);
}

void RoutingState::set_up(const config::Config& cfg) {
  for (const auto& m : cfg.models) {
    models_.emplace(m.name, std::make_unique<PerModel>(m.routing.hedging.max_extra_ratio,
                                                       cfg.routing.learning_budget));
    for (const auto& d : m.deployments) {
      const config::Provider* p = cfg.find_provider(d.provider);
      if (p == nullptr) continue;
      stats.set_prior(d.id(), ttft_prior_ms(d, *p, region, cfg.routing.ttft_prior),
                      d.expected_tps.value_or(cfg.routing.tps_prior),
                      d.prefill_ms_per_1k_tokens.value_or(config::kDefaultPrefillMsPer1k));
    }
  }
}

RoutingState::PerModel& RoutingState::model(const std::string& name) {
  // Models are fixed by the config this state was built from; an unknown
  // name (never reached: the gateway routes only configured models) shares
  // one fallback entry rather than mutating the map concurrently.
  auto it = models_.find(name);
  if (it != models_.end()) return *it->second;
  static PerModel fallback(0.1, config::kDefaultLearningBudget);
  return fallback;
}

std::uint64_t RoutingState::hedges_denied() const {
  std::uint64_t n = 0;
  for (const auto& [name, m] : models_) n += m->hedges.exhausted_total();
  return n;
}

TokenBudget& RoutingState::hedges(const std::string& name) { return model(name).hedges; }
RoutingState::Learning& RoutingState::learning(const std::string& name) {
  return model(name).learning;
}

std::uint64_t RoutingState::next_round_robin(const std::string& name) {
  return model(name).rr.fetch_add(1, std::memory_order_relaxed);
}

}  // namespace llmgate::routing
