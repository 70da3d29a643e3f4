// Amazon Bedrock's Converse API (POST /model/{modelId}/converse-stream, and
// /converse unstreamed) as an upstream protocol: the client's OpenAI chat
// document becomes a Converse request, and what comes back -- AWS
// event-stream messages (framing(): binary frames, each with its
// :event-type) or one Converse response -- becomes the
// chat.completion.chunks the relay and the client APIs read. Exceptions in
// the stream (throttlingException, modelStreamErrorException, ...) are
// in-band errors: before the first token the attempt fails over, after it
// the client gets an error event. Requests are signed (AWS Signature
// Version 4: providers/cloud/sigv4.h) by the gateway, not here. Pure
// translation: nothing throws on what a client or the upstream sends.
//
// The request's top-level fields (null is "not set" and always passes):
//
//   field                           | Converse
//   --------------------------------+----------------------------------------------
//   messages                        | messages (user / assistant) + system
//   max_completion_tokens,          | inferenceConfig.maxTokens (the first one
//   max_tokens                      |   when both are sent)
//   temperature, top_p              | inferenceConfig.temperature, topP
//   stop                            | inferenceConfig.stopSequences
//   tools, tool_choice              | toolConfig.tools[].toolSpec, toolChoice
//   model, stream, stream_options   | ignored: the path says them; usage always comes
//   store, metadata, service_tier,  | ignored: bookkeeping, not the answer
//   user, safety_identifier,        |
//   prompt_cache_key,               |
//   parallel_tool_calls             |
//   n, logprobs, response_format    | their defaults (1, false, {"type":"text"}) pass;
//                                   |   anything else is refused
//   anything else                   | refused, named: never dropped unread
#include <algorithm>
#include <ctime>
#include <map>
#include <string_view>

#include "config/percent.h"
#include "providers/bedrock_conversation.h"
#include "providers/bedrock_event.h"
#include "providers/chunk_writer.h"
#include "providers/conversation_writer.h"
#include "providers/json_depth.h"
#include "providers/json_member.h"
#include "providers/translation.h"
#include "providers/upstream_protocol.h"

namespace llmgate::providers {
namespace {

using nlohmann::json;
using Refusal = std::optional<Untranslatable>;

Untranslatable unsupported(const std::string& param) {
  return {param + " is not supported by the Bedrock Converse protocol", param};
}

using translation::created_of;
using translation::dump;
using translation::invalid;
using translation::parse_embedded;
using translation::string_member;

// ---------------------------------------------------------------------------
// The request.

struct ConverseRequest {
  json messages = json::array();
  json system = json::array();
  json inference = json::object();  // inferenceConfig
  json tools, tool_choice;          // null when not asked for
  bool max_tokens_set = false;

