// A POST to a client API (chat_proxy.h): admission, the shared limits, a
// stored conversation's owner, then the routed request (ChatProxy) watched
// against the client hanging up and the drain running out.
#include "gateway/proxy/chat_proxy_impl.h"

namespace llmgate::gateway {
namespace {

using Clock = std::chrono::steady_clock;

}  // namespace

RequestHead request_head(const Request& request) {
  RequestHead head{request[http::field::authorization],
                   request[http::field::content_type],
                   {},
                   {},
                   request["x-api-key"]};
  bool routed = false;  // an x-llmgate-* header (most requests have none: no lookups)
  for (const auto& f : request) {
    if (f.name() == http::field::via) head.via.push_back(f.value());
    const beast::string_view name = f.name_string();
    if (!routed && name.size() > 10 && beast::iequals(name.substr(0, 10), "x-llmgate-"))
      routed = true;
  }
  if (routed) {
    head.header = [&request](std::string_view name) -> std::optional<std::string> {
      auto it = request.find(beast::string_view(name.data(), name.size()));
      if (it == request.end()) return std::nullopt;
      return std::string(it->value());
    };
  }
  return head;
}

namespace {

// Admission, the shared limits and a stored conversation's owner: `proxy`
// made (nullopt returned), or the refusal answered (its result returned).
// A coroutine of its own, so that what admission holds (the admitted
// request before it moves into the proxy, the refusals' answers: ~2.4 KB)
// is in a frame gone before the exchange runs, not in the request's, which
// lives as long as the stream (bench/README.md, Transport II hot path 2).
net::awaitable<std::optional<bool>> admit_into(std::optional<ChatProxy>& proxy,
                                               const config::Model*& model,
                                               std::optional<RequestTrace>& request_trace,
                                               Worker& worker, beast::tcp_stream& client,
                                               Request& request, const RequestContext& rc,
                                               const ClientApi& api, const Snapshot& snap) {
  const config::Config& cfg = *snap.config;
  // Admission (admission.cpp): the key, a request loop, the body, the model,
  // the key's permissions and rates, the routing override. It takes the body
  // (indexed, for every attempt's upstream body): not copied, and not held
  // twice for a stream that may last minutes (an agent's conversation is tens
  // of KiB a request).
  RequestHead head = request_head(request);
  auto admitted = admit(api, head, std::move(request.body()), cfg, *snap.keys, worker.via_name);
  std::string().swap(request.body());
  // A refusal before any attempt has its request line and its outcome in
  // llmgate_requests_total, as every answered request (docs/operations.md,
  // "Refusals").
  const auto refused = [&](Refused why, const config::Model* m, const config::GatewayKey* k,
                           int status) {
    const std::string_view model_name = m ? std::string_view(m->name) : std::string_view();
    snap.metrics->shared().on_refused(api.operation(), model_name, why, api.api_label());
    log_refused_request(rc.request_id, config::gen_ai_name(api.operation()), model_name,
                        k ? std::string_view(k->name) : std::string_view(), to_string(why), status);
  };
  if (auto* no = std::get_if<Refusal>(&admitted)) {
    if (no->auth) snap.metrics->shared().on_auth_rejected(*no->auth);
    if (!no->log.empty()) log_line(LogLevel::kWarn, "request " + rc.request_id + ": " + no->log);
    refused(refused_as(*no), no->model, nullptr, no->error.status);
    Response res = make_error_response(rc, no->error);
    co_return co_await write_response(client, res, cfg.timeouts.idle) && rc.keep_alive;
  }
  Admitted& a = std::get<Admitted>(admitted);
  model = a.model;
  const config::GatewayKey* key = a.key;
  if (key && snap.shared) {
    if (auto no =
            co_await admit_shared_request(*snap.shared, *snap.keys, *key, snap.metrics->shared())) {
      refused(refused_as(*no, rejection_of(*no)), model, key, no->status);
      Response res = make_error_response(rc, *no);
      co_return co_await write_response(client, res, cfg.timeouts.idle) && rc.keep_alive;
    }
  }
  // A stored conversation continues at the provider that stored it; one
  // another gateway key stored is not this one's to continue (the provider,
  // with one account for every tenant, would allow it).
  std::optional<std::string> stored_at;
  if (!a.req.previous_response_id.empty() && worker.responses) {
    if (auto owner = worker.responses->owner_of(a.req.previous_response_id, Clock::now())) {
      if (owner->key != (key ? key->name : std::string())) {
        refused(Refused::kNotFound, model, key, 404);
        Response res = make_error_response(rc, response_not_found(a.req.previous_response_id));
        co_return co_await write_response(client, res, cfg.timeouts.idle) && rc.keep_alive;
      }
      stored_at = std::move(owner->provider);
    }
  }
  request_trace = begin_trace(snap, request, rc);
  proxy.emplace(worker, snap, client, request, rc, api, std::move(a.req), std::move(a.route), key,
                std::move(stored_at), request_trace ? &*request_trace : nullptr);
  co_return std::nullopt;
}

}  // namespace

net::awaitable<bool> handle_api_request(Worker& worker, beast::tcp_stream& client, Request& request,
                                        const RequestContext& rc, const ClientApi& api) {
  // The snapshot this request lives on, whatever reloads happen meanwhile.
  const std::shared_ptr<const Snapshot> snapshot = worker.snapshot;
  std::optional<RequestTrace> request_trace;
  std::optional<ChatProxy> admitted;
  const config::Model* model = nullptr;
  if (const std::optional<bool> answered = co_await admit_into(
          admitted, model, request_trace, worker, client, request, rc, api, *snapshot)) {
    co_return *answered;
  }
  ChatProxy& proxy = *admitted;
  proxy.observe_start();
  // Observed as ended on every path out of here, cancellation included.
  struct Ended {
    const ChatProxy& proxy;
    const config::Model& model;
    ~Ended() { proxy.observe_end(model); }
  } ended{proxy, *model};
  // Race the whole exchange against the client hanging up: a disconnect
  // cancels the attempt, which closes the upstream connection and records it.
  // And against the end of a graceful drain: at drain.timeout the worker's
  // shutdown signal fires and requests still running are ended explicitly.
  net::awaitable<bool> exchange = proxy.run(*model);
  const Watched r = co_await run_watched(worker, client, *rc.session_cancel, std::move(exchange));
  if (r.why == Interrupt::kClientGone) {
    log_line(LogLevel::kDebug,
             "request " + rc.request_id + ": client disconnected, upstream cancelled");
    co_return false;
  }
  if (r.why == Interrupt::kShutdown) {
    log_line(LogLevel::kWarn, "request " + rc.request_id + ": cut by the end of the drain timeout");
    co_await proxy.end_for_shutdown();
    co_return false;
  }
  co_return r.result;
}

}  // namespace llmgate::gateway
