// POST /v1/messages as a client API: Anthropic's Messages API, served by
// every deployment of a model. To an Anthropic deployment the client's
// document goes as it came (the model put in) and its events come back as
// they came; to any other, the request is translated to chat
// (messages_request.cpp) and the chat chunks the protocols give are
// rendered as Anthropic's event sequence -- message_start,
// content_block_start / _delta / _stop per block (text, thinking, tool_use
// with input_json_delta), message_delta with the stop reason and usage,
// message_stop; pings for keep-alives. A non-streamed answer is one Message.
// docs/providers.md, "Anthropic clients".
#include "gateway/apis/messages_api.h"

#include <algorithm>
#include <charconv>
#include <map>
#include <optional>
#include <string>

#include "gateway/apis/client_api.h"
#include "gateway/apis/messages_request.h"
#include "providers/anthropic_wire.h"
#include "providers/completion_assembler.h"
#include "providers/json_depth.h"
#include "providers/json_member.h"
#include "providers/json_write.h"
#include "providers/request_body.h"

namespace llmgate::gateway {
namespace {

using nlohmann::json;
using nlohmann::ordered_json;
using providers::UpstreamEvent;
using Kind = UpstreamEvent::Kind;

std::string dump(const ordered_json& j) { return providers::json_text(j); }

bool native(const providers::UpstreamProtocol& p) {
  return &p == &providers::anthropic_messages_protocol() ||
         &p == &providers::anthropic_messages_vertex_protocol();
}

using providers::member;
using providers::string_or;

// One SSE event of Anthropic's: its type as the event name and in the data.
void event(std::string& out, std::string_view type, const ordered_json& data) {
  out.append("event: ").append(type).append("\ndata: ").append(dump(data)).append("\n\n");
}

constexpr std::string_view kPing = "event: ping\ndata: {\"type\":\"ping\"}\n\n";

// An Anthropic message id for an answer another provider gave.
std::string message_id(const std::string& id) {
  if (id.rfind("msg_", 0) == 0) return id;
  return "msg_" + (id.empty() ? std::string("llmgate") : id);
}

// A tool call's arguments (JSON text) as tool_use input: an object, else
// the text kept under "arguments" (never dropped).
json tool_input(const std::string& arguments) {
  if (arguments.find_first_not_of(" \t\r\n") == std::string::npos) return json::object();
  json input =
      providers::json_too_deep(arguments) ? json() : json::parse(arguments, nullptr, false);
  if (input.is_object()) return input;
  return json{{"arguments", arguments}};
}

}  // namespace

ordered_json message_of_completion(const json& completion) {
  ordered_json content = ordered_json::array();
  std::string finish;
  const json* choices = member(completion, "choices");
  const json* choice =
      choices && choices->is_array() && !choices->empty() ? &(*choices)[0] : nullptr;
  if (choice) {
    finish = string_or(*choice, "finish_reason");
    if (const json* m = member(*choice, "message")) {
      // (Both names of reasoning; a refusal's words are the answer's text.)
      const std::string thinking = string_or(*m, "reasoning_content") + string_or(*m, "reasoning");
      if (!thinking.empty())
        content.push_back({{"type", "thinking"}, {"thinking", thinking}, {"signature", ""}});
      const std::string text = string_or(*m, "content") + string_or(*m, "refusal");
      if (!text.empty()) content.push_back({{"type", "text"}, {"text", text}});
      if (const json* calls = member(*m, "tool_calls"); calls && calls->is_array()) {
        for (const json& call : *calls) {
          const json* fn = member(call, "function");
          content.push_back({{"type", "tool_use"},
                             {"id", string_or(call, "id")},
                             {"name", fn ? string_or(*fn, "name") : std::string()},
                             {"input", tool_input(fn ? string_or(*fn, "arguments") : "")}});
        }
      }
    }
  }
  providers::anthropic::Counts counts;
  if (auto u = providers::usage_of(completion)) counts = providers::anthropic::Counts::of(*u);
  return {{"id", message_id(string_or(completion, "id"))},
          {"type", "message"},
          {"role", "assistant"},
          {"model", string_or(completion, "model")},
          {"content", std::move(content)},
          {"stop_reason", providers::anthropic::stop_reason(finish)},
          {"stop_sequence", nullptr},
          {"usage", counts.anthropic()}};
}

std::string stream_of_message(const ordered_json& message) {
  std::string out;
  ordered_json start = message;
  start["content"] = ordered_json::array();
  start["stop_reason"] = nullptr;
  ordered_json usage = message.contains("usage") ? message["usage"] : ordered_json::object();
  ordered_json start_usage = usage;
  if (start_usage.is_object()) start_usage["output_tokens"] = 0;
  start["usage"] = start_usage;
  event(out, "message_start", {{"type", "message_start"}, {"message", std::move(start)}});
  std::int64_t index = 0;
  if (message.contains("content") && message["content"].is_array()) {
    for (const ordered_json& block : message["content"]) {
      const std::string type = block.value("type", "");
      ordered_json opening = block;
      ordered_json delta;
      if (type == "text") {
        opening["text"] = "";
        delta = {{"type", "text_delta"}, {"text", block.value("text", "")}};
      } else if (type == "thinking") {
        opening["thinking"] = "";
        delta = {{"type", "thinking_delta"}, {"thinking", block.value("thinking", "")}};
      } else if (type == "tool_use") {
        opening["input"] = ordered_json::object();
        delta = {{"type", "input_json_delta"},
                 {"partial_json", block.contains("input") ? dump(block["input"]) : "{}"}};
      }
      event(out, "content_block_start",
            {{"type", "content_block_start"}, {"index", index}, {"content_block", opening}});
      if (!delta.is_null())
        event(out, "content_block_delta",
              {{"type", "content_block_delta"}, {"index", index}, {"delta", std::move(delta)}});
      if (type == "thinking" && !block.value("signature", "").empty())
        event(out, "content_block_delta",
              {{"type", "content_block_delta"},
               {"index", index},
               {"delta", {{"type", "signature_delta"}, {"signature", block["signature"]}}}});
      event(out, "content_block_stop", {{"type", "content_block_stop"}, {"index", index}});
      ++index;
    }
  }
  event(out, "message_delta",
        {{"type", "message_delta"},
         {"delta",
          {{"stop_reason", message.contains("stop_reason") ? message["stop_reason"] : nullptr},
           {"stop_sequence",
            message.contains("stop_sequence") ? message["stop_sequence"] : nullptr}}},
         {"usage", std::move(usage)}});
  event(out, "message_stop", {{"type", "message_stop"}});
  return out;
}

namespace {

// The client's document without the thinking blocks that carry no
// signature -- the ones a translated answer gave (another provider's
// reasoning, which the client sends back in its history): Anthropic checks
// every thinking block's signature and would refuse the request. Nullopt
// when it drops none. Called only when admission saw one.
std::optional<providers::RequestBody> without_unsigned_thinking(const providers::RequestBody& doc) {
  // (In its own order: nothing else changes.)
  ordered_json j = ordered_json::parse(doc.text(), nullptr, false);
  // Without what admission took out of it (the gateway's "route"): the
  // text still holds it.
  for (const providers::RequestBody::Member& m : doc.members()) {
    if (m.removed && j.is_object()) j.erase(std::string(doc.key(m)));
  }
  ordered_json* messages = j.is_object() && j.contains("messages") ? &j["messages"] : nullptr;
  if (!messages || !messages->is_array()) return std::nullopt;
  bool dropped = false;
  for (ordered_json& m : *messages) {
    ordered_json* content = m.is_object() && m.contains("content") ? &m["content"] : nullptr;
    if (!content || !content->is_array()) continue;
    const auto unsigned_thinking = [](const ordered_json& b) {
      return b.is_object() && b.value("type", "") == "thinking" &&
             (!b.contains("signature") || b["signature"] == "");
    };
    const auto end = std::remove_if(content->begin(), content->end(), unsigned_thinking);
    dropped = dropped || end != content->end();
    content->erase(end, content->end());
  }
  if (!dropped) return std::nullopt;
  auto parsed = providers::RequestBody::parse(dump(j));
  if (auto* b = std::get_if<providers::RequestBody>(&parsed)) return std::move(*b);
  return std::nullopt;
}

// ---- streams ---------------------------------------------------------------------

// Anthropic's own events: as they came.
class NativeRenderer final : public ClientApi::StreamRenderer {
 public:
  void render(const UpstreamEvent& ev, Outbox& out) override {
    if (ev.kind == Kind::kData || ev.kind == Kind::kKeepAlive || ev.kind == Kind::kDone)
      out.view(ev.raw);
  }
  // A stream that stopped without message_stop after its stop reason.
  void end(Outbox& out) override {
    out.copy("event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n");
  }
};

// Chat chunks (an OpenAI-compatible or Gemini deployment's, as the
// protocols give them) as Anthropic's events.
class ChatToMessages final : public ClientApi::StreamRenderer {
 public:
  // `scan`: render each chunk from the classification's views or the
  // chunk's index; else from its parsed document (the reference the fuzzer
  // holds the others to).
  explicit ChatToMessages(bool scan = true) : scan_(scan) {}

