#include "gateway/observe/tracer.h"

#include <atomic>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http.hpp>
#include <mutex>
#include <thread>

#include "gateway/observe/log.h"
#include "gateway/observe/metrics.h"
#include "providers/tls_client.h"

namespace llmgate::gateway {

SpanData RequestTrace::server_span(std::string name,
                                   std::chrono::steady_clock::time_point end) const {
  SpanData s;
  s.trace = server.trace;
  s.span = server.span;
  s.parent = parent;
  s.trace_state = trace_state;
  s.kind = SpanKind::kServer;
  s.name = std::move(name);
  s.start_unix_ns = start_unix_ns;
  s.end_unix_ns = unix_ns(end);
  return s;
}

SpanData RequestTrace::client_span(const SpanId& id, std::string name,
                                   std::chrono::steady_clock::time_point start,
                                   std::chrono::steady_clock::time_point end) const {
  SpanData s;
  s.trace = server.trace;
  s.span = id;
  s.parent = server.span;
  s.kind = SpanKind::kClient;
  s.name = std::move(name);
  s.start_unix_ns = unix_ns(start);
  s.end_unix_ns = unix_ns(end);
  return s;
}

std::string gen_ai_provider(const config::Provider& p) {
  switch (p.protocol) {
    case config::Protocol::kAnthropic:
      return "anthropic";
    case config::Protocol::kGemini:
      return "gcp.gemini";
    case config::Protocol::kBedrock:
      return "aws.bedrock";
    case config::Protocol::kOpenAi:
      break;
  }
  return p.name;
}
namespace {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = net::ip::tcp;
constexpr auto kTuple = net::as_tuple(net::use_awaitable);

std::int64_t unix_now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

IdGenerator& thread_ids() {
  thread_local IdGenerator ids;
  return ids;
}

}  // namespace

struct Tracer::Impl {
  explicit Impl(const config::Tracing& cfg) : buffer(cfg.max_queue_size) {}

  SpanBuffer buffer;
  MetricsRegistry* metrics = nullptr;
  TraceResource resource;
  std::atomic<std::uint64_t> exported{0}, dropped_full{0}, dropped_failed{0};
  std::atomic<bool> wake_pending{false};

  net::io_context ioc{1};
  net::executor_work_guard<net::io_context::executor_type> work{ioc.get_executor()};
  net::steady_timer timer{ioc};
  std::thread thread;
  bool stopping = false;  // on the exporter thread

  std::shared_ptr<net::ssl::context> tls_context;
  // One keep-alive connection to the collector, made again after an error.
  std::optional<beast::tcp_stream> plain;
  std::optional<net::ssl::stream<beast::tcp_stream>> secure;
  bool connected = false;
  std::string target;
  std::string host_header;
  bool warned = false;  // the collector's failure was logged (once until it works again)

  void close() {
    beast::error_code ignored;
    if (plain) plain->socket().close(ignored);
    if (secure) beast::get_lowest_layer(*secure).socket().close(ignored);
    plain.reset();
    secure.reset();
    connected = false;
  }

  beast::tcp_stream& lowest() { return secure ? beast::get_lowest_layer(*secure) : *plain; }

  net::awaitable<std::string> connect(const config::Tracing& cfg) {
    const auto& url = cfg.endpoint;
    tcp::resolver resolver(ioc);
    // The resolver has no deadline of its own: a timer cancels it.
    net::steady_timer deadline(ioc);
    deadline.expires_after(cfg.timeout);
    deadline.async_wait([&resolver](beast::error_code ec) {
      if (!ec) resolver.cancel();
    });
    auto [rec, results] =
        co_await resolver.async_resolve(url.host, std::to_string(url.port), kTuple);
    deadline.cancel();
    if (rec) co_return "resolve " + url.host + ": " + rec.message();
    if (url.tls) {
      secure.emplace(ioc, *tls_context);
      if (!providers::prepare_tls_client(*secure, cfg.tls, url.host)) co_return "bad TLS name";
    } else {
      plain.emplace(ioc);
    }
    lowest().expires_after(cfg.timeout);
    auto [cec, ep] = co_await lowest().async_connect(results, kTuple);
    if (cec) co_return "connect: " + cec.message();
    if (secure) {
      auto [hec] = co_await secure->async_handshake(net::ssl::stream_base::client, kTuple);
      if (hec) co_return "TLS handshake: " + hec.message();
    }
    connected = true;
    co_return std::string();
  }

