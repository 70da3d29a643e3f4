// The router: for one request, the ordered candidates it will try, each with
// its TTFT deadline and hedge delay, and why every other deployment was left
// out. A pure function of the model's config, the request's policy (after
// per-request overrides), each deployment's live statistics and health, the
// time and an RNG — no sockets, no clocks, no shared state (docs/routing.md).
//
// The steps, in order:
//   1. Hard filters, never relaxed: allowed/denied providers, allowed regions
//      (data residency), the price cap, route.order without fallbacks, and
//      health (ejected, cooling down after a Retry-After; see health.h).
//   2. Soft constraints: min TPS and max TTFT at a percentile. Deployments
//      that miss them are skipped — unless none meets them, in which case all
//      survivors of step 1 stay and the decision says "relaxed".
//   3. Order by the policy's score (lower is better; ties keep config order).
//   4. route.order moves the named deployments to the front, in that order.
//   5. Exploration: with probability `exploration` (data-driven policies only)
//      the least recently measured candidate goes first, so idle deployments
//      stay measured. A deployment left out by a soft constraint is
//      re-checked, by every policy, when nothing is in flight to it and its
//      last sample is older than kRecheckInterval: it goes first, so a
//      constraint it meets again is known within seconds.
//      A prompt whose TTFT on the first choice is a guess from its prior
//      prefill slope (nothing answered near its size) races the next
//      candidate from the start: a size race (kMaxSizeRaces).
//   6. A half-open probe goes first (every policy; unless route.order says
//      otherwise): a recovered deployment carries traffic again at once.
//   7. Explored, re-checked and probe candidates get capped deadlines (about
//      twice the best other candidate's p95), so what the router learns costs
//      a client little.
//   8. Truncate to max_attempts (1 without fallbacks).
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "config/config.h"
#include "routing/health.h"
#include "routing/prompt_affinity.h"
#include "routing/route_plan.h"
#include "routing/stats_registry.h"

namespace llmgate::routing {

// Re-check a deployment excluded by a soft constraint at most this often.
inline constexpr std::chrono::milliseconds kRecheckInterval{500};
// A re-check of a deployment never answered waits kRecheckInterval x
// 2^lessons_missed, at most this many doublings (32 s): one whose lessons
// keep teaching nothing is not raced twice a second for ever. The others
// (left out by a constraint, known from failures, held by lower bounds)
// keep kRecheckInterval: their recovery is what the re-check is for.
inline constexpr std::uint32_t kMaxRecheckBackoff = 6;
// A candidate tried to learn about it that loses its race runs on to its
// own first token for at most this many times its estimate (with the
// prefill; at least kMinLearnWait, at most its TTFT deadline), from its
// start: past that, its wait is the lesson (gateway/proxy/race.h, learn_until).
inline constexpr double kLearnWaitFactor = 2.0;
inline constexpr std::chrono::milliseconds kMinLearnWait{100};
// A deployment whose window median beats the best candidate's estimate but
// that has had no sample for this long (left during a slow spell) is
// re-checked: it may be back.
inline constexpr std::chrono::milliseconds kStaleRecheck{2000};
// At most this many attempts at once at prompt sizes a deployment's prefill
// fit only guesses at (DeploymentStats::awaiting_guessed) start a size race.
inline constexpr std::int64_t kMaxSizeRaces = 3;
// The stall deadline of an attempt that can still be replaced: kStallFactor
// x the p95 of the longest pause of each of its deployment's completed
// streams, from kMinPauseSamples streams on, at least kMinStallDeadline and
// at most timeouts.idle (docs/failure-semantics.md, "Stalls").
inline constexpr double kStallFactor = 3;
inline constexpr std::chrono::milliseconds kMinStallDeadline{2000};
inline constexpr std::size_t kMinPauseSamples = 10;
// The floor of a capped connect deadline (exploration, re-checks, probes).
inline constexpr std::chrono::milliseconds kMinCappedConnect{500};

struct RouterOptions {
  double exploration = config::kDefaultExploration;
  double deadline_factor = config::kDefaultDeadlineFactor;
  std::chrono::milliseconds min_ttft_deadline = config::kDefaultMinTtftDeadline;
  double load_factor = config::kDefaultLoadFactor;
  // A request learns (re-checks, probes first); off for a ranking that
  // shows the policy's own order (/admin/routes).
  bool learn = true;

