// Fuzzes the Anthropic Messages protocol (providers/anthropic_protocol.cpp):
// its stream translator on arbitrary upstream bytes, and its request, answer
// and error translations on arbitrary JSON.
//
// Input: the bytes of an upstream body. They go through SseParser into one
// AnthropicStream (end() once at the end), which must never crash and must
// keep its promises to the relay:
//   - the chunks' content and reasoning_content, joined, are the text and
//     thinking of the upstream's events, read apart with nlohmann;
//   - every kData event's data is a chat.completion.chunk for parse_chunk,
//     and the event's own classification (inspect_chunk) says so too, laid
//     out as OpenAI's (tests/fuzz/chunk_layout.h; the client asked for
//     usage when the input's size is odd);
//   - a keep-alive carries the gateway's own ": ping" bytes, never the
//     upstream's; done carries nothing;
//   - nothing follows kDone or kError, and kDone comes only from a
//     message_stop event;
//   - errors and malformed events say why;
//   - each event's facts and words, as the scan reads them, are what its
//     document says (read_event against read_event_dom).
// When the whole input is a JSON document, it is also a client's chat
// request for body() (a string result is valid JSON naming the deployment's
// model and a positive max_tokens; a refusal names a parameter and says
// why), an Anthropic answer for completion() and an error body for error().
#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <variant>

#include "config/config.h"
#include "providers/anthropic_event.h"
#include "providers/chat_chunk.h"
#include "providers/json_depth.h"
#include "providers/sse_parser.h"
#include "providers/upstream_protocol.h"
#include "tests/fuzz/chunk_layout.h"
#include "tests/fuzz/fuzz_check.h"

namespace {

using llmgate::providers::ChatChunk;
using llmgate::providers::Frame;
using llmgate::providers::UpstreamEvent;
using llmgate::providers::UpstreamRequest;
using llmgate::providers::UpstreamStream;
using nlohmann::json;
using Kind = UpstreamEvent::Kind;

constexpr std::size_t kMaxEventBytes = 64 * 1024;

const llmgate::config::Provider& provider() {
  static const llmgate::config::Provider p;
  return p;
}

UpstreamRequest request(bool include_usage = false) {
  UpstreamRequest r;
  r.upstream_model = "claude-fuzz";
  r.created = 1;
  r.provider = &provider();
  r.include_usage = include_usage;
  return r;
}

// Whether an upstream event is a message_stop, judged apart from the
// translator.
bool is_message_stop(const Frame& ev) {
  if (!ev.has_data || llmgate::providers::json_too_deep(ev.data)) return false;
  const json e = json::parse(ev.data, nullptr, false);
  if (!e.is_object()) return false;
  const auto type = e.find("type");
  return type != e.end() && *type == "message_stop";
}

// The facts and words the translator reads from an event (the scan's,
// where it answers) are its document's reading (anthropic_event.h).
void check_facts(const Frame& ev) {
  if (!ev.has_data) return;
  namespace anthropic = llmgate::providers::anthropic;
  anthropic::EventWords scanned, parsed;
  const anthropic::EventFacts f = anthropic::read_event(ev.data, nullptr, &scanned);
  FUZZ_CHECK(f == anthropic::read_event_dom(ev.data, &parsed));
  FUZZ_CHECK(scanned == parsed);
}

class CheckingSink final : public UpstreamStream::Sink {
 public:
  void on(UpstreamEvent& ev) override {
    FUZZ_CHECK(!finished_);
    switch (ev.kind) {
      case Kind::kData:
        check_data(ev);
        break;
      case Kind::kKeepAlive:
        FUZZ_CHECK(ev.raw == ": ping\n\n" && ev.data.empty());
        break;
      case Kind::kDone:
        FUZZ_CHECK(from_message_stop && ev.data.empty() && ev.raw.empty());
        finished_ = true;
        break;
      case Kind::kError:
        FUZZ_CHECK(!ev.message.empty());
        finished_ = true;
        break;
      case Kind::kMalformed:
        FUZZ_CHECK(!ev.message.empty());
        break;
    }
  }

  bool from_message_stop = false;  // the upstream event being translated is one
  bool include_usage = false;      // the stream's request asked for usage
  bool finished() const { return finished_; }
  // The chunks' text and reasoning, in order.
  std::string content, reasoning;

