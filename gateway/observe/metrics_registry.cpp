// The process-wide metrics (metrics.h): the registry, its own series and
// the scrape.
#include "gateway/observe/metrics_families.h"

namespace llmgate::gateway {

MetricsRegistry::MetricsRegistry() : impl_(std::make_unique<Impl>()) {}
MetricsRegistry::~MetricsRegistry() = default;

void MetricsRegistry::request_started() { impl_->in_flight.Increment(); }
void MetricsRegistry::request_finished() { impl_->in_flight.Decrement(); }

void MetricsRegistry::on_fallback(routing::AttemptOutcome reason) {
  impl_->fallbacks_by[index_of(reason)]->Increment();
}

void MetricsRegistry::on_hedge(HedgeResult result) {
  impl_->hedges_by[index_of(result)]->Increment();
}

void MetricsRegistry::on_overhead(OverheadPhase phase, std::chrono::nanoseconds d) {
  impl_->overhead_by[static_cast<int>(phase)]->observe(std::chrono::duration<double>(d).count());
}

const char* to_string(ReloadResult r) {
  switch (r) {
    case ReloadResult::kSuccess:
      return "success";
    case ReloadResult::kFailure:
      return "failure";
    case ReloadResult::kRejected:
      return "rejected";
  }
  return "failure";
}

void MetricsRegistry::on_reload(ReloadResult result, double unix_seconds) {
  const bool ok = result == ReloadResult::kSuccess;
  impl_->reloads_by[static_cast<std::size_t>(result)]->Increment();
  impl_->reload_ok.Add({}).Set(ok ? 1 : 0);
  if (ok) impl_->reload_time.Add({}).Set(unix_seconds);
}

void MetricsRegistry::on_credential_refresh(std::string_view provider, bool ok,
                                            double expires_unix) {
  const std::string name(provider);
  impl_->credential_refreshes.Add({{"provider", name}, {"result", ok ? "success" : "failure"}})
      .Increment();
  if (ok) impl_->credential_expiry.Add({{"provider", name}}).Set(expires_unix);
}

void MetricsRegistry::enable_shared_state() {
  if (impl_->shared_series.load()) return;
  static const Histogram::BucketBoundaries kSharedBuckets = {
      0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25};
  auto s = std::make_unique<Impl::SharedSeries>();
  s->up = &impl_->shared_up_family.Add({});
  for (auto op : kSharedOps) {
    const std::size_t o = index_of(op);
    for (auto r : kSharedResults) {
      s->ops[o][index_of(r)] =
          &impl_->shared_ops.Add({{"op", to_string(op)}, {"result", to_string(r)}});
    }
    s->latency[o] = sharded_series(impl_->shared_latency, {{"op", to_string(op)}}, kSharedBuckets,
                                   impl_->folder);
    s->fallbacks[o][0] = &impl_->shared_fallbacks.Add({{"op", to_string(op)}, {"mode", "closed"}});
    s->fallbacks[o][1] = &impl_->shared_fallbacks.Add({{"op", to_string(op)}, {"mode", "open"}});
  }
  s->events = &impl_->shared_events.Add({});
  impl_->shared_storage = std::move(s);
  impl_->shared_series.store(impl_->shared_storage.get());
}

void MetricsRegistry::set_shared_up(bool up) {
  if (auto* s = impl_->shared_series.load()) s->up->Set(up ? 1 : 0);
}

void MetricsRegistry::on_shared_op(SharedOp op, SharedResult result, double seconds) {
  auto* s = impl_->shared_series.load();
  if (!s) return;
  s->ops[index_of(op)][index_of(result)]->Increment();
  if (result == SharedResult::kOk || result == SharedResult::kError)
    s->latency[index_of(op)]->observe(seconds);
}

void MetricsRegistry::on_shared_fallback(SharedOp op, bool open) {
  if (auto* s = impl_->shared_series.load()) s->fallbacks[index_of(op)][open ? 1 : 0]->Increment();
}

void MetricsRegistry::on_shared_event_applied() {
  if (auto* s = impl_->shared_series.load()) s->events->Increment();
}

void MetricsRegistry::enable_tracing() {
  if (impl_->trace_series.load()) return;
  auto t = std::make_unique<Impl::TraceSeries>();
  t->by[0] = &impl_->trace_exported.Add({});
  t->by[1] = &impl_->trace_dropped.Add({{"reason", "queue_full"}});
  t->by[2] = &impl_->trace_dropped.Add({{"reason", "export_failed"}});
  impl_->trace_storage = std::move(t);
  impl_->trace_series.store(impl_->trace_storage.get());
}

void MetricsRegistry::on_trace_spans(TraceSpanResult result, std::uint64_t n) {
  if (auto* t = impl_->trace_series.load())
    t->by[static_cast<std::size_t>(result)]->Increment(static_cast<double>(n));
}

void MetricsRegistry::set_draining(bool draining) { impl_->draining.Set(draining ? 1 : 0); }

void MetricsRegistry::on_auth_rejected(AuthRejection reason) {
  impl_->auth_by[index_of(reason)]->Increment();
}

void MetricsRegistry::on_refused(config::Operation op, std::string_view model, Refused reason,
                                 std::string_view api) {
  // (Family::Add finds the series when it exists: refusals are not the hot path.)
  prometheus::Labels labels{{"model", std::string(model)},
                            {"outcome", to_string(reason)},
                            {"gen_ai_operation_name", config::gen_ai_name(op)}};
  if (!api.empty()) labels.emplace("api", std::string(api));
  impl_->requests.Add(labels).Increment();
}

std::string MetricsRegistry::scrape(const config::Config& cfg, routing::RoutingState& state) {
  const auto now = routing::Clock::now();
  std::lock_guard lock(impl_->scrape_mu);
  impl_->reconcile(cfg);
  for (auto& [id, g] : impl_->deployment_gauges) {
    auto s = state.stats.get_or_prior(id, now);
    g.estimate->Set(s.ttft_estimate_ms / 1000.0);
    const std::optional<double> qs[] = {s.ttft_p50_ms, s.ttft_p95_ms, s.ttft_p99_ms};
    // NaN, not 0, while the window is empty: "no data" must not read as "instant".
    for (std::size_t i = 0; i < g.quantiles.size(); ++i) {
      g.quantiles[i]->Set(qs[i] ? *qs[i] / 1000.0 : kNaN);
    }
    g.tps->Set(s.tps_estimate);
    g.in_flight->Set(static_cast<double>(s.in_flight));
    g.error_rate->Set(s.error_rate);
    auto h = state.health.peek(id, now);
    for (std::size_t i = 0; i < kStates.size(); ++i)
      g.states[i]->Set(h.state == kStates[i] ? 1 : 0);
    // The tracker counts ejections itself; the counter follows it. (A
    // deployment whose upstream changed on a reload restarts at 0: the
    // counter then stays where it was, as counters must.)
    const std::uint64_t total = state.health.ejections_total(id);
    if (total > g.ejections_seen)
      g.ejections->Increment(static_cast<double>(total - g.ejections_seen));
    g.ejections_seen = total;
  }
  for (const auto& m : cfg.models) {
    for (const auto& r : routing::rank_deployments(cfg, m, state, now)) {
      auto& g = impl_->rank_gauges.at({m.name, r.d->id()});
      g.score->Set(r.rank ? r.score : kNaN);
      g.rank->Set(r.rank ? static_cast<double>(*r.rank) : 0);
    }
  }
  impl_->folder.fold_all();
  std::ostringstream out;
  prometheus::TextSerializer().Serialize(out, impl_->registry.Collect());
  return out.str();
}

// ---- Metrics: one config snapshot's series ------------------------------------

}  // namespace llmgate::gateway
