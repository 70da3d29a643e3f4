#include "providers/completion_assembler.h"

#include <algorithm>

#include "providers/request_body.h"
#include "providers/utf8.h"

namespace llmgate::providers {
namespace {

// A value that says nothing yet: null, "", 0 (Azure's first chunk has
// `"id": ""`, `"created": 0`).
bool empty_value(const nlohmann::json& v) {
  return v.is_null() || (v.is_string() && v.get_ref<const std::string&>().empty()) ||
         (v.is_number() && v == 0);
}

void keep_first(nlohmann::json& dst, const nlohmann::json& src, const char* key) {
  if (!empty_value(dst)) return;
  if (auto it = src.find(key); it != src.end() && !empty_value(*it)) dst = *it;
}

// empty_value() of a value's JSON text, without parsing it: "", or a number
// whose digits before any exponent are all zeros (null is never kept).
bool empty_text(std::string_view v) {
  if (v == "\"\"") return true;
  if (v.empty() || (v[0] != '-' && (v[0] < '0' || v[0] > '9'))) return false;
  for (char ch : v) {
    if (ch == 'e' || ch == 'E') break;
    if (ch >= '1' && ch <= '9') return false;
  }
  return true;
}

// Fields that identify an item rather than carry its text.
bool identity_key(std::string_view key) { return key == "id" || key == "type" || key == "index"; }

// Merges one streamed delta value into what was assembled so far: strings
// concatenated, objects merged key by key (identities replaced), arrays of
// objects with an "index" merged element by element and others appended,
// anything else replaced; null changes nothing.
void merge_delta(nlohmann::json& into, const nlohmann::json& d, int depth = 0) {
  if (d.is_null()) return;
  if (into.is_null() || depth > 32) {
    into = d;
    return;
  }
  if (into.is_string() && d.is_string()) {
    into.get_ref<std::string&>() += d.get_ref<const std::string&>();
  } else if (into.is_object() && d.is_object()) {
    for (const auto& [key, value] : d.items()) {
      if (identity_key(key)) {
        if (!value.is_null()) into[key] = value;
      } else {
        merge_delta(into[key], value, depth + 1);
      }
    }
  } else if (into.is_array() && d.is_array()) {
    for (const auto& item : d) {
      auto index = item.is_object() ? item.find("index") : item.end();
      if (index == item.end()) {
        into.push_back(item);
        continue;
      }
      auto same = std::find_if(into.begin(), into.end(), [&](const nlohmann::json& e) {
        return e.is_object() && e.contains("index") && e["index"] == *index;
      });
      if (same == into.end())
        into.push_back(item);
      else
        merge_delta(*same, item, depth + 1);
    }
  } else {
    into = d;
  }
}

// Top-level chunk fields the assembler handles itself, or that only a stream
// has (OpenAI's `obfuscation` padding).
bool chunk_key(std::string_view key) {
  return key == "id" || key == "object" || key == "created" || key == "model" || key == "choices" ||
         key == "usage" || key == "system_fingerprint" || key == "service_tier" ||
         key == "obfuscation";
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

void CompletionAssembler::add_plain(const ChatChunk& c) {
  // keep_first, on each value's text (kept as text, parsed only if needed).
  const auto meta = meta_fields();
  for (std::size_t i = 0; i < c.meta.size(); ++i) {
    if (!(c.meta_keys & (1u << i)) || !meta_text_[i].empty() || !empty_value(*meta[i])) continue;
    if (!empty_text(c.meta[i])) meta_text_[i] = c.meta[i];
  }
  if (!c.usage_json.empty()) {
    usage_text_ = c.usage_json;
    usage_ = c.usage;
  }
  if (!c.plain_choice) return;
  Choice& out = choices_[0];
  if (c.has_finish_reason) {
    std::string reason;
    append_unescaped(reason, c.finish_reason);
    out.finish_reason = std::move(reason);
  }
  if (c.has_role) {
    out.role.clear();
    append_unescaped(out.role, c.role);
  }
  if (c.has_content) {
    if (!out.content) out.content.emplace();
    append_unescaped(*out.content, c.content);
  }
}

std::array<nlohmann::json*, 5> CompletionAssembler::meta_fields() {
  return {&id_, &created_, &model_, &system_fingerprint_, &service_tier_};
}

std::array<const nlohmann::json*, 5> CompletionAssembler::meta_fields() const {
  return {&id_, &created_, &model_, &system_fingerprint_, &service_tier_};
}

void CompletionAssembler::parse_kept() {
  const auto meta = meta_fields();
  for (std::size_t i = 0; i < meta_text_.size(); ++i) {
    if (meta_text_[i].empty()) continue;
    *meta[i] = nlohmann::json::parse(meta_text_[i]);
    meta_text_[i].clear();
  }
  if (!usage_text_.empty()) {
    raw_usage_ = nlohmann::json::parse(usage_text_);
    usage_text_.clear();
  }
}

nlohmann::json CompletionAssembler::meta(std::size_t i) const {
  if (!meta_text_[i].empty()) return nlohmann::json::parse(meta_text_[i]);
  return *meta_fields()[i];
}

nlohmann::json CompletionAssembler::raw_usage() const {
  return usage_text_.empty() ? raw_usage_ : nlohmann::json::parse(usage_text_);
}

void CompletionAssembler::add(const nlohmann::json& chunk) {
  all_plain_ = false;
  parse_kept();
  if (!chunk.is_object()) return;
  keep_first(id_, chunk, "id");
  keep_first(created_, chunk, "created");
  keep_first(model_, chunk, "model");
  keep_first(system_fingerprint_, chunk, "system_fingerprint");
  keep_first(service_tier_, chunk, "service_tier");
  if (auto u = chunk.find("usage"); u != chunk.end() && u->is_object()) {
    raw_usage_ = *u;
    usage_ = usage_of(chunk);
  }
  for (const auto& [key, value] : chunk.items()) {
    if (!chunk_key(key) && !value.is_null()) fields_[key] = value;
  }
  auto choices = chunk.find("choices");
  if (choices == chunk.end() || !choices->is_array()) return;
  for (const auto& ch : *choices) {
    if (ch.is_object()) add_choice(ch);
  }
}

void CompletionAssembler::add_choice(const nlohmann::json& ch) {
  const auto index_it = ch.find("index");
  const int index =
      index_it != ch.end() && index_it->is_number_integer() ? index_it->get<int>() : 0;
  Choice& out = choices_[index];
  for (const auto& [key, value] : ch.items()) {
    if (value.is_null() || key == "index" || key == "delta") continue;
    if (key == "finish_reason") {
      out.finish_reason = value;
    } else if (key == "logprobs") {
      add_logprobs(out, value);
    } else {
      out.fields[key] = value;
    }
  }
  auto delta = ch.find("delta");
  if (delta == ch.end() || !delta->is_object()) return;
  for (const auto& [key, value] : delta->items()) {
    if (value.is_null()) continue;
    if (key == "role") {
      if (value.is_string()) out.role = value.get<std::string>();
    } else if (key == "content" && value.is_string()) {
      if (!out.content) out.content.emplace();
      out.content->append(value.get_ref<const std::string&>());
    } else if (key == "refusal" && value.is_string()) {
      if (!out.refusal) out.refusal.emplace();
      out.refusal->append(value.get_ref<const std::string&>());
    } else if (key == "tool_calls" && value.is_array()) {
      merge_delta(out.tool_calls, value);
    } else {
      merge_delta(out.delta_fields[key], value);
    }
  }
}

void CompletionAssembler::add_logprobs(Choice& out, const nlohmann::json& lp) {
  if (!lp.is_object()) return;
  for (const char* key : {"content", "refusal"}) {
    auto part = lp.find(key);
    if (part == lp.end() || !part->is_array()) continue;
    if (out.logprobs.is_null()) out.logprobs = nlohmann::json::object();
    auto& dst = out.logprobs[key];
    if (!dst.is_array()) dst = nlohmann::json::array();
    for (const auto& item : *part) dst.push_back(item);
  }
}

nlohmann::json CompletionAssembler::message(const Choice& c) {
  nlohmann::json msg = nlohmann::json::object();
  msg["role"] = c.role;
  // A tool call, a function call or audio with no text: null, as OpenAI's
  // non-streamed answer has it (a stream often opens with "content": "").
  const bool other_output = !c.tool_calls.empty() || c.delta_fields.contains("function_call") ||
                            c.delta_fields.contains("audio");
  if (c.content && !(c.content->empty() && other_output))
    msg["content"] = *c.content;
  else
    msg["content"] = nullptr;
  msg["refusal"] = c.refusal ? nlohmann::json(*c.refusal) : nlohmann::json(nullptr);
  for (const auto& [key, value] : c.delta_fields.items()) msg[key] = value;
  if (!c.tool_calls.empty()) {
    nlohmann::json calls = c.tool_calls;
    for (auto& call : calls) {
      if (!call.is_object()) continue;
      call.erase("index");  // a stream's position marker; not in a message
      if (!call.contains("type")) call["type"] = "function";
    }
    msg["tool_calls"] = std::move(calls);
  }
  return msg;
}

nlohmann::json CompletionAssembler::result() const {
  nlohmann::json out = nlohmann::json::object();
  out["id"] = meta(0);
  out["object"] = "chat.completion";
  out["created"] = meta(1);
  out["model"] = meta(2);
  nlohmann::json choices = nlohmann::json::array();
  for (const auto& [index, c] : choices_) {
    nlohmann::json choice = {{"index", index},
                             {"message", message(c)},
                             {"logprobs", c.logprobs},
                             {"finish_reason", c.finish_reason}};
    for (const auto& [key, value] : c.fields.items()) choice[key] = value;
    choices.push_back(std::move(choice));
  }
  out["choices"] = std::move(choices);
  out["usage"] = raw_usage();
  if (nlohmann::json f = meta(3); !f.is_null()) out["system_fingerprint"] = std::move(f);
  if (nlohmann::json t = meta(4); !t.is_null()) out["service_tier"] = std::move(t);
  for (const auto& [key, value] : fields_.items()) out[key] = value;
  return out;
}

std::string CompletionAssembler::body() const {
  if (!all_plain_) {
    return result().dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  }
  // result() for chunks add_plain took: at most choice 0, with a role, a
  // content and a finish reason; nothing else anywhere. Keys in the order
  // nlohmann's object (a std::map) dumps them.
  auto text = [](const std::string& t) {
    return t.empty() ? std::string_view("null") : std::string_view(t);
  };
  std::string out;
  std::size_t content = 0;
  for (const auto& [index, c] : choices_) content += c.content ? c.content->size() : 0;
  out.reserve(256 + content + usage_text_.size());
  out += "{\"choices\":[";
  for (const auto& [index, c] : choices_) {
    if (out.back() == '}') out += ',';
    out += "{\"finish_reason\":";
    if (c.finish_reason.is_string())
      append_json_string(out, c.finish_reason.get_ref<const std::string&>());
    else
      out += "null";
    out += ",\"index\":";
    out += std::to_string(index);
    out += ",\"logprobs\":null,\"message\":{\"content\":";
    if (c.content)
      append_json_string(out, *c.content);
    else
      out += "null";
    out += ",\"refusal\":null,\"role\":";
    append_json_string(out, c.role);
    out += "}}";
  }
  out += "],\"created\":";
  out += text(meta_text_[1]);
  out += ",\"id\":";
  out += text(meta_text_[0]);
  out += ",\"model\":";
  out += text(meta_text_[2]);
  out += ",\"object\":\"chat.completion\"";
  if (!meta_text_[4].empty()) out.append(",\"service_tier\":").append(meta_text_[4]);
  if (!meta_text_[3].empty()) out.append(",\"system_fingerprint\":").append(meta_text_[3]);
  out += ",\"usage\":";
  out += text(usage_text_);
  out += '}';
  return out;
}

std::string stream_of_completion(const nlohmann::json& completion, bool include_usage) {
  std::string out;
  auto emit = [&](const nlohmann::json& chunk) {
    out.append("data: ")
        .append(chunk.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace))
        .append("\n\n");
  };
  // The chunk envelope: the completion's own fields but its choices and usage.
  nlohmann::json head = nlohmann::json::object();
  for (const auto& [key, value] : completion.items()) {
    if (key != "choices" && key != "usage") head[key] = value;
  }
  head["object"] = "chat.completion.chunk";
  auto chunk = [&](nlohmann::json choice) {
    nlohmann::json c = head;
    c["choices"] = nlohmann::json::array({std::move(choice)});
    return c;
  };
  const auto choices = completion.find("choices");
  if (choices != completion.end() && choices->is_array()) {
    for (const auto& ch : *choices) {
      if (!ch.is_object()) continue;
      const nlohmann::json index = ch.value("index", nlohmann::json(0));
      nlohmann::json msg = ch.value("message", nlohmann::json::object());
      if (!msg.is_object()) msg = nlohmann::json::object();  // no message: an empty one
      emit(chunk({{"index", index},
                  {"delta",
                   {{"role", msg.contains("role") && msg["role"].is_string()
                                 ? msg["role"]
                                 : nlohmann::json("assistant")}}},
                  {"finish_reason", nullptr}}));
      nlohmann::json delta = nlohmann::json::object();
      for (const auto& [key, value] : msg.items()) {
        if (key == "role" || value.is_null()) continue;
        delta[key] = value;
      }
      if (auto calls = delta.find("tool_calls"); calls != delta.end() && calls->is_array()) {
        for (std::size_t i = 0; i < calls->size(); ++i) {
          if ((*calls)[i].is_object()) (*calls)[i]["index"] = i;
        }
      }
      nlohmann::json body = {
          {"index", index}, {"delta", std::move(delta)}, {"finish_reason", nullptr}};
      if (auto lp = ch.find("logprobs"); lp != ch.end() && !lp->is_null()) body["logprobs"] = *lp;
      emit(chunk(std::move(body)));
      nlohmann::json finish = {{"index", index},
                               {"delta", nlohmann::json::object()},
                               {"finish_reason", ch.value("finish_reason", nlohmann::json())}};
      for (const auto& [key, value] : ch.items()) {
        if (key != "index" && key != "message" && key != "logprobs" && key != "finish_reason")
          finish[key] = value;
      }
      emit(chunk(std::move(finish)));
    }
  }
  if (auto usage = completion.find("usage");
      include_usage && usage != completion.end() && usage->is_object()) {
    nlohmann::json c = head;
    c["choices"] = nlohmann::json::array();
    c["usage"] = *usage;
    emit(c);
  }
  out.append("data: [DONE]\n\n");
  return out;
}

}  // namespace llmgate::providers
