// Google Gemini generateContent (streamGenerateContent?alt=sse when
// streaming) as an upstream protocol: the client's OpenAI chat document
// becomes a GenerateContentRequest, and each GenerateContentResponse that
// comes back becomes the chat.completion.chunk JSON that the relay and the
// client APIs read. Pure translation: no sockets, and nothing throws on what
// a client or the upstream sends (parses without exceptions, types checked
// before every get, dumps replace invalid UTF-8).
//
// The request's top-level fields (null is "not set" and always passes):
//
//   field                           | Gemini
//   --------------------------------+----------------------------------------------
//   messages                        | contents (user / model) + systemInstruction
//   temperature, top_p, seed,       | generationConfig.temperature, topP, seed,
//   presence_penalty,               |   presencePenalty, frequencyPenalty
//   frequency_penalty               |
//   max_completion_tokens,          | generationConfig.maxOutputTokens (the first
//   max_tokens                      |   one when both are sent)
//   stop                            | generationConfig.stopSequences
//   response_format                 | responseMimeType (+ responseJsonSchema)
//   tools, tool_choice              | tools[].functionDeclarations, toolConfig
//   reasoning_effort,               | thinkingConfig: providers[].thinking_budgets
//   reasoning.effort                |   ("none": budget 0)
//   model, stream                   | ignored: the request path says them
//   stream_options                  | ignored: Gemini always reports usage
//   store, metadata, service_tier,  | ignored: bookkeeping, not the answer
//   user, safety_identifier,        |
//   prompt_cache_key                |
//   parallel_tool_calls             | ignored: Gemini has no switch for it
//   n, logprobs, logit_bias,        | their defaults (1, false, {}, ["text"])
//   modalities                      |   pass; anything else is refused
//   top_logprobs, audio,            | refused: no equivalent
//   prediction, functions,          |
//   function_call,                  |
//   web_search_options              |
//   anything else                   | refused, named: never dropped unread
#include <algorithm>
#include <array>
#include <cctype>
#include <charconv>
#include <cmath>
#include <ctime>
#include <map>
#include <string_view>
#include <vector>

#include "providers/chunk_writer.h"
#include "providers/conversation_writer.h"
#include "providers/gemini_conversation.h"
#include "providers/gemini_response.h"
#include "providers/json_depth.h"
#include "providers/json_member.h"
#include "providers/translation.h"
#include "providers/upstream_protocol.h"

namespace llmgate::providers {
namespace {

using nlohmann::json;
// Why a request cannot be sent, or nothing when it can.
using Refusal = std::optional<Untranslatable>;

Untranslatable unsupported(const std::string& param) {
  return {param + " is not supported by the Gemini protocol", param};
}

using translation::dump;
using translation::invalid;
using translation::parse_embedded;
using translation::string_member;

// ---------------------------------------------------------------------------
// The request.

struct GeminiRequest {
  json contents = json::array();
  json system = json::array();                    // systemInstruction.parts
  json config = json::object();                   // generationConfig
  json tools, tool_config;                        // null when not asked for
  std::map<std::string, std::string> call_names;  // tool_call id -> its function