  void render(const UpstreamEvent& ev, Outbox& out) override {
    if (finished_) return;
    switch (ev.kind) {
      case Kind::kKeepAlive:
        out.copy(kPing);
        return;
      case Kind::kDone:
        return finish(out);
      case Kind::kError:
      case Kind::kMalformed:
        return;
      case Kind::kData:
        break;
    }
    text_.clear();
    if (scan_ && ev.chunk.plain) return render_plain(ev.chunk, out);
    // (A chunk the classification parsed already: read from that document.)
    if (scan_ && ev.chunk.json.is_null() && render_indexed(ev)) return out.copy(text_);
    // (The classification's document when it made one: not copied.)
    json parsed;
    if (ev.chunk.json.is_null()) parsed = providers::parse_chunk(ev.data).json;
    const json& chunk = ev.chunk.json.is_null() ? parsed : ev.chunk.json;
    start(chunk);
    if (auto u = providers::usage_of(chunk)) usage_ = u;
    const json* choices = member(chunk, "choices");
    if (choices && choices->is_array()) {
      for (const json& choice : *choices) {
        // Anthropic answers one message: the first choice's.
        if (const json* i = member(choice, "index"); i && *i != 0) continue;
        if (const json* delta = member(choice, "delta")) read_delta(*delta);
        if (std::string f = string_or(choice, "finish_reason"); !f.empty()) finish_reason_ = f;
      }
    }
    out.copy(text_);
  }

