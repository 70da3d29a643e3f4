// Everything the router learns and remembers, shared by all worker threads of
// one gateway: live statistics, health (ejection, cooldowns), the retry
// budget, per-model hedge budgets and round-robin positions. Built from one
// Config; each member is thread-safe on its own.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "config/config.h"
#include "routing/health.h"
#include "routing/router.h"
#include "routing/stats_registry.h"
#include "routing/token_budget.h"

namespace llmgate::routing {

StatsOptions stats_options(const config::Routing& r);

class RoutingState {
 public:
  explicit RoutingState(const config::Config& cfg, std::uint64_t seed = 1);

  StatsRegistry stats;
  HealthTracker health;
  TokenBudget retries;  // fallback attempts beyond the first
  RouterOptions options;
  std::string region;  // the gateway's own

  // The hedge budget of a public model (max_extra_ratio of its requests).
  TokenBudget& hedges(const std::string& model);
  std::uint64_t next_round_robin(const std::string& model);

  // Counters for /admin/routes (and the metrics of a later issue).
  std::atomic<std::uint64_t> hedges_started{0};
  std::atomic<std::uint64_t> hedges_won{0};        // the hedge produced the first token
  // Denied by an exhausted budget (the budgets count it themselves).
  std::uint64_t hedges_denied() const;
  std::uint64_t retries_denied() const { return retries.exhausted_total(); }

 private:
  struct PerModel {
    // A small floor (one hedge per 10 s) lets a quiet model hedge at all; under
    // load the ratio dominates.
    explicit PerModel(double ratio) : hedges(ratio, 0.1) {}
    TokenBudget hedges;
    std::atomic<std::uint64_t> rr{0};
  };
  std::map<std::string, std::unique_ptr<PerModel>> models_;  // fixed after construction
  PerModel& model(const std::string& name);
};

}  // namespace llmgate::routing
