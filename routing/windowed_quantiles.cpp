#include "routing/windowed_quantiles.h"

#include <algorithm>
#include <cmath>

namespace llmgate::routing {

class WindowedQuantiles::SortedPoints::Iterator {
 public:
  Iterator(const std::vector<std::vector<Point>>& blocks, std::size_t block)
      : blocks_(&blocks), block_(block) {}
  const Point& operator*() const { return (*blocks_)[block_][at_]; }
  Iterator& operator++() {
    if (++at_ == (*blocks_)[block_].size()) {
      ++block_;
      at_ = 0;
    }
    return *this;
  }
  bool operator==(const Iterator&) const = default;

 private:
  const std::vector<std::vector<Point>>* blocks_;
  std::size_t block_;
  std::size_t at_ = 0;
};

WindowedQuantiles::SortedPoints::Iterator WindowedQuantiles::SortedPoints::begin() const {
  return {blocks_, 0};
}

WindowedQuantiles::SortedPoints::Iterator WindowedQuantiles::SortedPoints::end() const {
  return {blocks_, blocks_.size()};
}

void WindowedQuantiles::SortedPoints::insert(const Point& p) {
  if (blocks_.empty()) {
    blocks_.emplace_back().reserve(kMaxBlock);
  }
  // The first block with a point above p (every point before it is <= p),
  // else the last.
  auto block = std::partition_point(blocks_.begin(), blocks_.end() - 1,
                                    [&](const std::vector<Point>& b) { return !(p < b.back()); });
  block->insert(std::upper_bound(block->begin(), block->end(), p), p);
  ++size_;
  if (block->size() < kMaxBlock) return;
  // Full: its upper half becomes the next block.
  std::vector<Point> upper;
  upper.reserve(kMaxBlock);
  const auto half = block->begin() + static_cast<std::ptrdiff_t>(kMaxBlock / 2);
  upper.assign(half, block->end());
  block->erase(half, block->end());
  blocks_.insert(block + 1, std::move(upper));
}

void WindowedQuantiles::SortedPoints::erase(const Point& p) {
  // The first block whose last point is >= p holds the first point equal to p.
  auto block = std::partition_point(blocks_.begin(), blocks_.end(),
                                    [&](const std::vector<Point>& b) { return b.back() < p; });
  if (block == blocks_.end()) return;
  auto it = std::lower_bound(block->begin(), block->end(), p);
  if (it == block->end() || *it != p) return;
  block->erase(it);
  --size_;
  if (block->empty()) {
    blocks_.erase(block);
    return;
  }
  // Merge with a neighbour when the two fit in half of one: checked on both
  // sides, every two neighbours keep more than half a block between them
  // (inserts and merges only grow them; a split leaves 64 beside 64).
  if (block != blocks_.begin()) {
    auto prev = block - 1;
    if (prev->size() + block->size() <= kMaxBlock / 2) {
      prev->insert(prev->end(), block->begin(), block->end());
      blocks_.erase(block);
      return;
    }
  }
  if (auto next = block + 1;
      next != blocks_.end() && block->size() + next->size() <= kMaxBlock / 2) {
    block->insert(block->end(), next->begin(), next->end());
    blocks_.erase(next);
  }
}

const WindowedQuantiles::Point& WindowedQuantiles::SortedPoints::operator[](
    std::size_t rank) const {
  for (const auto& b : blocks_) {
    if (rank < b.size()) return b[rank];
    rank -= b.size();
  }
  return blocks_.back().back();  // past the end: not asked by the callers
}

void WindowedQuantiles::add(double value, TimePoint now) { insert(value, false, false, now); }

void WindowedQuantiles::add_censored(double bound, TimePoint now, bool race) {
  insert(bound, true, race, now);
}

void WindowedQuantiles::insert(double value, bool censored, bool race, TimePoint now) {
  evict(now);
  if (max_samples_ == 0 || std::isnan(value)) return;  // NaN has no place in an order
  if (samples_.size() == max_samples_) drop_oldest();
  samples_.push_back({now, value, censored, censored && race});
  sorted_.insert(Point{value, censored});
  if (censored) ++censored_;
  if (censored && race) ++lost_races_;
  ++version_;
}

void WindowedQuantiles::drop_oldest() {
  // Any one of the equal points will do.
  const Sample& s = samples_.front();
  sorted_.erase(Point{s.value, s.censored});
  if (s.censored) --censored_;
  if (s.race) --lost_races_;
  samples_.pop_front();
  ++version_;
}

WindowedQuantiles::TimePoint WindowedQuantiles::expires_at() const {
  if (samples_.empty()) return TimePoint::max();
  // evict() drops a sample once now - at >= window.
  return samples_.front().at + window_;
}

void WindowedQuantiles::evict(TimePoint now) {
  while (!samples_.empty() && now - samples_.front().at >= window_) drop_oldest();
}

std::size_t WindowedQuantiles::count(TimePoint now) {
  evict(now);
  return samples_.size();
}

std::size_t WindowedQuantiles::censored(TimePoint now) {
  evict(now);
  return censored_;
}

std::size_t WindowedQuantiles::lost_races(TimePoint now) {
  evict(now);
  return lost_races_;
}

std::optional<double> WindowedQuantiles::quantile(double q, TimePoint now) {
  std::optional<double> out;
  quantiles(std::span<const double>(&q, 1), now, std::span<std::optional<double>>(&out, 1));
  return out;
}

std::vector<std::optional<double>> WindowedQuantiles::quantiles(const std::vector<double>& qs,
                                                                TimePoint now, bool* lower_bound) {
  std::vector<std::optional<double>> out(qs.size());
  quantiles(qs, now, out, lower_bound);
  return out;
}

std::vector<std::optional<double>> WindowedQuantiles::recent_quantiles(
    const std::vector<double>& qs, TimePoint now, std::size_t n, bool* lower_bound) {
  std::vector<std::optional<double>> out(qs.size());
  recent_quantiles(qs, now, n, out, lower_bound);
  return out;
}

std::vector<std::optional<double>> WindowedQuantiles::observed_quantiles(
    const std::vector<double>& qs, TimePoint now) {
  std::vector<std::optional<double>> out(qs.size());
  observed_quantiles(qs, now, out);
  return out;
}

void WindowedQuantiles::quantiles(std::span<const double> qs, TimePoint now,
                                  std::span<std::optional<double>> out, bool* lower_bound) {
  evict(now);
  of(sorted_, censored_, qs, out, lower_bound);
}

void WindowedQuantiles::recent_quantiles(std::span<const double> qs, TimePoint now, std::size_t n,
                                         std::span<std::optional<double>> out, bool* lower_bound) {
  evict(now);
  const std::size_t from = samples_.size() > n ? samples_.size() - n : 0;
  const std::size_t count = samples_.size() - from;
  // The router asks for the last 20: sorted on the stack.
  constexpr std::size_t kOnStack = 64;
  Point stack[kOnStack];
  std::vector<Point> heap;
  Point* last = stack;
  if (count > kOnStack) {
    heap.resize(count);
    last = heap.data();
  }
  std::size_t censored = 0;
  for (std::size_t i = 0; i < count; ++i) {
    const Sample& s = samples_[from + i];
    last[i] = {s.value, s.censored};
    censored += s.censored ? 1 : 0;
  }
  std::sort(last, last + count);
  of(std::span<const Point>(last, count), censored, qs, out, lower_bound);
}

void WindowedQuantiles::observed_quantiles(std::span<const double> qs, TimePoint now,
                                           std::span<std::optional<double>> out) {
  evict(now);
  if (censored_ == 0) return of(sorted_, 0, qs, out, nullptr);
  // Nearest rank among the observed points of the sorted window, in one walk.
  for (auto& o : out) o.reset();
  const std::size_t n = sorted_.size() - censored_;
  if (n == 0) return;
  std::size_t rank = 0;  // observed points seen so far
  for (const Point& p : sorted_) {
    if (p.censored) continue;
    ++rank;
    for (std::size_t i = 0; i < qs.size(); ++i) {
      if (out[i]) continue;
      const auto want =
          static_cast<std::size_t>(std::ceil(std::clamp(qs[i], 0.0, 1.0) * static_cast<double>(n)));
      if (rank >= std::max<std::size_t>(want, 1)) out[i] = p.value;
    }
  }
}

std::optional<double> WindowedQuantiles::recent_max_observed(TimePoint now, std::size_t n) {
  evict(now);
  if (n == 0 || samples_.size() < n) return std::nullopt;
  double max = samples_.back().value;
  for (auto it = samples_.end() - static_cast<std::ptrdiff_t>(n); it != samples_.end(); ++it) {
    if (it->censored) return std::nullopt;
    max = std::max(max, it->value);
  }
  return max;
}

template <class Sorted>
void WindowedQuantiles::of(const Sorted& sorted, std::size_t censored, std::span<const double> qs,
                           std::span<std::optional<double>> out, bool* lower_bound) {
  if (lower_bound) *lower_bound = false;
  for (auto& o : out) o.reset();
  if (sorted.empty()) return;
  const auto n = sorted.size();
  if (censored == 0) {
    for (std::size_t i = 0; i < qs.size(); ++i) {
      double q = std::clamp(qs[i], 0.0, 1.0);
      // Nearest rank: the smallest value with at least q of the samples at or below it.
      auto rank = static_cast<std::size_t>(std::ceil(q * static_cast<double>(n)));
      out[i] = sorted[rank == 0 ? 0 : rank - 1].value;
    }
    return;
  }
  // Kaplan-Meier: F(t) = 1 - prod over observed t_i <= t of (1 - 1/at_risk_i).
  // One pass in value order answers every quantile.
  double survival = 1;
  std::size_t at_risk = n;
  for (const Point& p : sorted) {
    if (!p.censored) {
      survival *= 1 - 1.0 / static_cast<double>(at_risk);
      for (std::size_t i = 0; i < qs.size(); ++i) {
        // The epsilon keeps 1 - 0.95 computed as 0.050000000000000044 from
        // missing a rank it reaches exactly.
        if (!out[i] && 1 - survival >= std::clamp(qs[i], 0.0, 1.0) - 1e-12) out[i] = p.value;
      }
    }
    --at_risk;
  }
  for (auto& q : out) {
    if (q) continue;
    q = sorted.back().value;  // beyond what the samples can tell: at least this
    if (lower_bound) *lower_bound = true;
  }
}

}  // namespace llmgate::routing
