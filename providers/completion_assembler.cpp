#include "providers/completion_assembler.h"

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

}  // namespace

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
    if (auto fr = ch.find("finish_reason"); fr != ch.end() && !fr->is_null()) out.finish_reason = *fr;
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
    if (auto r = delta->find("role"); r != delta->end() && r->is_string()) out.role = r->get<std::string>();
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
          if (auto n = fn->find("name"); n != fn->end() && n->is_string()) t.name += n->get<std::string>();
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
    if (c.refusal) msg["refusal"] = *c.refusal;
    else msg["refusal"] = nullptr;
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