  // Consecutive contents of one role become one: tool results and the user's
  // next words are both "user" turns.
  void add(const char* role, json parts) {
    if (parts.empty()) return;  // an empty turn is refused upstream and says nothing
    if (!contents.empty() && contents.back()["role"] == role) {
      for (auto& p : parts) contents.back()["parts"].push_back(std::move(p));
      return;
    }
    json content = json::object();
    content["role"] = role;
    content["parts"] = std::move(parts);
    contents.push_back(std::move(content));
  }
};

// Gemini refuses a part with empty text; it carries nothing anyway.
void add_text(json& parts, const std::string& text) {
  if (!text.empty()) parts.push_back({{"text", text}});
}

// A remote image's type from its extension; Gemini needs one, and JPEG is
// what most unnamed images are.
}  // namespace

std::string gemini_image_type(std::string_view url) {
  url = url.substr(0, url.find_first_of("?#"));
  const auto slash = url.rfind('/');
  const auto dot = url.rfind('.');
  if (dot == std::string_view::npos || (slash != std::string_view::npos && dot < slash))
    return "image/jpeg";
  std::string ext(url.substr(dot + 1));
  for (char& c : ext) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  static const std::map<std::string, std::string, std::less<>> kTypes = {
      {"png", "image/png"},   {"gif", "image/gif"},  {"webp", "image/webp"}, {"heic", "image/heic"},
      {"heif", "image/heif"}, {"jpg", "image/jpeg"}, {"jpeg", "image/jpeg"}};
  auto it = kTypes.find(ext);
  return it == kTypes.end() ? "image/jpeg" : it->second;
}

namespace {

// "data:image/png;base64,AAAA" -> inlineData.
Refusal data_url_part(const std::string& url, const std::string& param, json& parts) {
  const auto comma = url.find(',');
  const std::string_view head =
      std::string_view(url).substr(5, comma == std::string::npos ? 0 : comma - 5);
  const auto semi = head.find(';');
  if (comma == std::string::npos || !head.ends_with(";base64") || semi == 0)
    return invalid(param, "needs a base64 data: URL with a media type for the Gemini protocol");
  parts.push_back(
      {{"inlineData",
        {{"mimeType", std::string(head.substr(0, semi))}, {"data", url.substr(comma + 1)}}}});
  return std::nullopt;
}

Refusal image_part(const json& part, const std::string& param, json& parts) {
  const json* image = member(part, "image_url");
  const std::string* url = image ? string_member(*image, "url") : nullptr;
  if (!url) return invalid(param, "needs image_url.url");
  if (url->starts_with("data:")) return data_url_part(*url, param, parts);
  if (url->starts_with("https://") || url->starts_with("http://")) {
    parts.push_back({{"fileData", {{"mimeType", gemini_image_type(*url)}, {"fileUri", *url}}}});
    return std::nullopt;
  }
  return Untranslatable{
      param + ": only data: and http(s) image URLs are supported by the Gemini protocol", param};
}

Refusal audio_part(const json& part, const std::string& param, json& parts) {
  const json* audio = member(part, "input_audio");
  const std::string* data = audio ? string_member(*audio, "data") : nullptr;
  const std::string* format = audio ? string_member(*audio, "format") : nullptr;
  if (!data || !format) return invalid(param, "needs input_audio.data and input_audio.format");
  if (*format != "wav" && *format != "mp3") return unsupported(param + ".input_audio.format");
  parts.push_back({{"inlineData", {{"mimeType", "audio/" + *format}, {"data", *data}}}});
  return std::nullopt;
}

// One element of an array `content`; images and audio only where OpenAI
// allows them (user messages).
Refusal content_part(const json& part, const std::string& param, bool media, json& parts) {
  const std::string* type = string_member(part, "type");
  if (type && *type == "text") {
    const std::string* text = string_member(part, "text");
    if (!text) return invalid(param, "needs a text string");
    add_text(parts, *text);
    return std::nullopt;
  }
  if (media && type && *type == "image_url") return image_part(part, param, parts);
  if (media && type && *type == "input_audio") return audio_part(part, param, parts);
  return Untranslatable{param + " (" + (type ? *type : std::string("untyped")) +
                            ") is not supported by the Gemini protocol",
                        param};
}

Refusal content_parts(const json& m, const std::string& param, bool media, json& parts) {
  const json* content = member(m, "content");
  if (!content) return std::nullopt;
  if (content->is_string()) {
    add_text(parts, content->get_ref<const std::string&>());
    return std::nullopt;
  }
  if (!content->is_array()) return invalid(param + ".content", "must be a string or an array");
  for (std::size_t j = 0; j < content->size(); ++j) {
    const std::string p = param + ".content[" + std::to_string(j) + "]";
    if (auto r = content_part((*content)[j], p, media, parts)) return r;
  }
  return std::nullopt;
}

// Gemini takes arguments as an object, OpenAI sends them as JSON text.
Refusal call_arguments(const json& fn, const std::string& param, json& args) {
  const json* raw = member(fn, "arguments");
  if (raw && raw->is_object()) {
    args = *raw;
    return std::nullopt;
  }
  const std::string* text = raw && raw->is_string() ? &raw->get_ref<const std::string&>() : nullptr;
  // None written (some clients send ""): a call without parameters.
  if (!raw || (text && text->find_first_not_of(" \t\r\n") == std::string::npos)) {
    args = json::object();
    return std::nullopt;
  }
  if (text) args = parse_embedded(*text);
  if (!args.is_object())
    return invalid(param + ".function.arguments", "must be a JSON object for the Gemini protocol");
  return std::nullopt;
}

Refusal call_parts(const json& m, const std::string& param, GeminiRequest& out, json& parts) {
  const json* calls = member(m, "tool_calls");
  if (!calls) return std::nullopt;
  if (!calls->is_array()) return invalid(param + ".tool_calls", "must be an array");
  for (std::size_t j = 0; j < calls->size(); ++j) {
    const std::string p = param + ".tool_calls[" + std::to_string(j) + "]";
    const json& call = (*calls)[j];
    const std::string* type = string_member(call, "type");
    const json* fn = member(call, "function");
    if ((type && *type != "function") || !fn) return unsupported(p);
    const std::string* name = string_member(*fn, "name");
    if (!name) return invalid(p, "needs function.name");
    json args;
    if (auto r = call_arguments(*fn, p, args)) return r;
    parts.push_back({{"functionCall", {{"name", *name}, {"args", std::move(args)}}}});
    // Gemini names the function a result answers, OpenAI the call's id.
    if (const std::string* id = string_member(call, "id")) out.call_names[*id] = *name;
  }
  return std::nullopt;
}

// A tool message's text: a string or text parts (joined: one result).
Refusal tool_text(const json& m, const std::string& param, std::string& text) {
  json parts = json::array();
  if (auto r = content_parts(m, param, false, parts)) return r;
  for (const auto& p : parts) text += p["text"].get_ref<const std::string&>();
  return std::nullopt;
}

Refusal tool_result_part(const json& m, const std::string& param, GeminiRequest& out, json& parts) {
  const std::string* id = string_member(m, "tool_call_id");
  const auto name = id ? out.call_names.find(*id) : out.call_names.end();
  if (name == out.call_names.end()) {
    return Untranslatable{
        param +
            ".tool_call_id names no tool call of an earlier assistant message (the Gemini "
            "protocol answers a function by name)",
        param + ".tool_call_id"};
  }
  std::string text;
  if (auto r = tool_text(m, param, text)) return r;
  // Gemini wants an object: a result that is one goes as it is.
  json response = parse_embedded(text);
  if (!response.is_object()) response = {{"content", text}};
  parts.push_back(
      {{"functionResponse", {{"name", name->second}, {"response", std::move(response)}}}});
  return std::nullopt;
}

Refusal add_message(const json& m, std::size_t i, GeminiRequest& out) {
  const std::string param = "messages[" + std::to_string(i) + "]";
  const std::string* role = string_member(m, "role");
  if (!role) return invalid(param + ".role", "must be a string");
  // Gemini has one system instruction: every system message joins it.
  if (*role == "system" || *role == "developer") return content_parts(m, param, false, out.system);
  json parts = json::array();
  Refusal r;
  const char* gemini_role = "user";
  if (*role == "user") {
    r = content_parts(m, param, true, parts);
  } else if (*role == "assistant") {
    gemini_role = "model";
    r = content_parts(m, param, false, parts);
    if (!r) r = call_parts(m, param, out, parts);
  } else if (*role == "tool") {
    r = tool_result_part(m, param, out, parts);
  } else {
    return unsupported(param + ".role");
  }
  if (!r) out.add(gemini_role, std::move(parts));
  return r;
}

Refusal add_messages(const json& body, GeminiRequest& out) {
  const json* messages = member(body, "messages");
  if (!messages || !messages->is_array()) return invalid("messages", "must be an array");
  for (std::size_t i = 0; i < messages->size(); ++i) {
    if (auto r = add_message((*messages)[i], i, out)) return r;
  }
  if (out.contents.empty()) {
    return Untranslatable{
        "messages needs a user or assistant message with content for the Gemini protocol",
        "messages"};
  }
  return std::nullopt;
}

// --- top-level fields -------------------------------------------------------

Refusal number_to(const json& v, const char* param, const char* key, GeminiRequest& out) {
  if (!v.is_number()) return invalid(param, "must be a number");
  out.config[key] = v;
  return std::nullopt;
}

Refusal integer_to(const json& v, const char* param, const char* key, GeminiRequest& out) {
  if (!v.is_number_integer()) return invalid(param, "must be an integer");
  out.config[key] = v;
  return std::nullopt;
}

Refusal stop(const json& v, GeminiRequest& out) {
  std::optional<json> seqs = translation::stop_sequences(v);
  if (!seqs) return invalid("stop", "must be a string or an array of strings");
  if (!seqs->empty()) out.config["stopSequences"] = std::move(*seqs);
  return std::nullopt;
}

Refusal response_format(const json& v, GeminiRequest& out) {
  const std::string* type = string_member(v, "type");
  if (!type) return invalid("response_format", "needs a type");
  if (*type == "text") return std::nullopt;
  if (*type != "json_object" && *type != "json_schema") return unsupported("response_format.type");
  out.config["responseMimeType"] = "application/json";
  const json* spec = *type == "json_schema" ? member(v, "json_schema") : nullptr;
  if (const json* schema = spec ? member(*spec, "schema") : nullptr)
    out.config["responseJsonSchema"] = *schema;
  return std::nullopt;
}

Refusal tools(const json& v, GeminiRequest& out) {
  if (!v.is_array()) return invalid("tools", "must be an array");
  json decls = json::array();
  for (std::size_t i = 0; i < v.size(); ++i) {
    const std::string param = "tools[" + std::to_string(i) + "]";
    const std::string* type = string_member(v[i], "type");
    const json* fn = member(v[i], "function");
    // Built-in tools (web search, code interpreter, custom grammars) have no
    // Gemini function equivalent.
    if (!type || *type != "function" || !fn) return unsupported(param);
    const std::string* name = string_member(*fn, "name");
    if (!name) return invalid(param, "needs function.name");
    json decl = {{"name", *name}};
    if (const std::string* d = string_member(*fn, "description")) decl["description"] = *d;
    if (const json* p = member(*fn, "parameters")) decl["parameters"] = *p;
    decls.push_back(std::move(decl));
  }
  if (decls.empty()) return std::nullopt;
  json tool = json::object();
  tool["functionDeclarations"] = std::move(decls);
  out.tools = json::array();
  out.tools.push_back(std::move(tool));
  return std::nullopt;
}

Refusal tool_choice(const json& v, GeminiRequest& out) {
  json config = json::object();
  const json* fn = member(v, "function");
  const std::string* fn_name = fn ? string_member(*fn, "name") : nullptr;
  const std::string* type = string_member(v, "type");
  if (v == "auto") {
    config["mode"] = "AUTO";
  } else if (v == "required") {
    config["mode"] = "ANY";
  } else if (v == "none") {
    config["mode"] = "NONE";
  } else if (type && *type == "function" && fn_name) {
    config["mode"] = "ANY";
    config["allowedFunctionNames"] = json::array({*fn_name});
  } else {
    return unsupported("tool_choice");
  }
  out.tool_config = json::object();
  out.tool_config["functionCallingConfig"] = std::move(config);
  return std::nullopt;
}

// Fields whose default value says nothing; any other value asks for what
// Gemini cannot give.
bool is_default(std::string_view key, const json& v) {
  if (key == "n") return v == 1;
  if (key == "logprobs") return v == false;
  if (key == "logit_bias") return v.is_object() && v.empty();
  if (key == "modalities") return v == json::array({"text"});
  return false;
}

using FieldFn = Refusal (*)(const json& value, const json& body, GeminiRequest& out);
struct Field {
  std::string_view key;
  FieldFn translate;  // nullptr: ignored on purpose (see the table on top)
};

const Field kFields[] = {
    {"messages", nullptr},  // add_messages
    {"reasoning_effort", nullptr},
    {"reasoning", nullptr},  // thinking()
    {"model", nullptr},
    {"stream", nullptr},
    {"stream_options", nullptr},
    {"store", nullptr},
    {"metadata", nullptr},
    {"service_tier", nullptr},
    {"user", nullptr},
    {"safety_identifier", nullptr},
    {"prompt_cache_key", nullptr},
    {"parallel_tool_calls", nullptr},
    {"temperature", [](const json& v, const json&,
                       GeminiRequest& o) { return number_to(v, "temperature", "temperature", o); }},
    {"top_p",
     [](const json& v, const json&, GeminiRequest& o) { return number_to(v, "top_p", "topP", o); }},
    {"presence_penalty",
     [](const json& v, const json&, GeminiRequest& o) {
       return number_to(v, "presence_penalty", "presencePenalty", o);
     }},
    {"frequency_penalty",
     [](const json& v, const json&, GeminiRequest& o) {
       return number_to(v, "frequency_penalty", "frequencyPenalty", o);
     }},
    {"seed",
     [](const json& v, const json&, GeminiRequest& o) { return integer_to(v, "seed", "seed", o); }},
    {"max_completion_tokens",
     [](const json& v, const json&, GeminiRequest& o) {
       return integer_to(v, "max_completion_tokens", "maxOutputTokens", o);
     }},
    {"max_tokens",
     [](const json& v, const json& body, GeminiRequest& o) -> Refusal {
       if (member(body, "max_completion_tokens")) return std::nullopt;  // it wins
       return integer_to(v, "max_tokens", "maxOutputTokens", o);
     }},
    {"stop", [](const json& v, const json&, GeminiRequest& o) { return stop(v, o); }},
    {"response_format",
     [](const json& v, const json&, GeminiRequest& o) { return response_format(v, o); }},
    {"tools", [](const json& v, const json&, GeminiRequest& o) { return tools(v, o); }},
    {"tool_choice", [](const json& v, const json&, GeminiRequest& o) { return tool_choice(v, o); }},
};

Refusal add_field(std::string_view key, const json& v, const json& body, GeminiRequest& out) {
  if (v.is_null()) return std::nullopt;
  const auto field = std::find_if(std::begin(kFields), std::end(kFields),
                                  [&](const Field& f) { return f.key == key; });
  if (field != std::end(kFields))
    return field->translate ? field->translate(v, body, out) : std::nullopt;
  if (is_default(key, v)) return std::nullopt;
  return unsupported(field_param(key));
}

// reasoning_effort (or the Responses-style reasoning.effort) as a budget.
Refusal thinking(const json& body, const config::Provider* provider, GeminiRequest& out) {
  const json* effort = member(body, "reasoning_effort");
  if (const json* r = member(body, "reasoning"); !effort && r) {
    if (!r->is_object()) return invalid("reasoning", "must be an object");
    effort = member(*r, "effort");
  }
  if (!effort) return std::nullopt;
  if (!effort->is_string()) return invalid("reasoning_effort", "must be a string");
  const std::string& e = effort->get_ref<const std::string&>();
  if (e == "none") {
    out.config["thinkingConfig"] = {{"thinkingBudget", 0}};
    return std::nullopt;
  }
  static const auto kDefaults = config::kDefaultThinkingBudgets();
  const auto& budgets = provider ? provider->thinking_budgets : kDefaults;
  const auto it = budgets.find(e);
  if (it == budgets.end()) {
    return Untranslatable{"reasoning_effort \"" + e +
                              "\" has no thinking budget for the Gemini protocol "
                              "(providers[].thinking_budgets)",
                          "reasoning_effort"};
  }
  out.config["thinkingConfig"] = {{"thinkingBudget", it->second}, {"includeThoughts", true}};
  return std::nullopt;
}

// The request but its conversation.
json settings_of(GeminiRequest& in) {
  json req = json::object();
  if (!in.config.empty()) req["generationConfig"] = std::move(in.config);
  if (!in.tools.is_null()) req["tools"] = std::move(in.tools);
  if (!in.tool_config.is_null()) req["toolConfig"] = std::move(in.tool_config);
  return req;
}

std::string request_text(GeminiRequest& in) {
  json req = settings_of(in);
  req["contents"] = std::move(in.contents);
  if (!in.system.empty()) req["systemInstruction"] = {{"parts", std::move(in.system)}};
  return dump(req);
}

}  // namespace

std::variant<std::string, Untranslatable> gemini_chat_body_from_document(const json& client_body,
                                                                         const UpstreamRequest& r) {
  if (!client_body.is_object()) return Untranslatable{"the request must be a JSON object", ""};
  GeminiRequest out;
  for (const auto& [key, value] : client_body.items()) {
    if (auto refusal = add_field(key, value, client_body, out)) return std::move(*refusal);
  }
  if (auto refusal = add_messages(client_body, out)) return std::move(*refusal);
  if (auto refusal = thinking(client_body, r.provider, out)) return std::move(*refusal);
  return request_text(out);
}

// The conversation written from the client's text; the few other fields
// from their documents, by the same functions as the document's
// translation.
std::optional<std::variant<std::string, Untranslatable>> gemini_chat_body_text(
    const RequestBody& in, const UpstreamRequest& r) {
  std::optional<json> fields = in.document_without("messages");
  if (!fields) return std::nullopt;
  const json& rest = *fields;
  // (add_field passes `messages` over: the rest's first refusal is the
  // whole document's.)
  GeminiRequest out;
  for (const auto& [key, value] : rest.items()) {
    if (auto refusal = add_field(key, value, rest, out)) return std::move(*refusal);
  }
  // The reasoning's refusal counts once the conversation is found sound
  // (the document's translation reads the conversation first).
  Refusal refused = thinking(rest, r.provider, out);
  std::string settings = refused ? std::string("{}") : dump(settings_of(out));
  return conversation::body_with_conversation(in, std::move(settings), std::move(refused),
                                              write_gemini_conversation);
}

namespace {

// ---------------------------------------------------------------------------
// The response.

// One function call, as an OpenAI tool call.
struct Call {
  std::size_t index = 0;  // its position in the stream's calls
  std::string id, name, arguments;
};

// What one candidate's parts say, as an OpenAI delta or message.
struct Reply {
  std::string content, reasoning;
  std::vector<Call> tool_calls;
};

void add_call(const json& call, const std::string& id, std::size_t& calls, Reply& out) {
  const std::string* name = string_member(call, "name");
  if (!name) return;  // a call without a function cannot be answered
  const std::string* own_id = string_member(call, "id");
  const json* args = member(call, "args");
  const std::size_t k = calls++;
  // Gemini's calls often come without an id (Vertex AI never sends one),
  // and the client needs one to answer with, unique in the conversation.
  const std::string call_id =
      own_id && !own_id->empty() ? *own_id : "call_" + std::to_string(k) + "_" + id;
  out.tool_calls.push_back({k, call_id, *name, args ? dump(*args) : "{}"});
}

// `calls` numbers the function calls across a stream; `id` names the
// calls that came without an id of their own.
void read_parts(const json& candidate, const std::string& id, std::size_t& calls, Reply& out) {
  const json* content = member(candidate, "content");
  const json* parts = content ? member(*content, "parts") : nullptr;
  if (!parts || !parts->is_array()) return;
  for (const json& part : *parts) {
    // Other parts (images, executable code) answer what the request never
    // asks for: no response modalities, no built-in tools.
    if (const std::string* text = string_member(part, "text")) {
      const json* thought = member(part, "thought");
      (thought && *thought == true ? out.reasoning : out.content) += *text;
    } else if (const json* call = member(part, "functionCall"); call && call->is_object()) {
      add_call(*call, id, calls, out);
    }
  }
}

// OpenAI's finish_reason for a candidate's finishReason ("" when it has
// none); "" while it has not finished.
std::string_view finish_reason(std::string_view r, bool called) {
  if (r.empty() || r == "FINISH_REASON_UNSPECIFIED") return {};
  if (r == "STOP") return called ? "tool_calls" : "stop";
  if (r == "MAX_TOKENS") return "length";
  static constexpr std::string_view kFiltered[] = {
      "SAFETY", "RECITATION", "BLOCKLIST", "PROHIBITED_CONTENT", "SPII", "IMAGE_SAFETY"};
  if (std::find(std::begin(kFiltered), std::end(kFiltered), r) != std::end(kFiltered))
    return "content_filter";
  return "stop";  // OTHER, LANGUAGE, MALFORMED_FUNCTION_CALL, ones added later
}

std::string_view finish_reason(const json& candidate, bool called) {
  const std::string* r = string_member(candidate, "finishReason");
  return finish_reason(r ? std::string_view(*r) : std::string_view(), called);
}

const json* first_candidate(const json& response) {
  const json* c = member(response, "candidates");
  return c && c->is_array() && !c->empty() && c->front().is_object() ? &c->front() : nullptr;
}

// The prompt itself was refused: a 200 with feedback and no candidate.
bool prompt_blocked(const json& response) {
  const json* feedback = member(response, "promptFeedback");
  const json* c = member(response, "candidates");
  return feedback && member(*feedback, "blockReason") && (!c || !c->is_array() || c->empty());
}

bool is_response(const json& j) {
  if (!j.is_object() || member(j, "error")) return false;
  if (const json* c = member(j, "candidates")) return c->is_array();
  const json* feedback = member(j, "promptFeedback");
  const json* usage = member(j, "usageMetadata");
  return (feedback && feedback->is_object()) || (usage && usage->is_object());
}

constexpr std::int64_t kMaxCount = 1'000'000'000'000;  // as usage_of() reads counts

// A token count when it is a plausible one: sums of them cannot overflow.
std::optional<std::int64_t> count(const json& usage, std::string_view key) {
  const json* v = member(usage, key);
  if (v && v->is_number_unsigned() && v->get<std::uint64_t>() <= std::uint64_t{kMaxCount})
    return static_cast<std::int64_t>(v->get<std::uint64_t>());
  if (v && v->is_number_integer() && v->get<std::int64_t>() >= 0 &&
      v->get<std::int64_t>() <= kMaxCount)
    return v->get<std::int64_t>();
  return std::nullopt;
}

gemini::Usage usage_of(const json& meta) {
  return {count(meta, "promptTokenCount"), count(meta, "candidatesTokenCount"),
          count(meta, "thoughtsTokenCount"), count(meta, "cachedContentTokenCount")};
}

// usageMetadata as OpenAI usage: thoughts are output tokens (billed so), and
// OpenAI counts them inside completion_tokens. An ordered_json has OpenAI's
// order of the members (a chunk's text).
template <class Json = json>
Json openai_usage(const gemini::Usage& meta) {
  const std::int64_t prompt = meta.prompt.value_or(0);
  const std::int64_t completion = meta.candidates.value_or(0) + meta.thoughts.value_or(0);
  Json u = {{"prompt_tokens", prompt},
            {"completion_tokens", completion},
            {"total_tokens", prompt + completion}};
  if (meta.cached) u["prompt_tokens_details"] = {{"cached_tokens", *meta.cached}};
  if (meta.thoughts) u["completion_tokens_details"] = {{"reasoning_tokens", *meta.thoughts}};
  return u;
}

std::string response_id(const json& response, std::int64_t created) {
  const std::string* id = string_member(response, "responseId");
  return id && !id->empty() ? *id : "chatcmpl-gemini-" + std::to_string(created);
}

std::string response_model(const json& response, std::string_view fallback) {
  const std::string* model = string_member(response, "modelVersion");
  return model && !model->empty() ? *model : std::string(fallback);
}

using translation::created_of;

// "<status>: <message>" of a Google error object (either may be missing).
std::string error_text(const json& error) {
  const std::string* status = string_member(error, "status");
  const std::string* message = string_member(error, "message");
  if (status && message) return *status + ": " + *message;
  if (status || message) return status ? *status : *message;
  return error.is_object() ? dump(error) : "upstream error: " + dump(error);
}

// One attempt's stream: each GenerateContentResponse becomes at most one
// chunk; usage is held until the body ends, as Gemini repeats it cumulatively.
class GeminiStream final : public UpstreamStream {
 public:
  explicit GeminiStream(const UpstreamRequest& r)
      : created_(created_of(r)), upstream_model_(r.upstream_model), writer_(r.include_usage) {}