  // Converse alternates roles: consecutive turns of one role become one
  // (tool results and the user's next words are both "user" turns).
  void add(const char* role, json content) {
    if (content.empty()) return;
    if (!messages.empty() && messages.back()["role"] == role) {
      for (auto& c : content) messages.back()["content"].push_back(std::move(c));
      return;
    }
    messages.push_back({{"role", role}, {"content", std::move(content)}});
  }
};

void add_text(json& blocks, const std::string& text) {
  if (!text.empty()) blocks.push_back({{"text", text}});  // Converse refuses empty text
}

// "data:image/png;base64,AAAA" -> {"image":{"format":"png","source":{"bytes":"AAAA"}}}.
Refusal image_block(const json& part, const std::string& param, json& blocks) {
  const json* image = member(part, "image_url");
  const std::string* url = image ? string_member(*image, "url") : nullptr;
  if (!url) return invalid(param, "needs image_url.url");
  if (!url->starts_with("data:image/")) {
    return Untranslatable{
        param + ": only base64 data: image URLs are supported by the Bedrock Converse protocol",
        param};
  }
  const std::size_t comma = url->find(',');
  const std::string_view head = std::string_view(*url).substr(
      11, comma == std::string::npos ? 0 : comma - 11);  // after "data:image/"
  if (comma == std::string::npos || !head.ends_with(";base64"))
    return invalid(param, "needs a base64 data: URL for the Bedrock Converse protocol");
  std::string format(head.substr(0, head.find(';')));
  if (format == "jpg") format = "jpeg";
  if (format != "png" && format != "jpeg" && format != "gif" && format != "webp")
    return unsupported(param + " (image/" + format + ")");
  blocks.push_back(
      {{"image", {{"format", format}, {"source", {{"bytes", url->substr(comma + 1)}}}}}});
  return std::nullopt;
}

Refusal content_blocks(const json& m, const std::string& param, bool media, json& blocks) {
  const json* content = member(m, "content");
  if (!content) return std::nullopt;
  if (content->is_string()) {
    add_text(blocks, content->get_ref<const std::string&>());
    return std::nullopt;
  }
  if (!content->is_array()) return invalid(param + ".content", "must be a string or an array");
  for (std::size_t j = 0; j < content->size(); ++j) {
    const std::string p = param + ".content[" + std::to_string(j) + "]";
    const json& part = (*content)[j];
    const std::string* type = string_member(part, "type");
    if (type && *type == "text") {
      const std::string* text = string_member(part, "text");
      if (!text) return invalid(p, "needs a text string");
      add_text(blocks, *text);
    } else if (media && type && *type == "image_url") {
      if (auto r = image_block(part, p, blocks)) return r;
    } else {
      return Untranslatable{p + " (" + (type ? *type : std::string("untyped")) +
                                ") is not supported by the Bedrock Converse protocol",
                            p};
    }
  }
  return std::nullopt;
}

Refusal tool_use_blocks(const json& m, const std::string& param, json& blocks) {
  const json* calls = member(m, "tool_calls");
  if (!calls) return std::nullopt;
  if (!calls->is_array()) return invalid(param + ".tool_calls", "must be an array");
  for (std::size_t j = 0; j < calls->size(); ++j) {
    const std::string p = param + ".tool_calls[" + std::to_string(j) + "]";
    const json& call = (*calls)[j];
    const std::string* type = string_member(call, "type");
    const json* fn = member(call, "function");
    const std::string* id = string_member(call, "id");
    if ((type && *type != "function") || !fn) return unsupported(p);
    const std::string* name = string_member(*fn, "name");
    if (!name || !id) return invalid(p, "needs an id and function.name");
    // Converse takes the input as an object; OpenAI sends it as JSON text.
    const std::string* args = string_member(*fn, "arguments");
    json input = json::object();
    if (args && args->find_first_not_of(" \t\r\n") != std::string::npos) {
      input = parse_embedded(*args);
      if (!input.is_object())
        return invalid(p + ".function.arguments", "must be a JSON object for Bedrock Converse");
    }
    blocks.push_back({{"toolUse", {{"toolUseId", *id}, {"name", *name}, {"input", input}}}});
  }
  return std::nullopt;
}

Refusal tool_result_block(const json& m, const std::string& param, json& blocks) {
  const std::string* id = string_member(m, "tool_call_id");
  if (!id) return invalid(param + ".tool_call_id", "must be a string");
  json parts = json::array();
  if (auto r = content_blocks(m, param, false, parts)) return r;
  std::string text;
  for (const auto& p : parts) text += p["text"].get_ref<const std::string&>();
  // A result that is a JSON object goes as one.
  json result = json::array();
  if (json j = parse_embedded(text); j.is_object())
    result.push_back({{"json", std::move(j)}});
  else
    result.push_back({{"text", text.empty() ? std::string(" ") : text}});
  blocks.push_back({{"toolResult", {{"toolUseId", *id}, {"content", std::move(result)}}}});
  return std::nullopt;
}

Refusal add_message(const json& m, std::size_t i, ConverseRequest& out) {
  const std::string param = "messages[" + std::to_string(i) + "]";
  const std::string* role = string_member(m, "role");
  if (!role) return invalid(param + ".role", "must be a string");
  if (*role == "system" || *role == "developer") return content_blocks(m, param, false, out.system);
  json blocks = json::array();
  Refusal r;
  const char* converse_role = "user";
  if (*role == "user") {
    r = content_blocks(m, param, true, blocks);
  } else if (*role == "assistant") {
    converse_role = "assistant";
    r = content_blocks(m, param, false, blocks);
    if (!r) r = tool_use_blocks(m, param, blocks);
  } else if (*role == "tool") {
    r = tool_result_block(m, param, blocks);
  } else {
    return unsupported(param + ".role");
  }
  if (!r) out.add(converse_role, std::move(blocks));
  return r;
}

Refusal add_tools(const json& v, ConverseRequest& out) {
  if (!v.is_array()) return invalid("tools", "must be an array");
  json tools = json::array();
  for (std::size_t i = 0; i < v.size(); ++i) {
    const std::string p = "tools[" + std::to_string(i) + "]";
    const std::string* type = string_member(v[i], "type");
    const json* fn = member(v[i], "function");
    if (!type || *type != "function" || !fn) return unsupported(p);
    const std::string* name = string_member(*fn, "name");
    if (!name) return invalid(p, "needs function.name");
    json spec = {{"name", *name}};
    if (const std::string* d = string_member(*fn, "description")) spec["description"] = *d;
    const json* params = member(*fn, "parameters");
    spec["inputSchema"] = {{"json", params ? *params : json{{"type", "object"}}}};
    tools.push_back({{"toolSpec", std::move(spec)}});
  }
  if (!tools.empty()) out.tools = std::move(tools);
  return std::nullopt;
}

Refusal add_tool_choice(const json& v, ConverseRequest& out) {
  if (v.is_string()) {
    const auto& s = v.get_ref<const std::string&>();
    if (s == "auto")
      out.tool_choice = {{"auto", json::object()}};
    else if (s == "required")
      out.tool_choice = {{"any", json::object()}};
    else
      return unsupported("tool_choice (\"" + s + "\")");
    return std::nullopt;
  }
  const json* fn = member(v, "function");
  const std::string* name = fn ? string_member(*fn, "name") : nullptr;
  if (!name) return invalid("tool_choice", "must be a string or name a function");
  out.tool_choice = {{"tool", {{"name", *name}}}};
  return std::nullopt;
}

Refusal add_field(const std::string& key, const json& v, ConverseRequest& out) {
  if (v.is_null()) return std::nullopt;
  static constexpr std::string_view kIgnored[] = {
      "messages",           "model",        "stream", "stream_options",    "store",
      "metadata",           "service_tier", "user",   "safety_identifier", "prompt_cache_key",
      "parallel_tool_calls"};
  if (std::find(std::begin(kIgnored), std::end(kIgnored), key) != std::end(kIgnored))
    return std::nullopt;
  if (key == "max_completion_tokens" || key == "max_tokens") {
    if (!v.is_number_integer() || v.get<std::int64_t>() < 1)
      return invalid(key, "must be a positive integer");
    if (!out.max_tokens_set) out.inference["maxTokens"] = v;
    out.max_tokens_set = true;
    return std::nullopt;
  }
  if (key == "temperature" || key == "top_p") {
    if (!v.is_number()) return invalid(key, "must be a number");
    out.inference[key == "temperature" ? "temperature" : "topP"] = v;
    return std::nullopt;
  }
  if (key == "stop") {
    std::optional<json> seqs = translation::stop_sequences(v);
    if (!seqs) return invalid("stop", "must be a string or an array of strings");
    if (!seqs->empty()) out.inference["stopSequences"] = std::move(*seqs);
    return std::nullopt;
  }
  if (key == "tools") return add_tools(v, out);
  if (key == "tool_choice") return add_tool_choice(v, out);
  // Their defaults say nothing.
  if (key == "n" && v == 1) return std::nullopt;
  if (key == "logprobs" && v == false) return std::nullopt;
  if (key == "response_format" && v.is_object() && v.value("type", "") == "text")
    return std::nullopt;
  return unsupported(field_param(key));
}

// The request but its conversation: inferenceConfig (the provider's
// max_tokens when the client set none) and toolConfig; a tool_choice
// without tools is refused.
std::variant<json, Untranslatable> settings_of(ConverseRequest& out, const UpstreamRequest& r) {
  if (!out.max_tokens_set && r.provider && r.provider->default_max_tokens > 0)
    out.inference["maxTokens"] = r.provider->default_max_tokens;
  json doc = json::object();
  if (!out.inference.empty()) doc["inferenceConfig"] = std::move(out.inference);
  if (!out.tools.is_null()) {
    json config = {{"tools", std::move(out.tools)}};
    if (!out.tool_choice.is_null()) config["toolChoice"] = std::move(out.tool_choice);
    doc["toolConfig"] = std::move(config);
  } else if (!out.tool_choice.is_null()) {
    return invalid("tool_choice", "needs tools");
  }
  return doc;
}

// ---------------------------------------------------------------------------
// The answer.

// Converse's stopReason as OpenAI's finish_reason.
std::string finish_reason(std::string_view stop) {
  if (stop == "max_tokens" || stop == "model_context_window_exceeded") return "length";
  if (stop == "tool_use") return "tool_calls";
  if (stop == "content_filtered" || stop == "guardrail_intervened") return "content_filter";
  return "stop";  // end_turn, stop_sequence
}

constexpr std::int64_t kMaxCount = 1'000'000'000'000;  // as bedrock::Usage's

// A count as bedrock::Usage holds it (an integer; a negative one, or one
// past int64, reads as 0; at most kMaxCount).
std::optional<std::int64_t> count(const json& usage, std::string_view key) {
  const json* v = member(usage, key);
  if (!v || !v->is_number_integer()) return std::nullopt;
  return std::clamp<std::int64_t>(v->get<std::int64_t>(), 0, kMaxCount);
}

bedrock::Usage token_usage(const json& u) {
  return {count(u, "inputTokens"), count(u, "cacheReadInputTokens"),
          count(u, "cacheWriteInputTokens"), count(u, "outputTokens")};
}

// Converse's TokenUsage as OpenAI's usage (cache reads among the prompt's tokens).
template <typename Json = json>
Json openai_usage(const bedrock::Usage& u) {
  const std::int64_t input = u.input.value_or(0);
  const std::int64_t read = u.cache_read.value_or(0);
  const std::int64_t write = u.cache_write.value_or(0);
  const std::int64_t output = u.output.value_or(0);
  // Bedrock counts cached tokens apart from inputTokens; OpenAI's prompt_tokens holds them.
  const std::int64_t prompt = input + read + write;
  Json out = {
      {"prompt_tokens", prompt}, {"completion_tokens", output}, {"total_tokens", prompt + output}};
  if (read > 0) out["prompt_tokens_details"] = {{"cached_tokens", read}};
  return out;
}

std::string chunk_id(std::int64_t created) { return "chatcmpl-bedrock-" + std::to_string(created); }

// "<exception type>: <message>" of an exception message's payload.
std::string exception_text(std::string_view type, std::string_view payload) {
  const json j = parse_embedded(payload);
  const std::string* message = j.is_object() ? string_member(j, "message") : nullptr;
  if (!message) message = j.is_object() ? string_member(j, "Message") : nullptr;
  std::string out(type.empty() ? "exception" : type);
  if (message) out.append(": ").append(*message);
  return out;
}

class ConverseStream final : public UpstreamStream {
 public:
  explicit ConverseStream(const UpstreamRequest& r)
      : created_(created_of(r)), model_(r.upstream_model), writer_(r.include_usage) {
    writer_.set_head(chunk_id(created_), created_, model_);
  }

