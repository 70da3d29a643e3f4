// The DOM translation of a Messages request (messages_reference.h).
#include "tests/fuzz/messages_reference.h"

#include <string>
#include <utility>

#include "gateway/apis/messages_request.h"
#include "providers/anthropic_wire.h"
#include "providers/json_member.h"

namespace llmgate::fuzz {

using gateway::ApiError;
using gateway::ChatRequest;
using gateway::invalid_request;

namespace {

using nlohmann::json;
using Untranslated = ChatRequest::Untranslated;

ApiError invalid(std::string message) { return invalid_request(std::move(message)); }

using providers::member;
using providers::string_or;

// The translation so far, and the first thing it could not say.
struct Out {
  json chat = json::object();
  std::optional<Untranslated> untranslated;
  bool unsigned_thinking = false;  // a thinking block without a signature

  void refuse(std::string param, std::string_view what) {
    if (!untranslated) untranslated = gateway::messages_untranslated(std::move(param), what);
  }
};

// ---- checks Anthropic makes ----------------------------------------------------

std::optional<ApiError> check_required(const json& in) {
  const json* model = member(in, "model");
  if (!model) return invalid("model: Field required");
  if (!model->is_string() || model->get_ref<const std::string&>().empty())
    return invalid("model: Input should be a valid string");
  const json* max_tokens = member(in, "max_tokens");
  if (!max_tokens) return invalid("max_tokens: Field required");
  const auto n = providers::anthropic::integer(*max_tokens);
  if (!n) return invalid("max_tokens: Input should be a valid integer");
  if (*n < 1) return invalid("max_tokens: Input should be greater than or equal to 1");
  if (const json* stream = member(in, "stream"); stream && !stream->is_boolean())
    return invalid("stream: Input should be a valid boolean");
  const json* messages = member(in, "messages");
  if (!messages) return invalid("messages: Field required");
  if (!messages->is_array()) return invalid("messages: Input should be a valid list");
  if (messages->empty()) return invalid("messages: at least one message is required");
  for (std::size_t i = 0; i < messages->size(); ++i) {
    const json& m = (*messages)[i];
    const std::string at = "messages." + std::to_string(i);
    if (!m.is_object()) return invalid(at + ": Input should be a valid dictionary");
    const std::string role = string_or(m, "role");
    if (role != "user" && role != "assistant")
      return invalid(at + ".role: Input should be 'user' or 'assistant'");
    const json* content = member(m, "content");
    if (!content) return invalid(at + ".content: Field required");
    if (!content->is_string() && !content->is_array())
      return invalid(at + ".content: Input should be a valid string or a valid list");
    if (content->is_array()) {
      for (std::size_t j = 0; j < content->size(); ++j) {
        if (!(*content)[j].is_object() || string_or((*content)[j], "type").empty())
          return invalid(at + ".content." + std::to_string(j) +
                         ": Input should be a valid dictionary with a type");
      }
    }
  }
  if (const json* system = member(in, "system"); system && !system->is_string()) {
    if (!system->is_array()) return invalid("system: Input should be a valid string or list");
    for (const json& b : *system) {
      if (string_or(b, "type") != "text" || !member(b, "text") || !b["text"].is_string())
        return invalid("system: each block should be a text block");
    }
  }
  return std::nullopt;
}

// ---- messages ------------------------------------------------------------------

// A thinking block in the history, not carried to chat; one without a
// signature (a translated answer's) is noted: Anthropic would refuse it.
void note_thinking(const json& block, Out& out) {
  if (string_or(block, "signature").empty()) out.unsigned_thinking = true;
}

// An image block as an image_url part.
void image_part(const json& block, const std::string& where, json& parts, Out& out) {
  const json* source = member(block, "source");
  const std::string type = source ? string_or(*source, "type") : "";
  if (type == "base64") {
    parts.push_back({{"type", "image_url"},
                     {"image_url",
                      {{"url", "data:" + string_or(*source, "media_type") + ";base64," +
                                   string_or(*source, "data")}}}});
  } else if (type == "url") {
    parts.push_back({{"type", "image_url"}, {"image_url", {{"url", string_or(*source, "url")}}}});
  } else {
    out.refuse(where + ".source", "an image source of type \"" + type + "\"");
  }
}

// A tool_result's content as a tool message's text (text blocks joined).
std::string tool_result_text(const json& block, const std::string& where, Out& out) {
  const json* content = member(block, "content");
  if (!content) return {};
  if (content->is_string()) return content->get<std::string>();
  std::string text;
  if (!content->is_array()) {
    out.refuse(where + ".content", "tool_result content that is not text");
    return text;
  }
  for (std::size_t k = 0; k < content->size(); ++k) {
    const json& b = (*content)[k];
    if (string_or(b, "type") == "text") {
      text += string_or(b, "text");
    } else {
      out.refuse(where + ".content." + std::to_string(k),
                 "a tool_result block of type \"" + string_or(b, "type") + "\"");
    }
  }
  return text;
}

// Parts as a message's content: one text part is a plain string.
json content_of(json parts) {
  if (parts.size() == 1 && parts[0]["type"] == "text") return parts[0]["text"];
  return parts;
}

void add_user(const json& m, const std::string& at, json& messages, Out& out) {
  const json& content = m["content"];
  if (content.is_string()) {
    messages.push_back({{"role", "user"}, {"content", content}});
    return;
  }
  json parts = json::array();
  for (std::size_t j = 0; j < content.size(); ++j) {
    const json& block = content[j];
    const std::string where = at + ".content." + std::to_string(j);
    const std::string type = string_or(block, "type");
    if (type == "text") {
      parts.push_back({{"type", "text"}, {"text", string_or(block, "text")}});
    } else if (type == "image") {
      image_part(block, where, parts, out);
    } else if (type == "tool_result") {
      // Tool messages answer the assistant's calls: right after them,
      // before the user's own words.
      messages.push_back({{"role", "tool"},
                          {"tool_call_id", string_or(block, "tool_use_id")},
                          {"content", tool_result_text(block, where, out)}});
    } else if (type == "thinking") {
      note_thinking(block, out);
    } else if (type != "redacted_thinking") {
      out.refuse(where, "a content block of type \"" + type + "\"");
    }
  }
  // (A turn of blocks none of which translates still takes its place: the
  // request is refused for this deployment, not reordered.)
  if (!parts.empty() || messages.empty() || messages.back()["role"] != "tool")
    messages.push_back(
        {{"role", "user"}, {"content", parts.empty() ? json("") : content_of(parts)}});
}

void add_assistant(const json& m, const std::string& at, json& messages, Out& out) {
  const json& content = m["content"];
  json message = {{"role", "assistant"}};
  if (content.is_string()) {
    message["content"] = content;
    messages.push_back(std::move(message));
    return;
  }
  std::string text;
  json calls = json::array();
  for (std::size_t j = 0; j < content.size(); ++j) {
    const json& block = content[j];
    const std::string type = string_or(block, "type");
    if (type == "text") {
      text += string_or(block, "text");
    } else if (type == "tool_use") {
      const json* input = member(block, "input");
      calls.push_back(
          {{"id", string_or(block, "id")},
           {"type", "function"},
           {"function",
            {{"name", string_or(block, "name")},
             {"arguments", input ? input->dump(-1, ' ', false, json::error_handler_t::replace)
                                 : std::string("{}")}}}});
    } else if (type == "thinking") {
      note_thinking(block, out);
    } else if (type != "redacted_thinking") {
      out.refuse(at + ".content." + std::to_string(j), "a content block of type \"" + type + "\"");
    }
  }
  message["content"] = text.empty() && !calls.empty() ? json(nullptr) : json(text);
  if (!calls.empty()) message["tool_calls"] = std::move(calls);
  messages.push_back(std::move(message));
}

void translate_messages(const json& in, Out& out) {
  json messages = json::array();
  if (const json* system = member(in, "system")) {
    if (system->is_string()) {
      if (!system->get_ref<const std::string&>().empty())
        messages.push_back({{"role", "system"}, {"content", *system}});
    } else if (!system->empty()) {
      json parts = json::array();
      for (const json& b : *system) parts.push_back({{"type", "text"}, {"text", b["text"]}});
      messages.push_back({{"role", "system"}, {"content", content_of(std::move(parts))}});
    }
  }
  const json& list = in["messages"];
  for (std::size_t i = 0; i < list.size(); ++i) {
    const std::string at = "messages." + std::to_string(i);
    if (string_or(list[i], "role") == "user")
      add_user(list[i], at, messages, out);
    else
      add_assistant(list[i], at, messages, out);
  }
  out.chat["messages"] = std::move(messages);
}

// ---- tools, thinking ------------------------------------------------------------

void translate_tools(const json& in, Out& out) {
  const json* tools = member(in, "tools");
  if (tools) {
    if (!tools->is_array()) return out.refuse("tools", "tools that are not a list");
    json functions = json::array();
    for (std::size_t i = 0; i < tools->size(); ++i) {
      const json& t = (*tools)[i];
      const std::string type = string_or(t, "type");
      if (!type.empty() && type != "custom") {
        out.refuse("tools." + std::to_string(i), "the server tool \"" + type + "\"");
        continue;
      }
      json fn = {{"name", string_or(t, "name")}};
      if (const json* d = member(t, "description")) fn["description"] = *d;
      const json* schema = member(t, "input_schema");
      fn["parameters"] = schema ? *schema : json{{"type", "object"}};
      functions.push_back({{"type", "function"}, {"function", std::move(fn)}});
    }
    if (!functions.empty()) out.chat["tools"] = std::move(functions);
  }
  const json* choice = member(in, "tool_choice");
  if (!choice) return;
  const std::string type = string_or(*choice, "type");
  if (type == "auto") {
    out.chat["tool_choice"] = "auto";
  } else if (type == "any") {
    out.chat["tool_choice"] = "required";
  } else if (type == "tool") {
    out.chat["tool_choice"] = {{"type", "function"},
                               {"function", {{"name", string_or(*choice, "name")}}}};
  } else if (type == "none") {
    out.chat["tool_choice"] = "none";
  } else {
    return out.refuse("tool_choice", "the tool_choice \"" + type + "\"");
  }
  if (const json* d = member(*choice, "disable_parallel_tool_use"); d && *d == true && tools)
    out.chat["parallel_tool_calls"] = false;
}

void translate_thinking(const json& in, Out& out) {
  const json* thinking = member(in, "thinking");
  if (!thinking) return;
  const std::string type = string_or(*thinking, "type");
  if (type == "enabled") {
    const json* budget = member(*thinking, "budget_tokens");
    const std::int64_t b = budget ? providers::anthropic::integer(*budget).value_or(0) : 0;
    out.chat["reasoning_effort"] = b < 4096 ? "low" : b < 16384 ? "medium" : "high";
  } else if (type != "disabled" && type != "adaptive") {
    out.refuse("thinking", "thinking of type \"" + type + "\"");
  }
}

}  // namespace

std::variant<ReferenceTranslation, ApiError> reference_translate_messages(const json& in) {
  if (!in.is_object()) return invalid("Input should be a valid dictionary");
  if (auto e = check_required(in)) return std::move(*e);
  Out out;
  for (const auto& [key, value] : in.items()) {
    if (value.is_null()) continue;
    bool known = false;
    for (const auto& [from, to] : gateway::kMessagesRenamed) {
      if (key == from) {
        out.chat[std::string(to)] = value;
        known = true;
      }
    }
    for (std::string_view handled : gateway::kMessagesHandled) known = known || key == handled;
    if (!known) out.refuse(key.empty() ? "\"\"" : key, "the field \"" + key + "\"");
  }
  translate_messages(in, out);
  translate_tools(in, out);
  translate_thinking(in, out);
  if (const json* metadata = member(in, "metadata")) {
    if (const json* user = member(*metadata, "user_id"); user && user->is_string())
      out.chat["user"] = *user;
  }
  return ReferenceTranslation{std::move(out.chat), std::move(out.untranslated),
                              out.unsigned_thinking};
}

}  // namespace llmgate::fuzz
