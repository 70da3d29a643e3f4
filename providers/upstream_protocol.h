// The upstream protocol seam: how the gateway talks to one kind of provider
// API. A protocol builds the upstream request from the client's document
// and classifies each upstream event into a neutral form — output started,
// usage, finish, error, done — carrying the event as an OpenAI
// chat.completion.chunk for the client API to render. The relay, the TTFT
// measurement and the non-stream assembly see only that neutral form.
//
// Today's one implementation is OpenAI chat completions
// (openai_chat_protocol()), whose events pass through byte for byte. A new
// provider protocol (Anthropic messages, Gemini) adds an implementation and
// a `protocol:` value in the provider config; docs/ARCHITECTURE.md, "Adding
// a provider protocol or a client API". Beast-free.
#pragma once

#include <cstddef>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "providers/chat_chunk.h"
#include "providers/sse_parser.h"

namespace llmgate::providers {

// One upstream event, neutral. `chunk` holds what the relay reads (its
// fields has_output, has_finish, usage, usage_only, output_chars and the
// plain-content fast path of inspect_chunk()); `data` is the event as a
// chat.completion.chunk JSON text and `raw` its SSE bytes when they can be
// forwarded verbatim (a view into the SSE parser's buffer; empty when the
// protocol translated the event, then the client API frames `data`).
struct UpstreamEvent {
  enum class Kind {
    kKeepAlive,  // a comment-only block: passes through to a streaming client
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

  bool output() const { return kind == Kind::kData && chunk.has_output; }
};

class UpstreamProtocol {
 public:
  virtual ~UpstreamProtocol() = default;
  virtual std::string_view name() const = 0;
  // The request target below the provider's base_url path ("/chat/completions").
  virtual std::string_view path() const = 0;
  // The upstream body from the client's chat document for `upstream_model`,
  // always streaming with usage (the gateway times the first token and counts
  // tokens on every attempt). May rewrite `client_body` in place (no copy per
  // attempt); calling it again for another deployment gives that one's body.
  // Without `stream_options` the upstream is asked for no usage options (and
  // the client's own are removed): for servers that refuse them. Without
  // `stream`, the upstream is asked for one JSON answer (no stream options).
  virtual std::string body(nlohmann::json& client_body, const std::string& upstream_model,
                           bool stream_options = true, bool stream = true) const = 0;
  // The credential header for the provider's key: name and value.
  virtual std::pair<std::string_view, std::string> credential(const std::string& api_key) const = 0;
  // Classifies one event. Views in the result point into `ev`'s buffers.
  virtual UpstreamEvent classify(const SseEvent& ev) const = 0;
};

// OpenAI chat completions (and every OpenAI-compatible provider).
const UpstreamProtocol& openai_chat_protocol();

}  // namespace llmgate::providers
