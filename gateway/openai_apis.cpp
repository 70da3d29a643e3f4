// The OpenAI API beyond chat as client APIs: POST /v1/responses (typed
// events, no [DONE], errors as an `error` event), /v1/embeddings (one JSON
// answer, never a stream) and /v1/completions (legacy text_completion
// chunks, [DONE]). Upstream events pass through as they came.
#include <map>

#include "gateway/client_api.h"
#include "providers/completion_assembler.h"

namespace llmgate::gateway {
namespace {

using nlohmann::json;
using Kind = providers::UpstreamEvent::Kind;

// ---- Responses ----------------------------------------------------------------

// The answer is the `response` of the stream's last event
// (response.completed or response.incomplete).
class ResponsesAssembly final : public ClientApi::Assembly {
 public:
  void add(const providers::UpstreamEvent& ev) override {
    if (ev.kind != Kind::kData || !ev.chunk.has_finish) return;
    json j = json::parse(ev.data, nullptr, false);
    if (auto r = j.find("response"); j.is_object() && r != j.end() && r->is_object()) {
      response_ = std::move(*r);
    }
  }
  std::string body() const override {
    return response_.dump(-1, ' ', false, json::error_handler_t::replace);
  }

 private:
  json response_ = json::object();
};

class Responses final : public ClientApi {
 public:
  std::string_view name() const override { return "responses"; }
  config::Operation operation() const override { return config::Operation::kResponses; }

  std::variant<ChatRequest, ApiError> parse(std::string_view content_type,
                                            std::string_view body) const override {
    return parse_responses_request(content_type, body);
  }

  void render(const providers::UpstreamEvent& ev, const ChatRequest&, Outbox& out) const override {
    switch (ev.kind) {
      case Kind::kKeepAlive:
      case Kind::kData:
        out.view(ev.raw);
        return;
      case Kind::kDone:  // a [DONE] some servers add: not the Responses API's
      case Kind::kError:
      case Kind::kMalformed:
        return;
    }
  }

  // The Responses API ends with response.completed and nothing after it.
  std::string_view stream_end() const override { return {}; }

  // The Responses API's error event; `error` beside its fields, as the SDKs
  // raise on it.
  std::string error_event(const ApiError& e) const override {
    const json code = e.code ? json(*e.code) : json();
    const json param = e.param ? json(*e.param) : json();
    const json ev = {
        {"type", "error"},
        {"code", code},
        {"message", e.message},
        {"param", param},
        {"error", {{"message", e.message}, {"type", e.type}, {"param", param}, {"code", code}}}};
    return "event: error\ndata: " + ev.dump(-1, ' ', false, json::error_handler_t::replace) +
           "\n\n";
  }

  std::string stream_of_answer(const json& answer, const ChatRequest&) const override {
    const json ev = {{"type", "response.completed"}, {"response", answer}};
    return "event: response.completed\ndata: " +
           ev.dump(-1, ' ', false, json::error_handler_t::replace) + "\n\n";
  }

  std::unique_ptr<Assembly> assembly() const override {
    return std::make_unique<ResponsesAssembly>();
  }
};

// ---- Embeddings -------------------------------------------------------------

class NoAssembly final : public ClientApi::Assembly {
 public:
  void add(const providers::UpstreamEvent&) override {}
  std::string body() const override { return "{}"; }
};

class Embeddings final : public ClientApi {
 public:
  std::string_view name() const override { return "embeddings"; }
  config::Operation operation() const override { return config::Operation::kEmbeddings; }
  std::variant<ChatRequest, ApiError> parse(std::string_view content_type,
                                            std::string_view body) const override {
    return parse_embeddings_request(content_type, body);
  }
  // Never a stream (admission refuses `stream: true`).
  void render(const providers::UpstreamEvent&, const ChatRequest&, Outbox&) const override {}
  std::string_view stream_end() const override { return {}; }
  std::string stream_of_answer(const json&, const ChatRequest&) const override { return {}; }
  std::unique_ptr<Assembly> assembly() const override { return std::make_unique<NoAssembly>(); }
};

// ---- Legacy completions -------------------------------------------------------

// A text_completion from its chunks: each choice's text in order, its
// finish_reason, the stream's id/created/model and usage.
class CompletionsAssembly final : public ClientApi::Assembly {
 public:
  void add(const providers::UpstreamEvent& ev) override {
    if (ev.kind != Kind::kData) return;
    json j = json::parse(ev.data, nullptr, false);
    if (!j.is_object()) return;
    for (const char* key : {"id", "created", "model", "system_fingerprint"}) {
      if (auto it = j.find(key); it != j.end() && !it->is_null() && !head_.contains(key)) {
        head_[key] = *it;
      }
    }
    if (auto u = j.find("usage"); u != j.end() && u->is_object()) usage_ = *u;
    auto choices = j.find("choices");
    if (choices == j.end() || !choices->is_array()) return;
    for (const auto& c : *choices) {
      if (!c.is_object()) continue;
      const auto index = c.value("index", 0);
      Choice& mine = choices_[index];
      if (auto t = c.find("text"); t != c.end() && t->is_string()) {
        mine.text += t->get<std::string>();
      }
      if (auto f = c.find("finish_reason"); f != c.end() && !f->is_null()) mine.finish = *f;
      if (auto l = c.find("logprobs"); l != c.end() && l->is_object()) merge_logprobs(mine, *l);
    }
  }

