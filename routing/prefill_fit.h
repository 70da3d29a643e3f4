// A deployment's prefill cost, learnt online: time to first token grows with
// the input tokens the provider must read (those not served from its prompt
// cache). TTFT ~ base + slope x k, k = uncached input tokens / 1000, fitted
// by exponentially decayed least squares and shrunk toward a prior slope, so
// a deployment seen only at one size keeps the prior's slope and one seen at
// many sizes gets its own. The slope is never negative (a bigger prompt
// never makes a first token sooner) and a sample far above what the fit
// predicts is clipped (a queueing spike is not a prefill cost). Pure and
// allocation-free; the caller holds the entry's lock.
#pragma once

#include <algorithm>
#include <cmath>

namespace llmgate::routing {

class PrefillFit {
 public:
  // Each older sample weighs kDecay of the next (~100 samples of memory).
  static constexpr double kDecay = 0.99;
  // How strongly the prior slope holds: as much as this sum of squared
  // spreads (in thousands of tokens) of observed samples -- e.g. 8 samples
  // 1k tokens either side of their mean.
  static constexpr double kPriorWeight = 8;
  // A sample above kClip x the fit's prediction counts as kClip x it.
  static constexpr double kClip = 4;
  static constexpr double kMaxSlope = 5000;  // ms per 1k tokens: a clamp, not a model

  // One observed first token: `k` thousand uncached input tokens, `ttft_ms`.
  void add(double k, double ttft_ms, double prior_slope) {
    if (!(k >= 0) || !(ttft_ms >= 0)) return;
    if (w_ > 0) {
      const double predicted = base(prior_slope) + slope(prior_slope) * k;
      if (predicted > 0) ttft_ms = std::min(ttft_ms, kClip * predicted);
    }
    w_ = w_ * kDecay + 1;
    sx_ = sx_ * kDecay + k;
    sy_ = sy_ * kDecay + ttft_ms;
    sxx_ = sxx_ * kDecay + k * k;
    sxy_ = sxy_ * kDecay + k * ttft_ms;
    ++samples_;
  }

  // ms per 1k uncached input tokens.
  double slope(double prior_slope) const {
    if (w_ <= 0) return prior_slope;
    const double mx = sx_ / w_;
    const double spread = std::max(0.0, sxx_ - sx_ * mx);  // sum w (x - mean)^2
    const double covariance = sxy_ - sx_ * (sy_ / w_);     // sum w (x - mean)(y - mean)
    const double s = (covariance + kPriorWeight * prior_slope) / (spread + kPriorWeight);
    return std::clamp(s, 0.0, kMaxSlope);
  }
  // The TTFT of an empty prompt on the fit's line (for clipping).
  double base(double prior_slope) const {
    if (w_ <= 0) return 0;
    return std::max(0.0, sy_ / w_ - slope(prior_slope) * (sx_ / w_));
  }
  // How much the fit has seen of sizes apart from their mean (0: one size):
  // the evidence behind a slope of its own.
  double spread() const { return w_ > 0 ? std::max(0.0, sxx_ - sx_ * (sx_ / w_)) : 0; }
  // The (weighted) mean size seen, in thousands of tokens (0 before any).
  double mean_k() const { return w_ > 0 ? sx_ / w_ : 0; }

  // How much of a prediction at `k` rests on the prior slope rather than on
  // sizes seen (ms): the prior's share of the slope times the distance from
  // the sizes seen times the prior slope. Near 0 at a size the fit has seen
  // (its line passes through those answers whatever the slope) or with a
  // slope of its own; the whole prior prefill before any sample. A fit of
  // short prompts only says nothing yet of a long one's prefill.
  static double doubt_ms(double spread, double mean_k, double k, double prior_slope) {
    const double prior_share = kPriorWeight / (std::max(0.0, spread) + kPriorWeight);
    return prior_share * std::abs(k - mean_k) * prior_slope;
  }
  double doubt_ms(double k, double prior_slope) const {
    return doubt_ms(spread(), mean_k(), k, prior_slope);
  }
  // A prediction whose doubt is this large is a guess: at least the level
  // (a prompt of no size's TTFT) and kMinDoubtMs. The router races such a
  // prompt on two deployments rather than bet on the prior (docs/routing.md,
  // "Exploring a prompt size").
  static constexpr double kMinDoubtMs = 100;
  static bool guess(double doubt_ms, double base_ms) {
    return doubt_ms >= std::max(kMinDoubtMs, base_ms);
  }
  unsigned long long samples() const { return samples_; }

 private:
  double w_ = 0, sx_ = 0, sy_ = 0, sxx_ = 0, sxy_ = 0;
  unsigned long long samples_ = 0;
};

}  // namespace llmgate::routing
