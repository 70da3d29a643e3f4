// Fetching and refreshing upstream credentials (credential_refresher.h).
#include "gateway/proxy/credential_refresher.h"

#include <algorithm>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <map>
#include <stdexcept>

#include "gateway/observe/log.h"
#include "gateway/observe/metrics.h"
#include "gateway/proxy/upstream_exchange.h"
#include "gateway/proxy/worker.h"
#include "providers/tls_client.h"

namespace llmgate::gateway {
namespace {

using Steady = std::chrono::steady_clock;
constexpr auto kUseTuple = net::as_tuple(net::use_awaitable);
// How often the refresher looks for credentials due (new snapshots' too).
constexpr auto kTick = std::chrono::milliseconds(200);
constexpr auto kConnectTimeout = std::chrono::seconds(5);
constexpr auto kFetchTimeout = std::chrono::seconds(15);
constexpr std::size_t kMaxTokenAnswer = 64 * 1024;
constexpr auto kMaxBackoff = std::chrono::seconds(30);
// A credential is never asked for more often than this, whatever it says.
constexpr auto kMinInterval = std::chrono::seconds(1);

double unix_seconds(SystemClock::time_point t) {
  return std::chrono::duration<double>(t.time_since_epoch()).count();
}

}  // namespace

struct CredentialRefresher::Impl : std::enable_shared_from_this<Impl> {
  Impl(net::io_context& io, MetricsRegistry& m) : io(io), metrics(m) {}

  net::io_context& io;
  MetricsRegistry& metrics;
  // A pool per token endpoint origin ("https://oauth2.googleapis.com"), and
  // the TLS context its connections verify with.
  struct Endpoint {
    std::unique_ptr<providers::ConnectionPool> pool;
  };
  std::map<std::string, Endpoint> endpoints;
  bool stopped = false;

  // The pool for `url`'s origin and the request target (path and query).
  std::pair<providers::ConnectionPool*, std::string> endpoint(const std::string& url,
                                                              config::UpstreamUrl& parsed) {
    const std::size_t q = url.find('?');
    parsed = config::parse_upstream_url(url.substr(0, q));  // throws std::invalid_argument
    std::string target = parsed.path_prefix.empty() ? "/" : parsed.path_prefix;
    if (url.substr(0, q).ends_with('/') && !target.ends_with('/')) target += '/';
    if (q != std::string::npos) target += url.substr(q);
    const std::string origin = (parsed.tls ? "https://" : "http://") + parsed.authority();
    Endpoint& e = endpoints[origin];
    if (!e.pool) {
      config::Provider p;
      p.name = "token-endpoint";
      p.base_url = parsed;
      p.base_url.path_prefix.clear();
      p.pool.max_connections = 4;
      e.pool = std::make_unique<providers::ConnectionPool>(
          io.get_executor(), p, p.base_url.tls ? providers::make_tls_context(p.tls) : nullptr);
    }
    return {e.pool.get(), std::move(target)};
  }

  // One request to a token endpoint, its answer read whole (status 0: none).
  net::awaitable<WholeAnswer> ask(const providers::cloud::TokenFetch& f, std::string& authority,
                                  Steady::duration connect_timeout) {
    config::UpstreamUrl url;
    providers::ConnectionPool* pool = nullptr;
    std::string target;
    try {
      std::tie(pool, target) = endpoint(f.url, url);
    } catch (const std::exception& e) {
      co_return WholeAnswer{0, {}, "bad token endpoint URL: " + std::string(e.what())};
    }
    authority = url.authority();
    UpstreamMessage m;
    m.head.append(f.method).append(" ").append(target).append(" HTTP/1.1\r\nHost: ");
    m.head.append(authority).append("\r\nUser-Agent: llmgate/0.1\r\n");
    for (const auto& [name, value] : f.headers)
      m.head.append(name).append(": ").append(value).append("\r\n");
    if (f.method != "GET")
      m.head.append("Content-Length: ").append(std::to_string(f.body.size())).append("\r\n");
    m.head.append("\r\n");
    m.body = f.body;
    ExchangeTimes times{connect_timeout, kConnectTimeout};
    times.by = Steady::now() + kFetchTimeout;
    co_return co_await exchange_whole(*pool, m, times, kMaxTokenAnswer);
  }