  void end(Outbox& out) override { finish(out); }

 private:
  enum class Block { kNone, kText, kThinking, kTool };

  // A plain chunk (every chunk of a usual answer: a role, text, a finish
  // reason, usage) from the classification's views, without a parse: the
  // text delta written with the upstream's own escapes.
  void render_plain(const providers::ChatChunk& c, Outbox& out) {
    using providers::ChatChunk;
    if (!started_) {
      start(c.meta_keys & ChatChunk::kMetaId ? string_value(c.meta[0]) : std::string(),
            c.meta_keys & ChatChunk::kMetaModel ? string_value(c.meta[2]) : std::string());
    }
    if (c.usage) usage_ = c.usage;
    if (c.has_content && !c.content.empty()) {
      open_text();
      write_delta(index_, "text_delta", "text", c.content);
    }
    if (c.has_finish_reason && !c.finish_reason.empty())
      finish_reason_ = string_value(c.finish_reason, /*quoted=*/false);
    out.copy(text_);
  }

  // A chunk that is not plain (reasoning, tool calls, a refusal, other
  // choices), read from its index (RequestBody) instead of a document:
  // strings written as the upstream escaped them, blocks opened as
  // read_delta() opens them. False when the data is not a JSON object
  // (render() then reads it as a document: the message starts, nothing more).
  bool render_indexed(const UpstreamEvent& ev) {
    using Member = providers::RequestBody::Member;
    using Type = providers::RequestBody::Type;
    auto parsed = providers::RequestBody::parse(std::string(ev.data));
    const auto* body = std::get_if<providers::RequestBody>(&parsed);
    if (!body) return false;
    auto str = [&](const Member* m) { return m ? body->string_of(*m) : std::string(); };
    if (!started_) start(str(body->present("id")), str(body->present("model")));
    // The usage as classified: every data event's chunk went through
    // inspect_chunk(), whose usage is usage_of() the chunk's document.
    if (ev.chunk.usage) usage_ = ev.chunk.usage;
    const Member* choices = body->present("choices");
    if (!choices || choices->v.type != Type::kArray) return true;
    body->walk_elements(*choices, [&](std::size_t, const Member& c) {
      const providers::ObjectFields choice(*body, &c, {"index", "delta", "finish_reason"});
      // Anthropic answers one message: the first choice's.
      if (const Member* i = choice["index"]; i && !is_zero(*body, *i)) return true;
      if (const Member* d = choice["delta"]) read_delta(*body, *d);
      if (std::string f = choice.str("finish_reason"); !f.empty()) finish_reason_ = std::move(f);
      return true;
    });
    return true;
  }

