#include "providers/request_body.h"

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include <algorithm>
#include <array>
#include <bit>
#include <cstring>
#include <stdexcept>

namespace llmgate::providers {
namespace {

using Member = RequestBody::Member;

// The top level of a request: each member's key and where its value is.
class TopScanner : public JsonScanner {
 public:
  using JsonScanner::JsonScanner;

  bool scan(std::vector<Member>& out, std::vector<std::string>& keys) {
    if (!open_object()) return false;
    const bool ok = members<true>(1, [&](std::string_view key) {
      Member m;
      m.begin = at(key_begin_);
      m.key_end = at(key_end_);
      if (key_escaped_ && !key.empty()) {
        m.key_owned = true;
        m.key_at = keys.size();
        keys.emplace_back(key);
      } else {
        m.key_at = m.begin + 1;
        m.key_size = key.size();  // 0 for a key longer than kKeyCap: never looked up
      }
      m.value = offset();
      if (!value(1, m.v)) return false;
      m.end = offset();
      out.push_back(m);
      return true;
    });
    ws();
    return ok && at_end();
  }

 private:
  std::size_t at(const char* p) const { return static_cast<std::size_t>(p - begin_); }
};

// Over one value already validated: its members or elements.
class ValueScanner : public JsonScanner {
 public:
  ValueScanner(std::string_view text, std::size_t base) : JsonScanner(text), base_(base) {}

  template <typename F>
  bool object(F&& on_member) {
    if (!eat('{')) return false;
    return members<true>(1, [&](std::string_view key) {
      Member m;
      if (!value_here(m)) return false;
      on_member(key, m);
      return true;
    });
  }

  // Each element as array() gives it, and for an object element its member
  // named `key` (the last when repeated, as object() finds it), in the same
  // pass: on(element, member or nullopt).
  template <typename F>
  bool array_with_member(std::string_view key, F&& on) {
    if (!eat('[')) return false;
    return elements(1, [&] {
      Member m;
      m.begin = m.value = base_ + offset();
      std::optional<Member> found;
      if (p_ != end_ && *p_ == '{') {
        m.v = Value{};
        m.v.type = Value::Type::kObject;
        const bool ok = object([&](std::string_view k, const Member& e) {
          ++m.v.size;
          if (k == key) found = e;
        });
        if (!ok) return false;
      } else if (!value(1, m.v)) {
        return false;
      }
      m.end = base_ + offset();
      return on(m, found);
    });
  }

  // Each element, until `on` returns false (then false, as for invalid text).
  template <typename F>
  bool array(F&& on) {
    if (!eat('[')) return false;
    return elements(1, [&] {
      Member m;
      return value_here(m) && on(m);
    });
  }

 private:
  // The value at the cursor, as a member without a key.
  bool value_here(Member& m) {
    m.begin = m.value = base_ + offset();
    if (!value(1, m.v)) return false;
    m.end = base_ + offset();
    return true;
  }

  std::size_t base_;
};

// The top level of an object as kept_members() reads it.
class KeptScanner : public JsonScanner {
 public:
  using JsonScanner::JsonScanner;

