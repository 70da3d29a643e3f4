// Quantiles over a sliding time window (default 60 s): the p50/p95/p99 the
// router uses for constraints (max TTFT at a percentile), deadlines (a
// candidate's TTFT deadline from its live p95) and display.
//
// Keeps the samples of the window in arrival order, bounded by `max_samples`
// (the oldest go first when it is full, so under heavy traffic the window is
// the most recent max_samples within the time window). Quantiles are exact
// over what is kept, by the nearest-rank method. The values are also kept
// sorted, updated by binary insertion and removal as samples come and go, so
// the router's per-request quantile query is a lookup, never a sort.
//
// Pure value type: time is passed in.
#pragma once

#include <chrono>
#include <cstddef>
#include <deque>
#include <optional>
#include <vector>

namespace llmgate::routing {

class WindowedQuantiles {
 public:
  using TimePoint = std::chrono::steady_clock::time_point;

  WindowedQuantiles(std::chrono::milliseconds window, std::size_t max_samples)
      : window_(window), max_samples_(max_samples) {}

  void add(double value, TimePoint now);
  // q in [0, 1]; nullopt when the window holds no sample.
  std::optional<double> quantile(double q, TimePoint now);
  // Several quantiles from one sort.
  std::vector<std::optional<double>> quantiles(const std::vector<double>& qs, TimePoint now);
  std::size_t count(TimePoint now);

 private:
  void evict(TimePoint now);
  void drop_oldest();

  struct Sample {
    TimePoint at;
    double value;
  };
  std::chrono::milliseconds window_;
  std::size_t max_samples_;
  std::deque<Sample> samples_;
  std::vector<double> sorted_;  // the window's values, in order
};

}  // namespace llmgate::routing
