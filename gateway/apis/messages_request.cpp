// Anthropic's Messages request, checked and translated to chat completions.
//
// Every top-level field, decided here once (for deployments other than
// Anthropic's; those get the document as it came):
//
//   field                    | in the chat document
//   -------------------------+---------------------------------------------
//   model, stream            | as they are
//   max_tokens (required)    | max_completion_tokens
//   system                   | a system message (text blocks as parts)
//   messages                 | user turns: text and image blocks as parts,
//                            | tool_result blocks as tool messages before
//                            | them; assistant turns: text as content,
//                            | tool_use as tool_calls; thinking and
//                            | redacted_thinking not carried
//   temperature, top_p,      | as they are (top_k: the extension OpenAI-
//   top_k                    | compatible servers take)
//   stop_sequences           | stop
//   tools (custom)           | function tools (input_schema: parameters)
//   tool_choice              | auto / required / a function / none, and
//                            | disable_parallel_tool_use: parallel_tool_calls
//   thinking                 | enabled: reasoning_effort by budget_tokens
//                            | (< 4096 low, < 16384 medium, else high)
//   metadata.user_id         | user
//   service_tier             | not carried (Anthropic's capacity choice)
//   anything else            | untranslated: Anthropic deployments only
//
// cache_control marks are not carried (caching hints: no answer changes).
//
// The translation is written as text from the client's indexed body
// (RequestBody): strings are copied as the client escaped them, values
// carried as they are keep their text, and no document is built or
// serialised -- a coding agent's 34 KB conversation cost ~8.4 million
// instructions as parse, DOM translation and dump, and is one scan and one
// copy now. tests/fuzz/messages_reference.cpp keeps the DOM translation
// this one is held to.
#include "gateway/apis/messages_request.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <utility>

#include "providers/request_body.h"

namespace llmgate::gateway {
namespace {

using providers::RequestBody;
using Member = RequestBody::Member;
using Type = RequestBody::Type;

ApiError invalid(std::string message) { return invalid_request(std::move(message)); }

// The members of one object the translation reads (request_body.h).
using Fields = providers::ObjectFields;

// A top-level member's key, decoded even when longer than the index keeps.
std::string key_of(const RequestBody& in, const Member& m) {
  std::string_view k = in.key(m);
  if (!k.empty() || m.key_end - m.begin == 2) return std::string(k);
  Member quoted;
  quoted.value = m.begin;
  quoted.end = m.key_end;
  quoted.v.type = Type::kString;
  quoted.v.escaped = true;
  return in.string_of(quoted);
}

// The chat document being written (when `write`), and the first thing it
// could not say.
struct Out {
  bool write = true;
  std::string chat = "{";
  std::optional<ChatRequest::Untranslated> untranslated;
  bool unsigned_thinking = false;     // a thinking block without a signature
  std::string_view reasoning_effort;  // what `thinking` asks for, in chat's words

  // Starts the member `key` (its value follows).
  std::string& member(std::string_view key) {
    if (chat.size() > 1) chat += ',';
    return chat.append(1, '"').append(key).append("\":");
  }

