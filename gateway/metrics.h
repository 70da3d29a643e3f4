// Prometheus metrics (prometheus-cpp core, served as text on GET /metrics).
//
// Label values come only from config (model names, provider names, deployment
// ids) or from fixed enums (outcomes, states), never from requests, so series
// cardinality is bounded by the config. Every labelled child is created at
// start-up; the hot path only increments pre-resolved pointers (atomics).
// The router's own beliefs (estimates, percentiles, health state) are gauges
// refreshed from the RoutingState at scrape time. Beast-free.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <utility>

#include "config/config.h"
#include "routing/attempt_record.h"
#include "routing/routing_state.h"

namespace prometheus {
class Registry;
class Counter;
class Gauge;
class Histogram;
template <typename T>
class Family;
}  // namespace prometheus

namespace llmgate::gateway {

class Metrics {
 public:
  explicit Metrics(const config::Config& cfg);
  ~Metrics();
  Metrics(const Metrics&) = delete;
  Metrics& operator=(const Metrics&) = delete;

  // One finished upstream attempt of a request for public model `model`.
  void on_attempt(const std::string& model, const routing::AttemptRecord& rec);
  // One finished request of a configured model: "success", "error",
  // "rejected" (no route, rate limited by the gateway) or "client_gone".
  void on_request(const std::string& model, const char* outcome);
  void request_started();
  void request_finished();
  // The router's first choice for a request.
  void on_route(const std::string& model, const std::string& deployment, config::Policy policy);
  // An attempt beyond the first, after a failure of `reason` (an AttemptOutcome name).
  void on_fallback(routing::AttemptOutcome reason);
  // A hedge: "won" (the hedge answered first), "lost" (the primary did), "denied" (budget).
  void on_hedge(const char* result);

  // The text exposition format, with the router gauges refreshed first.
  std::string scrape(routing::RoutingState& state);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace llmgate::gateway
