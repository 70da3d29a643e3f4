#include "gateway/observe/route_history.h"

#include <cmath>
#include <nlohmann/json.hpp>

#include "routing/ranking.h"

namespace llmgate::gateway {
namespace {

// The columns of a deployment's row in a sample, in order.
constexpr const char* kFields[] = {"rank",     "state", "ttft_estimate", "ttft_p50",  "ttft_p95",
                                   "ttft_p99", "tps",   "in_flight",     "error_rate"};

// One decimal is all a chart shows; it keeps the samples small.
nlohmann::json rounded(double v, double scale = 10) { return std::round(v * scale) / scale; }
nlohmann::json rounded(const std::optional<double>& v) {
  return v ? rounded(*v) : nlohmann::json(nullptr);
}

nlohmann::json event_json(const RouteEvent& e) {
  nlohmann::json j = {{"t", e.unix_ms},
                      {"request_id", e.request_id},
                      {"model", e.model},
                      {"outcome", e.outcome},
                      {"attempts", e.attempts}};
  j["deployment"] = e.deployment.empty() ? nlohmann::json(nullptr) : nlohmann::json(e.deployment);
  if (!e.failed.empty()) j["failed"] = e.failed;
  if (!e.hedge.empty()) {
    j["hedge"] = e.hedge;
    if (!e.hedge_lost.empty()) j["hedge_lost"] = e.hedge_lost;
    j["recheck"] = e.recheck;
  }
  if (!e.lesson.empty()) j["lesson"] = e.lesson;
  if (e.ttft_ms) j["ttft_ms"] = rounded(*e.ttft_ms);
  return j;
}

}  // namespace

void RouteHistory::sample(const config::Config& cfg, routing::RoutingState& state,
                          routing::Clock::time_point now, std::int64_t unix_ms) {
  nlohmann::json models = nlohmann::json::object();
  for (const auto& m : cfg.models) {
    nlohmann::json rows = nlohmann::json::object();
    for (const auto& r : routing::rank_deployments(cfg, m, state, now)) {
      const auto& s = r.s;
      rows[r.d->id()] = {r.rank ? nlohmann::json(*r.rank) : nlohmann::json(nullptr),
                         routing::to_string(r.health.state),
                         rounded(s.ttft_estimate_ms),
                         rounded(s.ttft_p50_ms),
                         rounded(s.ttft_p95_ms),
                         rounded(s.ttft_p99_ms),
                         rounded(s.tps_p50 ? *s.tps_p50 : s.tps_estimate),
                         s.in_flight,
                         rounded(s.error_rate, 1000)};
    }
    models[m.name] = std::move(rows);
  }
  Sample sample{0, nlohmann::json{{"t", unix_ms}, {"models", std::move(models)}}.dump()};
  std::lock_guard lock(mu_);
  sample.seq = ++seq_;
  sample_bytes_ += sample.json.size();
  samples_.push_back(std::move(sample));
  while (samples_.size() > 1 &&
         (samples_.size() > options_.max_samples || sample_bytes_ > options_.max_bytes)) {
    sample_bytes_ -= samples_.front().json.size();
    samples_.pop_front();
  }
}

void RouteHistory::record(RouteEvent event) {
  std::lock_guard lock(mu_);
  events_.emplace_back(++seq_, std::move(event));
  while (events_.size() > options_.max_events) events_.pop_front();
}

std::string RouteHistory::json(std::uint64_t cursor) const {
  nlohmann::json events = nlohmann::json::array();
  std::string samples = "[";
  std::uint64_t last;
  {
    std::lock_guard lock(mu_);
    last = seq_;
    for (const auto& s : samples_) {
      if (s.seq <= cursor) continue;
      if (samples.size() > 1) samples += ',';
      samples += s.json;
    }
    for (const auto& [seq, e] : events_) {
      if (seq > cursor) events.push_back(event_json(e));
    }
  }
  samples += ']';
  nlohmann::json head = {{"interval_ms", options_.interval.count()},
                         {"max_samples", options_.max_samples},
                         {"fields", kFields},
                         {"cursor", last}};
  std::string out = head.dump();
  out.pop_back();  // '}': the samples are spliced in as rendered
  out += ",\"samples\":";
  out += samples;
  out += ",\"events\":";
  out += events.dump();
  out += '}';
  return out;
}

}  // namespace llmgate::gateway
