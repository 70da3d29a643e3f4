// A Prometheus histogram series observed without a lock.
//
// prometheus-cpp's Histogram takes a mutex per observation, and a request
// observes seven of them (TTFT, time per token, duration, token usage, the
// gateway's own overhead): with several workers on several cores every one
// of those is a lock whose cache line moves between cores per request.
// ShardedHistogram is the hot path's side of such a series: each thread adds
// to its own shard (its bucket counts and sum, a cache line apart from any
// other thread's), and fold() -- at scrape time, and once more when the
// series goes -- adds what the shards gathered since the last fold to the
// prometheus-cpp Histogram it stands for, which the registry then exposes as
// before. Observations reach the exposition at the next scrape, never later.
//
// observe() is lock-free (two relaxed atomic additions on the calling
// thread's shard; a thread's shard is allocated at its first observation of
// the series). fold() is for one thread at a time (HistogramFolder's lock),
// concurrently with observe(): a fold may see a count without its value's
// share of the sum, which the next fold brings.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

namespace prometheus {
class Histogram;
}

namespace llmgate::gateway {

class HistogramFolder;

class ShardedHistogram {
 public:
  // `bounds`: the target's bucket boundaries, ascending (the target has one
  // bucket more, +Inf; at most kMaxBuckets in all, else invalid_argument).
  // Registers with `folder` until destroyed.
  ShardedHistogram(prometheus::Histogram& target, const std::vector<double>& bounds,
                   HistogramFolder& folder);
  ~ShardedHistogram();  // folds what is left into the target
  ShardedHistogram(const ShardedHistogram&) = delete;
  ShardedHistogram& operator=(const ShardedHistogram&) = delete;

  // As prometheus::Histogram::Observe: the first bucket whose bound is not
  // below v (above every bound: +Inf; NaN: the first, as prometheus-cpp has it).
  void observe(double v);

 private:
  friend class HistogramFolder;
  static constexpr std::size_t kShards = 16;      // threads beyond share (atomically)
  static constexpr std::size_t kMaxBuckets = 24;  // +Inf included
  struct Shard;
  void fold();  // HistogramFolder's lock held
  Shard& shard();

  prometheus::Histogram& target_;
  const std::vector<double> bounds_;
  HistogramFolder& folder_;
  std::size_t index_ = 0;  // in folder_.live_ (its lock)
  std::array<std::atomic<Shard*>, kShards> shards_{};
};

// The live sharded histograms of one registry, folded together at scrape.
class HistogramFolder {
 public:
  // Adds every live series' new observations to its target.
  void fold_all();

 private:
  friend class ShardedHistogram;
  std::mutex mu_;
  std::vector<ShardedHistogram*> live_;  // mu_
};

}  // namespace llmgate::gateway
