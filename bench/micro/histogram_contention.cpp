// What one histogram observation costs when several threads observe the
// same series, as the workers of a busy gateway do for a popular deployment:
// prometheus-cpp's Histogram (a mutex per observation) against the
// gateway's ShardedHistogram (gateway/observe/sharded_histogram.h: a shard per
// thread, folded at scrape). Run by hand; prints ns per observation per
// thread for 1..N threads.
//
//   build/bin/llmgate-bench-histogram [max_threads] [observations_per_thread]
#include <prometheus/histogram.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>

#include "gateway/observe/sharded_histogram.h"

namespace {

const prometheus::Histogram::BucketBoundaries kBounds = {0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08,
                                                         0.1,   0.25,  0.5,  0.75, 1.0,  2.5,  5.0,
                                                         7.5,   10.0,  20.0, 40.0, 80.0};

template <class Observe>
double ns_per_observation(int threads, long n, Observe observe) {
  std::vector<std::thread> ts;
  const auto start = std::chrono::steady_clock::now();
  for (int t = 0; t < threads; ++t) {
    ts.emplace_back([&, t] {
      double v = 0.0001 * (t + 1);
      for (long i = 0; i < n; ++i) {
        observe(v);
        v = v < 50 ? v * 1.7 : 0.0001;  // walk the buckets
      }
    });
  }
  for (auto& t : ts) t.join();
  const std::chrono::duration<double, std::nano> d = std::chrono::steady_clock::now() - start;
  return d.count() / static_cast<double>(n);  // wall time per observation of one thread
}

}  // namespace

int main(int argc, char** argv) {
  const int max_threads = argc > 1 ? std::atoi(argv[1]) : 2;
  const long n = argc > 2 ? std::atol(argv[2]) : 2'000'000;
  std::printf("threads | prometheus::Histogram ns/observation | ShardedHistogram ns/observation\n");
  for (int threads = 1; threads <= max_threads; ++threads) {
    prometheus::Histogram plain(kBounds);
    const double a = ns_per_observation(threads, n, [&](double v) { plain.Observe(v); });
    prometheus::Histogram target(kBounds);
    llmgate::gateway::HistogramFolder folder;
    llmgate::gateway::ShardedHistogram sharded(target, kBounds, folder);
    const double b = ns_per_observation(threads, n, [&](double v) { sharded.observe(v); });
    folder.fold_all();
    if (target.Collect().histogram.sample_count != plain.Collect().histogram.sample_count) {
      std::fprintf(stderr, "count mismatch\n");
      return 1;
    }
    std::printf("%7d | %36.1f | %31.1f\n", threads, a, b);
  }
  return 0;
}
