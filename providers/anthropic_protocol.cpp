// Anthropic Messages (POST {base_url}/messages) as an upstream protocol: the
// client's OpenAI chat request becomes a Messages request, and Anthropic's
// events (message_start, content_block_*, message_delta, message_stop, ping,
// error) become chat.completion.chunks.
//
// Every top-level field of an OpenAI chat request, decided here once:
//
//   field                          | what happens
//   -------------------------------+-------------------------------------------
//   model, stream                  | the deployment's model; r.stream
//   messages                       | system/developer -> `system`; user,
//                                  | assistant (tool_calls -> tool_use), tool
//                                  | (-> tool_result in a user turn); runs of
//                                  | one role merged (Anthropic alternates)
//   max_completion_tokens,         | max_tokens (that order), else the
//   max_tokens                     | provider's default_max_tokens (required)
//   temperature                    | passes in 0..1; above 1 refused
//   top_p, top_k (extension)       | pass
//   stop                           | stop_sequences
//   tools (function only)          | tools with input_schema (`strict` dropped)
//   tool_choice, parallel_tool_calls | tool_choice (+ disable_parallel_tool_use)
//   reasoning_effort, reasoning    | thinking.budget_tokens from the provider's
//                                  | thinking_budgets; "none": no thinking
//   user, safety_identifier        | metadata.user_id (user first)
//   seed, store, metadata,         | ignored: they change neither the answer
//   service_tier, stream_options,  | nor its form (Anthropic has no seed;
//   prompt_cache_key               | its caching is explicit cache_control)
//   n > 1, logprobs, top_logprobs, | refused unless harmless (n 1, logprobs
//   logit_bias, frequency_penalty, | false, penalties 0, response_format text,
//   presence_penalty,              | modalities ["text"], logit_bias {}):
//   response_format, audio,        | Anthropic has no equivalent, and dropping
//   modalities, prediction,        | them would change the answer
//   functions, function_call,      |
//   web_search_options             |
//   anything else                  | refused, named: Anthropic rejects unknown
//                                  | fields, and a clear 400 beats a mystery
//
// A null value is "unset" everywhere (OpenAI clients send nulls freely).
// Extensions clients send for Anthropic: `cache_control` on a message, a
// content part or a tool (prompt caching), and `top_k`.
#include <algorithm>
#include <cstdint>
#include <ctime>
#include <limits>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "providers/anthropic_conversation.h"
#include "providers/anthropic_event.h"
#include "providers/anthropic_wire.h"
#include "providers/chunk_writer.h"
#include "providers/conversation_writer.h"
#include "providers/json_depth.h"
#include "providers/json_member.h"
#include "providers/translation.h"
#include "providers/upstream_protocol.h"

