#include "gateway/shared/resp.h"

#include <charconv>

namespace llmgate::gateway::resp {
namespace {

void append_bulk(std::string& out, std::string_view s) {
  out += '$';
  out += std::to_string(s.size());
  out += "\r\n";
  out += s;
  out += "\r\n";
}

// A recursive-descent parser over one buffer; `pos` moves only on success.
class Reader {
 public:
  Reader(std::string_view in, std::string& error) : in_(in), error_(error) {}
  std::size_t pos() const { return pos_; }

  Status value(Value& out, int depth) {
    if (depth > kMaxDepth) return fail("nesting deeper than " + std::to_string(kMaxDepth));
    if (pos_ >= in_.size()) return Status::kNeedMore;
    const char kind = in_[pos_];
    std::string_view line;
    std::size_t after = 0;
    if (Status s = read_line(pos_ + 1, line, after); s != Status::kValue) return s;
    switch (kind) {
      case '+':
      case '-':
        out.type = kind == '+' ? Value::Type::kSimple : Value::Type::kError;
        out.str.assign(line);
        pos_ = after;
        return Status::kValue;
      case ':': {
        if (!to_int(line, out.integer)) return fail("bad integer");
        out.type = Value::Type::kInteger;
        pos_ = after;
        return Status::kValue;
      }
      case '$': {
        std::int64_t n = 0;
        if (!to_int(line, n) || n < -1) return fail("bad bulk length");
        if (n == -1) {
          out.type = Value::Type::kNull;
          pos_ = after;
          return Status::kValue;
        }
        if (static_cast<std::uint64_t>(n) > kMaxBulk) return fail("bulk string too long");
        const auto len = static_cast<std::size_t>(n);
        if (in_.size() - after < len + 2) return Status::kNeedMore;
        if (in_[after + len] != '\r' || in_[after + len + 1] != '\n')
          return fail("bulk string not terminated by CRLF");
        out.type = Value::Type::kBulk;
        out.str.assign(in_.substr(after, len));
        pos_ = after + len + 2;
        return Status::kValue;
      }
      case '*': {
        std::int64_t n = 0;
        if (!to_int(line, n) || n < -1) return fail("bad array length");
        if (n == -1) {
          out.type = Value::Type::kNull;
          pos_ = after;
          return Status::kValue;
        }
        if (static_cast<std::uint64_t>(n) > kMaxElements) return fail("array too long");
        const std::size_t start = pos_;
        pos_ = after;
        out.type = Value::Type::kArray;
        out.elements.clear();
        // Every element is at least 3 bytes (":0\r\n" is 4): do not reserve
        // more than the bytes at hand could hold.
        out.elements.reserve(
            std::min<std::size_t>(static_cast<std::size_t>(n), (in_.size() - pos_) / 3 + 1));
        for (std::int64_t i = 0; i < n; ++i) {
          Value& e = out.elements.emplace_back();
          if (Status s = value(e, depth + 1); s != Status::kValue) {
            pos_ = start;
            return s;
          }
        }
        return Status::kValue;
      }
      default:
        return fail("unknown reply type byte");
    }
  }

 private:
  Status fail(std::string why) {
    error_ = std::move(why);
    return Status::kError;
  }
  // The line starting at `from`, up to CRLF; `after` is past the CRLF.
  Status read_line(std::size_t from, std::string_view& line, std::size_t& after) {
    const std::size_t cr = in_.find('\r', from);
    if (cr == std::string_view::npos) {
      // A line longer than any sane header or status: not Redis.
      return in_.size() - from > 64 * 1024 ? fail("line too long") : Status::kNeedMore;
    }
    if (cr + 1 >= in_.size()) return Status::kNeedMore;
    if (in_[cr + 1] != '\n') return fail("CR not followed by LF");
    line = in_.substr(from, cr - from);
    after = cr + 2;
    return Status::kValue;
  }
  static bool to_int(std::string_view s, std::int64_t& v) {
    if (s.empty()) return false;
    const char* b = s.data();
    const char* e = b + s.size();
    auto [p, ec] = std::from_chars(b, e, v);
    return ec == std::errc() && p == e;
  }

  std::string_view in_;
  std::string& error_;
  std::size_t pos_ = 0;
};

}  // namespace

void append_command(std::string& out, std::span<const std::string> args) {
  out += '*';
  out += std::to_string(args.size());
  out += "\r\n";
  for (const auto& a : args) append_bulk(out, a);
}

void append_command(std::string& out, std::initializer_list<std::string_view> args) {
  out += '*';
  out += std::to_string(args.size());
  out += "\r\n";
  for (auto a : args) append_bulk(out, a);
}

void append_value(std::string& out, const Value& v) {
  switch (v.type) {
    case Value::Type::kSimple:
    case Value::Type::kError:
      out += v.type == Value::Type::kSimple ? '+' : '-';
      out += v.str;
      out += "\r\n";
      return;
    case Value::Type::kInteger:
      out += ':';
      out += std::to_string(v.integer);
      out += "\r\n";
      return;
    case Value::Type::kBulk:
      append_bulk(out, v.str);
      return;
    case Value::Type::kNull:
      out += "$-1\r\n";
      return;
    case Value::Type::kArray:
      out += '*';
      out += std::to_string(v.elements.size());
      out += "\r\n";
      for (const auto& e : v.elements) append_value(out, e);
      return;
  }
}

Status parse(std::string_view in, Value& out, std::size_t& consumed, std::string& error) {
  Reader r(in, error);
  Status s = r.value(out, 0);
  consumed = s == Status::kValue ? r.pos() : 0;
  return s;
}

}  // namespace llmgate::gateway::resp
