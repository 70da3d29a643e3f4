// A config snapshot's series (metrics.h): every series a request touches,
// resolved when the snapshot is built.
#include "gateway/observe/metrics_families.h"

namespace llmgate::gateway {

// Every series a request touches, resolved when the snapshot is built and
// indexed as the config is (models, then each model's deployments) and by
// the vocabularies' enums: nothing on the request path looks a name up.
constexpr std::size_t kOperations = std::size(config::kAllOperations);
static_assert(config::kAllOperations[kOperations - 1] == config::Operation::kCompletions);

struct DeploymentSeries {
  // By config::Operation; null for an operation the deployment does not serve.
  std::array<ShardedHistogram*, kOperations> ttft{};
  std::array<ShardedHistogram*, kOperations> tpot{};
  std::array<ShardedHistogram*, kOperations> duration{};
  std::array<Counter*, kOutcomes.size()> attempts{};           // by AttemptOutcome
  std::array<Counter*, 2> upstream_requests{};                 // new, reused connection
  std::array<Counter*, config::kAllPolicies.size()> routes{};  // by Policy
  std::array<Counter*, kSaturations.size()> saturated{};       // by Saturation (null: n/a)
  std::array<Counter*, 2> input_tokens{};                      // uncached, cached
  std::array<Counter*, 3> continuations{};  // by Metrics::Continued (null: none can continue)
  config::Price price;
};

struct ModelSeries {
  // By config::Operation, then RequestOutcome: every operation, so each
  // model shows under each operation label (at 0 where it serves none;
  // admission refuses those before any request is counted).
  std::array<std::array<Counter*, kRequestOutcomes.size()>, kOperations> requests{};
  // By config::Operation; null for one no deployment of the model serves.
  std::array<ShardedHistogram*, kOperations> input_usage{};
  std::array<ShardedHistogram*, kOperations> output_usage{};
  std::array<Counter*, 3> affinity{};  // by Metrics::Affinity
  // By RoutingState::LessonKind, then LessonResult.
  std::array<std::array<Counter*, routing::RoutingState::kLessonResults>,
             routing::RoutingState::kLessonKinds>
      lessons{};
  Counter* lesson_extra = nullptr;
  std::vector<DeploymentSeries> deployments;  // as config::Model::deployments
};

struct Metrics::Impl {
  const config::Config* cfg = nullptr;
  std::vector<ModelSeries> models;  // as config::Config::models
  // The histograms of models' and deployments' series (folded into the
  // registry's series as they go: a reload loses no observation).
  std::vector<std::unique_ptr<ShardedHistogram>> histograms;

