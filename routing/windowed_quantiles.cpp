#include "routing/windowed_quantiles.h"

#include <algorithm>
#include <cmath>

namespace llmgate::routing {

void WindowedQuantiles::add(double value, TimePoint now) {
  evict(now);
  if (max_samples_ == 0 || std::isnan(value)) return;  // NaN has no place in an order
  if (samples_.size() == max_samples_) drop_oldest();
  samples_.push_back({now, value});
  sorted_.insert(std::upper_bound(sorted_.begin(), sorted_.end(), value), value);
}

void WindowedQuantiles::drop_oldest() {
  // Any one of the equal values will do.
  sorted_.erase(std::lower_bound(sorted_.begin(), sorted_.end(), samples_.front().value));
  samples_.pop_front();
}

void WindowedQuantiles::evict(TimePoint now) {
  while (!samples_.empty() && now - samples_.front().at >= window_) drop_oldest();
}

std::size_t WindowedQuantiles::count(TimePoint now) {
  evict(now);
  return samples_.size();
}

std::optional<double> WindowedQuantiles::quantile(double q, TimePoint now) {
  return quantiles({q}, now).front();
}

std::vector<std::optional<double>> WindowedQuantiles::quantiles(const std::vector<double>& qs,
                                                                TimePoint now) {
  evict(now);
  std::vector<std::optional<double>> out(qs.size());
  if (samples_.empty()) return out;
  const auto n = sorted_.size();
  for (std::size_t i = 0; i < qs.size(); ++i) {
    double q = std::clamp(qs[i], 0.0, 1.0);
    // Nearest rank: the smallest value with at least q of the samples at or below it.
    auto rank = static_cast<std::size_t>(std::ceil(q * static_cast<double>(n)));
    out[i] = sorted_[rank == 0 ? 0 : rank - 1];
  }
  return out;
}

}  // namespace llmgate::routing
