#include "providers/gemini_conversation.h"

#include <cstddef>
#include <map>
#include <string>
#include <string_view>

#include "providers/json_write.h"
#include "providers/translation.h"

namespace llmgate::providers {
namespace {

using Member = RequestBody::Member;
using Type = RequestBody::Type;

// Parts being written: their texts joined by ','.
struct Parts {
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

class Writer {
 public:
  Writer(const RequestBody& in, std::string& out) : in_(in), out_(out) {}

  bool write(const Member& messages) {
    if (messages.v.type != Type::kArray) return false;
    out_ += "\"contents\":[";
    const bool ok =
        in_.walk_elements(messages, [&](std::size_t, const Member& m) { return message(m); });
    // No turn with content: the document's translation refuses it.
    if (!ok || !open_) return false;
    out_ += "]}]";
    if (system_.count > 0)
      out_.append(R"(,"systemInstruction":{"parts":[)").append(system_.text).append("]}");
    return true;
  }

 private:
  bool message(const Member& m) {
    const ObjectFields f(in_, &m, {"role", "content", "tool_calls", "tool_call_id"});
    std::string scratch;
    const std::string_view role = f.decoded("role", scratch);  // "" when not a string
    parts_.clear();
    if (role == "user") {
      if (!content(f["content"], true, parts_)) return false;
      add("user");
      return true;
    }
    if (role == "assistant") {
      if (!content(f["content"], false, parts_) || !calls(f["tool_calls"])) return false;
      add("model");
      return true;
    }
    if (role == "tool") {
      if (!tool_result(f)) return false;
      add("user");
      return true;
    }
    if (role == "system" || role == "developer") return content(f["content"], false, system_);
    return false;
  }

  // content_parts(): a string or text parts (and media in a user turn); an
  // empty text is no part.
  bool content(const Member* c, bool media, Parts& into) {
    if (!c) return true;
    if (c->v.type == Type::kString) {
      text(*c, into);
      return true;
    }
    if (c->v.type != Type::kArray) return false;
    const bool ok = in_.walk_elements(
        *c, [&](std::size_t, const Member& part) { return this->part(part, media, into); });
    return ok;
  }

  void text(const Member& s, Parts& into) {
    if (s.end - s.value > 2)
      into.next().append(R"({"text":)").append(in_.text_of(s)).append(1, '}');
  }

  bool part(const Member& p, bool media, Parts& into) {
    const ObjectFields f(in_, &p, {"type", "text", "image_url", "input_audio"});
    if (f.is("type", "text")) {
      const Member* t = f["text"];
      if (!t || t->v.type != Type::kString) return false;
      text(*t, into);
      return true;
    }
    if (media && f.is("type", "image_url")) return image(f["image_url"], into);
    if (media && f.is("type", "input_audio")) return audio(f["input_audio"], into);
    return false;
  }

  bool image(const Member* image_url, Parts& into) {
    const ObjectFields f(in_, image_url, {"url"});
    const Member* url = f["url"];
    if (!url || url->v.type != Type::kString || url->v.escaped) return false;
    const std::string_view u = in_.text_of(*url).substr(1, url->end - url->value - 2);
    if (u.starts_with("data:")) {
      const auto comma = u.find(',');
      if (comma == std::string_view::npos) return false;
      const std::string_view head = u.substr(5, comma - 5);
      const auto semi = head.find(';');
      if (!head.ends_with(";base64") || semi == 0) return false;
      into.next()
          .append(R"({"inlineData":{"mimeType":")")
          .append(head.substr(0, semi))
          .append(R"(","data":")")
          .append(u.substr(comma + 1))
          .append("\"}}");
      return true;
    }
    if (!u.starts_with("https://") && !u.starts_with("http://")) return false;
    into.next()
        .append(R"({"fileData":{"mimeType":")")
        .append(gemini_image_type(u))
        .append(R"(","fileUri":")")
        .append(u)
        .append("\"}}");
    return true;
  }

  bool audio(const Member* input_audio, Parts& into) {
    const ObjectFields f(in_, input_audio, {"data", "format"});
    const Member* data = f["data"];
    const Member* format = f["format"];
    if (!data || data->v.type != Type::kString || !format || format->v.type != Type::kString)
      return false;
    const char* mime = f.is("format", "wav")   ? "audio/wav"
                       : f.is("format", "mp3") ? "audio/mp3"
                                               : nullptr;
    if (!mime) return false;
    into.next()
        .append(R"({"inlineData":{"mimeType":")")
        .append(mime)
        .append(R"(","data":)")
        .append(in_.text_of(*data))
        .append("}}");
    return true;
  }