  void translate(const Frame& ev, Sink& out) override {
    if (over_) return;
    if (ev.exception) return in_band_error(exception_text(ev.event, ev.data), out);
    // The usual events (text above all), read by a scan; the rest parsed.
    if (bedrock::read_event(ev.event, ev.data, facts_)) return on_facts(ev.event, out);
    const json j = ev.data.find('\0') == std::string_view::npos ? parse_embedded(ev.data) : json();
    if (!j.is_object()) return malformed("a payload that is not a JSON object", out);
    if (ev.event == "messageStart") return open(out);
    if (ev.event == "contentBlockStart") return block_start(j, out);
    if (ev.event == "contentBlockDelta") return block_delta(j, out);
    if (ev.event == "contentBlockStop") return;
    if (ev.event == "messageStop") {
      const std::string* reason = string_member(j, "stopReason");
      return stop(reason ? std::string_view(*reason) : std::string_view("end_turn"), out);
    }
    if (ev.event == "metadata") {
      const json* u = member(j, "usage");
      return metadata(u && u->is_object() ? std::optional(token_usage(*u)) : std::nullopt, out);
    }
    return malformed("an event of type \"" + std::string(ev.event) + "\"", out);
  }

  void end(Sink& out) override {
    // messageStop without metadata: the stream is whole, without usage.
    if (over_ || !finished_) return;
    done(out);
  }