  void translate(const Frame& ev, Sink& out) override {
    if (over_) return;
    if (!ev.has_data) return keep_alive(out);
    // Once the first response has fixed the chunks' head, a usual one (most
    // of a stream's) is read by a scan, its text kept as Google escaped it.
    if (!id_.empty() && gemini::read_usual(ev.data, usual_)) return on_usual(out);
    const json j = ev.data.find('\0') == std::string_view::npos && !json_too_deep(ev.data)
                       ? json::parse(ev.data, nullptr, /*allow_exceptions=*/false)
                       : json(nullptr);
    if (const json* error = member(j, "error")) return in_band_error(*error, out);
    if (!is_response(j)) return malformed(out);
    on_response(j, out);
  }

  void end(Sink& out) override {
    // No finish seen: the body was cut (Gemini has no end marker), and
    // the relay must see it as such.
    if (over_ || !finished_) return;
    if (usage_)
      emit(writer_.usage_chunk(openai_usage<nlohmann::ordered_json>(*usage_).dump()), out);
    over_ = true;
    UpstreamEvent done;
    done.kind = UpstreamEvent::Kind::kDone;
    done.chunk.kind = ChatChunk::Kind::kDone;
    out.on(done);
  }

 private:
  void keep_alive(Sink& out) {
    // Google's own comment bytes are never forwarded: a static one instead.
    static constexpr std::string_view kKeepAlive = ": keep-alive\n\n";
    UpstreamEvent e;
    e.kind = UpstreamEvent::Kind::kKeepAlive;
    e.raw = kKeepAlive;
    out.on(e);
  }

