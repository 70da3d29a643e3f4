// The simulator's Amazon Bedrock mode (sim_bedrock.cpp): the Converse API
// at POST /model/{modelId}/converse-stream and /converse, as Bedrock's
// runtime serves it -- requests signed with AWS Signature Version 4 (checked
// against the simulator's --aws-key when one is set: a wrong signature gets
// AWS's 403 InvalidSignatureException), the stream in AWS's binary
// event-stream framing (messageStart, contentBlockDelta..., messageStop,
// metadata; faults as a cut message, a payload that is no JSON, a
// modelStreamErrorException), errors as {"message"} with x-amzn-ErrorType.
// Beast-free.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <variant>

#include "tools/sim/sim_protocol.h"

namespace llmgate::sim {

// POST /model/{id}/converse-stream or /converse: the model (percent-decoded)
// and whether it streams; nullopt for any other path.
struct ConverseTarget {
  std::string model;
  bool stream = false;
};
std::optional<ConverseTarget> converse_target(std::string_view path);

// A Converse request as the simulator reads it (messages' text for the
// prompt's size, inferenceConfig.maxTokens, a trailing assistant turn as a
// prefill); a 400 ValidationException when it is not one.
std::variant<ChatRequest, ApiError> parse_converse_request(std::string_view body,
                                                           const ConverseTarget& target);

// The credentials requests must be signed with.
struct AwsKey {
  std::string access_key_id;
  std::string secret_access_key;
  // Temporary credentials (STS's, the container's, the instance's): the
  // x-amz-security-token they must come with ("" = none checked).
  std::string session_token;
};
// Checks a request's SigV4 signature as AWS does (signed again over the
// headers it lists); nullopt when it holds, else AWS's 403 (type
// UnrecognizedClientException for another access key, InvalidSignatureException
// for a wrong signature). `header` reads a request header by lower-case name.
std::optional<ApiError> check_sigv4(std::string_view method, std::string_view target,
                                    std::string_view body,
                                    const std::function<std::string(std::string_view)>& header,
                                    const AwsKey& key);

// Bedrock's error body: {"message": ...}; the type goes in x-amzn-ErrorType.
std::string bedrock_error_body(const ApiError& e);
// What Bedrock answers an injected error with (429 ThrottlingException, 503
// ServiceUnavailableException, else InternalServerException).
ApiError bedrock_injected_error(int status);

// The ConverseStream as an EventStream (each call appends whole event-stream
// messages).
class BedrockFormatter final : public EventStream {
 public:
  BedrockFormatter(Answer answer, bool capped, std::int64_t prompt_tokens,
                   std::int64_t cached_tokens);
  void open(std::string& out) override;  // messageStart
  void token(std::string& out, int k) override;
  int tail_events() const override { return 1; }
  void tail(std::string& out, int i) override;  // block stops, messageStop, metadata
  void truncated(std::string& out) override;    // half a message
  void malformed(std::string& out) override;    // a message whose payload is no JSON
  void error(std::string& out) override;        // a modelStreamErrorException

 private:
  Answer answer_;
  bool capped_;
  std::int64_t prompt_tokens_;
  std::int64_t cached_tokens_;
};

// The body of a non-streamed Converse answer.
std::string converse_response_body(const Answer& answer, bool capped, std::int64_t prompt_tokens,
                                   std::int64_t cached_tokens);

}  // namespace llmgate::sim