namespace llmgate::providers {
namespace {

using nlohmann::json;
using Refused = std::optional<Untranslatable>;

// Anthropic's smallest thinking budget.
constexpr std::int64_t kMinThinkingBudget = 1024;
using translation::dump;

// A member that is present and not null.
constexpr auto get = member;

// json::empty() is false for every string, "" included.
bool has_text(const json* v) {
  return v && v->is_string() && !v->get_ref<const std::string&>().empty();
}

using anthropic::integer;

using translation::invalid;  // "<param> <why>": "temperature must be a number"

Untranslatable unsupported(std::string param, std::string_view what) {
  return {std::string(what) + " is not supported by the Anthropic Messages API", std::move(param)};
}

// ---- top-level fields -------------------------------------------------------

enum class Rule { kTranslated, kIgnored, kRefused };

struct FieldRule {
  std::string_view name;
  Rule rule;
  bool (*harmless)(const json&) = nullptr;  // kRefused: the values that change nothing
  std::string_view what = {};               // kRefused: what the client asked for
};

bool never(const json&) { return false; }
bool is_zero(const json& v) { return v.is_number() && v == 0; }

constexpr FieldRule kFieldRules[] = {
    {"model", Rule::kTranslated},
    {"messages", Rule::kTranslated},
    {"stream", Rule::kTranslated},
    {"max_tokens", Rule::kTranslated},
    {"max_completion_tokens", Rule::kTranslated},
    {"temperature", Rule::kTranslated},
    {"top_p", Rule::kTranslated},
    {"top_k", Rule::kTranslated},
    {"stop", Rule::kTranslated},
    {"tools", Rule::kTranslated},
    {"tool_choice", Rule::kTranslated},
    {"parallel_tool_calls", Rule::kTranslated},
    {"reasoning_effort", Rule::kTranslated},
    {"reasoning", Rule::kTranslated},
    {"user", Rule::kTranslated},
    {"safety_identifier", Rule::kTranslated},
    {"seed", Rule::kIgnored},
    {"store", Rule::kIgnored},
    {"metadata", Rule::kIgnored},
    {"service_tier", Rule::kIgnored},
    {"stream_options", Rule::kIgnored},
    {"prompt_cache_key", Rule::kIgnored},
    {"n", Rule::kRefused, [](const json& v) { return v.is_number() && v == 1; },
     "more than one choice (n > 1)"},
    {"logprobs", Rule::kRefused, [](const json& v) { return v == false; }, "logprobs"},
    {"top_logprobs", Rule::kRefused, is_zero, "top_logprobs"},
    {"logit_bias", Rule::kRefused, [](const json& v) { return v.is_object() && v.empty(); },
     "logit_bias"},
    {"frequency_penalty", Rule::kRefused, is_zero, "frequency_penalty"},
    {"presence_penalty", Rule::kRefused, is_zero, "presence_penalty"},
    {"response_format", Rule::kRefused,
     [](const json& v) { return v.is_object() && v.size() == 1 && string_or(v, "type") == "text"; },
     "a response_format other than text"},
    {"audio", Rule::kRefused, never, "audio output"},
    {"modalities", Rule::kRefused,
     [](const json& v) {
       return v.is_array() &&
              std::all_of(v.begin(), v.end(), [](const json& m) { return m == "text"; });
     },
     "an output modality other than text"},
    {"prediction", Rule::kRefused, never, "prediction"},
    {"functions", Rule::kRefused, never, "legacy functions (use tools)"},
    {"function_call", Rule::kRefused, never, "legacy function_call (use tool_choice)"},
    {"web_search_options", Rule::kRefused, never, "web_search_options"},
};

const FieldRule* rule_for(std::string_view key) {
  for (const auto& rule : kFieldRules) {
    if (rule.name == key) return &rule;
  }
  return nullptr;
}

Refused check_fields(const json& in) {
  for (const auto& [key, value] : in.items()) {
    const FieldRule* rule = rule_for(key);
    if (!rule) return unsupported(field_param(key), "the field \"" + key + "\"");
    if (rule->rule == Rule::kRefused && !value.is_null() && !rule->harmless(value))
      return unsupported(field_param(key), rule->what);
  }
  return std::nullopt;
}

// ---- messages -----------------------------------------------------------------

std::string message_at(std::size_t i) { return "messages[" + std::to_string(i) + "]"; }

// The client's `cache_control` (an extension for prompt caching) onto a block.
Refused copy_cache_control(const json& from, json& block, const std::string& where) {
  const json* cc = get(from, "cache_control");
  if (!cc) return std::nullopt;
  if (!cc->is_object()) return invalid(where + ".cache_control", "must be an object");
  block["cache_control"] = *cc;
  return std::nullopt;
}

// "data:image/png;base64,AAAA" or an http(s) URL as an image source.
Refused image_source(const json& part, json& block, const std::string& where) {
  const json* image = get(part, "image_url");
  const json* url = image && image->is_object() ? get(*image, "url") : image;
  if (!url || !url->is_string()) return invalid(where + ".image_url", "needs a url");
  const auto& u = url->get_ref<const std::string&>();
  if (u.rfind("http://", 0) == 0 || u.rfind("https://", 0) == 0) {
    block = {{"type", "image"}, {"source", {{"type", "url"}, {"url", u}}}};
    return std::nullopt;
  }
  constexpr std::string_view kBase64 = ";base64,";
  const auto marker = u.find(kBase64);
  if (u.rfind("data:", 0) != 0 || marker == std::string::npos)
    return unsupported(where + ".image_url", "an image URL other than http(s) or base64 data:");
  block = {{"type", "image"},
           {"source",
            {{"type", "base64"},
             {"media_type", u.substr(5, marker - 5)},
             {"data", u.substr(marker + kBase64.size())}}}};
  return std::nullopt;
}

// One OpenAI content part as an Anthropic block: text everywhere, images in
// user turns only (Anthropic takes none from the assistant or the system).
Refused part_block(const json& part, bool images, json& block, const std::string& where) {
  const json* type = get(part, "type");
  if (!type || !type->is_string()) return invalid(where, "a content part needs a type");
  if (*type == "text") {
    const json* text = get(part, "text");
    if (!text || !text->is_string()) return invalid(where + ".text", "must be a string");
    block = {{"type", "text"}, {"text", *text}};
  } else if (*type == "image_url" && images) {
    if (auto r = image_source(part, block, where)) return r;
  } else {
    return unsupported(where, "the content part type \"" + type->get<std::string>() + "\"");
  }
  return copy_cache_control(part, block, where);
}

// OpenAI content (a string, or parts) as Anthropic content: a string stays
// one, parts become blocks.
Refused content_of(const json* content, bool images, json& out, const std::string& where) {
  if (!content) {
    out = "";
    return std::nullopt;
  }
  if (content->is_string()) {
    out = *content;
    return std::nullopt;
  }
  if (!content->is_array()) return invalid(where + ".content", "must be a string or an array");
  out = json::array();
  for (std::size_t j = 0; j < content->size(); ++j) {
    json block;
    const std::string part_at = where + ".content[" + std::to_string(j) + "]";
    if (auto r = part_block((*content)[j], images, block, part_at)) return r;
    out.push_back(std::move(block));
  }
  return std::nullopt;
}

// Content as blocks. An empty string gives none: Anthropic rejects empty text
// blocks, and it says nothing.
json as_blocks(json content) {
  if (content.is_array()) return content;
  json blocks = json::array();
  if (content.is_string() && !content.get_ref<const std::string&>().empty())
    blocks.push_back({{"type", "text"}, {"text", std::move(content)}});
  return blocks;
}

// A message-level cache_control marks the whole message: Anthropic caches the
// prefix up to a marked block, so it goes on the last one.
Refused message_cache_control(const json& m, json& content, const std::string& where) {
  if (!get(m, "cache_control")) return std::nullopt;
  if (content.is_string()) {
    content = json::array({{{"type", "text"}, {"text", content}}});
  }
  if (content.empty()) return invalid(where + ".cache_control", "needs content to mark");
  return copy_cache_control(m, content.back(), where);
}

struct Conversation {
  json system = json::array();  // text blocks
  bool system_plain = true;     // all came as strings without cache_control
  json messages = json::array();
};

// Anthropic requires user and assistant turns to alternate: a run of one
// role (several tool results, a tool result then the user's text) is one turn.
void append(Conversation& c, const char* role, json content) {
  if (!c.messages.empty() && c.messages.back()["role"] == role) {
    json& prev = c.messages.back()["content"];
    prev = as_blocks(std::move(prev));
    for (auto& block : as_blocks(std::move(content))) prev.push_back(std::move(block));
    return;
  }
  c.messages.push_back({{"role", role}, {"content", std::move(content)}});
}

Refused add_system(const json& m, const std::string& where, Conversation& c) {
  json content;
  if (auto r = content_of(get(m, "content"), false, content, where)) return r;
  if (get(m, "cache_control") || content.is_array()) c.system_plain = false;
  if (auto r = message_cache_control(m, content, where)) return r;
  for (auto& block : as_blocks(std::move(content))) c.system.push_back(std::move(block));
  return std::nullopt;
}

Refused add_user(const json& m, const std::string& where, Conversation& c) {
  const json* content = get(m, "content");
  if (!content) return invalid(where + ".content", "is required");
  json out;
  if (auto r = content_of(content, true, out, where)) return r;
  if (auto r = message_cache_control(m, out, where)) return r;
  append(c, "user", std::move(out));
  return std::nullopt;
}

// A tool call's arguments (a JSON text) as tool_use input (an object).
Refused tool_input(const json& call, json& input, const std::string& where) {
  const json* fn = get(call, "function");
  const json* args = fn ? get(*fn, "arguments") : nullptr;
  if (!args || !args->is_string()) return invalid(where + ".function.arguments", "is required");
  const auto& text = args->get_ref<const std::string&>();
  // Some servers write a call without parameters as "": it means {}.
  if (text.find_first_not_of(" \t\r\n") == std::string::npos) {
    input = json::object();
    return std::nullopt;
  }
  if (!json_too_deep(text)) input = json::parse(text, nullptr, false);
  if (!input.is_object())
    return invalid(where + ".function.arguments", "must be a JSON object for Anthropic tool_use");
  return std::nullopt;
}

Refused tool_use_block(const json& call, json& block, const std::string& where) {
  const json* type = get(call, "type");
  if (type && *type != "function") return unsupported(where + ".type", "a non-function tool call");
  const json* id = get(call, "id");
  const json* fn = get(call, "function");
  const json* name = fn ? get(*fn, "name") : nullptr;
  if (!id || !id->is_string()) return invalid(where + ".id", "must be a string");
  if (!name || !name->is_string()) return invalid(where + ".function.name", "must be a string");
  json input;
  if (auto r = tool_input(call, input, where)) return r;
  block = {{"type", "tool_use"}, {"id", *id}, {"name", *name}, {"input", std::move(input)}};
  return std::nullopt;
}

Refused add_assistant(const json& m, const std::string& where, Conversation& c) {
  if (get(m, "function_call")) return unsupported(where + ".function_call", "legacy function_call");
  json content;
  if (auto r = content_of(get(m, "content"), false, content, where)) return r;
  if (const json* calls = get(m, "tool_calls")) {
    if (!calls->is_array()) return invalid(where + ".tool_calls", "must be an array");
    content = as_blocks(std::move(content));
    for (std::size_t k = 0; k < calls->size(); ++k) {
      json block;
      const std::string call_at = where + ".tool_calls[" + std::to_string(k) + "]";
      if (auto r = tool_use_block((*calls)[k], block, call_at)) return r;
      content.push_back(std::move(block));
    }
  }
  if (auto r = message_cache_control(m, content, where)) return r;
  append(c, "assistant", std::move(content));
  return std::nullopt;
}

Refused add_tool_result(const json& m, const std::string& where, Conversation& c) {
  const json* id = get(m, "tool_call_id");
  if (!id || !id->is_string()) return invalid(where + ".tool_call_id", "must be a string");
  json content;
  if (auto r = content_of(get(m, "content"), false, content, where)) return r;
  json block = {{"type", "tool_result"}, {"tool_use_id", *id}, {"content", std::move(content)}};
  if (auto r = copy_cache_control(m, block, where)) return r;
  append(c, "user", json::array({std::move(block)}));
  return std::nullopt;
}

Refused add_message(const json& m, std::size_t i, Conversation& c) {
  const std::string where = message_at(i);
  if (!m.is_object()) return invalid(where, "must be an object");
  const std::string role = string_or(m, "role");
  if (role == "system" || role == "developer") return add_system(m, where, c);
  if (role == "user") return add_user(m, where, c);
  if (role == "assistant") return add_assistant(m, where, c);
  if (role == "tool") return add_tool_result(m, where, c);
  return unsupported(where + ".role", "the role \"" + role + "\"");
}

// Plain system texts as one string, a paragraph each.
json system_of(const Conversation& c) {
  if (!c.system_plain) return c.system;
  std::string text;
  for (const auto& block : c.system) {
    if (!text.empty()) text += "\n\n";
    text += string_or(block, "text");
  }
  return text;
}

Refused translate_messages(const json& in, json& out) {
  const json* messages = get(in, "messages");
  if (!messages || !messages->is_array()) return invalid("messages", "must be an array");
  Conversation c;
  for (std::size_t i = 0; i < messages->size(); ++i) {
    if (auto r = add_message((*messages)[i], i, c)) return r;
  }
  if (!c.system.empty()) out["system"] = system_of(c);
  out["messages"] = std::move(c.messages);
  return std::nullopt;
}

// ---- sampling, tools, thinking -----------------------------------------------

struct Limit {
  std::int64_t tokens = 0;
  std::string param;  // where it came from, for refusals
};

Refused translate_max_tokens(const json& in, const config::Provider& p, json& out, Limit& limit) {
  limit = {p.default_max_tokens, "max_tokens"};
  for (const char* key : {"max_completion_tokens", "max_tokens"}) {
    const json* v = get(in, key);
    if (!v) continue;
    const auto n = integer(*v);
    if (!n || *n < 1) return invalid(key, "must be a positive integer");
    limit = {*n, key};
    break;
  }
  out["max_tokens"] = limit.tokens;
  return std::nullopt;
}

Refused translate_sampling(const json& in, json& out) {
  if (const json* t = get(in, "temperature")) {
    if (!t->is_number()) return invalid("temperature", "must be a number");
    if (*t < 0 || *t > 1)
      return invalid("temperature", "must be between 0 and 1 for the Anthropic Messages API");
    out["temperature"] = *t;
  }
  if (const json* v = get(in, "top_p")) {
    if (!v->is_number()) return invalid("top_p", "must be a number");
    out["top_p"] = *v;
  }
  if (const json* v = get(in, "top_k")) {
    if (!integer(*v)) return invalid("top_k", "must be an integer");
    out["top_k"] = *v;
  }
  return std::nullopt;
}

Refused translate_stop(const json& in, json& out) {
  const json* stop = get(in, "stop");
  if (!stop) return std::nullopt;
  const json sequences = stop->is_string() ? json::array({*stop}) : *stop;
  if (!sequences.is_array() ||
      !std::all_of(sequences.begin(), sequences.end(), [](const json& s) { return s.is_string(); }))
    return invalid("stop", "must be a string or an array of strings");
  if (!sequences.empty()) out["stop_sequences"] = sequences;
  return std::nullopt;
}

Refused tool_of(const json& tool, json& out, const std::string& where) {
  const json* type = get(tool, "type");
  if (!type || *type != "function") return unsupported(where, "a tool type other than function");
  const json* fn = get(tool, "function");
  const json* name = fn ? get(*fn, "name") : nullptr;
  if (!name || !name->is_string()) return invalid(where + ".function.name", "must be a string");
  out = {{"name", *name}};
  if (const json* d = get(*fn, "description")) out["description"] = *d;
  // OpenAI's `strict` (arguments guaranteed to match the schema) is dropped,
  // not refused: clients set it by default, and a refusal would make tools
  // unusable here. Arguments are not validated against the schema.
  const json* params = get(*fn, "parameters");
  out["input_schema"] = params ? *params : json{{"type", "object"}};
  return copy_cache_control(tool, out, where);
}

Refused translate_tools(const json& in, json& out) {
  const json* tools = get(in, "tools");
  if (!tools) return std::nullopt;
  if (!tools->is_array()) return invalid("tools", "must be an array");
  json list = json::array();
  for (std::size_t i = 0; i < tools->size(); ++i) {
    json t;
    if (auto r = tool_of((*tools)[i], t, "tools[" + std::to_string(i) + "]")) return r;
    list.push_back(std::move(t));
  }
  if (!list.empty()) out["tools"] = std::move(list);
  return std::nullopt;
}

// OpenAI's tool_choice in Anthropic's words; null when it has none.
json tool_choice_of(const json& choice) {
  if (choice == "auto") return {{"type", "auto"}};
  if (choice == "required") return {{"type", "any"}};
  if (choice == "none") return {{"type", "none"}};
  const json* fn = get(choice, "function");
  const std::string name = fn ? string_or(*fn, "name") : "";
  if (string_or(choice, "type") == "function" && !name.empty())
    return {{"type", "tool"}, {"name", name}};
  return nullptr;
}

Refused translate_tool_choice(const json& in, json& out) {
  const json* choice = get(in, "tool_choice");
  json tc = choice ? tool_choice_of(*choice) : json();
  if (choice && tc.is_null()) return unsupported("tool_choice", "this tool_choice");
  const json* parallel = get(in, "parallel_tool_calls");
  if (parallel && !parallel->is_boolean())
    return invalid("parallel_tool_calls", "must be a boolean");
  if (parallel && *parallel == false) {
    if (tc.is_null()) tc = {{"type", "auto"}};
    // {"type": "none"} takes no options: no tool, nothing in parallel either.
    if (string_or(tc, "type") != "none") tc["disable_parallel_tool_use"] = true;
  }
  if (!tc.is_null()) out["tool_choice"] = std::move(tc);
  return std::nullopt;
}

// Anthropic refuses these alongside thinking (its extended-thinking docs:
// no temperature or top_k changes, top_p only in 0.95..1, no forced tool).
Refused check_thinking_compatible(const json& out) {
  if (const json* t = get(out, "temperature"); t && *t != 1)
    return invalid("temperature", "must be 1 (or unset) with reasoning on Anthropic");
  if (const json* p = get(out, "top_p"); p && (*p < 0.95 || *p > 1))
    return invalid("top_p", "must be between 0.95 and 1 (or unset) with reasoning on Anthropic");
  if (get(out, "top_k")) return invalid("top_k", "cannot be set with reasoning on Anthropic");
  const json* tc = get(out, "tool_choice");
  const std::string choice = tc ? string_or(*tc, "type") : "";
  if (choice == "any" || choice == "tool")
    return invalid("tool_choice", "cannot force a tool with reasoning on Anthropic");
  return std::nullopt;
}

Refused translate_reasoning(const json& in, const config::Provider& p, const Limit& limit,
                            json& out) {
  std::string param = "reasoning_effort";
  const json* effort = get(in, "reasoning_effort");
  if (!effort) {
    const json* reasoning = get(in, "reasoning");
    if (reasoning && !reasoning->is_object()) return invalid("reasoning", "must be an object");
    effort = reasoning ? get(*reasoning, "effort") : nullptr;
    param = "reasoning.effort";
  }
  if (!effort) return std::nullopt;
  if (!effort->is_string()) return invalid(param, "must be a string");
  const auto& name = effort->get_ref<const std::string&>();
  if (name == "none") return std::nullopt;
  const auto budget = p.thinking_budgets.find(name);
  if (budget == p.thinking_budgets.end())
    return invalid(param, "\"" + name + "\" has no thinking budget for this provider");
  // Anthropic wants the budget below max_tokens and at least 1024.
  const std::int64_t tokens = std::min(budget->second, limit.tokens - 1);
  if (tokens < kMinThinkingBudget)
    return invalid(limit.param, "must be at least " + std::to_string(kMinThinkingBudget + 1) +
                                    " with reasoning on Anthropic: its thinking budget is at "
                                    "least " +
                                    std::to_string(kMinThinkingBudget) +
                                    " tokens and below max_tokens");
  out["thinking"] = {{"type", "enabled"}, {"budget_tokens", tokens}};
  return check_thinking_compatible(out);
}

Refused translate_user(const json& in, json& out) {
  for (const char* key : {"user", "safety_identifier"}) {
    const json* v = get(in, key);
    if (!v) continue;
    if (!v->is_string()) return invalid(key, "must be a string");
    out["metadata"] = {{"user_id", *v}};
    return std::nullopt;
  }
  return std::nullopt;
}

// The fields but the conversation, translated into `out` (which has the
// model and stream).
Refused translate_settings(const json& in, const config::Provider& p, json& out) {
  Limit limit;
  Refused refused = translate_max_tokens(in, p, out, limit);
  if (!refused) refused = translate_sampling(in, out);
  if (!refused) refused = translate_stop(in, out);
  if (!refused) refused = translate_tools(in, out);
  if (!refused) refused = translate_tool_choice(in, out);
  if (!refused) refused = translate_reasoning(in, p, limit, out);
  if (!refused) refused = translate_user(in, out);
  return refused;
}

}  // namespace

std::variant<std::string, Untranslatable> anthropic_chat_body_from_document(
    const json& in, const UpstreamRequest& r) {
  if (!in.is_object()) return invalid("body", "must be a JSON object");
  if (!r.provider) return invalid("model", "no provider settings");
  json out = {{"model", r.upstream_model}, {"stream", r.stream}};
  Refused refused = check_fields(in);
  if (!refused) refused = translate_messages(in, out);
  if (!refused) refused = translate_settings(in, *r.provider, out);
  if (refused) return std::move(*refused);
  return dump(out);
}

// The conversation (nearly all of a long request) written from the
// client's text; the few other fields from their documents, by the same
// functions as the document's translation.
std::optional<std::variant<std::string, Untranslatable>> anthropic_chat_body_text(
    const RequestBody& in, const UpstreamRequest& r) {
  if (!r.provider) return std::nullopt;
  std::optional<json> fields = in.document_without("messages");
  if (!fields) return std::nullopt;
  const json& rest = *fields;
  // (`messages` is translated: check_fields never refuses it, so its
  // verdict on the rest is the whole document's.)
  if (Refused refused = check_fields(rest)) return std::move(*refused);
  // The settings first, into the text the conversation is written after;
  // their refusal counts only once the conversation is found sound (the
  // document's translation reads the conversation first).
  json out = {{"model", r.upstream_model}, {"stream", r.stream}};
  Refused refused = translate_settings(rest, *r.provider, out);
  std::string settings = refused ? std::string("{}") : dump(out);
  return conversation::body_with_conversation(in, std::move(settings), std::move(refused),
                                              write_anthropic_conversation);
}

namespace {

// ---- answers ------------------------------------------------------------------

using anthropic::Counts;
using anthropic::finish_reason;

using translation::created_of;

struct Message {
  std::string text, thinking;
  json tool_calls = json::array();
};

Message read_content(const json& content) {
  Message m;
  for (const auto& block : content) {
    const std::string type = string_or(block, "type");
    if (type == "text") {
      m.text += string_or(block, "text");
    } else if (type == "thinking") {
      m.thinking += string_or(block, "thinking");
    } else if (type == "tool_use") {
      const json* input = get(block, "input");
      m.tool_calls.push_back(
          {{"id", string_or(block, "id")},
           {"type", "function"},
           {"function",
            {{"name", string_or(block, "name")}, {"arguments", input ? dump(*input) : "{}"}}}});
    }
  }
  return m;
}

std::optional<json> completion_of(const json& a, const UpstreamRequest& r) {
  const json* content = get(a, "content");
  const json* type = get(a, "type");
  if (!content || !content->is_array() || (type && *type != "message")) return std::nullopt;
  const Message m = read_content(*content);
  json message = {{"role", "assistant"}, {"refusal", nullptr}};
  const bool no_text = m.text.empty() && !m.tool_calls.empty();
  message["content"] = no_text ? json(nullptr) : json(m.text);
  if (!m.thinking.empty()) message["reasoning_content"] = m.thinking;
  if (!m.tool_calls.empty()) message["tool_calls"] = m.tool_calls;
  Counts usage;
  if (const json* u = get(a, "usage")) usage.read(*u);
  return json{
      {"id", string_or(a, "id")},
      {"object", "chat.completion"},
      {"created", created_of(r)},
      {"model", string_or(a, "model", std::string(r.upstream_model))},
      {"choices", json::array({{{"index", 0},
                                {"message", std::move(message)},
                                {"logprobs", nullptr},
                                {"finish_reason", finish_reason(string_or(a, "stop_reason"))}}})},
      {"usage", usage.openai()}};
}

// ---- the stream -----------------------------------------------------------------

// Anthropic's ping, as a comment the client's SSE reader skips. Static: the
// upstream's own bytes are never forwarded.
constexpr std::string_view kKeepAlive = ": ping\n\n";

class AnthropicStream final : public UpstreamStream {
 public:
  explicit AnthropicStream(const UpstreamRequest& r)
      : model_(r.upstream_model), created_(created_of(r)), writer_(r.include_usage) {
    set_head();
  }