  void in_band_error(const json& error, Sink& out) {
    over_ = true;
    UpstreamEvent e;
    e.kind = UpstreamEvent::Kind::kError;
    e.chunk.kind = ChatChunk::Kind::kError;
    e.message = error_text(error);
    out.on(e);
  }

  void malformed(Sink& out) {
    UpstreamEvent e;
    e.kind = UpstreamEvent::Kind::kMalformed;
    e.message = "upstream sent an event that is not a Gemini GenerateContentResponse";
    e.chunk.error_message = e.message;
    out.on(e);
  }

  void on_response(const json& r, Sink& out) {
    if (id_.empty()) {  // fixed by the first response: every chunk says the same
      id_ = response_id(r, created_);
      model_ = response_model(r, upstream_model_);
      writer_.set_head(id_, created_, model_);
    }
    if (const json* u = member(r, "usageMetadata"); u && u->is_object()) usage_ = usage_of(*u);
    const bool blocked = prompt_blocked(r);
    const bool opening = !started_;
    started_ = true;
    Reply reply;
    std::string_view finish;
    if (blocked) {
      finish = "content_filter";
    } else if (const json* c = first_candidate(r)) {
      read_parts(*c, id_, calls_, reply);
      finish = finish_reason(*c, calls_ > 0);
    }
    answer({reply.content, reply.reasoning, false}, reply.tool_calls, finish, opening, blocked,
           out);
  }