  net::awaitable<void> refresh(std::shared_ptr<CredentialCell> cell) {
    auto self = shared_from_this();
    const providers::cloud::TokenSource& source = *cell->source();
    std::string why;
    std::optional<providers::cloud::Credential> got;
    auto fetch = providers::cloud::token_request(source, SystemClock::now(),
                                                 providers::cloud::read_small_file());
    if (auto* no = std::get_if<std::string>(&fetch)) why = std::move(*no);
    // A flow of several requests (IMDSv2) asks again; the others answer at once.
    for (int step = 0; step < 4 && fetch.index() == 0; ++step) {
      const auto& f = std::get<providers::cloud::TokenFetch>(fetch);
      std::string authority;
      const WholeAnswer a = co_await ask(f, authority, providers::cloud::connect_timeout(source));
      if (a.status == 0) {
        why = "token endpoint " + authority + ": " + a.error;
        break;
      }
      if (auto next = providers::cloud::token_next(source, f, a.status, a.body)) {
        fetch = std::move(*next);
        continue;
      }
      auto answer = providers::cloud::token_answer(source, a.status, a.body, SystemClock::now());
      if (auto* no = std::get_if<std::string>(&answer)) {
        why = "token endpoint " + authority + ": " + *no;
      } else {
        got = std::get<providers::cloud::Credential>(std::move(answer));
      }
      break;
    }
    if (stopped) co_return;
    auto& s = cell->schedule;
    s.in_flight = false;
    const auto now = SystemClock::now();
    if (got) {
      const auto expires = got->expires;
      const bool was_failing = s.failures > 0 || !cell->settled();
      cell->store(std::move(*got));
      s.failures = 0;
      const auto wait = std::clamp<SystemClock::duration>(
          providers::cloud::refresh_time(now, expires) - now, kMinInterval, std::chrono::hours(24));
      s.due = Steady::now() + std::chrono::duration_cast<Steady::duration>(wait);
      metrics.on_credential_refresh(cell->provider(), true, unix_seconds(expires));
      const auto valid_s = std::chrono::duration_cast<std::chrono::seconds>(expires - now).count();
      log_line(was_failing ? LogLevel::kInfo : LogLevel::kDebug,
               "provider " + cell->provider() + ": credential from " + source.description +
                   " obtained, valid for " + std::to_string(valid_s) + "s");
    } else {
      ++s.failures;
      const auto backoff = std::min<Steady::duration>(
          kMaxBackoff, std::chrono::seconds(1L << std::min(s.failures - 1, 5)));
      s.due = Steady::now() + backoff;
      cell->failed(why);
      metrics.on_credential_refresh(cell->provider(), false, 0);
      log_line(
          LogLevel::kWarn,
          "provider " + cell->provider() + ": cannot refresh its credential (" +
              source.description + "): " + why + "; retrying in " +
              std::to_string(std::chrono::duration_cast<std::chrono::seconds>(backoff).count()) +
              "s");
    }
  }
};

CredentialRefresher::CredentialRefresher(net::io_context& io, MetricsRegistry& metrics)
    : impl_(std::make_shared<Impl>(io, metrics)) {}

CredentialRefresher::~CredentialRefresher() { shutdown(); }

void CredentialRefresher::shutdown() {
  impl_->stopped = true;
  for (auto& [origin, e] : impl_->endpoints) e.pool->shutdown();
}

net::awaitable<void> CredentialRefresher::run(Worker& worker) {
  auto impl = impl_;
  net::steady_timer timer(impl->io);
  for (;;) {
    // The worker's snapshot: the latest config, posted to this thread.
    const std::shared_ptr<const Snapshot> snap = worker.snapshot;
    const auto now = Steady::now();
    for (const auto& [name, cell] : snap->credentials) {
      auto& s = cell->schedule;
      if (!cell->source() || s.in_flight || now < s.due) continue;
      s.in_flight = true;
      net::co_spawn(impl->io, impl->refresh(cell), net::detached);
    }
    timer.expires_after(kTick);
    auto [ec] = co_await timer.async_wait(kUseTuple);
    if (ec || impl->stopped) co_return;
  }
}

}  // namespace llmgate::gateway
