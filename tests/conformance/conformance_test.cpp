// The failure-semantics conformance suite: docs/failure-semantics.md states
// what llmgate guarantees; each row of its tables is a row here, run against
// the real gateway (in-process, loopback) with a scripted upstream playing the
// fault as deployment "bad/m" and a healthy simulated provider as "good/m",
// routed in that order. Every row also checks that nothing leaked: no client
// or upstream connection is left open, nothing is counted in flight.
// The row tables list each row's fields in order and stop at the last one a
// row needs; the rest keep their defaults (no `also` check, and so on).
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <ostream>
#include <regex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "config/ascii.h"
#include "config/config.h"
#include "gateway/access/auth.h"
#include "gateway/server/gateway.h"
#include "tests/support/gateway_harness.h"
#include "tests/support/http_client.h"
#include "tests/support/metrics_text.h"
#include "tests/support/protocol_frames.h"
#include "tests/support/scripted_upstream.h"
#include "tests/support/tls_relay.h"
#include "tools/sim/sim_server.h"

namespace llmgate {
namespace {

using namespace std::chrono_literals;
using json = nlohmann::json;
using testing::eventually;
using testing::HttpClient;
using testing::Script;
using testing::ScriptedUpstream;
using testing::Step;
using K = testing::Step::Kind;
using testing::Blackhole;
using testing::chat_body;
using testing::Harness;
using testing::http_date_in;
using testing::metric_value;
using testing::ProtocolFrames;
using testing::RawClient;
using testing::Target;
using Protocol = config::Protocol;

constexpr std::size_t kMaxEventBytes = 64 * 1024;

// A row's id as a test name: "status-429-retry-after" -> "status_429_retry_after".
// gtest prints a row by its id (not as bytes) in test listings and failures.
struct UpstreamRow;
struct ClientRow;
void PrintTo(const UpstreamRow& row, std::ostream* os);
void PrintTo(const ClientRow& row, std::ostream* os);

const auto row_name = [](const auto& info) {
  std::string n = info.param.id;
  for (auto& c : n) c = (c == '-' || c == '.') ? '_' : c;
  return n;
};

// ---- Upstream faults ----------------------------------------------------------

enum class End {
  kDone,        // a stream that ends with [DONE], no error event
  kErrorEvent,  // a stream that ends with an error event, no [DONE]
  kJson,        // a non-streamed answer: a chat.completion or an error object
};

struct UpstreamRow {
  std::string id;  // as in docs/failure-semantics.md
  Target target = Target::kScript;
  Script script;
  bool stream = true;
  int status = 200;       // what the client gets
  std::string served_by;  // x-llmgate-deployment
  End end = End::kDone;
  std::string error_code;   // error.code of the error event ("" = none)
  std::string bad_outcome;  // llmgate_upstream_attempts_total{deployment="bad/m",outcome=...} == 1
  std::function<void(Harness&)> also;     // further checks
  Protocol protocol = Protocol::kOpenAi;  // what bad/m speaks (set by upstream_rows)
  json error;  // End::kJson: the whole error object the client gets (null: a chat.completion)
};

// A 200 head, what the protocol sends before its first token, then `n` tokens.
std::string head_role_tokens(const ProtocolFrames& f, int n) {
  std::string body = f.opening();
  for (int i = 0; i < n; ++i) body += f.token_event(i);
  return f.head() + testing::chunk(body);
}

// The OpenAI stream the other tables' scripts start with.
std::string head_role_tokens(int n) {
  return head_role_tokens(ProtocolFrames(Protocol::kOpenAi), n);
}

std::string cut(const std::string& s) { return s.substr(0, s.size() / 2); }

// One attempt on bad/m ended as `outcome` (llmgate_upstream_attempts_total).
void expect_bad_attempt(const std::string& metrics, const std::string& outcome) {
  EXPECT_EQ(metric_value(metrics, "llmgate_upstream_attempts_total",
                         "deployment=\"bad/m\",outcome=\"" + outcome + "\""),
            1)
      << "no attempt on bad/m ended as " << outcome;
}

// A model `name` served by bad/m, then good/m, at `operation` only.
std::string bad_then_good(const std::string& name, const std::string& operation) {
  return "  - name: " + name +
         "\n    deployments:\n      - {provider: bad, model: m, operations: [" + operation +
         "]}\n      - {provider: good, model: m, operations: [" + operation + "]}\n";
}

// The rows with bad/m speaking `p`: each fault in that protocol's framing
// (tests/support/protocol_frames.h). Every row runs for every protocol; the
// rows before any response byte (connect, TLS, reset, silence, trickle) send
// the same bytes whatever the protocol, and still run for each, as the
// attempt and its failover are set up per protocol.
std::vector<UpstreamRow> upstream_rows(Protocol p = Protocol::kOpenAi) {
  using testing::chunk;
  const ProtocolFrames f(p);
  auto cooling = [](Harness& h) {
    // The Retry-After benches bad/m: the next request goes straight to good/m.
    HttpClient c(h.port());
    auto r = c.request("POST", "/v1/chat/completions", chat_body(false));
    EXPECT_EQ(r.status, 200);
    EXPECT_EQ(r.header("x-llmgate-attempts"), "1");
    EXPECT_EQ(r.header("x-llmgate-deployment"), "good/m");
    EXPECT_EQ(h.upstream()->stats().requests, 1u);
  };
  // A non-streaming client's row: it has seen nothing of bad/m's attempt,
  // so the whole answer is good/m's.
  auto whole_from_good = [](std::string id, Script script, std::string bad_outcome) {
    return UpstreamRow{std::move(id),
                       Target::kScript,
                       std::move(script),
                       false,
                       200,
                       "good/m",
                       End::kJson,
                       "",
                       std::move(bad_outcome)};
  };
  std::vector<UpstreamRow> rows = {
      {"connect-refused",
       Target::kRefused,
       {},
       true,
       200,
       "good/m",
       End::kDone,
       "",
       "connect_error"},
      {"connect-timeout",
       Target::kBlackhole,
       {},
       true,
       200,
       "good/m",
       End::kDone,
       "",
       "connect_error"},
      {"tls-handshake-failure",
       Target::kTlsToPlain,
       {},
       true,
       200,
       "good/m",
       End::kDone,
       "",
       "connect_error"},
      {"tls-wrong-host",
       Target::kTlsWrongHost,
       {},
       true,
       200,
       "good/m",
       End::kDone,
       "",
       "connect_error"},
      {"reset-before-headers",
       Target::kScript,
       {{K::kReset}},
       true,
       200,
       "good/m",
       End::kDone,
       "",
       "truncated"},
      {"headers-then-silence",
       Target::kScript,
       {{K::kSend, f.head()}, {K::kHold}},
       true,
       200,
       "good/m",
       End::kDone,
       "",
       "ttft_timeout"},
      {"role-chunk-then-silence",
       Target::kScript,
       {{K::kSend, f.head() + chunk(f.no_token_opening())}, {K::kHold}},
       true,
       200,
       "good/m",
       End::kDone,
       "",
       "ttft_timeout"},
      {"stall-after-tokens",
       Target::kScript,
       {{K::kSend, head_role_tokens(f, 3)}, {K::kHold}},
       true,
       200,
       "bad/m",
       End::kErrorEvent,
       "upstream_timeout",
       "idle_timeout"},
      // Events 250 ms apart for longer than the idle timeout (600 ms): the
      // deadline moves with every read, however the relay times it.
      {"events-spaced-under-idle-timeout-for-longer-than-it", Target::kScript,
       [&f] {
         Script s{{K::kSend, head_role_tokens(f, 1)}};
         for (int i = 1; i <= 5; ++i) {
           s.push_back({K::kSleep, "", 250ms});
           s.push_back({K::kSend, chunk(f.token_event(i))});
         }
         s.push_back({K::kSend, chunk(f.finish_and_end(6))});
         s.push_back({K::kHold});
         return s;
       }(),
       true, 200, "bad/m", End::kDone, "", "success"},
      {"stall-after-tokens-non-stream",
       Target::kScript,
       {{K::kSend, head_role_tokens(f, 3)}, {K::kHold}},
       false,
       200,
       "good/m",
       End::kJson,
       "",
       "idle_timeout"},
      {"cut-mid-event",
       Target::kScript,
       {{K::kSend, head_role_tokens(f, 2) + cut(chunk(f.token_event(9)))}, {K::kClose}},
       true,
       200,
       "bad/m",
       End::kErrorEvent,
       "upstream_stream_truncated",
       "truncated"},
      {"cut-mid-event-non-stream",
       Target::kScript,
       {{K::kSend, head_role_tokens(f, 2) + cut(chunk(f.token_event(9)))}, {K::kClose}},
       false,
       200,
       "good/m",
       End::kJson,
       "",
       "truncated"},
      {"cut-before-first-token",
       Target::kScript,
       {{K::kSend, f.head() + cut(chunk(f.first_event()))}, {K::kClose}},
       true,
       200,
       "good/m",
       End::kDone,
       "",
       "truncated"},
      // The body ends cleanly (its last chunk), but the answer never
      // finished. For Gemini, whose clean end is exactly this after a
      // finishReason, only the missing finish tells the cut.
      {"end-without-finish",
       Target::kScript,
       {{K::kSend, head_role_tokens(f, 2) + testing::last_chunk()}, {K::kClose}},
       true,
       200,
       "bad/m",
       End::kErrorEvent,
       "upstream_stream_truncated",
       "truncated"},
      {"malformed-event-before-first-token",
       Target::kScript,
       {{K::kSend, f.head() + chunk(f.malformed_event())}, {K::kHold}},
       true,
       200,
       "good/m",
       End::kDone,
       "",
       "malformed"},
      {"malformed-event-after-first-token",
       Target::kScript,
       {{K::kSend, head_role_tokens(f, 1) + chunk(f.malformed_event())}, {K::kHold}},
       true,
       200,
       "bad/m",
       End::kErrorEvent,
       "upstream_malformed_event",
       "malformed"},
      // The protocol's own in-band error: OpenAI's data: {"error": ...},
      // Anthropic's event: error (overloaded_error), a Gemini error response.
      {"error-event-before-first-token",
       Target::kScript,
       {{K::kSend, f.head() + chunk(f.opening() + f.in_band_error_event())}, {K::kHold}},
       true,
       200,
       "good/m",
       End::kDone,
       "",
       "malformed"},
      {"error-event-after-first-token",
       Target::kScript,
       {{K::kSend, head_role_tokens(f, 1) + chunk(f.in_band_error_event())}, {K::kHold}},
       true,
       200,
       "bad/m",
       End::kErrorEvent,
       "upstream_stream_error",
       "malformed"},
      // Failover III: a non-streaming client has seen nothing of the attempt
      // whatever broke after its first token -- the whole answer comes from
      // the next deployment.
      whole_from_good(
          "error-event-after-first-token-non-stream",
          {{K::kSend, head_role_tokens(f, 1) + chunk(f.in_band_error_event())}, {K::kHold}},
          "malformed"),
      whole_from_good("malformed-event-after-first-token-non-stream",
                      {{K::kSend, head_role_tokens(f, 1) + chunk(f.malformed_event())}, {K::kHold}},
                      "malformed"),
      whole_from_good("end-without-finish-non-stream",
                      {{K::kSend, head_role_tokens(f, 2) + testing::last_chunk()}, {K::kClose}},
                      "truncated"),
      {"event-too-large",
       Target::kScript,
       {{K::kSend, f.head() + chunk(f.text_event(std::string(kMaxEventBytes + 1, 'a')))},
        {K::kHold}},
       true,
       200,
       "good/m",
       End::kDone,
       "",
       "malformed"},
      {"wrong-content-type",
       Target::kScript,
       {{K::kSend, testing::status_response(200, "", f.not_an_answer())}, {K::kClose}},
       true,
       200,
       "good/m",
       End::kDone,
       "",
       "malformed"},
      {"non-sse-body",
       Target::kScript,
       {{K::kSend,
         f.head() + chunk("<html><body>Bad gateway</body></html>\n") + testing::last_chunk()},
        {K::kClose}},
       true,
       200,
       "good/m",
       End::kDone,
       "",
       // SSE: no event ever completes, the body ends (a cut); event-stream:
       // the bytes are no message (a prelude whose CRC does not match).
       f.protocol() == Protocol::kBedrock ? "malformed" : "truncated"},
      {"status-500",
       Target::kScript,
       {{K::kSend, f.status_response(500)}, {K::kClose}},
       true,
       200,
       "good/m",
       End::kDone,
       "",
       "upstream_status"},
      {"status-502",
       Target::kScript,
       {{K::kSend, f.status_response(502)}, {K::kClose}},
       true,
       200,
       "good/m",
       End::kDone,
       "",
       "upstream_status"},
      {"status-503",
       Target::kScript,
       {{K::kSend, f.status_response(503)}, {K::kClose}},
       true,
       200,
       "good/m",
       End::kDone,
       "",
       "upstream_status"},
      {"status-529",
       Target::kScript,
       {{K::kSend, f.status_response(529)}, {K::kClose}},
       true,
       200,
       "good/m",
       End::kDone,
       "",
       "upstream_status"},
      {"status-429-no-retry-after",
       Target::kScript,
       {{K::kSend, f.status_response(429)}, {K::kClose}},
       true,
       200,
       "good/m",
       End::kDone,
       "",
       "upstream_status",
       [](Harness& h) {
         // No Retry-After: no cooldown; bad/m is tried again first.
         HttpClient c(h.port());
         auto r = c.request("POST", "/v1/chat/completions", chat_body(false));
         EXPECT_EQ(r.status, 200);
         EXPECT_EQ(r.header("x-llmgate-attempts"), "2");
         EXPECT_EQ(h.upstream()->stats().requests, 2u);
       }},
      {"status-429-retry-after-seconds",
       Target::kScript,
       {{K::kSend, f.status_response(429, "retry-after: 30\r\n")}, {K::kClose}},
       true,
       200,
       "good/m",
       End::kDone,
       "",
       "upstream_status",
       cooling},
      {"status-429-retry-after-date",
       Target::kScript,
       // An hour ahead: the rows are built when the binary starts, and the
       // last instantiation's row runs minutes later (more under TSan).
       {{K::kSend, f.status_response(429, "retry-after: " + http_date_in(1h) + "\r\n")},
        {K::kClose}},
       true,
       200,
       "good/m",
       End::kDone,
       "",
       "upstream_status",
       cooling},
      // The protocol's own error body; the client gets it in OpenAI's shape.
      {"status-400-not-retried",
       Target::kScript,
       {{K::kSend, f.client_error_response("bad")}, {K::kClose}},
       true,
       400,
       "bad/m",
       End::kJson,
       "",
       "client_error",
       [](Harness& h) { EXPECT_EQ(h.good().stats().requests, 0u) << "a 400 must not be retried"; },
       p,
       f.client_error_as_openai("bad")},
      {"trickle-before-first-token",
       Target::kScript,
       {{K::kTrickle, f.head(), 100ms}, {K::kHold}},
       true,
       200,
       "good/m",
       End::kDone,
       "",
       "ttft_timeout"},
      {"trickle-after-first-token",
       Target::kScript,
       {{K::kSend, head_role_tokens(f, 1)},
        {K::kTrickle, chunk(f.incomplete_bytes(200)), 100ms},
        {K::kHold}},
       true,
       200,
       "bad/m",
       End::kErrorEvent,
       "upstream_timeout",
       "total_timeout"},
      // The whole answer with its end marker ([DONE], message_stop), then
      // the body is never ended. Gemini's marker is the body's end itself:
      // its equivalent is the last response (finishReason), then the same
      // silence, which completes the answer at the idle timeout instead of
      // at once (gateway/proxy/relay.cpp, Relay::on_read_error).
      {"never-closes-after-done",
       Target::kScript,
       {{K::kSend, head_role_tokens(f, 2) + chunk(f.finish_and_end(2))}, {K::kHold}},
       true,
       200,
       "bad/m",
       End::kDone,
       "",
       "success",
       [](Harness& h) {
         // The connection is not pooled half-read: the gateway closes it.
         EXPECT_TRUE(eventually([&] { return h.upstream()->stats().peer_closed == 1; }));
       }},
  };
  for (auto& row : rows) row.protocol = p;
  return rows;
}

void PrintTo(const UpstreamRow& row, std::ostream* os) {
  *os << row.id << " (" << config::to_string(row.protocol) << ")";
}

class UpstreamFault : public ::testing::TestWithParam<UpstreamRow> {};

TEST_P(UpstreamFault, BehavesAsDocumented) {
  const UpstreamRow& row = GetParam();
  const ProtocolFrames f(row.protocol);
  Harness h(row.target, row.script, "", "", "", f.provider_keys());
  {
    HttpClient c(h.port());
    testing::HttpResponse head;
    std::vector<std::string> events;
    if (row.stream && row.status == 200) {
      head = c.start("POST", "/v1/chat/completions", chat_body(true));
      events = c.rest_of_events();
    } else {
      head = c.request("POST", "/v1/chat/completions", chat_body(row.stream));
    }
    ASSERT_EQ(head.status, row.status) << head.body;
    EXPECT_EQ(head.header("x-llmgate-deployment"), row.served_by);
    switch (row.end) {
      case End::kDone:
        ASSERT_FALSE(events.empty());
        EXPECT_EQ(events.back(), "[DONE]");
        for (const auto& e : events) EXPECT_EQ(e.find("\"error\""), std::string::npos) << e;
        break;
      case End::kErrorEvent: {
        ASSERT_FALSE(events.empty());
        EXPECT_NE(events.back(), "[DONE]");
        for (const auto& e : events) EXPECT_NE(e, "[DONE]");
        auto j = json::parse(events.back());
        EXPECT_EQ(j["error"]["code"], row.error_code) << events.back();
        break;
      }
      case End::kJson: {
        auto j = json::parse(head.body);
        if (row.error.is_null()) {
          EXPECT_EQ(j["object"], "chat.completion") << head.body;
        } else {
          EXPECT_EQ(j["error"], row.error) << head.body;
        }
        break;
      }
    }
    // What bad/m streamed reached a streaming client as OpenAI chunks
    // (translated, for the other protocols): its tokens, in order, before
    // the end. Tokens come only from bad/m's script ("tok<i> ").
    if (row.served_by == "bad/m" && row.end != End::kJson) {
      std::string text;
      for (const auto& e : events) {
        auto j = json::parse(e, nullptr, false);
        if (j.is_object() && j.contains("choices") && !j["choices"].empty())
          text += j["choices"][0]["delta"].value("content", "");
      }
      EXPECT_EQ(text.rfind("tok0 ", 0), 0u) << "bad/m's first token did not reach the client";
    } else if (row.served_by == "good/m") {
      // Nothing of the failed attempt reached the client.
      for (const auto& e : events) EXPECT_EQ(e.find("tok0 "), std::string::npos) << e;
      EXPECT_EQ(head.body.find("tok0 "), std::string::npos) << head.body;
    }
  }
  if (row.target == Target::kScript && h.upstream()->stats().requests > 0) {
    // The fault was played to a request in bad/m's protocol.
    EXPECT_EQ(h.upstream()->last_request().rfind(f.request_line(), 0), 0u)
        << h.upstream()->last_request().substr(0, 120);
  }
  // (An attempt is counted when its exchange ends, which may be after the
  // client's last byte: the rest of an upstream's answer is drained for a
  // while, until the client is found gone -- within two watch ticks,
  // RequestWatches::kTick.)
  EXPECT_TRUE(eventually([&] {
    return metric_value(h.metrics(), "llmgate_upstream_attempts_total",
                        "deployment=\"bad/m\",outcome=\"" + row.bad_outcome + "\"") >= 1;
  }));
  auto m = h.metrics();
  expect_bad_attempt(m, row.bad_outcome);
  if (row.served_by == "good/m") {
    EXPECT_EQ(metric_value(m, "llmgate_fallbacks_total", "reason=\"" + row.bad_outcome + "\""), 1);
  }
  if (row.also) row.also(h);
  h.expect_quiescent();
}

// Each row against each upstream protocol, named by it
// (Anthropic/UpstreamFault.BehavesAsDocumented/cut_mid_event).
INSTANTIATE_TEST_SUITE_P(Openai, UpstreamFault,
                         ::testing::ValuesIn(upstream_rows(Protocol::kOpenAi)), row_name);
INSTANTIATE_TEST_SUITE_P(Anthropic, UpstreamFault,
                         ::testing::ValuesIn(upstream_rows(Protocol::kAnthropic)), row_name);
INSTANTIATE_TEST_SUITE_P(Gemini, UpstreamFault,
                         ::testing::ValuesIn(upstream_rows(Protocol::kGemini)), row_name);
INSTANTIATE_TEST_SUITE_P(Bedrock, UpstreamFault,
                         ::testing::ValuesIn(upstream_rows(Protocol::kBedrock)), row_name);

// ---- The Responses API stream ----------------------------------------------------
//
// docs/failure-semantics.md, "The Responses API, embeddings and legacy
// completions": typed events held until the first output delta, failover
// before it, an error event and never response.completed after it, and a
// continued conversation pinned to the provider that stored it. bad/m plays
// OpenAI's Responses stream (event: <type>\ndata: <json>).

// One typed event of a Responses stream.
std::string response_event(const std::string& type, json fields, int sequence) {
  fields["type"] = type;
  fields["sequence_number"] = sequence;
  return "event: " + type + "\ndata: " + fields.dump() + "\n\n";
}

json bad_response(const std::string& status) {
  return {{"id", "resp_bad"},
          {"object", "response"},
          {"status", status},
          {"model", "m"},
          {"output", json::array()}};
}

std::string responses_head() {
  return "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n";
}

// created, in_progress and the message item's start: no output yet.
std::string responses_opening() {
  return response_event("response.created", {{"response", bad_response("in_progress")}}, 0) +
         response_event("response.in_progress", {{"response", bad_response("in_progress")}}, 1) +
         response_event("response.output_item.added",
                        {{"output_index", 0},
                         {"item",
                          {{"id", "msg_bad"},
                           {"type", "message"},
                           {"role", "assistant"},
                           {"status", "in_progress"},
                           {"content", json::array()}}}},
                        2);
}

std::string responses_delta(int i) {
  return response_event("response.output_text.delta",
                        {{"item_id", "msg_bad"},
                         {"output_index", 0},
                         {"content_index", 0},
                         {"delta", "tok" + std::to_string(i) + " "}},
                        3 + i);
}

std::string responses_error_event() {
  return response_event("error",
                        {{"code", "server_error"}, {"message", "boom"}, {"param", nullptr}}, 9);
}

std::string responses_completed() {
  json r = bad_response("completed");
  r["usage"] = {{"input_tokens", 3}, {"output_tokens", 2}, {"total_tokens", 5}};
  return response_event("response.completed", {{"response", r}}, 10);
}

struct ResponsesRow {
  std::string id;
  Script script;
  std::string served_by;   // x-llmgate-deployment
  bool completed = true;   // ends with response.completed; else with an error event
  std::string error_code;  // the error event's code
  std::string bad_outcome;
  bool stream = true;  // false: a non-streaming client (the whole response object)
};

void PrintTo(const ResponsesRow& row, std::ostream* os) { *os << row.id; }

std::vector<ResponsesRow> responses_rows() {
  using testing::chunk;
  const std::string h = responses_head();
  const std::string one = responses_opening() + responses_delta(0);
  const Script cut_after = {{K::kSend, h + chunk(one) + cut(chunk(responses_delta(1)))},
                            {K::kClose}};
  // The error comes after the delta has gone to the client (in the same
  // read, nothing would have been sent yet: the failover stays open).
  const Script error_after = {{K::kSend, h + chunk(one)},
                              {K::kSleep, "", 50ms},
                              {K::kSend, chunk(responses_error_event())},
                              {K::kHold}};
  return {
      {"responses-complete",
       {{K::kSend,
         h + chunk(one + responses_delta(1) + responses_completed()) + testing::last_chunk()},
        {K::kClose}},
       "bad/m",
       true,
       "",
       "success"},
      {"responses-error-event-before-first-delta",
       {{K::kSend, h + chunk(responses_opening() + responses_error_event())}, {K::kHold}},
       "good/m",
       true,
       "",
       "malformed"},
      {"responses-failed-before-first-delta",
       {{K::kSend,
         h + chunk(responses_opening() +
                   response_event("response.failed", {{"response", bad_response("failed")}}, 3))},
        {K::kHold}},
       "good/m",
       true,
       "",
       "malformed"},
      {"responses-stall-before-first-delta",
       {{K::kSend, h + chunk(responses_opening())}, {K::kHold}},
       "good/m",
       true,
       "",
       "ttft_timeout"},
      {"responses-cut-after-first-delta", cut_after, "bad/m", false, "upstream_stream_truncated",
       "truncated"},
      {"responses-error-event-after-first-delta", error_after, "bad/m", false,
       "upstream_stream_error", "malformed"},
      // Failover III: a non-streaming client gets the whole response from
      // the next deployment, whatever broke after the first delta.
      {"responses-cut-after-first-delta-non-stream", cut_after, "good/m", true, "", "truncated",
       false},
      {"responses-error-event-after-first-delta-non-stream", error_after, "good/m", true, "",
       "malformed", false},
      {"responses-stall-after-first-delta-non-stream",
       {{K::kSend, h + chunk(one)}, {K::kHold}},
       "good/m",
       true,
       "",
       "idle_timeout",
       false},
  };
}

const std::string kResponsesModel = bad_then_good("resp", "responses");

class ResponsesFault : public ::testing::TestWithParam<ResponsesRow> {};

TEST_P(ResponsesFault, BehavesAsDocumented) {
  const ResponsesRow& row = GetParam();
  Harness h(Target::kScript, row.script, "", "", kResponsesModel);
  if (!row.stream) {
    HttpClient c(h.port());
    auto r = c.request("POST", "/v1/responses", R"({"model":"resp","input":"hi"})");
    ASSERT_EQ(r.status, 200) << r.body;
    EXPECT_EQ(r.header("x-llmgate-deployment"), row.served_by);
    auto j = json::parse(r.body, nullptr, false);
    ASSERT_TRUE(j.is_object()) << r.body;
    EXPECT_EQ(j["object"], "response") << r.body;
    EXPECT_EQ(j["status"], "completed") << r.body;
    EXPECT_EQ(r.body.find("tok0 "), std::string::npos) << r.body;  // nothing of bad/m's
  } else {
    HttpClient c(h.port());
    auto head = c.start("POST", "/v1/responses", R"({"model":"resp","input":"hi","stream":true})");
    ASSERT_EQ(head.status, 200) << head.body;
    EXPECT_EQ(head.header("x-llmgate-deployment"), row.served_by);
    std::vector<std::string> types;
    std::string text;
    json last;
    std::int64_t sequence = -1;  // every event's number follows the last one's
    for (const auto& e : c.rest_of_events()) {
      auto j = json::parse(e, nullptr, false);
      ASSERT_TRUE(j.is_object()) << e;  // never [DONE], never a chat chunk
      types.push_back(j.value("type", "?"));
      if (types.back() == "response.output_text.delta") text += j["delta"].get<std::string>();
      ASSERT_TRUE(j.contains("sequence_number") && j["sequence_number"].is_number_integer()) << e;
      EXPECT_GT(j["sequence_number"].get<std::int64_t>(), sequence) << e;
      sequence = j["sequence_number"].get<std::int64_t>();
      last = j;
    }
    ASSERT_FALSE(types.empty());
    // One response.created: the answering deployment's (a failed attempt's
    // held events never reached the client).
    EXPECT_EQ(std::count(types.begin(), types.end(), "response.created"), 1);
    EXPECT_EQ(types.front(), "response.created");
    if (row.served_by == "good/m") {
      EXPECT_EQ(text.find("tok0 "), std::string::npos) << text;
    } else {
      EXPECT_EQ(text.rfind("tok0 ", 0), 0u) << text;
    }
    if (row.completed) {
      EXPECT_EQ(types.back(), "response.completed");
    } else {
      EXPECT_EQ(types.back(), "error");
      EXPECT_EQ(last["code"], row.error_code) << last;
      EXPECT_EQ(std::count(types.begin(), types.end(), "response.completed"), 0);
    }
  }
  auto m = h.metrics();
  expect_bad_attempt(m, row.bad_outcome);
  EXPECT_EQ(metric_value(m, "llmgate_requests_total",
                         "gen_ai_operation_name=\"responses\",model=\"resp\",outcome=\"success\""),
            row.completed ? 1 : 0);
  h.expect_quiescent();
}

INSTANTIATE_TEST_SUITE_P(Responses, ResponsesFault, ::testing::ValuesIn(responses_rows()),
                         row_name);

// A stored response's events again (GET /v1/responses/{id}?stream=true),
// forwarded from the provider that created it as they come: a cut or a
// stall there ends the client's stream with an error event (numbered after
// the last one forwarded), never a clean end, and nothing is held back.
struct StoredStreamRow {
  std::string id;
  Script replay;     // bad/m's answer to the GET
  bool completed;    // ends with response.completed; else with an error event
  std::string says;  // in the error event's message
};

void PrintTo(const StoredStreamRow& row, std::ostream* os) { *os << row.id; }

std::vector<StoredStreamRow> stored_stream_rows() {
  using testing::chunk;
  const std::string h = responses_head();
  const std::string one = responses_opening() + responses_delta(0);
  return {
      {"stored-stream-complete",
       {{K::kSend, h + chunk(one + responses_completed()) + testing::last_chunk()}, {K::kClose}},
       true,
       ""},
      {"stored-stream-cut",
       {{K::kSend, h + chunk(one) + cut(chunk(responses_delta(1)))}, {K::kClose}},
       false,
       "ended early"},
      {"stored-stream-reset",
       {{K::kSend, h + chunk(one)}, {K::kSleep, "", 50ms}, {K::kReset}},
       false,
       "ended early"},
      // The idle deadline (600 ms here) between two reads.
      {"stored-stream-stall", {{K::kSend, h + chunk(one)}, {K::kHold}}, false, "timeout"},
      // Half an event, then a clean end of the body: the half is not passed on.
      {"stored-stream-ends-inside-an-event",
       {{K::kSend, h + chunk(one) + chunk(cut(responses_delta(1))) + testing::last_chunk()},
        {K::kClose}},
       false,
       "inside an event"},
  };
}

class StoredStreamFault : public ::testing::TestWithParam<StoredStreamRow> {};

TEST_P(StoredStreamFault, EndsAsTheUpstreamDid) {
  const StoredStreamRow& row = GetParam();
  using testing::chunk;
  // The first request creates resp_bad at bad/m; the second reads it again.
  Script script = {
      {K::kSend, responses_head() +
                     chunk(responses_opening() + responses_delta(0) + responses_completed()) +
                     testing::last_chunk()},
      {K::kClose},
      {K::kNext}};
  script.insert(script.end(), row.replay.begin(), row.replay.end());
  Harness h(Target::kScript, script, "", "", kResponsesModel);
  auto c = std::make_unique<HttpClient>(h.port());
  auto created = c->request("POST", "/v1/responses", R"({"model":"resp","input":"hi"})");
  ASSERT_EQ(created.status, 200) << created.body;
  ASSERT_EQ(created.header("x-llmgate-deployment"), "bad/m");
  auto head = c->start("GET", "/v1/responses/resp_bad?stream=true", "");
  ASSERT_EQ(head.status, 200) << head.body;
  EXPECT_NE(h.upstream()->last_request().find("GET /v1/responses/resp_bad?stream=true"),
            std::string::npos)
      << h.upstream()->last_request();
  std::vector<std::string> types;
  json last;
  std::int64_t sequence = -1;
  for (const auto& e : c->rest_of_events()) {
    auto j = json::parse(e, nullptr, false);
    ASSERT_TRUE(j.is_object()) << e;  // whole events only
    types.push_back(j.value("type", "?"));
    ASSERT_TRUE(j.contains("sequence_number")) << e;
    EXPECT_GT(j["sequence_number"].get<std::int64_t>(), sequence) << e;
    sequence = j["sequence_number"].get<std::int64_t>();
    last = j;
  }
  ASSERT_GE(types.size(), 4u);
  EXPECT_EQ(types.front(), "response.created");
  EXPECT_EQ(types[3], "response.output_text.delta");  // forwarded before the break
  if (row.completed) {
    EXPECT_EQ(types.back(), "response.completed");
  } else {
    EXPECT_EQ(types.back(), "error") << last;
    EXPECT_NE(last["message"].get<std::string>().find(row.says), std::string::npos) << last;
    EXPECT_EQ(std::count(types.begin(), types.end(), "response.completed"), 0);
  }
  c.reset();  // (a completed stream keeps its connection)
  h.expect_quiescent();
}

INSTANTIATE_TEST_SUITE_P(Responses, StoredStreamFault, ::testing::ValuesIn(stored_stream_rows()),
                         row_name);

// ---- Legacy completions -------------------------------------------------------
//
// Chat's failure semantics with `choices[].text` as the output: a non-streaming
// client gets the next deployment's whole answer whatever broke after the
// first token; a streaming one gets an error event, never [DONE].

std::string completion_event(int i) {
  return "data: " +
         json{{"id", "cmpl-bad"},
              {"object", "text_completion"},
              {"created", 1},
              {"model", "m"},
              {"choices", json::array({{{"text", "tok" + std::to_string(i) + " "},
                                        {"index", 0},
                                        {"logprobs", nullptr},
                                        {"finish_reason", nullptr}}})}}
             .dump() +
         "\n\n";
}

struct CompletionsRow {
  std::string id;
  Script script;
  bool stream = false;
  std::string served_by;
  std::string bad_outcome;
  std::string error_code;  // a stream's error event
};

void PrintTo(const CompletionsRow& row, std::ostream* os) { *os << row.id; }

std::vector<CompletionsRow> completions_rows() {
  using testing::chunk;
  const std::string h = responses_head();  // the same 200 event-stream head
  const std::string two = completion_event(0) + completion_event(1);
  const std::string error =
      "data: {\"error\":{\"message\":\"boom\",\"type\":\"server_error\"}}\n\n";
  return {
      {"completions-cut-after-first-token",
       {{K::kSend, h + chunk(two) + cut(chunk(completion_event(2)))}, {K::kClose}},
       true,
       "bad/m",
       "truncated",
       "upstream_stream_truncated"},
      {"completions-cut-after-first-token-non-stream",
       {{K::kSend, h + chunk(two) + cut(chunk(completion_event(2)))}, {K::kClose}},
       false,
       "good/m",
       "truncated"},
      {"completions-error-event-after-first-token-non-stream",
       {{K::kSend, h + chunk(two) + chunk(error)}, {K::kHold}},
       false,
       "good/m",
       "malformed"},
      {"completions-stall-after-first-token-non-stream",
       {{K::kSend, h + chunk(two)}, {K::kHold}},
       false,
       "good/m",
       "idle_timeout"},
  };
}

const std::string kCompletionsModel = bad_then_good("legacy", "completions");

class CompletionsFault : public ::testing::TestWithParam<CompletionsRow> {};

TEST_P(CompletionsFault, BehavesAsDocumented) {
  const CompletionsRow& row = GetParam();
  Harness h(Target::kScript, row.script, "", "", kCompletionsModel);
  {
    HttpClient c(h.port());
    if (row.stream) {
      auto head =
          c.start("POST", "/v1/completions", R"({"model":"legacy","prompt":"hi","stream":true})");
      ASSERT_EQ(head.status, 200) << head.body;
      EXPECT_EQ(head.header("x-llmgate-deployment"), row.served_by);
      auto events = c.rest_of_events();
      ASSERT_FALSE(events.empty());
      for (const auto& e : events) EXPECT_NE(e, "[DONE]");
      EXPECT_EQ(json::parse(events.back())["error"]["code"], row.error_code) << events.back();
      EXPECT_EQ(json::parse(events.front())["choices"][0]["text"], "tok0 ") << events.front();
    } else {
      auto r = c.request("POST", "/v1/completions", R"({"model":"legacy","prompt":"hi"})");
      ASSERT_EQ(r.status, 200) << r.body;
      EXPECT_EQ(r.header("x-llmgate-deployment"), row.served_by);
      auto j = json::parse(r.body);
      EXPECT_EQ(j["object"], "text_completion") << r.body;
      EXPECT_EQ(r.body.find("tok0 "), std::string::npos) << r.body;  // nothing of bad/m's
    }
  }
  auto m = h.metrics();
  expect_bad_attempt(m, row.bad_outcome);
  h.expect_quiescent();
}

INSTANTIATE_TEST_SUITE_P(Completions, CompletionsFault, ::testing::ValuesIn(completions_rows()),
                         row_name);

// ---- Continuation ------------------------------------------------------------
//
// docs/failure-semantics.md, "Continuation": model `continued` is bad/m, then
// good/m declaring `continuation: prefix` (the simulator continues as
// DeepSeek does). bad/m breaks after two tokens in its protocol's framing;
// the client's stream goes on with good/m's words under bad/m's id.

struct ContinuationRow {
  std::string id;
  Script script;
  std::string bad_outcome;  // the broken attempt, as counted
  bool stream = true;
  Protocol protocol = Protocol::kOpenAi;
};
void PrintTo(const ContinuationRow& row, std::ostream* os) { *os << row.id; }

const std::string kContinuedModel =
    "  - name: continued\n    deployments: [{provider: bad, model: m}, {provider: good, model: m, "
    "continuation: prefix}]\n";

std::vector<ContinuationRow> continuation_rows(Protocol p = Protocol::kOpenAi) {
  using testing::chunk;
  const ProtocolFrames f(p);
  std::vector<ContinuationRow> rows = {
      {"continued-after-cut",
       {{K::kSend, head_role_tokens(f, 2) + chunk(cut(f.token_event(2)))}, {K::kClose}},
       "truncated"},
      {"continued-after-stall", {{K::kSend, head_role_tokens(f, 2)}, {K::kHold}}, "idle_timeout"},
      {"continued-after-malformed-event",
       {{K::kSend, head_role_tokens(f, 2) + chunk(f.malformed_event())}, {K::kHold}},
       "malformed"},
      {"continued-after-error-event",
       {{K::kSend, head_role_tokens(f, 2) + chunk(f.in_band_error_event())}, {K::kHold}},
       "malformed"},
      {"cut-non-stream-with-continuation",
       {{K::kSend, head_role_tokens(f, 2) + chunk(cut(f.token_event(2)))}, {K::kClose}},
       "truncated",
       false},
      {"stall-non-stream-with-continuation",
       {{K::kSend, head_role_tokens(f, 2)}, {K::kHold}},
       "idle_timeout",
       false},
      {"malformed-event-non-stream-with-continuation",
       {{K::kSend, head_role_tokens(f, 2) + chunk(f.malformed_event())}, {K::kHold}},
       "malformed",
       false},
      {"error-event-non-stream-with-continuation",
       {{K::kSend, head_role_tokens(f, 2) + chunk(f.in_band_error_event())}, {K::kHold}},
       "malformed",
       false},
  };
  for (auto& r : rows) r.protocol = p;
  return rows;
}

class ContinuationFault : public ::testing::TestWithParam<ContinuationRow> {};

TEST_P(ContinuationFault, BehavesAsDocumented) {
  const ContinuationRow& row = GetParam();
  const ProtocolFrames f(row.protocol);
  Harness h(Target::kScript, row.script, "", "", kContinuedModel, f.provider_keys());
  // What good/m says, unbroken: its answer to the same request.
  std::string good_text;
  for (int k = 0; k < 5; ++k) good_text += sim::token_text(static_cast<std::size_t>(k));
  {
    HttpClient c(h.port());
    const std::string body =
        R"({"model":"continued","messages":[{"role":"user","content":"hi"}],"stream":)" +
        std::string(row.stream ? "true" : "false") + "}";
    auto r = c.request("POST", "/v1/chat/completions", body);
    ASSERT_EQ(r.status, 200) << r.body;
    if (!row.stream) {
      // Nothing was sent: the whole answer of good/m, as without continuation.
      EXPECT_EQ(r.header("x-llmgate-deployment"), "good/m");
      auto j = json::parse(r.body);
      EXPECT_EQ(j["choices"][0]["message"]["content"], good_text) << r.body;
    } else {
      EXPECT_EQ(r.header("x-llmgate-deployment"), "bad/m");
      std::string text;
      int done = 0;
      std::set<std::string> ids;
      std::size_t at = 0;
      while ((at = r.body.find("data: ", at)) != std::string::npos) {
        const std::size_t end = r.body.find("\n\n", at);
        const std::string data = r.body.substr(at + 6, end - at - 6);
        at = end;
        if (data == "[DONE]") {
          ++done;
          continue;
        }
        auto j = json::parse(data);
        ASSERT_FALSE(j.contains("error")) << data;
        ids.insert(j["id"].get<std::string>());
        if (!j["choices"].empty()) text += j["choices"][0]["delta"].value("content", "");
      }
      // bad/m's two tokens, then good/m's answer (its prefix is not one of
      // its own words: it says the whole answer after it), one [DONE], one id.
      EXPECT_EQ(text, "tok0 tok1 " + good_text);
      EXPECT_EQ(done, 1);
      EXPECT_EQ(ids.size(), 1u);
      ASSERT_EQ(r.trailers.count("x-llmgate-continued"), 1u);
      EXPECT_EQ(r.trailers.at("x-llmgate-continued"),
                "good/m; broken=bad/m; fault=" + row.bad_outcome + "; after_chunks=2");
      // good/m was asked to continue the text sent, DeepSeek's way.
      const auto last = h.good().last_request();
      ASSERT_TRUE(last);
      const auto asked = json::parse(last->body, nullptr, false);
      ASSERT_TRUE(asked.is_object());
      EXPECT_EQ(asked["messages"].back(),
                (json{{"role", "assistant"}, {"content", "tok0 tok1 "}, {"prefix", true}}));
    }
  }
  auto m = h.metrics();
  expect_bad_attempt(m, row.bad_outcome);
  if (row.stream) {
    EXPECT_TRUE(eventually([&] {
      return metric_value(h.metrics(), "llmgate_stream_continuations_total",
                          "deployment=\"bad/m\",model=\"continued\",result=\"continued\"") == 1;
    }));
  }
  h.expect_quiescent();
}

INSTANTIATE_TEST_SUITE_P(Openai, ContinuationFault,
                         ::testing::ValuesIn(continuation_rows(Protocol::kOpenAi)), row_name);
INSTANTIATE_TEST_SUITE_P(Anthropic, ContinuationFault,
                         ::testing::ValuesIn(continuation_rows(Protocol::kAnthropic)), row_name);
INSTANTIATE_TEST_SUITE_P(Gemini, ContinuationFault,
                         ::testing::ValuesIn(continuation_rows(Protocol::kGemini)), row_name);
INSTANTIATE_TEST_SUITE_P(Bedrock, ContinuationFault,
                         ::testing::ValuesIn(continuation_rows(Protocol::kBedrock)), row_name);

// ---- Anthropic's Messages API in ----------------------------------------------------
//
// docs/failure-semantics.md, "Anthropic's Messages API": POST /v1/messages
// through bad/m speaking each protocol (Anthropic's own events passed
// through; OpenAI's and Gemini's translated), then good/m (OpenAI,
// translated). A failover before the first content delta is invisible;
// after it, Anthropic's `event: error` and never a message_stop.

struct MessagesRow {
  std::string id;
  Script script;
  std::string served_by;    // x-llmgate-deployment
  bool completed = true;    // ends with message_stop; else with an error event
  std::string error_type;   // the error event's error.type
  std::string bad_outcome;  // the attempt on bad/m, as counted
  bool stream = true;       // false: a non-streaming client (one Message)
  Protocol protocol = Protocol::kOpenAi;
};
void PrintTo(const MessagesRow& row, std::ostream* os) { *os << row.id; }

std::vector<MessagesRow> messages_rows(Protocol p = Protocol::kOpenAi) {
  using testing::chunk;
  const ProtocolFrames f(p);
  const int overloaded = p == Protocol::kAnthropic ? 529 : 503;
  const Script cut_after = {{K::kSend, head_role_tokens(f, 2) + chunk(cut(f.token_event(2)))},
                            {K::kClose}};
  std::string whole = f.opening();
  for (int i = 0; i < 2; ++i) whole += f.token_event(i);
  whole += f.finish_and_end(2);
  std::vector<MessagesRow> rows = {
      {"messages-complete",
       {{K::kSend, f.head() + chunk(whole) + testing::last_chunk()}, {K::kClose}},
       "bad/m",
       true,
       "",
       "success"},
      {"messages-overloaded-before-first-token",
       {{K::kSend, f.status_response(overloaded)}, {K::kClose}},
       "good/m",
       true,
       "",
       "upstream_status"},
      {"messages-stall-before-first-token",
       {{K::kSend, f.head() + chunk(f.no_token_opening())}, {K::kHold}},
       "good/m",
       true,
       "",
       "ttft_timeout"},
      {"messages-error-event-before-first-token",
       {{K::kSend, f.head() + chunk(f.no_token_opening() + f.in_band_error_event())}, {K::kHold}},
       "good/m",
       true,
       "",
       "malformed"},
      {"messages-cut-after-first-token", cut_after, "bad/m", false, "api_error", "truncated"},
      {"messages-error-event-after-first-token",
       {{K::kSend, head_role_tokens(f, 2)},
        {K::kSleep, "", 50ms},
        {K::kSend, chunk(f.in_band_error_event())},
        {K::kHold}},
       "bad/m",
       false,
       "api_error",
       "malformed"},
      {"messages-cut-after-first-token-non-stream", cut_after, "good/m", true, "", "truncated",
       false},
  };
  for (auto& r : rows) r.protocol = p;
  return rows;
}

class MessagesFault : public ::testing::TestWithParam<MessagesRow> {};

TEST_P(MessagesFault, BehavesAsDocumented) {
  const MessagesRow& row = GetParam();
  const ProtocolFrames f(row.protocol);
  Harness h(Target::kScript, row.script, "", "", "", f.provider_keys());
  std::string good_text;
  for (int k = 0; k < 5; ++k) good_text += sim::token_text(static_cast<std::size_t>(k));
  {
    HttpClient c(h.port());
    const std::string body = R"({"model":"chat","max_tokens":64,"stream":)" +
                             std::string(row.stream ? "true" : "false") +
                             R"(,"messages":[{"role":"user","content":"hi"}]})";
    auto r = c.request("POST", "/v1/messages", body);
    ASSERT_EQ(r.status, 200) << r.body;
    EXPECT_EQ(r.header("x-llmgate-deployment"), row.served_by);
    if (!row.stream) {
      auto m = json::parse(r.body, nullptr, false);
      ASSERT_TRUE(m.is_object()) << r.body;
      EXPECT_EQ(m["type"], "message");
      EXPECT_EQ(m["content"][0]["text"], good_text) << r.body;
      EXPECT_EQ(m["stop_reason"], "end_turn");
    } else {
      std::vector<std::string> types;
      std::string text;
      json last;
      std::size_t at = 0;
      while ((at = r.body.find("event: ", at)) != std::string::npos) {
        const std::size_t nl = r.body.find('\n', at);
        const std::string name = r.body.substr(at + 7, nl - at - 7);
        const std::size_t data = r.body.find("data: ", nl);
        const std::size_t end = r.body.find("\n\n", data);
        last = json::parse(r.body.substr(data + 6, end - data - 6), nullptr, false);
        ASSERT_TRUE(last.is_object()) << r.body;
        EXPECT_EQ(last["type"], name) << "an event is named by its type";
        at = end;
        if (name == "ping") continue;
        types.push_back(name);
        if (name == "content_block_delta" && last["delta"]["type"] == "text_delta")
          text += last["delta"]["text"];
      }
      ASSERT_FALSE(types.empty()) << r.body;
      // One message_start: the answering attempt's (a failed one's held
      // events never reached the client).
      EXPECT_EQ(types.front(), "message_start");
      EXPECT_EQ(std::count(types.begin(), types.end(), "message_start"), 1);
      EXPECT_EQ(r.body.find("data: [DONE]"), std::string::npos) << "never chat's end";
      if (row.completed) {
        EXPECT_EQ(types.back(), "message_stop");
        EXPECT_EQ(text, row.served_by == "good/m" ? good_text : "tok0 tok1 ");
      } else {
        EXPECT_EQ(types.back(), "error");
        EXPECT_EQ(last["error"]["type"], row.error_type) << last;
        EXPECT_EQ(std::count(types.begin(), types.end(), "message_stop"), 0);
        EXPECT_EQ(text.rfind("tok0 tok1 ", 0), 0u) << text;
      }
    }
  }
  auto m = h.metrics();
  expect_bad_attempt(m, row.bad_outcome);
  EXPECT_EQ(metric_value(m, "llmgate_requests_total",
                         "gen_ai_operation_name=\"chat\",model=\"chat\",outcome=\"success\""),
            row.completed ? 1 : 0);
  h.expect_quiescent();
}

INSTANTIATE_TEST_SUITE_P(Anthropic, MessagesFault,
                         ::testing::ValuesIn(messages_rows(Protocol::kAnthropic)), row_name);
INSTANTIATE_TEST_SUITE_P(Openai, MessagesFault,
                         ::testing::ValuesIn(messages_rows(Protocol::kOpenAi)), row_name);
INSTANTIATE_TEST_SUITE_P(Gemini, MessagesFault,
                         ::testing::ValuesIn(messages_rows(Protocol::kGemini)), row_name);
INSTANTIATE_TEST_SUITE_P(Bedrock, MessagesFault,
                         ::testing::ValuesIn(messages_rows(Protocol::kBedrock)), row_name);

TEST(ResponsesPinning, AContinuedConversationGoesOnlyToTheProviderThatStoredIt) {
  // bad/m fails before its first delta: good/m stores the response. The
  // continuation then skips bad/m, first in order, for good/m.
  Harness h(
      Target::kScript,
      {{K::kSend, responses_head() + testing::chunk(responses_opening() + responses_error_event())},
       {K::kHold}},
      "", "", kResponsesModel);
  HttpClient c(h.port());
  auto first = c.request("POST", "/v1/responses", R"({"model":"resp","input":"hi"})");
  ASSERT_EQ(first.status, 200) << first.body;
  ASSERT_EQ(first.header("x-llmgate-deployment"), "good/m");
  const std::string id = json::parse(first.body)["id"];
  const auto bad_requests = h.upstream()->stats().requests;
  auto next =
      c.request("POST", "/v1/responses",
                R"({"model":"resp","input":"more","previous_response_id":")" + id + R"("})");
  ASSERT_EQ(next.status, 200) << next.body;
  EXPECT_EQ(next.header("x-llmgate-deployment"), "good/m");
  EXPECT_EQ(next.header("x-llmgate-attempts"), "1");
  EXPECT_NE(next.header("x-llmgate-route")
                .find("bad/m=skip(previous_response_id is stored at "
                      "provider good)"),
            std::string::npos)
      << next.header("x-llmgate-route");
  EXPECT_EQ(h.upstream()->stats().requests, bad_requests);
  // And its GET goes there too.
  auto got = c.request("GET", "/v1/responses/" + id);
  EXPECT_EQ(got.status, 200) << got.body;
  EXPECT_EQ(json::parse(got.body)["id"], id);
  EXPECT_EQ(h.upstream()->stats().requests, bad_requests);
  c.close();
  h.expect_quiescent();
}

// ---- Client behaviours ---------------------------------------------------------

struct ClientRow {
  std::string id;   // as in docs/failure-semantics.md
  Script upstream;  // what the bad/m upstream plays
  std::function<void(Harness&)> run;
  std::string limits_extra = "";  // Harness options
  std::string bad_extra = "";
  std::string extra_yaml = "";
  std::string bad_provider_extra = "";
};

// A stream of about 60 tokens that takes ~3 s: long enough to act in the middle.
Script slow_stream() {
  Script s{{K::kSend, head_role_tokens(1)}};
  for (int i = 0; i < 6; ++i) {
    s.push_back({K::kSleep, "", 80ms});
    s.push_back({K::kSend, testing::chunk(testing::token_event(i))});
  }
  s.push_back({K::kHold});
  return s;
}

// The head of a raw response (to its last CRLF), lower-cased: names and
// values compared whatever their case on the wire.
std::string lowercase_head(const std::string& response) {
  const auto end = response.find("\r\n\r\n");
  return config::ascii_lowercase(response.substr(0, end == std::string::npos ? end : end + 2));
}

std::vector<ClientRow> client_rows() {
  return {
      {"client-disconnect-before-first-token",
       {{K::kSend, testing::sse_head()}, {K::kHold}},
       [](Harness& h) {
         {
           HttpClient c(h.port());
           RawClient raw(h.port());
           ASSERT_TRUE(
               raw.send("POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-type: "
                        "application/json\r\ncontent-length: " +
                        std::to_string(chat_body(true).size()) + "\r\n\r\n" + chat_body(true)));
           ASSERT_TRUE(eventually([&] { return h.upstream()->stats().requests == 1; }));
         }  // the client goes
         // The upstream is released because the client went, not at a
         // deadline: the attempt ends as client_gone (a TTFT timeout would
         // have ended it as ttft_timeout and moved on to good/m).
         EXPECT_TRUE(eventually([&] { return h.upstream()->stats().peer_closed == 1; }));
         EXPECT_TRUE(eventually([&] {
           return metric_value(h.metrics(), "llmgate_upstream_attempts_total",
                               "deployment=\"bad/m\",outcome=\"client_gone\"") == 1;
         }));
         EXPECT_EQ(h.good().stats().requests, 0u);
       }},
      {"client-disconnect-after-first-token", slow_stream(),
       [](Harness& h) {
         {
           HttpClient c(h.port());
           auto head = c.start("POST", "/v1/chat/completions", chat_body(true));
           ASSERT_EQ(head.status, 200);
           ASSERT_TRUE(c.next_event().has_value());
           c.close();
         }
         // Released for the disconnect, not at the idle deadline (idle_timeout).
         EXPECT_TRUE(eventually([&] { return h.upstream()->stats().peer_closed == 1; }));
         EXPECT_TRUE(eventually([&] {
           return metric_value(h.metrics(), "llmgate_upstream_attempts_total",
                               "deployment=\"bad/m\",outcome=\"client_gone\"") == 1;
         }));
       }},
      {"slow-reader",
       {{K::kSend, head_role_tokens(1)}, {K::kFlood}},
       [](Harness& h) {
         // The client reads nothing: the gateway must stop reading upstream
         // (backpressure), not buffer the flood, and give up after the idle
         // timeout, releasing both sides.
         RawClient raw(h.port(), /*rcvbuf=*/4096);
         ASSERT_TRUE(
             raw.send("POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-type: "
                      "application/json\r\ncontent-length: " +
                      std::to_string(chat_body(true).size()) + "\r\n\r\n" + chat_body(true)));
         ASSERT_TRUE(eventually([&] { return h.upstream()->stats().flood_bytes > 0; }));
         EXPECT_TRUE(eventually([&] { return h.upstream()->stats().peer_closed == 1; }, 10s))
             << "the stalled relay never timed out";
         // Socket buffers on both sides hold a few MB at most; without
         // backpressure the gateway would have taken the flood at memory speed.
         EXPECT_LT(h.upstream()->stats().flood_bytes, 32u << 20);
         std::printf("slow-reader: the upstream wrote %llu bytes before the gateway gave up\n",
                     static_cast<unsigned long long>(h.upstream()->stats().flood_bytes));
         // The client's connection is closed too (behind what the kernel holds).
         raw.read_all();
         EXPECT_TRUE(raw.eof());
         EXPECT_EQ(metric_value(h.metrics(), "llmgate_upstream_attempts_total",
                                "deployment=\"bad/m\",outcome=\"client_gone\""),
                   1);
       }},
      {"trace-context-propagated", testing::healthy_stream(3),
       [](Harness& h) {
         // Traced (a collector that is not there): the upstream's parent is
         // the attempt's span, in the client's trace.
         HttpClient c(h.port());
         const std::map<std::string, std::string> headers{
             {"content-type", "application/json"},
             {"traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"},
             {"tracestate", "vendor=abc"}};
         EXPECT_EQ(c.request("POST", "/v1/chat/completions", chat_body(false), headers).status,
                   200);
         const std::string up = h.upstream()->last_request();
         const std::string prefix = "traceparent: 00-4bf92f3577b34da6a3ce929d0e0e4736-";
         const auto at = up.find(prefix);
         ASSERT_NE(at, std::string::npos) << up;
         const std::string span = up.substr(at + prefix.size(), 16);
         EXPECT_NE(span, "00f067aa0ba902b7") << "the attempt's own span, not the client's";
         EXPECT_EQ(up.substr(at + prefix.size() + 16, 5), "-01\r\n");
         EXPECT_NE(up.find("tracestate: vendor=abc\r\n"), std::string::npos) << up;
         EXPECT_EQ(up.find("00f067aa0ba902b7"), std::string::npos) << "one traceparent only";
       },
       "", "", "tracing: {endpoint: \"http://127.0.0.1:9\"}\n"},
      {"trace-context-untraced-passes-through", testing::healthy_stream(3),
       [](Harness& h) {
         HttpClient c(h.port());
         const std::map<std::string, std::string> headers{
             {"content-type", "application/json"},
             {"traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}};
         EXPECT_EQ(c.request("POST", "/v1/chat/completions", chat_body(false), headers).status,
                   200);
         EXPECT_NE(h.upstream()->last_request().find(
                       "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"),
                   std::string::npos);
       }},
      {"keep-alive-after-stream", testing::healthy_stream(3),
       [](Harness& h) {
         HttpClient c(h.port());
         for (int i = 0; i < 3; ++i) {
           auto head = c.start("POST", "/v1/chat/completions", chat_body(true));
           ASSERT_EQ(head.status, 200);
           auto ev = c.rest_of_events();
           ASSERT_FALSE(ev.empty());
           EXPECT_EQ(ev.back(), "[DONE]");
           EXPECT_TRUE(c.connection_open());
         }
       }},
      {"http-1.0", testing::healthy_stream(3),
       [](Harness& h) {
         RawClient raw(h.port());
         ASSERT_TRUE(
             raw.send("POST /v1/chat/completions HTTP/1.0\r\ncontent-type: "
                      "application/json\r\ncontent-length: " +
                      std::to_string(chat_body(true).size()) + "\r\n\r\n" + chat_body(true)));
         std::string all = raw.read_all();
         EXPECT_EQ(all.rfind("HTTP/1.0 200", 0), 0u) << all.substr(0, 200);
         // To the end of the connection: no chunked coding, no length.
         const std::string head = lowercase_head(all);
         EXPECT_EQ(head.find("transfer-encoding"), std::string::npos) << head;
         EXPECT_EQ(head.find("content-length"), std::string::npos) << head;
         EXPECT_NE(all.find("data: [DONE]\n\n"), std::string::npos);
       }},
      {"expect-100-continue", testing::healthy_stream(3),
       [](Harness& h) {
         RawClient raw(h.port());
         const std::string body = chat_body(false);
         ASSERT_TRUE(raw.send(
             "POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\nconnection: close\r\ncontent-type: "
             "application/json\r\nexpect: 100-continue\r\ncontent-length: " +
             std::to_string(body.size()) + "\r\n\r\n"));
         // The interim response arrives before we send the body.
         std::string interim = raw.read_some();
         EXPECT_EQ(interim.rfind("HTTP/1.1 100 Continue\r\n", 0), 0u) << interim;
         ASSERT_TRUE(raw.send(body));
         std::string all = raw.read_all();
         EXPECT_NE(all.find("HTTP/1.1 200 OK"), std::string::npos) << all.substr(0, 200);
         EXPECT_NE(all.find("\"chat.completion\""), std::string::npos);
       }},
      {"oversized-headers",
       {},
       [](Harness& h) {
         HttpClient c(h.port());
         auto r = c.request(
             "POST", "/v1/chat/completions", chat_body(false),
             {{"content-type", "application/json"}, {"x-big", std::string(16 * 1024, 'a')}});
         EXPECT_EQ(r.status, 431);
         EXPECT_EQ(json::parse(r.body)["error"]["code"], "headers_too_large");
       }},
      {"oversized-body",
       {},
       [](Harness& h) {
         HttpClient c(h.port());
         auto r = c.request("POST", "/v1/chat/completions",
                            chat_body(false, R"(,"pad":")" + std::string(128 * 1024, 'a') + "\""));
         EXPECT_EQ(r.status, 413);
         EXPECT_EQ(json::parse(r.body)["error"]["code"], "request_too_large");
       }},
      {"invalid-json",
       {},
       [](Harness& h) {
         HttpClient c(h.port());
         auto r = c.request("POST", "/v1/chat/completions", "{\"model\": \"chat\", ");
         EXPECT_EQ(r.status, 400);
         EXPECT_EQ(json::parse(r.body)["error"]["type"], "invalid_request_error");
       }},
      {"invalid-utf8",
       {},
       [](Harness& h) {
         HttpClient c(h.port());
         auto r = c.request(
             "POST", "/v1/chat/completions",
             "{\"model\":\"chat\",\"messages\":[{\"role\":\"user\",\"content\":\"\xff\xfe\"}]}");
         EXPECT_EQ(r.status, 400);
         EXPECT_EQ(json::parse(r.body)["error"]["type"], "invalid_request_error");
       }},
      {"wrong-content-type",
       {},
       [](Harness& h) {
         HttpClient c(h.port());
         auto r = c.request("POST", "/v1/chat/completions", chat_body(false),
                            {{"content-type", "text/plain"}});
         EXPECT_EQ(r.status, 415);
       }},
      {"slowloris",
       {},
       [](Harness& h) {
         // A head sent a byte at a time never completes within
         // client_header_timeout (1 s here): the connection is closed.
         RawClient raw(h.port());
         const std::string head = "POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\n";
         bool closed = false;
         for (std::size_t i = 0; i < head.size() && !closed; ++i) {
           raw.send(head.substr(i, 1));
           closed = eventually([&] { return raw.closed_by_server(); }, 100ms);
         }
         EXPECT_TRUE(closed || eventually([&] { return raw.closed_by_server(); }, 3s));
       }},
      {"many-idle-connections", testing::healthy_stream(3),
       [](Harness& h) {
         rlimit lim{};
         getrlimit(RLIMIT_NOFILE, &lim);
         const rlim_t want = 2 * 2000 + 256;
         if (lim.rlim_cur < want && lim.rlim_max >= want) {
           lim.rlim_cur = want;
           setrlimit(RLIMIT_NOFILE, &lim);
         }
         const std::size_t n = lim.rlim_cur >= want ? 2000 : (lim.rlim_cur - 256) / 2;
         std::vector<std::unique_ptr<RawClient>> idle;
         for (std::size_t i = 0; i < n; ++i) {
           idle.push_back(std::make_unique<RawClient>(h.port()));
           ASSERT_TRUE(idle.back()->connected()) << "connection " << i;
         }
         ASSERT_TRUE(eventually([&] { return h.gateway().open_api_connections() >= n; }))
             << h.gateway().open_api_connections();
         // The gateway still serves...
         HttpClient c(h.port());
         auto head = c.start("POST", "/v1/chat/completions", chat_body(true));
         EXPECT_EQ(head.status, 200);
         auto ev = c.rest_of_events();
         ASSERT_FALSE(ev.empty());
         EXPECT_EQ(ev.back(), "[DONE]");
         // ... and closes the idle ones after client_header_timeout.
         EXPECT_TRUE(eventually([&] { return h.gateway().open_api_connections() <= 1; }, 10s))
             << h.gateway().open_api_connections();
       }},
      // The same in-band error after a token, with no other deployment: the
      // streaming client's error event and the non-streaming client's 502
      // give the same reason.
      {"error-event-after-first-token-same-code-both-ways",
       {{K::kSend, head_role_tokens(1) +
                       testing::chunk(ProtocolFrames(Protocol::kOpenAi).in_band_error_event())},
        {K::kHold}},
       [](Harness& h) {
         HttpClient c(h.port());
         auto whole = c.request("POST", "/v1/chat/completions",
                                R"({"model":"solo","messages":[{"role":"user","content":"hi"}]})");
         EXPECT_EQ(whole.status, 502) << whole.body;
         EXPECT_EQ(json::parse(whole.body)["error"]["code"], "upstream_stream_error") << whole.body;
         HttpClient s(h.port());
         auto head = s.start(
             "POST", "/v1/chat/completions",
             R"({"model":"solo","stream":true,"messages":[{"role":"user","content":"hi"}]})");
         ASSERT_EQ(head.status, 200);
         const auto events = s.rest_of_events();
         ASSERT_FALSE(events.empty());
         EXPECT_EQ(json::parse(events.back())["error"]["code"], "upstream_stream_error")
             << events.back();
       },
       "",
       "",
       "  - name: solo\n    deployments: [{provider: bad, model: m}]\n"},
  };
}

void PrintTo(const ClientRow& row, std::ostream* os) { *os << row.id; }

class ClientBehaviour : public ::testing::TestWithParam<ClientRow> {};

// Client behaviours, limits and gateway keys: a row sets up the gateway and
// drives it itself; then nothing may have leaked.
void run_row(const ClientRow& row) {
  Harness h(Target::kScript, row.upstream.empty() ? testing::healthy_stream(3) : row.upstream,
            row.limits_extra, row.bad_extra, row.extra_yaml, row.bad_provider_extra);
  row.run(h);
  h.expect_quiescent();
}

TEST_P(ClientBehaviour, BehavesAsDocumented) { run_row(GetParam()); }

INSTANTIATE_TEST_SUITE_P(Table, ClientBehaviour, ::testing::ValuesIn(client_rows()), row_name);

// ---- Limits ----------------------------------------------------------------------

// Starts a streaming request that holds bad/m's only slot (its upstream holds
// after the first token) and returns the client, mid-stream.
std::unique_ptr<HttpClient> hold_bad_slot(Harness& h) {
  auto c = std::make_unique<HttpClient>(h.port());
  auto head = c->start("POST", "/v1/chat/completions", chat_body(true));
  EXPECT_EQ(head.status, 200);
  EXPECT_EQ(head.header("x-llmgate-deployment"), "bad/m");
  EXPECT_TRUE(c->next_event().has_value());
  return c;
}

std::vector<ClientRow> limit_rows() {
  const Script holds{{K::kSend, head_role_tokens(1)}, {K::kHold}};
  return {
      {"deployment-at-max-concurrent-falls-over", holds,
       [](Harness& h) {
         auto first = hold_bad_slot(h);
         HttpClient c(h.port());
         auto r = c.request("POST", "/v1/chat/completions", chat_body(false));
         EXPECT_EQ(r.status, 200);
         EXPECT_EQ(r.header("x-llmgate-deployment"), "good/m");
         EXPECT_EQ(r.header("x-llmgate-attempts"), "1");  // bad/m was skipped, not attempted
         EXPECT_NE(r.header("x-llmgate-failed").find("bad/m=saturated"), std::string::npos);
         EXPECT_EQ(h.upstream()->stats().requests, 1u);
         EXPECT_EQ(metric_value(h.metrics(), "llmgate_deployment_saturated_total",
                                "deployment=\"bad/m\",reason=\"queue_full\""),
                   1);
       },
       "", ", max_concurrent: 1"},
      {"deployment-queue-wait-is-bounded", holds,
       [](Harness& h) {
         auto first = hold_bad_slot(h);
         // One place in the queue: the request waits for bad/m's slot up to
         // the connect timeout, then moves on.
         HttpClient c(h.port());
         auto r = c.request("POST", "/v1/chat/completions", chat_body(false));
         EXPECT_EQ(r.status, 200);
         EXPECT_EQ(r.header("x-llmgate-deployment"), "good/m");
         EXPECT_EQ(metric_value(h.metrics(), "llmgate_deployment_saturated_total",
                                "deployment=\"bad/m\",reason=\"queue_timeout\""),
                   1);
       },
       "", ", max_concurrent: 1, max_queue: 1"},
      {"queued-request-takes-the-freed-slot", holds,
       [](Harness& h) {
         auto first = hold_bad_slot(h);
         testing::HttpResponse second;
         std::thread t([&] {
           HttpClient c(h.port());
           second = c.request("POST", "/v1/chat/completions", chat_body(false));
         });
         first.reset();  // the first client goes: its slot passes to the waiter
         t.join();
         EXPECT_EQ(second.header("x-llmgate-failed").find("saturated"), std::string::npos);
         EXPECT_EQ(h.upstream()->stats().requests, 2u) << "the second request did not reach bad/m";
       },
       "", ", max_concurrent: 1, max_queue: 1"},
      {"every-candidate-saturated", holds,
       [](Harness& h) {
         // Model "solo" has only bad/m, whose one slot is taken.
         auto first = hold_bad_slot(h);
         HttpClient c(h.port());
         auto r = c.request("POST", "/v1/chat/completions",
                            R"({"model":"solo","messages":[{"role":"user","content":"hi"}]})");
         EXPECT_EQ(r.status, 503);
         EXPECT_EQ(r.header("retry-after"), "1");
         EXPECT_EQ(json::parse(r.body)["error"]["code"], "upstream_saturated");
       },
       "", ", max_concurrent: 1",
       "  - name: solo\n    deployments: [{provider: bad, model: m, max_concurrent: 1}]\n"},
      {"idle-upstream-connections-closed",
       // A whole answer on a keep-alive connection, which the upstream then
       // leaves open: the gateway pools it, and must close it once it has
       // been idle for pool.idle_timeout, not keep it forever.
       {{K::kSend, head_role_tokens(2) +
                       testing::chunk(testing::finish_event() + testing::done_event()) +
                       testing::last_chunk()},
        {K::kHold}},
       [](Harness& h) {
         HttpClient c(h.port());
         auto r = c.request("POST", "/v1/chat/completions", chat_body(false));
         EXPECT_EQ(r.status, 200);
         EXPECT_EQ(r.header("x-llmgate-deployment"), "bad/m");
         EXPECT_EQ(h.upstream()->stats().open, 1u);  // pooled, kept alive
         EXPECT_TRUE(eventually([&] { return h.upstream()->stats().peer_closed == 1; }, 5s))
             << "the idle pooled connection was never closed";
       },
       "",
       "",
       "",
       ", pool: {idle_timeout: 300ms}"},
      {"max-connections",
       {},
       [](Harness& h) {
         HttpClient a(h.port()), b(h.port());
         ASSERT_EQ(a.request("GET", "/v1/models").status, 200);
         ASSERT_EQ(b.request("GET", "/v1/models").status, 200);
         HttpClient c(h.port());
         auto r = c.request("GET", "/v1/models");
         EXPECT_EQ(r.status, 503);
         EXPECT_EQ(r.header("retry-after"), "1");
         EXPECT_EQ(json::parse(r.body)["error"]["code"], "too_many_connections");
         a.close();
         EXPECT_TRUE(eventually([&] {
           HttpClient d(h.port());
           return d.request("GET", "/v1/models").status == 200;
         }));
       },
       ", max_connections: 2"},
      // A max_concurrent shared through a shared_state that is down, under
      // on_failure: closed (here nothing listens): the deployment is skipped
      // for want of the shared state, and said so -- not "saturated".
      {"max-concurrent-shared-state-unavailable",
       {},
       [](Harness& h) {
         HttpClient c(h.port());
         auto r = c.request("POST", "/v1/chat/completions", chat_body(false));
         EXPECT_EQ(r.status, 200) << r.body;
         EXPECT_EQ(r.header("x-llmgate-deployment"), "good/m");
         EXPECT_EQ(r.header("x-llmgate-failed"), "bad/m=shared_state_unavailable");
         auto solo = c.request("POST", "/v1/chat/completions",
                               R"({"model":"solo","messages":[{"role":"user","content":"hi"}]})");
         EXPECT_EQ(solo.status, 503) << solo.body;
         EXPECT_EQ(json::parse(solo.body)["error"]["code"], "shared_state_unavailable");
         EXPECT_EQ(solo.header("retry-after"), "1");
         EXPECT_EQ(metric_value(h.metrics(), "llmgate_deployment_saturated_total",
                                "deployment=\"bad/m\",reason=\"shared_state_unavailable\""),
                   2);
         EXPECT_EQ(h.upstream()->stats().requests, 0u);
       },
       "",
       ", max_concurrent: 1",
       "  - name: solo\n    deployments: [{provider: bad, model: m, max_concurrent: 1}]\n"
       "shared_state: {url: \"redis://127.0.0.1:1\", on_failure: closed, timeout: 100ms, "
       "connect_timeout: 100ms}\n"},
  };
}

class Limit : public ClientBehaviour {};

TEST_P(Limit, BehavesAsDocumented) { run_row(GetParam()); }

INSTANTIATE_TEST_SUITE_P(Table, Limit, ::testing::ValuesIn(limit_rows()), row_name);

// ---- Gateway keys ----------------------------------------------------------------

std::string auth_yaml(const std::string& key_extra = "", const std::string& models = "[chat]") {
  return "auth:\n  admin_key_sha256: " + gateway::sha256_hex("sk-admin") +
         "\n  keys:\n    - {name: app, sha256: " + gateway::sha256_hex("sk-app") +
         ", models: " + models + key_extra + "}\n";
}

testing::HttpResponse chat_with(Harness& h, const std::string& authorization,
                                const std::string& model = "chat") {
  HttpClient c(h.port());
  std::map<std::string, std::string> headers{{"content-type", "application/json"}};
  if (!authorization.empty()) headers["authorization"] = authorization;
  return c.request("POST", "/v1/chat/completions",
                   R"({"model":")" + model + R"(","messages":[{"role":"user","content":"hi"}]})",
                   headers);
}

// A refusal before any attempt is a request like any other: its outcome in
// llmgate_requests_total is its reason (model "" when none was named), and
// it has its request line (docs/operations.md, "Refusals").
double refused_count(Harness& h, const std::string& model, const std::string& reason) {
  return metric_value(
      h.metrics(), "llmgate_requests_total",
      "gen_ai_operation_name=\"chat\",model=\"" + model + "\",outcome=\"" + reason + "\"");
}
void expect_refusal_line(const std::string& log, const std::string& reason, int status) {
  EXPECT_NE(log.find("result=refused reason=" + reason + " status=" + std::to_string(status)),
            std::string::npos)
      << log;
}

// A chat request refused before any attempt with `status`: its request line
// says `reason`, and it counts as `reason` for `counted_model` ("" when it
// named none by then).
testing::HttpResponse refused_chat(Harness& h, const std::string& authorization,
                                   const std::string& model, const std::string& counted_model,
                                   const std::string& reason, int status) {
  ::testing::internal::CaptureStderr();
  auto r = chat_with(h, authorization, model);
  EXPECT_TRUE(eventually([&] { return refused_count(h, counted_model, reason) == 1; }));
  expect_refusal_line(::testing::internal::GetCapturedStderr(), reason, status);
  EXPECT_EQ(r.status, status);
  return r;
}

std::vector<ClientRow> key_rows() {
  return {
      {"key-missing",
       {},
       [](Harness& h) {
         auto r = refused_chat(h, "", "chat", "", "unauthenticated", 401);
         EXPECT_EQ(json::parse(r.body)["error"]["code"], "invalid_api_key");
         HttpClient c(h.port());
         EXPECT_EQ(c.request("GET", "/v1/models").status, 401);
         EXPECT_EQ(h.upstream()->stats().requests, 0u);
       },
       "",
       "",
       auth_yaml()},
      {"key-wrong",
       {},
       [](Harness& h) {
         auto r = chat_with(h, "Bearer sk-not-ours");
         EXPECT_EQ(r.status, 401);
         EXPECT_EQ(r.body.find("sk-not-ours"), std::string::npos) << "the error echoed the key";
         EXPECT_EQ(metric_value(h.metrics(), "llmgate_auth_rejections_total",
                                "reason=\"unauthenticated\""),
                   1);
       },
       "",
       "",
       auth_yaml()},
      {"key-model-not-allowed",
       {},
       [](Harness& h) {
         auto r = refused_chat(h, "Bearer sk-app", "solo", "solo", "model_not_allowed", 403);
         EXPECT_EQ(json::parse(r.body)["error"]["code"], "model_not_allowed");
         EXPECT_EQ(chat_with(h, "Bearer sk-app").status, 200);
       },
       "",
       "",
       "  - name: solo\n    deployments: [{provider: good, model: m}]\n" + auth_yaml()},
      {"key-request-rate-limit",
       {},
       [](Harness& h) {
         EXPECT_EQ(chat_with(h, "Bearer sk-app").status, 200);
         auto r = refused_chat(h, "Bearer sk-app", "chat", "chat", "rate_limited", 429);
         EXPECT_EQ(r.header("retry-after"), "60");
         auto e = json::parse(r.body)["error"];
         EXPECT_EQ(e["type"], "requests");
         EXPECT_EQ(e["code"], "rate_limit_exceeded");
         EXPECT_EQ(h.upstream()->stats().requests, 1u);
       },
       "",
       "",
       auth_yaml(", requests_per_minute: 1")},
      {"key-budget-spent",
       {},
       [](Harness& h) {
         // $1 a token: the first answer spends the day's $1 budget.
         EXPECT_EQ(chat_with(h, "Bearer sk-app", "priced").status, 200);
         auto r = chat_with(h, "Bearer sk-app", "priced");
         EXPECT_EQ(r.status, 429);
         EXPECT_GE(std::stoi(r.header("retry-after")), 1);
         EXPECT_LE(std::stoi(r.header("retry-after")), 86400);
         auto e = json::parse(r.body)["error"];
         EXPECT_EQ(e["type"], "insufficient_quota");
         EXPECT_EQ(e["code"], "insufficient_quota");
         EXPECT_NE(e["message"].get<std::string>().find("daily budget"), std::string::npos);
         EXPECT_EQ(h.upstream()->stats().requests, 1u);
         EXPECT_EQ(metric_value(h.metrics(), "llmgate_auth_rejections_total",
                                "reason=\"budget_exhausted\""),
                   1);
         EXPECT_EQ(refused_count(h, "priced", "budget_exhausted"), 1);
       },
       "",
       "",
       "  - name: priced\n    deployments: [{provider: bad, model: m, price: {input_per_1m: "
       "1000000, output_per_1m: 1000000}}]\n" +
           auth_yaml(", budget: {usd_per_day: 1}", "[priced]")},
      // Refusals of the request itself, and for want of the shared state
      // (a Redis outage under on_failure: closed -- here nothing listens).
      {"refusals-counted-and-logged",
       {},
       [](Harness& h) {
         ::testing::internal::CaptureStderr();
         HttpClient c(h.port());
         const std::map<std::string, std::string> headers{{"content-type", "application/json"},
                                                          {"authorization", "Bearer sk-app"}};
         EXPECT_EQ(c.request("POST", "/v1/chat/completions", "{\"model\": ", headers).status, 400);
         EXPECT_EQ(
             c.request("POST", "/v1/chat/completions",
                       R"({"model":"nope","messages":[{"role":"user","content":"hi"}]})", headers)
                 .status,
             404);
         const std::string log = ::testing::internal::GetCapturedStderr();
         expect_refusal_line(log, "invalid_request", 400);
         expect_refusal_line(log, "not_found", 404);
         EXPECT_EQ(refused_count(h, "", "invalid_request"), 1);
         EXPECT_EQ(refused_count(h, "", "not_found"), 1);
         EXPECT_EQ(h.upstream()->stats().requests, 0u);
       },
       "",
       "",
       auth_yaml()},
      {"shared-state-unavailable-refusal-counted",
       {},
       [](Harness& h) {
         ::testing::internal::CaptureStderr();
         auto r = chat_with(h, "Bearer sk-app");
         const std::string log = ::testing::internal::GetCapturedStderr();
         EXPECT_EQ(r.status, 503) << r.body;
         EXPECT_EQ(json::parse(r.body)["error"]["code"], "shared_state_unavailable");
         expect_refusal_line(log, "shared_state_unavailable", 503);
         EXPECT_NE(log.find("key=app"), std::string::npos) << log;
         EXPECT_EQ(refused_count(h, "chat", "shared_state_unavailable"), 1);
         EXPECT_EQ(h.upstream()->stats().requests, 0u);
       },
       "",
       "",
       auth_yaml(", requests_per_minute: 60") +
           "shared_state: {url: \"redis://127.0.0.1:1\", on_failure: closed, timeout: 100ms, "
           "connect_timeout: 100ms}\n"},
      {"key-never-forwarded-or-logged",
       {},
       [](Harness& h) {
         ::testing::internal::CaptureStderr();
         // The request line is logged just after the answer is written; a
         // second request on the same connection is read only after that.
         HttpClient c(h.port());
         const std::map<std::string, std::string> headers{{"content-type", "application/json"},
                                                          {"authorization", "Bearer sk-app"}};
         auto r = c.request("POST", "/v1/chat/completions", chat_body(false), headers);
         c.request("POST", "/v1/chat/completions", chat_body(false), headers);
         std::string log = ::testing::internal::GetCapturedStderr();
         EXPECT_EQ(r.status, 200);
         const std::string upstream = h.upstream()->last_request();
         EXPECT_NE(upstream.find("uthorization: Bearer key\r\n"), std::string::npos) << upstream;
         EXPECT_EQ(upstream.find("sk-app"), std::string::npos) << "the client's key went upstream";
         EXPECT_NE(log.find("key=app"), std::string::npos)
             << log;  // the key's name, for attribution
         EXPECT_EQ(log.find("sk-app"), std::string::npos) << "the key was logged";
       },
       "",
       "",
       auth_yaml()},
      {"admin-key-required",
       {},
       [](Harness& h) {
         HttpClient c(h.port());
         EXPECT_EQ(c.request("GET", "/admin/routes").status, 401);
         EXPECT_EQ(
             c.request("GET", "/admin/routes", "", {{"authorization", "Bearer sk-app"}}).status,
             401);
         EXPECT_EQ(
             c.request("GET", "/admin/routes", "", {{"authorization", "Bearer sk-admin"}}).status,
             200);
         // Probes and scrapes never need a key.
         EXPECT_EQ(c.request("GET", "/healthz").status, 200);
         EXPECT_EQ(c.request("GET", "/metrics").status, 200);
       },
       "",
       "",
       auth_yaml()},
  };
}

class GatewayKeys : public ClientBehaviour {};

TEST_P(GatewayKeys, BehaveAsDocumented) { run_row(GetParam()); }

INSTANTIATE_TEST_SUITE_P(Table, GatewayKeys, ::testing::ValuesIn(key_rows()), row_name);

// ---- Security ------------------------------------------------------------------------

// A config file holding the harness's config, for reload rows.
class ConfigFile {
 public:
  explicit ConfigFile(const std::string& text) {
    char name[] = "/tmp/llmgate-conf-cfg-XXXXXX";
    const int fd = mkstemp(name);
    ::close(fd);
    path_ = name;
    write(text);
  }
  ~ConfigFile() { std::filesystem::remove(path_); }
  void write(const std::string& text) { std::ofstream(path_, std::ios::trunc) << text; }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// Model "pricey": bad/m at $500/M before good/m at $1/M, capped at $10/M,
// one attempt, no hedging.
const std::string kPricey = R"(  - name: pricey
    routing: {max_attempts: 1, constraints: {max_output_price_per_1m: 10}, hedging: {enabled: false}}
    deployments:
      - {provider: bad, model: m, price: {input_per_1m: 1, output_per_1m: 500}}
      - {provider: good, model: m, price: {input_per_1m: 1, output_per_1m: 1}}
  - name: solo
    deployments: [{provider: bad, model: m}]
)";

std::string model_body(const std::string& model, const std::string& route = "") {
  return R"({"model":")" + model + R"(","messages":[{"role":"user","content":"hi"}])" +
         (route.empty() ? "" : R"(,"route":)" + route) + "}";
}

testing::HttpResponse post_as(Harness& h, const std::string& key, const std::string& body) {
  HttpClient c(h.port());
  std::map<std::string, std::string> headers{{"content-type", "application/json"}};
  if (!key.empty()) headers["authorization"] = "Bearer " + key;
  return c.request("POST", "/v1/chat/completions", body, headers);
}

// What a raw exchange answers: everything until the gateway closes.
std::string raw_exchange(Harness& h, const std::string& bytes) {
  RawClient raw(h.port());
  EXPECT_TRUE(raw.send(bytes));
  return raw.read_all();
}

std::string raw_post(const std::string& extra_headers, const std::string& body) {
  return "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n" +
         extra_headers + "\r\n" + body;
}

// The operator's provider key as OpenAI's 401 quotes it: start and end.
const std::string kOpenAi401 =
    R"({"error":{"message":"Incorrect API key provided: sk-proj-****************************************************************XYZ9. You can find your API key at https://platform.openai.com/account/api-keys.","type":"invalid_request_error","param":null,"code":"invalid_api_key"}})";

std::vector<ClientRow> security_rows() {
  const Script fails{{K::kSend, testing::status_response(500)}, {K::kClose}};
  const std::string two_keys =
      "auth:\n  keys:\n    - {name: app, sha256: " + gateway::sha256_hex("sk-app") +
      ", models: [chat, solo, pricey]}\n    - {name: ops, sha256: " +
      gateway::sha256_hex("sk-ops") + ", explain: true, allow_overrides: true}\n";
  return {
      {"override-cannot-raise-price-cap",
       {},
       [](Harness& h) {
         // $1000/M asked, $10/M configured: the $500/M deployment stays out,
         // in the body and in the header alike.
         auto r = post_as(
             h, "", model_body("pricey", R"({"max_output_price_per_1m": 1000, "order": ["bad"]})"));
         EXPECT_EQ(r.status, 200) << r.body;
         EXPECT_EQ(r.header("x-llmgate-deployment"), "good/m");
         HttpClient c(h.port());
         r = c.request("POST", "/v1/chat/completions",
                       model_body("pricey", R"({"order": ["bad"]})"),
                       {{"content-type", "application/json"}, {"x-llmgate-max-price", "1000"}});
         EXPECT_EQ(r.header("x-llmgate-deployment"), "good/m");
         EXPECT_EQ(h.upstream()->stats().requests, 0u) << "the $500/M deployment was reached";
       },
       "",
       "",
       kPricey},
      {"override-cannot-raise-max-attempts", fails,
       [](Harness& h) {
         auto r = post_as(
             h, "",
             model_body("pricey", R"({"max_attempts": 10, "max_output_price_per_1m": 1000})"));
         // bad/m is out (price); good/m alone: one attempt. And on "chat"
         // (max_attempts 3 by default) a request may ask for fewer.
         EXPECT_EQ(r.header("x-llmgate-attempts"), "1");
         r = post_as(h, "", model_body("chat", R"({"max_attempts": 1})"));
         EXPECT_EQ(r.status, 502) << r.body;
         EXPECT_EQ(r.header("x-llmgate-attempts"), "1");
         // "once" is configured with max_attempts: 1: asking for 10 gets one.
         r = post_as(h, "", model_body("once", R"({"max_attempts": 10})"));
         EXPECT_EQ(r.status, 502) << r.body;
         EXPECT_EQ(r.header("x-llmgate-attempts"), "1");
         EXPECT_EQ(h.good().stats().requests, 1u)
             << "good/m was tried after the configured last attempt";
       },
       "", "",
       kPricey + "  - name: once\n    routing: {max_attempts: 1}\n    deployments: [{provider: "
                 "bad, model: m}, {provider: good, model: m}]\n"},
      {"override-cannot-enable-hedging",
       {{K::kSend, testing::sse_head()}, {K::kHold}},
       [](Harness& h) {
         // Hedging is off, with a 50 ms delay configured: turned on, a hedge
         // would start after 50 ms and win long before bad/m's deadline.
         auto r = post_as(h, "", model_body("nohedge", R"({"hedge": true})"));
         EXPECT_EQ(r.status, 200);
         EXPECT_EQ(r.header("x-llmgate-hedged"), "") << "a hedge ran";
         EXPECT_EQ(r.header("x-llmgate-failed"), "bad/m=ttft_timeout");  // waited out bad/m alone
       },
       "",
       "",
       "  - name: nohedge\n    routing: {hedging: {enabled: false, delay: 50ms}}\n"
       "    deployments: [{provider: bad, model: m}, {provider: good, model: m}]\n"},
      {"trusted-key-may-widen-overrides",
       {},
       [](Harness& h) {
         auto r = post_as(
             h, "sk-app",
             model_body("pricey", R"({"max_output_price_per_1m": 1000, "order": ["bad"]})"));
         EXPECT_EQ(r.status, 200);
         EXPECT_EQ(h.upstream()->stats().requests, 0u);
         r = post_as(
             h, "sk-ops",
             model_body("pricey", R"({"max_output_price_per_1m": 1000, "order": ["bad"]})"));
         EXPECT_EQ(r.status, 200);
         EXPECT_EQ(r.header("x-llmgate-deployment"), "bad/m");  // allow_overrides: true
       },
       "",
       "",
       kPricey + two_keys},
      {"half-written-config-keeps-auth",
       {},
       [](Harness& h) {
         const std::string full = h.yaml();
         ConfigFile file(full.substr(0, full.find("auth:")));  // the part before auth:
         std::string why;
         EXPECT_FALSE(h.gateway().reload_from_file(file.path(), &why));
         EXPECT_NE(why.find("enabled: false"), std::string::npos) << why;
         EXPECT_EQ(post_as(h, "", model_body("chat")).status, 401) << "the API opened";
         EXPECT_EQ(metric_value(h.metrics(), "llmgate_config_reloads_total", "result=\"rejected\""),
                   1);
         EXPECT_EQ(metric_value(h.metrics(), "llmgate_config_last_reload_successful"), 0);
         // Saying so explicitly is honoured.
         file.write(full.substr(0, full.find("auth:")) + "auth: {enabled: false}\n");
         EXPECT_TRUE(h.gateway().reload_from_file(file.path(), &why)) << why;
         EXPECT_EQ(post_as(h, "", model_body("chat")).status, 200);
       },
       "",
       "",
       auth_yaml()},
      {"empty-config-keeps-models-and-admin",
       {},
       [](Harness& h) {
         ConfigFile empty("");
         std::string why;
         EXPECT_FALSE(h.gateway().reload_from_file(empty.path(), &why));
         HttpClient c(h.port());
         EXPECT_EQ(c.request("GET", "/admin/routes").status, 401) << "/admin opened";
         EXPECT_EQ(post_as(h, "sk-app", model_body("chat")).status, 200);
         // A file with keys but no admin key, or no models section: refused too.
         const std::string full = h.yaml();
         ConfigFile no_admin(
             std::regex_replace(full, std::regex("  admin_key_sha256: [0-9a-f]+\n"), ""));
         EXPECT_FALSE(h.gateway().reload_from_file(no_admin.path(), &why));
         EXPECT_NE(why.find("admin_open"), std::string::npos) << why;
         EXPECT_EQ(metric_value(h.metrics(), "llmgate_config_reloads_total", "result=\"rejected\""),
                   2);
       },
       "",
       "",
       auth_yaml()},
      {"upstream-error-text-not-forwarded",
       {{K::kSend, testing::status_response(401, "", kOpenAi401)}, {K::kClose}},
       [](Harness& h) {
         ::testing::internal::CaptureStderr();
         auto r = post_as(h, "", model_body("solo"));
         HttpClient flush(h.port());  // the log line is written after the answer
         flush.request("GET", "/healthz");
         const std::string log = ::testing::internal::GetCapturedStderr();
         EXPECT_EQ(r.status, 502);
         EXPECT_EQ(json::parse(r.body)["error"]["code"], "upstream_unavailable");
         for (const char* leak : {"sk-proj", "XYZ9", "Incorrect API key"}) {
           EXPECT_EQ(r.body.find(leak), std::string::npos)
               << leak << " reached the client: " << r.body;
         }
         for (const char* secret : {"sk-proj", "XYZ9"}) {
           EXPECT_EQ(log.find(secret), std::string::npos) << secret << " was logged";
         }
         EXPECT_NE(log.find("Incorrect API key provided: [redacted]"), std::string::npos) << log;
       },
       "",
       "",
       kPricey},
      {"client-error-body-scrubbed",
       {{K::kSend,
         testing::status_response(
             400, "",
             R"j({"error":{"message":"tools[0] is invalid (request by key sk-abcdef1234567)","type":"invalid_request_error","param":"tools","code":null}})j")},
        {K::kClose}},
       [](Harness& h) {
         auto r = post_as(h, "", model_body("chat"));
         EXPECT_EQ(r.status, 400);
         auto e = json::parse(r.body)["error"];
         EXPECT_EQ(e["message"], "tools[0] is invalid (request by key [redacted])") << r.body;
         EXPECT_EQ(e["param"], "tools");
       }},
      {"in-band-error-text-not-forwarded",
       {{K::kSend,
         head_role_tokens(1) +
             testing::chunk(
                 "data: {\"error\":{\"message\":\"internal error, key sk-leak1234567\"}}\n\n")},
        {K::kHold}},
       [](Harness& h) {
         HttpClient c(h.port());
         auto head = c.start("POST", "/v1/chat/completions", chat_body(true));
         auto events = c.rest_of_events();
         ASSERT_FALSE(events.empty());
         auto e = json::parse(events.back())["error"];
         EXPECT_EQ(e["code"], "upstream_stream_error");
         EXPECT_EQ(events.back().find("sk-leak"), std::string::npos) << events.back();
       }},
      {"transfer-encoding-not-chunked",
       {},
       [](Harness& h) {
         // The body would be a second request if it were taken for no body.
         for (const std::string te : {"identity", "xchunked", "chunked, identity"}) {
           const std::string got =
               raw_exchange(h, raw_post("Transfer-Encoding: " + te + "\r\n",
                                        "GET /v1/models HTTP/1.1\r\nHost: x\r\n\r\n"));
           EXPECT_EQ(got.rfind("HTTP/1.1 400 ", 0), 0u) << te << ": " << got.substr(0, 200);
           EXPECT_EQ(got.find("\"list\""), std::string::npos)
               << te << ": the body ran as a request";
         }
       }},
      {"chunk-size-overflow",
       {},
       [](Harness& h) {
         const std::string got = raw_exchange(
             h, raw_post("Transfer-Encoding: chunked\r\n", "fffffffffffffffffffff\r\nabc"));
         EXPECT_EQ(got.rfind("HTTP/1.1 400 ", 0), 0u) << got.substr(0, 200);
         EXPECT_NE(got.find("bad_http_request"), std::string::npos);
       }},
      {"missing-host",
       {},
       [](Harness& h) {
         const std::string got = raw_exchange(h, "GET /v1/models HTTP/1.1\r\n\r\n");
         EXPECT_EQ(got.rfind("HTTP/1.1 400 ", 0), 0u) << got.substr(0, 200);
       }},
      {"second-instance-same-port",
       {},
       [](Harness& h) {
         std::string yaml = h.yaml();
         yaml.replace(yaml.find("port: 0"), 7, "port: " + std::to_string(h.port()));
         gateway::Gateway second(config::parse_config(yaml, "second.yaml"));
         try {
           second.start();
           ADD_FAILURE() << "a second gateway started on the same port";
         } catch (const std::exception& e) {
           EXPECT_NE(std::string(e.what()).find("address in use"), std::string::npos) << e.what();
         }
       }},
      {"expect-100-continue-checks-key-first",
       {},
       [](Harness& h) {
         RawClient raw(h.port());
         ASSERT_TRUE(raw.send(raw_post(
             "Authorization: Bearer wrong\r\nExpect: 100-continue\r\nContent-Length: 100\r\n",
             "")));
         const std::string got = raw.read_some();
         EXPECT_EQ(got.rfind("HTTP/1.1 401 ", 0), 0u)
             << "not 100 Continue first: " << got.substr(0, 100);
       },
       "",
       "",
       auth_yaml()},
      {"keep-alive-head-header-timeout",
       {},
       [](Harness& h) {
         // Idle between requests may last 30 s; a head that has started must
         // complete within client_header_timeout (1 s).
         RawClient raw(h.port());
         ASSERT_TRUE(raw.send("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"));
         EXPECT_NE(raw.read_some().find("200"), std::string::npos);
         ASSERT_TRUE(raw.send("GET /healthz HTTP/1.1\r\nHo"));
         EXPECT_TRUE(eventually([&] { return raw.closed_by_server(); }, 5s))
             << "the stalled head was held to the idle timeout";
       },
       ", client_idle_timeout: 30s"},
      {"content-encoding-refused",
       {},
       [](Harness& h) {
         HttpClient c(h.port());
         auto r = c.request("POST", "/v1/chat/completions", chat_body(false),
                            {{"content-type", "application/json"}, {"content-encoding", "gzip"}});
         EXPECT_EQ(r.status, 415);
         EXPECT_EQ(json::parse(r.body)["error"]["code"], "unsupported_content_encoding");
         EXPECT_EQ(h.upstream()->stats().requests, 0u);
       }},
      {"connection-header-lines-all-honoured", testing::healthy_stream(2),
       [](Harness& h) {
         const std::string body = chat_body(false);
         RawClient raw(h.port());
         ASSERT_TRUE(
             raw.send(raw_post("Connection: keep-alive\r\nConnection: x-hop, close\r\nX-Hop: "
                               "secret\r\nContent-Length: " +
                                   std::to_string(body.size()) + "\r\n",
                               body)));
         const std::string got = raw.read_all();
         EXPECT_TRUE(raw.eof()) << "the second line's close was not honoured";
         EXPECT_NE(got.find("Connection: close\r\n"), std::string::npos) << got.substr(0, 300);
         const std::string upstream = h.upstream()->last_request();
         EXPECT_EQ(upstream.find("secret"), std::string::npos) << upstream;
       }},
      {"via-loop-detected",
       {},
       [](Harness& h) {
         // A provider whose base_url is the gateway itself.
         std::string yaml = h.yaml() +
                            "  - name: loop\n    deployments: [{provider: self, model: m}, "
                            "{provider: good, model: m}]\n";
         yaml.replace(
             yaml.find("providers:\n"), 11,
             "providers:\n  - {name: self, base_url: \"http://127.0.0.1:" +
                 std::to_string(h.port()) +
                 "/v1\", pool: {idle_timeout: 200ms}}\n");  // its pooled connection to us goes soon
         ASSERT_TRUE(h.gateway().reload(config::parse_config(yaml, "loop.yaml")));
         auto r = post_as(h, "", model_body("loop"));
         EXPECT_EQ(r.status, 200) << r.body;
         EXPECT_EQ(r.header("x-llmgate-failed"), "self/m=upstream_status(508)");
         EXPECT_EQ(
             metric_value(h.metrics(), "llmgate_upstream_attempts_total", "deployment=\"self/m\""),
             1)
             << "the request went round more than once";
       }},
      {"models-list-filtered-by-key",
       {},
       [](Harness& h) {
         HttpClient c(h.port());
         auto r = c.request("GET", "/v1/models", "", {{"authorization", "Bearer sk-app"}});
         ASSERT_EQ(r.status, 200);
         std::set<std::string> ids;
         const json list = json::parse(r.body);
         for (const auto& m : list["data"]) ids.insert(m["id"].get<std::string>());
         EXPECT_EQ(ids, (std::set<std::string>{"chat"}));
       },
       "",
       "",
       "  - name: hidden\n    deployments: [{provider: good, model: m}]\n" + auth_yaml()},
      {"route-explanations-need-permission", fails,
       [](Harness& h) {
         // Key "app" may not see how it was routed, "ops" (explain: true) may.
         auto app = post_as(h, "sk-app", model_body("chat"));
         EXPECT_EQ(app.status, 200);
         for (const char* header :
              {"x-llmgate-route", "x-llmgate-deployment", "x-llmgate-failed"}) {
           EXPECT_EQ(app.header(header), "") << header;
         }
         EXPECT_EQ(app.header("x-llmgate-attempts"), "2");
         auto failed = post_as(h, "sk-app", model_body("solo"));
         EXPECT_EQ(failed.status, 502);
         EXPECT_EQ(failed.body.find("bad/m"), std::string::npos) << failed.body;
         auto denied = post_as(h, "sk-app", model_body("pricey", R"({"providers": ["bad"]})"));
         EXPECT_EQ(denied.status, 503);
         EXPECT_EQ(denied.body.find("$"), std::string::npos) << "prices shown: " << denied.body;
         auto ops = post_as(h, "sk-ops", model_body("chat"));
         EXPECT_EQ(ops.header("x-llmgate-deployment"), "good/m");
         EXPECT_EQ(ops.header("x-llmgate-failed"), "bad/m=upstream_status(500)");
         EXPECT_NE(ops.header("x-llmgate-route"), "");
         // Nor which providers serve a model: /v1/models' owned_by.
         auto owner = [&](const std::string& key) {
           HttpClient c(h.port());
           auto r = c.request("GET", "/v1/models/chat", "", {{"authorization", "Bearer " + key}});
           EXPECT_EQ(r.status, 200) << r.body;
           return json::parse(r.body).value("owned_by", std::string("?"));
         };
         EXPECT_EQ(owner("sk-app"), "llmgate");
         EXPECT_EQ(owner("sk-ops"), "bad,good");
         HttpClient list(h.port());
         auto all = list.request("GET", "/v1/models", "", {{"authorization", "Bearer sk-app"}});
         EXPECT_EQ(all.body.find("good"), std::string::npos) << all.body;
       },
       "", "", kPricey + two_keys},
  };
}

class Security : public ClientBehaviour {};

TEST_P(Security, BehavesAsDocumented) { run_row(GetParam()); }

INSTANTIATE_TEST_SUITE_P(Table, Security, ::testing::ValuesIn(security_rows()), row_name);

// ---- Real providers ------------------------------------------------------------

// The rows that repeat a relayed header upstream: the client's response head
// has it once, with the last value.
void expect_relayed_once(Harness& h, bool stream) {
  RawClient raw(h.port());
  const std::string body = chat_body(stream);
  ASSERT_TRUE(raw.send(
      "POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\nconnection: close\r\ncontent-type: "
      "application/json\r\ncontent-length: " +
      std::to_string(body.size()) + "\r\n\r\n" + body));
  const std::string all = raw.read_all();
  ASSERT_EQ(all.rfind("HTTP/1.1 200", 0), 0u) << all.substr(0, 200);
  const std::string head = lowercase_head(all);
  const std::string line = "\r\nx-ratelimit-remaining-requests: ";
  const auto first = head.find(line);
  ASSERT_NE(first, std::string::npos) << head;
  EXPECT_EQ(head.find(line, first + 1), std::string::npos) << head;
  EXPECT_EQ(head.substr(first + line.size(), 4), "99\r\n") << head;
}

// A chunked SSE head with extra header lines ("name: value\r\n"...).
std::string sse_head_with(const std::string& lines) {
  return "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n" + lines +
         "transfer-encoding: chunked\r\n\r\n";
}

// One chat.completion.chunk event with `delta` for choice 0 (and `top`
// members added to the chunk, e.g. R"("x_provider":{"id":"r1"},)").
std::string delta_event(const std::string& delta, const std::string& finish = "null",
                        const std::string& top = "", const std::string& id = "c1") {
  return testing::event(
      R"({)" + top + R"("id":")" + id +
      R"(","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":)" +
      delta + R"(,"finish_reason":)" + finish + "}]}");
}

Script one_stream(const std::string& head, const std::vector<std::string>& events) {
  std::string body;
  for (const auto& e : events) body += e;
  return {{K::kSend, head + testing::chunk(body) + testing::last_chunk()}};
}

// An answer whose head repeats a relayed header, in two spellings.
Script repeated_header_stream() {
  return one_stream(sse_head_with("x-ratelimit-remaining-requests: 98\r\n"
                                  "X-RateLimit-Remaining-Requests: 99\r\n"),
                    {testing::role_event(), testing::token_event(0), testing::finish_event(),
                     testing::done_event()});
}

// OpenAI's refusal to stream a model for an unverified organisation.
constexpr const char* kStreamRefusal =
    R"({"error":{"message":"Your organization must be verified to stream this model.","type":"invalid_request_error","param":"stream","code":"unsupported_value"}})";
// A whole chat.completion, as a server answers a JSON request.
constexpr const char* kWholeAnswer =
    R"({"id":"c9","object":"chat.completion","created":5,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"whole answer","refusal":null},"logprobs":null,"finish_reason":"stop"}],"usage":{"prompt_tokens":2,"completion_tokens":2,"total_tokens":4}})";

Script healthy_stream_script() { return testing::healthy_stream(3); }

std::vector<ClientRow> provider_rows() {
  return {
      {"audio-is-a-first-token",
       // Audio only: no text at all, and the stream still commits at its
       // first audio delta (the TTFT is measured there).
       one_stream(testing::sse_head(),
                  {testing::role_event(), delta_event(R"({"audio":{"id":"au_1","data":"UklG"}})"),
                   delta_event(R"({"audio":{"data":"RiQA","transcript":"hi"}})"),
                   delta_event("{}", R"("stop")"), testing::done_event()}),
       [](Harness& h) {
         HttpClient c(h.port());
         auto head = c.start("POST", "/v1/chat/completions", chat_body(true));
         ASSERT_EQ(head.status, 200);
         EXPECT_EQ(head.header("x-llmgate-deployment"), "bad/m");
         EXPECT_FALSE(head.header("x-llmgate-ttft-ms").empty());
         auto events = c.rest_of_events();
         ASSERT_FALSE(events.empty());
         EXPECT_EQ(events.back(), "[DONE]");
         EXPECT_NE(events[1].find("UklG"), std::string::npos) << events[1];
         EXPECT_EQ(metric_value(h.metrics(), "llmgate_upstream_attempts_total",
                                "deployment=\"bad/m\",outcome=\"success\""),
                   1);
       }},
      {"assembly-keeps-every-field",
       // Reasoning under the upstream's own name, a tool call with content
       // null, annotations, a field no one knows yet, and Azure's empty first
       // chunk: the non-streamed answer keeps them all as the upstream would.
       one_stream(
           testing::sse_head(),
           {testing::event(
                R"({"id":"","object":"","created":0,"model":"","choices":[],"prompt_filter_results":[{"prompt_index":0}]})"),
            delta_event(R"({"role":"assistant","content":""})"),
            delta_event(R"({"reasoning":"think"})"), delta_event(R"({"reasoning":"ing"})"),
            delta_event(
                R"({"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"f","arguments":""}}]})"),
            delta_event(R"({"tool_calls":[{"index":0,"function":{"arguments":"{\"a\":"}}]})"),
            delta_event(R"({"tool_calls":[{"index":0,"function":{"arguments":"1}"}}]})"),
            delta_event(R"({"annotations":[{"type":"url_citation","url_citation":{"url":"u"}}]})"),
            delta_event(R"({"x_future":{"text":"a","level":2}})"),
            delta_event(R"({"x_future":{"text":"b"}})"),
            delta_event("{}", R"("tool_calls")",
                        R"("usage":{"prompt_tokens":3,"completion_tokens":4,"total_tokens":7},)"),
            testing::done_event()}),
       [](Harness& h) {
         HttpClient c(h.port());
         auto r = c.request("POST", "/v1/chat/completions", chat_body(false));
         ASSERT_EQ(r.status, 200) << r.body;
         auto j = json::parse(r.body);
         EXPECT_EQ(j["id"], "c1");
         EXPECT_EQ(j["model"], "m");
         EXPECT_EQ(j["created"], 1);
         EXPECT_EQ(j["prompt_filter_results"], json::parse(R"([{"prompt_index":0}])"));
         const auto& msg = j["choices"][0]["message"];
         EXPECT_TRUE(msg["content"].is_null()) << msg;
         EXPECT_EQ(msg["reasoning"], "thinking");
         EXPECT_FALSE(msg.contains("reasoning_content"));
         EXPECT_EQ(
             msg["tool_calls"],
             json::parse(
                 R"([{"id":"call_1","type":"function","function":{"name":"f","arguments":"{\"a\":1}"}}])"));
         EXPECT_EQ(msg["annotations"][0]["url_citation"]["url"], "u");
         EXPECT_EQ(msg["x_future"], json::parse(R"({"text":"ab","level":2})"));
         EXPECT_EQ(j["choices"][0]["finish_reason"], "tool_calls");
         EXPECT_EQ(j["usage"]["total_tokens"], 7);
       }},
      {"rate-limit-headers-relayed",
       // The x-ratelimit-* and openai-processing-ms of the attempt that
       // answered reach the client (stream and non-stream).
       one_stream(sse_head_with("x-ratelimit-remaining-requests: 99\r\nx-ratelimit-reset-tokens: "
                                "6ms\r\nopenai-processing-ms: 12\r\nx-internal: no\r\n"),
                  {testing::role_event(), testing::token_event(0), testing::finish_event(),
                   testing::done_event()}),
       [](Harness& h) {
         HttpClient c(h.port());
         auto r = c.request("POST", "/v1/chat/completions", chat_body(false));
         ASSERT_EQ(r.status, 200) << r.body;
         EXPECT_EQ(r.header("x-ratelimit-remaining-requests"), "99");
         EXPECT_EQ(r.header("x-ratelimit-reset-tokens"), "6ms");
         EXPECT_EQ(r.header("openai-processing-ms"), "12");
         EXPECT_EQ(r.header("x-internal"), "");
       }},
      {"repeated-rate-limit-header-relayed-once-stream",
       // A header the upstream repeats (in any case) reaches the client once,
       // with its last value.
       repeated_header_stream(), [](Harness& h) { expect_relayed_once(h, /*stream=*/true); }},
      {"repeated-rate-limit-header-relayed-once", repeated_header_stream(),
       [](Harness& h) { expect_relayed_once(h, /*stream=*/false); }},
      {"should-retry-after-all-failed",
       // Every candidate failed: the SDK is told not to retry on its own.
       {{K::kSend, testing::status_response(502)}, {K::kClose}},
       [](Harness& h) {
         sim::Profile broken;
         broken.error_rate = 1;
         broken.error_status = 503;
         h.good().set_profile("m", broken);
         HttpClient c(h.port());
         auto r = c.request("POST", "/v1/chat/completions", chat_body(false));
         EXPECT_EQ(r.status, 502) << r.body;
         EXPECT_EQ(r.header("x-should-retry"), "false");
       }},
      {"json-answer-to-stream-request",
       // An OpenAI-compatible server that ignores "stream": its JSON is the answer.
       {{K::kSend,
         testing::status_response(
             200, "",
             R"({"id":"c9","object":"chat.completion","created":5,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"whole answer","refusal":null},"logprobs":null,"finish_reason":"stop"}],"usage":{"prompt_tokens":2,"completion_tokens":2,"total_tokens":4}})")},
        {K::kClose}},
       [](Harness& h) {
         {
           HttpClient c(h.port());
           auto head = c.start("POST", "/v1/chat/completions",
                               chat_body(true, R"(,"stream_options":{"include_usage":true})"));
           ASSERT_EQ(head.status, 200);
           EXPECT_EQ(head.header("x-llmgate-deployment"), "bad/m");
           EXPECT_EQ(head.header("content-type"), "text/event-stream");
           EXPECT_EQ(head.header("x-llmgate-ttft-ms"), "");  // not measured
           auto events = c.rest_of_events();
           ASSERT_GE(events.size(), 4u);
           EXPECT_EQ(events.back(), "[DONE]");
           std::string text;
           for (const auto& e : events) {
             if (e == "[DONE]") continue;
             auto j = json::parse(e);
             EXPECT_EQ(j["object"], "chat.completion.chunk");
             if (!j["choices"].empty()) text += j["choices"][0]["delta"].value("content", "");
             if (j["choices"].empty()) {
               EXPECT_EQ(j["usage"]["total_tokens"], 4);
             }
           }
           EXPECT_EQ(text, "whole answer");
         }
         EXPECT_EQ(metric_value(h.metrics(), "llmgate_upstream_attempts_total",
                                "deployment=\"bad/m\",outcome=\"success\""),
                   1);
         HttpClient c(h.port());
         auto r = c.request("POST", "/v1/chat/completions", chat_body(false));
         ASSERT_EQ(r.status, 200) << r.body;
         EXPECT_EQ(json::parse(r.body)["choices"][0]["message"]["content"], "whole answer");
         EXPECT_EQ(json::parse(r.body)["id"], "c9");
       }},
      {"models-retrieve",
       // GET /v1/models/{id} (the SDK's models.retrieve): the model, or 404.
       {},
       [](Harness& h) {
         HttpClient c(h.port());
         auto r = c.request("GET", "/v1/models/chat");
         ASSERT_EQ(r.status, 200) << r.body;
         auto j = json::parse(r.body);
         EXPECT_EQ(j["id"], "chat");
         EXPECT_EQ(j["object"], "model");
         EXPECT_EQ(j["owned_by"], "bad,good");
         EXPECT_GT(j["created"].get<std::int64_t>(), 1'600'000'000);
         auto missing = c.request("GET", "/v1/models/nope");
         EXPECT_EQ(missing.status, 404);
         EXPECT_EQ(json::parse(missing.body)["error"]["code"], "model_not_found");
       }},
      {"provider-total-timeout",
       // A provider's own timeouts.total ends its attempt: the next one answers.
       {{K::kSend, head_role_tokens(0)}, {K::kHold}},
       [](Harness& h) {
         HttpClient c(h.port());
         auto r = c.request("POST", "/v1/chat/completions", chat_body(false));
         ASSERT_EQ(r.status, 200) << r.body;
         EXPECT_EQ(r.header("x-llmgate-deployment"), "good/m");
         EXPECT_EQ(metric_value(h.metrics(), "llmgate_upstream_attempts_total",
                                "deployment=\"bad/m\",outcome=\"total_timeout\""),
                   1);
       },
       "",
       "",
       "",
       ", timeouts: {total: 200ms}"},
      {"stream-refused-learnt",
       // OpenAI for an unverified organisation: a 400 naming "stream". The
       // same attempt goes again as a JSON request (no failover, nothing for
       // the client to see), and that deployment is asked for JSON from then on.
       {{K::kSend, testing::status_response(400, "", kStreamRefusal)},
        {K::kClose},
        {K::kNext},
        {K::kSend, testing::status_response(200, "", kWholeAnswer)},
        {K::kClose}},
       [](Harness& h) {
         HttpClient c(h.port());
         auto r = c.request("POST", "/v1/chat/completions", chat_body(false));
         ASSERT_EQ(r.status, 200) << r.body;
         EXPECT_EQ(r.header("x-llmgate-deployment"), "bad/m");
         EXPECT_EQ(r.header("x-llmgate-attempts"), "1");
         EXPECT_EQ(json::parse(r.body)["choices"][0]["message"]["content"], "whole answer");
         EXPECT_EQ(h.upstream()->stats().requests, 2u);
         EXPECT_NE(h.upstream()->last_request().find(R"("stream":false)"), std::string::npos);
         auto head = c.start("POST", "/v1/chat/completions", chat_body(true));
         ASSERT_EQ(head.status, 200);
         EXPECT_EQ(c.rest_of_events().back(), "[DONE]");
         EXPECT_EQ(h.upstream()->stats().requests, 3u);  // learnt: no refusal first
         auto routes = json::parse(c.request("GET", "/admin/routes").body);
         EXPECT_EQ(routes["models"][0]["deployments"][0]["wire"]["learnt"],
                   json::array({"refuses stream"}));
       }},
      {"stream-options-422-learnt",
       // Mistral and others refuse stream_options with a 422: sent again
       // without them, and none to that deployment from then on.
       {{K::kSend,
         testing::status_response(
             422, "",
             R"({"object":"error","message":"stream_options: Extra inputs are not permitted","type":"invalid_request_error"})")},
        {K::kClose},
        {K::kNext},
        {K::kSend, head_role_tokens(2) +
                       testing::chunk(testing::finish_event() + testing::done_event()) +
                       testing::last_chunk()},
        {K::kClose}},
       [](Harness& h) {
         HttpClient c(h.port());
         auto r = c.request("POST", "/v1/chat/completions", chat_body(false));
         ASSERT_EQ(r.status, 200) << r.body;
         EXPECT_EQ(r.header("x-llmgate-deployment"), "bad/m");
         EXPECT_EQ(h.upstream()->stats().requests, 2u);
         EXPECT_EQ(h.upstream()->last_request().find("stream_options"), std::string::npos);
       }},
      {"unstreamed-provider",
       // providers[].stream: false: one JSON request, a stream client still
       // gets a stream; the answer time (not a TTFT) is the sample.
       {{K::kSend, testing::status_response(200, "", kWholeAnswer)}, {K::kClose}},
       [](Harness& h) {
         HttpClient c(h.port());
         auto head = c.start("POST", "/v1/chat/completions", chat_body(true));
         ASSERT_EQ(head.status, 200);
         EXPECT_EQ(head.header("x-llmgate-deployment"), "bad/m");
         EXPECT_EQ(head.header("x-llmgate-ttft-ms"), "");
         EXPECT_EQ(c.rest_of_events().back(), "[DONE]");
         const std::string sent = h.upstream()->last_request();
         EXPECT_NE(sent.find(R"("stream":false)"), std::string::npos) << sent;
         EXPECT_EQ(sent.find("stream_options"), std::string::npos) << sent;
         EXPECT_NE(sent.find("Accept: application/json\r\n"), std::string::npos) << sent;
         auto routes = json::parse(c.request("GET", "/admin/routes").body);
         const auto& row = routes["models"][0]["deployments"][0];
         EXPECT_EQ(row["ttft_ms"]["unstreamed_samples"], 1) << row;
         EXPECT_EQ(row["wire"]["stream"], false);
       },
       "",
       "",
       "",
       ", stream: false"},
      {"no-first-token-deadline",
       // ttft_timeout: none (a reasoning model): a first token after the
       // provider's TTFT timeout is waited for; the head is not.
       {{K::kSend, testing::sse_head() + testing::chunk(testing::role_event())},
        {K::kSleep, "", 900ms},
        {K::kSend,
         testing::chunk(testing::token_event(0) + testing::finish_event() + testing::done_event()) +
             testing::last_chunk()},
        {K::kClose},
        {K::kNext},
        {K::kHold}},
       [](Harness& h) {
         HttpClient c(h.port());
         auto r = c.request("POST", "/v1/chat/completions", chat_body(false));
         ASSERT_EQ(r.status, 200) << r.body;
         EXPECT_EQ(r.header("x-llmgate-deployment"), "bad/m");
         EXPECT_EQ(r.header("x-llmgate-attempts"), "1");
         // No response head within the provider's TTFT timeout: fails over.
         auto silent = c.request("POST", "/v1/chat/completions", chat_body(false));
         ASSERT_EQ(silent.status, 200) << silent.body;
         EXPECT_EQ(silent.header("x-llmgate-deployment"), "good/m");
       },
       "",
       ", ttft_timeout: none"},
      {"azure-url-and-key",
       // Azure OpenAI: the deployment in the path, api-version in the query,
       // the key alone in an api-key header.
       healthy_stream_script(),
       [](Harness& h) {
         HttpClient c(h.port());
         auto r = c.request("POST", "/v1/chat/completions", chat_body(false));
         ASSERT_EQ(r.status, 200) << r.body;
         const std::string sent = h.upstream()->last_request();
         EXPECT_EQ(sent.rfind("POST /v1/deployments/m/chat/completions?api-version=2024-10-21 "
                              "HTTP/1.1\r\n",
                              0),
                   0u)
             << sent;
         EXPECT_NE(sent.find("api-key: key\r\n"), std::string::npos) << sent;
         EXPECT_EQ(sent.find("authorization:"), std::string::npos) << sent;
       },
       "", "", "",
       ", api_key_header: api-key, chat_path: \"/deployments/{model}/chat/completions\","
       " query: {api-version: \"2024-10-21\"}"},
      {"usage-details-priced",
       // Cached input at its own price; hidden reasoning in the usage is not
       // output speed.
       {{K::kSend,
         head_role_tokens(2) +
             testing::chunk(
                 delta_event(
                     "{}", R"("stop")",
                     R"("usage":{"prompt_tokens":1000,"completion_tokens":100,"total_tokens":1100,"prompt_tokens_details":{"cached_tokens":800},"completion_tokens_details":{"reasoning_tokens":60}},)") +
                 testing::done_event()) +
             testing::last_chunk()},
        {K::kClose}},
       [](Harness& h) {
         HttpClient c(h.port());
         auto r = c.request("POST", "/v1/chat/completions", chat_body(false));
         ASSERT_EQ(r.status, 200) << r.body;
         EXPECT_EQ(json::parse(r.body)["usage"]["prompt_tokens_details"]["cached_tokens"], 800);
         // 200 x $1 + 800 x $0.10 + 100 x $2, per million.
         EXPECT_NEAR(metric_value(h.metrics(), "llmgate_cost_usd_total"), 480e-6, 1e-12);
       },
       "",
       ", price: {input_per_1m: 1, cached_input_per_1m: 0.1, output_per_1m: 2}"},
  };
}

