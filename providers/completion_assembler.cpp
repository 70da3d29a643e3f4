#include "providers/completion_assembler.h"

#include "providers/utf8.h"

namespace llmgate::providers {
namespace {

void append_text(std::optional<std::string>& dst, const nlohmann::json& delta, const char* key) {
  auto it = delta.find(key);
  if (it == delta.end() || !it->is_string()) return;
  if (!dst) dst.emplace();
  dst->append(it->get_ref<const std::string&>());
}

void keep_first(nlohmann::json& dst, const nlohmann::json& src, const char* key) {
  if (!dst.is_null()) return;
  if (auto it = src.find(key); it != src.end()) dst = *it;
}

unsigned hex4(std::string_view s) {
  unsigned v = 0;
  for (int i = 0; i < 4; ++i) {
    const char c = s[static_cast<std::size_t>(i)];
    v = v << 4 | static_cast<unsigned>(c <= '9' ? c - '0' : (c | 0x20) - 'a' + 10);
  }
  return v;
}

// Appends the decoded text of a JSON string's contents, which a validating
// scan (inspect_chunk) has already checked: every escape is complete, and a
// high surrogate is always followed by a low one.
void append_unescaped(std::string& out, std::string_view s) {
  for (;;) {
    const auto bs = s.find('\\');
    out.append(s.substr(0, bs));
    if (bs == std::string_view::npos) return;
    const char e = s[bs + 1];
    s.remove_prefix(bs + 2);
    switch (e) {
      case 'b':
        out.push_back('\b');
        break;
      case 'f':
        out.push_back('\f');
        break;
      case 'n':
        out.push_back('\n');
        break;
      case 'r':
        out.push_back('\r');
        break;
      case 't':
        out.push_back('\t');
        break;
      case 'u': {
        unsigned cp = hex4(s);
        s.remove_prefix(4);
        if (cp >= 0xD800 && cp <= 0xDBFF) {  // "\uD83D\uDE00"
          cp = 0x10000 + ((cp - 0xD800) << 10) + (hex4(s.substr(2)) - 0xDC00);
          s.remove_prefix(6);
        }
        encode_utf8(cp, [&](unsigned b) { out.push_back(static_cast<char>(b)); });
        break;
      }
      default:
        out.push_back(e);
        break;  // '"', '\\' and '/'
    }
  }
}

}  // namespace

bool CompletionAssembler::add_plain(std::string_view escaped_content, unsigned meta_keys) {
  unsigned missing = 0;
  if (id_.is_null()) missing |= ChatChunk::kMetaId;
  if (created_.is_null()) missing |= ChatChunk::kMetaCreated;
  if (model_.is_null()) missing |= ChatChunk::kMetaModel;
  if (system_fingerprint_.is_null()) missing |= ChatChunk::kMetaSystemFingerprint;
  if (service_tier_.is_null()) missing |= ChatChunk::kMetaServiceTier;
  if (meta_keys & missing) return false;
  Choice& out = choices_[0];
  if (!out.content) out.content.emplace();
  append_unescaped(*out.content, escaped_content);
  return true;
}

void CompletionAssembler::add(const nlohmann::json& chunk) {
  keep_first(id_, chunk, "id");
  keep_first(created_, chunk, "created");
  keep_first(model_, chunk, "model");
  keep_first(system_fingerprint_, chunk, "system_fingerprint");
  keep_first(service_tier_, chunk, "service_tier");
  if (auto u = chunk.find("usage"); u != chunk.end() && u->is_object()) {
    raw_usage_ = *u;
    usage_ = usage_of(chunk);
  }
  auto choices = chunk.find("choices");
  if (choices == chunk.end() || !choices->is_array()) return;
  for (const auto& ch : *choices) {
    if (!ch.is_object()) continue;
    int index = ch.value("index", 0);
    Choice& out = choices_[index];
    if (auto fr = ch.find("finish_reason"); fr != ch.end() && !fr->is_null())
      out.finish_reason = *fr;
    if (auto lp = ch.find("logprobs"); lp != ch.end() && lp->is_object()) {
      for (const char* key : {"content", "refusal"}) {
        auto part = lp->find(key);
        if (part == lp->end() || !part->is_array()) continue;
        if (out.logprobs.is_null()) out.logprobs = nlohmann::json::object();
        auto& dst = out.logprobs[key];
        if (!dst.is_array()) dst = nlohmann::json::array();
        for (const auto& item : *part) dst.push_back(item);
      }
    }
    auto delta = ch.find("delta");
    if (delta == ch.end() || !delta->is_object()) continue;
    if (auto r = delta->find("role"); r != delta->end() && r->is_string())
      out.role = r->get<std::string>();
    append_text(out.content, *delta, "content");
    append_text(out.refusal, *delta, "refusal");
    append_text(out.reasoning_content, *delta, "reasoning_content");
    append_text(out.reasoning_content, *delta, "reasoning");
    if (auto tcs = delta->find("tool_calls"); tcs != delta->end() && tcs->is_array()) {
      for (const auto& tc : *tcs) {
        if (!tc.is_object()) continue;
        ToolCall& t = out.tool_calls[tc.value("index", 0)];
        if (auto id = tc.find("id"); id != tc.end() && !id->is_null()) t.id = *id;
        if (auto ty = tc.find("type"); ty != tc.end() && !ty->is_null()) t.type = *ty;
        if (auto fn = tc.find("function"); fn != tc.end() && fn->is_object()) {
          if (auto n = fn->find("name"); n != fn->end() && n->is_string())
            t.name += n->get<std::string>();
          if (auto a = fn->find("arguments"); a != fn->end() && a->is_string()) {
            t.arguments += a->get<std::string>();
          }
        }
      }
    }
  }
}

nlohmann::json CompletionAssembler::result() const {
  nlohmann::json out = nlohmann::json::object();
  out["id"] = id_;
  out["object"] = "chat.completion";
  out["created"] = created_;
  out["model"] = model_;
  nlohmann::json choices = nlohmann::json::array();
  for (const auto& [index, c] : choices_) {
    nlohmann::json msg = nlohmann::json::object();
    msg["role"] = c.role;
    msg["content"] = c.content ? nlohmann::json(*c.content) : nlohmann::json(nullptr);
    if (c.refusal)
      msg["refusal"] = *c.refusal;
    else
      msg["refusal"] = nullptr;
    if (c.reasoning_content) msg["reasoning_content"] = *c.reasoning_content;
    if (!c.tool_calls.empty()) {
      nlohmann::json calls = nlohmann::json::array();
      for (const auto& [i, t] : c.tool_calls) {
        calls.push_back({{"id", t.id},
                         {"type", t.type.is_null() ? nlohmann::json("function") : t.type},
                         {"function", {{"name", t.name}, {"arguments", t.arguments}}}});
      }
      msg["tool_calls"] = std::move(calls);
    }
    choices.push_back({{"index", index},
                       {"message", std::move(msg)},
                       {"logprobs", c.logprobs},
                       {"finish_reason", c.finish_reason}});
  }
  out["choices"] = std::move(choices);
  out["usage"] = raw_usage_.is_null() ? nlohmann::json(nullptr) : raw_usage_;
  if (!system_fingerprint_.is_null()) out["system_fingerprint"] = system_fingerprint_;
  if (!service_tier_.is_null()) out["service_tier"] = service_tier_;
  return out;
}

}  // namespace llmgate::providers