  // A usual response: after the first, never blocked, no function call.
  void on_usual(Sink& out) {
    if (usual_.usage) usage_ = usual_.usage;
    answer({usual_.content, usual_.reasoning, true}, {},
           finish_reason(usual_.finish_reason, calls_ > 0), false, false, out);
  }

  // A response's text: decoded (a document's strings, valid UTF-8), or
  // escaped as the upstream wrote it (the scan validated it).
  struct Text {
    std::string_view content, reasoning;
    bool escaped = false;
  };

  // The chunk a response makes, if it says anything; `finish` "" if none.
  void answer(const Text& text, const std::vector<Call>& calls, std::string_view finish,
              bool opening, bool blocked, Sink& out) {
    if (finished_) finish = {};  // one finish_reason per stream
    const bool says_nothing = text.content.empty() && text.reasoning.empty() && calls.empty();
    if (!opening && says_nothing && finish.empty()) return;  // usage alone: it goes out at end()
    finished_ = finished_ || !finish.empty();
    write_delta(writer_.begin_choice(), text, calls, opening, blocked);
    emit(writer_.end_choice(finish), out);
  }

  // The delta's members in OpenAI's order (role, content, then the rest).
  static void write_delta(std::string& out, const Text& text, const std::vector<Call>& calls,
                          bool opening, bool blocked) {
    char separator = '{';
    auto key = [&](std::string_view name) {
      out.append(1, separator).append(1, '"').append(name).append("\":");
      separator = ',';
    };
    if (opening) {
      key("role");
      out.append("\"assistant\"");
    }
    // As OpenAI opens: an answer with no text at all has content "".
    if (!text.content.empty() || (opening && !blocked)) {
      key("content");
      append_json_text(out, text.content, text.escaped);
    }
    if (!text.reasoning.empty()) {
      key("reasoning_content");
      append_json_text(out, text.reasoning, text.escaped);
    }
    if (!calls.empty()) {
      key("tool_calls");
      out += '[';
      for (const Call& call : calls) {
        if (out.back() != '[') out += ',';
        ChunkWriter::append_tool_call(out, call.index, call.id, call.name, call.arguments);
      }
      out += ']';
    }
    if (separator == '{') out += '{';  // nothing in it
    out += '}';
  }