  void translate(const Frame& ev, Sink& out) override {
    if (finished_) return;  // nothing after done or an error
    if (!ev.has_data) return signal(UpstreamEvent::Kind::kKeepAlive, {}, out);
    // Text, thinking and a tool call's input (most of a stream's events):
    // read by a scan, their text written into the chunk as the upstream
    // escaped it. The rest is parsed.
    std::optional<std::string_view> text;
    const anthropic::EventFacts f = anthropic::read_event(ev.data, &text, &words_);
    if (text && f.type == anthropic::EventType::kContentBlockDelta)
      return on_delta_text(f, *text, out);
    if (f.json && on_facts(f, words_, out)) return;
    if (json_too_deep(ev.data))
      return signal(UpstreamEvent::Kind::kMalformed, "event nested too deeply", out);
    const json e = json::parse(ev.data, nullptr, false);
    const json* type = get(e, "type");
    if (!type || !type->is_string())
      return signal(UpstreamEvent::Kind::kMalformed, "not an Anthropic event (no \"type\")", out);
    dispatch(type->get_ref<const std::string&>(), e, out);
  }

 private:
  void dispatch(const std::string& type, const json& e, Sink& out) {
    if (type == "content_block_delta") return on_block_delta(e, out);
    if (type == "content_block_start") return on_block_start(e, out);
    if (type == "content_block_stop") {
      const json* index = get(e, "index");
      return on_block_stop(index ? integer(*index) : std::nullopt, out);
    }
    if (type == "message_start") return on_message_start(e, out);
    if (type == "message_delta") return on_message_delta(e, out);
    if (type == "message_stop") return on_message_stop(out);
    if (type == "ping") return signal(UpstreamEvent::Kind::kKeepAlive, {}, out);
    if (type == "error") return on_error(e, out);
    // Unknown types are skipped, as Anthropic's versioning policy asks of
    // clients.
  }

