#include "providers/bedrock_conversation.h"

#include <cstddef>
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
      : TurnWriter(in, out, "messages", "content", "assistant") {}

  bool write(const Member& messages) {
    if (!write_turns(messages)) return false;
    if (system_.count > 0) out_.append(R"(,"system":[)").append(system_.text).append(1, ']');
    return true;
  }

 private:
  friend class conversation::TurnWriter<Writer>;

  bool part(const Member& p, bool media, Items& into) {
    const ObjectFields f(in_, &p, {"type", "text", "image_url"});
    if (f.is("type", "text")) return text_part(f, into);
    if (media && f.is("type", "image_url")) return image(f["image_url"], into);
    return false;
  }

  // image_block(): a base64 data URL of an image type Converse takes.
  bool image(const Member* image_url, Items& into) {
    const auto url = plain_url(image_url);
    if (!url) return false;
    const std::string_view u = *url;
    if (!u.starts_with("data:image/")) return false;
    const auto comma = u.find(',');
    if (comma == std::string_view::npos) return false;
    const std::string_view head = u.substr(11, comma - 11);
    if (!head.ends_with(";base64")) return false;
    std::string_view format = head.substr(0, head.find(';'));
    if (format == "jpg") format = "jpeg";
    if (format != "png" && format != "jpeg" && format != "gif" && format != "webp") return false;
    into.next()
        .append(R"({"image":{"format":")")
        .append(format)
        .append(R"(","source":{"bytes":")")
        .append(u.substr(comma + 1))
        .append("\"}}}");
    return true;
  }

  // tool_use_blocks(): a tool call as a toolUse block, its input an object
  // (arguments that are not a string, or blank, are none).
  bool call(const Member& c) {
    const ObjectFields f(in_, &c, {"type", "function", "id"});
    const Member* type = f["type"];
    if (type && type->v.type == Type::kString && !f.is("type", "function")) return false;
    const ObjectFields fn(in_, f["function"], {"name", "arguments"});
    const Member* name = fn["name"];
    const Member* id = f["id"];
    if (!f["function"] || !name || name->v.type != Type::kString || !id ||
        id->v.type != Type::kString) {
      return false;
    }
    std::string& out = items_.next();
    out.append(R"({"toolUse":{"toolUseId":)")
        .append(in_.text_of(*id))
        .append(R"(,"name":)")
        .append(in_.text_of(*name))
        .append(R"(,"input":)");
    const Member* args = fn["arguments"];
    const std::string text =
        args && args->v.type == Type::kString ? in_.string_of(*args) : std::string();
    if (!conversation::append_arguments_object(out, text)) return false;
    out += "}}";
    return true;
  }

  // tool_result_block(): the result's text (its text parts joined), as
  // JSON when it is an object.
  bool tool_result(const ObjectFields& f) {
    const Member* id = f["tool_call_id"];
    if (!id || id->v.type != Type::kString) return false;
    std::string result;
    if (!result_text(f["content"], result)) return false;
    std::string& out = items_.next();
    out.append(R"({"toolResult":{"toolUseId":)").append(in_.text_of(*id)).append(R"(,"content":[)");
    const nlohmann::json j = translation::parse_embedded(result);
    if (j.is_object()) {
      out += R"({"json":)";
      write_json(out, j);
    } else {
      out += R"({"text":)";
      write_json(out, nlohmann::json(result.empty() ? std::string(" ") : result));
    }
    out += "}]}}";
    return true;
  }
};

}  // namespace

bool write_bedrock_conversation(const RequestBody& in, std::string& out) {
  const Member* messages = in.present("messages");
  if (!messages) return false;
  return Writer(in, out).write(*messages);
}

}  // namespace llmgate::providers