  // The writer's text is the event's data while the sink reads it.
  void emit(std::string_view chunk, Sink& out) {
    UpstreamEvent e;
    e.kind = UpstreamEvent::Kind::kData;
    e.data = chunk;
    inspect_chunk(chunk, e.chunk, prefix_);  // the stream's chunks share their head
    out.on(e);
  }

  const std::int64_t created_;
  const std::string upstream_model_;
  std::string id_, model_;
  std::size_t calls_ = 0;               // function calls so far: their stream index
  bool started_ = false;                // the role went out
  bool finished_ = false;               // a finish_reason went out
  bool over_ = false;                   // kError or kDone went out: nothing more
  std::optional<gemini::Usage> usage_;  // the last usageMetadata
  gemini::UsualResponse usual_;         // read_usual's answer (its strings' room kept)
  ChunkWriter writer_;                  // the chunks' text
  ChunkPrefix prefix_;                  // what inspect_chunk learnt of the chunks written
};

// ---------------------------------------------------------------------------

class Gemini final : public UpstreamProtocol {
 public:
  std::string_view name() const override { return "gemini"; }

  std::string_view target(const std::string& upstream_model, bool stream,
                          std::string& built) const override {
    built.assign("/models/")
        .append(path_segment(upstream_model))
        .append(stream ? ":streamGenerateContent?alt=sse" : ":generateContent");
    return built;
  }

