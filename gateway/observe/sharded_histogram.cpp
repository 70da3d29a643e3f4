#include "gateway/observe/sharded_histogram.h"

#include <prometheus/histogram.h>

#include <algorithm>
#include <stdexcept>

namespace llmgate::gateway {

// One thread's share of a series (a cache line apart from the others): its
// bucket counts and sum, and -- read and written by fold() alone -- what the
// last fold had taken of them.
struct alignas(64) ShardedHistogram::Shard {
  std::array<std::atomic<std::uint64_t>, kMaxBuckets> counts{};
  std::atomic<double> sum{0};
  std::array<std::uint64_t, kMaxBuckets> folded{};
  double folded_sum = 0;
};

namespace {
// The calling thread's shard index: threads take the next one as they first
// observe any series.
std::size_t thread_shard(std::size_t shards) {
  static std::atomic<std::size_t> next{0};
  thread_local const std::size_t mine = next.fetch_add(1, std::memory_order_relaxed);
  return mine % shards;
}
}  // namespace

ShardedHistogram::ShardedHistogram(prometheus::Histogram& target, const std::vector<double>& bounds,
                                   HistogramFolder& folder)
    : target_(target), bounds_(bounds), folder_(folder) {
  if (bounds_.size() + 1 > kMaxBuckets) throw std::invalid_argument("too many histogram buckets");
  std::lock_guard lock(folder_.mu_);
  index_ = folder_.live_.size();
  folder_.live_.push_back(this);
}

ShardedHistogram::~ShardedHistogram() {
  std::lock_guard lock(folder_.mu_);
  try {
    fold();
  } catch (...) {  // (out of memory): the series loses what it held, the process goes on
  }
  // Out of the live list in O(1): a retired snapshot's Metrics drops its
  // series by the thousand.
  auto& live = folder_.live_;
  live[index_] = live.back();
  live[index_]->index_ = index_;
  live.pop_back();
  for (auto& s : shards_) delete s.load(std::memory_order_acquire);
}

ShardedHistogram::Shard& ShardedHistogram::shard() {
  std::atomic<Shard*>& slot = shards_[thread_shard(kShards)];
  if (Shard* s = slot.load(std::memory_order_acquire)) return *s;
  // First observation from this shard: another thread of the same shard may
  // race us here; one allocation wins.
  auto fresh = std::make_unique<Shard>();
  Shard* expected = nullptr;
  if (slot.compare_exchange_strong(expected, fresh.get(), std::memory_order_acq_rel))
    return *fresh.release();
  return *expected;
}

void ShardedHistogram::observe(double v) {
  // The first bound not below v, as prometheus-cpp finds it (lower_bound:
  // NaN is below no bound, so it lands in the first bucket, as there).
  const auto bucket = static_cast<std::size_t>(std::lower_bound(bounds_.begin(), bounds_.end(), v) -
                                               bounds_.begin());
  Shard& s = shard();
  s.counts[bucket].fetch_add(1, std::memory_order_relaxed);
  s.sum.fetch_add(v, std::memory_order_relaxed);
}

void ShardedHistogram::fold() {
  std::vector<double> increments(bounds_.size() + 1, 0.0);
  double sum = 0;
  bool any = false;
  for (auto& slot : shards_) {
    Shard* s = slot.load(std::memory_order_acquire);
    if (s == nullptr) continue;
    for (std::size_t b = 0; b < increments.size(); ++b) {
      const std::uint64_t now = s->counts[b].load(std::memory_order_relaxed);
      if (now == s->folded[b]) continue;
      increments[b] += static_cast<double>(now - s->folded[b]);
      s->folded[b] = now;
      any = true;
    }
    // (Unchanged, it adds nothing: an infinite sum minus itself is NaN.)
    const double now_sum = s->sum.load(std::memory_order_relaxed);
    if (now_sum != s->folded_sum) {
      sum += now_sum - s->folded_sum;
      s->folded_sum = now_sum;
    }
  }
  if (any || sum != 0) target_.ObserveMultiple(increments, sum);
}

void HistogramFolder::fold_all() {
  std::lock_guard lock(mu_);
  for (ShardedHistogram* h : live_) h->fold();
}

}  // namespace llmgate::gateway