  static RouterOptions from(const config::Routing& r) {
    return RouterOptions{r.exploration, r.deadline_factor, r.min_ttft_deadline, r.load_factor,
                         true};
  }
};

// What one request asks of the router.
struct RouteRequest {
  const config::Config* cfg = nullptr;
  const config::Model* model = nullptr;
  config::RoutingPolicy policy;    // the model's, with the request's overrides applied
  std::vector<std::string> order;  // preferred providers or deployment ids (route.order)
  std::optional<std::int64_t> max_tokens;
  config::Operation operation = config::Operation::kChat;  // only deployments that serve it
  // Only this provider's deployments (a Responses conversation stored there:
  // previous_response_id); empty: any.
  std::string pinned_provider = {};
  std::string pinned_because = {};  // the skip reason for the others
  // The prompt's size (providers::measure_prompt): bytes outside inline
  // media, and inline media. Each deployment's estimate of its input tokens
  // is bytes / its bytes_per_input_token + media x kMediaTokens.
  std::size_t prompt_bytes = 0;
  std::uint32_t prompt_media = 0;
  // Prompt-cache affinity: the deployments that served a prefix of this
  // prompt within the TTL (PromptAffinity::find). On such a deployment the
  // prefix it holds x its cache share is read from its cache, not prefilled.
  PromptAffinity::Found cached = {};
  // The model's learning budget has room (RoutingState::learning): false,
  // this request re-checks and explores nothing (half-open probes still go
  // first: health is not a lesson).
  bool may_learn = true;
};

// The media's cost in tokens (providers::kMediaTokens; the router does not
// depend on providers).
inline constexpr std::int64_t kMediaPartTokens = 1000;
// A prompt from this many tokens on is named in the route's explanation.
inline constexpr std::int64_t kShownInputTokens = 1000;
// The estimate of a prompt's tokens is rough: the deployment with a model's
// largest context window is skipped (and the request refused with 400) only
// when the prompt is this much over it; a nearer miss is the provider's call.
inline constexpr double kContextMargin = 1.25;
// A long prompt's deadline gets this many times its expected prefill.
inline constexpr double kDeadlinePrefillFactor = 2.0;
// An estimate made of lower bounds (ttft_bounded) this close to the TTFT
// deadline is attempts timing out at it: charged as past its deadline.
inline constexpr double kBoundAtDeadline = 0.9;

// The request's prompt in `stats`' deployment's tokens (estimated).
std::int64_t estimated_input_tokens(const RouteRequest& request, const DeploymentStats& stats);

// What the router knows of `model->deployments[i]`.
struct DeploymentView {
  DeploymentStats stats;  // StatsRegistry::get_or_prior (priors when never used)
  Availability health;    // HealthTracker::check (or peek for display)
};

struct PlannedCandidate {
  Candidate candidate;  // timeouts.ttft holds the derived deadline
  double score = 0;     // the policy's score: lower is better
  // TTFT the policy compared: the estimate (raised to the age of the second-oldest
  // attempts still waiting for a first token when that is higher) x the load
  // multiplier (1 + load_factor x attempts awaiting their first token).
  double expected_ttft_ms = 0;
  double estimate_ms = 0;  // the estimate, before the load multiplier (with the prefill)
  // The request's prefill on this deployment: its input tokens x the
  // deployment's prefill slope (in estimate_ms and the hedge delay; the
  // deadline has twice the larger of the fitted and the prior slope).
  double prefill_ms = 0;
  std::chrono::milliseconds prefill_allowance{0};  // what the deadline has for it
  double load_multiplier = 1;
  bool stalled = false;  // attempts in flight have waited past the estimate
  // Its estimate is at or past its TTFT deadline: trying it costs the client
  // the deadline plus the next candidate's TTFT, and expected_ttft_ms says so.
  bool times_out = false;
  // Its estimate rests on lower bounds (its last attempts did not answer
  // before they were given up or lost a hedge): trying it first likely costs
  // its hedge delay plus the next candidate's TTFT, and expected_ttft_ms
  // says so. Re-checks beside the best find out when it is back.
  bool bounded = false;
  std::optional<double> p50_ms;  // measured (window) median TTFT, for explanations
  // The request's prompt in this deployment's tokens (estimated_input_tokens).
  std::int64_t input_tokens = 0;
  // Prompt-cache affinity: the prefix it served within the TTL, in its
  // tokens (0 under DeploymentStats::kMinCachedTokens: nothing a provider
  // caches), and of those the tokens expected read from its cache (x its
  // cache share: 0 for a deployment that never reports cached tokens).
  // The prefill in estimate_ms is of the rest.
  std::int64_t cache_held_tokens = 0;
  std::int64_t cached_tokens = 0;
  bool affinity_by_key = false;  // known by the conversation's key, not its prefix
  double speed = 0;              // output speed the policy compared
  bool speed_is_chars = false;   // speed in output chars/s (across models), else tokens/s
  std::chrono::milliseconds hedge_delay{0};
  bool probe = false;     // the half-open probe of an ejected deployment
  bool panic = false;     // routed although ejected: nothing else was left
  bool explored = false;  // moved first by exploration
  bool recheck = false;   // excluded by a soft constraint, re-checked (explored)
  // Explored at this prompt size: its TTFT here is a guess from its prior
  // slope; raced against the next candidate from the start.
  bool size_race = false;
  bool preferred = false;  // moved first by route.order
  // Why it goes first to be learnt about (explored, recheck, size_race), a
  // static string: "never answered", "estimate a lower bound", ... (shown
  // in explanations); null otherwise.
  const char* learn_reason = nullptr;
  // Learnt about and raced: how long, from its start, it may run on to its
  // own first token after the other side has the client (kLearnWaitFactor).
  std::chrono::milliseconds learn_wait{0};
  // Its deadlines were capped (exploration, re-check, probe): learning about
  // a deployment costs the client at most about the best candidate's p95.
  bool capped = false;
};

struct Skipped {
  std::string deployment;
  std::string reason;  // compact: "region us-east not allowed", "ejected: ..."
};

struct RouteDecision {
  config::Policy policy = config::Policy::kLatency;
  double e2e_tokens = 0;  // e2e: the output tokens the scores assume
  std::vector<PlannedCandidate> candidates;
  // With fallbacks on, the candidates beyond max_attempts, in order: one
  // takes the place of a candidate that made no attempt (its protocol could
  // not express the request). They are in `skipped` too, until then.
  std::vector<PlannedCandidate> reserve;
  std::vector<Skipped> skipped;
  bool relaxed = false;  // no deployment met the soft constraints: they were dropped
  // No candidate at all: the status the gateway answers with (503, or 429
  // when every deployment is cooling down after a Retry-After).
  int error_status = 0;
  std::string error_message;
  std::optional<int> retry_after_s;
};

// `views[i]` belongs to `request.model->deployments[i]`. `rr_counter` is the
// round-robin position (the caller increments it per request).
RouteDecision decide(const RouteRequest& request, const std::vector<DeploymentView>& views,
                     const RouterOptions& options, Clock::time_point now, std::uint64_t rr_counter,
                     std::mt19937_64& rng);

// The TTFT prior of a deployment that has no samples yet: its configured
// expected TTFT, else `base` plus a region-distance term — 0 ms in the
// gateway's own region, 30 ms in the same area ("eu-west" vs "eu-central"),
// 120 ms in another area, 60 ms when either region is unknown.
double ttft_prior_ms(const config::Deployment& d, const config::Provider& p,
                     const std::string& gateway_region, std::chrono::milliseconds base);

// One line per candidate and per skipped deployment, for the
// x-llmgate-route response header: "a/m1=ok(ttft~143ms) b/m2=skip(ejected...)".
std::string explain(const RouteDecision& d);
// What explain() says inside the parentheses of candidate `i`:
// "score 182ms = est 165ms x1.10 load; p50 170ms".
std::string explain_candidate(const RouteDecision& d, std::size_t i);

}  // namespace llmgate::routing