  std::variant<std::string, Untranslatable> body(RequestBody& body,
                                                 const UpstreamRequest& r) const override {
    if (auto text = gemini_chat_body_text(body, r)) return std::move(*text);
    return gemini_chat_body_from_document(body.dom(), r);
  }

  std::vector<std::pair<std::string, std::string>> headers(const std::string& api_key,
                                                           const config::Provider&) const override {
    if (api_key.empty()) return {};
    return {{"x-goog-api-key", api_key}};
  }

  std::unique_ptr<UpstreamStream> open_stream(const UpstreamRequest& r) const override {
    return std::make_unique<GeminiStream>(r);
  }

  std::optional<nlohmann::json> completion(const nlohmann::json& answer,
                                           const UpstreamRequest& r) const override {
    const json* candidate = is_response(answer) ? first_candidate(answer) : nullptr;
    const bool blocked = is_response(answer) && prompt_blocked(answer);
    if (!candidate && !blocked) return std::nullopt;
    const std::int64_t created = created_of(r);
    const std::string id = response_id(answer, created);
    json choice = {{"index", 0}, {"logprobs", nullptr}};
    if (blocked) {
      choice["message"] = {{"role", "assistant"}, {"content", nullptr}, {"refusal", nullptr}};
      choice["finish_reason"] = "content_filter";
    } else {
      std::size_t calls = 0;
      Reply reply;
      read_parts(*candidate, id, calls, reply);
      choice["message"] = message(std::move(reply));
      const std::string_view finish = finish_reason(*candidate, calls > 0);
      choice["finish_reason"] = finish.empty() ? json(nullptr) : json(finish);
    }
    const json* usage = member(answer, "usageMetadata");
    return json{
        {"id", id},
        {"object", "chat.completion"},
        {"created", created},
        {"model", response_model(answer, r.upstream_model)},
        {"choices", json::array({std::move(choice)})},
        {"usage", usage && usage->is_object() ? openai_usage(usage_of(*usage)) : json(nullptr)}};
  }

