// Fuzzes Anthropic's Messages API in (gateway/apis/messages_request.cpp,
// gateway/apis/messages_api.cpp, providers/anthropic_messages_protocol.cpp).
//
// The input is read three ways:
//   1. a client's POST /v1/messages body: the translation written from its
//      text says what the DOM translation (messages_reference.cpp) says --
//      the same refusal, the same untranslated field, the same chat
//      document once parsed (a tool call's arguments compared parsed: the
//      client's input compacted, in its own order); admission never crashes; a
//      request it admits keeps the client's document (the model renamed is
//      all an Anthropic deployment gets changed), writes no chat translation
//      until asked (translate_for_chat), and the one it writes then is the
//      eager translation, an admissible chat request whose model, stream,
//      limit and effort are what admission read (and when the model's
//      deployments all take chat, admission writes that same translation);
//      what the translation could not say is named; its prompt prefixes are
//      the same without its cache_control marks (a DOM with them taken out);
//   2. an upstream chat stream (OpenAI chunks) rendered as Anthropic's
//      events -- the same events, data parsed, as every chunk rendered from
//      its parsed document (chat_to_messages_renderer(false)) --: every event is named by its own
//      "type", message_start comes first and once, blocks open and close in turn with deltas only
//      for an open (or tool) block, message_stop ends it; and, the round-trip oracle, those events
//      assembled into one Message say what the chunks assembled as a chat.completion translate to
//      (text, thinking, stop reason, usage) when the chunks are of one choice;
//   3. Anthropic's own events: classified one per event and assembled
//      without a crash, their bytes forwarded as they came; each event (and
//      the whole input as one event's data) read by the scan as the
//      document reads it (anthropic_event.h).
#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "gateway/apis/client_api.h"
#include "gateway/apis/messages_api.h"
#include "gateway/apis/messages_request.h"
#include "providers/anthropic_event.h"
#include "providers/completion_assembler.h"
#include "providers/json_depth.h"
#include "providers/prompt_prefix.h"
#include "providers/request_body.h"
#include "providers/sse_parser.h"
#include "providers/upstream_protocol.h"
#include "tests/fuzz/fuzz_check.h"
#include "tests/fuzz/messages_reference.h"

