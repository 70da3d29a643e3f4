// The OpenAI API beyond chat completions, as upstream protocols: the
// Responses API (POST /responses), embeddings (POST /embeddings) and legacy
// completions (POST /completions). Their events and answers pass through
// byte for byte; classify() reads what the relay needs (output started,
// usage, finish, error) from each event's own shape.
#include <algorithm>
#include <cstdint>
#include <limits>
#include <string>

#include "providers/json_depth.h"
#include "providers/upstream_protocol.h"

namespace llmgate::providers {
namespace {

using nlohmann::json;

// `data` parsed as a JSON object, or why it is not one.
std::optional<json> parse_event(std::string_view data, UpstreamEvent& out) {
  if (json_too_deep(data) || data.find('\0') != std::string_view::npos) {
    out.kind = UpstreamEvent::Kind::kMalformed;
    out.message = "upstream event is not valid JSON";
    return std::nullopt;
  }
  json j = json::parse(data, nullptr, false);
  if (!j.is_object()) {
    out.kind = UpstreamEvent::Kind::kMalformed;
    out.message = "upstream event is not a JSON object";
    return std::nullopt;
  }
  return j;
}

std::string text_of(const json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
}

// An in-band {"error": {...}} (or a bare error object) as the relay's kError;
// `otherwise` when it says no message.
void in_band_error(const json& error, UpstreamEvent& out,
                   const char* otherwise = "upstream sent an error event") {
  out.kind = UpstreamEvent::Kind::kError;
  std::string message = error.is_object() ? text_of(error, "message") : std::string();
  out.message = message.empty() ? otherwise : message;
}

// What the OpenAI protocols share: the key as a Bearer token, OpenAI's error
// shape, events and answers forwarded verbatim.
class OpenAiFamily : public UpstreamProtocol {
 public:
  bool passthrough() const override { return true; }
  std::vector<std::pair<std::string, std::string>> headers(
      const std::string& api_key, const config::Provider& p) const override {
    return openai_chat_protocol().headers(api_key, p);
  }
  std::optional<json> error(const json& body, int status) const override {
    return openai_chat_protocol().error(body, status);
  }
  std::unique_ptr<UpstreamStream> open_stream(const UpstreamRequest&) const override {
    return classifying_stream(*this);
  }
};

// ---- Responses API ----------------------------------------------------------

// The usage of a Responses answer (input/output tokens and their details)
// in the chat form the statistics read.
std::optional<Usage> responses_usage(const json& response) {
  auto u = response.find("usage");
  if (u == response.end() || !u->is_object()) return std::nullopt;
  auto get = [](const json& o, const char* key) -> json {
    auto it = o.find(key);
    return it == o.end() ? json() : *it;
  };
  auto detail = [&](const char* object, const char* key) -> json {
    auto d = u->find(object);
    return d != u->end() && d->is_object() ? get(*d, key) : json();
  };
  json chat = {{"prompt_tokens", get(*u, "input_tokens")},
               {"completion_tokens", get(*u, "output_tokens")},
               {"total_tokens", get(*u, "total_tokens")},
               {"prompt_tokens_details",
                {{"cached_tokens", detail("input_tokens_details", "cached_tokens")}}},
               {"completion_tokens_details",
                {{"reasoning_tokens", detail("output_tokens_details", "reasoning_tokens")}}}};
  return usage_of(json{{"usage", std::move(chat)}});
}

// The start of classify() for the OpenAI API's streams: a comment-only block
// is a keep-alive, `[DONE]` (some servers add it) the end; else the event is
// JSON for the caller to read (nullopt: `out` is already decided).
std::optional<json> open_event(const Frame& ev, UpstreamEvent& out) {
  out.raw = ev.raw;
  if (!ev.has_data) {
    out.kind = UpstreamEvent::Kind::kKeepAlive;
    return std::nullopt;
  }
  out.data = ev.data;
  if (ev.data == "[DONE]") {
    out.kind = UpstreamEvent::Kind::kDone;
    return std::nullopt;
  }
  return parse_event(ev.data, out);
}

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

class OpenAiResponses final : public OpenAiFamily {
 public:
  std::string_view name() const override { return "openai-responses"; }
  std::string_view target(const std::string&, bool, std::string&) const override {
    return "/responses";
  }

  std::variant<std::string, Untranslatable> body(RequestBody& in,
                                                 const UpstreamRequest& r) const override {
    return in.spliced({{"model", RequestBody::SpliceValue::string(r.upstream_model)},
                       {"stream", r.stream ? "true" : "false"}});
  }

