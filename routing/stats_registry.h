// Live per-deployment statistics, shared by all worker threads.
//
// Today this keeps counters and the latest measurements; the latency-aware
// router (its own issue) replaces the internals with its estimators but keeps
// this interface: the gateway reports every finished attempt here, once per
// attempt (not per chunk), and holds an InFlight guard while an attempt runs.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "routing/attempt_record.h"

namespace llmgate::routing {

struct DeploymentStats {
  std::string deployment;
  std::uint64_t attempts = 0;
  std::uint64_t successes = 0;
  std::uint64_t failures = 0;
  std::int64_t in_flight = 0;
  std::uint64_t output_tokens = 0;
  std::optional<double> last_ttft_ms;
  std::optional<double> last_tps;
  std::optional<AttemptOutcome> last_outcome;
};

class StatsRegistry {
 public:
  // RAII: counts an attempt as in flight for its lifetime, on every path.
  class InFlight {
   public:
    InFlight(StatsRegistry& r, std::string deployment);
    ~InFlight();
    InFlight(const InFlight&) = delete;
    InFlight& operator=(const InFlight&) = delete;

   private:
    StatsRegistry& registry_;
    std::string deployment_;
  };

  void record(const AttemptRecord& record);
  std::optional<DeploymentStats> get(const std::string& deployment) const;
  std::vector<DeploymentStats> all() const;

 private:
  DeploymentStats& entry(const std::string& deployment);  // mu_ held

  mutable std::mutex mu_;
  std::map<std::string, DeploymentStats> stats_;
};

}  // namespace llmgate::routing