namespace {

using llmgate::gateway::ChatRequest;
using llmgate::gateway::ClientApi;
using llmgate::gateway::messages_api;
using llmgate::gateway::Outbox;
using llmgate::providers::Frame;
using llmgate::providers::SseParser;
using llmgate::providers::UpstreamEvent;
using nlohmann::json;
using nlohmann::ordered_json;

constexpr std::size_t kMaxEventBytes = 64 * 1024;

template <class F>
void each_event(std::string_view bytes, F&& f) {
  SseParser parser(kMaxEventBytes);
  auto span = parser.prepare(bytes.size());
  std::copy(bytes.begin(), bytes.end(), span.begin());
  parser.commit(bytes.size());
  parser.drain(f);
}

// Each tool call's arguments parsed (the reference serialised the input
// with sorted keys; the translation keeps the client's order).
void parse_arguments(json& chat) {
  if (!chat.contains("messages") || !chat["messages"].is_array()) return;
  for (json& m : chat["messages"]) {
    if (!m.is_object() || !m.contains("tool_calls")) continue;
    for (json& call : m["tool_calls"]) {
      json& arguments = call["function"]["arguments"];
      FUZZ_CHECK(arguments.is_string());
      arguments = json::parse(arguments.get<std::string>(), nullptr, false);
      FUZZ_CHECK(!arguments.is_discarded());
    }
  }
}

void check_translation(std::string_view input) {
  auto parsed = llmgate::providers::RequestBody::parse(std::string(input));
  auto* in = std::get_if<llmgate::providers::RequestBody>(&parsed);
  if (!in) return;
  const json doc = json::parse(input, nullptr, false);  // what the index accepted, nlohmann does
  FUZZ_CHECK(doc.is_object());
  auto got = llmgate::gateway::translate_messages_request(*in);
  auto want = llmgate::fuzz::reference_translate_messages(doc);
  FUZZ_CHECK(got.index() == want.index());
  if (const auto* e = std::get_if<llmgate::gateway::ApiError>(&want)) {
    FUZZ_CHECK(std::get<llmgate::gateway::ApiError>(got).message == e->message);
    return;
  }
  auto& w = std::get<llmgate::fuzz::ReferenceTranslation>(want);
  auto& g = std::get<llmgate::gateway::MessagesTranslation>(got);
  FUZZ_CHECK(g.unsigned_thinking == w.unsigned_thinking);
  FUZZ_CHECK(g.untranslated.has_value() == w.untranslated.has_value());
  if (w.untranslated) {
    FUZZ_CHECK(g.untranslated->param == w.untranslated->param);
    FUZZ_CHECK(g.untranslated->message == w.untranslated->message);
  }
  json chat = json::parse(g.chat, nullptr, false);
  FUZZ_CHECK(chat.is_object());
  parse_arguments(chat);
  parse_arguments(w.chat);
  FUZZ_CHECK(chat == w.chat);
}

// Every "cache_control" member, at any depth, taken out.
void strip_marks(ordered_json& j) {
  if (j.is_object()) {
    j.erase("cache_control");
    for (auto& [k, v] : j.items()) strip_marks(v);
  } else if (j.is_array()) {
    for (auto& v : j) strip_marks(v);
  }
}

llmgate::providers::PromptPrefixes prefixes_of(const ordered_json& j) {
  auto parsed = llmgate::providers::RequestBody::parse(
      j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
  auto* body = std::get_if<llmgate::providers::RequestBody>(&parsed);
  FUZZ_CHECK(body != nullptr);
  return llmgate::providers::prompt_prefixes(*body);
}

// A request's prompt prefixes read the same with its cache marks and
// without them (an agent moves its marks to the latest turn each time).
void check_prefixes_without_marks(std::string_view input) {
  ordered_json marked = ordered_json::parse(input, nullptr, false);
  if (!marked.is_object()) return;
  ordered_json plain = marked;
  strip_marks(plain);
  const auto a = prefixes_of(marked);
  const auto b = prefixes_of(plain);
  FUZZ_CHECK(a.count == b.count && a.firsts == b.firsts);
  for (std::size_t i = 0; i < a.count; ++i) FUZZ_CHECK(a.cuts[i].hash == b.cuts[i].hash);
}

void check_request(std::string_view input) {
  check_translation(input);
  auto r = llmgate::gateway::parse_messages_request("application/json", std::string(input));
  auto* req = std::get_if<ChatRequest>(&r);
  if (!req) return;
  FUZZ_CHECK(req->native.has_value());
  FUZZ_CHECK(!req->model.empty());
  FUZZ_CHECK(!req->native->contains("route"));
  check_prefixes_without_marks(input);
  // Admission wrote no translation; the one written when another
  // deployment is tried is the translation of the client's document, and a
  // chat request the gateway admits that says what admission read.
  FUZZ_CHECK(req->chat_pending && req->body.text().empty());
  llmgate::config::Config cfg;  // a model served by chat deployments alone
  cfg.providers.emplace_back().name = "openai";
  auto& chat_only = cfg.models.emplace_back();
  chat_only.name = req->model;
  chat_only.deployments.emplace_back().provider = "openai";
  bool translatable = true;
  {
    ChatRequest lazy = *req;
    if (auto refused = llmgate::gateway::translate_for_chat(lazy)) {
      translatable = false;
      // Only a translation nested past the limit (a level deeper than the
      // client's document): refused each time it is asked, and at
      // admission when no deployment could take the client's document.
      FUZZ_CHECK(refused->message.find("levels deep") != std::string::npos);
      FUZZ_CHECK(lazy.chat_pending && lazy.body.text().empty());
      auto again = llmgate::gateway::translate_for_chat(lazy);
      FUZZ_CHECK(again && again->message == refused->message);
      auto e =
          llmgate::gateway::parse_messages_request("application/json", std::string(input), &cfg);
      FUZZ_CHECK(std::holds_alternative<llmgate::gateway::ApiError>(e));
      FUZZ_CHECK(std::get<llmgate::gateway::ApiError>(e).message == refused->message);
    }
  }
  if (translatable) {
    ChatRequest lazy = *req;
    FUZZ_CHECK(!llmgate::gateway::translate_for_chat(lazy));
    FUZZ_CHECK(!lazy.chat_pending);
    auto eager = llmgate::gateway::translate_messages_request(*req->native);
    FUZZ_CHECK(lazy.body.text() == std::get<llmgate::gateway::MessagesTranslation>(eager).chat);
    auto chat = llmgate::gateway::parse_chat_request("", std::string(lazy.body.text()));
    FUZZ_CHECK(std::holds_alternative<ChatRequest>(chat));
    const ChatRequest& c = std::get<ChatRequest>(chat);
    FUZZ_CHECK(c.model == req->model);
    FUZZ_CHECK(c.stream == req->stream);
    FUZZ_CHECK(c.max_tokens == req->max_tokens);
    FUZZ_CHECK(c.reasoning_effort == req->reasoning_effort);
    FUZZ_CHECK(c.route.is_null());
  }
  if (translatable) {
    // A model served by chat deployments alone: the translation written at
    // admission, in the walk that checks it, is the same.
    auto e = llmgate::gateway::parse_messages_request("application/json", std::string(input), &cfg);
    auto* eager = std::get_if<ChatRequest>(&e);
    FUZZ_CHECK(eager != nullptr && !eager->chat_pending);
    ChatRequest lazy = *req;
    FUZZ_CHECK(!llmgate::gateway::translate_for_chat(lazy));
    FUZZ_CHECK(eager->body.text() == lazy.body.text());
    FUZZ_CHECK(eager->native->text() == req->native->text());
    FUZZ_CHECK(eager->model == req->model && eager->stream == req->stream);
    FUZZ_CHECK(eager->max_tokens == req->max_tokens && eager->route == req->route);
    FUZZ_CHECK(eager->reasoning_effort == req->reasoning_effort);
    FUZZ_CHECK(eager->untranslated.has_value() == req->untranslated.has_value());
    FUZZ_CHECK(eager->native_unsigned_thinking == req->native_unsigned_thinking);
  }
  if (req->untranslated) FUZZ_CHECK(!req->untranslated->param.empty());
  // An Anthropic deployment gets the client's document, the model renamed.
  llmgate::config::Provider anthropic;
  anthropic.protocol = llmgate::config::Protocol::kAnthropic;
  const auto* native = messages_api().protocol_for(anthropic);
  FUZZ_CHECK(native == &llmgate::providers::anthropic_messages_protocol());
  llmgate::providers::UpstreamRequest up;
  up.upstream_model = "upstream-model";
  up.provider = &anthropic;
  auto body = messages_api().upstream_body(*native, *req, up);
  FUZZ_CHECK(std::holds_alternative<std::string>(body));
  json sent = json::parse(std::get<std::string>(body), nullptr, false);
  json own = req->native->dom();
  FUZZ_CHECK(sent.is_object() && own.is_object());
  FUZZ_CHECK(sent["model"] == "upstream-model");
  sent.erase("model");
  sent.erase("stream");
  own.erase("model");
  own.erase("stream");
  if (!req->native_unsigned_thinking) {
    FUZZ_CHECK(sent == own);
    return;
  }
  // Thinking blocks without a signature are left out, and nothing else.
  const auto unsigned_thinking = [](const json& b) {
    return b.is_object() && b.value("type", "") == "thinking" &&
           (!b.contains("signature") || b["signature"] == "");
  };
  if (own.contains("messages") && own["messages"].is_array()) {
    for (json& m : own["messages"]) {
      if (!m.is_object() || !m.contains("content") || !m["content"].is_array()) continue;
      json kept = json::array();
      for (const json& b : m["content"])
        if (!unsigned_thinking(b)) kept.push_back(b);
      m["content"] = std::move(kept);
    }
  }
  FUZZ_CHECK(sent == own);
}

// The events a Messages client got, checked in order; their text.
void check_events(const std::string& out, bool ended) {
  bool started = false, stopped = false;
  std::int64_t open = -1, last = -1;
  std::set<std::int64_t> tools;
  each_event(out, [&](const Frame& ev) {
    FUZZ_CHECK(ev.has_data && !stopped);
    const json j = json::parse(ev.data, nullptr, false);
    FUZZ_CHECK(j.is_object() && j.contains("type") && j["type"].is_string());
    const std::string type = j["type"];
    FUZZ_CHECK(ev.event == type);
    if (type == "ping") return;
    FUZZ_CHECK(started == (type != "message_start"));
    if (type == "message_start") {
      started = true;
    } else if (type == "content_block_start") {
      FUZZ_CHECK(open < 0 && j["index"] == last + 1);
      open = last = j["index"];
      if (j["content_block"]["type"] == "tool_use") tools.insert(open);
    } else if (type == "content_block_delta") {
      const std::int64_t at = j["index"];
      FUZZ_CHECK(at == open || tools.count(at));
    } else if (type == "content_block_stop") {
      FUZZ_CHECK(j["index"] == open);
      open = -1;
    } else if (type == "message_delta") {
      FUZZ_CHECK(open < 0);
    } else {
      FUZZ_CHECK(type == "message_stop");
      stopped = true;
    }
  });
  FUZZ_CHECK(stopped == ended);
}

std::string text_of(const ordered_json& m, const char* type, const char* field) {
  std::string out;
  if (!m.contains("content")) return out;
  for (const auto& b : m["content"]) {
    if (b.value("type", "") == type) out += b.value(field, "");
  }
  return out;
}

// The events a stream's text holds: each one's name and data parsed.
std::vector<std::pair<std::string, ordered_json>> events_of(const std::string& text) {
  std::vector<std::pair<std::string, ordered_json>> out;
  each_event(text, [&](const Frame& ev) {
    out.emplace_back(std::string(ev.event), ordered_json::parse(ev.data, nullptr, false));
  });
  return out;
}

void check_chat_stream(std::string_view input) {
  const auto& chat = llmgate::providers::openai_chat_protocol();
  ChatRequest req;
  auto renderer = messages_api().renderer(chat, req);
  FUZZ_CHECK(renderer != nullptr);
  // The reference: every chunk rendered from its parsed document.
  auto reference = llmgate::gateway::chat_to_messages_renderer(/*scan=*/false);
  Outbox reference_out;
  Outbox out;
  llmgate::providers::ChunkPrefix prefix;
  llmgate::providers::CompletionAssembler assembled;
  bool one_choice = true, done = false;
  // Reasoning under both of its names (reasoning_content, reasoning), or
  // text under both (content, refusal): the stream gives each delta's two
  // in turn, the whole answer all of one then all of the other -- both
  // faithful; the oracle compares a text given under one name.
  bool reasoning_content = false, reasoning = false, content = false, refusal = false;
  each_event(input, [&](const Frame& ev) {
    if (done) return;  // the relay reads no further
    UpstreamEvent e = chat.classify(ev, prefix);
    renderer->render(e, out);
    out.hold();
    reference->render(e, reference_out);
    reference_out.hold();
    if (e.kind == UpstreamEvent::Kind::kDone) done = true;
    if (e.kind != UpstreamEvent::Kind::kData) return;
    const json chunk = llmgate::providers::parse_chunk(e.data).json;
    assembled.add(chunk);
    if (const auto c = chunk.find("choices"); c != chunk.end() && c->is_array()) {
      for (const auto& choice : *c) {
        const auto i = choice.find("index");
        if (i != choice.end() && !i->is_null() && *i != 0) one_choice = false;
        const auto d = choice.find("delta");
        if (d == choice.end() || !d->is_object()) continue;
        const auto named = [&](const char* key) {
          const auto r = d->find(key);
          return r != d->end() && r->is_string() && !r->get_ref<const std::string&>().empty();
        };
        reasoning_content = reasoning_content || named("reasoning_content");
        reasoning = reasoning || named("reasoning");
        content = content || named("content");
        refusal = refusal || named("refusal");
      }
    }
  });
  if (!done) {
    renderer->end(out);
    reference->end(reference_out);
  }
  const std::string events = out.str();
  check_events(events, true);
  // The same events as the reference's, their data parsed (a scanned
  // chunk's strings keep the upstream's escapes).
  FUZZ_CHECK(events_of(events) == events_of(reference_out.str()));
  // The oracle: the same events as one Message, and the chunks as one.
  auto assembly = messages_api().assembly(llmgate::providers::anthropic_messages_protocol());
  auto stream = llmgate::providers::anthropic_messages_protocol().open_stream({});
  struct Sink final : llmgate::providers::UpstreamStream::Sink {
    ClientApi::Assembly* a;
    void on(UpstreamEvent& ev) override { a->add(ev); }
  } sink;
  sink.a = assembly.get();
  each_event(events, [&](const Frame& ev) { stream->translate(ev, sink); });
  const ordered_json streamed = ordered_json::parse(assembly->body(), nullptr, false);
  FUZZ_CHECK(streamed.is_object());
  if (!one_choice) return;
  const ordered_json whole = llmgate::gateway::message_of_completion(assembled.result());
  if (!(content && refusal))
    FUZZ_CHECK(text_of(streamed, "text", "text") == text_of(whole, "text", "text"));
  if (!(reasoning_content && reasoning))
    FUZZ_CHECK(text_of(streamed, "thinking", "thinking") == text_of(whole, "thinking", "thinking"));
  FUZZ_CHECK(streamed["stop_reason"] == whole["stop_reason"]);
  FUZZ_CHECK(streamed["usage"] == whole["usage"]);
}

// The scan of one of Anthropic's events says what the document says; the
// delta's text it hands out as written decodes to the document's.
void check_event(std::string_view data) {
  using Delta = llmgate::providers::anthropic::EventFacts::Delta;
  std::optional<std::string_view> raw;
  const auto f = llmgate::providers::anthropic::read_event(data, &raw);
  FUZZ_CHECK(f == llmgate::providers::anthropic::read_event_dom(data));
  // With the words (the chat translator's reading): the same facts, and
  // the same words.
  llmgate::providers::anthropic::EventWords scanned, parsed;
  FUZZ_CHECK(llmgate::providers::anthropic::read_event(data, nullptr, &scanned) == f);
  llmgate::providers::anthropic::read_event_dom(data, &parsed);
  FUZZ_CHECK(scanned == parsed);
  if (!raw) return;
  FUZZ_CHECK(f.delta != Delta::kNone);
  const json j = json::parse(data, nullptr, false);
  const auto delta = j.find("delta");
  FUZZ_CHECK(delta != j.end() && delta->is_object());
  const char* key = f.delta == Delta::kText       ? "text"
                    : f.delta == Delta::kThinking ? "thinking"
                                                  : "partial_json";
  const auto text = delta->find(key);
  FUZZ_CHECK(text != delta->end());
  FUZZ_CHECK(json::parse("\"" + std::string(*raw) + "\"", nullptr, false) == *text);
}

void check_native_stream(std::string_view input) {
  const auto& native = llmgate::providers::anthropic_messages_protocol();
  ChatRequest req;
  auto renderer = messages_api().renderer(native, req);
  auto assembly = messages_api().assembly(native);
  auto stream = native.open_stream({});
  Outbox out;
  std::string forwarded;
  struct Sink final : llmgate::providers::UpstreamStream::Sink {
    ClientApi::StreamRenderer* r;
    ClientApi::Assembly* a;
    Outbox* out;
    int events = 0;
    void on(UpstreamEvent& ev) override {
      ++events;
      r->render(ev, *out);
      a->add(ev);
    }
  } sink;
  sink.r = renderer.get();
  sink.a = assembly.get();
  sink.out = &out;
  each_event(input, [&](const Frame& ev) {
    if (ev.has_data) check_event(ev.data);
    const int before = sink.events;
    stream->translate(ev, sink);
    FUZZ_CHECK(sink.events - before <= 1);  // one neutral event per upstream event
    out.hold();
  });
  FUZZ_CHECK(ordered_json::parse(assembly->body(), nullptr, false).is_object());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  check_request(input);
  check_chat_stream(input);
  check_native_stream(input);
  check_event(input);
  return 0;
}
