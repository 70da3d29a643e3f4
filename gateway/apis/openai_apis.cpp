// The OpenAI API beyond chat as client APIs: POST /v1/responses (typed
// events, no [DONE], errors as an `error` event), /v1/embeddings (one JSON
// answer, never a stream) and /v1/completions (legacy text_completion
// chunks, [DONE]). Upstream events pass through as they came.
#include <algorithm>
#include <array>
#include <cstring>
#include <functional>
#include <map>

#include "gateway/apis/client_api.h"
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

// Writes a Responses stream's events, numbered from 0 as OpenAI numbers them.
class EventWriter {
 public:
  void emit(std::string_view type, json ev) {
    ev["type"] = type;
    ev["sequence_number"] = sequence_++;
    out_ += "event: ";
    out_ += type;
    out_ += "\ndata: ";
    out_ += ev.dump(-1, ' ', false, json::error_handler_t::replace);
    out_ += "\n\n";
  }
  // A text as one stream: `events`.delta with all of it (none when it is
  // empty), then `events`.done with it as `field`; each at `at`, with its
  // extra fields.
  void text(const json& at, const std::string& events, const char* field, const std::string& text,
            const json& delta_extra = json::object(), const json& done_extra = json::object(),
            const std::function<void()>& before_done = {}) {
    if (!text.empty()) {
      json delta = at;
      delta["delta"] = text;
      delta.update(delta_extra);
      emit(events + ".delta", std::move(delta));
    }
    if (before_done) before_done();
    json done = at;
    done[field] = text;
    done.update(done_extra);
    emit(events + ".done", std::move(done));
  }
  std::string take() { return std::move(out_); }

 private:
  std::string out_;
  std::int64_t sequence_ = 0;
};

std::string string_field(const json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
}

// One content part of a message item: added, its text as one delta, done.
void stream_content_part(EventWriter& w, const json& part, const json& at) {
  const std::string type = string_field(part, "type");
  json empty = part;
  std::string text;
  const char* field = nullptr;  // the part's text field, when it has one
  std::string events;           // its delta and done events' prefix
  if (type == "output_text") {
    field = "text";
    events = "response.output_text";
  } else if (type == "refusal") {
    field = "refusal";
    events = "response.refusal";
  }
  if (field) {
    text = string_field(part, field);
    empty[field] = "";
    if (type == "output_text") empty["annotations"] = json::array();
  }
  json added = at;
  added["part"] = std::move(empty);
  w.emit("response.content_part.added", std::move(added));
  if (type == "output_text") {
    // The annotations of the text, after it and before its done.
    auto annotate = [&] {
      auto a = part.find("annotations");
      if (a == part.end() || !a->is_array()) return;
      std::int64_t i = 0;
      for (const auto& annotation : *a) {
        json ev = at;
        ev["annotation_index"] = i++;
        ev["annotation"] = annotation;
        w.emit("response.output_text.annotation.added", std::move(ev));
      }
    };
    const json logprobs = {{"logprobs", part.value("logprobs", json::array())}};
    w.text(at, events, field, text, logprobs, logprobs, annotate);
  } else if (field) {
    w.text(at, events, field, text);
  }
  json done = at;
  done["part"] = part;
  w.emit("response.content_part.done", std::move(done));
}

// A reasoning item's summary parts and reasoning text, each added, as one
// delta, and done.
void stream_reasoning(EventWriter& w, const json& item, const json& at) {
  if (auto s = item.find("summary"); s != item.end() && s->is_array()) {
    std::int64_t i = 0;
    for (const auto& part : *s) {
      if (!part.is_object()) continue;
      json where = at;
      where["summary_index"] = i++;
      const std::string text = string_field(part, "text");
      json added = where;
      added["part"] = {{"type", part.value("type", "summary_text")}, {"text", ""}};
      w.emit("response.reasoning_summary_part.added", std::move(added));
      w.text(where, "response.reasoning_summary_text", "text", text);
      json done = where;
      done["part"] = part;
      w.emit("response.reasoning_summary_part.done", std::move(done));
    }
  }
  if (auto c = item.find("content"); c != item.end() && c->is_array()) {
    std::int64_t i = 0;
    for (const auto& part : *c) {
      if (!part.is_object()) continue;
      json where = at;
      where["content_index"] = i++;
      w.text(where, "response.reasoning_text", "text", string_field(part, "text"));
    }
  }
}

}  // namespace