  // One batch: "" when the collector took it, else why not. A kept-alive
  // connection the collector closed meanwhile is made again, once.
  net::awaitable<std::string> post(const config::Tracing& cfg, const std::string& body) {
    const bool reused = connected;
    std::string why = co_await post_once(cfg, body);
    if (!why.empty() && reused && why != "timeout" && why.rfind("HTTP ", 0) != 0) {
      why = co_await post_once(cfg, body);
    }
    co_return why;
  }

  net::awaitable<std::string> post_once(const config::Tracing& cfg, const std::string& body) {
    if (!connected) {
      close();
      std::string why = co_await connect(cfg);
      if (!why.empty()) {
        close();
        co_return why;
      }
    }
    http::request<http::string_body> req{http::verb::post, target, 11};
    req.set(http::field::host, host_header);
    req.set(http::field::content_type, "application/json");
    req.set(http::field::user_agent, "llmgate");
    for (const auto& [k, v] : cfg.headers) req.set(k, v);
    req.body() = body;
    req.prepare_payload();
    lowest().expires_after(cfg.timeout);
    beast::flat_buffer buf;
    http::response_parser<http::string_body> parser;
    parser.body_limit(1 << 20);
    beast::error_code ec;
    if (secure) {
      std::tie(ec, std::ignore) = co_await http::async_write(*secure, req, kTuple);
      if (!ec) std::tie(ec, std::ignore) = co_await http::async_read(*secure, buf, parser, kTuple);
    } else {
      std::tie(ec, std::ignore) = co_await http::async_write(*plain, req, kTuple);
      if (!ec) std::tie(ec, std::ignore) = co_await http::async_read(*plain, buf, parser, kTuple);
    }
    if (ec) {
      close();
      co_return ec == beast::error::timeout ? std::string("timeout") : ec.message();
    }
    const auto res = parser.release();
    if (!res.keep_alive()) close();
    const unsigned status = res.result_int();
    if (status / 100 != 2) co_return "HTTP " + std::to_string(status);
    co_return std::string();
  }

  net::awaitable<void> export_some(const config::Tracing& cfg) {
    for (;;) {
      std::vector<SpanData> batch = buffer.take(cfg.max_export_batch_size);
      if (batch.empty()) co_return;
      const std::size_t n = batch.size();
      const std::string body = encode_otlp_json(resource, "0.1", batch);
      std::string why = co_await post(cfg, body);
      if (why.empty()) {
        exported += n;
        if (metrics) metrics->on_trace_spans(TraceSpanResult::kExported, n);
        if (warned) {
          log_line(LogLevel::kInfo, "tracing: the collector takes spans again");
          warned = false;
        }
      } else {
        if (stopping) {
          // Shutting down and the collector fails: what is left is not
          // worth another timeout each.
          const std::size_t rest = buffer.take(buffer.capacity()).size();
          dropped_failed += rest;
          if (metrics) metrics->on_trace_spans(TraceSpanResult::kExportFailed, rest);
        }
        dropped_failed += n;
        if (metrics) metrics->on_trace_spans(TraceSpanResult::kExportFailed, n);
        if (!warned) {
          log_line(LogLevel::kWarn, "tracing: export to " + cfg.endpoint.to_string() + " failed (" +
                                        why + "); " + std::to_string(n) +
                                        " spans dropped, and spans are dropped until it works");
          warned = true;
        }
      }
      if (n < cfg.max_export_batch_size) co_return;
    }
  }