  // The events around the text that the scan's facts say whole (the
  // document's reading of the event, when the scan declined it, says the
  // same): true when `f`'s event is answered.
  bool on_facts(const anthropic::EventFacts& f, const anthropic::EventWords& words, Sink& out) {
    using anthropic::EventType;
    switch (f.type) {
      case EventType::kPing:
        signal(UpstreamEvent::Kind::kKeepAlive, {}, out);
        return true;
      case EventType::kContentBlockStart:
        return !f.has_output;  // an empty text block (or one not shown): nothing to send
      case EventType::kContentBlockStop:
        on_block_stop(f.index, out);
        return true;
      case EventType::kMessageDelta:
        f.apply(usage_);
        if (words.stop_reason) finish(*words.stop_reason, out);
        return true;
      case EventType::kMessageStart:
        if (words.message_id) id_ = *words.message_id;
        if (words.message_model) model_ = *words.message_model;
        f.apply(usage_);
        open(out);
        return true;
      case EventType::kMessageStop:
        on_message_stop(out);
        return true;
      default:
        return false;  // error, unknown types
    }
  }

  void on_message_start(const json& e, Sink& out) {
    if (const json* message = get(e, "message")) {
      id_ = string_or(*message, "id", id_);
      model_ = string_or(*message, "model", model_);
      if (const json* u = get(*message, "usage")) usage_.read(*u);
    }
    open(out);
  }

