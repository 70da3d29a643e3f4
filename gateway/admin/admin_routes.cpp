#include "gateway/admin/admin_routes.h"

#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <random>

#include "routing/ranking.h"

namespace llmgate::gateway {
namespace {

using routing::rank_deployments;
using routing::RankedDeployment;

nlohmann::json opt(const std::optional<double>& v) {
  return v ? nlohmann::json(*v) : nlohmann::json(nullptr);
}

std::string fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

std::string fmt_opt(const char* f, const std::optional<double>& v) { return v ? fmt(f, *v) : "-"; }

// The TTFT columns both tables share.
nlohmann::json ttft_json(const routing::DeploymentStats& s) {
  return {{"estimate", s.ttft_estimate_ms},
          // Of ln(TTFT) around the estimate (a standard deviation).
          {"spread", s.ttft_spread},
          {"prior", s.ttft_prior_ms},
          {"p50", opt(s.ttft_p50_ms)},
          {"p90", opt(s.ttft_p90_ms)},
          {"p95", opt(s.ttft_p95_ms)},
          {"p99", opt(s.ttft_p99_ms)},
          {"samples", s.ttft_samples},
          // Of those, unstreamed answers: the time to the whole answer.
          {"unstreamed_samples", s.unstreamed_samples},
          // Attempts that gave up waiting for a first token in the window:
          // their TTFT is known only to exceed the wait (Kaplan-Meier
          // percentiles above). Each either timed out (its deadline) or
          // lost a race (a hedge or re-check answered first).
          {"censored", s.ttft_censored},
          {"timed_out", s.ttft_censored - s.ttft_lost_races},
          {"lost_races", s.ttft_lost_races},
          {"percentiles_are_lower_bounds", s.ttft_quantile_lower_bound},
          {"recent_p95", opt(s.ttft_recent_p95_ms)},
          {"awaiting_first_token", s.awaiting_first_token},
          {"awaiting_lower_bound", s.awaiting_lower_bound_ms}};
}

// How the gateway talks to the deployment: configured, and learnt from its
// answers (a 400 naming stream_options or stream).
nlohmann::json wire_json(const config::Deployment& d, const config::Provider* p,
                         const providers::WireQuirks* quirks) {
  const unsigned learnt = quirks ? quirks->learnt(d.id()) : 0;
  const bool no_stream = learnt & static_cast<unsigned>(providers::Quirk::kNoStream);
  const bool no_options = learnt & static_cast<unsigned>(providers::Quirk::kNoStreamOptions);
  nlohmann::json learnt_list = nlohmann::json::array();
  if (no_stream) learnt_list.push_back("refuses stream");
  if (no_options) learnt_list.push_back("refuses stream_options");
  const bool stream = d.stream.value_or(p ? p->stream : true) && !no_stream;
  return {{"protocol", p ? config::to_string(p->protocol) : "openai"},
          {"stream", stream},
          {"stream_options", stream && (p ? p->stream_options : true) && !no_options},
          {"first_token_deadline", d.first_token_deadline},
          {"continuation", config::to_string(d.continuation)},
          {"learnt", std::move(learnt_list)}};
}

// What learning cost the model and taught (docs/routing.md, "What learning
// costs"): since the routing state was built (the last reload that changed it).
nlohmann::json learning_json(const config::Config& cfg, const config::Model& m,
                             routing::RoutingState& state, routing::Clock::time_point now) {
  routing::RoutingState::Learning& l = state.learning(m.name);
  const auto requests = l.requests.load(std::memory_order_relaxed);
  const auto extra = l.extra_requests.load(std::memory_order_relaxed);
  nlohmann::json lessons = nlohmann::json::object();
  constexpr const char* kKinds[] = {"recheck", "exploration", "size_race"};
  for (std::size_t k = 0; k < routing::RoutingState::kLessonKinds; ++k) {
    lessons[kKinds[k]] = {{"learnt", l.lessons[k][0].load(std::memory_order_relaxed)},
                          {"missed", l.lessons[k][1].load(std::memory_order_relaxed)},
                          {"failed", l.lessons[k][2].load(std::memory_order_relaxed)}};
  }
  return {
      {"budget", cfg.routing.learning_budget},
      {"balance", std::floor(l.budget.balance(now) * 100) / 100},
      {"cap", l.budget.cap()},
      {"requests", requests},
      {"extra_requests", extra},
      {"extra_share", requests ? static_cast<double>(extra) / static_cast<double>(requests) : 0.0},
      {"without_budget", l.without_budget.load(std::memory_order_relaxed)},
      {"lessons", std::move(lessons)}};
}

// One line of it: "learning: 7 extra upstream requests for 596 requests (1.2%, budget
// 5%); recheck 3 learnt 1 missed; exploration 4 learnt".
std::string learning_line(const config::Config& cfg, const config::Model& m,
                          routing::RoutingState& state) {
  routing::RoutingState::Learning& l = state.learning(m.name);
  const auto requests = l.requests.load(std::memory_order_relaxed);
  const auto extra = l.extra_requests.load(std::memory_order_relaxed);
  std::string out =
      "  learning: " + std::to_string(extra) + " extra upstream requests for " +
      std::to_string(requests) + " requests (" +
      fmt("%.1f",
          requests ? 100.0 * static_cast<double>(extra) / static_cast<double>(requests) : 0.0) +
      "%, budget " + fmt("%.0f", cfg.routing.learning_budget * 100) + "%)";
  if (const auto without = l.without_budget.load(std::memory_order_relaxed))
    out += ", " + std::to_string(without) + " routed with it spent";
  constexpr const char* kKinds[] = {"recheck", "exploration", "size race"};
  constexpr const char* kResults[] = {"learnt", "missed", "failed"};
  for (std::size_t k = 0; k < routing::RoutingState::kLessonKinds; ++k) {
    std::string counts;
    for (std::size_t r = 0; r < routing::RoutingState::kLessonResults; ++r) {
      if (const auto n = l.lessons[k][r].load(std::memory_order_relaxed))
        counts += " " + std::to_string(n) + " " + kResults[r];
    }
    if (!counts.empty()) out += std::string("; ") + kKinds[k] + counts;
  }
  return out + "\n";
}

}  // namespace

std::string routes_json(const config::Config& cfg, routing::RoutingState& state,
                        const providers::WireQuirks* quirks) {
  auto now = routing::Clock::now();
  nlohmann::json models = nlohmann::json::array();
  for (const auto& m : cfg.models) {
    nlohmann::json deployments = nlohmann::json::array();
    for (const RankedDeployment& r : rank_deployments(cfg, m, state, now)) {
      const auto& s = r.s;
      nlohmann::json row = {
          {"deployment", r.d->id()},
          {"provider", r.d->provider},
          {"upstream_model", r.d->model},
          {"region", r.p ? r.p->region : ""},
          {"price_per_1m",
           {{"input", r.d->price.input_per_1m}, {"output", r.d->price.output_per_1m}}}};
      row["state"] = routing::to_string(r.health.state);
      row["state_reason"] = r.health.reason;
      row["rank"] = r.rank ? nlohmann::json(*r.rank) : nlohmann::json(nullptr);
      row["score"] = r.rank ? nlohmann::json(r.score) : nlohmann::json(nullptr);
      if (!r.skipped.empty()) row["skipped"] = r.skipped;
      if (!r.why.empty()) row["why"] = r.why;
      row["ttft_ms"] = ttft_json(s);
      row["tps"] = {{"estimate", s.tps_estimate}, {"p50", opt(s.tps_p50)}};
      row["output_chars_per_s"] = opt(s.chars_per_s_estimate);
      // Its completed streams' longest pauses (docs/failure-semantics.md,
      // "Stalls"): the stall deadline derives from their p95.
      row["pauses"] = {{"longest_p95_ms", opt(s.pause_p95_ms)}, {"streams", s.pause_samples}};
      // The prompt's bytes per input token, learnt from the usage reported
      // (docs/routing.md, "Prompt size"), and the answers it learnt from.
      row["prompt"] = {{"bytes_per_input_token", s.bytes_per_input_token()},
                       {"calibration_samples", s.calibration_samples},
                       {"prefill_ms_per_1k_tokens", s.prefill_ms_per_1k},
                       {"prefill_prior_ms_per_1k_tokens", s.prefill_prior_ms_per_1k},
                       {"prefill_spread", s.prefill_spread},
                       {"prefill_mean_k_tokens", s.prefill_mean_k},
                       // A lost size race's lower bound ("Exploring a
                       // prompt size"), and the size races in flight.
                       {"prefill_floor_ms_per_1k_tokens", s.prefill_floor_ms_per_1k},
                       {"awaiting_guessed_size", s.awaiting_guessed},
                       // Prompt caching ("Prompt-cache affinity"): whether its
                       // answers report cached tokens, and the share of held
                       // prefixes they reported read from the cache.
                       {"reports_cached", s.reports_cached},
                       {"cache_share", s.cache_share()},
                       {"cache_share_samples", s.cache_share_samples}};
      if (r.d->context_window) row["context_window"] = *r.d->context_window;
      row["error_rate"] = s.error_rate;
      row["consecutive_failures"] = s.consecutive_failures;
      row["ejections"] = state.health.ejections_total(r.d->id());
      row["in_flight"] = s.in_flight;
      row["attempts"] = s.attempts;
      row["successes"] = s.successes;
      row["failures"] = s.failures;
      row["last_outcome"] = s.last_outcome ? nlohmann::json(routing::to_string(*s.last_outcome))
                                           : nlohmann::json(nullptr);
      row["wire"] = wire_json(*r.d, r.p, quirks);
      // Requests at a reasoning effort, measured apart (the row above is
      // the deployment's other traffic).
      nlohmann::json efforts = nlohmann::json::object();
      for (const auto& [effort, es] : state.stats.efforts_of(r.d->id(), now)) {
        efforts[effort] = {{"ttft_ms", ttft_json(es)},
                           {"tps", {{"estimate", es.tps_estimate}, {"p50", opt(es.tps_p50)}}},
                           {"error_rate", es.error_rate},
                           {"in_flight", es.in_flight},
                           {"attempts", es.attempts}};
      }
      row["by_reasoning_effort"] = std::move(efforts);
      deployments.push_back(std::move(row));
    }
    models.push_back({{"model", m.name},
                      {"policy", config::to_string(m.routing.policy)},
                      {"hedging", m.routing.hedging.enabled},
                      {"learning", learning_json(cfg, m, state, now)},
                      {"deployments", std::move(deployments)}});
  }
  nlohmann::json out{{"models", std::move(models)}};
  out["region"] = state.region;
  out["hedges"] = {{"started", state.hedges_started.load()},
                   {"won", state.hedges_won.load()},
                   {"denied_by_budget", state.hedges_denied()}};
  out["retries_denied_by_budget"] = state.retries_denied();
  return out.dump(2);
}

std::string fit_column(std::string_view s, std::size_t width) {
  if (s.size() <= width) return std::string(s);
  if (width <= 3) return std::string(width, '.');
  std::size_t keep = width - 3;
  // Not inside a UTF-8 sequence: back to the start of the character cut.
  while (keep > 0 && (static_cast<unsigned char>(s[keep]) & 0xC0) == 0x80) --keep;
  return std::string(s.substr(0, keep)) + "...";
}

const char* const kRoutesTextLegend =
    "legend: ttft_* in ms: est the router's live estimate, p50/p95/p99 over the recent window "
    "('>': a lower bound, attempts gave up before a first token); cens attempts that gave up "
    "waiting for a first token (a deadline, or a race lost); tps_p50 output tokens/s; chars/s "
    "output characters/s; err% errors in the window; infl requests in flight; $/M_out price per "
    "1M output tokens; score what the model's policy ranks by (rank 1 is tried first), else "
    "(why the deployment is skipped); learning: the upstream requests that re-checks and "
    "explorations added, against routing.learning_budget, and what they taught (learnt: a first "
    "token). JSON with every number: /admin/routes\n";

std::string routes_text(const config::Config& cfg, routing::RoutingState& state,
                        const providers::WireQuirks* quirks) {
  auto now = routing::Clock::now();
  std::string out;
  char line[512];
  for (const auto& m : cfg.models) {
    out += "model " + m.name + "  policy " + config::to_string(m.routing.policy) +
           (m.routing.hedging.enabled ? "  hedging on" : "") + "\n";
    std::snprintf(line, sizeof line,
                  "  %-4s %-44s %-12s %9s %9s %9s %9s %5s %8s %8s %6s %4s %8s %-12s %s\n", "rank",
                  "deployment", "state", "ttft_est", "ttft_p50", "ttft_p95", "ttft_p99", "cens",
                  "tps_p50", "chars/s", "err%", "infl", "$/M_out", "region", "score");
    out += line;
    auto rows = rank_deployments(cfg, m, state, now);
    std::stable_sort(rows.begin(), rows.end(),
                     [](const RankedDeployment& a, const RankedDeployment& b) {
                       return a.rank.value_or(1'000'000) < b.rank.value_or(1'000'000);
                     });
    for (const RankedDeployment& r : rows) {
      const auto& s = r.s;
      std::string rank = r.rank ? std::to_string(*r.rank) : "-";
      std::snprintf(
          line, sizeof line,
          "  %-4s %-44s %-12s %9s %9s %9s %9s %5zu %8s %8s %6s %4lld %8s %-12s %s\n", rank.c_str(),
          fit_column(r.d->id(), 44).c_str(), routing::to_string(r.health.state),
          fmt("%.0f", s.ttft_estimate_ms).c_str(), fmt_opt("%.0f", s.ttft_p50_ms).c_str(),
          ((s.ttft_quantile_lower_bound ? ">" : "") + fmt_opt("%.0f", s.ttft_p95_ms)).c_str(),
          ((s.ttft_quantile_lower_bound ? ">" : "") + fmt_opt("%.0f", s.ttft_p99_ms)).c_str(),
          s.ttft_censored, fmt_opt("%.1f", s.tps_p50).c_str(),
          fmt_opt("%.0f", s.chars_per_s_estimate).c_str(), fmt("%.1f", s.error_rate * 100).c_str(),
          static_cast<long long>(s.in_flight), fmt("%.2f", r.d->price.output_per_1m).c_str(),
          fit_column(r.p && !r.p->region.empty() ? r.p->region : std::string("-"), 12).c_str(),
          r.rank ? fmt("%.3f", r.score).c_str() : ("(" + r.skipped + ")").c_str());
      out += line;
      for (const auto& [effort, es] : state.stats.efforts_of(r.d->id(), now)) {
        std::snprintf(
            line, sizeof line, "  %-4s %-44s %-12s %9s %9s %9s %9s %5zu %8s\n", "",
            fit_column("  reasoning=" + effort, 44).c_str(), "",
            fmt("%.0f", es.ttft_estimate_ms).c_str(), fmt_opt("%.0f", es.ttft_p50_ms).c_str(),
            ((es.ttft_quantile_lower_bound ? ">" : "") + fmt_opt("%.0f", es.ttft_p95_ms)).c_str(),
            ((es.ttft_quantile_lower_bound ? ">" : "") + fmt_opt("%.0f", es.ttft_p99_ms)).c_str(),
            es.ttft_censored, fmt_opt("%.1f", es.tps_p50).c_str());
        out += line;
      }
      if (const unsigned learnt = quirks ? quirks->learnt(r.d->id()) : 0) {
        out +=
            std::string("       learnt: ") +
            (learnt & static_cast<unsigned>(providers::Quirk::kNoStream) ? "refuses stream " : "") +
            (learnt & static_cast<unsigned>(providers::Quirk::kNoStreamOptions)
                 ? "refuses stream_options"
                 : "") +
            "\n";
      }
    }
    out += learning_line(cfg, m, state);
    out += "\n";
  }
  out += kRoutesTextLegend;
  return out;
}

}  // namespace llmgate::gateway