  std::string body() const override {
    json out = head_;
    out["object"] = "text_completion";
    json choices = json::array();
    for (const auto& [index, c] : choices_) {
      choices.push_back({{"text", c.text},
                         {"index", index},
                         {"logprobs", c.logprobs},
                         {"finish_reason", c.finish}});
    }
    out["choices"] = std::move(choices);
    if (!usage_.is_null()) out["usage"] = usage_;
    return out.dump(-1, ' ', false, json::error_handler_t::replace);
  }

 private:
  struct Choice {
    std::string text;
    json finish;
    json logprobs;  // null, or the arrays of every chunk concatenated
  };
  static void merge_logprobs(Choice& c, const json& l) {
    if (c.logprobs.is_null()) c.logprobs = json::object();
    for (const auto& [key, value] : l.items()) {
      if (!value.is_array()) continue;
      auto& into = c.logprobs[key];
      if (!into.is_array()) into = json::array();
      for (const auto& v : value) into.push_back(v);
    }
  }
  json head_ = json::object();
  json usage_;
  std::map<std::int64_t, Choice> choices_;
};

class Completions final : public ClientApi {
 public:
  std::string_view name() const override { return "completions"; }
  config::Operation operation() const override { return config::Operation::kCompletions; }
  std::variant<ChatRequest, ApiError> parse(std::string_view content_type,
                                            std::string_view body) const override {
    return parse_completions_request(content_type, body);
  }
  void render(const providers::UpstreamEvent& ev, const ChatRequest& req,
              Outbox& out) const override {
    render_openai_chunk(ev, req, out);
  }
  std::string_view stream_end() const override { return "data: [DONE]\n\n"; }

  // One chunk with each choice's whole text, the usage chunk when asked for.
  std::string stream_of_answer(const json& answer, const ChatRequest& req) const override {
    json chunk = answer;
    chunk.erase("usage");
    std::string out =
        "data: " + chunk.dump(-1, ' ', false, json::error_handler_t::replace) + "\n\n";
    if (req.include_usage && answer.contains("usage")) {
      json u = {{"id", answer.value("id", json())},
                {"object", "text_completion"},
                {"created", answer.value("created", json())},
                {"model", answer.value("model", json())},
                {"choices", json::array()},
                {"usage", answer["usage"]}};
      out += "data: " + u.dump() + "\n\n";
    }
    return out + "data: [DONE]\n\n";
  }
  std::unique_ptr<Assembly> assembly() const override {
    return std::make_unique<CompletionsAssembly>();
  }
};

}  // namespace

const ClientApi& responses_api() {
  static const Responses api;
  return api;
}

const ClientApi& embeddings_api() {
  static const Embeddings api;
  return api;
}

const ClientApi& completions_api() {
  static const Completions api;
  return api;
}

const ClientApi& client_api(config::Operation op) {
  switch (op) {
    case config::Operation::kResponses:
      return responses_api();
    case config::Operation::kEmbeddings:
      return embeddings_api();
    case config::Operation::kCompletions:
      return completions_api();
    case config::Operation::kChat:
      break;
  }
  return chat_completions_api();
}

}  // namespace llmgate::gateway
