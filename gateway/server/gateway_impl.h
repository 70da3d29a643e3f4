// Private to gateway/server/: the gateway's state (Gateway::Impl), shared by
// its three files -- gateway.cpp (the process: listeners, worker threads,
// reload, drain), session.cpp (one HTTP/1.1 connection: heads, bodies,
// keep-alive, limits) and endpoints.cpp (a request's dispatch by the route
// table, and the gateway's own answers: models, metrics, probes, /admin/*).
// Includes Beast: include only from those files.
#pragma once

#include <algorithm>
#include <atomic>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/http.hpp>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <ctime>
#include <functional>
#include <list>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>
#include <tuple>
#include <variant>

#include "config/reload_guard.h"
#include "gateway/admin/admin_routes.h"
#include "gateway/admin/console_page.h"
#include "gateway/http/headers.h"
#include "gateway/observe/log.h"
#include "gateway/observe/tracer.h"
#include "gateway/proxy/chat_proxy.h"
#include "gateway/proxy/client_stream.h"
#include "gateway/proxy/credential_refresher.h"
#include "gateway/proxy/response_resource.h"
#include "gateway/server/chunked_request.h"
#include "gateway/server/gateway.h"
#include "gateway/server/route_table.h"
#include "gateway/shared/shared_limits.h"
#include "providers/tls_client.h"

namespace llmgate::gateway {

// How long a response write may take.
inline constexpr std::chrono::seconds kWriteTimeout{30};
// After a drain timeout: how long requests get to write their error and close.
inline constexpr std::chrono::seconds kShutdownGrace{2};

// The body limit of a request and the setting it comes from (embeddings
// batches have their own).
struct BodyLimit {
  std::size_t bytes;
  std::string_view setting;
  // The shape of the errors for its path (Anthropic's API has its own),
  // known from the request line before the head is parsed.
  ErrorShape shape = ErrorShape::kOpenAi;
};

struct Gateway::Impl {
  // An API-listener connection, for the drain: idle ones are closed at once.
  struct Session {
    beast::tcp_stream* stream;
    bool busy = false;  // a request has been read and is being answered
  };
  struct Acceptor {
    std::unique_ptr<net::ip::tcp::acceptor> acceptor;
    bool admin = false;
  };
  struct WorkerThread {
    // Destruction order matters: pools are declared first so they outlive the
    // io_context, whose destruction releases leases held by coroutine frames.
    // So do the sessions list and the worker, which session frames use as
    // they are destroyed.
    std::unique_ptr<providers::UpstreamPools> pools;
    std::unique_ptr<CredentialRefresher> refresher;  // the first worker's: its own pools
    std::list<Session> sessions;                     // API sessions; this worker's thread only
    Worker worker;
    RequestWatches watches;  // before io: frames destroyed with it remove their requests
    net::io_context io{1};
    std::vector<Acceptor> acceptors;
    std::thread thread;

    ~WorkerThread() {
      if (pools) pools->shutdown();
      if (refresher) refresher->shutdown();
    }
  };

  std::unique_ptr<MetricsRegistry> metrics = std::make_unique<MetricsRegistry>();
  // This gateway's name in Via (RFC 9110 §7.6.3), unique per instance: a
  // request that comes back with it has looped through a base_url that
  // points at the gateway itself.
  const std::string via_name = "llmgate-" + new_request_id().substr(0, 12);
  providers::WireQuirks quirks;  // learnt per deployment, for the gateway's lifetime
  ResponseOwners responses;      // which provider stored each response (Responses API)
  RouteHistory history;          // the console's last minutes (/admin/history)
  mutable std::mutex snapshot_mu;
  std::shared_ptr<const Snapshot> current;  // snapshot_mu
  std::mutex reload_mu;                     // one reload at a time
  std::optional<std::uint16_t> admin_port;
  std::atomic<bool> ready{false};
  std::atomic<bool> stopped{false};
  std::atomic<bool> draining{false};  // readiness off; answers say Connection: close
  std::atomic<bool> closing{false};   // the drain closed the API listeners: no new requests
  // Open API connections, for the drain to wait on.
  std::mutex sessions_mu;
  std::condition_variable sessions_cv;
  std::size_t api_sessions = 0;     // sessions_mu
  std::condition_variable stop_cv;  // wakes a drain's delay when stop() is called
  // shared_state: started once with the first config (a change needs a restart).
  std::shared_ptr<SharedLimits> shared;
  // tracing: likewise.
  std::shared_ptr<Tracer> tracer;
  // Last: destroying a worker destroys session frames, which use the members above.
  std::vector<std::unique_ptr<WorkerThread>> workers;

