// What the router's shared statistics cost a request when several worker
// threads route to the same deployment, as they do for a popular model: the
// calls one request makes on the RoutingState every worker shares —
// HealthTracker::check, StatsRegistry::get_or_prior (the snapshot the
// router decides on), TokenBudget::deposit, an InFlight from the attempt's
// start to its first token and its end, the attempt's record and its
// HealthTracker::on_attempt. Run by hand; prints ns per request per thread
// for 1..N threads, all on one deployment, then each on its own.
//
//   build/bin/llmgate-bench-router-stats [max_threads] [requests_per_thread]
//
// Built against an older tree with -DLLMGATE_BENCH_BEFORE_FINISH (before
// InFlight::finish existed: end() then record()) for a before/after
// comparison (bench/README.md).
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "routing/health.h"
#include "routing/stats_registry.h"
#include "routing/token_budget.h"

namespace {

using llmgate::routing::AttemptOutcome;
using llmgate::routing::AttemptRecord;
using llmgate::routing::Clock;
using llmgate::routing::HealthTracker;
using llmgate::routing::StatsRegistry;
using llmgate::routing::TokenBudget;

struct Shared {
  StatsRegistry stats;
  HealthTracker health{llmgate::config::Ejection{}};
  TokenBudget budget{0.2, 10};
};

// One request's calls on the shared statistics; what the router and the
// relay do between them is left out.
void one_request(Shared& s, const std::vector<std::string>& candidates, AttemptRecord& r,
                 double& sink) {
  const std::string& id = candidates.front();
  auto now = Clock::now();
  const auto availability = s.health.check(candidates, now);
  const auto snapshot = s.stats.get_or_prior(id, now);
  sink += snapshot.ttft_estimate_ms + static_cast<double>(availability.size());
  s.budget.deposit(now);
  StatsRegistry::InFlight in_flight(s.stats, id, now);
  r.started = now;
  r.request_sent = now;
  now = Clock::now();
  r.first_token = now;
  in_flight.first_token(std::chrono::duration_cast<std::chrono::microseconds>(now - r.started),
                        now);
  r.ttft_recorded = true;
  now = Clock::now();
  r.last_token = now;
#ifdef LLMGATE_BENCH_BEFORE_FINISH
  in_flight.end(now);
  const auto recorded = s.stats.record(r, now);
#else
  const auto recorded = in_flight.finish(r, now);
#endif
  s.health.on_attempt(id, false, recorded.error_rate, recorded.attempts, now);
}

// Wall time per request of one thread, `threads` threads at once; each
// thread routes to deployments[t % deployments.size()].
double ns_per_request(int threads, long n, const std::vector<std::string>& deployments) {
  Shared shared;
  std::vector<std::thread> ts;
  std::vector<double> sinks(static_cast<std::size_t>(threads));
  const auto start = std::chrono::steady_clock::now();
  for (int t = 0; t < threads; ++t) {
    ts.emplace_back([&, t] {
      const std::vector<std::string> candidates{
          deployments[static_cast<std::size_t>(t) % deployments.size()]};
      AttemptRecord r;
      r.deployment = candidates.front();
      r.outcome = AttemptOutcome::kSuccess;
      r.output_tokens = 200;
      r.output_chars = 800;
      double sink = 0;
      for (long i = 0; i < n; ++i) one_request(shared, candidates, r, sink);
      sinks[static_cast<std::size_t>(t)] = sink;
    });
  }
  for (auto& t : ts) t.join();
  const std::chrono::duration<double, std::nano> d = std::chrono::steady_clock::now() - start;
  double sink = 0;
  for (double s : sinks) sink += s;
  if (sink < 0) std::printf("%f\n", sink);  // keep the work
  return d.count() / static_cast<double>(n);
}

}  // namespace

int main(int argc, char** argv) {
  const int max_threads = argc > 1 ? std::atoi(argv[1]) : 2;
  const long n = argc > 2 ? std::atol(argv[2]) : 300'000;
  // Ids as long as real ones ("provider/model-with-a-date").
  const std::vector<std::string> one{"openai-east/gpt-4o-mini-2024-07-18"};
  std::vector<std::string> own;
  for (int t = 0; t < max_threads; ++t) own.push_back("provider-" + std::to_string(t) + "/model");
  std::printf("threads | one deployment: ns/request | a deployment each: ns/request\n");
  for (int threads = 1; threads <= max_threads; ++threads) {
    const double a = ns_per_request(threads, n, one);
    const double b = ns_per_request(threads, n, own);
    std::printf("%7d | %26.0f | %29.0f\n", threads, a, b);
  }
  return 0;
}
