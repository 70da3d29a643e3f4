// Fuzzes Amazon Bedrock's Converse protocol (providers/bedrock_protocol.cpp),
// which reads what both sides send: the upstream's AWS event-stream messages
// and the client's OpenAI chat document.
//
// Input: arbitrary bytes, read three ways.
//   - As a ConverseStream: records split at "\n\n", each "TYPE\nPAYLOAD"
//     (a TYPE starting with '!' makes an exception message), encoded as
//     event-stream messages and fed to the framer in pieces whose size the
//     input picks (every split point over a run), then translated and
//     end()ed. Every kData event is a chunk parse_chunk() accepts, agreeing
//     with inspect_chunk's flags, laid out as OpenAI's
//     (tests/fuzz/chunk_layout.h); at most one finish_reason; kDone only
//     after one; nothing after kDone or kError. Each payload also goes
//     through completion(), answer_usage() and error(), whose answers must
//     dump. When read_event() reads a payload by its scan
//     (providers/bedrock_event.h), what it reads -- a delta's text or
//     reasoning text, decoded; the stop reason; the usage counts -- is what
//     the payload's document says, read here with nlohmann as the translator
//     reads a document, and the document has no tool call's input in it.
//   - As a client's chat document (when it is JSON within the depth limit):
//     body() returns a Converse request that parses back as an object with a
//     non-empty messages array of alternating roles, or a refusal that says why.
//   - As a model id: target() keeps it inside one path segment.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "providers/bedrock_event.h"
#include "providers/chat_chunk.h"
#include "providers/event_stream.h"
#include "providers/framer.h"
#include "providers/json_depth.h"
#include "providers/json_member.h"
#include "providers/translation.h"
#include "providers/upstream_protocol.h"
#include "tests/fuzz/chunk_layout.h"
#include "tests/fuzz/fuzz_check.h"

namespace {

using llmgate::providers::ChatChunk;
using llmgate::providers::member;
using llmgate::providers::UpstreamEvent;
using llmgate::providers::UpstreamRequest;
using llmgate::providers::UpstreamStream;
using llmgate::providers::translation::string_member;
using nlohmann::json;

const llmgate::providers::UpstreamProtocol& bedrock() {
  return llmgate::providers::bedrock_protocol();
}

class Checker final : public UpstreamStream::Sink {
 public:
  void on(UpstreamEvent& e) override {
    FUZZ_CHECK(!over_);
    switch (e.kind) {
      case UpstreamEvent::Kind::kData: {
        FUZZ_CHECK(e.raw.empty() && !e.data.empty());
        const ChatChunk ref = llmgate::providers::parse_chunk(e.data);
        FUZZ_CHECK(ref.kind == ChatChunk::Kind::kChunk);
        FUZZ_CHECK(e.chunk.has_output == ref.has_output);
        FUZZ_CHECK(e.chunk.has_finish == ref.has_finish);
        FUZZ_CHECK(e.chunk.usage.has_value() == ref.usage.has_value());
        check_chunk_layout(e.data, include_usage_);
        if (ref.has_finish) {
          FUZZ_CHECK(!finished_);
          finished_ = true;
        }
        break;
      }
      case UpstreamEvent::Kind::kDone:
        FUZZ_CHECK(finished_);
        over_ = true;
        break;
      case UpstreamEvent::Kind::kError:
        FUZZ_CHECK(!e.message.empty());
        over_ = true;
        break;
      case UpstreamEvent::Kind::kKeepAlive:
        FUZZ_CHECK(false);  // Converse has none
        break;
      case UpstreamEvent::Kind::kMalformed:
        FUZZ_CHECK(!e.message.empty());
        break;
    }
  }
  bool include_usage_ = false;

