// What a scripted upstream sends, in each upstream protocol's own framing
// (config::Protocol: providers[].protocol), so that one fault can be played
// as an OpenAI, an Anthropic Messages or a Gemini generateContent server
// would play it. The bytes follow the vendors' published streams (and the
// simulator's formatters, tools/sim/sim_protocol.h), written out here rather
// than taken from the simulator: the translators must be tested against the
// wire format, not against another implementation of it.
//
//   OpenAI     data: <chat.completion.chunk>\n\n ... data: [DONE]\n\n
//   Anthropic  event: <type>\ndata: <json>\n\n: message_start, ping,
//              content_block_start, content_block_delta (text_delta)...,
//              content_block_stop, message_delta (stop_reason, usage),
//              message_stop; an in-band `event: error`
//   Gemini     data: <GenerateContentResponse>\r\n\r\n, one per token, the
//              last with finishReason; no end sentinel: the body just ends
//   Bedrock    AWS event-stream messages (binary: prelude, headers, payload,
//              CRCs): messageStart, contentBlockDelta..., contentBlockStop,
//              messageStop, metadata; an exception message in-band
//
// Header-only, as gateway_harness.h: the conformance suite includes it.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "config/config.h"
#include "providers/event_stream.h"
#include "tests/support/scripted_upstream.h"

namespace llmgate::testing {

class ProtocolFrames {
 public:
  using Protocol = config::Protocol;
  explicit ProtocolFrames(Protocol p) : p_(p) {}

  Protocol protocol() const { return p_; }
  const char* name() const { return config::to_string(p_); }

  // Keys for the bad provider's config (Harness's bad_provider_extra).
  std::string provider_keys() const {
    if (p_ == Protocol::kBedrock) return ", protocol: bedrock, aws_region: us-east-1";
    return p_ == Protocol::kOpenAi ? std::string() : std::string(", protocol: ") + name();
  }

  // The request line the gateway sends to a provider whose base_url path is
  // /v1 (the Harness's), for a streamed attempt to model "m": proof that the
  // fault was played to a request in this protocol.
  std::string request_line() const {
    switch (p_) {
      case Protocol::kAnthropic:
        return "POST /v1/messages HTTP/1.1\r\n";
      case Protocol::kGemini:
        return "POST /v1/models/m:streamGenerateContent?alt=sse HTTP/1.1\r\n";
      case Protocol::kBedrock:
        return "POST /v1/model/m/converse-stream HTTP/1.1\r\n";
      case Protocol::kOpenAi:
        break;
    }
    return "POST /v1/chat/completions HTTP/1.1\r\n";
  }

  // A 200 event-stream response head (chunked), as the protocol's servers send it.
  std::string head() const {
    if (p_ == Protocol::kBedrock) return sse_head("application/vnd.amazon.eventstream");
    return sse_head(p_ == Protocol::kAnthropic ? "text/event-stream; charset=utf-8"
                                               : "text/event-stream");
  }

  // The stream's first event alone.
  std::string first_event() const {
    switch (p_) {
      case Protocol::kAnthropic:
        return message_start();
      case Protocol::kGemini:
        return token_event(0);  // Gemini's first response carries the first token
      case Protocol::kBedrock:
        return message_start_bedrock();
      case Protocol::kOpenAi:
        break;
    }
    return role_event();
  }

  // What comes before the first token in a normal stream: OpenAI's role-only
  // chunk; Anthropic's message_start, ping and an empty text block's start;
  // nothing for Gemini (its first response has the first token).
  std::string opening() const {
    if (p_ == Protocol::kGemini) return {};
    return no_token_opening();
  }

