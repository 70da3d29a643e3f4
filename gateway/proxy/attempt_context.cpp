#include "gateway/proxy/attempt_context.h"

#include <algorithm>
#include <iterator>

#include "gateway/proxy/relay_state.h"

namespace llmgate::gateway {

std::string_view RouteTrace::hedged() const {
  if (race == nullptr || !race->hedge_started()) return {};
  return race->winner() == 1 ? "hedge-won" : "primary-won";
}

const std::string& RouteTrace::route_text() const {
  if (!route_text_) route_text_ = routing::explain(decision);
  return *route_text_;
}

namespace {

void put(http::fields& h, std::string_view name, std::string_view value) {
  h.set(beast::string_view(name.data(), name.size()),
        beast::string_view(value.data(), value.size()));
}
void put(HeadLines& h, std::string_view name, std::string_view value) { h.set(name, value); }

template <class Head>
void add_trace_headers(const RouteTrace& t, Head& h, const std::string& request_id,
                       const routing::AttemptRecord* rec) {
  put(h, "x-request-id", request_id);
  put(h, "x-llmgate-policy", config::to_string(t.decision.policy));
  put(h, "x-llmgate-attempts", std::to_string(t.attempts));
  if (auto hedge = t.hedged(); !hedge.empty()) put(h, "x-llmgate-hedged", hedge);
  if (rec) {
    if (auto ttft = rec->ttft()) {
      put(h, "x-llmgate-ttft-ms",
          format_decimal(std::chrono::duration<double, std::milli>(*ttft).count()));
    }
  }
  if (!t.explain) return;  // which deployments, prices and exclusions: not for this client
  if (const std::string& route = t.route_text(); !route.empty()) put(h, "x-llmgate-route", route);
  if (rec) put(h, "x-llmgate-deployment", rec->deployment);
  if (!t.failures.empty()) put(h, "x-llmgate-failed", t.failures.header());
}

// A field the upstream repeats is relayed once, with its last value (as a
// Beast field set would keep it).
template <class Head>
void relay_upstream(const UpstreamHead& upstream, Head& out, bool with_retry_after) {
  for (std::size_t i = 0; i < upstream.size(); ++i) {
    const UpstreamHead::Field f = upstream[i];
    if (!relayed_upstream_field(f.name, f.name_string, with_retry_after)) continue;
    bool repeated = false;
    for (std::size_t j = i + 1; j < upstream.size() && !repeated; ++j) {
      repeated = beast::iequals(upstream[j].name_string, f.name_string);
    }
    if (!repeated) put(out, f.name_string, f.value);
  }
}

}  // namespace

void RouteTrace::add_headers(http::fields& h, const std::string& request_id,
                             const routing::AttemptRecord* rec) const {
  add_trace_headers(*this, h, request_id, rec);
}

void RouteTrace::add_headers(HeadLines& h, const std::string& request_id,
                             const routing::AttemptRecord* rec) const {
  add_trace_headers(*this, h, request_id, rec);
}

void relay_upstream_headers(const UpstreamHead& upstream, http::fields& out,
                            bool with_retry_after) {
  relay_upstream(upstream, out, with_retry_after);
}

void relay_upstream_headers(const UpstreamHead& upstream, HeadLines& out, bool with_retry_after) {
  relay_upstream(upstream, out, with_retry_after);
}

failover::FaultReport AttemptContext::judge(const routing::Candidate& c,
                                            routing::AttemptRecord& rec, failover::Fault f,
                                            std::string_view text, bool replaceable) const {
  const failover::Deadlines d = deadlines(c);
  failover::FaultReport r = failover::judge_fault(
      f, failover::FaultContext{d, std::chrono::steady_clock::now(), rec.first_token.has_value(),
                                cfg.server.limits.max_event_bytes, text, replaceable});
  rec.stall_derived =
      r.outcome == routing::AttemptOutcome::kIdleTimeout && d.stall_derived(replaceable);
  rec.outcome = r.outcome;
  rec.detail = r.detail;
  if (rec.first_token && r.client_error.code) rec.fault_code = *r.client_error.code;
  return r;
}

bool AttemptContext::streams(const routing::Candidate& c) const {
  return c.deployment->stream.value_or(c.provider->stream) &&
         !(worker.quirks && worker.quirks->has(c.deployment->id(), providers::Quirk::kNoStream));
}

providers::UpstreamRequest AttemptContext::upstream_request(const routing::Candidate& c) const {
  providers::UpstreamRequest r;
  r.upstream_model = c.deployment->model;
  r.stream = streams(c);
  // Embeddings never stream; a background response answers at once (its
  // events are not this request's to wait for).
  if (req.operation == config::Operation::kEmbeddings || (req.background && !req.stream))
    r.stream = false;
  r.stream_options = c.provider->stream_options &&
                     !(worker.quirks &&
                       worker.quirks->has(c.deployment->id(), providers::Quirk::kNoStreamOptions));
  r.provider = c.provider;
  r.include_usage = req.include_usage;
  return r;
}

bool AttemptContext::larger_window_follows(const routing::Candidate& c) const {
  const auto& plan = trace.decision.candidates;
  auto at = std::find_if(plan.begin(), plan.end(), [&](const routing::PlannedCandidate& pc) {
    return &pc.candidate == &c || pc.candidate.deployment == c.deployment;
  });
  if (at == plan.end()) return false;
  const auto& mine = c.deployment->context_window;
  return std::any_of(std::next(at), plan.end(), [&](const routing::PlannedCandidate& pc) {
    const auto& theirs = pc.candidate.deployment->context_window;
    return !mine || !theirs || *theirs > *mine;
  });
}

void AttemptContext::remember_response(const std::string& id, const routing::Candidate& c) const {
  if (worker.responses)
    worker.responses->remember(
        id, {c.provider->name, req.model, c.deployment->model, key ? key->name : std::string()},
        std::chrono::steady_clock::now());
}

std::vector<std::string> AttemptContext::provider_keys() const {
  std::vector<std::string> keys;
  for (const auto& p : cfg.providers) {
    if (!p.api_key.empty()) keys.push_back(p.api_key);
    keys.insert(keys.end(), p.header_secrets.begin(), p.header_secrets.end());
  }
  return keys;
}

}  // namespace llmgate::gateway
