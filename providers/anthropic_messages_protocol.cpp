// Anthropic Messages as the client's own protocol (POST /v1/messages to a
// protocol: anthropic deployment): the client's document goes upstream with
// `model` and `stream` replaced and nothing else changed, and Anthropic's
// events come back as they came (`raw`), each read once for what the relay
// needs -- output started, reasoning, usage (input from message_start,
// output from message_delta), the stop reason, the end, an in-band error.
// One neutral event per upstream event: the client API forwards `raw`.
#include <string>

#include "providers/anthropic_wire.h"
#include "providers/json_depth.h"
#include "providers/json_member.h"
#include "providers/upstream_protocol.h"

namespace llmgate::providers {
namespace {

using nlohmann::json;

std::string_view text_of(const json* v) {
  return v && v->is_string() ? std::string_view(v->get_ref<const std::string&>())
                             : std::string_view();
}

bool blank(std::string_view s) { return s.find_first_not_of(" \t\r\n") == std::string_view::npos; }

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
    const json j = json_too_deep(ev.data) ? json(json::value_t::discarded)
                                          : json::parse(ev.data, nullptr, false);
    const std::string_view type = text_of(member(j, "type"));
    if (type.empty()) {
      e.kind = UpstreamEvent::Kind::kMalformed;
      e.message = j.is_discarded() ? "upstream event is not valid JSON"
                                   : "not an Anthropic event (no \"type\")";
      finished_ = true;
      return out.on(e);
    }
    e.kind = UpstreamEvent::Kind::kData;
    ChatChunk& c = e.chunk;
    c.kind = ChatChunk::Kind::kChunk;
    if (type == "content_block_delta") {
      read_delta(j, c);
    } else if (type == "content_block_start") {
      read_block_start(j, c);
    } else if (type == "message_start") {
      if (const json* m = member(j, "message")) {
        if (const json* u = member(*m, "usage")) counts_.read(*u);
      }
      c.usage = counts_.usage();
    } else if (type == "message_delta") {
      if (const json* u = member(j, "usage")) counts_.read(*u);
      c.usage = counts_.usage();
      const json* delta = member(j, "delta");
      c.has_finish = delta && !text_of(member(*delta, "stop_reason")).empty();
    } else if (type == "message_stop") {
      e.kind = UpstreamEvent::Kind::kDone;
      finished_ = true;
    } else if (type == "ping") {
      e.kind = UpstreamEvent::Kind::kKeepAlive;
    } else if (type == "error") {
      const json* error = member(j, "error");
      const std::string_view kind = error ? text_of(member(*error, "type")) : "";
      const std::string_view message = error ? text_of(member(*error, "message")) : "";
      e.kind = UpstreamEvent::Kind::kError;
      e.message = std::string(kind.empty() ? "error" : kind) + ": " + std::string(message);
      finished_ = true;
    }
    // content_block_stop and types not known today: data, passed on (as
    // Anthropic's versioning policy asks of clients).
    out.on(e);
  }

 private:
  static void read_delta(const json& j, ChatChunk& c) {
    const json* delta = member(j, "delta");
    if (!delta) return;
    const std::string_view type = text_of(member(*delta, "type"));
    std::string_view text;
    if (type == "text_delta") {
      text = text_of(member(*delta, "text"));
    } else if (type == "thinking_delta") {
      text = text_of(member(*delta, "thinking"));
      c.has_reasoning = !text.empty();
    } else if (type == "input_json_delta") {
      text = text_of(member(*delta, "partial_json"));
      if (blank(text)) text = {};  // the empty piece a tool_use block opens with
    }
    c.has_output = !text.empty();
    c.output_chars = text.size();
  }

  // A block that opens with something in it: a tool call (its name is the
  // answer's first output, as a chat stream's first tool_calls delta), or
  // text sent whole.
  static void read_block_start(const json& j, ChatChunk& c) {
    const json* block = member(j, "content_block");
    if (!block) return;
    const std::string_view type = text_of(member(*block, "type"));
    if (type == "tool_use") {
      c.has_output = true;
    } else if (type == "text") {
      c.output_chars = text_of(member(*block, "text")).size();
      c.has_output = c.output_chars > 0;
    } else if (type == "thinking") {
      c.output_chars = text_of(member(*block, "thinking")).size();
      c.has_output = c.has_reasoning = c.output_chars > 0;
    }
  }

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