  std::shared_ptr<const Snapshot> snapshot() const {
    std::lock_guard lock(snapshot_mu);
    return current;
  }
  // Runs `fn` on every worker's thread and waits until all have run it (or
  // `limit` passed: a stopped worker runs nothing).
  void on_every_worker(const std::function<void(WorkerThread&)>& fn,
                       std::chrono::milliseconds limit = std::chrono::seconds(10));

  net::awaitable<void> accept_loop(WorkerThread& w, net::ip::tcp::acceptor& acceptor, bool admin);
  // Samples the routing table into `history` every interval, on one worker.
  net::awaitable<void> sample_history(WorkerThread& w);
  // The worker's RequestWatches::tick, every kTick.
  static net::awaitable<void> tick_watches(WorkerThread& w);
  class SessionTracker;
  net::awaitable<void> session(WorkerThread& w, net::ip::tcp::socket socket, bool admin,
                               net::cancellation_signal& cancel);
  bool over_connection_limit(WorkerThread& w);
  // Reads and answers one request: whether the connection goes on.
  net::awaitable<bool> serve_request(WorkerThread& w, beast::tcp_stream& stream,
                                     beast::flat_buffer& buffer, SessionTracker& tracked,
                                     bool first, bool admin, net::cancellation_signal& cancel);
  // The head (or the body) read whole, else answered when the client is
  // still there, and false: the connection closes.
  static net::awaitable<bool> read_request_head(beast::tcp_stream& stream,
                                                beast::flat_buffer& buffer, RequestParser& parser,
                                                RequestContext& rc,
                                                const config::ServerLimits& limits,
                                                BodyLimit& body_limit);
  // The same without an I/O operation, a timer or a coroutine frame, for
  // what the buffer already holds whole (most requests: head and body came
  // with the read that began the request, or behind the previous one).
  enum class Buffered { kDone, kError, kRead };
  static Buffered parse_buffered_head(beast::flat_buffer& buffer, RequestParser& parser,
                                      const config::ServerLimits& limits, BodyLimit& body_limit,
                                      beast::error_code& ec);
  // Both: the path's body limit, from the request line at the start of
  // `head` (embeddings batches have their own), set before Beast parses the
  // head; then the head, whole in `buffer`, parsed in place (kRead: Beast
  // wants more).
  static void use_path_body_limit(std::string_view head, RequestParser& parser,
                                  const config::ServerLimits& limits, BodyLimit& body_limit);
  // `head_end`: where the head ends in `buffer` (request_head_end).
  static Buffered put_whole_head(beast::flat_buffer& buffer, RequestParser& parser,
                                 std::size_t head_end, beast::error_code& ec);
  static Buffered parse_buffered_body(beast::tcp_stream& stream, beast::flat_buffer& buffer,
                                      RequestParser& parser, beast::error_code& ec);
  static net::awaitable<bool> read_request_body(beast::tcp_stream& stream,
                                                beast::flat_buffer& buffer, RequestParser& parser,
                                                const RequestContext& rc,
                                                const config::ServerLimits& limits,
                                                const BodyLimit& body_limit);
  static net::awaitable<void> lingering_close(beast::tcp_stream& stream);
  // The request to what `route` (its path's, from the session) names: a
  // client API's handler itself (not a coroutine wrapped around it: a frame
  // fewer per request), else answer_here().
  net::awaitable<bool> dispatch(WorkerThread& w, beast::tcp_stream& stream, Request& req,
                                RequestContext& rc, const Route& route, bool admin);
  net::awaitable<bool> answer_here(WorkerThread& w, beast::tcp_stream& stream, Request& req,
                                   RequestContext& rc, const Route& route, bool admin);
  std::optional<ApiError> admin_refusal(const Snapshot& snap, const Request& req, bool admin) const;
  Response models_response(const Snapshot& snap, const Request& req, const RequestContext& rc,
                           const std::string* id = nullptr) const;
  // The gateway's own answers (not a client API's, not forwarded).
  Response simple_response(const Snapshot& snap, const Request& req, const Route& route,
                           std::string_view path, const RequestContext& rc, bool admin) const;
  Response console_response(const RequestContext& rc) const;
  Response history_response(const Request& req, const RequestContext& rc) const;
  std::optional<ApiError> rejected_before_body(const Snapshot& snap, const Route& route,
                                               const Request& head, bool admin) const;
};

}  // namespace llmgate::gateway
