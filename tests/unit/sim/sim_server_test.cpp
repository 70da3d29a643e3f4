// SimServer over a real loopback socket, driven by a plain synchronous Beast
// client. Profiles use millisecond TTFTs and fast TPS so the suite stays fast;
// timings are only ever asserted as lower bounds (a sleep is never shorter).
#include "tools/sim/sim_server.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <chrono>
#include <nlohmann/json.hpp>
#include <thread>
#include <vector>

namespace llmgate::sim {
namespace {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = net::ip::tcp;
using nlohmann::json;
using ::testing::EndsWith;
using ::testing::HasSubstr;
using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

using Response = http::response<http::string_body>;

Profile fast_profile(int tokens) {
  Profile p;
  p.ttft = {Distribution::Kind::kFixed, 2, 0};
  p.tps = {Distribution::Kind::kFixed, 5000, 0};
  p.output_tokens_min = p.output_tokens_max = tokens;
  return p;
}

std::string chat_body(const std::string& model, bool stream, json extra = json::object()) {
  json body = {{"model", model},
               {"messages", {{{"role", "user"}, {"content", "Say something, please."}}}},
               {"stream", stream}};
  body.update(extra);
  return body.dump();
}

// Synchronous operations never run the context, so every client can share
// one (and a test with hundreds of clients does not open hundreds of epolls).
net::io_context& client_context() {
  static net::io_context ioc;
  return ioc;
}

// One keep-alive connection to the server under test, blocking I/O. A server
// that never answers hangs the test until ctest's timeout.
class Client {
 public:
  explicit Client(std::uint16_t port) : stream_(client_context()) {
    stream_.connect(tcp::endpoint(net::ip::make_address("127.0.0.1"), port));
  }

  void send(http::verb verb, const std::string& target, const std::string& body = "",
            const std::vector<std::pair<std::string, std::string>>& headers = {}) {
    http::request<http::string_body> req{verb, target, 11};
    req.set(http::field::host, "127.0.0.1");
    for (const auto& [name, value] : headers) req.set(name, value);
    if (!body.empty() || verb == http::verb::post || verb == http::verb::put) {
      req.set(http::field::content_type, "application/json");
      req.body() = body;
      req.prepare_payload();
    }
    http::write(stream_, req);
  }

  Response receive() {
    Response res;
    http::read(stream_, buffer_, res);
    return res;
  }

  Response request(http::verb verb, const std::string& target, const std::string& body = "",
                   const std::vector<std::pair<std::string, std::string>>& headers = {}) {
    send(verb, target, body, headers);
    return receive();
  }

  Response post(const std::string& body, const std::string& target = "/v1/chat/completions") {
    return request(http::verb::post, target, body);
  }

  beast::tcp_stream& stream() { return stream_; }
  beast::flat_buffer& buffer() { return buffer_; }

 private:
  beast::tcp_stream stream_;
  beast::flat_buffer buffer_;
};

// The data payloads of an SSE body, in order.
std::vector<std::string> events_of(const std::string& body) {
  std::vector<std::string> events;
  std::size_t pos = 0;
  for (std::size_t end; (end = body.find("\n\n", pos)) != std::string::npos; pos = end + 2) {
    std::string event = body.substr(pos, end - pos);
    EXPECT_EQ(event.rfind("data: ", 0), 0u) << event;
    events.push_back(event.substr(6));
  }
  return events;
}

std::string content_of(const std::vector<std::string>& events) {
  std::string content;
  for (const auto& e : events) {
    const json j = json::parse(e, nullptr, false);
    if (j.is_discarded() || j["choices"].empty()) continue;
    const json& delta = j["choices"][0]["delta"];
    if (delta.contains("content")) content += delta["content"].get<std::string>();
  }
  return content;
}

// Polls `done` for up to `limit`: for effects that happen on the server's
// threads after the client has moved on.
template <typename Pred>
bool eventually(Pred done, std::chrono::milliseconds limit = 3000ms) {
  const auto deadline = Clock::now() + limit;
  while (Clock::now() < deadline) {
    if (done()) return true;
    std::this_thread::sleep_for(5ms);
  }
  return done();
}

class SimServerTest : public ::testing::Test {
 protected:
  void start(SimOptions options = {}) {
    server_ = std::make_unique<SimServer>(std::move(options));
    port_ = server_->start();
    ASSERT_NE(port_, 0);
  }
  SimOptions options_with(const std::string& model, const Profile& p) {
    SimOptions o;
    o.profiles[model] = p;
    return o;
  }

