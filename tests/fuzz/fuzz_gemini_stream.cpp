// Fuzzes the Gemini generateContent protocol (providers/gemini_protocol.cpp),
// which reads what both sides send: the upstream's SSE stream of
// GenerateContentResponses and the client's OpenAI chat document.
//
// Input: arbitrary bytes, read two ways.
//   - As an upstream body: SseParser -> the stream translator -> end(). Every
//     kData event is a chunk parse_chunk() accepts (inspect_chunk, which the
//     relay reads, agreeing on the flags it sets), laid out as OpenAI's
//     (tests/fuzz/chunk_layout.h; the client asked for usage when the
//     input's size is odd), with no raw bytes of
//     Google's forwarded; at most one finish_reason; kDone only after one
//     and only from end(); nothing after kDone or kError; a keep-alive is our
//     own static comment. Each event's data, read as JSON, also goes through
//     completion() and error(), whose answers must dump. When read_usual()
//     reads an event by its scan (providers/gemini_response.h), what it
//     reads -- the text and thoughts, decoded; the finish reason; the usage
//     counts -- is what the event's document says, read here with nlohmann
//     as the translator reads a document, and the document has no error,
//     blocked prompt or function call in it.
//   - As a client's chat document (when it is JSON within the depth limit):
//     body() returns a GenerateContentRequest that parses back as an object
//     with contents, or a refusal that says why. target() with the input as
//     the model keeps it inside one path segment.
#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <variant>

#include "providers/chat_chunk.h"
#include "providers/gemini_response.h"
#include "providers/json_depth.h"
#include "providers/json_member.h"
#include "providers/sse_parser.h"
#include "providers/upstream_protocol.h"
#include "tests/fuzz/chunk_layout.h"
#include "tests/fuzz/fuzz_check.h"

namespace {

using llmgate::providers::ChatChunk;
using llmgate::providers::member;
using llmgate::providers::UpstreamEvent;
using llmgate::providers::UpstreamRequest;
using llmgate::providers::UpstreamStream;
using nlohmann::json;

const llmgate::providers::UpstreamProtocol& gemini() {
  return llmgate::providers::gemini_protocol();
}

// The translator's output, event by event, against the stream's invariants.
class Checker final : public UpstreamStream::Sink {
 public:
  void on(UpstreamEvent& e) override {
    FUZZ_CHECK(!over_);  // nothing after kDone or kError
    switch (e.kind) {
      case UpstreamEvent::Kind::kData:
        check_data(e);
        break;
      case UpstreamEvent::Kind::kDone:
        FUZZ_CHECK(ending_ && finished_);
        FUZZ_CHECK(e.data.empty() && e.raw.empty());
        over_ = true;
        break;
      case UpstreamEvent::Kind::kError:
        FUZZ_CHECK(!e.message.empty());
        over_ = true;
        break;
      case UpstreamEvent::Kind::kKeepAlive:
        FUZZ_CHECK(e.raw == ": keep-alive\n\n");
        break;
      case UpstreamEvent::Kind::kMalformed:
        FUZZ_CHECK(!e.message.empty());
        break;
    }
  }
  bool ending_ = false;         // end() is running
  bool include_usage_ = false;  // the stream's request asked for usage

