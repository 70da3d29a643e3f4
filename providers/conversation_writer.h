// What the conversation writers (gemini_conversation.cpp,
// bedrock_conversation.cpp; anthropic_conversation.cpp for the arguments)
// share: a chat request's `messages` walked from the client's indexed text
// and written as a protocol's turns, each role's message handed to the
// protocol's own writer, turns of one role merged, and a call's arguments
// written as the input object the document's translation makes. A writer
// declines (false) whatever it does not write exactly as that translation
// does. Header-only, Beast-free.
#pragma once

#include <cstddef>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

#include "providers/json_write.h"
#include "providers/request_body.h"
#include "providers/translation.h"
#include "providers/upstream_protocol.h"

namespace llmgate::providers::conversation {

using Member = RequestBody::Member;
using Type = RequestBody::Type;

// Items being written (content blocks, parts): their texts joined by ','.
struct Items {
  std::string text;
  std::size_t count = 0;

  std::string& next() {
    if (count++ > 0) text += ',';
    return text;
  }
  void clear() {
    text.clear();
    count = 0;
  }
};

// A call's arguments (JSON text) as the input object the document's
// translation writes: none written (blank: some clients send "") is {};
// else its document, written anew (the client's text could hold a key
// twice); false when it is not an object.
inline bool append_arguments_object(std::string& out, const std::string& arguments) {
  if (arguments.find_first_not_of(" \t\r\n") == std::string::npos) {
    out += "{}";
    return true;
  }
  const nlohmann::json input = translation::parse_embedded(arguments);
  if (!input.is_object()) return false;
  write_json(out, input);
  return true;
}

// A protocol's upstream body with its conversation written in: `settings`
// is the text of an object of the request's other fields, translated ("{}"
// where they were `refused`); `write` appends the conversation's members.
// The settings' refusal counts only once the conversation is found sound
// (the document's translation reads the conversation first); nullopt when
// the writer declines.
inline std::optional<std::variant<std::string, Untranslatable>> body_with_conversation(
    const RequestBody& in, std::string settings, std::optional<Untranslatable> refused,
    bool (*write)(const RequestBody&, std::string&)) {
  std::string& text = settings;
  text.pop_back();  // its '}'
  if (text.size() > 1) text += ',';
  // The client's conversation and some markup: one allocation, as a rule.
  if (const Member* messages = in.find("messages"))
    text.reserve(text.size() + (messages->end - messages->value) * 9 / 8 + 256);
  if (!write(in, text)) return std::nullopt;
  if (refused) return std::move(*refused);
  text += '}';
  return std::move(text);
}

// The turns of a conversation, written as `"<list>":[{"role":"<role>",
// "<items>":[...]},...]`. `Protocol` (CRTP) supplies
//   bool part(const Member& p, bool media, Items& into)   a content part
//   bool call(const Member& c)                           a tool call, into items_
//   bool tool_result(const ObjectFields& f)              a tool message, into items_
// and writes its system text (system_) after write_turns().
template <class Protocol>
class TurnWriter {
 protected:
  // `assistant`: the protocol's name for the assistant's role.
  TurnWriter(const RequestBody& in, std::string& out, std::string_view list, std::string_view items,
             std::string_view assistant)
      : in_(in), out_(out), list_(list), items_key_(items), assistant_(assistant) {}

  // False when it declines, or when no turn has content (the document's
  // translation refuses a conversation without one).
  bool write_turns(const Member& messages) {
    if (messages.v.type != Type::kArray) return false;
    out_.append(1, '"').append(list_).append("\":[");
    const bool ok =
        in_.walk_elements(messages, [&](std::size_t, const Member& m) { return message(m); });
    if (!ok || !open_) return false;
    out_ += "]}]";
    return true;
  }

  // content_parts() / content_blocks(): a string or parts (media ones in a
  // user turn); an empty text is no item.
  bool content(const Member* c, bool media, Items& into) {
    if (!c) return true;
    if (c->v.type == Type::kString) {
      text(*c, into);
      return true;
    }
    if (c->v.type != Type::kArray) return false;
    return in_.walk_elements(
        *c, [&](std::size_t, const Member& part) { return self().part(part, media, into); });
  }

  // A non-empty string as {"text":...}, in the client's text.
  void text(const Member& s, Items& into) {
    if (s.end - s.value > 2)
      into.next().append(R"({"text":)").append(in_.text_of(s)).append(1, '}');
  }

  // A text part ({"type":"text",...}): its text as an item; false when it
  // is not a string.
  bool text_part(const ObjectFields& f, Items& into) {
    const Member* t = f["text"];
    if (!t || t->v.type != Type::kString) return false;
    text(*t, into);
    return true;
  }

  // An image_url part's URL between its quotes, when it is a string
  // without escapes (one with them is declined).
  std::optional<std::string_view> plain_url(const Member* image_url) const {
    const ObjectFields f(in_, image_url, {"url"});
    const Member* url = f["url"];
    if (!url || url->v.type != Type::kString || url->v.escaped) return std::nullopt;
    return in_.text_of(*url).substr(1, url->end - url->value - 2);
  }

  // A tool message's content as the text its result is made of: a string,
  // or text parts joined; none is "".
  bool result_text(const Member* c, std::string& result) const {
    if (!c) return true;
    if (c->v.type == Type::kString) {
      result = in_.string_of(*c);
      return true;
    }
    if (c->v.type != Type::kArray) return false;
    return in_.walk_elements(*c, [&](std::size_t, const Member& p) {
      const ObjectFields pf(in_, &p, {"type", "text"});
      const Member* t = pf["text"];
      if (!pf.is("type", "text") || !t || t->v.type != Type::kString) return false;
      result += in_.string_of(*t);
      return true;
    });
  }

  const RequestBody& in_;
  std::string& out_;
  Items items_;   // the message being read
  Items system_;  // the system text's items

 private:
  Protocol& self() { return static_cast<Protocol&>(*this); }

  bool message(const Member& m) {
    const ObjectFields f(in_, &m, {"role", "content", "tool_calls", "tool_call_id"});
    std::string scratch;
    const std::string_view role = f.decoded("role", scratch);  // "" when not a string
    items_.clear();
    if (role == "user") {
      if (!content(f["content"], true, items_)) return false;
      add("user");
      return true;
    }
    if (role == "assistant") {
      if (!content(f["content"], false, items_) || !calls(f["tool_calls"])) return false;
      add(assistant_);
      return true;
    }
    if (role == "tool") {
      if (!self().tool_result(f)) return false;
      add("user");
      return true;
    }
    if (role == "system" || role == "developer") return content(f["content"], false, system_);
    return false;
  }

  bool calls(const Member* tool_calls) {
    if (!tool_calls) return true;
    if (tool_calls->v.type != Type::kArray) return false;
    return in_.walk_elements(*tool_calls,
                             [&](std::size_t, const Member& call) { return self().call(call); });
  }

  // Consecutive turns of one role are one; a turn without items is none.
  void add(std::string_view role) {
    if (items_.count == 0) return;
    if (open_ && role == last_role_) {
      out_.append(1, ',').append(items_.text);
      return;
    }
    if (open_) out_ += "]},";
    out_.append(R"({"role":")").append(role).append(R"(",")").append(items_key_).append("\":[");
    out_.append(items_.text);
    open_ = true;
    last_role_ = role;
  }

  const std::string_view list_, items_key_, assistant_;
  bool open_ = false;
  std::string_view last_role_;
};

}  // namespace llmgate::providers::conversation
