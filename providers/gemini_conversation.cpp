#include "providers/gemini_conversation.h"

#include <cstddef>
#include <map>
#include <string>
#include <string_view>

#include "providers/conversation_writer.h"
#include "providers/json_write.h"
#include "providers/translation.h"

namespace llmgate::providers {
namespace {

using conversation::Items;
using conversation::Member;
using conversation::Type;

class Writer : public conversation::TurnWriter<Writer> {
 public:
  Writer(const RequestBody& in, std::string& out)
      : TurnWriter(in, out, "contents", "parts", "model") {}

  bool write(const Member& messages) {
    if (!write_turns(messages)) return false;
    if (system_.count > 0)
      out_.append(R"(,"systemInstruction":{"parts":[)").append(system_.text).append("]}");
    return true;
  }

 private:
  friend class conversation::TurnWriter<Writer>;

  bool part(const Member& p, bool media, Items& into) {
    const ObjectFields f(in_, &p, {"type", "text", "image_url", "input_audio"});
    if (f.is("type", "text")) return text_part(f, into);
    if (media && f.is("type", "image_url")) return image(f["image_url"], into);
    if (media && f.is("type", "input_audio")) return audio(f["input_audio"], into);
    return false;
  }

  bool image(const Member* image_url, Items& into) {
    const auto url = plain_url(image_url);
    if (!url) return false;
    const std::string_view u = *url;
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

  bool audio(const Member* input_audio, Items& into) {
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

  // call_parts(): a tool call as a functionCall, its id's function kept
  // for the results that answer it.
  bool call(const Member& c) {
    const ObjectFields f(in_, &c, {"type", "function", "id"});
    const Member* type = f["type"];
    if (type && type->v.type == Type::kString && !f.is("type", "function")) return false;
    const ObjectFields fn(in_, f["function"], {"name", "arguments"});
    const Member* name = fn["name"];
    if (!f["function"] || !name || name->v.type != Type::kString) return false;
    std::string& out = items_.next();
    out.append(R"({"functionCall":{"name":)").append(in_.text_of(*name)).append(R"(,"args":)");
    const Member* args = fn["arguments"];
    if (args && args->v.type == Type::kObject) {
      // From its document, as the document's translation writes it: the
      // client's text could hold a key twice (request_body.h, spliced()).
      write_json(out, in_.json_of(*args));
    } else if (!args) {
      out += "{}";
    } else if (args->v.type != Type::kString ||
               !conversation::append_arguments_object(out, in_.string_of(*args))) {
      return false;
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
    if (!result_text(f["content"], result)) return false;
    std::string& out = items_.next();
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

  std::map<std::string, std::string, std::less<>> call_names_;  // a call's id -> its function
};

}  // namespace

bool write_gemini_conversation(const RequestBody& in, std::string& out) {
  const Member* messages = in.present("messages");
  if (!messages) return false;
  return Writer(in, out).write(*messages);
}

}  // namespace llmgate::providers