 private:
  // An event read_event() read.
  void on_facts(std::string_view type, Sink& out) {
    using Delta = bedrock::EventFacts::Delta;
    if (type == "messageStart") return open(out);
    if (type == "contentBlockDelta") {
      open(out);
      if (facts_.delta == Delta::kNone || facts_.text.empty()) return;
      return send_text(facts_.delta == Delta::kText ? "content" : "reasoning_content", facts_.text,
                       /*escaped=*/true, out);
    }
    if (type == "messageStop") return stop(facts_.stop_reason.value_or("end_turn"), out);
    if (type == "metadata") return metadata(facts_.usage, out);
    // contentBlockStop: nothing to say
  }

  // A delta of one text member ("content", "reasoning_content"): `text`
  // escaped as the upstream wrote it, or a parsed document's (valid UTF-8).
  void send_text(std::string_view key, std::string_view text, bool escaped, Sink& out) {
    emit(writer_.text_chunk(key, text, escaped), out);
  }

  void open(Sink& out) {
    if (opened_) return;
    opened_ = true;
    // As OpenAI opens: the role, and content "".
    std::string& c = writer_.begin_choice();
    c.append(R"({"role":"assistant","content":""})");
    emit(writer_.end_choice(), out);
  }

  void block_start(const json& j, Sink& out) {
    const json* start = member(j, "start");
    const json* tool = start ? member(*start, "toolUse") : nullptr;
    if (!tool) return;
    open(out);
    const std::string* id = string_member(*tool, "toolUseId");
    const std::string* name = string_member(*tool, "name");
    if (!id || !name) return malformed("a toolUse start without toolUseId or name", out);
    tool_index_[block_index(j)] = calls_;
    std::string& c = writer_.begin_choice();
    c.append(R"({"tool_calls":[)");
    ChunkWriter::append_tool_call(c, calls_++, *id, *name, "");
    c.append("]}");
    emit(writer_.end_choice(), out);
  }

