// POST /v1/messages/count_tokens: how many input tokens a Messages request
// would be. Admitted as a Messages request is (the key, the model, the
// key's permissions), then counted by the model's first Anthropic
// deployment (its own count_tokens, the client's document with the
// deployment's model) -- or, when the model has none or it cannot answer,
// estimated by the gateway: the request's prompt bytes at the ratio of
// bytes to input tokens the model's deployment has learnt from its answers'
// usage (docs/routing.md, "Prompt size"). `x-llmgate-token-count` says
// which. Not routed: a count is no generation, and teaches the router
// nothing.
#include <nlohmann/json.hpp>

#include "gateway/apis/messages_request.h"
#include "gateway/observe/log.h"
#include "gateway/observe/redact.h"
#include "gateway/proxy/chat_proxy.h"
#include "gateway/proxy/upstream_attempt.h"
#include "gateway/proxy/upstream_exchange.h"
#include "routing/routing_state.h"

namespace llmgate::gateway {
namespace {

using Clock = std::chrono::steady_clock;
constexpr std::size_t kMaxCountAnswer = 64 * 1024;

// One request to `p` (the one upstream exchange: a stale reused connection
// is tried once more on a fresh one), its answer read whole.
net::awaitable<WholeAnswer> ask(Worker& worker, const Snapshot& snap, const config::Provider& p,
                                const UpstreamMessage& up) {
  const config::Timeouts t = snap.config->timeouts_for(p);
  ExchangeTimes times{t.connect, t.connect, t.ttft};
  times.by = Clock::now() + t.total;
  co_return co_await exchange_whole(worker.pools->get(p, snap.tls), up, times, kMaxCountAnswer);
}

}  // namespace

net::awaitable<bool> handle_count_tokens(Worker& worker, beast::tcp_stream& client,
                                         Request& request, const RequestContext& rc) {
  const std::shared_ptr<const Snapshot> snapshot = worker.snapshot;
  const config::Config& cfg = *snapshot->config;
  // A count has no max_tokens: admitted as the request it counts.
  std::string body = std::move(request.body());
  bool added_max_tokens = false;
  {
    nlohmann::json doc = nlohmann::json::parse(body, nullptr, false);
    if (doc.is_object() && !doc.contains("max_tokens")) {
      doc["max_tokens"] = 1;
      added_max_tokens = true;
      body = doc.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    }
  }
  auto admitted = admit(messages_api(), request_head(request), std::move(body), cfg,
                        *snapshot->keys, worker.via_name);
  if (auto* no = std::get_if<Refusal>(&admitted)) {
    if (no->auth) snapshot->metrics->shared().on_auth_rejected(*no->auth);
    Response res = make_error_response(rc, no->error);
    co_return co_await write_response(client, res, cfg.timeouts.idle) && rc.keep_alive;
  }
  Admitted& a = std::get<Admitted>(admitted);
  std::string because;
  // Anthropic counts its own tokens: the first of the model's deployments
  // that speaks its protocol.
  for (const auto& d : a.model->deployments) {
    const config::Provider* p = cfg.find_provider(d.provider);
    // (On Vertex AI, counting is another endpoint: the estimate serves.)
    if (!p || p->protocol != config::Protocol::kAnthropic || providers::anthropic_on_vertex(*p))
      continue;
    if (added_max_tokens) a.req.native->erase("max_tokens");
    std::string sent =
        a.req.native->spliced({{"model", providers::RequestBody::SpliceValue::string(d.model)}});
    auto credential = credential_for(snapshot->credentials, *p, std::chrono::system_clock::now());
    WholeAnswer counted;
    if (auto* why = std::get_if<std::string>(&credential)) {
      counted.error = *why;
    } else {
      std::string target;
      const UpstreamMessage up = make_upstream_request(
          http::verb::post, upstream_target(target, *p, d.model, "/messages/count_tokens"),
          std::move(sent),
          /*stream=*/false, request, rc, worker.via_name, *p,
          providers::anthropic_messages_protocol(), {}, {}, std::get<0>(credential).get());
      counted = co_await ask(worker, *snapshot, *p, up);
    }
    const bool whole = counted.status >= 200 && counted.status < 300;
    // The request's own fault is the client's answer; anything else (the
    // operator's key, a limit, an outage) leaves the estimate.
    const bool refused = counted.status == 400 || counted.status == 413 || counted.status == 422;
    if (whole || refused) {
      const std::string keys[] = {p->api_key};
      Response res = make_json_response(rc, static_cast<http::status>(counted.status),
                                        redact_secrets(counted.body, keys));
      res.set("x-llmgate-token-count", "counted by deployment " + d.id());
      co_return co_await write_response(client, res, cfg.timeouts.idle) && rc.keep_alive;
    }
    because = "; deployment " + d.id() + " could not count it (" +
              (counted.status ? "HTTP " + std::to_string(counted.status) : counted.error) + ")";
    log_line(LogLevel::kInfo,
             "request " + rc.request_id + ": count_tokens at " + d.id() + " failed" + because);
    break;
  }
  // The calibration of the deployment that has learnt most.
  const config::Deployment* by = nullptr;
  routing::DeploymentStats stats;
  for (const auto& d : a.model->deployments) {
    routing::DeploymentStats s = snapshot->routing->stats.get_or_prior(d.id());
    if (!by || s.calibration_tokens > stats.calibration_tokens) {
      by = &d;
      stats = s;
    }
  }
  const std::int64_t tokens = a.req.prompt.tokens(stats.bytes_per_input_token());
  Response res =
      make_json_response(rc, http::status::ok, nlohmann::json{{"input_tokens", tokens}}.dump());
  res.set("x-llmgate-token-count", "estimate (prompt bytes at deployment " +
                                       (by ? by->id() : std::string("?")) +
                                       "'s learnt bytes per token)" + because);
  co_return co_await write_response(client, res, cfg.timeouts.idle) && rc.keep_alive;
}

}  // namespace llmgate::gateway