  bool scan(std::string_view drop, KeptMembers& out) {
    ws();
    if (!eat('{')) return false;
    std::array<std::string_view, KeptMembers::kMax> keys;
    std::size_t n = 0;
    out.count = 0;
    const bool ok = members<true>(1, [&](std::string_view key) {
      // Long keys read "" (kKeyCap): two of them are "a key twice" here.
      if (key_escaped_ || n == keys.size()) return false;
      for (std::size_t i = 0; i < n; ++i) {
        if (keys[i] == key) return false;
      }
      keys[n++] = key;
      const char* const begin = key_begin_;
      Value v;
      if (!value(1, v)) return false;
      if (key != drop) out.text[out.count++] = {begin, static_cast<std::size_t>(p_ - begin)};
      return true;
    });
    ws();
    return ok && at_end();
  }
};

}  // namespace

bool kept_members(std::string_view object, std::string_view drop, KeptMembers& out) {
  return KeptScanner(object).scan(drop, out);
}

std::variant<RequestBody, RequestBody::Invalid> RequestBody::parse(std::string text) {
  RequestBody b;
  b.text_ = std::move(text);
  b.members_.reserve(8);
  if (b.index()) return b;
  // Not a JSON object: why (the rare, slow path).
  using Reason = Invalid::Reason;
  if (b.text_.find('\0') != std::string::npos) return Invalid{Reason::kNulByte, {}};
  if (json_too_deep(b.text_)) return Invalid{Reason::kTooDeep, {}};
  nlohmann::json doc;
  try {
    doc = nlohmann::json::parse(b.text_);
  } catch (const nlohmann::json::exception& e) {
    // parse_error, and out_of_range for a number no double holds (1e400).
    return Invalid{Reason::kSyntax, e.what()};
  }
  if (!doc.is_object()) return Invalid{Reason::kNotObject, {}};
  // The scanner and nlohmann disagree (the fuzzers say they do not): take
  // nlohmann's reading.
  RequestBody again;
  again.text_ = doc.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  if (again.index()) return again;
  return Invalid{Reason::kSyntax, "the document could not be read"};
}

RequestBody RequestBody::from(const nlohmann::json& doc) {
  auto r = parse(doc.dump());
  if (auto* b = std::get_if<RequestBody>(&r)) return std::move(*b);
  throw std::invalid_argument("RequestBody::from: " + std::get<Invalid>(r).message);
}

const Member* RequestBody::find(std::string_view k) const {
  for (auto it = members_.rbegin(); it != members_.rend(); ++it) {
    if (!it->removed && key(*it) == k) return &*it;
  }
  return nullptr;
}

nlohmann::json RequestBody::json_of(const Member& m) const {
  return nlohmann::json::parse(text_of(m));
}

std::optional<nlohmann::json> RequestBody::document_without(std::string_view key) const {
  nlohmann::json doc = nlohmann::json::object();
  for (const Member& m : members_) {
    if (m.removed || m.superseded) continue;
    const std::string_view k = this->key(m);
    if (k.empty()) return std::nullopt;
    if (k != key) doc[std::string(k)] = json_of(m);
  }
  return doc;
}

std::string RequestBody::string_of(const Member& m) const {
  if (m.v.type != Type::kString) return {};
  if (!m.v.escaped) return std::string(text_of(m).substr(1, m.end - m.value - 2));
  return json_of(m).get<std::string>();
}

std::optional<Member> RequestBody::member_of(const Member& m, std::string_view key) const {
  std::optional<Member> found;
  if (m.v.type != Type::kObject) return found;
  ValueScanner(text_of(m), m.value).object([&](std::string_view k, const Member& e) {
    if (k == key) found = e;  // the last one, as nlohmann keeps it
  });
  return found;
}

std::size_t RequestBody::value_end(std::size_t at) const {
  if (at < text_.size() && (text_[at] == '{' || text_[at] == '[') && !extents_.empty()) {
    const auto e =
        std::lower_bound(extents_.begin(), extents_.end(), at,
                         [](const JsonScanner::Extent& x, std::size_t a) { return x.begin < a; });
    if (e != extents_.end() && e->begin == at) return e->end;
  }
  return json_value_end(text_, at);
}

RequestBody::Member RequestBody::walked(std::size_t at) const {
  Member m;
  m.begin = m.value = at;
  m.end = std::min(value_end(at), text_.size());
  switch (text_[at]) {
    case '"':
      m.v.type = Type::kString;
      m.v.escaped = std::memchr(text_.data() + at, '\\', m.end - at) != nullptr;
      break;
    case '{':
      m.v.type = Type::kObject;
      break;
    case '[':
      m.v.type = Type::kArray;
      break;
    case 't':
      m.v.type = Type::kTrue;
      break;
    case 'f':
      m.v.type = Type::kFalse;
      break;
    case 'n':
      m.v.type = Type::kNull;
      break;
    default:
      JsonScanner(std::string_view(text_).substr(at, m.end - at)).number(m.v);
      m.v.type = Type::kNumber;
  }
  return m;
}

namespace {

bool space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

std::size_t skip_space(std::string_view t, std::size_t p) {
  while (p < t.size() && space(t[p])) ++p;
  return p;
}

}  // namespace

bool RequestBody::walk_members(const Member& m, void* on,
                               void (*call)(void*, std::string_view, const Member&)) const {
  if (m.v.type != Type::kObject) return false;
  const std::string_view t = text_;
  std::size_t p = skip_space(t, m.value + 1);
  std::string decoded;
  while (p < m.end && t[p] == '"') {
    const std::size_t key_end = json_value_end(t, p);
    std::string_view key = t.substr(p + 1, key_end - p - 2);
    if (key.find('\\') != std::string_view::npos) {
      decoded = nlohmann::json::parse(t.substr(p, key_end - p)).get<std::string>();
      key = decoded;
    }
    p = skip_space(t, skip_space(t, key_end) + 1);  // past the colon
    Member e = walked(p);
    e.begin = p;
    call(on, key, e);
    p = skip_space(t, e.end);
    if (p < m.end && t[p] == ',') p = skip_space(t, p + 1);
  }
  return true;
}

bool RequestBody::walk_elements(const Member& m, void* on,
                                bool (*call)(void*, std::size_t, const Member&)) const {
  if (m.v.type != Type::kArray) return false;
  const std::string_view t = text_;
  std::size_t p = skip_space(t, m.value + 1);
  for (std::size_t i = 0; p < m.end && t[p] != ']'; ++i) {
    const Member e = walked(p);
    if (!call(on, i, e)) return false;
    p = skip_space(t, e.end);
    if (p < m.end && t[p] == ',') p = skip_space(t, p + 1);
  }
  return true;
}

bool RequestBody::each_element(const Member& m, void* on,
                               bool (*call)(void*, std::size_t, const Member&)) const {
  if (m.v.type != Type::kArray) return false;
  std::size_t i = 0;
  return ValueScanner(text_of(m), m.value).array([&](const Member& e) { return call(on, i++, e); });
}

bool RequestBody::each_element_with(const Member& m, std::string_view key, void* on,
                                    bool (*call)(void*, std::size_t, const Member&,
                                                 const Member*)) const {
  if (m.v.type != Type::kArray) return false;
  std::size_t i = 0;
  return ValueScanner(text_of(m), m.value)
      .array_with_member(key, [&](const Member& e, const std::optional<Member>& member) {
        return call(on, i++, e, member ? &*member : nullptr);
      });
}

nlohmann::json RequestBody::erase(std::string_view k) {
  nlohmann::json last;
  for (auto& m : members_) {
    if (m.removed || key(m) != k) continue;
    m.removed = true;
    last = json_of(m);
  }
  if (dom_) dom_->erase(std::string(k));
  return last;
}

nlohmann::json& RequestBody::dom() {
  if (!dom_) {
    dom_ = nlohmann::json::parse(text_);
    for (const auto& m : members_) {
      if (m.removed) dom_->erase(std::string(key(m)));
    }
  }
  return *dom_;
}

std::pair<bool, std::string_view> RequestBody::identity(const Member& m) const {
  const std::string_view k = key(m);
  if (!k.empty()) return {false, k};
  return {true, std::string_view(text_).substr(m.begin, m.key_end - m.begin)};
}

bool RequestBody::index() {
  TopScanner scanner(text_);
  scanner.record_extents(&extents_);
  if (!scanner.scan(members_, keys_)) {
    extents_.clear();
    return false;
  }
  // Which members a later one of the same key supersedes.
  const std::size_t n = members_.size();
  constexpr std::size_t kQuadratic = 32;  // a real request has a dozen members
  if (n <= kQuadratic) {
    for (std::size_t i = 0; i < n; ++i) {
      for (std::size_t j = i + 1; j < n && !members_[i].superseded; ++j) {
        members_[i].superseded = identity(members_[i]) == identity(members_[j]);
      }
    }
    return true;
  }
  // Many members (a hostile body): by sorting, not n^2.
  std::vector<std::size_t> order(n);
  for (std::size_t i = 0; i < n; ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    return identity(members_[a]) < identity(members_[b]);
  });
  for (std::size_t i = 0; i + 1 < n; ++i) {
    if (identity(members_[order[i]]) == identity(members_[order[i + 1]])) {
      members_[order[i]].superseded = true;
    }
  }
  return true;
}

