// The upstream protocol seam: how the gateway talks to one kind of provider
// API. A protocol builds the upstream request from the client's OpenAI chat
// document and translates what comes back — stream events, a whole JSON
// answer, an error body — into a neutral form: output started, usage,
// finish, error, done, carrying each event as an OpenAI
// chat.completion.chunk for the client API to render. The relay, the TTFT
// measurement and the non-stream assembly see only that neutral form.
//
// Implementations: OpenAI chat completions (openai_chat_protocol(): every
// OpenAI-compatible server; events pass through byte for byte), Anthropic
// Messages (anthropic_protocol()) and Google Gemini generateContent
// (gemini_protocol()), chosen by providers[].protocol. docs/ARCHITECTURE.md,
// "Adding a provider protocol or a client API". Beast-free.
#pragma once

#include <cstddef>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "config/config.h"
#include "providers/chat_chunk.h"
#include "providers/frame.h"
#include "providers/framer.h"
#include "providers/request_body.h"

namespace llmgate::providers {

// One upstream event, neutral. `chunk` holds what the relay reads (its
// fields has_output, has_finish, usage, usage_only, output_chars and the
// plain-content fast path of inspect_chunk()); `data` is the event as a
// chat.completion.chunk JSON text and `raw` its SSE bytes when they can be
// forwarded verbatim (a view into the SSE parser's buffer; empty when the
// protocol translated the event, then the client API frames `data`).
struct UpstreamEvent {
  enum class Kind {
    kKeepAlive,  // a comment-only block or a ping: passes through to a streaming client
    kData,       // a chunk (with or without output)
    kDone,       // the end of the stream ([DONE] for OpenAI)
    kError,      // an in-band error from the upstream; `message` holds its words (unredacted)
    kMalformed,  // not a valid event of this protocol; `message` says why
  };
  Kind kind = Kind::kMalformed;
  ChatChunk chunk;
  std::string_view data;
  std::string_view raw;
  std::string message;
  // Responses API: the id of the response the event is about (a stored
  // response lives with the provider that created it), else empty.
  std::string response_id;
  // Responses API: the event's sequence_number, else -1.
  std::int64_t sequence_number = -1;

  bool output() const { return kind == Kind::kData && chunk.has_output; }
};

// What one attempt's request is built for.
struct UpstreamRequest {
  // The deployment's `model` (in the configuration, which outlives the
  // attempt).
  std::string_view upstream_model;
  bool stream = true;          // ask for a stream (else one JSON answer)
  bool stream_options = true;  // OpenAI: ask for usage in the stream
  // `created` of translated chunks and answers (Unix seconds); 0: now. Set
  // by tests for exact output.
  std::int64_t created = 0;
  // The provider's settings (protocol options such as anthropic_version,
  // default_max_tokens, thinking_budgets). Never null when building.
  const config::Provider* provider = nullptr;
  // The client asked for stream_options.include_usage: translated chunks
  // carry "usage": null until the usage chunk, as OpenAI's do.
  bool include_usage = false;
};

// The client's request cannot be said in this protocol without changing the
// answer (a parameter it has no equivalent for, a value out of its range):
// the deployment is passed over, and if no other can serve, the client gets
// a 400 naming `param`. Never a silent drop.
struct Untranslatable {
  std::string message;  // for the client: what and why ("logprobs is not supported by ...")
  std::string param;    // the offending parameter ("logprobs", "messages[2].content[0]")
};

// A client's top-level field as an Untranslatable's param: its name, or
// `""` for the empty name (a param always names something).
inline std::string field_param(std::string_view key) {
  return key.empty() ? std::string("\"\"") : std::string(key);
}

// One attempt's translation of the upstream stream. Protocols whose events
// are not chat.completion.chunks keep state across them (the message id and
// model, which content block a delta belongs to, usage split over events).
class UpstreamStream {
 public:
  // Receives the neutral events one upstream event gives. An event's views
  // (`data`, `raw`) are valid only during the call.
  class Sink {
   public:
    virtual void on(UpstreamEvent& ev) = 0;

   protected:
    ~Sink() = default;
  };
  virtual ~UpstreamStream() = default;
  // Zero or more neutral events for one upstream frame (an SSE event, an
  // event-stream message: the protocol's framing()), in order.
  virtual void translate(const Frame& ev, Sink& out) = 0;
  // The upstream body ended without a transport error: what completes the
  // stream (for a protocol with no end marker, its last usage chunk). A
  // stream that never finished (no finish_reason seen) is a cut whatever
  // this emits: the relay judges that.
  virtual void end(Sink& out) { (void)out; }
};

class UpstreamProtocol {
 public:
  virtual ~UpstreamProtocol() = default;
  virtual std::string_view name() const = 0;

  // The request target below the provider's base_url path, query included
  // ("/chat/completions", "/messages",
  // "/models/gemini-2.5-flash:streamGenerateContent?alt=sse").
  // providers[].chat_path replaces the path of it, providers[].query adds to it.
  // A fixed target is a view of a literal; one made from the model is written
  // into `built` (assigned: a caller's kept string is reused) and viewed there.
  virtual std::string_view target(const std::string& upstream_model, bool stream,
                                  std::string& built) const = 0;