  // The chunks' head as message_start names them, and the role's chunk.
  void open(Sink& out) {
    set_head();
    writer_.begin_choice().append(R"({"role":"assistant","content":""})");
    send(writer_.end_choice(), out);
  }

  void on_block_start(const json& e, Sink& out) {
    const json* block = get(e, "content_block");
    if (!block) return;
    const std::string type = string_or(*block, "type");
    if (type == "text") {
      if (const json* t = get(*block, "text"); has_text(t))
        send_text("content", t->get_ref<const std::string&>(), false, out);
    } else if (type == "tool_use") {
      start_tool_call(e, *block, out);
    }
  }

  void start_tool_call(const json& e, const json& block, Sink& out) {
    const int k = tool_calls_++;
    if (const json* index = get(e, "index"); index && integer(*index))
      tool_index_[*integer(*index)] = k;
    // Anthropic streams the input as input_json_delta after an empty
    // object; a backend that sends it whole here has it in the call.
    const json* input = get(block, "input");
    const bool whole = input && input->is_object() && !input->empty();
    has_arguments_.push_back(whole);
    std::string& delta = writer_.begin_choice();
    delta.append(R"({"tool_calls":[)");
    ChunkWriter::append_tool_call(delta, static_cast<std::size_t>(k), string_or(block, "id"),
                                  string_or(block, "name"), whole ? dump(*input) : "");
    delta.append("]}");
    send(writer_.end_choice(), out);
  }