 private:
  bool over_ = false;
  bool finished_ = false;
};

json parse_json(std::string_view text) {
  if (llmgate::providers::json_too_deep(text)) return json(json::value_t::discarded);
  return json::parse(text, nullptr, /*allow_exceptions=*/false);
}

std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

void check_answer(std::string_view data, const UpstreamRequest& r) {
  const json j = parse_json(data);
  if (j.is_discarded()) return;
  if (auto c = bedrock().completion(j, r)) {
    FUZZ_CHECK((*c)["choices"].is_array() && (*c)["choices"].size() == 1);
    FUZZ_CHECK(!dump(*c).empty());
  }
  (void)bedrock().answer_usage(j);
  if (auto e = bedrock().error(j, 429)) {
    FUZZ_CHECK((*e)["error"]["message"].is_string() && (*e)["error"]["type"].is_string());
    FUZZ_CHECK(!dump(*e).empty());
  }
}

// A count as the translator takes one: an integer, its int64 value, within 0..10^12.
std::optional<std::int64_t> count_of(const json& usage, const char* key) {
  const json* v = member(usage, key);
  if (!v || !v->is_number_integer()) return std::nullopt;
  return std::clamp<std::int64_t>(v->get<std::int64_t>(), 0, 1'000'000'000'000);
}

// read_event()'s answer against the payload's document.
void check_scan(std::string_view type, std::string_view payload) {
  namespace bedrock = llmgate::providers::bedrock;
  bedrock::EventFacts f;
  if (!bedrock::read_event(type, payload, f)) return;
  FUZZ_CHECK(payload.find('\0') == std::string_view::npos);
  const json j = parse_json(payload);
  FUZZ_CHECK(j.is_object());
  if (type == "contentBlockDelta") {
    const json* delta = member(j, "delta");
    FUZZ_CHECK(delta != nullptr);
    using Delta = bedrock::EventFacts::Delta;
    Delta kind = Delta::kNone;
    std::string text;
    if (const std::string* t = string_member(*delta, "text")) {
      kind = Delta::kText, text = *t;
    } else {
      FUZZ_CHECK(!member(*delta, "toolUse"));  // a call's input is the document's to read
      if (const json* reasoning = member(*delta, "reasoningContent")) {
        if (const std::string* t = string_member(*reasoning, "text"))
          kind = Delta::kReasoning, text = *t;
      }
    }
    FUZZ_CHECK(f.delta == kind);
    if (kind != Delta::kNone) {
      const json decoded = json::parse("\"" + std::string(f.text) + "\"", nullptr, false);
      FUZZ_CHECK(decoded.is_string() && decoded.get<std::string>() == text);
    }
  } else if (type == "messageStop") {
    const std::string* reason = string_member(j, "stopReason");
    FUZZ_CHECK(f.stop_reason.has_value() == (reason != nullptr));
    if (reason) FUZZ_CHECK(*f.stop_reason == *reason);
  } else if (type == "metadata") {
    const json* usage = member(j, "usage");
    FUZZ_CHECK(f.usage.has_value() == (usage && usage->is_object()));
    if (f.usage) {
      FUZZ_CHECK(f.usage->input == count_of(*usage, "inputTokens"));
      FUZZ_CHECK(f.usage->cache_read == count_of(*usage, "cacheReadInputTokens"));
      FUZZ_CHECK(f.usage->cache_write == count_of(*usage, "cacheWriteInputTokens"));
      FUZZ_CHECK(f.usage->output == count_of(*usage, "outputTokens"));
    }
  } else {
    FUZZ_CHECK(type == "messageStart" || type == "contentBlockStop");
  }
}

void check_stream(std::string_view input, const UpstreamRequest& r) {
  std::string bytes;
  std::vector<std::string> payloads;
  while (!input.empty()) {
    const std::size_t end = input.find("\n\n");
    std::string_view record = input.substr(0, end);
    input = end == std::string_view::npos ? std::string_view() : input.substr(end + 2);
    const std::size_t nl = record.find('\n');
    std::string_view type = record.substr(0, nl);
    const std::string_view payload =
        nl == std::string_view::npos ? std::string_view() : record.substr(nl + 1);
    const bool exception = type.starts_with('!');
    if (exception) type.remove_prefix(1);
    const llmgate::providers::EventStreamHeader h[] = {
        {exception ? ":exception-type" : ":event-type", type},
        {":message-type", exception ? "exception" : "event"}};
    bytes += llmgate::providers::encode_event_stream_message(h, payload);
    if (!exception) check_scan(type, payload);
    payloads.emplace_back(payload);
  }
  for (const std::string& p : payloads) check_answer(p, r);
  auto translator = bedrock().open_stream(r);
  Checker checker;
  checker.include_usage_ = r.include_usage;
  llmgate::providers::Framer frames(llmgate::providers::Framing::kEventStream, 1 << 16);
  const std::size_t piece = 1 + bytes.size() % 61;
  for (std::size_t at = 0; at < bytes.size(); at += piece) {
    const std::size_t n = std::min(piece, bytes.size() - at);
    auto space = frames.prepare(n);
    std::copy_n(bytes.data() + at, n, space.data());
    frames.commit(n);
    const auto status = frames.drain(
        [&](const llmgate::providers::Frame& f) { translator->translate(f, checker); });
    FUZZ_CHECK(status == llmgate::providers::FrameStatus::kOk);  // our own encoding
  }
  FUZZ_CHECK(!frames.has_partial_frame());
  translator->end(checker);
}

void check_body(std::string_view text, const UpstreamRequest& r) {
  json doc = parse_json(text);
  if (doc.is_discarded() || !doc.is_object()) return;
  auto body = llmgate::providers::RequestBody::from(doc);
  const auto out = bedrock().body(body, r);
  if (const auto* refusal = std::get_if<llmgate::providers::Untranslatable>(&out)) {
    FUZZ_CHECK(!refusal->message.empty());
    return;
  }
  const json req = json::parse(std::get<std::string>(out), nullptr, false);
  FUZZ_CHECK(req.is_object() && req["messages"].is_array() && !req["messages"].empty());
  std::string last;
  for (const json& m : req["messages"]) {
    FUZZ_CHECK(m["role"] == "user" || m["role"] == "assistant");
    FUZZ_CHECK(m["role"] != last);  // roles alternate
    FUZZ_CHECK(m["content"].is_array() && !m["content"].empty());
    last = m["role"];
  }
}

void check_target(std::string_view bytes) {
  std::string built;
  const std::string_view t = bedrock().target(std::string(bytes.substr(0, 64)), true, built);
  const std::string_view suffix = "/converse-stream";
  FUZZ_CHECK(t.starts_with("/model/") && t.ends_with(suffix));
  const std::string_view segment = std::string_view(t).substr(7, t.size() - 7 - suffix.size());
  for (const char c : segment) {
    const auto u = static_cast<unsigned char>(c);
    FUZZ_CHECK(u > 0x20 && u < 0x7f && c != '/' && c != '?' && c != '#' && c != ':');
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  llmgate::config::Provider provider;
  const UpstreamRequest r{"anthropic.claude-3-5-sonnet-20240620-v1:0",
                          true,
                          true,
                          1700000000,
                          &provider,
                          size % 2 == 1};
  check_stream(input, r);
  check_body(input, r);
  check_target(input);
  return 0;
}