  net::awaitable<void> run(const config::Tracing& cfg) {
    for (;;) {
      if (!stopping) {
        timer.expires_after(cfg.schedule_delay);
        co_await timer.async_wait(kTuple);
      }
      wake_pending = false;
      co_await export_some(cfg);
      if (stopping) break;
    }
    close();
  }
};

std::shared_ptr<Tracer> Tracer::start(const config::Tracing& cfg, MetricsRegistry* metrics) {
  return std::shared_ptr<Tracer>(new Tracer(cfg, metrics));
}

Tracer::Tracer(const config::Tracing& cfg, MetricsRegistry* metrics)
    : cfg_(cfg), impl_(std::make_unique<Impl>(cfg)) {
  Impl& i = *impl_;
  i.metrics = metrics;
  if (metrics) metrics->enable_tracing();
  i.resource.attributes.push_back({"service.name", cfg.service_name});
  i.resource.attributes.push_back({"service.version", std::string("0.1")});
  i.resource.attributes.push_back({"telemetry.sdk.name", std::string("llmgate")});
  i.resource.attributes.push_back({"telemetry.sdk.language", std::string("cpp")});
  for (const auto& [k, v] : cfg.resource) i.resource.attributes.push_back({k, v});
  i.target = cfg.endpoint.path_prefix.empty() ? "/v1/traces" : cfg.endpoint.path_prefix;
  i.host_header = cfg.endpoint.authority();
  if (cfg.endpoint.tls) i.tls_context = providers::make_tls_context(cfg.tls);
  log_line(LogLevel::kInfo, "tracing: OTLP/HTTP JSON to " + cfg.endpoint.to_string() + " (from " +
                                cfg.endpoint_source + "), service " + cfg.service_name +
                                ", sampler " + config::to_string(cfg.sampler));
  Impl* ip = impl_.get();
  const config::Tracing* c = &cfg_;
  net::co_spawn(i.ioc, ip->run(*c), net::detached);
  i.thread = std::thread([ip] { ip->ioc.run(); });
}

Tracer::~Tracer() { stop(); }

void Tracer::stop() {
  Impl& i = *impl_;
  if (!i.thread.joinable()) return;
  net::post(i.ioc, [ip = impl_.get()] {
    ip->stopping = true;
    ip->timer.cancel();  // export what is left now, then end
    ip->work.reset();
  });
  i.thread.join();
}

RequestTrace Tracer::begin(std::string_view traceparent, std::string_view tracestate,
                           std::chrono::steady_clock::time_point now) const {
  RequestTrace t;
  const auto steady_now = std::chrono::steady_clock::now();
  if (now == std::chrono::steady_clock::time_point{} || now > steady_now) now = steady_now;
  t.start_steady = now;
  t.start_unix_ns = unix_now_ns() -
                    std::chrono::duration_cast<std::chrono::nanoseconds>(steady_now - now).count();
  IdGenerator& ids = thread_ids();
  const auto parent = traceparent.empty() ? std::nullopt : parse_traceparent(traceparent);
  if (parent) {
    t.server.trace = parent->trace;
    t.parent = parent->span;
    t.trace_state = clean_tracestate(tracestate);
  } else {
    t.server.trace = ids.trace_id();
  }
  t.server.span = ids.span_id();
  t.server.flags = sample_trace(cfg_.sampler, parent ? &*parent : nullptr, t.server.trace) ? 1 : 0;
  return t;
}

SpanId Tracer::new_span_id() const { return thread_ids().span_id(); }

void Tracer::record(SpanData span) {
  Impl& i = *impl_;
  if (!i.buffer.push(std::move(span))) {
    ++i.dropped_full;
    if (i.metrics) i.metrics->on_trace_spans(TraceSpanResult::kQueueFull, 1);
    return;
  }
  // A full batch goes now rather than at the next tick (one wake-up at a time).
  if (i.buffer.size() >= cfg_.max_export_batch_size && !i.wake_pending.exchange(true)) {
    net::post(i.ioc, [ip = impl_.get()] { ip->timer.cancel(); });
  }
}

Tracer::Counts Tracer::counts() const {
  return Counts{impl_->exported.load(), impl_->dropped_full.load(), impl_->dropped_failed.load()};
}

std::size_t Tracer::buffered() const { return impl_->buffer.size(); }

}  // namespace llmgate::gateway