  void on_block_delta(const json& e, Sink& out) {
    const json* delta = get(e, "delta");
    if (!delta) return;
    const std::string type = string_or(*delta, "type");
    const char* key = type == "text_delta"         ? "text"
                      : type == "thinking_delta"   ? "thinking"
                      : type == "input_json_delta" ? "partial_json"
                                                   : nullptr;
    const json* text = key ? get(*delta, key) : nullptr;
    if (!has_text(text)) return;
    const std::string& value = text->get_ref<const std::string&>();
    if (type == "text_delta") return send_text("content", value, /*escaped=*/false, out);
    if (type == "thinking_delta") return send_text("reasoning_content", value, false, out);
    const json* index = get(e, "index");
    const auto at = index ? integer(*index) : std::nullopt;
    const auto call = at ? tool_index_.find(*at) : tool_index_.end();
    if (call == tool_index_.end()) return;  // a server tool's input: not the client's call
    const auto& piece = text->get_ref<const std::string&>();
    if (piece.find_first_not_of(" \t\r\n") != std::string::npos)
      has_arguments_[static_cast<std::size_t>(call->second)] = true;
    send_arguments(call->second, piece, out);
  }

  // on_block_delta() for a delta whose text the scan found: `text` escaped.
  void on_delta_text(const anthropic::EventFacts& f, std::string_view text, Sink& out) {
    using Delta = anthropic::EventFacts::Delta;
    if (text.empty()) return;
    if (f.delta == Delta::kText) return send_text("content", text, /*escaped=*/true, out);
    if (f.delta == Delta::kThinking) return send_text("reasoning_content", text, true, out);
    const auto call = f.index ? tool_index_.find(*f.index) : tool_index_.end();
    if (call == tool_index_.end()) return;  // a server tool's input: not the client's call
    if (f.has_output) has_arguments_[static_cast<std::size_t>(call->second)] = true;  // not blank
    send_arguments(call->second, text, out, /*escaped=*/true);
  }

