// Quantiles over a sliding time window (default 60 s): the p50/p95/p99 the
// router uses for constraints (max TTFT at a percentile), deadlines (a
// candidate's TTFT deadline from its live p95) and display.
//
// Keeps the samples of the window in arrival order, bounded by `max_samples`
// (the oldest go first when it is full, so under heavy traffic the window is
// the most recent max_samples within the time window). Quantiles are exact
// over what is kept, by the nearest-rank method. The values are also kept
// sorted, in blocks of at most 128 (a sample coming or going moves at most one
// block's points, not half the window's: with a full 1,024-sample window one
// sorted array moved ~16 KB per request), so the router's per-request
// quantile query is a lookup, never a sort.
//
// Censored samples: an attempt that missed its first-token deadline after
// waiting w says only "TTFT > w". Dropping it would keep the window at the
// old, fast level while a deployment is really slower than its deadline;
// counting w as a sample would pin the quantiles at the deadline. Such
// samples enter as censored (add_censored) and quantiles become the
// Kaplan-Meier product-limit estimate: a censored sample leaves the risk set
// without being an event. A quantile the estimate never reaches (too many
// samples censored) reads as the largest value in the window, flagged as a
// lower bound. Without censored samples this is exactly the nearest rank.
//
// Pure value type: time is passed in.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <optional>
#include <span>
#include <vector>

namespace llmgate::routing {

class WindowedQuantiles {
 public:
  using TimePoint = std::chrono::steady_clock::time_point;

  WindowedQuantiles(std::chrono::milliseconds window, std::size_t max_samples)
      : window_(window), max_samples_(max_samples) {}

  void add(double value, TimePoint now);
  // The true value is known only to be greater than `bound`. `race`: it is
  // so because another attempt answered first (a lost hedge or re-check),
  // not because the wait ran out: counted apart (lost_races()).
  void add_censored(double bound, TimePoint now, bool race = false);
  // q in [0, 1]; nullopt when the window holds no sample.
  std::optional<double> quantile(double q, TimePoint now);
  // Several quantiles in one pass. `lower_bound` (if given) is set to whether
  // any of them is only a lower bound (the estimate never reached it).
  std::vector<std::optional<double>> quantiles(const std::vector<double>& qs, TimePoint now,
                                               bool* lower_bound = nullptr);
  // The same over only the `n` most recent samples of the window: recent
  // evidence, for decisions that must follow a change within seconds.
  std::vector<std::optional<double>> recent_quantiles(const std::vector<double>& qs, TimePoint now,
                                                      std::size_t n, bool* lower_bound = nullptr);
  // The same over the observed (uncensored) samples only: what answering
  // looks like, for when an answer is late (a hedge's delay).
  std::vector<std::optional<double>> observed_quantiles(const std::vector<double>& qs,
                                                        TimePoint now);
  // The three above into `out` (one per q), allocating nothing: the router
  // reads them per candidate per request.
  void quantiles(std::span<const double> qs, TimePoint now, std::span<std::optional<double>> out,
                 bool* lower_bound = nullptr);
  void recent_quantiles(std::span<const double> qs, TimePoint now, std::size_t n,
                        std::span<std::optional<double>> out, bool* lower_bound = nullptr);
  void observed_quantiles(std::span<const double> qs, TimePoint now,
                          std::span<std::optional<double>> out);
  // The largest of the `n` most recent samples if there are n and none of
  // them is censored, else nullopt.
  std::optional<double> recent_max_observed(TimePoint now, std::size_t n);
  std::size_t count(TimePoint now);
  std::size_t censored(TimePoint now);    // censored samples in the window
  std::size_t lost_races(TimePoint now);  // those of them added with `race`

  // For a reader that keeps what it computed (StatsRegistry's snapshot):
  // every query above answers the same for any `now` before expires_at()
  // while version() stays the same. The version changes when a sample comes
  // or goes; expires_at() is when the oldest sample leaves the window
  // (TimePoint::max() when there is none) — the only other way an answer
  // changes.
  std::uint64_t version() const { return version_; }
  TimePoint expires_at() const;

 private:
  void insert(double value, bool censored, bool race, TimePoint now);
  struct Point;
  template <class Sorted>
  static void of(const Sorted& sorted, std::size_t censored, std::span<const double> qs,
                 std::span<std::optional<double>> out, bool* lower_bound);
  void evict(TimePoint now);
  void drop_oldest();

  struct Sample {
    TimePoint at;
    double value;
    bool censored;
    bool race;  // censored by a race lost, not a wait run out
  };
  // Sorted by value; at equal values an observed one before a censored one
  // (the usual Kaplan-Meier convention: the censored was still at risk).
  struct Point {
    double value;
    bool censored;
    auto operator<=>(const Point&) const = default;
  };
  // A sorted multiset of points in blocks of at most kMaxBlock: inserting or
  // removing one moves the points of one block. Blocks split when full and
  // merge with a neighbour when two would fill at most half of one, so any
  // two neighbours hold more than kMaxBlock / 2 points: at most
  // 4n/kMaxBlock + 1 blocks, and a rank is found in a short walk.
  class SortedPoints {
   public:
    static constexpr std::size_t kMaxBlock = 128;
    class Iterator;
    void insert(const Point& p);  // after any equal points
    void erase(const Point& p);   // one of the points equal to p, if any
    std::size_t size() const { return size_; }
    bool empty() const { return size_ == 0; }
    const Point& operator[](std::size_t rank) const;
    const Point& back() const { return blocks_.back().back(); }
    Iterator begin() const;
    Iterator end() const;

   private:
    std::vector<std::vector<Point>> blocks_;  // each non-empty, in order
    std::size_t size_ = 0;
  };
  std::chrono::milliseconds window_;
  std::size_t max_samples_;
  std::deque<Sample> samples_;
  SortedPoints sorted_;  // the window's samples, in order
  std::size_t censored_ = 0;
  std::size_t lost_races_ = 0;
  std::uint64_t version_ = 0;
};

}  // namespace llmgate::routing