  // Whether a member is the number 0 (a document's `== 0`).
  static bool is_zero(const providers::RequestBody& body, const providers::RequestBody::Member& m) {
    if (m.v.type != providers::RequestBody::Type::kNumber) return false;
    if (m.v.integer) return m.v.fits_int64 && m.v.int64 == 0;
    return json::parse(body.text_of(m)).get<double>() == 0;
  }

  // read_delta() of a delta in an index.
  void read_delta(const providers::RequestBody& body, const providers::RequestBody::Member& d) {
    using Member = providers::RequestBody::Member;
    using Type = providers::RequestBody::Type;
    const providers::ObjectFields delta(
        body, &d, {"reasoning_content", "reasoning", "content", "refusal", "tool_calls"});
    // (Escaped texts joined: the escaped text of the texts joined.)
    const std::string reasoning =
        std::string(delta.raw("reasoning_content")).append(delta.raw("reasoning"));
    if (!reasoning.empty()) {
      open(Block::kThinking, {{"type", "thinking"}, {"thinking", ""}, {"signature", ""}});
      write_delta(index_, "thinking_delta", "thinking", reasoning);
    }
    for (std::string_view key : {"content", "refusal"}) {
      const std::string_view text = delta.raw(key);
      if (text.empty()) continue;
      open_text();
      write_delta(index_, "text_delta", "text", text);
    }
    const Member* calls = delta["tool_calls"];
    if (!calls || calls->v.type != Type::kArray) return;
    body.walk_elements(*calls, [&](std::size_t, const Member& c) {
      const providers::ObjectFields call(body, &c, {"index", "id", "function"});
      const Member* k = call["index"];
      std::int64_t at = 0;
      if (k && k->v.type == Type::kNumber && k->v.integer)  // as a document's get<int64_t>()
        at = k->v.fits_int64 ? k->v.int64 : json::parse(body.text_of(*k)).get<std::int64_t>();
      const providers::ObjectFields fn(body, call["function"], {"name", "arguments"});
      auto known = tool_blocks_.find(at);
      if (known == tool_blocks_.end()) {
        open(Block::kTool,
             {{"type", "tool_use"},
              {"id", call.str("id")},
              {"name", fn.str("name")},
              {"input", ordered_json::object()}},
             /*always=*/true);
        known = tool_blocks_.emplace(at, index_).first;
      }
      if (const std::string_view arguments = fn.raw("arguments"); !arguments.empty())
        write_delta(known->second, "input_json_delta", "partial_json", arguments);
      return true;
    });
  }