 private:
  void check_data(const UpstreamEvent& ev) {
    FUZZ_CHECK(ev.raw.empty());
    const ChatChunk ref = llmgate::providers::parse_chunk(ev.data);
    FUZZ_CHECK(ref.kind == ChatChunk::Kind::kChunk);
    FUZZ_CHECK(ev.chunk.kind == ChatChunk::Kind::kChunk);
    FUZZ_CHECK(ev.chunk.has_output == ref.has_output);
    FUZZ_CHECK(ev.chunk.has_finish == ref.has_finish);
    FUZZ_CHECK(ev.chunk.usage_only == ref.usage_only);
    check_chunk_layout(ev.data, include_usage);
    const auto choices = ref.json.find("choices");
    if (choices == ref.json.end() || !choices->is_array() || choices->empty()) return;
    const json& delta = (*choices)[0]["delta"];
    for (auto [key, into] : {std::pair{"content", &content}, {"reasoning_content", &reasoning}}) {
      const auto text = delta.find(key);
      if (text != delta.end() && text->is_string()) *into += text->get<std::string>();
    }
  }

  bool finished_ = false;
};

// The text and thinking an upstream event adds to the answer, read apart
// from the translator: text and thinking deltas, a text block sent whole.
void add_answer(const Frame& ev, std::string& content, std::string& reasoning) {
  if (!ev.has_data || llmgate::providers::json_too_deep(ev.data)) return;
  const json e = json::parse(ev.data, nullptr, false);
  if (!e.is_object()) return;
  auto string = [](const json& obj, const char* key) {
    if (!obj.is_object()) return std::string();
    const auto v = obj.find(key);
    return v != obj.end() && v->is_string() ? v->get<std::string>() : std::string();
  };
  const std::string type = string(e, "type");
  if (type == "content_block_delta" && e.contains("delta")) {
    const json& d = e["delta"];
    if (string(d, "type") == "text_delta") content += string(d, "text");
    if (string(d, "type") == "thinking_delta") reasoning += string(d, "thinking");
  } else if (type == "content_block_start" && e.contains("content_block")) {
    const json& b = e["content_block"];
    if (string(b, "type") == "text") content += string(b, "text");
  }
}

void fuzz_stream(std::string_view bytes) {
  const bool include_usage = bytes.size() % 2 == 1;
  auto stream = llmgate::providers::anthropic_protocol().open_stream(request(include_usage));
  CheckingSink sink;
  sink.include_usage = include_usage;
  std::string content, reasoning;
  llmgate::providers::SseParser parser(kMaxEventBytes);
  parser.feed(bytes, [&](const Frame& ev) {
    check_facts(ev);
    sink.from_message_stop = is_message_stop(ev);
    if (!sink.finished()) add_answer(ev, content, reasoning);
    stream->translate(ev, sink);
  });
  sink.from_message_stop = false;
  stream->end(sink);
  // The client reads the answer's text and thinking, as they came.
  FUZZ_CHECK(sink.content == content);
  FUZZ_CHECK(sink.reasoning == reasoning);
}

void check_body(const std::variant<std::string, llmgate::providers::Untranslatable>& b) {
  if (const auto* refusal = std::get_if<llmgate::providers::Untranslatable>(&b)) {
    FUZZ_CHECK(!refusal->message.empty() && !refusal->param.empty());
    return;
  }
  const json out = json::parse(std::get<std::string>(b), nullptr, false);
  FUZZ_CHECK(out.is_object());
  FUZZ_CHECK(out.contains("model") && out["model"] == "claude-fuzz");
  FUZZ_CHECK(out.contains("max_tokens") && out["max_tokens"].is_number_integer() &&
             out["max_tokens"] > 0);
  FUZZ_CHECK(out.contains("messages") && out["messages"].is_array());
}

void fuzz_documents(std::string_view bytes) {
  if (llmgate::providers::json_too_deep(bytes)) return;
  json doc = json::parse(bytes, nullptr, false);
  if (doc.is_discarded()) return;
  const auto& protocol = llmgate::providers::anthropic_protocol();
  if (auto c = protocol.completion(doc, request())) {
    FUZZ_CHECK(c->is_object() && c->contains("choices"));
  }
  if (auto e = protocol.error(doc, 400)) {
    FUZZ_CHECK(e->is_object() && e->contains("error"));
  }
  if (doc.is_object()) {
    auto body = llmgate::providers::RequestBody::from(doc);
    check_body(protocol.body(body, request()));
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  fuzz_stream(bytes);
  fuzz_documents(bytes);
  return 0;
}
