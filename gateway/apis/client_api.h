// The client API seam: what one endpoint of the gateway's own API parses,
// what "first token" means for it, how it renders a streamed upstream event
// (providers::UpstreamEvent, already neutral), how its stream ends and how a
// failed stream says so, and how a non-streamed answer is assembled.
//
// Implementations: chat completions (chat_completions_api.cpp), the
// Responses API, embeddings and legacy completions (openai_apis.cpp),
// Anthropic's Messages API (messages_api.*); a path reaches one through the
// route table (gateway/server/route_table.h). docs/ARCHITECTURE.md, "Adding
// a provider protocol or a client API". Beast-free.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <variant>

#include "gateway/apis/chat_request.h"
#include "gateway/apis/outbox.h"
#include "gateway/http/api_error.h"
#include "providers/json_write.h"
#include "providers/upstream_protocol.h"

namespace llmgate::gateway {

class ClientApi {
 public:
  virtual ~ClientApi() = default;
  virtual std::string_view name() const = 0;
  // The operation it is (routing to the deployments that serve it, the
  // upstream protocol, metrics and logs).
  virtual config::Operation operation() const = 0;
  // The request body's shape (admission; `content_type` is the header's value).
  virtual std::variant<ChatRequest, ApiError> parse(std::string_view content_type,
                                                    std::string body) const = 0;
  // The same, knowing the configuration (admission): an API may do at once
  // what only some of the model's deployments need.
  virtual std::variant<ChatRequest, ApiError> parse_for(std::string_view content_type,
                                                        std::string body,
                                                        const config::Config&) const {
    return parse(content_type, std::move(body));
  }
  // The shape of its errors.
  virtual ErrorShape error_shape() const { return ErrorShape::kOpenAi; }
  // Its path, for spans (http.route).
  virtual std::string_view route() const { return config::endpoint_of(operation()); }
  // Its own label value (llmgate_requests_total's `api`, the log's `api`)
  // when it is not its operation's OpenAI endpoint; else empty.
  virtual std::string_view api_label() const { return {}; }
  // Its answers are stored by the provider, by id (the Responses API): the
  // gateway remembers which deployment holds each, for the requests that
  // name it later.
  virtual bool stores_responses() const { return false; }

  // The upstream protocol that serves it at provider `p` (null: none; the
  // deployment is passed over): by default the one for its operation.
  virtual const providers::UpstreamProtocol* protocol_for(const config::Provider& p) const {
    return providers::protocol_for(p, operation());
  }
  // The upstream body for `protocol` (a translation may refuse: the
  // deployment is passed over). By default the protocol's own from `body`.
  virtual std::variant<std::string, providers::Untranslatable> upstream_body(
      const providers::UpstreamProtocol& protocol, ChatRequest& req,
      const providers::UpstreamRequest& r) const {
    return protocol.body(req.body, r);
  }
  // The event that stops the TTFT clock and lets the attempt commit.
  virtual bool is_first_token(const providers::UpstreamEvent& ev) const { return ev.output(); }
  // Streaming: appends what the client gets for `ev` (a view when it passes
  // through unchanged, a copy when rewritten; nothing when dropped).
  virtual void render(const providers::UpstreamEvent& ev, const ChatRequest& req,
                      Outbox& out) const = 0;
  // Appended to a stream that ended cleanly without the upstream's own end marker.
  virtual std::string_view stream_end() const = 0;

  // One attempt's rendering when it keeps state across events (an API whose
  // events are not the upstream's: Anthropic's from chat chunks). Null:
  // render() and stream_end() serve.
  class StreamRenderer {
   public:
    virtual ~StreamRenderer() = default;
    virtual void render(const providers::UpstreamEvent& ev, Outbox& out) = 0;
    // The stream ended cleanly without the upstream's end marker.
    virtual void end(Outbox& out) = 0;
  };
  virtual std::unique_ptr<StreamRenderer> renderer(const providers::UpstreamProtocol& protocol,
                                                   const ChatRequest& req) const {
    (void)protocol;
    (void)req;
    return nullptr;
  }
  // The event that ends a stream which failed after it started: never the
  // end marker, so a client cannot mistake it for a complete answer.
  // `next_sequence`: the number the stream's next event has (the Responses
  // API numbers its events; the others ignore it).
  virtual std::string error_event(const ApiError& e, std::int64_t next_sequence) const {
    (void)next_sequence;
    return e.sse_event();
  }
  // A stream made of a whole answer (the upstream answered JSON to a stream
  // request): the answer as (`answer`, already in this API's shape, usage in
  // the chat form beside it when translated) the client's stream.
  virtual std::string stream_of_answer(const nlohmann::json& answer,
                                       const ChatRequest& req) const = 0;