  std::unique_ptr<SimServer> server_;
  std::uint16_t port_ = 0;
};

TEST_F(SimServerTest, StreamsRoleTokensFinishUsageAndDone) {
  SimOptions o = options_with("m", fast_profile(5));
  o.region = "eu-west";
  start(o);
  Client c(port_);
  const Response res =
      c.post(chat_body("m", true, {{"stream_options", {{"include_usage", true}}}}));

  EXPECT_EQ(res.result(), http::status::ok);
  EXPECT_EQ(res[http::field::content_type], "text/event-stream");
  EXPECT_EQ(res[http::field::cache_control], "no-cache");
  EXPECT_TRUE(res.chunked());
  EXPECT_EQ(res["x-sim-region"], "eu-west");

  const auto events = events_of(res.body());
  ASSERT_EQ(events.size(), 1 + 5 + 1 + 1 + 1u);  // role, tokens, finish, usage, [DONE]
  const json role = json::parse(events[0]);
  EXPECT_EQ(role["choices"][0]["delta"]["role"], "assistant");
  for (std::size_t i = 0; i + 1 < events.size(); ++i) {
    const json e = json::parse(events[i]);
    EXPECT_EQ(e["object"], "chat.completion.chunk");
    EXPECT_EQ(e["model"], "m");
    EXPECT_EQ(e["id"], role["id"]);
    EXPECT_TRUE(e.contains("usage")) << "event " << i;
  }
  EXPECT_EQ(content_of(events), completion_text(5));
  const json finish = json::parse(events[6]);
  EXPECT_EQ(finish["choices"][0]["finish_reason"], "stop");
  const json usage = json::parse(events[7]);
  EXPECT_EQ(usage["choices"], json::array());
  EXPECT_EQ(usage["usage"]["completion_tokens"], 5);
  EXPECT_EQ(usage["usage"]["total_tokens"], usage["usage"]["prompt_tokens"].get<int>() + 5);
  EXPECT_EQ(events[8], "[DONE]");
  EXPECT_TRUE(eventually([&] { return server_->stats().streams_completed == 1; }));
}

TEST_F(SimServerTest, StreamWithoutIncludeUsageHasNoUsageAnywhere) {
  start(options_with("m", fast_profile(3)));
  Client c(port_);
  const auto events = events_of(c.post(chat_body("m", true)).body());
  ASSERT_EQ(events.size(), 1 + 3 + 1 + 1u);
  for (std::size_t i = 0; i + 1 < events.size(); ++i) {
    EXPECT_FALSE(json::parse(events[i]).contains("usage"));
  }
}

TEST_F(SimServerTest, NonStreamingAnswersOneChatCompletion) {
  start(options_with("m", fast_profile(7)));
  Client c(port_);
  const Response res = c.post(chat_body("m", false));
  EXPECT_EQ(res.result(), http::status::ok);
  EXPECT_EQ(res[http::field::content_type], "application/json");
  const json body = json::parse(res.body());
  EXPECT_EQ(body["object"], "chat.completion");
  EXPECT_EQ(body["model"], "m");
  EXPECT_EQ(body["choices"][0]["message"]["role"], "assistant");
  EXPECT_EQ(body["choices"][0]["message"]["content"], completion_text(7));
  EXPECT_EQ(body["choices"][0]["finish_reason"], "stop");
  EXPECT_EQ(body["usage"]["completion_tokens"], 7);
}

TEST_F(SimServerTest, MaxTokensCapsTheStreamAndFinishesWithLength) {
  start(options_with("m", fast_profile(20)));
  Client c(port_);
  const auto events = events_of(c.post(chat_body("m", true, {{"max_tokens", 4}})).body());
  ASSERT_EQ(events.size(), 1 + 4 + 1 + 1u);
  EXPECT_EQ(json::parse(events[5])["choices"][0]["finish_reason"], "length");

  const json body =
      json::parse(c.post(chat_body("m", false, {{"max_completion_tokens", 3}})).body());
  EXPECT_EQ(body["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(body["usage"]["completion_tokens"], 3);
}

TEST_F(SimServerTest, AcceptsAnyPathPrefixBeforeChatCompletions) {
  start(options_with("m", fast_profile(1)));
  Client c(port_);
  EXPECT_EQ(c.post(chat_body("m", false), "/openai/v1/chat/completions").result(),
            http::status::ok);
  EXPECT_EQ(c.post(chat_body("m", false), "/chat/completions").result(), http::status::ok);
  EXPECT_EQ(c.request(http::verb::get, "/v1/chat/completions").result(),
            http::status::method_not_allowed);
}

TEST_F(SimServerTest, ErrorRateOneAnswersEveryRequestWithTheErrorAndRetryAfter) {
  Profile p = fast_profile(3);
  p.error_rate = 1;
  p.error_status = 429;
  p.retry_after_s = 7;
  p.region = "us-east";
  start(options_with("m", p));
  Client c(port_);
  for (int i = 0; i < 3; ++i) {
    const Response res = c.post(chat_body("m", i % 2 == 0));
    EXPECT_EQ(res.result(), http::status::too_many_requests);
    EXPECT_EQ(res[http::field::retry_after], "7");
    EXPECT_EQ(res["x-sim-region"], "us-east");
    const json body = json::parse(res.body());
    EXPECT_EQ(body["error"]["type"], "rate_limit_error");
    EXPECT_TRUE(body["error"].contains("message"));
  }
  EXPECT_EQ(server_->stats().errors_injected, 3u);
}

TEST_F(SimServerTest, ServerErrorsHaveServerErrorTypeAndNoRetryAfterUnlessSet) {
  Profile p = fast_profile(3);
  p.error_rate = 1;
  p.error_status = 503;
  start(options_with("m", p));
  Client c(port_);
  const Response res = c.post(chat_body("m", true));
  EXPECT_EQ(res.result(), http::status::service_unavailable);
  EXPECT_EQ(res.count(http::field::retry_after), 0u);
  EXPECT_EQ(json::parse(res.body())["error"]["type"], "server_error");
}

TEST_F(SimServerTest, CutAfterTokensEndsTheBodyMidEventWithoutTheLastChunk) {
  Profile p = fast_profile(10);
  p.cut_after_tokens = 2;
  start(options_with("m", p));
  Client c(port_);
  c.send(http::verb::post, "/v1/chat/completions", chat_body("m", true));
  http::response_parser<http::string_body> parser;
  beast::error_code ec;
  http::read(c.stream(), c.buffer(), parser, ec);
  EXPECT_TRUE(ec == http::error::partial_message || ec == http::error::end_of_stream ||
              ec == net::error::connection_reset)
      << ec.message();
  const std::string& body = parser.get().body();
  EXPECT_THAT(body, EndsWith("data: {\"id\":\"chatcm"));
  EXPECT_EQ(content_of(events_of(body)), completion_text(2));
  EXPECT_THAT(body, ::testing::Not(HasSubstr("[DONE]")));
  EXPECT_TRUE(eventually([&] { return server_->stats().streams_cut == 1; }));
  EXPECT_EQ(server_->stats().streams_completed, 0u);
}

TEST_F(SimServerTest, MalformedAfterTokensSendsOneBadEventThenCarriesOn) {
  Profile p = fast_profile(4);
  p.malformed_after_tokens = 1;
  start(options_with("m", p));
  Client c(port_);
  const std::string body = c.post(chat_body("m", true)).body();
  const auto events = events_of(body);
  ASSERT_EQ(events.size(), 1 + 4 + 1 + 1 + 1u);
  EXPECT_EQ(events[2], "{not json");  // after role and one token
  EXPECT_EQ(content_of(events), completion_text(4));
  EXPECT_EQ(events.back(), "[DONE]");
}

TEST_F(SimServerTest, FaultRateZeroAnswersNormallyDespiteConfiguredFaults) {
  Profile p = fast_profile(4);
  p.stall_before_first_token_ms = 600000;
  p.cut_after_tokens = 1;
  p.malformed_after_tokens = 1;
  p.fault_rate = 0;
  start(options_with("m", p));
  Client c(port_);
  const auto events = events_of(c.post(chat_body("m", true)).body());
  EXPECT_EQ(content_of(events), completion_text(4));
  EXPECT_EQ(events.back(), "[DONE]");
  EXPECT_EQ(std::count(events.begin(), events.end(), "{not json"), 0);
  EXPECT_EQ(server_->stats().streams_cut, 0u);
}

TEST_F(SimServerTest, FaultRateAppliesAllFaultsToAShareOfRequests) {
  Profile p = fast_profile(4);
  p.cut_after_tokens = 2;
  p.malformed_after_tokens = 1;
  p.fault_rate = 0.5;
  start(options_with("m", p));
  constexpr int kRequests = 60;
  int faulted = 0;
  for (int i = 0; i < kRequests; ++i) {
    Client c(port_);  // a cut stream closes the connection
    c.send(http::verb::post, "/v1/chat/completions", chat_body("m", true));
    http::response_parser<http::string_body> parser;
    beast::error_code ec;
    http::read(c.stream(), c.buffer(), parser, ec);
    const std::string& body = parser.get().body();
    const bool malformed = body.find("data: {not json") != std::string::npos;
    const bool done = body.find("[DONE]") != std::string::npos;
    EXPECT_NE(malformed, done) << "all faults or none: " << body;  // cut => no [DONE]
    faulted += malformed;
  }
  EXPECT_GT(faulted, kRequests / 5);
  EXPECT_LT(faulted, kRequests * 4 / 5);
  EXPECT_TRUE(eventually([&] { return server_->stats().streams_cut == unsigned(faulted); }));
}

TEST_F(SimServerTest, HeadersAndRoleChunkArriveBeforeTheFirstToken) {
  Profile p = fast_profile(3);
  p.stall_before_first_token_ms = 600000;  // role chunk, then silence
  start(options_with("m", p));
  Client c(port_);
  c.send(http::verb::post, "/v1/chat/completions", chat_body("m", true));
  http::response_parser<http::string_body> parser;
  http::read_header(c.stream(), c.buffer(), parser);
  EXPECT_EQ(parser.get().result(), http::status::ok);
  while (parser.get().body().find("\n\n") == std::string::npos) {
    http::read_some(c.stream(), c.buffer(), parser);
  }
  EXPECT_THAT(parser.get().body(), HasSubstr(R"("role":"assistant")"));
  EXPECT_EQ(server_->stats().in_flight, 1u);
}

TEST_F(SimServerTest, ClientDisconnectDuringAStallIsCountedAsAbortedPromptly) {
  Profile p = fast_profile(3);
  p.stall_before_first_token_ms = 600000;
  start(options_with("m", p));
  {
    Client c(port_);
    c.send(http::verb::post, "/v1/chat/completions", chat_body("m", true));
    http::response_parser<http::string_body> parser;
    http::read_header(c.stream(), c.buffer(), parser);
    ASSERT_EQ(server_->stats().in_flight, 1u);
  }  // the client closes its socket here
  EXPECT_TRUE(eventually([&] {
    const SimStats s = server_->stats();
    return s.streams_aborted == 1 && s.in_flight == 0;
  })) << "aborted "
      << server_->stats().streams_aborted << " in_flight " << server_->stats().in_flight;
  EXPECT_EQ(server_->stats().streams_completed, 0u);
}

TEST_F(SimServerTest, ClientDisconnectDuringNonStreamingWaitIsCountedAsAborted) {
  Profile p = fast_profile(3);
  p.ttft = {Distribution::Kind::kFixed, 600000, 0};
  start(options_with("m", p));
  {
    Client c(port_);
    c.send(http::verb::post, "/v1/chat/completions", chat_body("m", false));
    ASSERT_TRUE(eventually([&] { return server_->stats().in_flight == 1; }));
  }
  EXPECT_TRUE(eventually([&] {
    const SimStats s = server_->stats();
    return s.streams_aborted == 1 && s.in_flight == 0;
  }));
}

TEST_F(SimServerTest, StallAfterTokensDelaysTheRestOfTheStream) {
  Profile p = fast_profile(4);
  p.stall_after_tokens = 2;
  p.stall_ms = 150;
  start(options_with("m", p));
  Client c(port_);
  const auto t0 = Clock::now();
  const auto events = events_of(c.post(chat_body("m", true)).body());
  EXPECT_GE(Clock::now() - t0, 150ms);
  EXPECT_EQ(content_of(events), completion_text(4));
}

TEST_F(SimServerTest, FirstTokenComesNoSoonerThanTheTtft) {
  Profile p = fast_profile(2);
  p.ttft = {Distribution::Kind::kFixed, 120, 0};
  p.tps = {Distribution::Kind::kFixed, 20, 0};  // 2 tokens: one more interval of 50 ms
  start(options_with("m", p));
  Client c(port_);
  const auto t0 = Clock::now();
  c.post(chat_body("m", false));
  EXPECT_GE(Clock::now() - t0, 120ms + 100ms);  // non-streamed: TTFT + N / tps
}

TEST_F(SimServerTest, SetProfileTakesEffectOnTheNextRequest) {
  start(options_with("m", fast_profile(3)));
  Client c(port_);
  EXPECT_EQ(json::parse(c.post(chat_body("m", false)).body())["usage"]["completion_tokens"], 3);
  server_->set_profile("m", fast_profile(6));
  EXPECT_EQ(json::parse(c.post(chat_body("m", false)).body())["usage"]["completion_tokens"], 6);
}

TEST_F(SimServerTest, UnknownModelsUseTheDefaultProfile) {
  SimOptions o;
  o.default_profile = fast_profile(2);
  start(o);
  Client c(port_);
  const json body = json::parse(c.post(chat_body("anything-else", false)).body());
  EXPECT_EQ(body["usage"]["completion_tokens"], 2);
  EXPECT_EQ(body["model"], "anything-else");
}

TEST_F(SimServerTest, LastRequestRecordsLowerCasedHeadersTargetAndBody) {
  start(options_with("m", fast_profile(1)));
  EXPECT_FALSE(server_->last_request());
  Client c(port_);
  const std::string body = chat_body("m", false);
  c.request(http::verb::post, "/openai/v1/chat/completions?api-version=1", body,
            {{"X-Trace-Id", "abc123"}, {"Authorization", "Bearer sk-test"}});
  const auto last = server_->last_request();
  ASSERT_TRUE(last);
  EXPECT_EQ(last->target, "/openai/v1/chat/completions?api-version=1");
  EXPECT_EQ(last->body, body);
  EXPECT_EQ(last->headers.at("x-trace-id"), "abc123");
  EXPECT_EQ(last->headers.at("authorization"), "Bearer sk-test");

  const json admin = json::parse(c.request(http::verb::get, "/admin/last-request").body());
  EXPECT_EQ(admin["headers"]["x-trace-id"], "abc123");
  EXPECT_EQ(admin["body"], body);
}

TEST_F(SimServerTest, ApiKeyIsRequiredWhenConfigured) {
  SimOptions o = options_with("m", fast_profile(1));
  o.api_key = "sk-sim";
  start(o);
  Client c(port_);
  const Response missing = c.post(chat_body("m", false));
  EXPECT_EQ(missing.result(), http::status::unauthorized);
  EXPECT_EQ(json::parse(missing.body())["error"]["code"], "invalid_api_key");
  EXPECT_EQ(c.request(http::verb::post, "/v1/chat/completions", chat_body("m", false),
                      {{"Authorization", "Bearer wrong"}})
                .result(),
            http::status::unauthorized);
  EXPECT_EQ(c.request(http::verb::post, "/v1/chat/completions", chat_body("m", false),
                      {{"Authorization", "Bearer sk-sim"}})
                .result(),
            http::status::ok);
}

TEST_F(SimServerTest, BadRequestsGetOpenAIShaped400s) {
  start(options_with("m", fast_profile(1)));
  Client c(port_);
  for (const std::string body : {"{nope", R"({"messages":[]})", R"({"model":"m"})", "[]"}) {
    const Response res = c.post(body);
    EXPECT_EQ(res.result(), http::status::bad_request) << body;
    const json j = json::parse(res.body());
    EXPECT_EQ(j["error"]["type"], "invalid_request_error") << body;
    EXPECT_TRUE(j["error"].contains("param")) << body;
    EXPECT_TRUE(j["error"].contains("code")) << body;
  }
  EXPECT_EQ(server_->stats().in_flight, 0u);
}

TEST_F(SimServerTest, UnknownPathsGetOpenAIShaped404s) {
  start();
  Client c(port_);
  const Response res = c.request(http::verb::get, "/v1/nothing-here");
  EXPECT_EQ(res.result(), http::status::not_found);
  EXPECT_EQ(json::parse(res.body())["error"]["type"], "invalid_request_error");
}

TEST_F(SimServerTest, AdminPutMergesOverTheModelsProfileAndRejectsBadInput) {
  Profile p = fast_profile(3);
  p.region = "eu";
  start(options_with("m", p));
  Client c(port_);
  const Response put = c.request(http::verb::put, "/admin/profiles/m", R"({"output_tokens": 5})");
  EXPECT_EQ(put.result(), http::status::ok);
  const Profile updated = *server_->profile("m");
  EXPECT_EQ(updated.output_tokens_max, 5);
  EXPECT_EQ(updated.region, "eu");  // untouched by the partial update
  EXPECT_EQ(json::parse(c.post(chat_body("m", false)).body())["usage"]["completion_tokens"], 5);

  const Response bad = c.request(http::verb::put, "/admin/profiles/m", R"({"ttft": 1})");
  EXPECT_EQ(bad.result(), http::status::bad_request);
  EXPECT_THAT(json::parse(bad.body())["error"]["message"].get<std::string>(), HasSubstr("ttft"));
  EXPECT_EQ(c.request(http::verb::put, "/admin/profiles/m", "{oops").result(),
            http::status::bad_request);
}

TEST_F(SimServerTest, AdminPutOnANewModelStartsFromTheDefault) {
  SimOptions o;
  o.default_profile = fast_profile(2);
  start(o);
  Client c(port_);
  EXPECT_EQ(
      c.request(http::verb::put, "/admin/profiles/org%2Fmodel-7b", R"({"region":"x"})").result(),
      http::status::ok);
  const auto created = server_->profile("org/model-7b");
  ASSERT_TRUE(created);
  EXPECT_EQ(created->output_tokens_max, 2);
  EXPECT_EQ(created->region, "x");

  c.request(http::verb::put, "/admin/profiles/default", R"({"output_tokens": 9})");
  EXPECT_EQ(server_->default_profile().output_tokens_max, 9);

  const json all = json::parse(c.request(http::verb::get, "/admin/profiles").body());
  EXPECT_EQ(all["default"]["output_tokens"], 9);
  EXPECT_EQ(all["org/model-7b"]["region"], "x");
}

TEST_F(SimServerTest, AdminStatsAndHealthz) {
  start(options_with("m", fast_profile(1)));
  Client c(port_);
  c.post(chat_body("m", true));
  EXPECT_EQ(c.request(http::verb::get, "/healthz").result(), http::status::ok);
  const json stats = json::parse(c.request(http::verb::get, "/admin/stats").body());
  EXPECT_EQ(stats["requests"], 1);
  EXPECT_EQ(stats["streams_completed"], 1);
  EXPECT_EQ(stats["in_flight"], 0);
  EXPECT_EQ(stats["streams_aborted"], 0);
  EXPECT_EQ(stats["errors_injected"], 0);
  EXPECT_EQ(stats["connections_accepted"], 1);
}

TEST_F(SimServerTest, KeepAliveServesManyRequestsOnOneConnection) {
  start(options_with("m", fast_profile(2)));
  Client c(port_);
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(c.post(chat_body("m", i % 2 == 0)).result(), http::status::ok);
  }
  const SimStats s = server_->stats();
  EXPECT_EQ(s.requests, 4u);
  EXPECT_EQ(s.connections_accepted, 1u);
}

TEST_F(SimServerTest, SameSeedGivesTheSameCompletionLengths) {
  Profile p = fast_profile(1);
  p.tps = {Distribution::Kind::kFixed, 1e6, 0};
  p.output_tokens_min = 1;
  p.output_tokens_max = 200;
  auto lengths = [&](std::uint64_t seed) {
    SimOptions o = options_with("m", p);
    o.seed = seed;
    SimServer server(o);
    Client c(server.start());
    std::vector<int> v;
    for (int i = 0; i < 8; ++i) {
      v.push_back(json::parse(c.post(chat_body("m", false)).body())["usage"]["completion_tokens"]);
    }
    return v;
  };
  EXPECT_EQ(lengths(5), lengths(5));
  EXPECT_NE(lengths(5), lengths(6));
}

TEST_F(SimServerTest, GarbageAndOversizedRequestsDoNotHurtTheServer) {
  start(options_with("m", fast_profile(1)));
  {
    Client c(port_);
    net::write(c.stream(), net::buffer(std::string("GARBAGE\r\n\r\n")));
    Response res;
    beast::error_code ec;
    http::read(c.stream(), c.buffer(), res, ec);
    if (!ec) {
      EXPECT_EQ(res.result(), http::status::bad_request);
    }
  }
  {
    Client c(port_);
    beast::error_code ec;
    http::request<http::string_body> req{http::verb::post, "/v1/chat/completions", 11};
    req.body() = std::string(2 * 1024 * 1024, 'x');
    req.prepare_payload();
    http::write(c.stream(), req, ec);  // may fail: the server stops reading at 1 MiB
    Response res;
    http::read(c.stream(), c.buffer(), res, ec);
    if (!ec) {
      EXPECT_EQ(res.result(), http::status::payload_too_large);
    }
  }
  Client c(port_);
  EXPECT_EQ(c.post(chat_body("m", false)).result(), http::status::ok);
}

TEST_F(SimServerTest, ServesManyConcurrentStreams) {
  Profile p = fast_profile(5);
  p.ttft = {Distribution::Kind::kFixed, 50, 0};
  p.tps = {Distribution::Kind::kFixed, 200, 0};
  SimOptions o = options_with("m", p);
  o.threads = 2;
  start(o);
  constexpr int kStreams = 200;
  const auto t0 = Clock::now();
  std::vector<std::unique_ptr<Client>> clients;
  for (int i = 0; i < kStreams; ++i) {
    clients.push_back(std::make_unique<Client>(port_));
    clients.back()->send(http::verb::post, "/v1/chat/completions", chat_body("m", true));
  }
  for (auto& c : clients) {
    EXPECT_EQ(content_of(events_of(c->receive().body())), completion_text(5));
  }
  // One after the other they would take 200 x 75 ms = 15 s.
  EXPECT_LT(Clock::now() - t0, 5s);
  EXPECT_TRUE(eventually([&] { return server_->stats().streams_completed == kStreams; }));
  EXPECT_EQ(server_->stats().in_flight, 0u);
}

TEST_F(SimServerTest, StopClosesOpenStreamsAndTheListener) {
  Profile p = fast_profile(3);
  p.stall_before_first_token_ms = 600000;
  start(options_with("m", p));
  Client c(port_);
  c.send(http::verb::post, "/v1/chat/completions", chat_body("m", true));
  http::response_parser<http::string_body> parser;
  http::read_header(c.stream(), c.buffer(), parser);

  server_->stop();
  beast::error_code ec;
  http::read(c.stream(), c.buffer(), parser, ec);
  EXPECT_TRUE(ec) << "the stream should end when the server stops";
  EXPECT_EQ(server_->stats().in_flight, 0u);

  net::io_context ioc;
  tcp::socket s(ioc);
  s.connect(tcp::endpoint(net::ip::make_address("127.0.0.1"), port_), ec);
  EXPECT_TRUE(ec);
}

// --- Anthropic Messages and Gemini generateContent -------------------------

using Headers = std::vector<std::pair<std::string, std::string>>;

std::string messages_body(const std::string& model, bool stream, json extra = json::object()) {
  json body = {{"model", model},
               {"max_tokens", 1024},
               {"messages", {{{"role", "user"}, {"content", "Say something, please."}}}},
               {"stream", stream}};
  body.update(extra);
  return body.dump();
}

const Headers kAnthropicHeaders = {{"anthropic-version", "2023-06-01"}};

std::string generate_body(json extra = json::object()) {
  json body = {{"contents", {{{"role", "user"}, {"parts", {{{"text", "Say something."}}}}}}}};
  body.update(extra);
  return body.dump();
}

struct SseEvent {
  std::string name;  // the `event:` line, empty without one
  std::string data;
};

// The events of an SSE body whose events end in `separator`, checking each is
// "[event: NAME\n]data: DATA".
std::vector<SseEvent> sse_events(const std::string& body, std::string_view separator) {
  std::vector<SseEvent> events;
  std::size_t pos = 0;
  for (std::size_t end; (end = body.find(separator, pos)) != std::string::npos;
       pos = end + separator.size()) {
    std::string raw = body.substr(pos, end - pos);
    SseEvent e;
    if (raw.rfind("event: ", 0) == 0) {
      const auto newline = raw.find('\n');
      e.name = raw.substr(7, newline - 7);
      raw.erase(0, newline + 1);
    }
    EXPECT_EQ(raw.rfind("data: ", 0), 0u) << raw;
    e.data = raw.substr(6);
    events.push_back(std::move(e));
  }
  return events;
}

std::string anthropic_text(const std::vector<SseEvent>& events) {
  std::string text;
  for (const auto& e : events) {
    const json j = json::parse(e.data, nullptr, false);
    if (!j.is_discarded() && j.value("type", "") == "content_block_delta" &&
        j["delta"]["type"] == "text_delta") {
      text += j["delta"]["text"].get<std::string>();
    }
  }
  return text;
}

std::string gemini_text(const std::vector<SseEvent>& events) {
  std::string text;
  for (const auto& e : events) {
    const json j = json::parse(e.data, nullptr, false);
    if (j.is_discarded() || !j.contains("candidates")) continue;
    for (const auto& part : j["candidates"][0]["content"]["parts"]) {
      if (part.contains("text") && !part.value("thought", false)) text += part["text"];
    }
  }
  return text;
}

TEST_F(SimServerTest, StreamsAnAnthropicMessageInAnthropicsFraming) {
  SimOptions o = options_with("claude-sim", fast_profile(5));
  o.region = "eu-west";
  start(o);
  Client c(port_);
  const Response res = c.request(http::verb::post, "/v1/messages",
                                 messages_body("claude-sim", true), kAnthropicHeaders);
  EXPECT_EQ(res.result(), http::status::ok);
  EXPECT_EQ(res[http::field::content_type], "text/event-stream; charset=utf-8");
  EXPECT_TRUE(res.chunked());
  EXPECT_EQ(res["request-id"], "req_sim_1");
  EXPECT_EQ(res["x-sim-region"], "eu-west");

  const auto events = sse_events(res.body(), "\n\n");
  ASSERT_EQ(events.size(), 2 + 1 + 5 + 1 + 2u);  // start, ping, block, tokens, stop, delta, stop
  for (const auto& e : events) EXPECT_EQ(json::parse(e.data)["type"], e.name);
  EXPECT_EQ(events[0].name, "message_start");
  EXPECT_EQ(json::parse(events[0].data)["message"]["id"], "msg_sim_1");
  EXPECT_EQ(json::parse(events[0].data)["message"]["model"], "claude-sim");
  EXPECT_EQ(events[1].name, "ping");
  EXPECT_EQ(events[2].name, "content_block_start");
  EXPECT_EQ(anthropic_text(events), completion_text(5));
  const json delta = json::parse(events[events.size() - 2].data);
  EXPECT_EQ(delta["delta"]["stop_reason"], "end_turn");
  EXPECT_EQ(delta["usage"]["output_tokens"], 5);
  EXPECT_EQ(events.back().name, "message_stop");
  EXPECT_TRUE(eventually([&] { return server_->stats().streams_completed == 1; }));
}

TEST_F(SimServerTest, AnswersANonStreamedAnthropicMessage) {
  start(options_with("m", fast_profile(4)));
  Client c(port_);
  const Response res = c.request(http::verb::post, "/anthropic/v1/messages",
                                 messages_body("m", false, {{"max_tokens", 3}}), kAnthropicHeaders);
  EXPECT_EQ(res.result(), http::status::ok);
  EXPECT_EQ(res[http::field::content_type], "application/json");
  const json body = json::parse(res.body());
  EXPECT_EQ(body["type"], "message");
  EXPECT_EQ(body["content"][0]["text"], completion_text(3));
  EXPECT_EQ(body["stop_reason"], "max_tokens");
  EXPECT_EQ(body["usage"]["output_tokens"], 3);
}

TEST_F(SimServerTest, AnthropicNeedsItsKeyItsVersionAndMaxTokens) {
  SimOptions o = options_with("m", fast_profile(1));
  o.api_key = "sk-ant-sim";
  start(o);
  Client c(port_);
  auto post = [&](const std::string& body, const Headers& headers) {
    return c.request(http::verb::post, "/v1/messages", body, headers);
  };
  const Response missing = post(messages_body("m", false), kAnthropicHeaders);
  EXPECT_EQ(missing.result(), http::status::unauthorized);
  EXPECT_EQ(json::parse(missing.body())["type"], "error");
  EXPECT_EQ(json::parse(missing.body())["error"]["type"], "authentication_error");
  EXPECT_EQ(
      post(messages_body("m", false), {{"anthropic-version", "2023-06-01"}, {"x-api-key", "wrong"}})
          .result(),
      http::status::unauthorized);
  // A Bearer token is OpenAI's way, not Anthropic's.
  EXPECT_EQ(post(messages_body("m", false),
                 {{"anthropic-version", "2023-06-01"}, {"Authorization", "Bearer sk-ant-sim"}})
                .result(),
            http::status::unauthorized);

  const Response no_version = post(messages_body("m", false), {{"x-api-key", "sk-ant-sim"}});
  EXPECT_EQ(no_version.result(), http::status::bad_request);
  EXPECT_THAT(json::parse(no_version.body())["error"]["message"].get<std::string>(),
              HasSubstr("anthropic-version"));

  const Headers good = {{"anthropic-version", "2023-06-01"}, {"x-api-key", "sk-ant-sim"}};
  json no_max = json::parse(messages_body("m", false));
  no_max.erase("max_tokens");
  const Response bad = post(no_max.dump(), good);
  EXPECT_EQ(bad.result(), http::status::bad_request);
  EXPECT_EQ(json::parse(bad.body())["error"]["type"], "invalid_request_error");
  EXPECT_EQ(json::parse(bad.body())["error"]["message"], "max_tokens: Field required");
  EXPECT_EQ(post(messages_body("m", false), good).result(), http::status::ok);
}

TEST_F(SimServerTest, AnthropicInjectedOverloadIs529WithRetryAfter) {
  Profile p = fast_profile(3);
  p.error_rate = 1;
  p.error_status = 529;
  p.retry_after_s = 4;
  start(options_with("m", p));
  Client c(port_);
  const Response res =
      c.request(http::verb::post, "/v1/messages", messages_body("m", true), kAnthropicHeaders);
  EXPECT_EQ(res.result_int(), 529u);
  EXPECT_EQ(res[http::field::retry_after], "4");
  const json body = json::parse(res.body());
  EXPECT_EQ(body["error"]["type"], "overloaded_error");
  EXPECT_EQ(body["request_id"], std::string(res["request-id"]));
  EXPECT_EQ(server_->stats().errors_injected, 1u);
}

TEST_F(SimServerTest, AnthropicCutAndMalformedHitTheirTokenPositions) {
  Profile p = fast_profile(6);
  p.malformed_after_tokens = 1;
  p.cut_after_tokens = 3;
  start(options_with("m", p));
  Client c(port_);
  c.send(http::verb::post, "/v1/messages", messages_body("m", true), kAnthropicHeaders);
  http::response_parser<http::string_body> parser;
  beast::error_code ec;
  http::read(c.stream(), c.buffer(), parser, ec);
  const std::string& body = parser.get().body();
  EXPECT_THAT(body, HasSubstr("event: content_block_delta\ndata: {not json\n\n"));
  EXPECT_THAT(body, EndsWith("data: {\"type\":\"content_blo"));
  EXPECT_THAT(body, ::testing::Not(HasSubstr("message_stop")));
  EXPECT_EQ(anthropic_text(sse_events(body, "\n\n")), completion_text(3));
  EXPECT_TRUE(eventually([&] { return server_->stats().streams_cut == 1; }));
}

TEST_F(SimServerTest, ErrorAfterTokensEndsEachProtocolsStreamWithAnInBandError) {
  Profile p = fast_profile(5);
  p.error_after_tokens = 2;
  start(options_with("m", p));
  Client c(port_);

  const Response anthropic =
      c.request(http::verb::post, "/v1/messages", messages_body("m", true), kAnthropicHeaders);
  EXPECT_EQ(anthropic.result(), http::status::ok);
  const auto a = sse_events(anthropic.body(), "\n\n");
  ASSERT_FALSE(a.empty());
  EXPECT_EQ(a.back().name, "error");
  EXPECT_EQ(json::parse(a.back().data)["error"]["type"], "overloaded_error");
  EXPECT_EQ(anthropic_text(a), completion_text(2));

  const Response openai = c.post(chat_body("m", true));
  const auto o = events_of(openai.body());
  ASSERT_FALSE(o.empty());
  EXPECT_EQ(json::parse(o.back())["error"]["type"], "server_error");
  EXPECT_EQ(content_of({o.begin(), o.end() - 1}), completion_text(2));  // no [DONE] after it

  const Response gemini = c.request(
      http::verb::post, "/v1beta/models/m:streamGenerateContent?alt=sse", generate_body());
  const auto g = sse_events(gemini.body(), "\r\n\r\n");
  ASSERT_FALSE(g.empty());
  EXPECT_EQ(json::parse(g.back().data)["error"]["status"], "UNAVAILABLE");
  EXPECT_EQ(gemini_text(g), completion_text(2));

  // A non-streamed answer fails as a whole, with the vendor's status.
  const Response once =
      c.request(http::verb::post, "/v1/messages", messages_body("m", false), kAnthropicHeaders);
  EXPECT_EQ(once.result_int(), 529u);
  EXPECT_EQ(json::parse(once.body())["error"]["type"], "overloaded_error");

  // Each ended whole: the connection was kept alive throughout.
  EXPECT_TRUE(eventually([&] { return server_->stats().streams_errored == 4; }));
  EXPECT_EQ(server_->stats().connections_accepted, 1u);
  EXPECT_EQ(server_->stats().streams_completed, 0u);
}

TEST_F(SimServerTest, StreamsGeminiResponsesInGooglesSseFraming) {
  SimOptions o = options_with("gemini-sim", fast_profile(4));
  start(o);
  Client c(port_);
  const Response res = c.request(
      http::verb::post, "/v1beta/models/gemini-sim:streamGenerateContent?alt=sse", generate_body());
  EXPECT_EQ(res.result(), http::status::ok);
  EXPECT_EQ(res[http::field::content_type], "text/event-stream");
  EXPECT_TRUE(res.chunked());
  const std::string& body = res.body();
  // Every event is "data: <json>\r\n\r\n"; there is no [DONE].
  const auto events = sse_events(body, "\r\n\r\n");
  ASSERT_EQ(events.size(), 4 + 1u);
  std::size_t framed = 0;
  for (const auto& e : events) framed += 6 + e.data.size() + 4;
  EXPECT_EQ(framed, body.size());
  EXPECT_THAT(body, ::testing::Not(HasSubstr("[DONE]")));
  for (const auto& e : events) {
    const json j = json::parse(e.data);
    EXPECT_EQ(j["modelVersion"], "gemini-sim");
    EXPECT_EQ(j["candidates"][0]["content"]["role"], "model");
  }
  EXPECT_EQ(gemini_text(events), completion_text(4));
  const json last = json::parse(events.back().data);
  EXPECT_EQ(last["candidates"][0]["finishReason"], "STOP");
  EXPECT_EQ(last["usageMetadata"]["candidatesTokenCount"], 4);
  EXPECT_TRUE(eventually([&] { return server_->stats().streams_completed == 1; }));

  const auto recorded = server_->last_request();
  ASSERT_TRUE(recorded);
  EXPECT_EQ(recorded->target, "/v1beta/models/gemini-sim:streamGenerateContent?alt=sse");
  EXPECT_EQ(server_->stats().requests, 1u);
}

TEST_F(SimServerTest, GeminiWithoutAltSseStreamsAJsonArrayAndGenerateContentAnswersOnce) {
  start(options_with("g", fast_profile(3)));
  Client c(port_);
  const Response array =
      c.request(http::verb::post, "/v1beta/models/g:streamGenerateContent", generate_body());
  EXPECT_EQ(array[http::field::content_type], "application/json; charset=UTF-8");
  const json elements = json::parse(array.body());
  ASSERT_TRUE(elements.is_array());
  EXPECT_EQ(elements.size(), 3 + 1u);

  const Response once = c.request(http::verb::post, "/v1beta/models/g:generateContent",
                                  generate_body({{"generationConfig", {{"maxOutputTokens", 2}}}}));
  EXPECT_EQ(once.result(), http::status::ok);
  const json body = json::parse(once.body());
  EXPECT_EQ(body["candidates"][0]["content"]["parts"][0]["text"], completion_text(2));
  EXPECT_EQ(body["candidates"][0]["finishReason"], "MAX_TOKENS");

  const Response bad =
      c.request(http::verb::post, "/v1beta/models/g:generateContent", R"({"contents":[]})");
  EXPECT_EQ(bad.result(), http::status::bad_request);
  EXPECT_EQ(json::parse(bad.body())["error"]["status"], "INVALID_ARGUMENT");
}

TEST_F(SimServerTest, GeminiKeyComesInAHeaderOrTheQuery) {
  SimOptions o = options_with("g", fast_profile(1));
  o.api_key = "AIza-sim";
  start(o);
  Client c(port_);
  const std::string path = "/v1beta/models/g:generateContent";
  const Response missing = c.request(http::verb::post, path, generate_body());
  EXPECT_EQ(missing.result(), http::status::forbidden);
  EXPECT_EQ(json::parse(missing.body())["error"]["status"], "PERMISSION_DENIED");
  const Response wrong =
      c.request(http::verb::post, path, generate_body(), {{"x-goog-api-key", "nope"}});
  EXPECT_EQ(wrong.result(), http::status::bad_request);
  EXPECT_EQ(json::parse(wrong.body())["error"]["details"][0]["reason"], "API_KEY_INVALID");
  EXPECT_EQ(
      c.request(http::verb::post, path, generate_body(), {{"x-goog-api-key", "AIza-sim"}}).result(),
      http::status::ok);
  EXPECT_EQ(c.request(http::verb::post, path + "?key=AIza-sim", generate_body()).result(),
            http::status::ok);
}

TEST_F(SimServerTest, GeminiInjectedErrorsAreGoogleErrorsWithRetryInfo) {
  Profile p = fast_profile(3);
  p.error_rate = 1;
  p.error_status = 429;
  p.retry_after_s = 9;
  start(options_with("g", p));
  Client c(port_);
  const Response res = c.request(http::verb::post, "/v1beta/models/g:streamGenerateContent?alt=sse",
                                 generate_body());
  EXPECT_EQ(res.result(), http::status::too_many_requests);
  EXPECT_EQ(res[http::field::content_type], "application/json; charset=UTF-8");
  EXPECT_EQ(res.count(http::field::retry_after), 0u);  // Google says it in the body
  const json e = json::parse(res.body())["error"];
  EXPECT_EQ(e["code"], 429);
  EXPECT_EQ(e["status"], "RESOURCE_EXHAUSTED");
  EXPECT_EQ(e["details"][0]["retryDelay"], "9s");
}

TEST_F(SimServerTest, GeminiSafetyBlockIsA200WithoutCandidates) {
  Profile p = fast_profile(3);
  p.safety_block = true;
  start(options_with("g", p));
  Client c(port_);
  const Response streamed = c.request(
      http::verb::post, "/v1beta/models/g:streamGenerateContent?alt=sse", generate_body());
  EXPECT_EQ(streamed.result(), http::status::ok);
  const auto events = sse_events(streamed.body(), "\r\n\r\n");
  ASSERT_EQ(events.size(), 1u);
  const json blocked = json::parse(events[0].data);
  EXPECT_EQ(blocked["promptFeedback"]["blockReason"], "SAFETY");
  EXPECT_FALSE(blocked.contains("candidates"));

  const json once = json::parse(
      c.request(http::verb::post, "/v1beta/models/g:generateContent", generate_body()).body());
  EXPECT_EQ(once["promptFeedback"]["blockReason"], "SAFETY");
  EXPECT_FALSE(once.contains("candidates"));
  // The OpenAI path does not know safety blocks.
  EXPECT_EQ(content_of(events_of(c.post(chat_body("g", true)).body())), completion_text(3));
}

TEST_F(SimServerTest, ThoughtsAndThinkingAreShownOnlyWhenAsked) {
  Profile p = fast_profile(4);
  p.reasoning_tokens = 2;
  start(options_with("m", p));
  Client c(port_);
  const std::string plain =
      c.request(http::verb::post, "/v1/messages", messages_body("m", true), kAnthropicHeaders)
          .body();
  EXPECT_THAT(plain, ::testing::Not(HasSubstr("thinking_delta")));
  const std::string thinking =
      c.request(http::verb::post, "/v1/messages",
                messages_body("m", true,
                              {{"max_tokens", 2048},
                               {"thinking", {{"type", "enabled"}, {"budget_tokens", 1024}}}}),
                kAnthropicHeaders)
          .body();
  EXPECT_THAT(thinking, HasSubstr("thinking_delta"));
  EXPECT_THAT(thinking, HasSubstr("signature_delta"));

  const std::string path = "/v1beta/models/m:streamGenerateContent?alt=sse";
  EXPECT_THAT(c.request(http::verb::post, path, generate_body()).body(),
              ::testing::Not(HasSubstr("\"thought\": true")));
  EXPECT_THAT(
      c.request(
           http::verb::post, path,
           generate_body({{"generationConfig", {{"thinkingConfig", {{"includeThoughts", true}}}}}}))
          .body(),
      HasSubstr("\"thought\": true"));
}

TEST_F(SimServerTest, WrongMethodsOnVendorPathsGetTheVendorsShape) {
  start(options_with("m", fast_profile(1)));
  Client c(port_);
  const Response messages = c.request(http::verb::get, "/v1/messages");
  EXPECT_EQ(messages.result(), http::status::method_not_allowed);
  EXPECT_EQ(json::parse(messages.body())["type"], "error");
  const Response gemini = c.request(http::verb::get, "/v1beta/models/m:generateContent");
  EXPECT_EQ(json::parse(gemini.body())["error"]["status"], "NOT_FOUND");
}

}  // namespace
}  // namespace llmgate::sim
