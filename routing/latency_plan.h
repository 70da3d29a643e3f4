// The `latency` policy's ordering and per-candidate TTFT deadlines, as a pure
// function of the candidates, their live statistics, the time and an RNG.
// (Not yet used by the gateway: the router issue wires it in with config.)
//
//   - Load-aware expected TTFT: estimate x (in_flight + 1), the PeakEWMA
//     "cost" of tower/linkerd. Lowest first; ties keep configured order.
//   - Exploration: with probability `exploration`, one other candidate,
//     chosen uniformly, goes first, so idle deployments stay measured.
//   - Deadline: the candidate's live TTFT p95 x `deadline_factor`, clamped to
//     [min_ttft_deadline, the configured TTFT timeout]; without a p95, the
//     configured timeout. A normally-150 ms provider is abandoned after a few
//     hundred ms, not after a fixed 10 s.
#pragma once

#include <chrono>
#include <random>
#include <string>
#include <vector>

#include "routing/route_plan.h"
#include "routing/stats_registry.h"

namespace llmgate::routing {

struct LatencyPolicyOptions {
  double exploration = 0.03;
  double deadline_factor = 3.0;
  std::chrono::milliseconds min_ttft_deadline{250};
};

struct ScoredCandidate {
  Candidate candidate;       // timeouts.ttft holds the derived deadline
  double expected_ttft_ms = 0;
  bool explored = false;     // moved to the front by exploration
};

// `stats[i]` belongs to `plan.candidates[i]`.
std::vector<ScoredCandidate> latency_order(const RoutePlan& plan,
                                           const std::vector<DeploymentStats>& stats,
                                           const LatencyPolicyOptions& options,
                                           std::mt19937_64& rng);

}  // namespace llmgate::routing