 private:
  void check_data(const UpstreamEvent& e) {
    FUZZ_CHECK(e.raw.empty() && !e.data.empty());
    const ChatChunk ref = llmgate::providers::parse_chunk(e.data);
    FUZZ_CHECK(ref.kind == ChatChunk::Kind::kChunk);
    FUZZ_CHECK(e.chunk.kind == ref.kind);
    FUZZ_CHECK(e.chunk.has_output == ref.has_output);
    FUZZ_CHECK(e.chunk.has_finish == ref.has_finish);
    FUZZ_CHECK(e.chunk.usage.has_value() == ref.usage.has_value());
    FUZZ_CHECK(!ending_ || ref.usage_only);  // end() adds only the usage chunk
    check_chunk_layout(e.data, include_usage_);
    if (ref.has_finish) {
      FUZZ_CHECK(!finished_);  // one finish_reason per stream
      finished_ = true;
    }
  }
  bool over_ = false;
  bool finished_ = false;
};

json parse_json(std::string_view text) {
  if (llmgate::providers::json_too_deep(text)) return json(json::value_t::discarded);
  return json::parse(text, nullptr, /*allow_exceptions=*/false);
}

std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

// A whole answer or an error body, as the non-streamed path reads one.
void check_answer(std::string_view data, const UpstreamRequest& r) {
  const json j = parse_json(data);
  if (j.is_discarded()) return;
  if (auto c = gemini().completion(j, r)) {
    FUZZ_CHECK((*c)["choices"].is_array() && (*c)["choices"].size() == 1);
    FUZZ_CHECK((*c)["choices"][0]["message"].is_object());
    FUZZ_CHECK(!dump(*c).empty());
  }
  if (auto e = gemini().error(j, 500)) {
    FUZZ_CHECK((*e)["error"]["message"].is_string() && (*e)["error"]["type"].is_string());
    FUZZ_CHECK(!dump(*e).empty());
  }
}

// A token count as the translator takes one: an integer from 0 to 10^12.
std::optional<std::int64_t> count_of(const json& usage, const char* key) {
  constexpr std::uint64_t kMax = 1'000'000'000'000;
  const json* v = member(usage, key);
  if (v && v->is_number_unsigned() && v->get<std::uint64_t>() <= kMax)
    return static_cast<std::int64_t>(v->get<std::uint64_t>());
  if (v && v->is_number_integer() && v->get<std::int64_t>() >= 0 &&
      v->get<std::int64_t>() <= static_cast<std::int64_t>(kMax))
    return v->get<std::int64_t>();
  return std::nullopt;
}

// The text between a JSON string's quotes, decoded.
std::string decoded(const std::string& inner) {
  const json s = json::parse("\"" + inner + "\"", nullptr, false);
  FUZZ_CHECK(s.is_string());
  return s.get<std::string>();
}

// read_usual()'s answer against the event's document.
void check_usual(std::string_view data) {
  llmgate::providers::gemini::UsualResponse usual;
  if (!llmgate::providers::gemini::read_usual(data, usual)) return;
  FUZZ_CHECK(data.find('\0') == std::string_view::npos);
  const json j = parse_json(data);
  FUZZ_CHECK(j.is_object());
  FUZZ_CHECK(!member(j, "error") && !member(j, "promptFeedback"));
  const json* candidates = member(j, "candidates");
  const json* usage = member(j, "usageMetadata");
  FUZZ_CHECK(candidates || (usage && usage->is_object()));
  std::string content, reasoning, finish;
  if (candidates) {
    FUZZ_CHECK(candidates->is_array() && !candidates->empty() && candidates->front().is_object());
    const json& candidate = candidates->front();
    if (const json* f = member(candidate, "finishReason"); f && f->is_string())
      finish = f->get<std::string>();
    const json* c = member(candidate, "content");
    const json* parts = c ? member(*c, "parts") : nullptr;
    if (parts && parts->is_array()) {
      for (const json& part : *parts) {
        const json* text = member(part, "text");
        if (text && text->is_string()) {
          const json* thought = member(part, "thought");
          (thought && thought->is_boolean() && thought->get<bool>() ? reasoning : content) +=
              text->get<std::string>();
        } else {
          const json* call = member(part, "functionCall");
          FUZZ_CHECK(!call || !call->is_object());  // calls are the document's to read
        }
      }
    }
  }
  FUZZ_CHECK(decoded(usual.content) == content);
  FUZZ_CHECK(decoded(usual.reasoning) == reasoning);
  FUZZ_CHECK(usual.finish_reason == finish);
  FUZZ_CHECK(usual.usage.has_value() == (usage && usage->is_object()));
  if (usual.usage) {
    FUZZ_CHECK(usual.usage->prompt == count_of(*usage, "promptTokenCount"));
    FUZZ_CHECK(usual.usage->candidates == count_of(*usage, "candidatesTokenCount"));
    FUZZ_CHECK(usual.usage->thoughts == count_of(*usage, "thoughtsTokenCount"));
    FUZZ_CHECK(usual.usage->cached == count_of(*usage, "cachedContentTokenCount"));
  }
}

void check_stream(std::string_view bytes, const UpstreamRequest& r) {
  auto translator = gemini().open_stream(r);
  Checker checker;
  checker.include_usage_ = r.include_usage;
  llmgate::providers::SseParser parser(std::size_t{1} << 16);
  const auto status = parser.feed(bytes, [&](const llmgate::providers::Frame& ev) {
    if (ev.has_data) {
      check_answer(ev.data, r);
      check_usual(ev.data);
    }
    translator->translate(ev, checker);
  });
  // After an oversized event the relay stops reading: no end().
  if (status != llmgate::providers::SseParser::Status::kOk) return;
  checker.ending_ = true;
  translator->end(checker);
}

void check_body(std::string_view text, const UpstreamRequest& r) {
  json doc = parse_json(text);
  if (doc.is_discarded() || !doc.is_object()) return;
  auto body = llmgate::providers::RequestBody::from(doc);
  const auto out = gemini().body(body, r);
  if (const auto* refusal = std::get_if<llmgate::providers::Untranslatable>(&out)) {
    FUZZ_CHECK(!refusal->message.empty());
    return;
  }
  const json req = json::parse(std::get<std::string>(out), nullptr, false);
  FUZZ_CHECK(req.is_object());
  FUZZ_CHECK(req.contains("contents") && req["contents"].is_array() && !req["contents"].empty());
}

void check_target(std::string_view bytes) {
  const std::string model(bytes.substr(0, 64));
  std::string built;
  const std::string_view t = gemini().target(model, true, built);
  const std::string_view suffix = ":streamGenerateContent?alt=sse";
  FUZZ_CHECK(t.starts_with("/models/") && t.ends_with(suffix));
  const std::string_view segment = std::string_view(t).substr(8, t.size() - 8 - suffix.size());
  for (const char c : segment) {
    const auto u = static_cast<unsigned char>(c);
    FUZZ_CHECK(u > 0x20 && u < 0x7f && c != '?' && c != '#');
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  llmgate::config::Provider provider;
  const UpstreamRequest r{"gemini-2.5-flash", true, true, 1700000000, &provider, size % 2 == 1};
  check_stream(input, r);
  check_body(input, r);
  check_target(input);
  return 0;
}
