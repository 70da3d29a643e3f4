#include "routing/latency_plan.h"

#include <algorithm>
#include <cmath>

namespace llmgate::routing {

std::vector<ScoredCandidate> latency_order(const RoutePlan& plan,
                                           const std::vector<DeploymentStats>& stats,
                                           const LatencyPolicyOptions& options,
                                           std::mt19937_64& rng) {
  std::vector<ScoredCandidate> out;
  out.reserve(plan.candidates.size());
  for (std::size_t i = 0; i < plan.candidates.size(); ++i) {
    const DeploymentStats& s = stats[i];
    ScoredCandidate sc{plan.candidates[i], 0, false};
    const auto load = std::max<std::int64_t>(0, s.in_flight) + 1;
    sc.expected_ttft_ms = s.ttft_estimate_ms * static_cast<double>(load);
    auto configured = sc.candidate.timeouts.ttft;
    if (s.ttft_p95_ms) {
      auto derived = std::chrono::milliseconds(
          static_cast<std::int64_t>(std::ceil(*s.ttft_p95_ms * options.deadline_factor)));
      sc.candidate.timeouts.ttft =
          std::clamp(derived, std::min(options.min_ttft_deadline, configured), configured);
    }
    out.push_back(sc);
  }
  std::stable_sort(out.begin(), out.end(), [](const ScoredCandidate& a, const ScoredCandidate& b) {
    return a.expected_ttft_ms < b.expected_ttft_ms;
  });
  if (out.size() > 1 && options.exploration > 0 &&
      std::uniform_real_distribution<double>(0, 1)(rng) < options.exploration) {
    std::size_t pick = std::uniform_int_distribution<std::size_t>(1, out.size() - 1)(rng);
    std::rotate(out.begin(), out.begin() + static_cast<std::ptrdiff_t>(pick),
                out.begin() + static_cast<std::ptrdiff_t>(pick) + 1);
    out.front().explored = true;
  }
  return out;
}

}  // namespace llmgate::routing
