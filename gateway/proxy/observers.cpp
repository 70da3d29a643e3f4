// The observers of a routed request's lifecycle (observers.h).
#include "gateway/proxy/observers.h"

#include <algorithm>
#include <boost/container/small_vector.hpp>
#include <string>
#include <vector>

#include "gateway/observe/log.h"
#include "gateway/observe/route_history.h"
#include "gateway/proxy/race.h"
#include "gateway/proxy/relay_state.h"
#include "gateway/shared/shared_limits.h"

namespace llmgate::gateway {
namespace {

using routing::AttemptOutcome;
using routing::AttemptRecord;
using Clock = std::chrono::steady_clock;

double seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

}  // namespace

void RequestObservers::started() const { snapshot_.metrics->shared().request_started(); }

void RequestObservers::routed(const config::Model& model, const routing::RouteDecision& d,
                              bool conversation) const {
  Metrics& m = *snapshot_.metrics;
  m.on_route(model, *d.candidates.front().candidate.deployment, d.policy);
  if (!conversation) return;
  const auto holds = [](const routing::PlannedCandidate& pc) { return pc.cache_held_tokens > 0; };
  m.on_affinity(model, holds(d.candidates.front()) ? Metrics::Affinity::kHit
                       : std::any_of(d.candidates.begin(), d.candidates.end(), holds) ||
                               std::any_of(d.reserve.begin(), d.reserve.end(), holds)
                           ? Metrics::Affinity::kBroken
                           : Metrics::Affinity::kMiss);
}

void RequestObservers::failing_over(AttemptOutcome after) const {
  snapshot_.metrics->shared().on_fallback(after);
}

void RequestObservers::hedged(HedgeResult h) const { snapshot_.metrics->shared().on_hedge(h); }

void RequestObservers::saturated(const config::Model& model, const config::Deployment& d,
                                 Saturation why) const {
  snapshot_.metrics->on_saturated(model, d, why);
}

void RequestObservers::shared_state_unreachable(SharedOp op, bool fail_open) const {
  snapshot_.metrics->shared().on_shared_fallback(op, fail_open);
}

void RequestObservers::lesson(const config::Model& model, routing::RoutingState::LessonKind kind,
                              routing::RoutingState::LessonResult result) const {
  snapshot_.metrics->on_lesson(model, kind, result);
}

void RequestObservers::lesson_extra_request(const config::Model& model) const {
  snapshot_.metrics->on_lesson_extra_request(model);
}

void RequestObservers::attempt_ended(const RequestView& r, const AttemptEnded& a) const {
  snapshot_.metrics->on_attempt(r.model, *a.pc.candidate.deployment, a.rec, r.req.operation);
  if (r.request_trace && r.request_trace->sampled()) attempt_span(r, a);
}

void RequestObservers::attempt_span(const RequestView& r, const AttemptEnded& a) const {
  const RequestTrace& t = *r.request_trace;
  const routing::PlannedCandidate& pc = a.pc;
  const AttemptRecord& rec = a.rec;
  const int branch = a.branch;
  const routing::Candidate& c = pc.candidate;
  const char* op = config::gen_ai_name(r.req.operation);
  SpanData s =
      t.client_span(a.span, std::string(op) + " " + c.deployment->model, rec.started, a.end);
  s.set("gen_ai.operation.name", std::string(op));
  s.set("gen_ai.provider.name", gen_ai_provider(*c.provider));
  s.set("gen_ai.request.model", c.deployment->model);
  s.set("server.address", c.provider->base_url.host);
  s.set("server.port", std::int64_t{c.provider->base_url.port});
  if (rec.http_status != 0) s.set("http.response.status_code", std::int64_t{rec.http_status});
  if (rec.input_tokens) s.set("gen_ai.usage.input_tokens", *rec.input_tokens);
  if (rec.output_tokens) s.set("gen_ai.usage.output_tokens", *rec.output_tokens);
  // What the router expected of the prompt here, before the provider counted it.
  s.set("llmgate.input_tokens_estimate", rec.input_tokens_est);
  if (rec.cached_tokens_est > 0) s.set("llmgate.cached_tokens_estimate", rec.cached_tokens_est);
  if (!rec.response_id.empty()) s.set("gen_ai.response.id", rec.response_id);
  if (!rec.finish_reasons.empty()) s.set("gen_ai.response.finish_reasons", rec.finish_reasons);
  s.set("llmgate.deployment", rec.deployment);
  s.set("llmgate.attempt.outcome", std::string(routing::to_string(rec.outcome)));
  const auto& plan = r.trace.decision.candidates;
  if (&pc >= plan.data() && &pc < plan.data() + plan.size())
    s.set("llmgate.attempt.rank", static_cast<std::int64_t>(&pc - plan.data() + 1));
  if (pc.probe) s.set("llmgate.attempt.probe", true);
  if (auto ttft = rec.ttft()) s.set("llmgate.ttft_seconds", seconds(*ttft));
  s.set("llmgate.ttft_deadline_seconds", seconds(c.timeouts.ttft));
  if (r.trace.race) {
    s.set("llmgate.hedge.branch", std::string(branch == 0 ? "primary" : "hedge"));
    const bool lost = rec.outcome == AttemptOutcome::kHedgeLost || r.trace.race->lost(branch);
    s.set("llmgate.hedge.result", std::string(lost ? "lost" : "won"));
  }
  if (rec.outcome != AttemptOutcome::kSuccess && rec.outcome != AttemptOutcome::kHedgeLost) {
    s.error = true;
    s.status_message = rec.detail.substr(0, 256);
    s.set("error.type", std::string(routing::to_string(rec.outcome)));
  }
  snapshot_.tracer->record(std::move(s));
}

SpanData RequestObservers::server_span(const RequestView& r, const RequestTrace& t,
                                       Clock::time_point end) {
  const char* op = config::gen_ai_name(r.req.operation);
  SpanData s = t.server_span(std::string(op) + " " + r.req.model, end);
  s.set("gen_ai.operation.name", std::string(op));
  s.set("gen_ai.request.model", r.req.model);
  s.set("http.request.method", std::string("POST"));
  s.set("http.route", std::string(r.api.route()));
  if (!r.api.api_label().empty()) s.set("llmgate.client_api", std::string(r.api.api_label()));
  s.set("llmgate.request_id", r.rc.request_id);
  s.set("llmgate.policy", std::string(config::to_string(r.trace.decision.policy)));
  s.set("llmgate.attempts", std::int64_t{r.trace.attempts});
  s.set("llmgate.outcome", std::string(to_string(r.outcome)));
  if (r.trace.race || !r.trace.hedged().empty())
    s.set("llmgate.hedge", std::string(r.trace.hedged()));
  if (r.key) s.set("llmgate.key", r.key->name);
  if (r.answered && r.answered_by) {
    s.set("gen_ai.provider.name", gen_ai_provider(*r.answered_by->provider));
    s.set("gen_ai.response.model", r.answered_by->deployment->model);
    s.set("llmgate.deployment", r.answered->deployment);
    if (r.answered->input_tokens) s.set("gen_ai.usage.input_tokens", *r.answered->input_tokens);
    if (r.answered->output_tokens) s.set("gen_ai.usage.output_tokens", *r.answered->output_tokens);
    if (!r.answered->response_id.empty()) s.set("gen_ai.response.id", r.answered->response_id);
    if (!r.answered->finish_reasons.empty())
      s.set("gen_ai.response.finish_reasons", r.answered->finish_reasons);
    if (auto ttft = r.answered->ttft()) s.set("llmgate.ttft_seconds", seconds(*ttft));
  }
  if (r.last_failed) {
    s.set("llmgate.failover_reason", std::string(routing::to_string(r.last_failed->outcome)));
  }
  // A stream that broke after its first token (docs/failure-semantics.md,
  // "Continuation"): where, after how much text, and who continued it.
  if (r.continuation && r.continuation->first_broken) {
    const StreamContinuation& k = *r.continuation;
    s.set("llmgate.stream.broken_at", k.first_broken->id());
    s.set("llmgate.stream.broken_after_chunks", k.broken_after);
    if (!k.by.empty()) s.set("llmgate.stream.continued_by", k.by);
    if (k.not_continuable) s.set("llmgate.stream.not_continuable", std::string(k.not_continuable));
  }
  if (r.outcome == RequestOutcome::kError || r.outcome == RequestOutcome::kRejected) {
    s.error = true;
    s.set("error.type", std::string(to_string(r.outcome)));
    if (r.last_failed) s.status_message = r.last_failed->detail.substr(0, 256);
  }
  return s;
}

void RequestObservers::concluded(const RequestView& r, const AttemptRecord* rec,
                                 Clock::time_point end) const {
  log_line(r, rec, end);
  if (r.continuation && r.continuation->first_broken) {
    const StreamContinuation& k = *r.continuation;
    snapshot_.metrics->on_continuation(
        r.model, *k.first_broken,
        k.not_continuable && k.by.empty()       ? Metrics::Continued::kNotContinuable
        : r.outcome == RequestOutcome::kSuccess ? Metrics::Continued::kContinued
                                                : Metrics::Continued::kFailed);
  }
  route_event(r, rec);
}

void RequestObservers::route_event(const RequestView& r, const AttemptRecord* rec) const {
  // Answered: also a client error the deployment returned (the caller's
  // fault, not a routing event unless it came after a failover or a hedge).
  const bool answered = rec && (rec->outcome == AttemptOutcome::kSuccess ||
                                rec->outcome == AttemptOutcome::kClientError);
  if (!history_ || (r.trace.failures.empty() && r.trace.hedged().empty() && answered)) return;
  RouteEvent e;
  e.unix_ms = unix_now_ms();
  e.request_id = r.rc.request_id;
  e.model = r.req.model;
  e.outcome = to_string(r.outcome);
  if (answered) {
    e.deployment = rec->deployment;
    if (auto t = rec->ttft()) e.ttft_ms = std::chrono::duration<double, std::milli>(*t).count();
  }
  if (!r.trace.failures.empty()) e.failed = r.trace.failures.header();
  e.hedge = std::string(r.trace.hedged());
  if (!e.hedge.empty()) {
    e.hedge_lost = r.trace.race_lost;
    e.recheck = r.trace.race_learning;
  }
  e.lesson = r.trace.lesson;
  e.attempts = r.trace.attempts;
  history_->record(std::move(e));
}

// One line per request: ids, names from config, numbers and outcomes. Never
// the prompt, the completion or a key.
void RequestObservers::log_line(const RequestView& r, const AttemptRecord* rec,
                                Clock::time_point end) const {
  if (!log_enabled(LogLevel::kInfo)) return;
  auto ms = [](double v) { return format_decimal(v); };
  // Every field below at most once: on the stack.
  boost::container::small_vector<LogField, 24> f;
  f.insert(f.end(), {{"request_id", r.rc.request_id},
                     {"operation", config::gen_ai_name(r.req.operation)},
                     {"model", r.req.model},
                     {"stream", r.req.stream ? "true" : "false", true},
                     {"result", to_string(r.outcome)},
                     {"policy", config::to_string(r.trace.decision.policy)},
                     {"attempts", std::to_string(r.trace.attempts), true}});
  if (!r.api.api_label().empty()) f.push_back({"api", r.api.api_label()});
  if (r.key) f.push_back({"key", r.key->name});
  if (!r.req.reasoning_effort.empty())
    f.push_back(
        {"reasoning_effort", r.req.reasoning_effort});  // the key's name from config, never the key
  if (rec) {
    f.push_back({"deployment", rec->deployment});
    f.push_back({"outcome", routing::to_string(rec->outcome)});
    f.push_back({"status", std::to_string(rec->http_status), true});
    if (auto t = rec->ttft()) {
      f.push_back({"ttft_ms", ms(std::chrono::duration<double, std::milli>(*t).count()), true});
    }
    if (rec->input_tokens) f.push_back({"input_tokens", std::to_string(*rec->input_tokens), true});
    if (rec->output_tokens)
      f.push_back({"output_tokens", std::to_string(*rec->output_tokens), true});
    if (rec->reasoning_tokens > 0)
      f.push_back({"reasoning_tokens", std::to_string(rec->reasoning_tokens), true});
    if (auto t = rec->answer_time()) {
      f.push_back({"answer_ms", ms(std::chrono::duration<double, std::milli>(*t).count()), true});
    }
    if (rec->cached_input_tokens > 0)
      f.push_back({"cached_input_tokens", std::to_string(rec->cached_input_tokens), true});
    // What the router expected the prompt to be in this deployment's tokens
    // (docs/routing.md, "Prompt size"), beside what the provider counted.
    for (const auto& pc : r.trace.decision.candidates) {
      if (pc.candidate.deployment->id() != rec->deployment) continue;
      f.push_back({"input_tokens_est", std::to_string(pc.input_tokens), true});
      if (pc.cached_tokens > 0)
        f.push_back({"cached_tokens_est", std::to_string(pc.cached_tokens), true});
      break;
    }
    if (auto tps = rec->tps()) f.push_back({"tps", ms(*tps), true});
  }
  if (!r.trace.failures.empty()) f.push_back({"failed", r.trace.failures.log_field()});
  if (r.continuation && r.continuation->first_broken) {
    const StreamContinuation& k = *r.continuation;
    if (!k.by.empty()) {
      f.push_back({"continued", k.describe()});
    } else {
      f.push_back(
          {"continued", std::string(k.not_continuable ? "no: " : "no; broken=") +
                            (k.not_continuable ? k.not_continuable : k.first_broken->id())});
    }
  }
  if (auto hedge = r.trace.hedged(); !hedge.empty()) f.push_back({"hedged", std::string(hedge)});
  if (!r.trace.lesson.empty()) f.push_back({"lesson", r.trace.lesson});
  // Why this route: in the log always, whether or not the client may see it.
  if (const std::string& route = r.trace.route_text(); !route.empty())
    f.push_back({"route", route});
  f.push_back(
      {"duration_ms", ms(std::chrono::duration<double, std::milli>(end - r.start).count()), true});
  log_event(LogLevel::kInfo, "request", {f.data(), f.size()});
}

void RequestObservers::ended(const RequestView& r, const KeyStore::Charge& used,
                             Clock::time_point end) const {
  Metrics& m = *snapshot_.metrics;
  m.on_request(r.model, r.outcome, r.api.operation(), r.api.api_label());
  m.shared().request_finished();
  if (r.key) charge_key(snapshot_.shared.get(), *snapshot_.keys, *r.key, used);
  if (r.request_trace && r.request_trace->sampled())
    snapshot_.tracer->record(server_span(r, *r.request_trace, end));
}

void RequestObservers::resource_ended(const ResourceView& r, Clock::time_point end) const {
  if (log_enabled(LogLevel::kInfo)) {
    std::vector<LogField> f{{"request_id", r.rc.request_id},
                            {"operation", config::gen_ai_name(config::Operation::kResponses)},
                            {"method", std::string(r.method)},
                            {"response_id", r.path.id},
                            {"part", r.path.part == ResponsePath::Part::kResponse
                                         ? std::string("response")
                                         : std::string(part_path(r.path.part).substr(1))},
                            {"status", std::to_string(r.status), true}};
    if (r.key) f.push_back({"key", r.key->name});
    if (r.upstream) f.push_back({"provider", r.upstream->name});
    f.push_back({"duration_ms",
                 format_decimal(std::chrono::duration<double, std::milli>(end - r.start).count()),
                 true});
    log_event(LogLevel::kInfo, "request", f);
  }
  if (r.request_trace && r.request_trace->sampled()) resource_spans(r, end);
}

void RequestObservers::resource_spans(const ResourceView& r, Clock::time_point end) const {
  const RequestTrace& t = *r.request_trace;
  Tracer& tracer = *snapshot_.tracer;
  const std::string method(r.method);
  // Named by the route, not the id: "GET /v1/responses/{response_id}/input_items".
  const std::string route = "/v1/responses/{response_id}" + std::string(part_path(r.path.part));
  SpanData server = t.server_span(method + " " + route, end);
  server.set("http.request.method", method);
  server.set("http.route", route);
  server.set("gen_ai.response.id", r.path.id);
  server.set("llmgate.request_id", r.rc.request_id);
  if (r.status != 0) server.set("http.response.status_code", std::int64_t{r.status});
  if (r.key) server.set("llmgate.key", r.key->name);
  if (r.upstream) server.set("llmgate.provider", r.upstream->name);
  if (r.status == 0 || r.status >= 500) {
    server.error = true;
    server.set("error.type", r.status == 0 ? std::string("client_gone") : std::to_string(r.status));
    if (r.status != 0) server.status_message = std::string(r.refusal.substr(0, 256));
  }
  tracer.record(std::move(server));
  if (!r.upstream_start || !r.upstream) return;
  const config::Provider& p = *r.upstream;
  // The provider's own path: the route without "/v1" (its base_url has it).
  SpanData client = t.client_span(r.upstream_span, method + " " + route.substr(3),
                                  *r.upstream_start, r.upstream_end.value_or(end));
  client.set("http.request.method", method);
  client.set("gen_ai.provider.name", gen_ai_provider(p));
  client.set("gen_ai.response.id", r.path.id);
  client.set("server.address", p.base_url.host);
  client.set("server.port", std::int64_t{p.base_url.port});
  if (r.upstream_status != 0) {
    client.set("http.response.status_code", std::int64_t{r.upstream_status});
  }
  if (r.upstream_status == 0 || r.upstream_status >= 500) {
    client.error = true;
    client.set("error.type", r.upstream_status == 0 ? std::string("no_answer")
                                                    : std::to_string(r.upstream_status));
  }
  tracer.record(std::move(client));
}

}  // namespace llmgate::gateway