  void block_delta(const json& j, Sink& out) {
    const json* delta = member(j, "delta");
    if (!delta) return malformed("a contentBlockDelta without delta", out);
    open(out);
    if (const std::string* text = string_member(*delta, "text")) {
      if (text->empty()) return;
      return send_text("content", *text, /*escaped=*/false, out);
    }
    if (const json* tool = member(*delta, "toolUse")) {
      const std::string* input = string_member(*tool, "input");
      const auto index = tool_index_.find(block_index(j));
      if (!input || index == tool_index_.end())
        return malformed("a toolUse delta outside a toolUse block", out);
      std::string& c = writer_.begin_choice();
      c.append(R"({"tool_calls":[{"index":)").append(std::to_string(index->second));
      c.append(R"(,"function":{"arguments":)");
      append_json_string(c, *input);
      c.append("}}]}");
      return emit(writer_.end_choice(), out);
    }
    if (const json* reasoning = member(*delta, "reasoningContent")) {
      const std::string* text = string_member(*reasoning, "text");
      if (!text || text->empty()) return;  // a signature, or redacted: nothing to show
      return send_text("reasoning_content", *text, /*escaped=*/false, out);
    }
  }

  void stop(std::string_view reason, Sink& out) {
    if (finished_) return;
    open(out);
    finished_ = true;
    const std::string finish = finish_reason(reason);
    std::string& c = writer_.begin_choice();
    c.append("{}");
    emit(writer_.end_choice(finish), out);
  }

  void metadata(const std::optional<bedrock::Usage>& usage, Sink& out) {
    if (usage) emit(writer_.usage_chunk(openai_usage<nlohmann::ordered_json>(*usage).dump()), out);
    if (finished_) done(out);
  }

  void done(Sink& out) {
    over_ = true;
    UpstreamEvent e;
    e.kind = UpstreamEvent::Kind::kDone;
    e.chunk.kind = ChatChunk::Kind::kDone;
    out.on(e);
  }

