// Finished spans and their OTLP/HTTP JSON encoding
// (https://opentelemetry.io/docs/specs/otlp/#json-protobuf-encoding): the
// body of POST /v1/traces. A span is recorded on the request's thread as a
// plain struct and handed to a SpanBuffer, bounded in memory: when it is
// full the span is dropped and counted, never waited for. Encoding happens
// on the exporter's thread, off the request path.
//
// Beast-free.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "gateway/observe/trace_context.h"

namespace llmgate::gateway {

using AttributeValue =
    std::variant<std::string, std::int64_t, double, bool, std::vector<std::string>>;

struct Attribute {
  std::string key;
  AttributeValue value;
};

enum class SpanKind { kInternal = 1, kServer = 2, kClient = 3 };

struct SpanData {
  TraceId trace;
  SpanId span;
  std::optional<SpanId> parent;
  std::string trace_state;
  std::string name;
  SpanKind kind = SpanKind::kInternal;
  std::int64_t start_unix_ns = 0;
  std::int64_t end_unix_ns = 0;
  bool error = false;          // status ERROR (else UNSET)
  std::string status_message;  // with error
  std::vector<Attribute> attributes;

  void set(std::string key, AttributeValue value) {
    attributes.push_back(Attribute{std::move(key), std::move(value)});
  }
};

// Who emits the spans (resource attributes: service.name, ...).
struct TraceResource {
  std::vector<Attribute> attributes;
};

// One ExportTraceServiceRequest as JSON: every span under one resource and
// one instrumentation scope ("llmgate", `version`).
std::string encode_otlp_json(const TraceResource& resource, std::string_view version,
                             std::span<const SpanData> spans);

// A bounded queue of finished spans, shared by the workers (push) and the
// exporter (take). Thread-safe.
class SpanBuffer {
 public:
  explicit SpanBuffer(std::size_t capacity) : capacity_(capacity) {}
  // False, and the span is dropped, when the buffer is full.
  bool push(SpanData span);
  // Up to `max` of the oldest spans.
  std::vector<SpanData> take(std::size_t max);
  std::size_t size() const;
  std::size_t capacity() const { return capacity_; }

 private:
  const std::size_t capacity_;
  mutable std::mutex mu_;
  std::deque<SpanData> spans_;
};

}  // namespace llmgate::gateway
