// W3C Trace Context (https://www.w3.org/TR/trace-context/) and the
// OpenTelemetry samplers, for llmgate's traces (issue "Observability II"):
//
//  - traceparent: "00-<32 hex trace id>-<16 hex parent id>-<2 hex flags>".
//    A header that does not parse is ignored (a new trace starts), never an
//    error for the client. Versions above 00 are read as 00 where they agree
//    (the spec's forward-compatibility rule); "ff" is invalid.
//  - tracestate: passed on only when well-formed (at most 32 members, 512
//    characters), else dropped as a whole.
//  - Sampling (config::TraceSampler: OTEL_TRACES_SAMPLER's samplers).
//
// Beast-free and allocation-light: parsing works on string_views.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <random>
#include <string>
#include <string_view>

#include "config/config.h"

namespace llmgate::gateway {

struct TraceId {
  std::array<std::uint8_t, 16> bytes{};
  bool valid() const;  // not all zero
  std::string hex() const;
  bool operator==(const TraceId&) const = default;
};

struct SpanId {
  std::array<std::uint8_t, 8> bytes{};
  bool valid() const;
  std::string hex() const;
  bool operator==(const SpanId&) const = default;
};

struct SpanContext {
  TraceId trace;
  SpanId span;
  std::uint8_t flags = 0;  // bit 0: sampled
  bool sampled() const { return (flags & 1) != 0; }
  bool operator==(const SpanContext&) const = default;
};

// The context in a traceparent header value, or nullopt if it does not
// parse (surrounding spaces and tabs are allowed).
std::optional<SpanContext> parse_traceparent(std::string_view value);
// "00-<trace>-<span>-<flags>".
std::string format_traceparent(const SpanContext& c);

// A tracestate header value as passed on: the members with surrounding
// whitespace removed, "" if it is empty or not well-formed.
std::string clean_tracestate(std::string_view value);

// Random trace and span ids (never all zero). Not thread-safe: one per thread,
// or seeded for tests.
class IdGenerator {
 public:
  IdGenerator();  // seeded from std::random_device
  explicit IdGenerator(std::uint64_t seed) : rng_(seed) {}
  TraceId trace_id();
  SpanId span_id();

 private:
  std::mt19937_64 rng_;
};

// Whether a trace `id` is recorded under `sampler`, given the caller's
// context if any. The ratio is decided from the trace id as the
// OpenTelemetry SDKs do (its last 8 bytes), so every service of a trace
// agrees.
bool sample_trace(const config::TraceSampler& sampler, const SpanContext* parent,
                  const TraceId& id);

}  // namespace llmgate::gateway
