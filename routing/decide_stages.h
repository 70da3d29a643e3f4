// The stages of routing::decide (router.cpp), in the order it runs them.
// Internal to the router: exposed so that each stage has its own unit tests
// (tests/unit/routing/decide_stages_test.cpp).
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <random>
#include <vector>

#include "routing/router.h"

namespace llmgate::routing::stages {

// A candidate as the stages build it up.
struct Working {
  PlannedCandidate pc;
  const DeploymentView* view;
  std::optional<std::chrono::milliseconds> missed_ttft_limit;  // left out by this TTFT limit
  const char* recheck_reason = nullptr;  // why it is due a re-check (soft_constraints)
};

// 1. Candidates under the hard constraints and health: the request's
// provider, region, price and order filters, then what health allows. Every
// other deployment is in out.skipped with why; none left sets out's error
// (429 when only Retry-After cooldowns stand in the way, else 503).
// Into `hard_ok` (cleared first: decide() hands in a vector it reuses).
void eligible(const RouteRequest& request, const std::vector<DeploymentView>& views,
              Clock::time_point now, RouteDecision& out, std::vector<Working>& hard_ok);
inline std::vector<Working> eligible(const RouteRequest& request,
                                     const std::vector<DeploymentView>& views,
                                     Clock::time_point now, RouteDecision& out) {
  std::vector<Working> hard_ok;
  eligible(request, views, now, out, hard_ok);
  return hard_ok;
}

// 2. Estimates: each candidate's expected TTFT (estimate, lower bound from
// attempts in flight, load), speed, TTFT deadline and hedge delay.
void estimate(std::vector<Working>& hard_ok, const config::RoutingPolicy& policy,
              const RouterOptions& options);

// 3. A candidate whose estimate is at or past its own TTFT deadline will
// time out: its expected TTFT becomes the deadline plus the best other
// candidate's, and it is marked times_out.
void charge_timeouts(std::vector<Working>& hard_ok);

// 4. Soft constraints (min TPS, TTFT limits on recent evidence): the
// candidates that meet them (all, relaxed, when none does) and at most one
// due re-check of a deployment they left out or know only from failures —
// and, when the policy decides on measurements (`measured_policy`), of one
// known only from lower bounds or never measured.
struct SoftResult {
  std::vector<Working> cands;
  std::optional<Working> recheck;
  std::optional<Skipped> recheck_skip;
  // The next due one that the soft constraints kept in: re-checked instead
  // when `recheck` turns out to rank first anyway (cold start: every
  // deployment unmeasured, one of them first by order).
  std::optional<Working> recheck_next;
};
// What the policy compares on measurements, so that a deployment that "may
// be back" is judged in the policy's own terms: the latency policy on TTFT,
// e2e on TTFT plus `expected_tokens` at its speed, throughput on speed. (A
// deployment with a fast first token but a slow stream is never "back" for
// e2e: re-checking it would cost the client the whole slow answer.)
struct Measure {
  bool measured = true;  // the policy decides on measurements at all
  config::Policy policy = config::Policy::kLatency;
  double expected_tokens = 0;  // e2e: the answer length it scores
};
// `cands`: the vector SoftResult::cands becomes (cleared first; decide()
// reuses one).
SoftResult soft_constraints(std::vector<Working>& hard_ok, const config::Constraints& cons,
                            Clock::time_point now, RouteDecision& out, const Measure& measure = {},
                            std::vector<Working> cands = {});

// The answer length the e2e policy scores a request by: its max_tokens,
// capped at 4x the policy's typical_output_tokens, else the typical length.
double expected_output_tokens(const RouteRequest& request);

// 5. Scores under the policy: lower is better.
void score(std::vector<Working>& cands, const RouteRequest& request, std::uint64_t rr_counter,
           std::mt19937_64& rng, RouteDecision& out);

// 6. Ordering: by score, route.order first, then what this request learns (a
// re-check, exploration or a probe goes first, capped and hedged), cut to
// max_attempts; the last candidate keeps the configured TTFT timeout.
void order(std::vector<Working>& cands, std::optional<Working> recheck,
           const std::optional<Skipped>& recheck_skip, std::optional<Working> recheck_next,
           const RouteRequest& request, const RouterOptions& options, std::mt19937_64& rng,
           RouteDecision& out);

}  // namespace llmgate::routing::stages