class RealProviders : public ClientBehaviour {};

TEST_P(RealProviders, BehaveAsDocumented) { run_row(GetParam()); }

INSTANTIATE_TEST_SUITE_P(Table, RealProviders, ::testing::ValuesIn(provider_rows()), row_name);

// ---- The document and the table agree ------------------------------------------

std::set<std::string> documented_rows(const std::string& section) {
  std::ifstream f(std::string(LLMGATE_SOURCE_DIR) + "/docs/failure-semantics.md");
  std::set<std::string> ids;
  std::string line;
  bool in = false;
  std::regex row(R"(^\| `([a-z0-9.\-]+)` \|)");
  while (std::getline(f, line)) {
    if (line.rfind("## ", 0) == 0) in = line == "## " + section;
    std::smatch m;
    if (in && std::regex_search(line, m, row)) ids.insert(m[1]);
  }
  return ids;
}

template <class Row>
std::set<std::string> ids(const std::vector<Row>& rows) {
  std::set<std::string> out;
  for (const auto& r : rows) out.insert(r.id);
  return out;
}

TEST(FailureSemanticsDoc, EveryTableListsTheTestedRowsAndNoOther) {
  // Every upstream row runs for every protocol.
  for (Protocol p : {Protocol::kOpenAi, Protocol::kAnthropic, Protocol::kGemini}) {
    EXPECT_EQ(documented_rows("Upstream faults"), ids(upstream_rows(p))) << config::to_string(p);
  }
  for (Protocol p : {Protocol::kOpenAi, Protocol::kAnthropic, Protocol::kGemini})
    EXPECT_EQ(documented_rows("Continuation"), ids(continuation_rows(p))) << config::to_string(p);
  for (Protocol p : {Protocol::kOpenAi, Protocol::kAnthropic, Protocol::kGemini}) {
    EXPECT_EQ(documented_rows("Anthropic's Messages API"), ids(messages_rows(p)))
        << config::to_string(p);
  }
  EXPECT_EQ(documented_rows("Client behaviours"), ids(client_rows()));
  EXPECT_EQ(documented_rows("Limits"), ids(limit_rows()));
  EXPECT_EQ(documented_rows("Gateway keys"), ids(key_rows()));
  EXPECT_EQ(documented_rows("Security"), ids(security_rows()));
  EXPECT_EQ(documented_rows("Real providers"), ids(provider_rows()));
}

}  // namespace
}  // namespace llmgate
