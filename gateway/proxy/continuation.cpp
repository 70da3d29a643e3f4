#include "gateway/proxy/continuation.h"

#include <algorithm>
#include <utility>
#include <variant>

#include "gateway/apis/client_api.h"
#include "providers/chat_chunk.h"

namespace llmgate::gateway {
namespace {

using Kind = providers::UpstreamEvent::Kind;

// A chunk's document, its members in the order they came.
nlohmann::ordered_json chunk_json(const providers::UpstreamEvent& ev) {
  return nlohmann::ordered_json::parse(ev.data, nullptr, false);
}

bool has_value(const nlohmann::ordered_json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return false;
  // (A JSON string is never empty() to nlohmann: its text is.)
  if (it->is_string()) return !it->template get_ref<const std::string&>().empty();
  return !((it->is_array() || it->is_object()) && it->empty());
}

void add_count(nlohmann::ordered_json& usage, const char* key, std::int64_t n) {
  if (n == 0) return;
  auto it = usage.find(key);
  const std::int64_t was =
      it != usage.end() && it->is_number_integer() ? it->get<std::int64_t>() : 0;
  usage[key] = was + n;
}

}  // namespace

void StreamTranscript::add(const providers::UpstreamEvent& ev) {
  if (ev.kind != Kind::kData) return;
  const providers::ChatChunk& ch = ev.chunk;
  // The usual content chunk, once the meta is known: its string as it came
  // (a view, still escaped: decoded only when it has escapes).
  if (ch.plain && meta_taken_ && ch.plain_choice) {
    if (ch.has_content && !ch.content.empty()) {
      if (ch.content.find('\\') == std::string_view::npos) {
        text_.append(ch.content);
      } else {
        std::string quoted;
        quoted.reserve(ch.content.size() + 2);
        quoted.append("\"").append(ch.content).append("\"");
        const auto s = nlohmann::json::parse(quoted, nullptr, false);
        if (s.is_string()) text_ += s.get_ref<const std::string&>();
      }
      ++text_chunks_;
    }
    return;
  }
  if (ch.plain && meta_taken_ && !ch.plain_choice) return;  // usage, or no choice
  add(chunk_json(ev));
}

void StreamTranscript::add(const nlohmann::ordered_json& chunk) {
  if (!chunk.is_object()) return;
  if (!meta_taken_) {
    // The first chunk that names its answer (Azure's first event has an
    // empty id and no choices).
    if (auto id = chunk.find("id"); id != chunk.end() && id->is_string() && !id->empty()) {
      for (const char* key : {"id", "created", "model", "system_fingerprint"}) {
        if (auto v = chunk.find(key); v != chunk.end() && !v->is_null()) meta_[key] = *v;
      }
      meta_taken_ = true;
    }
  }
  auto choices = chunk.find("choices");
  if (choices == chunk.end() || !choices->is_array()) return;
  for (const auto& c : *choices) {
    if (!c.is_object()) continue;
    if (auto index = c.find("index"); index != c.end() && *index != 0) {
      why_not_ = "several choices";
      continue;
    }
    auto delta = c.find("delta");
    if (delta == c.end() || !delta->is_object()) continue;
    if (auto content = delta->find("content"); content != delta->end() && content->is_string() &&
                                               !content->get_ref<const std::string&>().empty()) {
      text_ += content->get_ref<const std::string&>();
      ++text_chunks_;
    }
    if (has_value(*delta, "tool_calls") || has_value(*delta, "function_call")) {
      why_not_ = "a tool call";
    } else if (has_value(*delta, "refusal")) {
      why_not_ = "a refusal";
    } else if (has_value(*delta, "audio")) {
      why_not_ = "audio";
    }
  }
}

bool continuable_request(const providers::RequestBody& body) {
  if (const auto* n = body.find("n")) {
    const auto v = body.json_of(*n);
    if (v.is_number() && v.get<double>() > 1) return false;
  }
  if (const auto* f = body.find("response_format")) {
    const auto v = body.json_of(*f);
    if (v.is_object()) {
      const auto type = v.find("type");
      if (type != v.end() && (*type == "json_schema" || *type == "json_object")) return false;
    }
  }
  return true;
}

std::optional<providers::RequestBody> continuation_body(const providers::RequestBody& original,
                                                        std::string_view text,
                                                        config::Continuation how,
                                                        std::string& trimmed) {
  trimmed.clear();
  std::string_view keep = text;
  if (how == config::Continuation::kPrefill) {
    const std::size_t end = keep.find_last_not_of(" \t\r\n");
    const std::size_t cut = end == std::string_view::npos ? 0 : end + 1;
    trimmed = std::string(keep.substr(cut));
    keep = keep.substr(0, cut);
  }
  const providers::RequestBody::Member* messages = original.find("messages");
  if (keep.empty() || messages == nullptr ||
      messages->v.type != providers::RequestBody::Type::kArray)
    return std::nullopt;  // nothing to continue: an answer anew
  // The client's messages as they came, and the text sent so far after them.
  std::string list(original.text_of(*messages));
  list.resize(list.find_last_of(']'));
  while (!list.empty() &&
         (list.back() == ' ' || list.back() == '\t' || list.back() == '\r' || list.back() == '\n'))
    list.pop_back();
  if (list.back() != '[') list += ',';
  list += "{\"role\":\"assistant\",\"content\":";
  providers::append_json_string(list, keep);
  if (how == config::Continuation::kPrefix) list += ",\"prefix\":true";
  list += "}]";
  std::string body = how == config::Continuation::kContinueFinalMessage
                         ? original.spliced({{"messages", list},
                                             {"continue_final_message", "true"},
                                             {"add_generation_prompt", "false"}},
                                            {"reasoning_effort"})
                         : original.spliced({{"messages", list}}, {"reasoning_effort"});
  auto parsed = providers::RequestBody::parse(std::move(body));
  if (auto* b = std::get_if<providers::RequestBody>(&parsed)) return std::move(*b);
  return std::nullopt;  // not reached: the splice of a valid document is valid
}

ContinuationSplice::ContinuationSplice(StreamTranscript& transcript, std::string sent,
                                       std::string trimmed, bool include_usage,
                                       providers::Usage usage)
    : transcript_(transcript),
      expect_{std::move(sent), std::move(trimmed)},
      had_text_(!transcript.text().empty()),
      include_usage_(include_usage),
      usage_(usage) {}

std::string ContinuationSplice::strip_leading(std::string_view text, bool last) {
  std::string out;
  while (phase_ < 2 && !text.empty()) {
    const std::string& e = expect_[phase_];
    const std::size_t n = std::min(text.size(), e.size() - matched_);
    if (n > 0 && text.substr(0, n) == std::string_view(e).substr(matched_, n)) {
      held_.append(text.substr(0, n));
      matched_ += n;
      text.remove_prefix(n);
      if (matched_ == e.size()) {  // all of it: said already, dropped
        held_.clear();
        matched_ = 0;
        ++phase_;
      }
      continue;
    }
    // Not this one: what was held is the continuation's own text (the
    // echo's is looked at again as a start of the whitespace).
    std::string again = std::move(held_);
    again.append(text);
    held_.clear();
    matched_ = 0;
    if (phase_++ == 0) return strip_leading(again, last);
    out += again;
    return out;
  }
  if (phase_ == 2) out.append(text);
  if (last && !held_.empty()) {
    out.insert(0, held_);  // the answer ends here: a partial match was text
    held_.clear();
    phase_ = 2;
  }
  return out;
}

void ContinuationSplice::render(const providers::UpstreamEvent& ev, Outbox& out) {
  if (render_openai_control(ev, out)) return;
  nlohmann::ordered_json j = chunk_json(ev);
  if (!j.is_object()) return;
  bool says = false;  // something is left for the client
  if (auto u = j.find("usage"); u != j.end() && !u->is_null()) {
    if (!include_usage_ || !u->is_object()) {
      j.erase("usage");
    } else {
      add_count(*u, "prompt_tokens", usage_.prompt_tokens);
      add_count(*u, "completion_tokens", usage_.completion_tokens);
      add_count(*u, "total_tokens", usage_.prompt_tokens + usage_.completion_tokens);
      says = true;
    }
  }
  if (auto choices = j.find("choices"); choices != j.end() && choices->is_array()) {
    for (auto& c : *choices) {
      if (!c.is_object()) continue;
      const bool finish = has_value(c, "finish_reason");
      if (auto d = c.find("delta"); d != c.end() && d->is_object()) {
        d->erase("role");
        // Reasoning after text would read as a second thought: the client
        // has the first deployment's.
        if (had_text_) {
          d->erase("reasoning_content");
          d->erase("reasoning");
        }
        std::string text;
        if (auto ct = d->find("content"); ct != d->end() && ct->is_string())
          text = strip_leading(ct->get_ref<const std::string&>(), finish);
        else if (finish)
          text = strip_leading({}, true);
        if (text.empty())
          d->erase("content");
        else
          (*d)["content"] = std::move(text);
        for (const auto& [key, value] : d->items()) says = says || !value.is_null();
      }
      says = says || finish;
    }
  }
  if (!says) return;
  for (const auto& [key, value] : transcript_.meta().items()) j[key] = value;
  transcript_.add(j);
  out.copy("data: ");
  out.copy(j.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace));
  out.copy("\n\n");
}

std::string StreamContinuation::describe() const {
  if (by.empty()) return {};
  std::string s;
  for (const auto& d : by) s.append(s.empty() ? "" : ",").append(d);
  if (first_broken) s.append("; broken=").append(first_broken->id());
  if (!first_fault.empty()) s.append("; fault=").append(first_fault);
  s.append("; after_chunks=").append(std::to_string(broken_after));
  return s;
}

}  // namespace llmgate::gateway
