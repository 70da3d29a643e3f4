// A sharded histogram, folded, is the prometheus-cpp histogram that observed
// the same values itself: same buckets (a value on a bound in that bound's
// bucket, the too-large at +Inf, NaN where prometheus-cpp puts it), same count
// and sum -- observed
// from several threads at once, folded more than once, or folded only as it
// goes.
#include "gateway/observe/sharded_histogram.h"

#include <gtest/gtest.h>
#include <prometheus/histogram.h>

#include <cmath>
#include <limits>
#include <memory>
#include <stdexcept>
#include <thread>
#include <vector>

namespace llmgate::gateway {
namespace {

const prometheus::Histogram::BucketBoundaries kBounds = {0.25, 0.5, 1, 2.5, 10};

// Multiples of 1/8 (sums are exact in any order), bounds themselves, below
// the first and above the last.
std::vector<double> values(int thread) {
  std::vector<double> v;
  for (int i = 0; i < 400; ++i) v.push_back(static_cast<double>((i * 7 + thread) % 120) / 8.0);
  v.insert(v.end(), {0.25, 0.5, 1, 2.5, 10, -1, 0, 1000});
  return v;
}

// values(0) .. values(n - 1), observed directly.
void observe_rounds(prometheus::Histogram& h, int n) {
  for (int i = 0; i < n; ++i) {
    for (double v : values(i)) h.Observe(v);
  }
}

void expect_same(const prometheus::Histogram& direct, const prometheus::Histogram& folded) {
  const auto a = direct.Collect().histogram;
  const auto b = folded.Collect().histogram;
  EXPECT_EQ(a.sample_count, b.sample_count);
  EXPECT_EQ(a.sample_sum, b.sample_sum);
  ASSERT_EQ(a.bucket.size(), b.bucket.size());
  for (std::size_t i = 0; i < a.bucket.size(); ++i) {
    EXPECT_EQ(a.bucket[i].cumulative_count, b.bucket[i].cumulative_count) << "bucket " << i;
    EXPECT_EQ(a.bucket[i].upper_bound, b.bucket[i].upper_bound);
  }
}

// A series observed directly, and the target of the sharded one under test.
class ShardedHistogramTest : public ::testing::Test {
 protected:
  prometheus::Histogram direct{kBounds}, target{kBounds};
  HistogramFolder folder;
};

TEST_F(ShardedHistogramTest, FoldedItIsTheHistogramThatObservedTheSameValues) {
  ShardedHistogram sharded(target, kBounds, folder);
  constexpr int kThreads = 20;  // more than its shards: some share one
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (double v : values(t)) sharded.observe(v);
    });
  }
  for (auto& th : threads) th.join();
  observe_rounds(direct, kThreads);
  folder.fold_all();
  expect_same(direct, target);
  folder.fold_all();  // nothing new: nothing added twice
  expect_same(direct, target);
  sharded.observe(3);
  direct.Observe(3);
  folder.fold_all();
  expect_same(direct, target);
}

TEST_F(ShardedHistogramTest, ObservationsWhileAFoldRunsAreAllCountedByTheNext) {
  ShardedHistogram sharded(target, kBounds, folder);
  std::thread writer([&] {
    for (int round = 0; round < 50; ++round) {
      for (double v : values(round)) sharded.observe(v);
    }
  });
  for (int i = 0; i < 200; ++i) folder.fold_all();
  writer.join();
  observe_rounds(direct, 50);
  folder.fold_all();
  expect_same(direct, target);
}

TEST_F(ShardedHistogramTest, NaNGoesWherePrometheusPutsIt) {
  {
    ShardedHistogram sharded(target, kBounds, folder);
    sharded.observe(std::numeric_limits<double>::quiet_NaN());
  }
  direct.Observe(std::numeric_limits<double>::quiet_NaN());
  const auto a = direct.Collect().histogram;
  const auto b = target.Collect().histogram;
  EXPECT_EQ(b.sample_count, 1u);
  for (std::size_t i = 0; i < a.bucket.size(); ++i)
    EXPECT_EQ(a.bucket[i].cumulative_count, b.bucket[i].cumulative_count) << "bucket " << i;
  EXPECT_TRUE(std::isnan(b.sample_sum));
}

TEST_F(ShardedHistogramTest, AnInfiniteValueStaysInfiniteAcrossFolds) {
  ShardedHistogram sharded(target, kBounds, folder);
  for (double v : {1.0, std::numeric_limits<double>::infinity(), 2.0}) {
    sharded.observe(v);
    direct.Observe(v);
    folder.fold_all();
    folder.fold_all();  // nothing new: not infinity minus infinity
  }
  expect_same(direct, target);
  EXPECT_EQ(target.Collect().histogram.sample_sum, std::numeric_limits<double>::infinity());
}

TEST_F(ShardedHistogramTest, WhatItHeldIsFoldedAsItGoes) {
  auto sharded = std::make_unique<ShardedHistogram>(target, kBounds, folder);
  for (double v : values(0)) {
    sharded->observe(v);
    direct.Observe(v);
  }
  sharded.reset();  // a snapshot's series, after a reload: never scraped
  expect_same(direct, target);
  folder.fold_all();  // and the folder no longer knows it
  expect_same(direct, target);
}

TEST_F(ShardedHistogramTest, SeriesLeaveTheFolderInAnyOrder) {
  // Several series over one target, destroyed out of order: the rest are
  // still folded (each is found in the live list by its index).
  std::vector<std::unique_ptr<ShardedHistogram>> series;
  for (int i = 0; i < 5; ++i)
    series.push_back(std::make_unique<ShardedHistogram>(target, kBounds, folder));
  for (int i = 0; i < 5; ++i) {
    series[static_cast<std::size_t>(i)]->observe(i);
    direct.Observe(i);
  }
  series[1].reset();
  series[4].reset();
  series[0]->observe(7);
  series[3]->observe(8);
  direct.Observe(7);
  direct.Observe(8);
  folder.fold_all();
  expect_same(direct, target);
  series.clear();
  expect_same(direct, target);
}

TEST(ShardedHistogram, TooManyBucketsIsRefused) {
  prometheus::Histogram::BucketBoundaries many;
  for (int i = 0; i < 40; ++i) many.push_back(i);
  prometheus::Histogram target(many);
  HistogramFolder folder;
  EXPECT_THROW((ShardedHistogram{target, many, folder}), std::invalid_argument);
}

}  // namespace
}  // namespace llmgate::gateway