  void in_band_error(std::string message, Sink& out) {
    over_ = true;
    UpstreamEvent e;
    e.kind = UpstreamEvent::Kind::kError;
    e.chunk.kind = ChatChunk::Kind::kError;
    e.message = std::move(message);
    out.on(e);
  }

  void malformed(const std::string& what, Sink& out) {
    UpstreamEvent e;
    e.kind = UpstreamEvent::Kind::kMalformed;
    e.message = "upstream sent " + what + " in a Bedrock ConverseStream";
    e.chunk.error_message = e.message;
    out.on(e);
  }

  static std::int64_t block_index(const json& j) {
    const json* i = member(j, "contentBlockIndex");
    return i && i->is_number_integer() ? i->get<std::int64_t>() : -1;
  }

  void emit(std::string_view chunk, Sink& out) {
    UpstreamEvent e;
    e.kind = UpstreamEvent::Kind::kData;
    e.data = chunk;
    inspect_chunk(chunk, e.chunk, prefix_);  // the stream's chunks share their head
    out.on(e);
  }

  const std::int64_t created_;
  const std::string model_;
  std::map<std::int64_t, std::size_t> tool_index_;  // content block -> tool call index
  std::size_t calls_ = 0;
  bool opened_ = false;    // the role went out
  bool finished_ = false;  // messageStop came: a finish_reason went out
  bool over_ = false;      // kError or kDone went out: nothing more
  ChunkWriter writer_;
  ChunkPrefix prefix_;         // what inspect_chunk learnt of the chunks written
  bedrock::EventFacts facts_;  // read_event()'s answer
};

class Bedrock final : public UpstreamProtocol {
 public:
  std::string_view name() const override { return "bedrock"; }

  // The model id (or inference profile id or ARN) is one path segment:
  // ':' and '/' in it are encoded ("anthropic.claude-3-5-sonnet-20240620-v1%3A0").
  std::string_view target(const std::string& upstream_model, bool stream,
                          std::string& built) const override {
    built.assign("/model/")
        .append(config::percent_encode(upstream_model))
        .append(stream ? "/converse-stream" : "/converse");
    return built;
  }

  std::variant<std::string, Untranslatable> body(RequestBody& body,
                                                 const UpstreamRequest& r) const override {
    if (auto text = bedrock_chat_body_text(body, r)) return std::move(*text);
    return bedrock_chat_body_from_document(body.dom(), r);
  }

  // An Amazon Bedrock API key goes as a bearer token; without one the
  // gateway signs each request (SigV4) instead.
  std::vector<std::pair<std::string, std::string>> headers(const std::string& api_key,
                                                           const config::Provider&) const override {
    if (api_key.empty()) return {};
    return {{"Authorization", "Bearer " + api_key}};
  }

  Framing framing() const override { return Framing::kEventStream; }

  std::unique_ptr<UpstreamStream> open_stream(const UpstreamRequest& r) const override {
    return std::make_unique<ConverseStream>(r);
  }

  std::optional<json> completion(const json& answer, const UpstreamRequest& r) const override {
    const json* output = member(answer, "output");
    const json* message = output ? member(*output, "message") : nullptr;
    const json* content = message ? member(*message, "content") : nullptr;
    if (!content || !content->is_array()) return std::nullopt;
    std::string text, reasoning;
    json calls = json::array();
    for (const json& block : *content) {
      if (const std::string* t = string_member(block, "text")) text += *t;
      if (const json* rc = member(block, "reasoningContent")) {
        const json* rt = member(*rc, "reasoningText");
        if (const std::string* t = rt ? string_member(*rt, "text") : nullptr) reasoning += *t;
      }
      if (const json* tool = member(block, "toolUse")) {
        const json* input = member(*tool, "input");
        calls.push_back({{"id", string_or(*tool, "toolUseId")},
                         {"type", "function"},
                         {"function",
                          {{"name", string_or(*tool, "name")},
                           {"arguments", input ? dump(*input) : std::string("{}")}}}});
      }
    }
    const bool called = !calls.empty();
    json msg = {{"role", "assistant"},
                {"content", text.empty() && called ? json(nullptr) : json(text)},
                {"refusal", nullptr}};
    if (!reasoning.empty()) msg["reasoning_content"] = std::move(reasoning);
    if (called) msg["tool_calls"] = std::move(calls);
    const std::string* stop = string_member(answer, "stopReason");
    const std::int64_t created = created_of(r);
    const json* usage = member(answer, "usage");
    return json{
        {"id", chunk_id(created)},
        {"object", "chat.completion"},
        {"created", created},
        {"model", std::string(r.upstream_model)},
        {"choices", json::array({{{"index", 0},
                                  {"message", std::move(msg)},
                                  {"logprobs", nullptr},
                                  {"finish_reason", finish_reason(stop ? *stop : "end_turn")}}})},
        {"usage", usage && usage->is_object() ? openai_usage(token_usage(*usage)) : json(nullptr)}};
  }

