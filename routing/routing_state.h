// Everything the router learns and remembers, shared by all worker threads of
// one gateway: live statistics, health (ejection, cooldowns), the retry
// budget, per-model hedge budgets and round-robin positions. Built from one
// Config; each member is thread-safe on its own.
//
// Hot reload builds a new RoutingState from the new Config and the previous
// state: the live statistics and health (what the router has learnt) are
// shared with it, so attempts still running on the old config keep feeding
// the same estimates; budgets, options and per-model state are the new
// config's. See the reload constructor for when learning starts over.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "config/config.h"
#include "routing/health.h"
#include "routing/prompt_affinity.h"
#include "routing/router.h"
#include "routing/stats_registry.h"
#include "routing/token_budget.h"

namespace llmgate::routing {

StatsOptions stats_options(const config::Routing& r);

class RoutingState {
 public:
  explicit RoutingState(const config::Config& cfg, std::uint64_t seed = 1);
  // For `cfg` replacing `previous_cfg` (a hot reload). Statistics and health
  // carry over, except:
  //  - a deployment whose provider changed (endpoint, key, TLS, timeouts...)
  //    starts afresh: what was measured was another upstream;
  //  - if the estimator settings (routing.ttft_prior, ttft_tau, window, ...)
  //    changed, all statistics start afresh under the new settings.
  // Ejection settings apply to the carried-over health at once.
  RoutingState(const config::Config& cfg, const config::Config& previous_cfg,
               const RoutingState& previous);

 private:
  // Shared with the states built from it by reloads (declared before the
  // references below, which bind to them).
  std::shared_ptr<StatsRegistry> stats_owner_;
  std::shared_ptr<HealthTracker> health_owner_;
  std::shared_ptr<PromptAffinity> affinity_owner_;

 public:
  StatsRegistry& stats;
  HealthTracker& health;
  // Where each prompt prefix was served (kept across reloads unless
  // routing.affinity changed).
  PromptAffinity& affinity;
  TokenBudget retries;  // fallback attempts beyond the first
  RouterOptions options;
  std::string region;  // the gateway's own

  // The hedge budget of a public model (max_extra_ratio of its requests).
  TokenBudget& hedges(const std::string& model);
  // What learning costs a public model (docs/routing.md, "What learning
  // costs"): its budget (routing.learning_budget of its requests; a race
  // that learns spends one token for the extra upstream request it makes)
  // and what its lessons taught, counted since this state was built.
  enum class LessonKind { kRecheck, kExploration, kSizeRace };
  enum class LessonResult { kLearnt, kMissed, kFailed };
  static constexpr std::size_t kLessonKinds = 3, kLessonResults = 3;
  struct Learning {
    explicit Learning(double ratio) : budget(ratio, kMinLessonsPerSecond, /*full=*/true) {}
    // A quiet model still learns now and then: one lesson per 5 s.
    static constexpr double kMinLessonsPerSecond = 0.2;
    TokenBudget budget;
    std::atomic<std::uint64_t> requests{0};        // routed (deposits)
    std::atomic<std::uint64_t> extra_requests{0};  // second sides started by learning races
    std::atomic<std::uint64_t> without_budget{0};  // routed with the budget spent
    std::atomic<std::uint64_t> lessons[kLessonKinds][kLessonResults] = {};
  };
  Learning& learning(const std::string& model);
  std::uint64_t next_round_robin(const std::string& model);

  // Counters for /admin/routes and the hedge metrics.
  std::atomic<std::uint64_t> hedges_started{0};
  std::atomic<std::uint64_t> hedges_won{0};  // the hedge produced the first token
  // Denied by an exhausted budget (the budgets count it themselves).
  std::uint64_t hedges_denied() const;
  std::uint64_t retries_denied() const { return retries.exhausted_total(); }

 private:
  struct PerModel {
    // A small floor (one hedge per 10 s) lets a quiet model hedge at all; under
    // load the ratio dominates.
    PerModel(double ratio, double learning_ratio) : hedges(ratio, 0.1), learning(learning_ratio) {}
    TokenBudget hedges;
    Learning learning;
    std::atomic<std::uint64_t> rr{0};
  };
  std::map<std::string, std::unique_ptr<PerModel>> models_;  // fixed after construction
  PerModel& model(const std::string& name);
  void set_up(const config::Config& cfg);  // per-model state and deployment priors
};

}  // namespace llmgate::routing
