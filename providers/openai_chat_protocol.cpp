// OpenAI chat completions as an upstream protocol: the events are already
// chat.completion.chunks, so classification is inspect_chunk() and the bytes
// pass through unchanged.
#include "providers/upstream_protocol.h"

namespace llmgate::providers {
namespace {

class OpenAiChat final : public UpstreamProtocol {
 public:
  std::string_view name() const override { return "openai"; }
  std::string_view path() const override { return "/chat/completions"; }

  std::string body(nlohmann::json& out, const std::string& upstream_model, bool stream_options,
                   bool stream) const override {
    out["model"] = upstream_model;
    out["stream"] = stream;
    if (!stream_options || !stream) {
      out.erase("stream_options");
      return out.dump();
    }
    auto& so = out["stream_options"];
    if (!so.is_object()) so = nlohmann::json::object();
    so["include_usage"] = true;
    return out.dump();
  }

  std::pair<std::string_view, std::string> credential(const std::string& api_key) const override {
    return {"Authorization", "Bearer " + api_key};
  }

  UpstreamEvent classify(const SseEvent& ev) const override {
    UpstreamEvent out;
    out.raw = ev.raw;
    if (!ev.has_data) {
      out.kind = UpstreamEvent::Kind::kKeepAlive;
      return out;
    }
    out.data = ev.data;
    // A targeted scan, not a parse: what the relay needs to know.
    out.chunk = inspect_chunk(ev.data);
    switch (out.chunk.kind) {
      case ChatChunk::Kind::kDone:
        out.kind = UpstreamEvent::Kind::kDone;
        break;
      case ChatChunk::Kind::kChunk:
        out.kind = UpstreamEvent::Kind::kData;
        break;
      case ChatChunk::Kind::kError:
        out.kind = UpstreamEvent::Kind::kError;
        out.message = std::move(out.chunk.error_message);
        break;
      case ChatChunk::Kind::kMalformed:
        out.kind = UpstreamEvent::Kind::kMalformed;
        out.message = std::move(out.chunk.error_message);
        break;
    }
    return out;
  }
};

}  // namespace

const UpstreamProtocol& openai_chat_protocol() {
  static const OpenAiChat protocol;
  return protocol;
}

}  // namespace llmgate::providers
