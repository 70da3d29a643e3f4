// The last minutes of routing, for the live console (/admin/console): a ring
// of periodic samples of every model's ranking (each deployment's rank,
// state, TTFT percentiles, speed, load and error rate) and a ring of the
// latest requests that failed over, were hedged or failed. Served as JSON by
// GET /admin/history. Bounded in samples, bytes and events; thread-safe
// (samples come from one timer, events from every worker). Beast-free.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <mutex>
#include <optional>
#include <string>

#include "config/config.h"
#include "routing/routing_state.h"

namespace llmgate::gateway {

inline std::int64_t unix_now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// One request worth showing: it failed over, was hedged, or failed.
struct RouteEvent {
  std::int64_t unix_ms = 0;
  std::string request_id;
  std::string model;
  std::string outcome;     // the request's (success, error, ...)
  std::string deployment;  // the one that answered; empty when none did
  std::string failed;      // "deployment=outcome(status),..." of the failed attempts
  std::string hedge;       // "hedge-won" / "primary-won" when a hedge started
  std::string hedge_lost;  // the deployment of the side that lost the race
  bool recheck = false;    // the race learnt about a deployment (explored, re-checked, probed)
  std::string lesson;      // what it taught (RouteTrace::lesson); empty: no lesson
  int attempts = 0;
  std::optional<double> ttft_ms;  // of the answer
};

class RouteHistory {
 public:
  struct Options {
    std::chrono::milliseconds interval{2000};  // between samples (the caller's timer)
    std::size_t max_samples = 300;             // 10 minutes at the default interval
    std::size_t max_bytes = 8u << 20;          // of rendered samples: big configs keep less time
    std::size_t max_events = 200;
  };
  RouteHistory() : RouteHistory(Options{}) {}
  explicit RouteHistory(Options options) : options_(options) {}

  const Options& options() const { return options_; }

  // Appends one sample of every model of `cfg` as ranked now.
  void sample(const config::Config& cfg, routing::RoutingState& state,
              routing::Clock::time_point now, std::int64_t unix_ms);
  void record(RouteEvent event);

  // {"interval_ms", "max_samples", "fields", "cursor", "samples": [{"t",
  // "models": {model: {deployment: [fields...]}}}], "events": [...]}: what
  // was added after `cursor` (an earlier answer's; 0: everything kept).
  std::string json(std::uint64_t cursor = 0) const;

 private:
  struct Sample {
    std::uint64_t seq;
    std::string json;  // rendered once
  };
  Options options_;
  mutable std::mutex mu_;
  std::deque<Sample> samples_;  // mu_
  std::size_t sample_bytes_ = 0;
  std::deque<std::pair<std::uint64_t, RouteEvent>> events_;  // mu_
  std::uint64_t seq_ = 0;                                    // mu_: the last sample's or event's
};

}  // namespace llmgate::gateway
