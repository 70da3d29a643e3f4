// Stream continuation (docs/failure-semantics.md, "Continuation"): a chat
// stream that breaks off after the client has seen its first token -- cut,
// stalled, malformed, an in-band error -- is finished by a deployment that
// declares it can continue an assistant message (config::Continuation): the
// client's request with the text already sent as the last assistant
// message, in that deployment's way; its deltas spliced into the client's
// stream under the original id, model and created, its role chunk dropped,
// one [DONE] at the end.
//
// What is here is pure: what the client was told (StreamTranscript), the
// continuation's request body (continuation_body) and the rewriting of its
// chunks (ContinuationSplice). The relay records and splices; the proxy
// picks the deployment. Beast-free: tests/unit/gateway/continuation_test.cpp.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "config/config.h"
#include "gateway/apis/outbox.h"
#include "gateway/http/api_error.h"
#include "providers/request_body.h"
#include "providers/upstream_protocol.h"

namespace llmgate::gateway {

// What a committed chat stream has said to its client, as far as a
// continuation needs it: the text, the answer's id, model, created and
// system_fingerprint, and whether anything in it cannot be continued.
class StreamTranscript {
 public:
  // A chunk the client was given (ev.data: its JSON text).
  void add(const providers::UpstreamEvent& ev);
  // The same, parsed (the splice's rewritten chunks).
  void add(const nlohmann::ordered_json& chunk);

  const std::string& text() const { return text_; }
  // Why the stream cannot be continued, or null when it can: a tool call
  // (its arguments cannot be resumed by another deployment), a refusal,
  // audio, several choices.
  const char* why_not() const { return why_not_; }
  // The first chunk's id, created, model and system_fingerprint (those it
  // had), as JSON values; an object.
  const nlohmann::ordered_json& meta() const { return meta_; }
  // Chunks with text the client was given.
  std::int64_t text_chunks() const { return text_chunks_; }

 private:
  std::string text_;
  const char* why_not_ = nullptr;
  nlohmann::ordered_json meta_ = nlohmann::ordered_json::object();
  bool meta_taken_ = false;
  std::int64_t text_chunks_ = 0;
};

// The request that asks `how` to continue `text` after the client's
// messages. `trimmed`: the whitespace taken off the end of `text`
// (Anthropic refuses prefill that ends with whitespace), which the
// continuation may repeat. Nullopt without text (the stream broke during
// reasoning): the client's request as it was asks for an answer anew. A
// continuation does not think first (reasoning_effort dropped: Anthropic
// refuses prefill with thinking on).
std::optional<providers::RequestBody> continuation_body(const providers::RequestBody& original,
                                                        std::string_view text,
                                                        config::Continuation how,
                                                        std::string& trimmed);

// Whether a request's stream may be continued at all: a streamed chat
// request with one choice and no structured output (a JSON document cut in
// two and finished by another model is not the document asked for).
bool continuable_request(const providers::RequestBody& body);

// A continuation's chunks, as the client's stream goes on: the original
// id, model, created and system_fingerprint; no role; reasoning only when
// the client had no text yet; an echo of the text already sent (a server
// that repeats its prefix) and the whitespace prefill could not carry
// dropped from its first text; usage added to what the broken attempts
// reported. Each chunk the client gets goes into the transcript.
class ContinuationSplice {
 public:
  // `sent`: the text given to the continuer as its prefix (after the trim);
  // `trimmed`: what continuation_body trimmed off; `usage`: what the broken
  // attempts reported, added to the continuation's.
  ContinuationSplice(StreamTranscript& transcript, std::string sent, std::string trimmed,
                     bool include_usage, providers::Usage usage);

  // What the client gets for `ev`, appended to `out`.
  void render(const providers::UpstreamEvent& ev, Outbox& out);

 private:
  // The first text of the continuation, less the echo and the trimmed
  // whitespace it may begin with (held while it may still be one).
  std::string strip_leading(std::string_view text, bool last);

  StreamTranscript& transcript_;
  std::string expect_[2];  // the echo, then the trimmed whitespace
  int phase_ = 0;          // which of expect_ is being matched (2: none left)
  std::size_t matched_ = 0;
  std::string held_;
  const bool had_text_;
  const bool include_usage_;
  const providers::Usage usage_;
};

// One request's continuation: what its client was told, the client's body,
// and where the stream broke. The proxy owns it; the relay of each attempt
// records into it, splices through it and marks the break.
struct StreamContinuation {
  // A stream breaks off at most this many times and is continued (each a
  // deployment that answered after another broke).
  static constexpr int kMaxBreaks = 3;

  StreamTranscript transcript;
  // The client's body, taken before the first continuation (each
  // continuation's request is built from it).
  providers::RequestBody original;
  bool original_kept = false;
  // The stream broke off after the client's first token and waits for a
  // continuation: the error event the client gets if none comes (the
  // break's, never a continuer's refusal).
  std::optional<ApiError> broken;
  int breaks = 0;
  // The first break: where, why, after how many text chunks.
  const config::Deployment* first_broken = nullptr;
  std::string first_fault;
  std::int64_t broken_after = 0;
  // Usage the broken attempts reported (added to the continuation's).
  providers::Usage spent;
  // A stream that broke but could not be continued: why (StreamTranscript::why_not).
  const char* not_continuable = nullptr;
  // A deployment after the one streaming now can continue (the proxy's
  // plan): a stall may then be cut at the stall deadline, not the idle one.
  // After the attempt's candidate, and after a race's pair (when its hedge
  // started, both sides are used up).
  bool continuer_follows = false;
  bool continuer_follows_pair = false;
  // The continuation running, and the deployments that continued, in order.
  std::optional<ContinuationSplice> splice;
  std::vector<std::string> by;

  // The x-llmgate-continued trailer's value ("" while not continued).
  std::string describe() const;
};

}  // namespace llmgate::gateway
