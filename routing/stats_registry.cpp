#include "routing/stats_registry.h"

namespace llmgate::routing {

const char* to_string(AttemptOutcome o) {
  switch (o) {
    case AttemptOutcome::kSuccess: return "success";
    case AttemptOutcome::kConnectError: return "connect_error";
    case AttemptOutcome::kUpstreamStatus: return "upstream_status";
    case AttemptOutcome::kClientError: return "client_error";
    case AttemptOutcome::kTtftTimeout: return "ttft_timeout";
    case AttemptOutcome::kIdleTimeout: return "idle_timeout";
    case AttemptOutcome::kTruncated: return "truncated";
    case AttemptOutcome::kMalformed: return "malformed";
    case AttemptOutcome::kClientGone: return "client_gone";
    case AttemptOutcome::kTotalTimeout: return "total_timeout";
  }
  return "unknown";
}

StatsRegistry::InFlight::InFlight(StatsRegistry& r, std::string deployment)
    : registry_(r), deployment_(std::move(deployment)) {
  std::lock_guard lock(registry_.mu_);
  ++registry_.entry(deployment_).in_flight;
}

StatsRegistry::InFlight::~InFlight() {
  std::lock_guard lock(registry_.mu_);
  --registry_.entry(deployment_).in_flight;
}

DeploymentStats& StatsRegistry::entry(const std::string& deployment) {
  auto [it, inserted] = stats_.try_emplace(deployment);
  if (inserted) it->second.deployment = deployment;
  return it->second;
}

void StatsRegistry::record(const AttemptRecord& r) {
  std::lock_guard lock(mu_);
  DeploymentStats& s = entry(r.deployment);
  ++s.attempts;
  // A client that walked away says nothing about the deployment.
  if (r.outcome == AttemptOutcome::kSuccess) {
    ++s.successes;
  } else if (r.outcome != AttemptOutcome::kClientGone && r.outcome != AttemptOutcome::kClientError) {
    ++s.failures;
  }
  if (auto t = r.ttft()) s.last_ttft_ms = std::chrono::duration<double, std::milli>(*t).count();
  if (auto tps = r.tps()) s.last_tps = *tps;
  if (r.output_tokens) s.output_tokens += static_cast<std::uint64_t>(*r.output_tokens);
  s.last_outcome = r.outcome;
}

std::optional<DeploymentStats> StatsRegistry::get(const std::string& deployment) const {
  std::lock_guard lock(mu_);
  auto it = stats_.find(deployment);
  if (it == stats_.end()) return std::nullopt;
  return it->second;
}

std::vector<DeploymentStats> StatsRegistry::all() const {
  std::lock_guard lock(mu_);
  std::vector<DeploymentStats> out;
  for (const auto& [k, v] : stats_) out.push_back(v);
  return out;
}

}  // namespace llmgate::routing
