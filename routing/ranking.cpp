#include "routing/ranking.h"

#include <random>

#include "routing/router.h"

namespace llmgate::routing {

std::vector<RankedDeployment> rank_deployments(const config::Config& cfg, const config::Model& m,
                                               RoutingState& state, Clock::time_point now) {
  std::vector<RankedDeployment> rows;
  std::vector<DeploymentView> views;
  for (const auto& d : m.deployments) {
    RankedDeployment r{&d,
                       cfg.find_provider(d.provider),
                       state.stats.get_or_prior(d.id(), now),
                       state.health.peek(d.id(), now),
                       std::nullopt,
                       0,
                       "",
                       ""};
    views.push_back({r.s, r.health});
    rows.push_back(std::move(r));
  }
  RouteRequest rq{&cfg, &m, m.routing, {}, std::nullopt};
  rq.policy.max_attempts = static_cast<unsigned>(m.deployments.size());
  auto options = state.options;
  options.exploration = 0;  // the policy's order, not one request's lesson
  options.learn = false;
  std::mt19937_64 rng(1);
  auto decision = decide(rq, views, options, now, 0, rng);
  for (auto& r : rows) {
    for (std::size_t i = 0; i < decision.candidates.size(); ++i) {
      if (decision.candidates[i].candidate.deployment == r.d) {
        r.rank = i + 1;
        r.score = decision.candidates[i].score;
        r.why = explain_candidate(decision, i);
      }
    }
    for (const auto& s : decision.skipped) {
      if (s.deployment == r.d->id()) r.skipped = s.reason;
    }
  }
  return rows;
}

}  // namespace llmgate::routing