  void refuse(std::string param, std::string_view what) {
    if (!untranslated) untranslated = messages_untranslated(std::move(param), what);
  }
};

// A JSON string from text already escaped.
std::string& quoted(std::string& out, std::string_view escaped) {
  return out.append(1, '"').append(escaped).append(1, '"');
}

// ---- checks Anthropic makes ----------------------------------------------------

// Anthropic's checks, in its order: the top level, then each message as
// the translation reads it (check_message, check_block), then the system
// prompt. The first that fails is the answer.
std::optional<ApiError> check_top(const RequestBody& in) {
  const Member* model = in.present("model");
  if (!model) return invalid("model: Field required");
  if (model->v.type != Type::kString || model->v.size == 0)
    return invalid("model: Input should be a valid string");
  const Member* max_tokens = in.present("max_tokens");
  if (!max_tokens) return invalid("max_tokens: Field required");
  const auto n = max_tokens->v.as_int64();
  if (!n) return invalid("max_tokens: Input should be a valid integer");
  if (*n < 1) return invalid("max_tokens: Input should be greater than or equal to 1");
  if (const Member* stream = in.present("stream");
      stream && stream->v.type != Type::kTrue && stream->v.type != Type::kFalse)
    return invalid("stream: Input should be a valid boolean");
  const Member* messages = in.present("messages");
  if (!messages) return invalid("messages: Field required");
  if (messages->v.type != Type::kArray) return invalid("messages: Input should be a valid list");
  if (messages->v.size == 0) return invalid("messages: at least one message is required");
  return std::nullopt;
}

// Message `at`: an object with a role and a content of text or blocks.
std::optional<ApiError> check_message(const Member& m, const Fields& f, const std::string& at) {
  if (m.v.type != Type::kObject) return invalid(at + ": Input should be a valid dictionary");
  if (!f.is("role", "user") && !f.is("role", "assistant"))
    return invalid(at + ".role: Input should be 'user' or 'assistant'");
  const Member* content = f["content"];
  if (!content) return invalid(at + ".content: Field required");
  if (content->v.type != Type::kString && content->v.type != Type::kArray)
    return invalid(at + ".content: Input should be a valid string or a valid list");
  return std::nullopt;
}

// Block `j` of message `at`'s content: an object with a type.
std::optional<ApiError> check_block(const Fields& block, const std::string& at, std::size_t j) {
  if (!block.raw("type").empty()) return std::nullopt;
  return invalid(at + ".content." + std::to_string(j) +
                 ": Input should be a valid dictionary with a type");
}

std::optional<ApiError> check_system(const RequestBody& in) {
  const Member* system = in.present("system");
  if (!system || system->v.type == Type::kString) return std::nullopt;
  if (system->v.type != Type::kArray)
    return invalid("system: Input should be a valid string or list");
  std::optional<ApiError> error;
  in.walk_elements(*system, [&](std::size_t, const Member& b) {
    const Fields f(in, &b, {"type", "text"});
    const Member* text = f["text"];
    if (!f.is("type", "text") || !text || text->v.type != Type::kString)
      error = invalid("system: each block should be a text block");
    return !error;
  });
  return error;
}

// ---- messages ------------------------------------------------------------------

// The chat messages written so far.
struct Messages {
  std::string json;
  std::size_t count = 0;
  bool last_is_tool = false;

  // Starts a message of `role` (its other members follow, each after a
  // comma); end() closes it.
  std::string& begin(std::string_view role) {
    if (count++) json += ',';
    last_is_tool = role == "tool";
    return json.append("{\"role\":\"").append(role).append(1, '"');
  }
  void end() { json += '}'; }
};

// Content parts: text and image_url.
struct Parts {
  std::string json;
  std::size_t count = 0;
  std::string_view first_text;  // the first part's text when it is a text part
  bool first_is_text = false;

  void text(std::string_view escaped) {
    if (count == 0) {
      first_is_text = true;
      first_text = escaped;
    }
    separate();
    quoted(json.append("{\"type\":\"text\",\"text\":"), escaped).append(1, '}');
  }
  // An image_url part; the url's pieces, escaped, joined.
  void image(std::initializer_list<std::string_view> url) {
    separate();
    json.append("{\"type\":\"image_url\",\"image_url\":{\"url\":\"");
    for (std::string_view piece : url) json.append(piece);
    json.append("\"}}");
  }
  // As a message's content: one text part is a plain string.
  void content(std::string& out) const {
    if (count == 1 && first_is_text)
      quoted(out, first_text);
    else
      out.append(1, '[').append(json).append(1, ']');
  }