  std::optional<Usage> answer_usage(const json& answer) const override {
    const json* usage = member(answer, "usage");
    if (!usage || !usage->is_object()) return std::nullopt;
    return usage_of(json{{"usage", openai_usage(token_usage(*usage))}});
  }

  // {"message": "..."} with the type in x-amzn-ErrorType (not seen here) or
  // "__type": in OpenAI's shape.
  std::optional<json> error(const json& body, int status) const override {
    const std::string* message = string_member(body, "message");
    if (!message) message = string_member(body, "Message");
    if (!message) return std::nullopt;
    std::string type = string_or(body, "__type");
    if (const auto hash = type.rfind('#'); hash != std::string::npos) type.erase(0, hash + 1);
    const char* openai_type = status == 400                    ? "invalid_request_error"
                              : status == 401 || status == 403 ? "authentication_error"
                              : status == 404                  ? "not_found_error"
                              : status == 429                  ? "rate_limit_error"
                                                               : "api_error";
    return json{{"error",
                 {{"message", *message},
                  {"type", openai_type},
                  {"param", nullptr},
                  {"code", type.empty() ? json(nullptr) : json(type)}}}};
  }
};

}  // namespace

std::variant<std::string, Untranslatable> bedrock_chat_body_from_document(
    const json& client_body, const UpstreamRequest& r) {
  if (!client_body.is_object()) return Untranslatable{"the request must be a JSON object", ""};
  ConverseRequest out;
  for (const auto& [key, value] : client_body.items()) {
    if (auto refusal = add_field(key, value, out)) return std::move(*refusal);
  }
  const json* messages = member(client_body, "messages");
  if (!messages || !messages->is_array()) return invalid("messages", "must be an array");
  for (std::size_t i = 0; i < messages->size(); ++i) {
    if (auto refusal = add_message((*messages)[i], i, out)) return std::move(*refusal);
  }
  if (out.messages.empty()) {
    return Untranslatable{
        "messages needs a user message with content for the Bedrock Converse protocol", "messages"};
  }
  json conversation = {{"messages", std::move(out.messages)}};
  if (!out.system.empty()) conversation["system"] = std::move(out.system);
  auto settings = settings_of(out, r);
  if (auto* refusal = std::get_if<Untranslatable>(&settings)) return std::move(*refusal);
  json& doc = std::get<json>(settings);
  doc.update(conversation);
  return dump(doc);
}

// The conversation written from the client's text; the few other fields
// from their documents, by the same functions as the document's
// translation.
std::optional<std::variant<std::string, Untranslatable>> bedrock_chat_body_text(
    const RequestBody& in, const UpstreamRequest& r) {
  std::optional<json> fields = in.document_without("messages");
  if (!fields) return std::nullopt;
  // (add_field passes `messages` over: the rest's first refusal is the
  // whole document's.)
  ConverseRequest out;
  for (const auto& [key, value] : fields->items()) {
    if (auto refusal = add_field(key, value, out)) return std::move(*refusal);
  }
  // The tool_choice's refusal counts once the conversation is found sound
  // (the document's translation reads the conversation first).
  auto settings = settings_of(out, r);
  Refusal refused;
  if (auto* u = std::get_if<Untranslatable>(&settings)) refused = std::move(*u);
  std::string text = refused ? std::string("{}") : dump(std::get<json>(settings));
  return conversation::body_with_conversation(in, std::move(text), std::move(refused),
                                              write_bedrock_conversation);
}

const UpstreamProtocol& bedrock_protocol() {
  static const Bedrock protocol;
  return protocol;
}

}  // namespace llmgate::providers
