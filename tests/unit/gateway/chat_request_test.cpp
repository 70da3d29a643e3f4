#include "gateway/apis/chat_request.h"

#include <gtest/gtest.h>

#include "gateway/http/headers.h"
#include "providers/upstream_protocol.h"

namespace llmgate::gateway {
namespace {

const ApiError& error_of(const std::variant<ChatRequest, ApiError>& v) {
  return std::get<ApiError>(v);
}

TEST(ChatRequest, AcceptsAMinimalRequest) {
  auto r = parse_chat_request("application/json",
                              R"({"model":"m","messages":[{"role":"user","content":"hi"}]})");
  ASSERT_TRUE(std::holds_alternative<ChatRequest>(r));
  EXPECT_EQ(std::get<ChatRequest>(r).model, "m");
  EXPECT_FALSE(std::get<ChatRequest>(r).stream);
}

TEST(ChatRequest, ReadsStreamAndIncludeUsage) {
  auto r = parse_chat_request(
      "application/json; charset=utf-8",
      R"({"model":"m","messages":[{"role":"user","content":"hi"}],"stream":true,"stream_options":{"include_usage":true}})");
  ASSERT_TRUE(std::holds_alternative<ChatRequest>(r));
  EXPECT_TRUE(std::get<ChatRequest>(r).stream);
  EXPECT_TRUE(std::get<ChatRequest>(r).include_usage);
}

TEST(ChatRequest, KnowsTheReasoningEffortsThatAreMeasuredApart) {
  auto effort = [](const std::string& extra) {
    auto r = parse_chat_request(
        "application/json",
        R"({"model":"m","messages":[{"role":"user","content":"hi"}])" + extra + "}");
    return std::get<ChatRequest>(r).reasoning_effort;
  };
  EXPECT_EQ(effort(""), "");
  EXPECT_EQ(effort(R"(,"reasoning_effort":"high")"), "high");
  EXPECT_EQ(effort(R"(,"reasoning":{"effort":"minimal"})"), "minimal");
  // Anything else is the deployment's own traffic (the upstream judges it):
  // a client cannot grow the statistics with names of its own.
  EXPECT_EQ(effort(R"(,"reasoning_effort":"ultra-9000")"), "");
  EXPECT_EQ(effort(R"(,"reasoning_effort":3)"), "");
  EXPECT_EQ(effort(R"(,"reasoning":"high")"), "");
}

TEST(ChatRequest, RejectsInvalidJsonWith400) {
  auto e = error_of(parse_chat_request("application/json", "{\"model\":"));
  EXPECT_EQ(e.status, 400);
  EXPECT_EQ(e.type, "invalid_request_error");
  EXPECT_EQ(e.code, "invalid_json");
}

TEST(ChatRequest, RejectsInvalidUtf8) {
  auto e = error_of(parse_chat_request(
      "application/json",
      "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"\xff\xfe\"}]}"));
  EXPECT_EQ(e.status, 400);
  EXPECT_EQ(e.code, "invalid_json");
}

TEST(ChatRequest, NamesTheMissingModelParameter) {
  auto e = error_of(
      parse_chat_request("application/json", R"({"messages":[{"role":"user","content":"x"}]})"));
  EXPECT_EQ(e.status, 400);
  EXPECT_EQ(e.param, "model");
}

TEST(ChatRequest, RejectsMissingOrEmptyMessages) {
  EXPECT_EQ(error_of(parse_chat_request("application/json", R"({"model":"m"})")).param, "messages");
  EXPECT_EQ(
      error_of(parse_chat_request("application/json", R"({"model":"m","messages":[]})")).param,
      "messages");
  EXPECT_EQ(error_of(parse_chat_request("application/json",
                                        R"({"model":"m","messages":[{"content":"x"}]})"))
                .param,
            "messages[0].role");
}

TEST(ChatRequest, RejectsWrongTypes) {
  EXPECT_EQ(error_of(parse_chat_request("application/json",
                                        R"({"model":5,"messages":[{"role":"user"}]})"))
                .param,
            "model");
  EXPECT_EQ(
      error_of(parse_chat_request("application/json",
                                  R"({"model":"m","messages":[{"role":"user"}],"stream":"yes"})"))
          .param,
      "stream");
  EXPECT_EQ(
      error_of(parse_chat_request("application/json",
                                  R"({"model":"m","messages":[{"role":"user"}],"max_tokens":-1})"))
          .param,
      "max_tokens");
  EXPECT_EQ(
      error_of(
          parse_chat_request(
              "application/json",
              R"({"model":"m","messages":[{"role":"user"}],"stream_options":{"include_usage":true}})"))
          .param,
      "stream_options");
  EXPECT_EQ(error_of(parse_chat_request("application/json", R"([1])")).status, 400);
}

TEST(ChatRequest, RejectsANonJsonContentTypeWith415) {
  auto e =
      error_of(parse_chat_request("text/plain", R"({"model":"m","messages":[{"role":"user"}]})"));
  EXPECT_EQ(e.status, 415);
}

TEST(ChatRequest, UpstreamBodyRewritesModelForcesStreamingAndKeepsEverythingElse) {
  auto r = std::get<ChatRequest>(parse_chat_request(
      "application/json",
      R"({"model":"public","messages":[{"role":"user","content":"hi"}],"temperature":0.7,"seed":12345678901,
          "tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object"}}}],
          "tool_choice":"auto","response_format":{"type":"json_object"},"n":1,"logprobs":true,
          "stream_options":null})"));
  providers::UpstreamRequest request;
  request.upstream_model = "llama-3.3-70b-versatile";
  auto up = nlohmann::json::parse(
      std::get<std::string>(providers::openai_chat_protocol().body(r.body, request)));
  EXPECT_EQ(up["model"], "llama-3.3-70b-versatile");
  EXPECT_EQ(up["stream"], true);
  EXPECT_EQ(up["stream_options"]["include_usage"], true);
  EXPECT_EQ(up["temperature"], 0.7);
  EXPECT_EQ(up["seed"], 12345678901LL);
  EXPECT_EQ(up["tools"], r.body.dom()["tools"]);
  EXPECT_EQ(up["tool_choice"], "auto");
  EXPECT_EQ(up["response_format"]["type"], "json_object");
  EXPECT_EQ(up["logprobs"], true);
  EXPECT_EQ(up["messages"], r.body.dom()["messages"]);
}

