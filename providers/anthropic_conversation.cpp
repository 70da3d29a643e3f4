#include "providers/anthropic_conversation.h"

#include <cstddef>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "providers/conversation_writer.h"
#include "providers/json_write.h"

namespace llmgate::providers {
namespace {

using Member = RequestBody::Member;
using Type = RequestBody::Type;

constexpr std::string_view kEmpty = "\"\"";  // an empty string's text

// One message's content as the document's translation holds it: a string
// (its text, quotes included, as the client wrote it) or blocks (their
// texts joined by ',').
struct Content {
  bool is_string = true;
  std::string_view str = kEmpty;
  std::string blocks;
  std::size_t count = 0;
  bool last_marked = false;  // the last block has a cache_control

  void reset() {
    is_string = true;
    str = kEmpty;
    blocks.clear();
    count = 0;
    last_marked = false;
  }
  // Starts a block: the ',' before it. Returns the blocks' text.
  std::string& next() {
    if (count++ > 0) blocks += ',';
    last_marked = false;
    return blocks;
  }
  // as_blocks(): a string as one text block, none when it is empty.
  void to_blocks() {
    if (!is_string) return;
    is_string = false;
    if (str != kEmpty) next().append(R"({"type":"text","text":)").append(str).append(1, '}');
  }
};

class Writer {
 public:
  Writer(const RequestBody& in, std::string& out) : in_(in), out_(out) {}

  bool write(const Member& messages) {
    if (messages.v.type != Type::kArray) return false;
    out_ += "\"messages\":[";
    const bool ok =
        in_.walk_elements(messages, [&](std::size_t, const Member& m) { return message(m); });
    if (!ok) return false;
    if (open_) out_ += last_is_string_ ? "}" : "]}";
    out_ += ']';
    if (system_.count > 0) {
      out_ += ",\"system\":";
      if (system_plain_) {
        // Plain texts as one string, a paragraph each (system_of()).
        out_ += '"';
        for (std::size_t i = 0; i < system_texts_.size(); ++i) {
          if (i > 0) out_ += "\\n\\n";
          out_ += system_texts_[i];
        }
        out_ += '"';
      } else {
        out_.append(1, '[').append(system_.blocks).append(1, ']');
      }
    }
    return true;
  }

 private:
  bool message(const Member& m) {
    if (m.v.type != Type::kObject) return false;
    const ObjectFields f(
        in_, &m,
        {"role", "content", "cache_control", "tool_calls", "function_call", "tool_call_id"});
    content_.reset();
    std::string scratch;
    const std::string_view role = f.decoded("role", scratch);  // "" when not a string
    if (role == "user") {
      if (!f["content"] || !content(f["content"], true) || !mark_message(f)) return false;
      append("user");
      return true;
    }
    if (role == "assistant") return assistant(f);
    if (role == "tool") return tool_result(f);
    if (role == "system" || role == "developer") return system(f);
    return false;
  }

  bool system(const ObjectFields& f) {
    if (!content(f["content"], false)) return false;
    if (f["cache_control"] || !content_.is_string) system_plain_ = false;
    if (!mark_message(f)) return false;
    if (content_.is_string) {
      if (content_.str == kEmpty) return true;
      system_texts_.push_back(content_.str.substr(1, content_.str.size() - 2));
    }
    content_.to_blocks();
    if (content_.count == 0) return true;
    system_.next().append(content_.blocks);
    system_.count += content_.count - 1;
    return true;
  }

  bool assistant(const ObjectFields& f) {
    if (f["function_call"]) return false;
    if (!content(f["content"], false)) return false;
    if (const Member* calls = f["tool_calls"]) {
      if (calls->v.type != Type::kArray) return false;
      content_.to_blocks();
      const bool ok = in_.walk_elements(
          *calls, [&](std::size_t, const Member& call) { return tool_use(call); });
      if (!ok) return false;
    }
    if (!mark_message(f)) return false;
    append("assistant");
    return true;
  }

  // A tool call as a tool_use block, its arguments (a JSON text) as the
  // input object.
  bool tool_use(const Member& call) {
    const ObjectFields c(in_, &call, {"type", "id", "function"});
    if (c["type"] && !c.is("type", "function")) return false;
    const Member* id = c["id"];
    if (!id || id->v.type != Type::kString) return false;
    const ObjectFields fn(in_, c["function"], {"name", "arguments"});
    const Member* name = fn["name"];
    const Member* args = fn["arguments"];
    if (!name || name->v.type != Type::kString || !args || args->v.type != Type::kString)
      return false;
    std::string& out = content_.next();
    out.append(R"({"type":"tool_use","id":)").append(in_.text_of(*id));
    out.append(R"(,"name":)").append(in_.text_of(*name)).append(R"(,"input":)");
    // Some servers write a call without parameters as "": it means {}.
    if (!conversation::append_arguments_object(out, in_.string_of(*args))) return false;
    out += '}';
    return true;
  }

  bool tool_result(const ObjectFields& f) {
    const Member* id = f["tool_call_id"];
    if (!id || id->v.type != Type::kString) return false;
    if (!content(f["content"], false)) return false;
    const Member* cc = f["cache_control"];
    if (cc && cc->v.type != Type::kObject) return false;
    // The block, as the only one of a content of blocks.
    block_.clear();
    block_.append(R"({"type":"tool_result","tool_use_id":)").append(in_.text_of(*id));
    block_.append(R"(,"content":)");
    if (content_.is_string)
      block_.append(content_.str);
    else
      block_.append(1, '[').append(content_.blocks).append(1, ']');
    if (cc) marked(block_, *cc);
    block_ += '}';
    content_.reset();
    content_.is_string = false;
    content_.next().append(block_);
    append("user");
    return true;
  }