std::string RequestBody::spliced(
    std::initializer_list<std::pair<std::string_view, SpliceValue>> set,
    std::initializer_list<std::string_view> drop) const {
  constexpr std::size_t kMaxSet = 8;
  if (set.size() > kMaxSet) throw std::invalid_argument("RequestBody::spliced: too many members");
  std::array<bool, kMaxSet> placed{};
  std::size_t extra = 2;
  for (const auto& [k, v] : set) extra += k.size() + v.text.size() + 6;
  std::string out;
  out.reserve(text_.size() + extra);
  out += '{';
  auto value = [&](const SpliceValue& v) {
    if (v.quote)
      append_json_string(out, v.text);
    else
      out += v.text;
  };
  auto comma = [&] {
    if (out.size() > 1) out += ',';
  };
  for (const auto& m : members_) {
    if (m.removed) continue;
    const std::string_view k = key(m);
    bool skip = false;
    for (std::string_view d : drop) skip = skip || d == k;
    if (skip) continue;
    std::size_t i = 0;
    for (; i < set.size(); ++i) {
      if (set.begin()[i].first == k) break;
    }
    if (i < set.size()) {
      if (placed[i]) continue;  // a repeat: the one value stands in the first's place
      placed[i] = true;
      comma();
      out.append(text_, m.begin, m.value - m.begin);  // the key as the client wrote it
      value(set.begin()[i].second);
    } else if (!m.superseded) {
      comma();
      out.append(text_, m.begin, m.end - m.begin);
    }
  }
  for (std::size_t i = 0; i < set.size(); ++i) {
    if (placed[i]) continue;
    comma();
    append_json_string(out, set.begin()[i].first);
    out += ':';
    value(set.begin()[i].second);
  }
  out += '}';
  return out;
}