TEST(ApiErrorShape, HasTheFourOpenAiFields) {
  auto j = nlohmann::json::parse(invalid_request("bad", "model", "x").body());
  ASSERT_TRUE(j["error"].is_object());
  EXPECT_EQ(j["error"]["message"], "bad");
  EXPECT_EQ(j["error"]["type"], "invalid_request_error");
  EXPECT_EQ(j["error"]["param"], "model");
  EXPECT_EQ(j["error"]["code"], "x");
  auto k = nlohmann::json::parse(invalid_request("bad").body());
  EXPECT_TRUE(k["error"]["param"].is_null());
  EXPECT_TRUE(k["error"]["code"].is_null());
}

TEST(Headers, HopByHopIncludesThoseNamedInConnection) {
  ListTokens tokens;
  add_list_tokens("keep-alive, X-Custom-Hop", tokens);
  EXPECT_TRUE(is_hop_by_hop("Transfer-Encoding", {}));
  EXPECT_TRUE(is_hop_by_hop("TE", {}));
  EXPECT_TRUE(is_hop_by_hop("x-custom-hop", tokens));
  EXPECT_FALSE(is_hop_by_hop("x-request-id", tokens));
}

TEST(Headers, ClientCredentialsAreNeverForwarded) {
  EXPECT_TRUE(is_gateway_owned("Authorization"));
  EXPECT_TRUE(is_gateway_owned("api-key"));
  EXPECT_TRUE(is_gateway_owned("X-Goog-Api-Key"));  // a client's Google key, never forwarded
  EXPECT_TRUE(is_gateway_owned("x-llmgate-policy"));
  EXPECT_FALSE(is_gateway_owned("x-request-id"));
}

