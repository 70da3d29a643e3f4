// OpenTelemetry traces (config tracing: / OTEL_*): one SERVER span per
// request and one CLIENT span per upstream attempt, exported over OTLP/HTTP
// as JSON by a thread of the tracer's own.
//
// Off the request path: a request records finished spans into a bounded
// SpanBuffer (gateway/observe/otlp.h); the exporter takes batches every
// schedule_delay (or as soon as a batch is full) and POSTs them with a
// deadline. A collector that is down or slow never slows a request: the
// buffer fills and further spans are dropped and counted
// (llmgate_trace_spans_dropped_total{reason}), so memory stays bounded.
//
// Beast-free interface; the exporter's HTTP client lives in tracer.cpp.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "config/config.h"
#include "gateway/observe/otlp.h"
#include "gateway/observe/trace_context.h"

namespace llmgate::gateway {

class MetricsRegistry;

// gen_ai.provider.name: the semantic conventions' names for the native
// protocols, the provider's configured name for OpenAI-compatible ones
// ("openai", "groq", "together", ...).
std::string gen_ai_provider(const config::Provider& p);

// A request's place in its trace: the server span's context, the caller's
// span (from its traceparent) and tracestate. Not sampled: nothing is
// recorded, but the context is still passed upstream.
struct RequestTrace {
  SpanContext server;              // the server span (flags: sampled or not)
  std::optional<SpanId> parent;    // the caller's span
  std::string trace_state;         // the caller's, cleaned
  std::int64_t start_unix_ns = 0;  // when the request arrived
  std::chrono::steady_clock::time_point start_steady{};
  bool sampled() const { return server.sampled(); }
  // A steady-clock instant of this request as Unix nanoseconds.
  std::int64_t unix_ns(std::chrono::steady_clock::time_point t) const {
    return start_unix_ns +
           std::chrono::duration_cast<std::chrono::nanoseconds>(t - start_steady).count();
  }
  // The request's SERVER span, from its arrival to `end` (attributes to add).
  SpanData server_span(std::string name, std::chrono::steady_clock::time_point end) const;
  // A CLIENT span `id` under the server span (an upstream exchange).
  SpanData client_span(const SpanId& id, std::string name,
                       std::chrono::steady_clock::time_point start,
                       std::chrono::steady_clock::time_point end) const;
  // The traceparent naming child span `id`: what goes upstream.
  std::string child_traceparent(const SpanId& id) const {
    return format_traceparent(SpanContext{server.trace, id, server.flags});
  }
};

class Tracer {
 public:
  // Starts the exporter thread. `metrics` may be null (tests).
  static std::shared_ptr<Tracer> start(const config::Tracing& cfg, MetricsRegistry* metrics);
  ~Tracer();
  // Exports what is buffered (within one timeout), then joins the thread.
  void stop();

  const config::Tracing& config() const { return cfg_; }

  // A new request's trace, from the client's traceparent / tracestate
  // header values ("" when absent): its parent if they parse, else a new
  // trace; sampled per the configured sampler.
  RequestTrace begin(std::string_view traceparent, std::string_view tracestate,
                     std::chrono::steady_clock::time_point now) const;
  // A span id for a child span (an attempt).
  SpanId new_span_id() const;
  // A finished span; dropped (and counted) when the buffer is full.
  void record(SpanData span);

  struct Counts {
    std::uint64_t exported = 0;
    std::uint64_t dropped_queue_full = 0;
    std::uint64_t dropped_export_failed = 0;
  };
  Counts counts() const;
  std::size_t buffered() const;

  struct Impl;

 private:
  Tracer(const config::Tracing& cfg, MetricsRegistry* metrics);
  config::Tracing cfg_;
  std::unique_ptr<Impl> impl_;
};

}  // namespace llmgate::gateway
