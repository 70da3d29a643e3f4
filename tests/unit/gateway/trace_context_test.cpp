// W3C Trace Context parsing, ids, samplers; the OTLP/JSON encoding and the
// bounded span buffer.
#include "gateway/observe/trace_context.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "gateway/observe/otlp.h"

namespace llmgate::gateway {
namespace {

using json = nlohmann::json;

constexpr const char* kExample = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

TEST(Traceparent, ParsesTheSpecExampleAndFormatsItBack) {
  auto c = parse_traceparent(kExample);
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(c->trace.hex(), "4bf92f3577b34da6a3ce929d0e0e4736");
  EXPECT_EQ(c->span.hex(), "00f067aa0ba902b7");
  EXPECT_TRUE(c->sampled());
  EXPECT_EQ(format_traceparent(*c), kExample);
  EXPECT_EQ(parse_traceparent(std::string(" \t") + kExample + " "), c) << "OWS is allowed";
  auto unsampled = parse_traceparent("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00");
  ASSERT_TRUE(unsampled.has_value());
  EXPECT_FALSE(unsampled->sampled());
}

TEST(Traceparent, RefusesWhatTheSpecRefuses) {
  for (const char* bad : {
           "",
           "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",      // no flags
           "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-",  // v00 is exactly 55
           "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",   // uppercase
           "00-00000000000000000000000000000000-00f067aa0ba902b7-01",   // zero trace id
           "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",   // zero parent id
           "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",   // version ff
           "00_4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",   // separator
           "00-4bf92f3577b34da6a3ce929d0e0e473g-00f067aa0ba902b7-01",   // not hex
           "0-4bf92f3577b34da6a3ce929d0e0e47360-00f067aa0ba902b7-01",
       }) {
    EXPECT_FALSE(parse_traceparent(bad).has_value()) << bad;
  }
}

TEST(Traceparent, ReadsALaterVersionAsVersion00WhereTheyAgree) {
  auto c = parse_traceparent("01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-what-ever");
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(format_traceparent(*c), kExample);
  EXPECT_FALSE(
      parse_traceparent("01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01x").has_value());
}

TEST(Tracestate, KeepsWellFormedListsAndDropsTheRest) {
  EXPECT_EQ(clean_tracestate("rojo=00f067aa0ba902b7, congo=t61rcWkgMzE"),
            "rojo=00f067aa0ba902b7,congo=t61rcWkgMzE");
  EXPECT_EQ(clean_tracestate("tenant@vendor=x,,  a-b_c*/d=1 "), "tenant@vendor=x,a-b_c*/d=1");
  EXPECT_EQ(clean_tracestate(""), "");
  EXPECT_EQ(clean_tracestate("Upper=1"), "");    // keys are lowercase
  EXPECT_EQ(clean_tracestate("novalue"), "");    // no '='
  EXPECT_EQ(clean_tracestate("a=b=c"), "");      // '=' in the value
  EXPECT_EQ(clean_tracestate("a=\x01"), "");     // not printable
  EXPECT_EQ(clean_tracestate("@vendor=x"), "");  // empty tenant
  std::string many;
  for (int i = 0; i < 33; ++i) many += "k" + std::to_string(i) + "=v,";
  EXPECT_EQ(clean_tracestate(many), "") << "more than 32 members";
  EXPECT_EQ(clean_tracestate("a=" + std::string(300, 'x')), "") << "a value over 256";
}

TEST(IdGenerator, MakesValidIdsFromItsSeed) {
  IdGenerator a(7), b(7);
  const TraceId t = a.trace_id();
  EXPECT_TRUE(t.valid());
  EXPECT_EQ(t, b.trace_id());
  EXPECT_NE(a.span_id(), a.span_id());
  EXPECT_EQ(t.hex().size(), 32u);
}

TEST(Sampler, ParsesTheOtelNames) {
  std::string error;
  auto s = config::parse_trace_sampler("parentbased_traceidratio", "0.25", &error);
  ASSERT_TRUE(s) << error;
  EXPECT_TRUE(s->parent_based);
  EXPECT_EQ(s->root, config::TraceSampler::Root::kRatio);
  EXPECT_DOUBLE_EQ(s->ratio, 0.25);
  EXPECT_EQ(config::to_string(*s), "parentbased_traceidratio 0.25");
  EXPECT_EQ(config::to_string(*config::parse_trace_sampler("always_off", "", &error)),
            "always_off");
  EXPECT_FALSE(config::parse_trace_sampler("traceidratio", "2", &error));
  EXPECT_NE(error.find("0 to 1"), std::string::npos);
  EXPECT_FALSE(config::parse_trace_sampler("jaeger_remote", "", &error));
  EXPECT_NE(error.find("unknown sampler"), std::string::npos);
}

TEST(Sampler, AParentDecidesUnderParentBasedAndTheRatioSplitsTraceIds) {
  const auto sampler = [](const char* name, const char* arg = "") {
    return *config::parse_trace_sampler(name, arg, nullptr);
  };
  SpanContext parent = *parse_traceparent(kExample);
  EXPECT_TRUE(sample_trace(sampler("parentbased_always_off"), &parent, parent.trace));
  EXPECT_FALSE(sample_trace(sampler("parentbased_always_off"), nullptr, parent.trace));
  parent.flags = 0;
  EXPECT_FALSE(sample_trace(sampler("parentbased_always_on"), &parent, parent.trace));
  EXPECT_TRUE(sample_trace(sampler("always_on"), &parent, parent.trace)) << "not parent-based";

  const auto quarter = sampler("traceidratio", "0.25");
  IdGenerator ids(42);
  int kept = 0;
  for (int i = 0; i < 4000; ++i) kept += sample_trace(quarter, nullptr, ids.trace_id());
  EXPECT_GT(kept, 800);
  EXPECT_LT(kept, 1200);
  // The decision is the trace id's own: every service of a trace agrees.
  TraceId low;
  low.bytes[15] = 1;
  EXPECT_TRUE(sample_trace(quarter, nullptr, low));
  TraceId high;
  high.bytes.fill(0xff);
  EXPECT_FALSE(sample_trace(quarter, nullptr, high));
}

TEST(Otlp, EncodesSpansAsOtlpJson) {
  SpanData s;
  s.trace = parse_traceparent(kExample)->trace;
  s.span.bytes[7] = 2;
  s.parent = parse_traceparent(kExample)->span;
  s.trace_state = "rojo=1";
  s.name = "chat gpt-4o";
  s.kind = SpanKind::kServer;
  s.start_unix_ns = 1'700'000'000'000'000'000;
  s.end_unix_ns = s.start_unix_ns + 5;
  s.error = true;
  s.status_message = "upstream_status";
  s.set("gen_ai.request.model", std::string("gpt-4o"));
  s.set("gen_ai.usage.input_tokens", std::int64_t{12});
  s.set("llmgate.ttft_seconds", 0.25);
  s.set("llmgate.hedged", true);
  s.set("gen_ai.response.finish_reasons", std::vector<std::string>{"stop"});
  s.set("bad.utf8", std::string("\xff\xfe"));
  TraceResource r;
  r.attributes.push_back({"service.name", std::string("llmgate")});
  const json j = json::parse(encode_otlp_json(r, "0.1.0", std::span<const SpanData>(&s, 1)));
  const json& rs = j["resourceSpans"][0];
  EXPECT_EQ(rs["resource"]["attributes"][0]["key"], "service.name");
  EXPECT_EQ(rs["resource"]["attributes"][0]["value"]["stringValue"], "llmgate");
  EXPECT_EQ(rs["scopeSpans"][0]["scope"]["name"], "llmgate");
  const json& span = rs["scopeSpans"][0]["spans"][0];
  EXPECT_EQ(span["traceId"], "4bf92f3577b34da6a3ce929d0e0e4736");
  EXPECT_EQ(span["spanId"], "0000000000000002");
  EXPECT_EQ(span["parentSpanId"], "00f067aa0ba902b7");
  EXPECT_EQ(span["traceState"], "rojo=1");
  EXPECT_EQ(span["kind"], 2);
  EXPECT_EQ(span["startTimeUnixNano"], "1700000000000000000");  // 64-bit: a string
  EXPECT_EQ(span["endTimeUnixNano"], "1700000000000000005");
  EXPECT_EQ(span["status"]["code"], 2);
  EXPECT_EQ(span["status"]["message"], "upstream_status");
  const json& a = span["attributes"];
  EXPECT_EQ(a[0]["value"]["stringValue"], "gpt-4o");
  EXPECT_EQ(a[1]["value"]["intValue"], "12");
  EXPECT_EQ(a[2]["value"]["doubleValue"], 0.25);
  EXPECT_EQ(a[3]["value"]["boolValue"], true);
  EXPECT_EQ(a[4]["value"]["arrayValue"]["values"][0]["stringValue"], "stop");
  EXPECT_TRUE(a[5]["value"]["stringValue"].is_string()) << "invalid UTF-8 replaced, not thrown";
  // A root span has no parent, and no status when it did not fail.
  SpanData root;
  root.trace = s.trace;
  root.span = s.span;
  const json k = json::parse(encode_otlp_json(r, "0.1.0", std::span<const SpanData>(&root, 1)));
  const json& rspan = k["resourceSpans"][0]["scopeSpans"][0]["spans"][0];
  EXPECT_FALSE(rspan.contains("parentSpanId"));
  EXPECT_FALSE(rspan.contains("status"));
}

TEST(SpanBuffer, IsBoundedAndHandsOutTheOldestFirst) {
  SpanBuffer b(3);
  for (int i = 0; i < 5; ++i) {
    SpanData s;
    s.name = std::to_string(i);
    EXPECT_EQ(b.push(std::move(s)), i < 3) << i;
  }
  EXPECT_EQ(b.size(), 3u);
  auto first = b.take(2);
  ASSERT_EQ(first.size(), 2u);
  EXPECT_EQ(first[0].name, "0");
  EXPECT_EQ(first[1].name, "1");
  EXPECT_EQ(b.take(10).size(), 1u);
  EXPECT_TRUE(b.take(10).empty());
}

}  // namespace
}  // namespace llmgate::gateway
