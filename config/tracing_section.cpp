// tracing: OpenTelemetry traces over OTLP/HTTP (JSON). Off unless an
// endpoint is set, here or by the standard variables; the standard OTEL_*
// variables give the defaults and the keys here win over them.
//
//   tracing:
//     endpoint: http://otel-collector:4318/v1/traces   # no path: /v1/traces
//     service_name: llmgate
//     sampler: parentbased_traceidratio
//     sampler_arg: 0.1
//     headers: {x-api-key: {env: TRACES_KEY}}
//     resource: {deployment.environment: prod}
//     timeout: 2s
//     schedule_delay: 1s
//     max_queue_size: 2048
//     max_export_batch_size: 512
//     tls: {ca_file: /etc/otel/ca.pem}
#include <algorithm>
#include <charconv>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "config/ascii.h"
#include "config/percent.h"
#include "config/quoting.h"
#include "config/sections.h"

namespace llmgate::config {
namespace {

[[noreturn]] void env_fail(const std::string& name, const std::string& message) {
  throw ConfigError("$" + name + ": " + message);
}

// The first of `names` that is set (and not blank), with its name.
std::optional<std::pair<std::string, std::string>> first_env(
    EnvLookup env, std::initializer_list<const char*> names) {
  for (const char* n : names) {
    if (auto v = env(n)) {
      const std::string_view t = trim_ows(*v);
      if (!t.empty()) return std::make_pair(std::string(n), std::string(t));
    }
  }
  return std::nullopt;
}

// "k1=v1,k2=v2" (the W3C Baggage form the OTEL variables use).
std::vector<std::pair<std::string, std::string>> key_values(const std::string& name,
                                                            std::string_view text) {
  std::vector<std::pair<std::string, std::string>> out;
  while (!text.empty()) {
    const auto comma = text.find(',');
    std::string_view item = text.substr(0, comma);
    text = comma == std::string_view::npos ? std::string_view() : text.substr(comma + 1);
    while (!item.empty() && item.front() == ' ') item.remove_prefix(1);
    while (!item.empty() && item.back() == ' ') item.remove_suffix(1);
    if (item.empty()) continue;
    const auto eq = item.find('=');
    if (eq == std::string_view::npos || eq == 0) env_fail(name, "expected key=value,...");
    std::string key(item.substr(0, eq));
    while (!key.empty() && key.back() == ' ') key.pop_back();
    std::string_view value = item.substr(eq + 1);
    while (!value.empty() && value.front() == ' ') value.remove_prefix(1);
    out.emplace_back(std::move(key), percent_decode(value));
  }
  return out;
}

// An OTLP/HTTP traces URL; `base`: the signal path is appended
// (OTEL_EXPORTER_OTLP_ENDPOINT), else it is used as given, with /v1/traces
// when it has no path.
UpstreamUrl traces_url(const std::string& text, bool base) {
  UpstreamUrl url = parse_upstream_url(text);  // throws std::invalid_argument
  if (base || url.path_prefix.empty()) url.path_prefix += "/v1/traces";
  return url;
}

std::int64_t env_integer(const std::string& name, const std::string& text, std::int64_t min,
                         std::int64_t max) {
  std::int64_t v = 0;
  auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || p != text.data() + text.size() || v < min || v > max) {
    env_fail(name, "expected an integer from " + std::to_string(min) + " to " +
                       std::to_string(max) + ", got " + quote(text.substr(0, 40)));
  }
  return v;
}

void check_limits(const Tracing& t, const std::function<void(const std::string&)>& fail) {
  if (t.max_export_batch_size > t.max_queue_size)
    fail("max_export_batch_size must not exceed max_queue_size");
  if (t.timeout > Duration{60'000}) fail("timeout must be at most 60s");
  if (t.schedule_delay < Duration{10} || t.schedule_delay > Duration{60'000})
    fail("schedule_delay must be from 10ms to 60s");
}

// The defaults from the standard variables.
Tracing from_env(EnvLookup env, std::vector<std::string>& warnings) {
  Tracing t;
  const auto disabled = first_env(env, {"OTEL_SDK_DISABLED"});
  const auto exporter = first_env(env, {"OTEL_TRACES_EXPORTER"});
  const bool off = (disabled && ascii_lowercase(disabled->second) == "true") ||
                   (exporter && ascii_lowercase(exporter->second) == "none");
  if (exporter && ascii_lowercase(exporter->second) != "none" &&
      ascii_lowercase(exporter->second) != "otlp") {
    warnings.push_back("$OTEL_TRACES_EXPORTER=" + exporter->second.substr(0, 40) +
                       ": llmgate exports only otlp (OTLP/HTTP with JSON)");
  }
  if (auto p =
          first_env(env, {"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"})) {
    const std::string v = ascii_lowercase(p->second);
    if (v == "grpc") {
      env_fail(p->first,
               "llmgate exports OTLP/HTTP (JSON), not gRPC: point the endpoint at the collector's "
               "HTTP port (4318) and set http/json");
    }
    if (v != "http/json") {
      warnings.push_back("$" + p->first + "=" + p->second.substr(0, 40) +
                         ": llmgate sends OTLP/HTTP with JSON, which collectors accept on the "
                         "same port");
    }
  }
  if (!off) {
    try {
      if (auto e = first_env(env, {"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"})) {
        t.endpoint = traces_url(e->second, false);
        t.endpoint_source = "$" + e->first;
      } else if (auto b = first_env(env, {"OTEL_EXPORTER_OTLP_ENDPOINT"})) {
        t.endpoint = traces_url(b->second, true);
        t.endpoint_source = "$" + b->first;
      }
    } catch (const std::invalid_argument& e) {
      env_fail(
          t.endpoint_source.empty() ? "OTEL_EXPORTER_OTLP_ENDPOINT" : t.endpoint_source.substr(1),
          e.what());
    }
  }
  if (auto r = first_env(env, {"OTEL_RESOURCE_ATTRIBUTES"})) {
    for (auto& [k, v] : key_values(r->first, r->second)) {
      if (k == "service.name") {
        t.service_name = v;
      } else {
        t.resource.emplace_back(std::move(k), std::move(v));
      }
    }
  }
  if (auto n = first_env(env, {"OTEL_SERVICE_NAME"})) t.service_name = n->second;
  if (auto s = first_env(env, {"OTEL_TRACES_SAMPLER"})) {
    const auto arg = first_env(env, {"OTEL_TRACES_SAMPLER_ARG"});
    std::string error;
    auto sampler = parse_trace_sampler(s->second, arg ? arg->second : "", &error);
    if (!sampler) env_fail(s->first, error);
    t.sampler = *sampler;
  }
  if (auto h = first_env(env, {"OTEL_EXPORTER_OTLP_TRACES_HEADERS", "OTEL_EXPORTER_OTLP_HEADERS"}))
    t.headers = key_values(h->first, h->second);
  if (auto x = first_env(env, {"OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", "OTEL_EXPORTER_OTLP_TIMEOUT"}))
    t.timeout = Duration{env_integer(x->first, x->second, 1, 60'000)};
  if (auto c = first_env(
          env, {"OTEL_EXPORTER_OTLP_TRACES_CERTIFICATE", "OTEL_EXPORTER_OTLP_CERTIFICATE"})) {
    t.tls.ca_file = c->second;
  }
  if (auto d = first_env(env, {"OTEL_BSP_SCHEDULE_DELAY"}))
    t.schedule_delay = Duration{env_integer(d->first, d->second, 10, 60'000)};
  if (auto q = first_env(env, {"OTEL_BSP_MAX_QUEUE_SIZE"}))
    t.max_queue_size = static_cast<std::size_t>(env_integer(q->first, q->second, 1, 1'000'000));
  if (auto b = first_env(env, {"OTEL_BSP_MAX_EXPORT_BATCH_SIZE"})) {
    t.max_export_batch_size =
        static_cast<std::size_t>(env_integer(b->first, b->second, 1, 1'000'000));
  }
  check_limits(t, [](const std::string& m) { env_fail("OTEL_BSP_*", m); });
  return t;
}

}  // namespace

Tracing read_tracing(const std::optional<ConfigNode>& node, EnvLookup env,
                     std::vector<std::string>& warnings) {
  Tracing t = from_env(env, warnings);
  if (!node) return t;
  node->read_map([&](ConfigMap& m) {
    if (auto e = m.optional("endpoint")) {
      try {
        t.endpoint = traces_url(e->string(), false);
      } catch (const std::invalid_argument& ex) {
        e->fail(ex.what());
      }
      t.endpoint_source = "tracing.endpoint";
    }
    m.read("service_name", t.service_name, &ConfigNode::string);
    std::optional<std::string> sampler, sampler_arg;
    const auto sampler_node = m.optional("sampler");
    if (sampler_node) sampler = sampler_node->string();
    m.read("sampler_arg", sampler_arg, &ConfigNode::string);
    if (sampler_arg && !sampler) node->fail("sampler_arg needs sampler");
    if (sampler) {
      std::string error;
      auto s = parse_trace_sampler(*sampler, sampler_arg.value_or(""), &error);
      if (!s) sampler_node->fail(error);
      t.sampler = *s;
    }
    if (auto h = m.optional("headers")) {
      Provider scratch;  // the provider headers' rules: {env: X} / {file: Y}, no reserved names
      read_headers(*h, env, scratch);
      t.headers.assign(scratch.headers.begin(), scratch.headers.end());
    }
    if (auto r = m.optional("resource")) {
      for (const auto& [k, v] : r->entries()) t.resource.emplace_back(k, v.string());
    }
    m.read("timeout", t.timeout, &ConfigNode::duration);
    m.read("schedule_delay", t.schedule_delay, &ConfigNode::duration);
    m.read("max_queue_size", t.max_queue_size, integer_in<std::size_t>(1, 1'000'000));
    m.read("max_export_batch_size", t.max_export_batch_size, integer_in<std::size_t>(1, 1'000'000));
    if (auto tls = m.optional("tls")) t.tls = read_tls(*tls);
  });
  if (t.service_name.empty()) node->fail("service_name must not be empty");
  check_limits(t, [&](const std::string& msg) { node->fail(msg); });
  return t;
}

}  // namespace llmgate::config