  // A tool_use block ended: a call without parameters, whose input came as
  // nothing or as partial_json "", still gets arguments the client can
  // parse ("{}", as Anthropic's whole answer dumps the empty input), before
  // its finish.
  void on_block_stop(std::optional<std::int64_t> index, Sink& out) {
    const auto call = index ? tool_index_.find(*index) : tool_index_.end();
    if (call != tool_index_.end()) close_arguments(call->second, out);
  }

  // Every call still without arguments (a stream that skipped its
  // content_block_stop), before the finish.
  void close_all_arguments(Sink& out) {
    for (std::size_t k = 0; k < has_arguments_.size(); ++k)
      close_arguments(static_cast<int>(k), out);
  }

  void close_arguments(int k, Sink& out) {
    if (has_arguments_[static_cast<std::size_t>(k)]) return;
    has_arguments_[static_cast<std::size_t>(k)] = true;
    send_arguments(k, "{}", out);
  }

  // The next piece of call k's arguments.
  void send_arguments(int k, std::string_view arguments, Sink& out, bool escaped = false) {
    std::string& delta = writer_.begin_choice();
    delta.append(R"({"tool_calls":[{"index":)").append(std::to_string(k));
    delta.append(R"(,"function":{"arguments":)");
    append_json_text(delta, arguments, escaped);
    delta.append("}}]}");
    send(writer_.end_choice(), out);
  }