  // The typed events of a Responses stream: the first output is the first
  // non-empty delta of text, reasoning, refusal or function-call arguments;
  // response.completed and response.incomplete finish it (with the usage);
  // response.failed and error are in-band errors; the rest (created,
  // in_progress, output_item.added, ...) ride along without output.
  UpstreamEvent classify(const Frame& ev, ChunkPrefix&) const override {
    UpstreamEvent out;
    auto j = open_event(ev, out);
    if (!j) return out;
    const std::string type = text_of(*j, "type");
    if (type.empty()) {
      if (auto e = j->find("error"); e != j->end()) {
        in_band_error(*e, out);
        return out;
      }
      out.kind = UpstreamEvent::Kind::kMalformed;
      out.message = "upstream event has no \"type\"";
      return out;
    }
    if (type == "error") {
      auto e = j->find("error");
      in_band_error(e != j->end() && e->is_object() ? *e : *j, out);
      return out;
    }
    if (type == "response.failed") {
      auto resp = j->find("response");
      const json error = resp != j->end() && resp->is_object() && resp->contains("error")
                             ? resp->at("error")
                             : json();
      in_band_error(error, out, "response.failed");
      return out;
    }
    out.kind = UpstreamEvent::Kind::kData;
    out.chunk.kind = ChatChunk::Kind::kChunk;
    if (auto n = j->find("sequence_number"); n != j->end() && n->is_number_unsigned())
      out.sequence_number = static_cast<std::int64_t>(std::min<std::uint64_t>(
          n->get<std::uint64_t>(), std::numeric_limits<std::int64_t>::max() - 1));
    if (type == "response.created") {
      if (auto resp = j->find("response"); resp != j->end() && resp->is_object()) {
        out.response_id = text_of(*resp, "id");
      }
    }
    if (ends_with(type, ".delta")) {
      auto d = j->find("delta");
      if (d != j->end() && d->is_string() && !d->get_ref<const std::string&>().empty()) {
        out.chunk.has_output = true;
        out.chunk.output_chars = d->get_ref<const std::string&>().size();
        out.chunk.has_reasoning = type.find("reasoning") != std::string::npos;
      }
    } else if (type == "response.completed" || type == "response.incomplete") {
      out.chunk.has_finish = true;
      if (auto resp = j->find("response"); resp != j->end() && resp->is_object()) {
        out.chunk.usage = responses_usage(*resp);
      }
    }
    return out;
  }

  std::optional<json> completion(const json& answer, const UpstreamRequest&) const override {
    if (!answer.is_object() || !answer.contains("output") ||
        text_of(answer, "object") != "response") {
      return std::nullopt;
    }
    return answer;
  }

  std::optional<Usage> answer_usage(const json& answer) const override {
    return responses_usage(answer);
  }
};

// ---- Embeddings ---------------------------------------------------------------

class OpenAiEmbeddings final : public OpenAiFamily {
 public:
  std::string_view name() const override { return "openai-embeddings"; }
  std::string_view target(const std::string&, bool, std::string&) const override {
    return "/embeddings";
  }

  std::variant<std::string, Untranslatable> body(RequestBody& in,
                                                 const UpstreamRequest& r) const override {
    return in.spliced({{"model", RequestBody::SpliceValue::string(r.upstream_model)}}, {"stream"});
  }

  // Never a stream: any event is out of place.
  UpstreamEvent classify(const Frame& ev, ChunkPrefix&) const override {
    UpstreamEvent out;
    out.raw = ev.raw;
    out.message = "an embeddings answer is not a stream";
    return out;
  }

  std::optional<json> completion(const json& answer, const UpstreamRequest&) const override {
    if (!answer.is_object() || answer.contains("error")) return std::nullopt;
    auto data = answer.find("data");
    if (data == answer.end() || !data->is_array()) return std::nullopt;
    return answer;
  }
};

// ---- Legacy completions -------------------------------------------------------

class OpenAiCompletions final : public OpenAiFamily {
 public:
  std::string_view name() const override { return "openai-completions"; }
  std::string_view target(const std::string&, bool, std::string&) const override {
    return "/completions";
  }

  std::variant<std::string, Untranslatable> body(RequestBody& in,
                                                 const UpstreamRequest& r) const override {
    // As for chat: the stream and its usage chunk.
    return openai_chat_protocol().body(in, r);
  }

  // text_completion chunks: output is a choice's non-empty `text`.
  UpstreamEvent classify(const Frame& ev, ChunkPrefix&) const override {
    UpstreamEvent out;
    auto j = open_event(ev, out);
    if (!j) return out;
    if (auto e = j->find("error"); e != j->end()) {
      in_band_error(*e, out);
      return out;
    }
    auto choices = j->find("choices");
    if (choices == j->end() || !choices->is_array()) {
      out.kind = UpstreamEvent::Kind::kMalformed;
      out.message = "upstream event has no \"choices\" array";
      return out;
    }
    out.kind = UpstreamEvent::Kind::kData;
    out.chunk.kind = ChatChunk::Kind::kChunk;
    out.chunk.usage = usage_of(*j);
    out.chunk.usage_only = choices->empty() && out.chunk.usage.has_value();
    for (const auto& choice : *choices) {
      if (!choice.is_object()) continue;
      if (auto t = choice.find("text"); t != choice.end() && t->is_string()) {
        const std::size_t n = t->get_ref<const std::string&>().size();
        out.chunk.output_chars += n;
        if (n > 0) out.chunk.has_output = true;
      }
      if (auto f = choice.find("finish_reason"); f != choice.end() && !f->is_null()) {
        out.chunk.has_finish = true;
      }
    }
    return out;
  }

  std::optional<json> completion(const json& answer, const UpstreamRequest&) const override {
    if (!answer.is_object() || answer.contains("error")) return std::nullopt;
    auto choices = answer.find("choices");
    if (choices == answer.end() || !choices->is_array() || choices->empty()) return std::nullopt;
    return answer;
  }
};

}  // namespace

const UpstreamProtocol& openai_responses_protocol() {
  static const OpenAiResponses protocol;
  return protocol;
}

const UpstreamProtocol& openai_embeddings_protocol() {
  static const OpenAiEmbeddings protocol;
  return protocol;
}

const UpstreamProtocol& openai_completions_protocol() {
  static const OpenAiCompletions protocol;
  return protocol;
}

}  // namespace llmgate::providers