  // Non-streaming: the answer assembled from the events.
  class Assembly {
   public:
    virtual ~Assembly() = default;
    virtual void add(const providers::UpstreamEvent& ev) = 0;
    virtual std::string body() const = 0;
  };
  virtual std::unique_ptr<Assembly> assembly() const = 0;
  // The assembly of an attempt at `protocol` (its events in that protocol's
  // own form, for an API that passes them through).
  virtual std::unique_ptr<Assembly> assembly(const providers::UpstreamProtocol& protocol) const {
    (void)protocol;
    return assembly();
  }
  // A whole answer the upstream sent as JSON, for the client: `upstream`,
  // its text as it came, or `completion`, the protocol's chat.completion of
  // it. By default the text of an OpenAI protocol, else the chat.completion.
  virtual std::string answer_body(const providers::UpstreamProtocol& protocol, std::string upstream,
                                  const nlohmann::json& completion) const {
    if (protocol.passthrough()) return upstream;
    return providers::json_text(completion);
  }
};

// An OpenAI chunk stream's events other than data, for the client: a
// keep-alive as it came, the end as it came (or [DONE]), errors and
// malformed events nothing (the relay ends the attempt or the stream).
// False for a data event: the caller renders it.
inline bool render_openai_control(const providers::UpstreamEvent& ev, Outbox& out) {
  using Kind = providers::UpstreamEvent::Kind;
  switch (ev.kind) {
    case Kind::kKeepAlive:  // comments pass through
      out.view(ev.raw);
      return true;
    case Kind::kDone:
      if (ev.raw.empty())
        out.copy("data: [DONE]\n\n");
      else
        out.view(ev.raw);
      return true;
    case Kind::kError:
    case Kind::kMalformed:
      return true;
    case Kind::kData:
      break;
  }
  return false;
}

// An OpenAI chunk stream's event for the client (chat and legacy
// completions): as it came, or framed when translated; the usage chunk the
// client did not ask for dropped (usage riding on a chunk stripped).
void render_openai_chunk(const providers::UpstreamEvent& ev, const ChatRequest& req, Outbox& out);

// POST /v1/chat/completions.
const ClientApi& chat_completions_api();
// POST /v1/messages: Anthropic's Messages API (messages_api.cpp).
const ClientApi& messages_api();
// POST /v1/responses, /v1/embeddings, /v1/completions (openai_apis.cpp).
const ClientApi& responses_api();
const ClientApi& embeddings_api();
const ClientApi& completions_api();
// The one for an operation.
const ClientApi& client_api(config::Operation op);

// The typed Responses stream a whole response would have had (created,
// in_progress, each output item's events, completed), numbered from 0: what
// a stream client gets from a deployment that answered JSON.
std::string responses_stream_of(const nlohmann::json& answer);

// The number a Responses stream's next event takes, followed through the
// raw bytes relayed (events may be cut anywhere between reads): one past
// the greatest "sequence_number" seen, else the count of events seen.
class SequenceFollower {
 public:
  void feed(std::string_view bytes);
  std::int64_t next() const { return next_; }

 private:
  // The last bytes seen (a key or number cut between reads), and how many
  // of the next read's first bytes are scanned with them. No allocation.
  static constexpr std::size_t kKeep = 48;
  static constexpr std::size_t kSeamHead = 64;
  std::array<char, kKeep> tail_{};
  std::size_t tail_size_ = 0;
  std::int64_t next_ = 0;
  bool saw_number_ = false;
};

}  // namespace llmgate::gateway
