// Fuzzes stream continuation (gateway/proxy/continuation.cpp): what a client was
// told, the continuation's request and the splice of a continuation's chunks.
//
// Input: the bytes of an upstream body, split at its first NUL: before it a
// broken stream's events, after it a continuation's (OpenAI chunks through
// SseParser and the chat protocol's classification, as the relay sees them).
// The transcript keeps the first part's text; the splice must never crash
// and must keep its promises to the client:
//   - every chunk it writes is a JSON object with the first part's id,
//     model and created (those it had), no "role", and, once the client had
//     text, no reasoning;
//   - a keep-alive and the end go as they came, a chunk as one
//     "data: ...\n\n" event or nothing;
//   - the transcript's text only grows, by the chunks' content.
// When the whole input is a JSON object, it is also a client's request for
// continuation_body() in every way: the result is a JSON object whose
// messages end with the assistant's text (prefix, continue_final_message,
// prefill with its trailing whitespace trimmed), or none (asked anew).
#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <variant>

#include "gateway/proxy/continuation.h"
#include "providers/json_depth.h"
#include "providers/sse_parser.h"
#include "providers/upstream_protocol.h"
#include "tests/fuzz/fuzz_check.h"

namespace {

using llmgate::gateway::ContinuationSplice;
using llmgate::gateway::Outbox;
using llmgate::gateway::StreamTranscript;
using llmgate::providers::Frame;
using llmgate::providers::SseParser;
using llmgate::providers::UpstreamEvent;
using nlohmann::json;
using Kind = UpstreamEvent::Kind;

constexpr std::size_t kMaxEventBytes = 64 * 1024;

template <class F>
void each_event(std::string_view bytes, F&& f) {
  SseParser parser(kMaxEventBytes);
  llmgate::providers::ChunkPrefix prefix;
  auto span = parser.prepare(bytes.size());
  std::copy(bytes.begin(), bytes.end(), span.begin());
  parser.commit(bytes.size());
  parser.drain([&](const Frame& ev) {
    UpstreamEvent e = llmgate::providers::openai_chat_protocol().classify(ev, prefix);
    f(e);
  });
}

// What the splice wrote for one event: a keep-alive as it came, the end as
// it came (or [DONE]), a chunk as one data event (or nothing).
void check_client_bytes(const UpstreamEvent& e, const std::string& out, const json& meta,
                        bool had_text, int& done) {
  switch (e.kind) {
    case Kind::kKeepAlive:
      FUZZ_CHECK(out == e.raw);
      return;
    case Kind::kDone:
      FUZZ_CHECK(out == (e.raw.empty() ? std::string_view("data: [DONE]\n\n") : e.raw));
      ++done;
      return;
    case Kind::kError:
    case Kind::kMalformed:
      FUZZ_CHECK(out.empty());
      return;
    case Kind::kData:
      break;
  }
  if (out.empty()) return;
  FUZZ_CHECK(out.starts_with("data: ") && out.ends_with("\n\n"));
  const std::string data = out.substr(6, out.size() - 8);
  FUZZ_CHECK(data.find("\n\n") == std::string::npos);
  const json j = json::parse(data, nullptr, false);
  FUZZ_CHECK(j.is_object());
  for (const auto& [key, value] : meta.items()) FUZZ_CHECK(j.contains(key) && j[key] == value);
  if (auto choices = j.find("choices"); choices != j.end() && choices->is_array()) {
    for (const auto& c : *choices) {
      if (!c.is_object() || !c.contains("delta") || !c["delta"].is_object()) continue;
      FUZZ_CHECK(!c["delta"].contains("role"));
      if (had_text) {
        FUZZ_CHECK(!c["delta"].contains("reasoning_content"));
        FUZZ_CHECK(!c["delta"].contains("reasoning"));
      }
    }
  }
}

void fuzz_splice(std::string_view input) {
  const std::size_t nul = input.find('\0');
  const std::string_view broken = input.substr(0, nul);
  const std::string_view continuation =
      nul == std::string_view::npos ? std::string_view() : input.substr(nul + 1);
  StreamTranscript transcript;
  each_event(broken, [&](const UpstreamEvent& e) { transcript.add(e); });
  const json meta = json::parse(transcript.meta().dump());
  const std::string sent = transcript.text();
  const bool had_text = !sent.empty();
  // The echo and the trimmed whitespace, as the proxy would give them.
  std::string trimmed;
  const std::size_t keep = sent.find_last_not_of(" \t\r\n");
  const std::string echo = sent.substr(0, keep == std::string::npos ? 0 : keep + 1);
  trimmed = sent.substr(echo.size());
  ContinuationSplice splice(transcript, echo, trimmed, (input.size() & 1) != 0,
                            llmgate::providers::Usage{3, 2, 5, 0, 0});
  int done = 0;
  each_event(continuation, [&](const UpstreamEvent& e) {
    const std::size_t before = transcript.text().size();
    Outbox out;
    splice.render(e, out);
    FUZZ_CHECK(transcript.text().size() >= before);
    FUZZ_CHECK(transcript.text().compare(0, sent.size(), sent) == 0);
    check_client_bytes(e, out.str(), meta, had_text, done);
  });
}

void fuzz_body(std::string_view input) {
  if (llmgate::providers::json_too_deep(input)) return;
  auto parsed = llmgate::providers::RequestBody::parse(std::string(input));
  auto* body = std::get_if<llmgate::providers::RequestBody>(&parsed);
  if (!body) return;
  (void)llmgate::gateway::continuable_request(*body);
  for (auto how : {llmgate::config::Continuation::kPrefix,
                   llmgate::config::Continuation::kContinueFinalMessage,
                   llmgate::config::Continuation::kPrefill}) {
    std::string trimmed;
    const auto next =
        llmgate::gateway::continuation_body(*body, "Hello, \"world\" \n", how, trimmed);
    if (!next) continue;  // asked anew: no messages array to extend
    const json j = json::parse(next->text(), nullptr, false);
    FUZZ_CHECK(j.is_object());
    FUZZ_CHECK(j.contains("messages") && j["messages"].is_array() && !j["messages"].empty());
    const json& last = j["messages"].back();
    FUZZ_CHECK(last["role"] == "assistant");
    FUZZ_CHECK(last["content"] == (how == llmgate::config::Continuation::kPrefill
                                       ? "Hello, \"world\""
                                       : "Hello, \"world\" \n"));
    FUZZ_CHECK(trimmed == (how == llmgate::config::Continuation::kPrefill ? " \n" : ""));
    FUZZ_CHECK(!j.contains("reasoning_effort"));
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  fuzz_splice(input);
  fuzz_body(input);
  return 0;
}