  // Events that open a stream and carry no token. Gemini: a response whose
  // only part is empty text (the translator makes it the role chunk).
  std::string no_token_opening() const {
    switch (p_) {
      case Protocol::kAnthropic:
        return message_start() + anthropic("ping", R"({"type":"ping"})") +
               anthropic(
                   "content_block_start",
                   R"({"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}})");
      case Protocol::kGemini:
        return gemini(gemini_response(R"({"text":""})", "", 0));
      case Protocol::kBedrock:
        return message_start_bedrock();
      case Protocol::kOpenAi:
        break;
    }
    return role_event();
  }

  // One content token: "tok<i> " (OpenAI's is scripted_upstream.h's, which
  // the other tables use).
  std::string token_event(int i) const {
    if (p_ == Protocol::kOpenAi) return testing::token_event(i);
    return text_event("tok" + std::to_string(i) + " ", i);
  }

  // An event carrying `text` as content (the `i`-th of its stream).
  std::string text_event(const std::string& text, int i = 0) const {
    const std::string quoted = nlohmann::json(text).dump();
    switch (p_) {
      case Protocol::kAnthropic:
        return anthropic(
            "content_block_delta",
            R"({"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":)" +
                quoted + "}}");
      case Protocol::kGemini:
        return gemini(gemini_response(R"({"text":)" + quoted + "}", "", i + 1));
      case Protocol::kBedrock:
        return bedrock("contentBlockDelta",
                       R"({"contentBlockIndex":0,"delta":{"text":)" + quoted + "}}");
      case Protocol::kOpenAi:
        break;
    }
    return event(
        R"({"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":)" +
        quoted + R"(},"finish_reason":null}]})");
  }

  // The end of a whole answer of `tokens` tokens: the finish with its usage
  // and the end marker. OpenAI: finish_event() (its usage says 2 tokens)
  // and [DONE]. Anthropic: content_block_stop, message_delta (stop_reason,
  // usage), message_stop. Gemini: the last response, with finishReason and
  // the usage; its end marker is the end of the body, which is not in here.
  std::string finish_and_end(int tokens) const {
    switch (p_) {
      case Protocol::kAnthropic:
        return anthropic("content_block_stop", R"({"type":"content_block_stop","index":0})") +
               anthropic(
                   "message_delta",
                   R"({"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":)" +
                       std::to_string(tokens) + "}}") +
               anthropic("message_stop", R"({"type":"message_stop"})");
      case Protocol::kGemini:
        return gemini(gemini_response(R"({"text":""})", "STOP", tokens));
      case Protocol::kBedrock:
        return bedrock("contentBlockStop", R"({"contentBlockIndex":0})") +
               bedrock("messageStop", R"({"stopReason":"end_turn"})") +
               bedrock("metadata", R"({"usage":{"inputTokens":3,"outputTokens":)" +
                                       std::to_string(tokens) + R"(,"totalTokens":)" +
                                       std::to_string(3 + tokens) +
                                       R"(},"metrics":{"latencyMs":5}})");
      case Protocol::kOpenAi:
        break;
    }
    return finish_event() + done_event();
  }

  // `n` bytes that keep a stream busy without completing an event: SSE's
  // spaces on a line that never ends; the first `n` bytes of an
  // event-stream message (its prelude says more are to come).
  std::string incomplete_bytes(std::size_t n) const {
    if (p_ == Protocol::kBedrock) return text_event(std::string(n, 'a')).substr(0, n);
    return std::string(n, ' ');
  }

  // An event whose JSON does not parse, in the protocol's framing.
  std::string malformed_event() const {
    switch (p_) {
      case Protocol::kAnthropic:
        return "event: content_block_delta\ndata: {not json\n\n";
      case Protocol::kGemini:
        return "data: {not json\r\n\r\n";
      case Protocol::kBedrock:
        return bedrock("contentBlockDelta", "{not json");
      case Protocol::kOpenAi:
        break;
    }
    return "data: {not json\n\n";
  }

  // The protocol's in-band error after a 200: OpenAI's `data: {"error":...}`,
  // Anthropic's `event: error` (overloaded_error, as Anthropic sends when
  // it sheds load mid-stream), Gemini's error object as a response.
  std::string in_band_error_event() const {
    switch (p_) {
      case Protocol::kAnthropic:
        return anthropic(
            "error",
            R"({"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}})");
      case Protocol::kGemini:
        return gemini(
            R"({"error":{"code":503,"message":"The model is overloaded. Please try again later.","status":"UNAVAILABLE"}})");
      case Protocol::kBedrock: {
        const providers::EventStreamHeader h[] = {
            {":exception-type", "serviceUnavailableException"},
            {":content-type", "application/json"},
            {":message-type", "exception"}};
        return providers::encode_event_stream_message(
            h, R"({"message":"Bedrock is unable to process your request."})");
      }
      case Protocol::kOpenAi:
        break;
    }
    return event(
        R"({"error":{"message":"The server had an error while processing your request.","type":"server_error","param":null,"code":null}})");
  }

  // A 200 application/json that is no answer of this protocol: OpenAI's
  // chat.completion without choices, an Anthropic message without content,
  // a Gemini response without candidates.
  std::string not_an_answer() const {
    switch (p_) {
      case Protocol::kAnthropic:
        return R"({"id":"msg_1","type":"message","role":"assistant","model":"m","stop_reason":null})";
      case Protocol::kGemini:
        return R"({"candidates":[],"modelVersion":"m","responseId":"r1"})";
      case Protocol::kBedrock:
        return R"({"stopReason":"end_turn","usage":{"inputTokens":3,"outputTokens":0}})";
      case Protocol::kOpenAi:
        break;
    }
    return R"({"id":"x","object":"chat.completion","choices":[]})";
  }

  // A whole error response: `status` with the protocol's error body for it
  // (the error type or google.rpc status its servers name for that status).
  std::string status_response(int status, const std::string& extra_headers = "") const {
    return testing::status_response(status, extra_headers, error_body(status, message_for(status)));
  }

  // A 400 about the request, whose message is `message`.
  std::string client_error_response(const std::string& message) const {
    return testing::status_response(400, "", error_body(400, message));
  }

  // What the client gets for client_error_response(message): the error in
  // OpenAI's shape. OpenAI's object as it came; Anthropic's type and
  // message (it has no code); Gemini's message, its status as the code.
  nlohmann::json client_error_as_openai(const std::string& message) const {
    nlohmann::json e = {{"message", message},
                        {"type", "invalid_request_error"},
                        {"param", nullptr},
                        {"code", nullptr}};
    if (p_ == Protocol::kOpenAi) e["code"] = "bad";
    if (p_ == Protocol::kGemini) e["code"] = "INVALID_ARGUMENT";
    return e;
  }

 private:
  static std::string anthropic(const std::string& type, const std::string& data) {
    return "event: " + type + "\ndata: " + data + "\n\n";
  }
  static std::string gemini(const std::string& response) {
    return "data: " + response + "\r\n\r\n";
  }
  static std::string bedrock(std::string_view type, std::string_view payload) {
    const providers::EventStreamHeader h[] = {
        {":event-type", type}, {":content-type", "application/json"}, {":message-type", "event"}};
    return providers::encode_event_stream_message(h, payload);
  }
  static std::string message_start_bedrock() {
    return bedrock("messageStart", R"({"role":"assistant"})");
  }
  static std::string message_start() {
    return anthropic(
        "message_start",
        R"({"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"m","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":3,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"output_tokens":1}}})");
  }
  // One GenerateContentResponse: `part`, the finish reason ("" for none),
  // the cumulative usage after `produced` tokens.
  static std::string gemini_response(const std::string& part, const std::string& finish,
                                     int produced) {
    const std::string p = std::to_string(produced);
    return R"({"candidates":[{"content":{"parts":[)" + part + R"(],"role":"model"})" +
           (finish.empty() ? "" : R"(,"finishReason":")" + finish + "\"") +
           R"(,"index":0}],"usageMetadata":{"promptTokenCount":3,"candidatesTokenCount":)" + p +
           R"(,"totalTokenCount":)" + std::to_string(3 + produced) +
           R"(},"modelVersion":"m","responseId":"r1"})";
  }

  std::string error_body(int status, const std::string& message) const {
    const std::string quoted = nlohmann::json(message).dump();
    switch (p_) {
      case Protocol::kAnthropic:
        return R"({"type":"error","error":{"type":")" + anthropic_type(status) + R"(","message":)" +
               quoted + R"(},"request_id":"req_1"})";
      case Protocol::kGemini:
        return R"({"error":{"code":)" + std::to_string(status) + R"(,"message":)" + quoted +
               R"(,"status":")" + google_status(status) + "\"}}";
      case Protocol::kBedrock:
        return R"({"message":)" + quoted + "}";
      case Protocol::kOpenAi:
        break;
    }
    if (status == 400) {
      return R"({"error":{"message":)" + quoted +
             R"(,"type":"invalid_request_error","param":null,"code":"bad"}})";
    }
    return R"({"error":{"message":)" + quoted + R"(,"type":"x"}})";
  }

  std::string message_for(int status) const {
    if (p_ == Protocol::kAnthropic && status == 529) return "Overloaded";
    return "scripted " + std::to_string(status);
  }

  // As Anthropic types its errors by status (docs.anthropic.com/en/api/errors).
  static std::string anthropic_type(int status) {
    switch (status) {
      case 400:
        return "invalid_request_error";
      case 429:
        return "rate_limit_error";
      case 529:
        return "overloaded_error";
      default:
        return status >= 500 ? "api_error" : "invalid_request_error";
    }
  }

  // As Google names the status of each HTTP code (google.rpc.Code).
  static std::string google_status(int status) {
    switch (status) {
      case 400:
        return "INVALID_ARGUMENT";
      case 429:
        return "RESOURCE_EXHAUSTED";
      case 503:
        return "UNAVAILABLE";
      case 504:
        return "DEADLINE_EXCEEDED";
      default:
        return "INTERNAL";
    }
  }

  Protocol p_;
};

}  // namespace llmgate::testing