  // A delta of one text member ("content", "reasoning_content").
  void send_text(std::string_view key, std::string_view text, bool escaped, Sink& out) {
    send(writer_.text_chunk(key, text, escaped), out);
  }

  void on_message_delta(const json& e, Sink& out) {
    if (const json* u = get(e, "usage")) usage_.read(*u);
    const json* delta = get(e, "delta");
    const json* stop = delta ? get(*delta, "stop_reason") : nullptr;
    if (stop && stop->is_string()) finish(stop->get_ref<const std::string&>(), out);
  }

  // The stop reason came: every call's arguments closed, then the finish.
  void finish(const std::string& stop_reason, Sink& out) {
    close_all_arguments(out);
    writer_.begin_choice().append("{}");
    send(writer_.end_choice(finish_reason(stop_reason)), out);
  }

  void on_message_stop(Sink& out) {
    close_all_arguments(out);
    send(writer_.usage_chunk(usage_.openai<nlohmann::ordered_json>().dump()), out);
    signal(UpstreamEvent::Kind::kDone, {}, out);
  }

  void on_error(const json& e, Sink& out) {
    const json* error = get(e, "error");
    const std::string type = error ? string_or(*error, "type", "error") : "error";
    const std::string message = error ? string_or(*error, "message") : "";
    signal(UpstreamEvent::Kind::kError, type + ": " + message, out);
  }

  void set_head() { writer_.set_head(id_, created_, model_); }

  // `chunk`, the writer's text, is the event's data while the sink reads it.
  void send(std::string_view chunk, Sink& out) {
    UpstreamEvent ev;
    ev.kind = UpstreamEvent::Kind::kData;
    ev.data = chunk;
    inspect_chunk(chunk, ev.chunk, prefix_);  // the stream's chunks share their head
    out.on(ev);
  }

  void signal(UpstreamEvent::Kind kind, std::string message, Sink& out) {
    UpstreamEvent ev;
    ev.kind = kind;
    ev.message = std::move(message);
    if (kind == UpstreamEvent::Kind::kKeepAlive) ev.raw = kKeepAlive;
    if (kind == UpstreamEvent::Kind::kDone || kind == UpstreamEvent::Kind::kError) finished_ = true;
    out.on(ev);
  }

  std::string id_;
  std::string model_;  // the request's until message_start names one
  std::int64_t created_;
  ChunkWriter writer_;                      // the chunks' text
  ChunkPrefix prefix_;                      // what inspect_chunk learnt of the chunks written
  std::map<std::int64_t, int> tool_index_;  // content block index -> tool call index
  int tool_calls_ = 0;
  // By tool call index: some of its arguments went out (more than
  // whitespace), or its "{}" did.
  std::vector<bool> has_arguments_;
  Counts usage_;
  anthropic::EventWords words_;  // the event's, read_event()'s answer
  bool finished_ = false;
};

// ---- the protocol ---------------------------------------------------------------

class Anthropic final : public UpstreamProtocol {
 public:
  std::string_view name() const override { return "anthropic"; }

  std::string_view target(const std::string&, bool, std::string&) const override {
    return "/messages";
  }

  std::variant<std::string, Untranslatable> body(RequestBody& client_body,
                                                 const UpstreamRequest& r) const override {
    if (auto text = anthropic_chat_body_text(client_body, r)) return std::move(*text);
    return anthropic_chat_body_from_document(client_body.dom(), r);
  }

  std::vector<std::pair<std::string, std::string>> headers(
      const std::string& api_key, const config::Provider& provider) const override {
    std::vector<std::pair<std::string, std::string>> out;
    if (!api_key.empty()) out.emplace_back("x-api-key", api_key);
    out.emplace_back("anthropic-version", provider.anthropic_version);
    return out;
  }

  std::unique_ptr<UpstreamStream> open_stream(const UpstreamRequest& r) const override {
    return std::make_unique<AnthropicStream>(r);
  }

  std::optional<nlohmann::json> completion(const nlohmann::json& answer,
                                           const UpstreamRequest& r) const override {
    return completion_of(answer, r);
  }

  std::optional<nlohmann::json> error(const nlohmann::json& body, int) const override {
    const json* type = get(body, "type");
    const json* e = get(body, "error");
    if (!type || *type != "error" || !e || !e->is_object()) return std::nullopt;
    return json{{"error",
                 {{"message", string_or(*e, "message")},
                  {"type", string_or(*e, "type", "error")},
                  {"param", nullptr},
                  {"code", nullptr}}}};
  }
};

}  // namespace

const UpstreamProtocol& anthropic_protocol() {
  static const Anthropic protocol;
  return protocol;
}

}  // namespace llmgate::providers
