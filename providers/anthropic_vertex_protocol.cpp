// Anthropic's Messages API on Google Vertex AI (upstream_protocol.h): the
// same translation as Anthropic's own API (chat in, or /v1/messages passed
// through), sent the way Vertex AI takes it -- the model in the path
// (.../publishers/anthropic/models/{model}:streamRawPredict, :rawPredict
// for a whole answer), "anthropic_version": "vertex-2023-10-16" in the body
// instead of the anthropic-version header, no "model" member, and an OAuth
// token (providers[].auth) instead of x-api-key.
#include <nlohmann/json.hpp>

#include "providers/upstream_protocol.h"

namespace llmgate::providers {
namespace {

using json = nlohmann::ordered_json;

class OnVertex final : public UpstreamProtocol {
 public:
  OnVertex(const UpstreamProtocol& inner, std::string_view name) : inner_(inner), name_(name) {}

  std::string_view name() const override { return name_; }

  std::string_view target(const std::string& upstream_model, bool stream,
                          std::string& built) const override {
    built.assign("/models/")
        .append(upstream_model)
        .append(stream ? ":streamRawPredict" : ":rawPredict");
    return built;
  }

  std::variant<std::string, Untranslatable> body(RequestBody& client_body,
                                                 const UpstreamRequest& r) const override {
    auto b = inner_.body(client_body, r);
    auto* text = std::get_if<std::string>(&b);
    if (!text) return b;
    json doc = json::parse(*text, nullptr, /*allow_exceptions=*/false);
    if (!doc.is_object()) return b;  // (never: the inner protocol wrote it)
    doc.erase("model");
    doc["anthropic_version"] = std::string(kVertexAnthropicVersion);
    return doc.dump(-1, ' ', false, json::error_handler_t::replace);
  }

  std::vector<std::pair<std::string, std::string>> headers(const std::string&,
                                                           const config::Provider&) const override {
    return {};  // the token is auth:'s; the version is in the body
  }

  Framing framing() const override { return inner_.framing(); }
  std::unique_ptr<UpstreamStream> open_stream(const UpstreamRequest& r) const override {
    return inner_.open_stream(r);
  }
  std::optional<nlohmann::json> completion(const nlohmann::json& answer,
                                           const UpstreamRequest& r) const override {
    return inner_.completion(answer, r);
  }
  std::optional<Usage> answer_usage(const nlohmann::json& answer) const override {
    return inner_.answer_usage(answer);
  }
  std::optional<nlohmann::json> error(const nlohmann::json& body, int status) const override {
    return inner_.error(body, status);
  }
  ErrorMeaning error_meaning(const nlohmann::json& body, int status) const override {
    return inner_.error_meaning(body, status);
  }

 private:
  const UpstreamProtocol& inner_;
  std::string_view name_;
};

}  // namespace

bool anthropic_on_vertex(const config::Provider& p) {
  using K = config::ProviderAuth::Kind;
  return p.protocol == config::Protocol::kAnthropic &&
         (p.auth.kind == K::kGoogleServiceAccount || p.auth.kind == K::kGoogleMetadata);
}

const UpstreamProtocol& anthropic_vertex_protocol() {
  static const OnVertex protocol(anthropic_protocol(), "anthropic-vertex");
  return protocol;
}

const UpstreamProtocol& anthropic_messages_vertex_protocol() {
  static const OnVertex protocol(anthropic_messages_protocol(), "anthropic-messages-vertex");
  return protocol;
}

}  // namespace llmgate::providers