 private:
  void separate() {
    if (count++) json += ',';
  }
};

// A thinking block in the history, not carried to chat; one without a
// signature (a translated answer's) is noted: Anthropic would refuse it.
void note_thinking(const Fields& block, Out& out) {
  if (block.raw("signature").empty()) out.unsigned_thinking = true;
}

// An image block as an image_url part.
void image_part(const RequestBody& in, const Fields& block, const std::string& where, Parts& parts,
                Out& out) {
  const Fields source(in, block["source"], {"type", "media_type", "data", "url"});
  const std::string type = source.str("type");
  if (type == "base64") {
    if (out.write) parts.image({"data:", source.raw("media_type"), ";base64,", source.raw("data")});
  } else if (type == "url") {
    if (out.write) parts.image({source.raw("url")});
  } else {
    out.refuse(where + ".source", "an image source of type \"" + type + "\"");
  }
}

// A tool_result's content as a tool message's text (text blocks joined),
// escaped.
std::string tool_result_text(const RequestBody& in, const Fields& block, const std::string& where,
                             Out& out) {
  const Member* content = block["content"];
  if (!content) return {};
  if (content->v.type == Type::kString)
    return out.write ? std::string(block.raw("content")) : std::string();
  std::string text;
  if (content->v.type != Type::kArray) {
    out.refuse(where + ".content", "tool_result content that is not text");
    return text;
  }
  in.walk_elements(*content, [&](std::size_t k, const Member& b) {
    const Fields f(in, &b, {"type", "text"});
    if (f.is("type", "text")) {
      if (out.write) text += f.raw("text");
    } else {
      out.refuse(where + ".content." + std::to_string(k),
                 "a tool_result block of type \"" + f.str("type") + "\"");
    }
    return true;
  });
  return text;
}

void add_user(const RequestBody& in, const Member& content, const std::string& at,
              Messages& messages, Out& out, std::optional<ApiError>& error) {
  if (content.v.type == Type::kString) {
    if (!out.write) return;
    messages.begin("user").append(",\"content\":").append(in.text_of(content));
    return messages.end();
  }
  Parts parts;
  in.walk_elements(content, [&](std::size_t j, const Member& b) {
    const Fields block(in, &b, {"type", "text", "source", "tool_use_id", "content", "signature"});
    if ((error = check_block(block, at, j))) return false;
    const std::string where = at + ".content." + std::to_string(j);
    const std::string type = block.str("type");
    if (type == "text") {
      if (out.write) parts.text(block.raw("text"));
    } else if (type == "image") {
      image_part(in, block, where, parts, out);
    } else if (type == "tool_result") {
      // Tool messages answer the assistant's calls: right after them,
      // before the user's own words.
      const std::string text = tool_result_text(in, block, where, out);
      if (!out.write) return true;
      quoted(messages.begin("tool").append(",\"tool_call_id\":"), block.raw("tool_use_id"));
      quoted(messages.json.append(",\"content\":"), text);
      messages.end();
    } else if (type == "thinking") {
      note_thinking(block, out);
    } else if (type != "redacted_thinking") {
      out.refuse(where, "a content block of type \"" + type + "\"");
    }
    return true;
  });
  if (error || !out.write) return;
  // (A turn of blocks none of which translates still takes its place: the
  // request is refused for this deployment, not reordered.)
  if (parts.count > 0 || !messages.last_is_tool) {
    std::string& m = messages.begin("user").append(",\"content\":");
    if (parts.count == 0)
      m += "\"\"";
    else
      parts.content(m);
    messages.end();
  }
}

void add_assistant(const RequestBody& in, const Member& content, const std::string& at,
                   Messages& messages, Out& out, std::optional<ApiError>& error) {
  if (content.v.type == Type::kString) {
    if (!out.write) return;
    messages.begin("assistant").append(",\"content\":").append(in.text_of(content));
    return messages.end();
  }
  std::string text;  // escaped
  std::string calls;
  in.walk_elements(content, [&](std::size_t j, const Member& b) {
    const Fields block(in, &b, {"type", "text", "id", "name", "input", "signature"});
    if ((error = check_block(block, at, j))) return false;
    const std::string type = block.str("type");
    if (type == "text") {
      if (out.write) text += block.raw("text");
    } else if (type == "tool_use") {
      if (!out.write) return true;
      if (!calls.empty()) calls += ',';
      quoted(calls.append("{\"id\":"), block.raw("id"));
      quoted(calls.append(",\"type\":\"function\",\"function\":{\"name\":"), block.raw("name"));
      const Member* input = block["input"];
      providers::append_json_string(
          calls.append(",\"arguments\":"),
          input ? providers::compact_json(in.text_of(*input)) : std::string("{}"));
      calls += "}}";
    } else if (type == "thinking") {
      note_thinking(block, out);
    } else if (type != "redacted_thinking") {
      out.refuse(at + ".content." + std::to_string(j), "a content block of type \"" + type + "\"");
    }
    return true;
  });
  if (error || !out.write) return;
  std::string& m = messages.begin("assistant").append(",\"content\":");
  if (text.empty() && !calls.empty())
    m += "null";
  else
    quoted(m, text);
  if (!calls.empty()) m.append(",\"tool_calls\":[").append(calls).append(1, ']');
  messages.end();
}

// The messages, checked as they are translated, then the system prompt;
// an error when Anthropic would refuse them.
std::optional<ApiError> translate_messages(const RequestBody& in, Out& out) {
  Messages messages;
  std::optional<ApiError> error;
  in.walk_elements(*in.find("messages"), [&](std::size_t i, const Member& m) {
    const std::string at = "messages." + std::to_string(i);
    const Fields f(in, &m, {"role", "content"});
    if ((error = check_message(m, f, at))) return false;
    if (f.is("role", "user"))
      add_user(in, *f["content"], at, messages, out, error);
    else
      add_assistant(in, *f["content"], at, messages, out, error);
    return !error;
  });
  if (error) return error;
  if ((error = check_system(in))) return error;
  if (!out.write) return std::nullopt;
  Messages system;
  if (const Member* prompt = in.present("system")) {
    if (prompt->v.type == Type::kString) {
      if (prompt->v.size > 0) {
        system.begin("system").append(",\"content\":").append(in.text_of(*prompt));
        system.end();
      }
    } else if (prompt->v.size > 0) {
      Parts parts;
      in.walk_elements(*prompt, [&](std::size_t, const Member& b) {
        parts.text(Fields(in, &b, {"text"}).raw("text"));
        return true;
      });
      parts.content(system.begin("system").append(",\"content\":"));
      system.end();
    }
  }
  std::string& list = out.member("messages").append(1, '[').append(system.json);
  if (system.count > 0 && messages.count > 0) list += ',';
  list.append(messages.json).append(1, ']');
  return std::nullopt;
}

// ---- tools, thinking ------------------------------------------------------------

void translate_tools(const RequestBody& in, Out& out) {
  const Member* tools = in.present("tools");
  if (tools) {
    if (tools->v.type != Type::kArray) return out.refuse("tools", "tools that are not a list");
    std::string functions;
    in.walk_elements(*tools, [&](std::size_t i, const Member& t) {
      const Fields tool(in, &t, {"type", "name", "description", "input_schema"});
      const std::string type = tool.str("type");
      if (!type.empty() && type != "custom") {
        out.refuse("tools." + std::to_string(i), "the server tool \"" + type + "\"");
        return true;
      }
      if (!out.write) return true;
      if (!functions.empty()) functions += ',';
      quoted(functions.append("{\"type\":\"function\",\"function\":{\"name\":"), tool.raw("name"));
      if (const Member* d = tool["description"])
        functions.append(",\"description\":").append(in.text_of(*d));
      const Member* schema = tool["input_schema"];
      functions.append(",\"parameters\":")
          .append(schema ? in.text_of(*schema) : std::string_view("{\"type\":\"object\"}"))
          .append("}}");
      return true;
    });
    if (!functions.empty()) out.member("tools").append(1, '[').append(functions).append(1, ']');
  }
  const Member* choice = in.present("tool_choice");
  if (!choice) return;
  const Fields f(in, choice, {"type", "name", "disable_parallel_tool_use"});
  const std::string type = f.str("type");
  if (type == "auto") {
    out.member("tool_choice") += "\"auto\"";
  } else if (type == "any") {
    out.member("tool_choice") += "\"required\"";
  } else if (type == "tool") {
    quoted(out.member("tool_choice").append("{\"type\":\"function\",\"function\":{\"name\":"),
           f.raw("name"))
        .append("}}");
  } else if (type == "none") {
    out.member("tool_choice") += "\"none\"";
  } else {
    return out.refuse("tool_choice", "the tool_choice \"" + type + "\"");
  }
  if (const Member* d = f["disable_parallel_tool_use"]; d && d->v.type == Type::kTrue && tools)
    out.member("parallel_tool_calls") += "false";
}

void translate_thinking(const RequestBody& in, Out& out) {
  const Member* thinking = in.present("thinking");
  if (!thinking) return;
  const Fields f(in, thinking, {"type", "budget_tokens"});
  const std::string type = f.str("type");
  if (type == "enabled") {
    const Member* budget = f["budget_tokens"];
    const std::int64_t b = budget ? budget->v.as_int64().value_or(0) : 0;
    out.reasoning_effort = b < 4096 ? "low" : b < 16384 ? "medium" : "high";
    out.member("reasoning_effort").append(1, '"').append(out.reasoning_effort).append(1, '"');
  } else if (type != "disabled" && type != "adaptive") {
    out.refuse("thinking", "thinking of type \"" + type + "\"");
  }
}

}  // namespace

ChatRequest::Untranslated messages_untranslated(std::string param, std::string_view what) {
  return {std::string(what) +
              " has no equivalent outside Anthropic's Messages API (only an Anthropic deployment "
              "can serve this request)",
          std::move(param)};
}

std::variant<MessagesTranslation, ApiError> translate_messages_request(const RequestBody& in,
                                                                       Translate mode) {
  if (auto e = check_top(in)) return std::move(*e);
  Out out;
  out.write = mode == Translate::kWrite;
  // The first field chat cannot say is named in the order of a parsed
  // document's members (by key): the smallest.
  std::optional<std::string> unknown;
  for (const Member& m : in.members()) {
    if (m.removed || m.superseded || m.v.type == Type::kNull) continue;
    const std::string key = key_of(in, m);
    bool known = false;
    for (const auto& [from, to] : kMessagesRenamed) {
      if (key == from) {
        out.member(to).append(in.text_of(m));
        known = true;
      }
    }
    for (std::string_view handled : kMessagesHandled) known = known || key == handled;
    if (!known && (!unknown || key < *unknown)) unknown = key;
  }
  if (unknown) out.refuse(unknown->empty() ? "\"\"" : *unknown, "the field \"" + *unknown + "\"");
  if (auto e = translate_messages(in, out)) return std::move(*e);
  translate_tools(in, out);
  translate_thinking(in, out);
  if (const Member* metadata = in.present("metadata")) {
    const Fields f(in, metadata, {"user_id"});
    if (const Member* user = f["user_id"]; user && user->v.type == Type::kString)
      out.member("user").append(in.text_of(*user));
  }
  out.chat += '}';
  if (!out.write) out.chat.clear();  // (the few top-level members it wrote)
  return MessagesTranslation{std::move(out.chat), std::move(out.untranslated),
                             out.unsigned_thinking, out.reasoning_effort};
}

namespace {

// Whether no deployment of the model `name` is Anthropic's (every one takes
// the chat translation). False for a model that is not configured.
bool chat_only(const config::Config& cfg, const std::string& name) {
  const config::Model* model = cfg.find_model(name);
  if (model == nullptr) return false;
  for (const config::Deployment& d : model->deployments) {
    const config::Provider* p = cfg.find_provider(d.provider);
    if (p == nullptr || p->protocol == config::Protocol::kAnthropic) return false;
  }
  return true;
}

// The chat translation's text, indexed, into `req.body`; the error a chat
// request's admission gives it when it cannot be (it nests one level
// deeper than the client's document: a tool's input_schema becomes
// function.parameters) -- then the request stays pending, and every
// deployment that needs the translation hears the same.
std::optional<ApiError> take_chat(ChatRequest& req, std::string chat) {
  RequestBody body;
  if (auto e = parse_json_body("", std::move(chat), body)) return e;
  req.body = std::move(body);
  req.chat_pending = false;
  return std::nullopt;
}

}  // namespace

std::variant<ChatRequest, ApiError> parse_messages_request(std::string_view content_type,
                                                           std::string body,
                                                           const config::Config* cfg) {
  RequestBody native;
  if (auto e = parse_json_body(content_type, std::move(body), native)) return std::move(*e);
  // Checked, and what chat could not say found, without writing the chat
  // document: an Anthropic deployment takes the request as it came. (When
  // none will, the document is written in the same walk.)
  const Member* model = native.present("model");
  std::string model_name =
      model != nullptr && model->v.type == Type::kString ? native.string_of(*model) : "";
  const bool eager = cfg != nullptr && chat_only(*cfg, model_name);
  auto checked = translate_messages_request(native, eager ? Translate::kWrite : Translate::kCheck);
  if (auto* e = std::get_if<ApiError>(&checked)) return std::move(*e);
  auto& t = std::get<MessagesTranslation>(checked);
  ChatRequest r;
  // What a chat request's admission reads, from the fields check_top
  // checked (model: a non-empty string; max_tokens: an integer >= 1;
  // stream: a boolean).
  r.model = std::move(model_name);
  const Member* stream = native.present("stream");
  r.stream = stream && stream->v.type == Type::kTrue;
  r.max_tokens = native.present("max_tokens")->v.as_int64();
  r.reasoning_effort = t.reasoning_effort;
  // The gateway's own routing override: never sent upstream.
  if (native.contains("route")) r.route = native.erase("route");
  r.untranslated = std::move(t.untranslated);
  r.native_unsigned_thinking = t.unsigned_thinking;
  r.native = std::move(native);
  r.chat_pending = true;
  if (eager) {
    if (auto e = take_chat(r, std::move(t.chat))) return std::move(*e);
  }
  return r;
}

std::optional<ApiError> translate_for_chat(ChatRequest& req) {
  if (!req.chat_pending) return std::nullopt;
  auto translated = translate_messages_request(*req.native, Translate::kWrite);
  if (auto* e = std::get_if<ApiError>(&translated)) return std::move(*e);
  return take_chat(req, std::move(std::get<MessagesTranslation>(translated).chat));
}

}  // namespace llmgate::gateway
