#include "routing/windowed_quantiles.h"

#include <algorithm>
#include <cmath>

namespace llmgate::routing {

void WindowedQuantiles::add(double value, TimePoint now) { insert(value, false, now); }

void WindowedQuantiles::add_censored(double bound, TimePoint now) { insert(bound, true, now); }

void WindowedQuantiles::insert(double value, bool censored, TimePoint now) {
  evict(now);
  if (max_samples_ == 0 || std::isnan(value)) return;  // NaN has no place in an order
  if (samples_.size() == max_samples_) drop_oldest();
  samples_.push_back({now, value, censored});
  const Point p{value, censored};
  sorted_.insert(std::upper_bound(sorted_.begin(), sorted_.end(), p), p);
  if (censored) ++censored_;
}

void WindowedQuantiles::drop_oldest() {
  // Any one of the equal points will do.
  const Sample& s = samples_.front();
  sorted_.erase(std::lower_bound(sorted_.begin(), sorted_.end(), Point{s.value, s.censored}));
  if (s.censored) --censored_;
  samples_.pop_front();
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

std::optional<double> WindowedQuantiles::quantile(double q, TimePoint now) {
  return quantiles({q}, now).front();
}

std::vector<std::optional<double>> WindowedQuantiles::quantiles(const std::vector<double>& qs,
                                                                TimePoint now, bool* lower_bound) {
  evict(now);
  return of(sorted_, censored_, qs, lower_bound);
}

std::vector<std::optional<double>> WindowedQuantiles::recent_quantiles(
    const std::vector<double>& qs, TimePoint now, std::size_t n, bool* lower_bound) {
  evict(now);
  std::vector<Point> last;
  std::size_t censored = 0;
  const std::size_t from = samples_.size() > n ? samples_.size() - n : 0;
  for (std::size_t i = from; i < samples_.size(); ++i) {
    last.push_back({samples_[i].value, samples_[i].censored});
    censored += samples_[i].censored ? 1 : 0;
  }
  std::sort(last.begin(), last.end());
  return of(last, censored, qs, lower_bound);
}

std::vector<std::optional<double>> WindowedQuantiles::observed_quantiles(
    const std::vector<double>& qs, TimePoint now) {
  evict(now);
  if (censored_ == 0) return of(sorted_, 0, qs, nullptr);
  std::vector<Point> observed;
  observed.reserve(sorted_.size() - censored_);
  for (const Point& p : sorted_) {
    if (!p.censored) observed.push_back(p);
  }
  return of(observed, 0, qs, nullptr);
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

std::vector<std::optional<double>> WindowedQuantiles::of(const std::vector<Point>& sorted,
                                                         std::size_t censored,
                                                         const std::vector<double>& qs,
                                                         bool* lower_bound) {
  if (lower_bound) *lower_bound = false;
  std::vector<std::optional<double>> out(qs.size());
  if (sorted.empty()) return out;
  const auto n = sorted.size();
  if (censored == 0) {
    for (std::size_t i = 0; i < qs.size(); ++i) {
      double q = std::clamp(qs[i], 0.0, 1.0);
      // Nearest rank: the smallest value with at least q of the samples at or below it.
      auto rank = static_cast<std::size_t>(std::ceil(q * static_cast<double>(n)));
      out[i] = sorted[rank == 0 ? 0 : rank - 1].value;
    }
    return out;
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
  return out;
}

}  // namespace llmgate::routing