std::string json_string(std::string_view s) {
  std::string out;
  out.reserve(s.size() + 2);
  append_json_string(out, s);
  return out;
}

void append_json_string(std::string& out, std::string_view s) {
  // What each byte that needs it becomes: the short escapes, \u00XX for the
  // other control characters; every other byte (UTF-8 included) as it is.
  static constexpr auto kEscape = [] {
    std::array<std::array<char, 7>, 128> t{};  // NUL-terminated; empty: as it is
    constexpr char kHex[] = "0123456789abcdef";
    for (int c = 0; c < 0x20; ++c) t[c] = {'\\', 'u', '0', '0', kHex[c >> 4], kHex[c & 15], 0};
    t['\b'] = {'\\', 'b'};
    t['\f'] = {'\\', 'f'};
    t['\n'] = {'\\', 'n'};
    t['\r'] = {'\\', 'r'};
    t['\t'] = {'\\', 't'};
    t['"'] = {'\\', '"'};
    t['\\'] = {'\\', '\\'};
    return t;
  }();
  // JsonScanner's test of eight bytes at a time (it also stops at UTF-8
  // bytes, which the loop passes as they are): a conversation's text is
  // written at memcpy's pace, not a byte at a time.
  struct Words : JsonScanner {
    using JsonScanner::special_bytes;
  };
  out.reserve(out.size() + s.size() + 2);
  out += '"';
  std::size_t run = 0;  // start of the bytes not yet copied
  for (std::size_t i = 0; i < s.size(); ++i) {
    while (s.size() - i >= 8 && Words::special_bytes(s.data() + i) == 0) i += 8;
    if (i == s.size()) break;
    const auto c = static_cast<unsigned char>(s[i]);
    if (c >= 128 || kEscape[c][0] == 0) continue;
    out.append(s, run, i - run);
    out += kEscape[c].data();
    run = i + 1;
  }
  out.append(s, run);
  out += '"';
}

namespace {

// Past the closing quote of the string whose opening quote is at `p`.
std::size_t string_end(std::string_view t, std::size_t p) {
  // (The text is valid JSON: a quote ends the string unless an odd run of
  // backslashes right before it escapes it.) The quotes found sixteen bytes
  // at a time with SSE2 -- a conversation's strings are long, and an
  // agent's code in them is full of escaped newlines, which a search for
  // quotes alone passes over.
  const char* const s = t.data();
  const std::size_t n = t.size();
  const auto escaped = [&](std::size_t q) {
    std::size_t slashes = 0;  // the run of backslashes right before it, inside the string
    while (q - slashes > p + 1 && s[q - 1 - slashes] == '\\') ++slashes;
    return slashes % 2 == 1;
  };
  std::size_t i = p + 1;
#if defined(__SSE2__)
  const __m128i quote = _mm_set1_epi8('"');
  while (i + 16 <= n) {
    auto quotes = static_cast<unsigned>(_mm_movemask_epi8(
        _mm_cmpeq_epi8(_mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i)), quote)));
    while (quotes != 0) {
      const std::size_t q = i + static_cast<std::size_t>(std::countr_zero(quotes));
      if (!escaped(q)) return q + 1;
      quotes &= quotes - 1;
    }
    i += 16;
  }
#endif
  for (; i < n; ++i) {
    if (s[i] == '"' && !escaped(i)) return i + 1;
  }
  return n;
}

}  // namespace

std::size_t json_value_end(std::string_view t, std::size_t p) {
  int depth = 0;
  while (p < t.size()) {
    const char c = t[p];
    if (c == '"') {
      p = string_end(t, p);
      if (depth == 0) return p;
      continue;
    }
    if (c == '{' || c == '[') {
      ++depth;
    } else if (c == '}' || c == ']') {
      if (depth == 0) return p;  // the end of a number or literal: the array's
      if (--depth == 0) return p + 1;
    } else if (depth == 0 && (c == ',' || space(c))) {
      return p;  // the end of a number or literal
    }
    ++p;
  }
  return t.size();
}

std::string compact_json(std::string_view t) {
  std::string out;
  out.reserve(t.size());
  for (std::size_t p = 0; p < t.size();) {
    if (t[p] == '"') {
      const std::size_t end = std::min(string_end(t, p), t.size());
      out.append(t, p, end - p);
      p = end;
    } else {
      if (!space(t[p])) out += t[p];
      ++p;
    }
  }
  return out;
}

}  // namespace llmgate::providers