TEST(Headers, ValidatesClientRequestIds) {
  EXPECT_TRUE(is_valid_request_id("abc-123"));
  EXPECT_FALSE(is_valid_request_id(""));
  EXPECT_FALSE(is_valid_request_id("has space"));
  EXPECT_FALSE(is_valid_request_id(std::string(200, 'a')));
  EXPECT_EQ(new_request_id().size(), 32u);
  EXPECT_NE(new_request_id(), new_request_id());
}

TEST(Headers, ParsesRetryAfterSecondsAndHttpDate) {
  EXPECT_EQ(parse_retry_after("7", 0), 7);
  EXPECT_EQ(parse_retry_after(" 12 ", 0), 12);
  // Sun, 06 Nov 1994 08:49:37 GMT = 784111777
  EXPECT_EQ(parse_retry_after("Sun, 06 Nov 1994 08:49:37 GMT", 784111777 - 30), 30);
  EXPECT_EQ(parse_retry_after("Sun, 06 Nov 1994 08:49:37 GMT", 784111777 + 30), 0);
  EXPECT_EQ(parse_retry_after("soon", 0), -1);
  EXPECT_EQ(parse_retry_after("", 0), -1);
}

// Found by fuzz_chat_request (tests/fuzz/findings): a number no double holds
// made nlohmann throw out_of_range, which escaped and dropped the connection.
TEST(ChatRequestHardening, ANumberBeyondADoubleIsA400NotAnEscapedException) {
  auto r = parse_chat_request(
      "application/json",
      R"({"model":"m","messages":[{"role":"user","content":"x"}],"temperature":1e400})");
  ASSERT_TRUE(std::holds_alternative<ApiError>(r));
  EXPECT_EQ(std::get<ApiError>(r).status, 400);
  EXPECT_EQ(std::get<ApiError>(r).code, "invalid_json");
}

// Found in review with the fuzzer: parsing, copying and dumping recurse per
// level, so 100,000 nested arrays overflowed the stack and killed the process.
TEST(ChatRequestHardening, DeepNestingIsRefusedBeforeParsing) {
  std::string deep = R"({"model":"m","messages":[{"role":"user","content":"x"}],"x":)" +
                     std::string(100'000, '[') + std::string(100'000, ']') + "}";
  auto r = parse_chat_request("application/json", deep);
  ASSERT_TRUE(std::holds_alternative<ApiError>(r));
  EXPECT_EQ(std::get<ApiError>(r).status, 400);
  // Brackets inside strings do not count; real nesting of a few levels passes.
  std::string fine =
      R"({"model":"m","messages":[{"role":"user","content":")" + std::string(500, '[') +
      R"("}],"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object","properties":{"a":{"type":"array","items":{"type":"object"}}}}}}]})";
  EXPECT_TRUE(std::holds_alternative<ChatRequest>(parse_chat_request("application/json", fine)));
}

// Found by fuzz_chat_request: the JSON lexer stops at a NUL byte, so a valid
// request followed by "\0<anything>" was accepted with the rest dropped.
TEST(ChatRequestHardening, ANulByteAnywhereIsInvalidJson) {
  std::string body = R"({"model":"m","messages":[{"role":"user","content":"x"}]})";
  body += std::string("\0garbage", 8);
  auto r = parse_chat_request("application/json", body);
  ASSERT_TRUE(std::holds_alternative<ApiError>(r));
  EXPECT_EQ(std::get<ApiError>(r).code, "invalid_json");
}

}  // namespace
}  // namespace llmgate::gateway