  // The position of `x` in `v` (v.size() when it is not an element of `v`:
  // compared as addresses, never subtracted across arrays).
  template <typename T>
  static std::size_t position(const T& x, const std::vector<T>& v) {
    const auto at = reinterpret_cast<std::uintptr_t>(&x);
    const auto begin = reinterpret_cast<std::uintptr_t>(v.data());
    if (at < begin || at >= begin + v.size() * sizeof(T)) return v.size();
    return (at - begin) / sizeof(T);
  }
  ModelSeries* model(const config::Model& m) {
    const std::size_t i = position(m, cfg->models);
    return i < models.size() ? &models[i] : nullptr;  // a model of another config: none
  }
  DeploymentSeries* deployment(const config::Model& m, const config::Deployment& d) {
    ModelSeries* ms = model(m);
    if (!ms) return nullptr;
    const std::size_t i = position(d, m.deployments);
    return i < ms->deployments.size() ? &ms->deployments[i] : nullptr;
  }
};

namespace {

// sharded_series(), kept in `owned`.
ShardedHistogram* sharded(std::vector<std::unique_ptr<ShardedHistogram>>& owned,
                          Family<Histogram>& family, const prometheus::Labels& labels,
                          const Histogram::BucketBoundaries& bounds, HistogramFolder& folder) {
  return owned.emplace_back(sharded_series(family, labels, bounds, folder)).get();
}

DeploymentSeries deployment_series(MetricsRegistry::Impl& f,
                                   std::vector<std::unique_ptr<ShardedHistogram>>& owned,
                                   const config::Model& m, const config::Deployment& d) {
  DeploymentSeries s;
  const std::string id = d.id();
  s.price = d.price;
  for (std::size_t i = 0; i < config::kAllPolicies.size(); ++i) {
    const auto p = config::kAllPolicies[i];
    s.routes[i] =
        &f.routes.Add({{"model", m.name}, {"deployment", id}, {"policy", config::to_string(p)}});
  }
  for (auto op : config::kAllOperations) {
    if (!d.serves(op)) continue;
    const prometheus::Labels genai{{"gen_ai_request_model", m.name},
                                   {"gen_ai_provider_name", d.provider},
                                   {"gen_ai_operation_name", config::gen_ai_name(op)},
                                   {"deployment", id}};
    const auto i = static_cast<std::size_t>(op);
    s.ttft[i] = sharded(owned, f.ttft, genai, kTtftBuckets, f.folder);
    s.tpot[i] = sharded(owned, f.tpot, genai, kTpotBuckets, f.folder);
    s.duration[i] = sharded(owned, f.duration, genai, kDurationBuckets, f.folder);
  }
  // pool_full: this worker's connection pool to the provider stayed full
  // (any deployment); queue_* and shared_state_unavailable: the deployment's
  // own max_concurrent.
  for (auto r : kSaturations) {
    if (r != Saturation::kPoolFull && !d.max_concurrent) continue;
    s.saturated[index_of(r)] = &f.saturated.Add({{"deployment", id}, {"reason", to_string(r)}});
  }
  // Only where a stream can be continued: a model with a deployment that
  // declares how.
  if (std::any_of(m.deployments.begin(), m.deployments.end(), [](const config::Deployment& x) {
        return x.continuation != config::Continuation::kNone;
      })) {
    static constexpr const char* kResults[] = {"continued", "failed", "not_continuable"};
    for (std::size_t i = 0; i < 3; ++i) {
      s.continuations[i] =
          &f.continuations.Add({{"model", m.name}, {"deployment", id}, {"result", kResults[i]}});
    }
  }
  for (bool reused : {false, true}) {
    s.upstream_requests[reused ? 1 : 0] =
        &f.upstream_requests.Add({{"deployment", id}, {"connection", reused ? "reused" : "new"}});
  }
  for (bool cached : {false, true}) {
    s.input_tokens[cached ? 1 : 0] = &f.deployment_input.Add(
        {{"model", m.name}, {"deployment", id}, {"cached", cached ? "true" : "false"}});
  }
  for (std::size_t i = 0; i < kOutcomes.size(); ++i) {
    s.attempts[i] =
        &f.attempts.Add({{"deployment", id}, {"outcome", routing::to_string(kOutcomes[i])}});
  }
  return s;
}

}  // namespace

Metrics::Metrics(MetricsRegistry& registry, const config::Config& cfg)
    : registry_(registry), impl_(std::make_unique<Impl>()) {
  auto& f = *registry.impl_;
  impl_->cfg = &cfg;
  for (const auto& m : cfg.models) {
    ModelSeries& ms = impl_->models.emplace_back();
    for (auto op : config::kAllOperations) {
      const auto i = static_cast<std::size_t>(op);
      const std::string name = config::gen_ai_name(op);
      for (auto o : kRequestOutcomes) {
        ms.requests[i][index_of(o)] = &f.requests.Add(
            {{"model", m.name}, {"outcome", to_string(o)}, {"gen_ai_operation_name", name}});
      }
      const bool served = std::any_of(m.deployments.begin(), m.deployments.end(),
                                      [&](const config::Deployment& d) { return d.serves(op); });
      if (!served) continue;
      auto usage = [&](const char* type) {
        return sharded(impl_->histograms, f.usage,
                       {{"gen_ai_request_model", m.name},
                        {"gen_ai_operation_name", name},
                        {"gen_ai_token_type", type}},
                       kTokenBuckets, f.folder);
      };
      ms.input_usage[i] = usage("input");
      ms.output_usage[i] = usage("output");
    }
    // (In Metrics::Affinity's order.)
    constexpr const char* kAffinityResults[] = {"hit", "miss", "broken"};
    for (std::size_t i = 0; i < ms.affinity.size(); ++i)
      ms.affinity[i] = &f.affinity.Add({{"model", m.name}, {"result", kAffinityResults[i]}});
    // (In RoutingState::LessonKind's and LessonResult's orders.)
    constexpr const char* kLessonKinds[] = {"recheck", "exploration", "size_race"};
    constexpr const char* kLessonResults[] = {"learnt", "missed", "failed"};
    for (std::size_t k = 0; k < ms.lessons.size(); ++k) {
      for (std::size_t r = 0; r < ms.lessons[k].size(); ++r) {
        ms.lessons[k][r] = &f.lessons.Add(
            {{"model", m.name}, {"kind", kLessonKinds[k]}, {"result", kLessonResults[r]}});
      }
    }
    ms.lesson_extra = &f.lesson_extra.Add({{"model", m.name}});
    for (const auto& d : m.deployments)
      ms.deployments.push_back(deployment_series(f, impl_->histograms, m, d));
  }
}

Metrics::~Metrics() = default;

void Metrics::on_attempt(const config::Model& model, const config::Deployment& d,
                         const routing::AttemptRecord& rec, config::Operation op) {
  ModelSeries* ms = impl_->model(model);
  DeploymentSeries* s = impl_->deployment(model, d);
  if (!ms || !s) return;
  const auto i = static_cast<std::size_t>(op);
  s->attempts[index_of(rec.outcome)]->Increment();
  if (rec.request_sent != routing::Clock::time_point{}) {
    s->upstream_requests[rec.reused_connection ? 1 : 0]->Increment();
  }
  if (auto t = rec.ttft(); t && s->ttft[i])
    s->ttft[i]->observe(std::chrono::duration<double>(*t).count());
  if (rec.outcome != routing::AttemptOutcome::kSuccess) return;
  if (auto tps = rec.tps(); tps && *tps > 0 && s->tpot[i]) s->tpot[i]->observe(1.0 / *tps);
  if (rec.request_sent != routing::Clock::time_point{} && s->duration[i]) {
    s->duration[i]->observe(
        std::chrono::duration<double>(routing::Clock::now() - rec.request_sent).count());
  }
  auto& f = *registry_.impl_;
  const double in = static_cast<double>(std::max<std::int64_t>(0, rec.input_tokens.value_or(0)));
  const double out = static_cast<double>(std::max<std::int64_t>(0, rec.output_tokens.value_or(0)));
  f.input_tokens.Increment(in);
  f.output_tokens.Increment(out);
  if (rec.input_tokens && ms->input_usage[i]) ms->input_usage[i]->observe(in);
  if (rec.output_tokens && ms->output_usage[i]) ms->output_usage[i]->observe(out);
  const double cached = std::clamp(static_cast<double>(rec.cached_input_tokens), 0.0, in);
  s->input_tokens[0]->Increment(in - cached);
  s->input_tokens[1]->Increment(cached);
  f.cost_total.Increment(s->price.cost_usd(rec.input_tokens.value_or(0), rec.cached_input_tokens,
                                           rec.output_tokens.value_or(0)));
}

void Metrics::on_route(const config::Model& model, const config::Deployment& d,
                       config::Policy policy) {
  if (DeploymentSeries* s = impl_->deployment(model, d)) s->routes[index_of(policy)]->Increment();
}

void Metrics::on_affinity(const config::Model& model, Affinity result) {
  if (ModelSeries* ms = impl_->model(model))
    ms->affinity[static_cast<std::size_t>(result)]->Increment();
}

void Metrics::on_lesson(const config::Model& model, routing::RoutingState::LessonKind kind,
                        routing::RoutingState::LessonResult result) {
  if (ModelSeries* ms = impl_->model(model))
    ms->lessons[static_cast<std::size_t>(kind)][static_cast<std::size_t>(result)]->Increment();
}

void Metrics::on_lesson_extra_request(const config::Model& model) {
  if (ModelSeries* ms = impl_->model(model)) ms->lesson_extra->Increment();
}

void Metrics::on_saturated(const config::Model& model, const config::Deployment& d,
                           Saturation reason) {
  if (DeploymentSeries* s = impl_->deployment(model, d)) {
    if (Counter* c = s->saturated[index_of(reason)]) c->Increment();
  }
}

void Metrics::on_continuation(const config::Model& model, const config::Deployment& broken,
                              Continued result) {
  if (DeploymentSeries* s = impl_->deployment(model, broken)) {
    if (Counter* c = s->continuations[static_cast<std::size_t>(result)]) c->Increment();
  }
}

void Metrics::on_request(const config::Model& model, RequestOutcome outcome, config::Operation op,
                         std::string_view api) {
  ModelSeries* ms = impl_->model(model);
  if (!ms) return;
  if (api.empty()) {
    ms->requests[static_cast<std::size_t>(op)][index_of(outcome)]->Increment();
    return;
  }
  // Another client API's series exist once it is used (a gateway whose
  // clients speak OpenAI only shows none): Family::Add finds them.
  registry_.impl_->requests
      .Add({{"model", model.name},
            {"outcome", to_string(outcome)},
            {"gen_ai_operation_name", config::gen_ai_name(op)},
            {"api", std::string(api)}})
      .Increment();
}

}  // namespace llmgate::gateway
