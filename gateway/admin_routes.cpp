#include "gateway/admin_routes.h"

#include <nlohmann/json.hpp>

namespace llmgate::gateway {
namespace {

nlohmann::json opt(const std::optional<double>& v) {
  return v ? nlohmann::json(*v) : nlohmann::json(nullptr);
}

}  // namespace

std::string routes_json(const config::Config& cfg, const routing::StatsRegistry& stats) {
  auto now = routing::Clock::now();
  nlohmann::json models = nlohmann::json::array();
  for (const auto& m : cfg.models) {
    nlohmann::json deployments = nlohmann::json::array();
    for (const auto& d : m.deployments) {
      const config::Provider* p = cfg.find_provider(d.provider);
      nlohmann::json row = {
          {"deployment", d.id()},
          {"provider", d.provider},
          {"upstream_model", d.model},
          {"region", p ? p->region : ""},
          {"price_per_1m", {{"input", d.price.input_per_1m}, {"output", d.price.output_per_1m}}}};
      routing::DeploymentStats s;
      if (auto got = stats.get(d.id(), now)) {
        s = *got;
      } else {
        // Never used: what the router would assume.
        s.ttft_estimate_ms = static_cast<double>(stats.options().ttft_prior.count());
        s.tps_estimate = stats.options().tps_prior;
      }
      row["ttft_ms"] = {{"estimate", s.ttft_estimate_ms},
                        {"p50", opt(s.ttft_p50_ms)},
                        {"p95", opt(s.ttft_p95_ms)},
                        {"p99", opt(s.ttft_p99_ms)},
                        {"samples", s.ttft_samples}};
      row["tps"] = {{"estimate", s.tps_estimate}, {"p50", opt(s.tps_p50)}};
      row["output_chars_per_s"] = opt(s.chars_per_s_estimate);
      row["error_rate"] = s.error_rate;
      row["consecutive_failures"] = s.consecutive_failures;
      row["in_flight"] = s.in_flight;
      row["attempts"] = s.attempts;
      row["successes"] = s.successes;
      row["failures"] = s.failures;
      row["last_outcome"] = s.last_outcome ? nlohmann::json(routing::to_string(*s.last_outcome))
                                           : nlohmann::json(nullptr);
      deployments.push_back(std::move(row));
    }
    models.push_back({{"model", m.name}, {"deployments", std::move(deployments)}});
  }
  return nlohmann::json{{"models", std::move(models)}}.dump(2);
}

}  // namespace llmgate::gateway