  // A content_block_delta of block `index`: {"type": type, key: escaped}.
  void write_delta(std::int64_t index, std::string_view type, std::string_view key,
                   std::string_view escaped) {
    text_.append("event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":");
    append_number(index);
    text_.append(",\"delta\":{\"type\":\"")
        .append(type)
        .append("\",\"")
        .append(key)
        .append("\":\"")
        .append(escaped)
        .append("\"}}\n\n");
  }

  // A JSON string's value from its text (quoted, or between its quotes);
  // "" when the text is not a string (what string_or reads).
  static std::string string_value(std::string_view text, bool quoted = true) {
    if (!quoted) {
      if (text.find('\\') == std::string_view::npos) return std::string(text);
      return string_value("\"" + std::string(text) + "\"");
    }
    if (text.size() < 2 || text.front() != '"') return {};
    if (text.find('\\') == std::string_view::npos)
      return std::string(text.substr(1, text.size() - 2));
    const json v = json::parse(text, nullptr, false);
    return v.is_string() ? v.get<std::string>() : std::string();
  }

  void start(const json& chunk) {
    if (started_) return;
    start(string_or(chunk, "id"), string_or(chunk, "model"));
  }

  void start(const std::string& id, std::string model) {
    started_ = true;
    ordered_json message = {{"id", message_id(id)},
                            {"type", "message"},
                            {"role", "assistant"},
                            {"model", std::move(model)},
                            {"content", ordered_json::array()},
                            {"stop_reason", nullptr},
                            {"stop_sequence", nullptr},
                            {"usage", providers::anthropic::Counts().anthropic()}};
    event(text_, "message_start", {{"type", "message_start"}, {"message", std::move(message)}});
  }

  void read_delta(const json& delta) {
    const std::string reasoning =
        string_or(delta, "reasoning_content") + string_or(delta, "reasoning");
    if (!reasoning.empty()) {
      open(Block::kThinking, {{"type", "thinking"}, {"thinking", ""}, {"signature", ""}});
      this->delta({{"type", "thinking_delta"}, {"thinking", reasoning}});
    }
    for (const char* key : {"content", "refusal"}) {
      std::string text = string_or(delta, key);
      if (text.empty()) continue;
      open_text();
      this->delta({{"type", "text_delta"}, {"text", std::move(text)}});
    }
    const json* calls = member(delta, "tool_calls");
    if (!calls || !calls->is_array()) return;
    for (const json& call : *calls) {
      const json* k = member(call, "index");
      const std::int64_t at = k && k->is_number_integer() ? k->get<std::int64_t>() : 0;
      const json* fn = member(call, "function");
      auto known = tool_blocks_.find(at);
      if (known == tool_blocks_.end()) {
        open(Block::kTool,
             {{"type", "tool_use"},
              {"id", string_or(call, "id")},
              {"name", fn ? string_or(*fn, "name") : std::string()},
              {"input", ordered_json::object()}},
             /*always=*/true);
        known = tool_blocks_.emplace(at, index_).first;
      }
      const std::string arguments = fn ? string_or(*fn, "arguments") : std::string();
      if (arguments.empty()) continue;
      event(text_, "content_block_delta",
            {{"type", "content_block_delta"},
             {"index", known->second},
             {"delta", {{"type", "input_json_delta"}, {"partial_json", arguments}}}});
    }
  }

  // Opens a text block unless one is open (open()'s event, written).
  void open_text() {
    if (open_ == Block::kText) return;
    close();
    ++index_;
    open_ = Block::kText;
    text_.append("event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":");
    append_number(index_);
    text_.append(",\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n");
  }

  void append_number(std::int64_t n) {
    char digits[24];
    const auto r = std::to_chars(digits, digits + sizeof digits, n);
    text_.append(digits, r.ptr);
  }

  // Opens a block of `kind` unless one is open (a tool call's always opens).
  void open(Block kind, ordered_json block, bool always = false) {
    if (open_ == kind && !always) return;
    close();
    ++index_;
    open_ = kind;
    event(
        text_, "content_block_start",
        {{"type", "content_block_start"}, {"index", index_}, {"content_block", std::move(block)}});
  }

  void delta(ordered_json d) {
    event(text_, "content_block_delta",
          {{"type", "content_block_delta"}, {"index", index_}, {"delta", std::move(d)}});
  }

  void close() {
    if (open_ == Block::kNone) return;
    text_.append("event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":");
    append_number(index_);
    text_.append("}\n\n");
    open_ = Block::kNone;
  }

  void finish(Outbox& out) {
    if (finished_) return;
    finished_ = true;
    text_.clear();
    start(json::object());
    close();
    providers::anthropic::Counts counts;
    if (usage_) counts = providers::anthropic::Counts::of(*usage_);
    event(text_, "message_delta",
          {{"type", "message_delta"},
           {"delta",
            {{"stop_reason", providers::anthropic::stop_reason(finish_reason_)},
             {"stop_sequence", nullptr}}},
           {"usage", counts.anthropic()}});
    event(text_, "message_stop", {{"type", "message_stop"}});
    out.copy(text_);
  }

  bool scan_;
  std::string text_;  // the events one upstream event gives
  bool started_ = false;
  bool finished_ = false;
  Block open_ = Block::kNone;
  std::int64_t index_ = -1;                           // the open (or last) block's
  std::map<std::int64_t, std::int64_t> tool_blocks_;  // tool call index -> block index
  std::string finish_reason_;
  std::optional<providers::Usage> usage_;
};

// ---- whole answers --------------------------------------------------------------

// Anthropic's events as one Message: message_start's message, each block
// with its deltas applied (text, thinking and its signature, a tool_use's
// input from its pieces, citations), the stop reason and usage of
// message_delta.
class NativeAssembly final : public ClientApi::Assembly {
 public:
  void add(const UpstreamEvent& ev) override {
    if (ev.kind != Kind::kData) return;
    const ordered_json e = ordered_json::parse(ev.data, nullptr, false);
    if (!e.is_object()) return;
    const std::string type = e.value("type", "");
    const std::int64_t index =
        e.contains("index") && e["index"].is_number_integer() ? e["index"].get<std::int64_t>() : -1;
    if (type == "message_start" && e.contains("message") && e["message"].is_object()) {
      message_ = e["message"];
    } else if (type == "content_block_start" && index >= 0 && e.contains("content_block")) {
      blocks_[index] = e["content_block"];
    } else if (type == "content_block_delta" && blocks_.count(index) && e.contains("delta")) {
      apply(index, e["delta"]);
    } else if (type == "content_block_stop" && inputs_.count(index)) {
      const std::string& text = inputs_[index];
      ordered_json input =
          text.find_first_not_of(" \t\r\n") == std::string::npos ? ordered_json::object()
          : providers::json_too_deep(text)                       ? ordered_json()
                                           : ordered_json::parse(text, nullptr, false);
      blocks_[index]["input"] =
          input.is_object() ? std::move(input) : ordered_json{{"arguments", text}};
      inputs_.erase(index);
    } else if (type == "message_delta") {
      if (e.contains("delta") && e["delta"].is_object()) {
        for (const auto& [k, v] : e["delta"].items()) message_[k] = v;
      }
      if (e.contains("usage") && e["usage"].is_object()) {
        for (const auto& [k, v] : e["usage"].items()) message_["usage"][k] = v;
      }
    }
  }

  std::string body() const override {
    ordered_json m = message_;
    m["content"] = ordered_json::array();
    for (const auto& [index, block] : blocks_) m["content"].push_back(block);
    return dump(m);
  }

 private:
  void apply(std::int64_t index, const ordered_json& delta) {
    ordered_json& block = blocks_[index];
    const std::string type = delta.value("type", "");
    auto append = [&](const char* field, const char* from) {
      std::string text = block.value(field, "");
      block[field] = text + delta.value(from, "");
    };
    if (type == "text_delta") {
      append("text", "text");
    } else if (type == "thinking_delta") {
      append("thinking", "thinking");
    } else if (type == "signature_delta") {
      append("signature", "signature");
    } else if (type == "input_json_delta") {
      inputs_[index] += delta.value("partial_json", "");
    } else if (type == "citations_delta" && delta.contains("citation")) {
      block["citations"].push_back(delta["citation"]);
    }
  }

  ordered_json message_ = ordered_json::object();
  std::map<std::int64_t, ordered_json> blocks_;
  std::map<std::int64_t, std::string> inputs_;  // a tool_use block's input so far
};

// Chat chunks assembled as chat's are, then one Message.
class TranslatedAssembly final : public ClientApi::Assembly {
 public:
  void add(const UpstreamEvent& ev) override {
    if (ev.kind != Kind::kData) return;
    if (ev.chunk.plain)
      assembler_.add_plain(ev.chunk);
    else
      assembler_.add(providers::parse_chunk(ev.data).json);
  }
  std::string body() const override { return dump(message_of_completion(assembler_.result())); }

 private:
  providers::CompletionAssembler assembler_;
};

class Messages final : public ClientApi {
 public:
  std::string_view name() const override { return "messages"; }
  config::Operation operation() const override { return config::Operation::kChat; }
  ErrorShape error_shape() const override { return ErrorShape::kAnthropic; }
  std::string_view route() const override { return "/v1/messages"; }
  std::string_view api_label() const override { return "messages"; }

  std::variant<ChatRequest, ApiError> parse(std::string_view content_type,
                                            std::string body) const override {
    return parse_messages_request(content_type, std::move(body));
  }
  std::variant<ChatRequest, ApiError> parse_for(std::string_view content_type, std::string body,
                                                const config::Config& cfg) const override {
    return parse_messages_request(content_type, std::move(body), &cfg);
  }

  const providers::UpstreamProtocol* protocol_for(const config::Provider& p) const override {
    if (p.protocol == config::Protocol::kAnthropic)
      return providers::anthropic_on_vertex(p) ? &providers::anthropic_messages_vertex_protocol()
                                               : &providers::anthropic_messages_protocol();
    return &providers::protocol_for(p);
  }

  std::variant<std::string, providers::Untranslatable> upstream_body(
      const providers::UpstreamProtocol& protocol, ChatRequest& req,
      const providers::UpstreamRequest& r) const override {
    if (native(protocol) && req.native) {
      // (Admission saw whether there is any: signed thinking, in every
      // request of an agent's thinking conversation, is never re-parsed.)
      if (req.native_unsigned_thinking) {
        if (auto signed_only = without_unsigned_thinking(*req.native))
          return protocol.body(*signed_only, r);
      }
      return protocol.body(*req.native, r);
    }
    if (req.untranslated)
      return providers::Untranslatable{req.untranslated->message, req.untranslated->param};
    if (auto e = translate_for_chat(req))
      return providers::Untranslatable{"its translation to chat: " + e->message,
                                       e->param.value_or("body")};
    return protocol.body(req.body, r);
  }

  // (Every stream has a renderer.)
  void render(const UpstreamEvent& ev, const ChatRequest&, Outbox& out) const override {
    NativeRenderer().render(ev, out);
  }
  std::string_view stream_end() const override { return {}; }

  std::unique_ptr<StreamRenderer> renderer(const providers::UpstreamProtocol& protocol,
                                           const ChatRequest&) const override {
    if (native(protocol)) return std::make_unique<NativeRenderer>();
    return chat_to_messages_renderer();
  }

  std::string error_event(const ApiError& e, std::int64_t) const override {
    return e.anthropic_event();
  }

  std::string stream_of_answer(const json& answer, const ChatRequest&) const override {
    return stream_of_message(message_of_completion(answer));
  }

  std::unique_ptr<Assembly> assembly() const override {
    return std::make_unique<TranslatedAssembly>();
  }
  std::unique_ptr<Assembly> assembly(const providers::UpstreamProtocol& protocol) const override {
    if (native(protocol)) return std::make_unique<NativeAssembly>();
    return assembly();
  }

  std::string answer_body(const providers::UpstreamProtocol& protocol, std::string upstream,
                          const json& completion) const override {
    if (native(protocol)) return upstream;
    return dump(message_of_completion(completion));
  }
};

}  // namespace

std::unique_ptr<ClientApi::StreamRenderer> chat_to_messages_renderer(bool scan) {
  return std::make_unique<ChatToMessages>(scan);
}

const ClientApi& messages_api() {
  static const Messages api;
  return api;
}

}  // namespace llmgate::gateway
