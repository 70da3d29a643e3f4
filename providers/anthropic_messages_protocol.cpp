// Anthropic Messages as the client's own protocol (POST /v1/messages to a
// protocol: anthropic deployment): the client's document goes upstream with
// `model` and `stream` replaced and nothing else changed, and Anthropic's
// events come back as they came (`raw`), each read once for what the relay
// needs -- output started, reasoning, usage (input from message_start,
// output from message_delta), the stop reason, the end, an in-band error.
// One neutral event per upstream event: the client API forwards `raw`.
#include <string>

#include "providers/anthropic_event.h"
#include "providers/anthropic_wire.h"
#include "providers/upstream_protocol.h"

namespace llmgate::providers {
namespace {

using nlohmann::json;

class NativeStream final : public UpstreamStream {
 public:
  void translate(const Frame& ev, Sink& out) override {
    UpstreamEvent e;
    e.raw = ev.raw;
    if (finished_) return;
    if (!ev.has_data) {
      e.kind = UpstreamEvent::Kind::kKeepAlive;
      return out.on(e);
    }
    e.data = ev.data;
    using anthropic::EventType;
    const anthropic::EventFacts f = anthropic::read_event(ev.data);
    if (f.type == EventType::kNone) {
      e.kind = UpstreamEvent::Kind::kMalformed;
      e.message =
          f.json ? "not an Anthropic event (no \"type\")" : "upstream event is not valid JSON";
      finished_ = true;
      return out.on(e);
    }
    e.kind = UpstreamEvent::Kind::kData;
    ChatChunk& c = e.chunk;
    c.kind = ChatChunk::Kind::kChunk;
    c.has_output = f.has_output;
    c.has_reasoning = f.has_reasoning;
    c.output_chars = f.output_chars;
    switch (f.type) {
      case EventType::kMessageStart:
        f.apply(counts_);
        c.usage = counts_.usage();
        break;
      case EventType::kMessageDelta:
        f.apply(counts_);
        c.usage = counts_.usage();
        c.has_finish = f.has_finish;
        break;
      case EventType::kMessageStop:
        e.kind = UpstreamEvent::Kind::kDone;
        finished_ = true;
        break;
      case EventType::kPing:
        e.kind = UpstreamEvent::Kind::kKeepAlive;
        break;
      case EventType::kError:
        e.kind = UpstreamEvent::Kind::kError;
        e.message =
            (f.error_kind.empty() ? std::string("error") : f.error_kind) + ": " + f.error_message;
        finished_ = true;
        break;
      default:
        // content_block_stop and types not known today: data, passed on
        // (as Anthropic's versioning policy asks of clients).
        break;
    }
    out.on(e);
  }

 private:
  anthropic::Counts counts_;
  bool finished_ = false;
};

class AnthropicMessages final : public UpstreamProtocol {
 public:
  std::string_view name() const override { return "anthropic-messages"; }

  std::string_view target(const std::string&, bool, std::string&) const override {
    return "/messages";
  }

  // The client's own document, the deployment's model and `stream` put in.
  std::variant<std::string, Untranslatable> body(RequestBody& client_body,
                                                 const UpstreamRequest& r) const override {
    return client_body.spliced({{"model", RequestBody::SpliceValue::string(r.upstream_model)},
                                {"stream", r.stream ? "true" : "false"}});
  }

  std::vector<std::pair<std::string, std::string>> headers(
      const std::string& api_key, const config::Provider& provider) const override {
    return anthropic_protocol().headers(api_key, provider);
  }

  std::unique_ptr<UpstreamStream> open_stream(const UpstreamRequest&) const override {
    return std::make_unique<NativeStream>();
  }

  // (As a chat.completion for what the gateway reads of it: usage, id,
  // finish; the client gets the answer's own text.)
  std::optional<nlohmann::json> completion(const nlohmann::json& answer,
                                           const UpstreamRequest& r) const override {
    return anthropic_protocol().completion(answer, r);
  }

  std::optional<nlohmann::json> error(const nlohmann::json& body, int status) const override {
    return anthropic_protocol().error(body, status);
  }
};

}  // namespace

const UpstreamProtocol& anthropic_messages_protocol() {
  static const AnthropicMessages protocol;
  return protocol;
}

}  // namespace llmgate::providers
