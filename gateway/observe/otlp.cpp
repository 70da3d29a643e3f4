#include "gateway/observe/otlp.h"

#include <cmath>
#include <nlohmann/json.hpp>

namespace llmgate::gateway {
namespace {

using json = nlohmann::json;

// An AnyValue. 64-bit integers are strings in OTLP/JSON (as protobuf's JSON
// mapping has them); non-finite doubles have no JSON number.
json any_value(const AttributeValue& v) {
  struct Visit {
    json operator()(const std::string& s) const { return {{"stringValue", s}}; }
    json operator()(std::int64_t i) const { return {{"intValue", std::to_string(i)}}; }
    json operator()(double d) const {
      if (std::isnan(d)) return {{"doubleValue", "NaN"}};
      if (std::isinf(d)) return {{"doubleValue", d > 0 ? "Infinity" : "-Infinity"}};
      return {{"doubleValue", d}};
    }
    json operator()(bool b) const { return {{"boolValue", b}}; }
    json operator()(const std::vector<std::string>& list) const {
      json values = json::array();
      for (const auto& s : list) values.push_back({{"stringValue", s}});
      return {{"arrayValue", {{"values", std::move(values)}}}};
    }
  };
  return std::visit(Visit{}, v);
}

json attributes(const std::vector<Attribute>& attrs) {
  json out = json::array();
  for (const auto& a : attrs) out.push_back({{"key", a.key}, {"value", any_value(a.value)}});
  return out;
}

}  // namespace

std::string encode_otlp_json(const TraceResource& resource, std::string_view version,
                             std::span<const SpanData> spans) {
  json list = json::array();
  for (const auto& s : spans) {
    json j = {{"traceId", s.trace.hex()},
              {"spanId", s.span.hex()},
              {"name", s.name},
              {"kind", static_cast<int>(s.kind)},
              {"startTimeUnixNano", std::to_string(s.start_unix_ns)},
              {"endTimeUnixNano", std::to_string(s.end_unix_ns)},
              {"attributes", attributes(s.attributes)}};
    if (s.parent) j["parentSpanId"] = s.parent->hex();
    if (!s.trace_state.empty()) j["traceState"] = s.trace_state;
    // STATUS_CODE_ERROR = 2; UNSET is the default and left out.
    if (s.error) j["status"] = {{"code", 2}, {"message", s.status_message}};
    list.push_back(std::move(j));
  }
  json body = {
      {"resourceSpans",
       json::array(
           {{{"resource", {{"attributes", attributes(resource.attributes)}}},
             {"scopeSpans",
              json::array({{{"scope", {{"name", "llmgate"}, {"version", std::string(version)}}},
                            {"spans", std::move(list)}}})}}})}};
  // Attribute values come from upstreams (response ids, models): never let
  // invalid UTF-8 make the export throw.
  return body.dump(-1, ' ', false, json::error_handler_t::replace);
}

bool SpanBuffer::push(SpanData span) {
  std::lock_guard lock(mu_);
  if (spans_.size() >= capacity_) return false;
  spans_.push_back(std::move(span));
  return true;
}

std::vector<SpanData> SpanBuffer::take(std::size_t max) {
  std::lock_guard lock(mu_);
  const std::size_t n = std::min(max, spans_.size());
  std::vector<SpanData> out;
  out.reserve(n);
  for (std::size_t i = 0; i < n; ++i) {
    out.push_back(std::move(spans_.front()));
    spans_.pop_front();
  }
  return out;
}

std::size_t SpanBuffer::size() const {
  std::lock_guard lock(mu_);
  return spans_.size();
}

}  // namespace llmgate::gateway
