// OpenAI chat completions as an upstream protocol: the events are already
// chat.completion.chunks, so classification is inspect_chunk() and the bytes
// pass through unchanged.
#include "providers/upstream_protocol.h"

namespace llmgate::providers {

UpstreamEvent UpstreamProtocol::classify(const Frame& ev, ChunkPrefix& prefix) const {
  UpstreamEvent out;
  out.raw = ev.raw;
  if (!ev.has_data) {
    out.kind = UpstreamEvent::Kind::kKeepAlive;
    return out;
  }
  out.data = ev.data;
  // A targeted scan, not a parse: what the relay needs to know.
  inspect_chunk(ev.data, out.chunk, prefix);
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

namespace {

// Each event as it came: classify() and nothing else.
class PassThrough final : public UpstreamStream {
 public:
  explicit PassThrough(const UpstreamProtocol& p) : protocol_(p) {}
  void translate(const Frame& ev, Sink& out) override {
    UpstreamEvent e = protocol_.classify(ev, prefix_);
    out.on(e);
  }

 private:
  const UpstreamProtocol& protocol_;
  ChunkPrefix prefix_;
};

// The client's stream_options with include_usage true: its text as it came
// when it says so already, else written into `written`.
std::string_view stream_options(const RequestBody& in, std::string& written) {
  const RequestBody::Member* so = in.find("stream_options");
  if (so == nullptr || so->v.type != RequestBody::Type::kObject) return R"({"include_usage":true})";
  const auto usage = in.member_of(*so, "include_usage");
  if (usage && usage->v.type == RequestBody::Type::kTrue) return in.text_of(*so);
  nlohmann::json j = in.json_of(*so);
  j["include_usage"] = true;
  written = j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  return written;
}

class OpenAiChat final : public UpstreamProtocol {
 public:
  std::string_view name() const override { return "openai"; }
  bool passthrough() const override { return true; }

  std::string_view target(const std::string&, bool, std::string&) const override {
    return "/chat/completions";
  }

  std::variant<std::string, Untranslatable> body(RequestBody& in,
                                                 const UpstreamRequest& r) const override {
    const auto model = RequestBody::SpliceValue::string(r.upstream_model);
    const std::string_view stream = r.stream ? "true" : "false";
    if (!r.stream_options || !r.stream) {
      return in.spliced({{"model", model}, {"stream", stream}}, {"stream_options"});
    }
    std::string written;
    return in.spliced(
        {{"model", model}, {"stream", stream}, {"stream_options", stream_options(in, written)}});
  }

  std::vector<std::pair<std::string, std::string>> headers(const std::string& api_key,
                                                           const config::Provider&) const override {
    if (api_key.empty()) return {};
    return {{"Authorization", "Bearer " + api_key}};
  }

  std::unique_ptr<UpstreamStream> open_stream(const UpstreamRequest&) const override {
    return classifying_stream(*this);
  }

  std::optional<nlohmann::json> completion(const nlohmann::json& answer,
                                           const UpstreamRequest&) const override {
    if (!answer.is_object() || answer.contains("error")) return std::nullopt;
    auto choices = answer.find("choices");
    if (choices == answer.end() || !choices->is_array() || choices->empty()) return std::nullopt;
    return answer;
  }

  std::optional<nlohmann::json> error(const nlohmann::json& body, int) const override {
    auto e = body.is_object() ? body.find("error") : body.end();
    if (!body.is_object() || e == body.end() || !e->is_object()) return std::nullopt;
    return body;
  }
};

}  // namespace

std::unique_ptr<UpstreamStream> classifying_stream(const UpstreamProtocol& p) {
  return std::make_unique<PassThrough>(p);
}

const UpstreamProtocol& openai_chat_protocol() {
  static const OpenAiChat protocol;
  return protocol;
}

}  // namespace llmgate::providers