  // content_of(): absent is "", a string stays one, parts become blocks.
  bool content(const Member* c, bool images) {
    if (!c) return true;
    if (c->v.type == Type::kString) {
      content_.str = in_.text_of(*c);
      return true;
    }
    if (c->v.type != Type::kArray) return false;
    content_.is_string = false;
    const bool ok = in_.walk_elements(
        *c, [&](std::size_t, const Member& part) { return this->part(part, images); });
    return ok;
  }

  // A content part: text anywhere, an image in a user turn.
  bool part(const Member& p, bool images) {
    const ObjectFields f(in_, &p, {"type", "text", "image_url", "cache_control"});
    const Member* type = f["type"];
    if (!type || type->v.type != Type::kString) return false;
    if (f.is("type", "text")) {
      const Member* text = f["text"];
      if (!text || text->v.type != Type::kString) return false;
      content_.next().append(R"({"type":"text","text":)").append(in_.text_of(*text));
    } else if (images && f.is("type", "image_url")) {
      if (!image(f["image_url"])) return false;
    } else {
      return false;
    }
    if (const Member* cc = f["cache_control"]) {
      if (cc->v.type != Type::kObject) return false;
      marked(content_.blocks, *cc);
      content_.blocks += '}';
      content_.last_marked = true;
      return true;
    }
    content_.blocks += '}';
    return true;
  }

  // An image part's source, its block left open: an http(s) URL, or a
  // base64 data URL's media type and data (an escaped URL: declined).
  bool image(const Member* image_url) {
    if (!image_url) return false;
    const Member* url = image_url;
    const ObjectFields f(in_, image_url->v.type == Type::kObject ? image_url : nullptr, {"url"});
    if (image_url->v.type == Type::kObject) url = f["url"];
    if (!url || url->v.type != Type::kString || url->v.escaped) return false;
    const std::string_view u = in_.text_of(*url).substr(1, url->end - url->value - 2);
    std::string& out = content_.next();
    if (u.starts_with("http://") || u.starts_with("https://")) {
      out.append(R"({"type":"image","source":{"type":"url","url":")").append(u).append("\"}");
      return true;
    }
    constexpr std::string_view kBase64 = ";base64,";
    const auto marker = u.find(kBase64);
    if (!u.starts_with("data:") || marker == std::string_view::npos) return false;
    out.append(R"({"type":"image","source":{"type":"base64","media_type":")")
        .append(u.substr(5, marker - 5))
        .append(R"(","data":")")
        .append(u.substr(marker + kBase64.size()))
        .append("\"}");
    return true;
  }

  // A block's `,"cache_control":{...}`. The mark is written from its
  // document, as the document's translation writes it: the client's text
  // could hold a key twice, which an upstream may read otherwise than the
  // last one (request_body.h, spliced()).
  void marked(std::string& block, const Member& cc) {
    block.append(R"(,"cache_control":)");
    write_json(block, in_.json_of(cc));
  }

  // message_cache_control(): a message's mark goes on its last block.
  bool mark_message(const ObjectFields& f) {
    const Member* cc = f["cache_control"];
    if (!cc) return true;
    if (content_.is_string) {
      content_.is_string = false;
      content_.next().append(R"({"type":"text","text":)").append(content_.str).append(1, '}');
    }
    if (content_.count == 0 || cc->v.type != Type::kObject || content_.last_marked) return false;
    content_.blocks.pop_back();  // the last block's '}'
    marked(content_.blocks, *cc);
    content_.blocks += '}';
    content_.last_marked = true;
    return true;
  }

  // append(): a run of one role is one turn (Anthropic alternates).
  void append(std::string_view role) {
    if (open_ && role == last_role_) {
      if (last_is_string_) {
        // The turn's string becomes its first block (none when empty).
        const std::string_view was(out_.data() + content_at_, out_.size() - content_at_);
        if (was == kEmpty) {
          out_.resize(content_at_);
          out_ += '[';
          last_count_ = 0;
        } else {
          out_.insert(content_at_, R"([{"type":"text","text":)");
          out_ += '}';
          last_count_ = 1;
        }
        last_is_string_ = false;
      }
      content_.to_blocks();
      if (content_.count == 0) return;
      if (last_count_ > 0) out_ += ',';
      out_ += content_.blocks;
      last_count_ += content_.count;
      return;
    }
    if (open_) out_ += last_is_string_ ? "}," : "]},";
    out_.append(R"({"role":")").append(role).append(R"(","content":)");
    content_at_ = out_.size();
    open_ = true;
    last_role_ = role;
    last_is_string_ = content_.is_string;
    if (content_.is_string) {
      out_ += content_.str;
    } else {
      out_.append(1, '[').append(content_.blocks);
      last_count_ = content_.count;
    }
  }

  const RequestBody& in_;
  std::string& out_;
  Content content_;    // the message being read
  std::string block_;  // a tool result's block
  bool open_ = false;  // a turn is written and not closed
  std::string_view last_role_;
  bool last_is_string_ = false;
  std::size_t content_at_ = 0;  // where the open turn's content starts in out_
  std::size_t last_count_ = 0;  // the open turn's blocks
  // The system prompt: its blocks, and while every part is a plain string
  // its texts (between their quotes).
  Content system_;
  bool system_plain_ = true;
  std::vector<std::string_view> system_texts_;
};

}  // namespace

bool write_anthropic_conversation(const RequestBody& in, std::string& out) {
  const Member* messages = in.present("messages");
  if (!messages) return false;
  return Writer(in, out).write(*messages);
}

}  // namespace llmgate::providers