  // The upstream body from the client's chat document; calling it again for
  // another deployment gives that one's body. OpenAI: spliced from the
  // client's text (RequestBody::spliced: `model` rewritten, `stream` set,
  // stream_options.include_usage when asked; every other member's text as
  // the client sent it, no DOM). Translating protocols read
  // client_body.dom() (parsed on first use, may be rewritten in place):
  // everything that changes the answer is translated or refused
  // (Untranslatable), never dropped.
  virtual std::variant<std::string, Untranslatable> body(RequestBody& client_body,
                                                         const UpstreamRequest& r) const = 0;

  // The headers that carry the provider's key (and any the protocol always
  // sends, such as anthropic-version), when providers[].api_key_header does
  // not name one. `api_key` may be empty: then only the fixed ones.
  virtual std::vector<std::pair<std::string, std::string>> headers(
      const std::string& api_key, const config::Provider& provider) const = 0;

  // How a streamed answer's body is cut into frames (and the Content-Type a
  // streamed answer must come with: content_type(framing())).
  virtual Framing framing() const { return Framing::kSse; }

  // A translator for one attempt's stream.
  virtual std::unique_ptr<UpstreamStream> open_stream(const UpstreamRequest& r) const = 0;

  // A whole (non-streamed) answer in this protocol as an OpenAI
  // chat.completion; nullopt when it is not an answer (it then fails over).
  virtual std::optional<nlohmann::json> completion(const nlohmann::json& answer,
                                                   const UpstreamRequest& r) const = 0;

  // The usage of an answer completion() returned (the chat form's by default).
  virtual std::optional<Usage> answer_usage(const nlohmann::json& answer) const {
    return usage_of(answer);
  }

  // An error body of this protocol in OpenAI's shape
  // {"error": {"message", "type", "param", "code"}}; nullopt when it is not
  // one of its error bodies.
  virtual std::optional<nlohmann::json> error(const nlohmann::json& body, int status) const = 0;

  // What an error answer says beyond its status, in the body: the status
  // to judge it as (Gemini answers an invalid key with 400
  // INVALID_ARGUMENT: the operator's 401, not the caller's 400) and a
  // retry delay (Gemini's RetryInfo, where others send Retry-After).
  struct ErrorMeaning {
    std::optional<int> judge_as;
    std::optional<int> retry_after_s;
  };
  virtual ErrorMeaning error_meaning(const nlohmann::json& body, int status) const {
    (void)body;
    (void)status;
    return {};
  }

  // OpenAI only: its events are chat.completion.chunks already, classified
  // one by one without translation (the relay's allocation-free fast path);
  // others translate through open_stream(). `prefix` is the stream's own
  // (inspect_chunk resumes after the bytes its chunks share).
  virtual bool passthrough() const { return false; }
  virtual UpstreamEvent classify(const Frame& ev, ChunkPrefix& prefix) const;
};

// A stream whose events pass through as they came: `p.classify` per event
// (the OpenAI protocols').
std::unique_ptr<UpstreamStream> classifying_stream(const UpstreamProtocol& p);

// OpenAI chat completions (and every OpenAI-compatible provider).
const UpstreamProtocol& openai_chat_protocol();
// Anthropic Messages (POST /v1/messages).
const UpstreamProtocol& anthropic_protocol();
// Anthropic Messages spoken by the client itself (POST /v1/messages in):
// the client's document with the deployment's model, events as they came.
const UpstreamProtocol& anthropic_messages_protocol();
// Both on Google Vertex AI (anthropic_vertex_protocol.cpp): the model in the
// path (models/{model}:streamRawPredict, :rawPredict), the version in the
// body. A provider speaks them when it is protocol: anthropic with a Google
// auth: (a service account, the metadata server).
inline constexpr std::string_view kVertexAnthropicVersion = "vertex-2023-10-16";
bool anthropic_on_vertex(const config::Provider& p);
const UpstreamProtocol& anthropic_vertex_protocol();
const UpstreamProtocol& anthropic_messages_vertex_protocol();
// Google Gemini (models/{model}:streamGenerateContent?alt=sse, :generateContent).
const UpstreamProtocol& gemini_protocol();
// Amazon Bedrock Converse (model/{id}/converse-stream: AWS event-stream
// framing; /converse). Requests are signed with SigV4 by the gateway.
const UpstreamProtocol& bedrock_protocol();
// The OpenAI API beyond chat (openai_api_protocols.cpp): the Responses API,
// embeddings and legacy completions, passed through byte for byte.
const UpstreamProtocol& openai_responses_protocol();
const UpstreamProtocol& openai_embeddings_protocol();
const UpstreamProtocol& openai_completions_protocol();
// The one a provider speaks (for chat).
const UpstreamProtocol& protocol_for(const config::Provider& p);
// The one that serves `op` at the provider; null when its protocol has none
// (only OpenAI's serves more than chat).
const UpstreamProtocol* protocol_for(const config::Provider& p, config::Operation op);

}  // namespace llmgate::providers