  // call_parts(): each tool call as a functionCall, its id's function kept
  // for the results that answer it.
  bool calls(const Member* tool_calls) {
    if (!tool_calls) return true;
    if (tool_calls->v.type != Type::kArray) return false;
    const bool ok = in_.walk_elements(
        *tool_calls, [&](std::size_t, const Member& call) { return this->call(call); });
    return ok;
  }

  bool call(const Member& c) {
    const ObjectFields f(in_, &c, {"type", "function", "id"});
    const Member* type = f["type"];
    if (type && type->v.type == Type::kString && !f.is("type", "function")) return false;
    const ObjectFields fn(in_, f["function"], {"name", "arguments"});
    const Member* name = fn["name"];
    if (!f["function"] || !name || name->v.type != Type::kString) return false;
    std::string& out = parts_.next();
    out.append(R"({"functionCall":{"name":)").append(in_.text_of(*name)).append(R"(,"args":)");
    const Member* args = fn["arguments"];
    if (args && args->v.type == Type::kObject) {
      // From its document, as the document's translation writes it: the
      // client's text could hold a key twice (request_body.h, spliced()).
      write_json(out, in_.json_of(*args));
    } else if (!args) {
      out += "{}";
    } else if (args->v.type != Type::kString) {
      return false;
    } else {
      const std::string text = in_.string_of(*args);
      // None written (some clients send ""): a call without parameters.
      if (text.find_first_not_of(" \t\r\n") == std::string::npos) {
        out += "{}";
      } else {
        const nlohmann::json parsed = translation::parse_embedded(text);
        if (!parsed.is_object()) return false;
        write_json(out, parsed);
      }
    }
    out += "}}";
    if (const Member* id = f["id"]; id && id->v.type == Type::kString)
      call_names_[in_.string_of(*id)] = in_.string_of(*name);
    return true;
  }

  // tool_result_part(): the result's text (its parts joined), an object
  // when it is one, answering the function its call named.
  bool tool_result(const ObjectFields& f) {
    const Member* id = f["tool_call_id"];
    if (!id || id->v.type != Type::kString) return false;
    const auto name = call_names_.find(in_.string_of(*id));
    if (name == call_names_.end()) return false;
    std::string result;
    if (const Member* c = f["content"]) {
      if (c->v.type == Type::kString) {
        result = in_.string_of(*c);
      } else if (c->v.type == Type::kArray) {
        bool ok = true;
        in_.walk_elements(*c, [&](std::size_t, const Member& p) {
          const ObjectFields pf(in_, &p, {"type", "text"});
          const Member* t = pf["text"];
          ok = pf.is("type", "text") && t && t->v.type == Type::kString;
          if (ok) result += in_.string_of(*t);
          return ok;
        });
        if (!ok) return false;
      } else {
        return false;
      }
    }
    std::string& out = parts_.next();
    out += R"({"functionResponse":{"name":)";
    write_json(out, nlohmann::json(name->second));
    out += R"(,"response":)";
    const nlohmann::json response = translation::parse_embedded(result);
    if (response.is_object()) {
      write_json(out, response);
    } else {
      out += R"({"content":)";
      write_json(out, nlohmann::json(result));
      out += '}';
    }
    out += "}}";
    return true;
  }

  // GeminiRequest::add(): consecutive turns of one role are one; a turn
  // without parts is none.
  void add(std::string_view role) {
    if (parts_.count == 0) return;
    if (open_ && role == last_role_) {
      out_.append(1, ',').append(parts_.text);
      return;
    }
    if (open_) out_ += "]},";
    out_.append(R"({"role":")").append(role).append(R"(","parts":[)").append(parts_.text);
    open_ = true;
    last_role_ = role;
  }

  const RequestBody& in_;
  std::string& out_;
  Parts parts_;   // the message being read
  Parts system_;  // systemInstruction's parts
  bool open_ = false;
  std::string_view last_role_;
  std::map<std::string, std::string, std::less<>> call_names_;  // a call's id -> its function
};

}  // namespace

bool write_gemini_conversation(const RequestBody& in, std::string& out) {
  const Member* messages = in.present("messages");
  if (!messages) return false;
  return Writer(in, out).write(*messages);
}

}  // namespace llmgate::providers
