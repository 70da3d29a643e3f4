#include "routing/windowed_quantiles.h"

#include <algorithm>
#include <cmath>

namespace llmgate::routing {

void WindowedQuantiles::add(double value, TimePoint now) {
  evict(now);
  if (max_samples_ == 0) return;
  if (samples_.size() == max_samples_) samples_.pop_front();
  samples_.push_back({now, value});
  sorted_valid_ = false;
}

void WindowedQuantiles::evict(TimePoint now) {
  while (!samples_.empty() && now - samples_.front().at >= window_) {
    samples_.pop_front();
    sorted_valid_ = false;
  }
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
  if (!sorted_valid_) {  // the router asks every request; samples change per attempt
    scratch_.clear();
    for (const auto& s : samples_) scratch_.push_back(s.value);
    std::sort(scratch_.begin(), scratch_.end());
    sorted_valid_ = true;
  }
  const auto n = scratch_.size();
  for (std::size_t i = 0; i < qs.size(); ++i) {
    double q = std::clamp(qs[i], 0.0, 1.0);
    // Nearest rank: the smallest value with at least q of the samples at or below it.
    auto rank = static_cast<std::size_t>(std::ceil(q * static_cast<double>(n)));
    out[i] = scratch_[rank == 0 ? 0 : rank - 1];
  }
  return out;
}

}  // namespace llmgate::routing