  std::optional<nlohmann::json> error(const nlohmann::json& body, int status) const override {
    // Without alt=sse Google streams a JSON array, and an error as one in it.
    const json& doc = body.is_array() && body.size() == 1 ? body.front() : body;
    const json* e = member(doc, "error");
    if (!e || !e->is_object()) return std::nullopt;
    const std::string* google_status = string_member(*e, "status");
    const std::string* message = string_member(*e, "message");
    return json{{"error",
                 {{"message", message ? *message : error_text(*e)},
                  {"type", error_type(google_status ? *google_status : "")},
                  {"param", nullptr},
                  {"code", google_status ? *google_status : std::to_string(status)}}}};
  }

  ErrorMeaning error_meaning(const nlohmann::json& body, int status) const override {
    const json& doc = body.is_array() && body.size() == 1 ? body.front() : body;
    const json* e = member(doc, "error");
    ErrorMeaning out;
    if (!e || !e->is_object()) return out;
    const std::string* message = string_member(*e, "message");
    bool key_invalid = message && message->find("API key not valid") != std::string::npos;
    if (const json* details = member(*e, "details"); details && details->is_array()) {
      for (const json& d : *details) {
        if (!d.is_object()) continue;
        const std::string* reason = string_member(d, "reason");
        if (reason && *reason == "API_KEY_INVALID") key_invalid = true;
        // google.rpc.RetryInfo: {"retryDelay": "30s"} (or "0.5s").
        const std::string* type = string_member(d, "@type");
        const std::string* delay = string_member(d, "retryDelay");
        if (type && type->ends_with("RetryInfo") && delay) out.retry_after_s = seconds_of(*delay);
      }
    }
    if (status == 400 && key_invalid) out.judge_as = 401;
    return out;
  }

 private:
  // "30s", "0.5s" (protobuf Duration as JSON), rounded up; nullopt if not one.
  static std::optional<int> seconds_of(std::string_view text) {
    if (text.size() < 2 || text.back() != 's') return std::nullopt;
    text.remove_suffix(1);
    double seconds = 0;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), seconds);
    if (ec != std::errc() || end != text.data() + text.size() || !(seconds >= 0) ||
        seconds > 86400) {
      return std::nullopt;
    }
    return static_cast<int>(std::ceil(seconds));
  }

  // Google's own names are "models/<id>": the path already says "models/".
  // Bytes that would end or escape the path segment are percent-encoded.
  static std::string path_segment(std::string_view model) {
    if (model.starts_with("models/")) model.remove_prefix(7);
    static constexpr char kHex[] = "0123456789ABCDEF";
    std::string out;
    for (const char ch : model) {
      const auto c = static_cast<unsigned char>(ch);
      if (c <= 0x20 || c >= 0x7f || c == '?' || c == '#' || c == '%') {
        out += '%';
        out += kHex[c >> 4];
        out += kHex[c & 15];
      } else {
        out += ch;
      }
    }
    return out;
  }

  static json message(Reply reply) {
    const bool called = !reply.tool_calls.empty();
    // As an OpenAI answer says it (and the assembled stream does): null text
    // beside tool calls, "" when there is nothing at all.
    json msg = {{"role", "assistant"},
                {"content", reply.content.empty() && called ? json(nullptr) : json(reply.content)},
                {"refusal", nullptr}};
    if (!reply.reasoning.empty()) msg["reasoning_content"] = std::move(reply.reasoning);
    if (called) {
      json calls = json::array();
      for (auto& call : reply.tool_calls) {
        calls.push_back(
            {{"id", std::move(call.id)},
             {"type", "function"},
             {"function",
              {{"name", std::move(call.name)}, {"arguments", std::move(call.arguments)}}}});
      }
      msg["tool_calls"] = std::move(calls);
    }
    return msg;
  }

  static std::string error_type(std::string_view status) {
    if (status == "INVALID_ARGUMENT" || status == "FAILED_PRECONDITION" || status == "OUT_OF_RANGE")
      return "invalid_request_error";
    if (status == "UNAUTHENTICATED") return "authentication_error";
    if (status == "PERMISSION_DENIED") return "permission_error";
    if (status == "NOT_FOUND") return "not_found_error";
    if (status == "RESOURCE_EXHAUSTED") return "rate_limit_error";
    return "api_error";
  }
};

}  // namespace

const UpstreamProtocol& gemini_protocol() {
  static const Gemini protocol;
  return protocol;
}

}  // namespace llmgate::providers