// The typed events a stream of this response would have had: created and
// in_progress (the response without its output), then each output item
// added, its content as one delta per part, done, and the response's own
// end (completed, incomplete or failed), numbered from 0. What the SDKs'
// stream readers expect from a stream, whatever the deployment answered.
std::string responses_stream_of(const json& answer) {
  EventWriter w;
  json pending = answer.is_object() ? answer : json::object();
  pending["status"] = "in_progress";
  pending["output"] = json::array();
  pending["usage"] = nullptr;
  w.emit("response.created", {{"response", pending}});
  w.emit("response.in_progress", {{"response", std::move(pending)}});
  const json none = json::array();
  auto output = answer.find("output");
  const json& items = output != answer.end() && output->is_array() ? *output : none;
  std::int64_t index = 0;
  for (const json& item : items) {
    if (!item.is_object()) continue;
    const std::int64_t output_index = index++;
    const std::string type = string_field(item, "type");
    json id = item.value("id", json());
    json at = {{"output_index", output_index}, {"item_id", id}};
    json opening = item;
    if (opening.contains("status")) opening["status"] = "in_progress";
    if (type == "message") opening["content"] = json::array();
    if (type == "function_call") opening["arguments"] = "";
    if (type == "reasoning") {
      opening["summary"] = json::array();
      opening.erase("content");
    }
    w.emit("response.output_item.added",
           {{"output_index", output_index}, {"item", std::move(opening)}});
    if (type == "message") {
      if (auto c = item.find("content"); c != item.end() && c->is_array()) {
        std::int64_t content_index = 0;
        for (const json& part : *c) {
          json where = at;
          where["content_index"] = content_index++;
          // (An upstream's part that is not an object is no part: skipped.)
          if (part.is_object()) stream_content_part(w, part, where);
        }
      }
    } else if (type == "function_call") {
      json name = json::object();
      if (item.contains("name")) name["name"] = item["name"];
      w.text(at, "response.function_call_arguments", "arguments", string_field(item, "arguments"),
             json::object(), name);
    } else if (type == "reasoning") {
      stream_reasoning(w, item, at);
    }
    w.emit("response.output_item.done", {{"output_index", output_index}, {"item", item}});
  }
  const std::string status = answer.is_object() ? string_field(answer, "status") : "";
  const char* end = status == "incomplete" ? "response.incomplete"
                    : status == "failed"   ? "response.failed"
                                           : "response.completed";
  w.emit(end, {{"response", answer}});
  return w.take();
}

namespace {

class Responses final : public ClientApi {
 public:
  std::string_view name() const override { return "responses"; }
  config::Operation operation() const override { return config::Operation::kResponses; }
  bool stores_responses() const override { return true; }

  std::variant<ChatRequest, ApiError> parse(std::string_view content_type,
                                            std::string body) const override {
    return parse_responses_request(content_type, std::move(body));
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
  std::string error_event(const ApiError& e, std::int64_t next_sequence) const override {
    const json code = e.code ? json(*e.code) : json();
    const json param = e.param ? json(*e.param) : json();
    const json ev = {
        {"type", "error"},
        {"sequence_number", next_sequence},
        {"code", code},
        {"message", e.message},
        {"param", param},
        {"error", {{"message", e.message}, {"type", e.type}, {"param", param}, {"code", code}}}};
    return "event: error\ndata: " + ev.dump(-1, ' ', false, json::error_handler_t::replace) +
           "\n\n";
  }

  std::string stream_of_answer(const json& answer, const ChatRequest&) const override {
    return responses_stream_of(answer);
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
                                            std::string body) const override {
    return parse_embeddings_request(content_type, std::move(body));
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
                                            std::string body) const override {
    return parse_completions_request(content_type, std::move(body));
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

namespace {

constexpr std::string_view kSequenceKey = "\"sequence_number\"";

// One past the greatest whole "sequence_number": N in `text` (digits that run
// to its end may go on in the next read: not taken), else 0.
std::int64_t next_after_numbers(std::string_view text, bool& numbered) {
  std::int64_t next = 0;
  for (std::size_t at = text.find(kSequenceKey); at != std::string_view::npos;
       at = text.find(kSequenceKey, at + kSequenceKey.size())) {
    std::size_t i = at + kSequenceKey.size();
    while (i < text.size() && (text[i] == ' ' || text[i] == '\t')) ++i;
    if (i >= text.size() || text[i] != ':') continue;
    ++i;
    while (i < text.size() && (text[i] == ' ' || text[i] == '\t')) ++i;
    const std::size_t digits = i;
    std::int64_t n = 0;
    while (i < text.size() && text[i] >= '0' && text[i] <= '9' && i - digits < 15)
      n = n * 10 + (text[i++] - '0');
    if (i == digits || i == text.size()) continue;
    numbered = true;
    next = std::max(next, n + 1);
  }
  return next;
}

}  // namespace

void SequenceFollower::feed(std::string_view bytes) {
  // The seam -- the last bytes before these and their first ones -- holds
  // whole a key or number cut between reads; the rest is scanned in place.
  // (A number seen twice changes nothing: the greatest is kept.)
  std::array<char, kKeep + kSeamHead> seam;
  const std::size_t head = std::min(bytes.size(), kSeamHead);
  std::memcpy(seam.data(), tail_.data(), tail_size_);
  std::memcpy(seam.data() + tail_size_, bytes.data(), head);
  bool numbered = false;
  next_ = std::max(next_,
                   next_after_numbers(std::string_view(seam.data(), tail_size_ + head), numbered));
  next_ = std::max(next_, next_after_numbers(bytes, numbered));
  if (!numbered && !saw_number_) {
    // No numbers at all (yet): the events ended so far, each a blank line.
    for (std::size_t at = bytes.find("\n\n"); at != std::string_view::npos;
         at = bytes.find("\n\n", at + 2))
      ++next_;
    // A blank line across the reads (its first LF before them; not one the
    // last read counted whole).
    const bool counted_before = tail_size_ >= 2 && tail_[tail_size_ - 2] == '\n';
    if (tail_size_ > 0 && tail_[tail_size_ - 1] == '\n' && !counted_before && !bytes.empty() &&
        bytes.front() == '\n')
      ++next_;
  }
  saw_number_ = saw_number_ || numbered;
  // The last kKeep bytes of what came so far.
  if (bytes.size() >= kKeep) {
    std::memcpy(tail_.data(), bytes.data() + bytes.size() - kKeep, kKeep);
    tail_size_ = kKeep;
  } else {
    const std::size_t keep = std::min(tail_size_, kKeep - bytes.size());
    std::memmove(tail_.data(), tail_.data() + tail_size_ - keep, keep);
    std::memcpy(tail_.data() + keep, bytes.data(), bytes.size());
    tail_size_ = keep + bytes.size();
  }
}

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
