// A client's JSON request body, admitted without building a DOM.
//
// parse() validates the whole text in one pass (json_scan.h: exactly what
// nlohmann accepts) and records where each top-level member is. Admission
// reads the few members it judges from that index; an OpenAI-family protocol
// builds the upstream body by splicing -- the client's own member texts, with
// `model`, `stream` and `stream_options` replaced and the gateway's `route`
// left out -- so a 60 KB conversation is scanned once and copied once, never
// parsed into a DOM and serialised again (that cost ~750 us per request). A
// translating protocol (Anthropic, Gemini) asks for dom(), parsed on first
// use. Beast-free.
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "providers/json_scan.h"

namespace llmgate::providers {

class RequestBody {
 public:
  using Value = JsonScanner::Value;
  using Type = Value::Type;

  // One member (or array element): where its text is and what its value is.
  // Offsets, not views, so a RequestBody copies and moves safely.
  struct Member {
    std::size_t begin = 0;  // the member's text: [begin, end) from the key's quote
    std::size_t value = 0;  // where its value's text starts
    std::size_t end = 0;    // past its value
    Value v;                // the value's type, size and number
    // The decoded key: text_[key_at, key_at + key_size), or keys_[key_at]
    // when it had escapes; empty when longer than JsonScanner::kKeyCap.
    std::size_t key_at = 0;
    std::size_t key_size = 0;
    std::size_t key_end = 0;  // past the key's closing quote: [begin, key_end) is its text
    bool key_owned = false;
    bool removed = false;     // erase()d: not part of the document any more
    bool superseded = false;  // a later member has the same key (nlohmann keeps the last)
  };

  // Why a body is not a JSON object.
  struct Invalid {
    enum class Reason {
      kNulByte,    // a raw NUL (nlohmann's lexer would stop there, dropping the rest)
      kTooDeep,    // nested past kMaxJsonDepth (never handed to nlohmann: its stack)
      kSyntax,     // not JSON: `message` has nlohmann's words for why
      kNotObject,  // JSON, but not an object
    };
    Reason reason = Reason::kSyntax;
    std::string message;
  };

  RequestBody() = default;

  // Validates `text` and indexes its top-level members.
  static std::variant<RequestBody, Invalid> parse(std::string text);
  // From a document (tests, fuzzers): its dump(), parsed.
  static RequestBody from(const nlohmann::json& doc);

  const std::string& text() const { return text_; }
  const std::vector<Member>& members() const { return members_; }

  // The member named `key` (the last when repeated: nlohmann keeps the last),
  // or null.
  const Member* find(std::string_view key) const;
  bool contains(std::string_view key) const { return find(key) != nullptr; }
  // find(), unless the value is null (providers::member's rule: a null
  // member is unset).
  const Member* present(std::string_view key) const {
    const Member* m = find(key);
    return m && m->v.type != Type::kNull ? m : nullptr;
  }
  // A member's value as text, and as a document (parsed on each call: for
  // small values).
  std::string_view text_of(const Member& m) const {
    return std::string_view(text_).substr(m.value, m.end - m.value);
  }
  nlohmann::json json_of(const Member& m) const;
  // A string member's decoded value (its text when it has no escapes).
  std::string string_of(const Member& m) const;
  std::string_view key(const Member& m) const {
    return m.key_owned ? std::string_view(keys_[m.key_at])
                       : std::string_view(text_).substr(m.key_at, m.key_size);
  }
  // In an object value `m`: the member named `key` (the last when repeated),
  // or nullopt. Its key is not kept (key() reads "").
  std::optional<Member> member_of(const Member& m, std::string_view key) const;
  // The elements of an array value `m` (their keys read ""): on(i, element)
  // for each in order until it returns false. False when it did (or `m` is
  // not an array).
  template <typename F>
  bool each_element(const Member& m, F&& on) const {
    return each_element(m, &on, [](void* f, std::size_t i, const Member& e) {
      return (*static_cast<std::remove_reference_t<F>*>(f))(i, e);
    });
  }

  // For a reader of what parse() validated, several times quicker than
  // member_of() and each_element(), which scan and validate again (a
  // translator that reads each message and each of its blocks): the
  // members of an object value `m` in order, each with its decoded key,
  // on(key, member); the elements of an array value, on(i, element) until
  // it returns false (then false). Each member's bounds and Value::type are
  // set, and `escaped` for a string, the number fields for a number; not
  // Value::size or count, nor the member's key fields. Strings are skipped
  // with an SSE2 search for their quotes (json_value_end), objects and
  // arrays of JsonScanner::kMinExtent bytes or more by the extent the
  // index recorded (value_end). False when `m` is not of the type.
  template <typename F>
  bool walk_members(const Member& m, F&& on) const {
    return walk_members(m, &on, [](void* f, std::string_view key, const Member& e) {
      (*static_cast<std::remove_reference_t<F>*>(f))(key, e);
    });
  }
  template <typename F>
  bool walk_elements(const Member& m, F&& on) const {
    return walk_elements(m, &on, [](void* f, std::size_t i, const Member& e) {
      return (*static_cast<std::remove_reference_t<F>*>(f))(i, e);
    });
  }

  // each_element, and for an object element its member named `key` as
  // member_of() gives it, found in the same scan (a conversation's messages
  // scanned once, not twice): on(i, element, member or nullptr).
  template <typename F>
  bool each_element_with(const Member& m, std::string_view key, F&& on) const {
    return each_element_with(m, key, &on,
                             [](void* f, std::size_t i, const Member& e, const Member* member) {
                               return (*static_cast<std::remove_reference_t<F>*>(f))(i, e, member);
                             });
  }

  // The document but its member `key`, each member parsed on its own: the
  // small fields of a request whose large one is read from its text (a
  // translator's conversation). Nullopt when a member's key reads "" (the
  // empty key, or one longer than the index keeps).
  std::optional<nlohmann::json> document_without(std::string_view key) const;

  // Takes `key` out of the document (every occurrence; the DOM too once
  // parsed). Returns the (last) value's document, or null when absent.
  nlohmann::json erase(std::string_view key);

  // The whole document, parsed on first use (without erased members). A
  // translating protocol may edit it in place; the text is not affected.
  nlohmann::json& dom();

  // The document with top-level members replaced or added (`set`: key and
  // its value as JSON text; in the place of the key's first occurrence, its
  // repeats dropped; appended when absent) and taken out (`drop`). Every
  // other member's text is copied as the client sent it -- of a repeated
  // key only the last occurrence, the one admission read (nlohmann keeps the
  // last; an upstream that kept the first would see a value never checked).
  // A `set` value: JSON text, or (SpliceValue::string) a text to write as a
  // JSON string -- quoted and escaped straight into the document, no
  // temporary (a model name is longer than a std::string holds inline).
  struct SpliceValue {
    SpliceValue(std::string_view json) : text(json) {}    // NOLINT: JSON text, implicitly
    SpliceValue(const char* json) : text(json) {}         // NOLINT
    SpliceValue(const std::string& json) : text(json) {}  // NOLINT
    static SpliceValue string(std::string_view s) {
      SpliceValue v(s);
      v.quote = true;
      return v;
    }
    std::string_view text;
    bool quote = false;
  };
  std::string spliced(std::initializer_list<std::pair<std::string_view, SpliceValue>> set,
                      std::initializer_list<std::string_view> drop = {}) const;

  // Where the value at offset `at` of the text ends (json_value_end's
  // answer): an object or array of at least JsonScanner::kMinExtent bytes
  // looked up in what the index recorded, not scanned again -- a walk that
  // reads a message's role passes over its content without reading it.
  std::size_t value_end(std::size_t at) const;

 private:
  std::string text_;
  std::vector<Member> members_;
  // What tells keys apart: the decoded key, or for those that read "" (the
  // empty key, keys longer than kKeyCap) their text, quotes and all.
  std::pair<bool, std::string_view> identity(const Member& m) const;
  bool each_element(const Member& m, void* on,
                    bool (*call)(void*, std::size_t, const Member&)) const;
  bool each_element_with(const Member& m, std::string_view key, void* on,
                         bool (*call)(void*, std::size_t, const Member&, const Member*)) const;
  bool walk_members(const Member& m, void* on,
                    void (*call)(void*, std::string_view, const Member&)) const;
  bool walk_elements(const Member& m, void* on,
                     bool (*call)(void*, std::size_t, const Member&)) const;
  // The value at `at` of the text, walked (walk_members' fields).
  Member walked(std::size_t at) const;
  // Scans text_ into members_, with Member::superseded (once: the text does
  // not change); false when it is not a JSON object.
  bool index();

  std::vector<std::string> keys_;  // decoded top-level keys that had escapes (rare)
  JsonScanner::Extents extents_;   // the large containers', by their beginnings
  std::optional<nlohmann::json> dom_;
};

// The members of one object a reader needs (up to kMax names), found in
// one walk of it (RequestBody::walk_members): the last of each name (a parsed document keeps the
// last), and one whose value is null reads as absent (providers::member's rule). Not an object:
// every member absent.
class ObjectFields {
 public:
  static constexpr std::size_t kMax = 6;

  ObjectFields(const RequestBody& in, const RequestBody::Member* obj,
               std::initializer_list<std::string_view> names)
      : in_(in), n_(names.size()) {
    if (names.size() > kMax) throw std::length_error("ObjectFields: more than kMax names");
    std::copy(names.begin(), names.end(), names_.begin());
    if (!obj) return;
    in.walk_members(*obj, [&](std::string_view key, const RequestBody::Member& m) {
      for (std::size_t i = 0; i < n_; ++i) {
        if (key == names_[i]) {
          at_[i] = m;
          set_[i] = m.v.type != RequestBody::Type::kNull;
        }
      }
    });
  }

  // The member `name` (one of those asked for), or null.
  const RequestBody::Member* operator[](std::string_view name) const {
    for (std::size_t i = 0; i < n_; ++i) {
      if (names_[i] == name) return set_[i] ? &at_[i] : nullptr;
    }
    return nullptr;
  }
  // A string member's text between its quotes, escaped as written; "" when absent or not a string
  // (what providers::string_or reads).
  std::string_view raw(std::string_view name) const {
    const RequestBody::Member* m = (*this)[name];
    if (!m || m->v.type != RequestBody::Type::kString) return {};
    return in_.text_of(*m).substr(1, m->end - m->value - 2);
  }
  // The same, decoded.
  std::string str(std::string_view name) const {
    const RequestBody::Member* m = (*this)[name];
    return m ? in_.string_of(*m) : std::string();
  }
  // The same, as a view: of the text when it has no escapes, else of
  // `scratch`, which holds it decoded.
  std::string_view decoded(std::string_view name, std::string& scratch) const {
    const RequestBody::Member* m = (*this)[name];
    if (!m || m->v.type != RequestBody::Type::kString) return {};
    if (!m->v.escaped) return raw(name);
    scratch = in_.string_of(*m);
    return scratch;
  }
  // Whether the member is the string `word` (decoded).
  bool is(std::string_view name, std::string_view word) const {
    const RequestBody::Member* m = (*this)[name];
    if (!m || m->v.type != RequestBody::Type::kString) return false;
    return m->v.escaped ? in_.string_of(*m) == word : raw(name) == word;
  }

 private:
  const RequestBody& in_;
  std::size_t n_;
  std::array<std::string_view, kMax> names_{};
  std::array<RequestBody::Member, kMax> at_{};
  std::array<bool, kMax> set_{};
};

// The top-level members of a JSON object but those named `drop`, each as
// its text (key, colon and value as written): RequestBody::spliced({},
// {drop}) is '{', these joined by ',', and '}'. Nothing is copied, so a
// stream's event can be rewritten without a parse. kept_members() reads
// false (and `out` means nothing) for what it does not answer exactly: not
// a valid JSON object, an escaped key, a key twice (spliced keeps the last),
// more than kMax members.
struct KeptMembers {
  static constexpr std::size_t kMax = 16;
  std::array<std::string_view, kMax> text{};
  std::size_t count = 0;
};
bool kept_members(std::string_view object, std::string_view drop, KeptMembers& out);

// Where the JSON value that starts at `at` in `text` ends (one past it), for
// a text already known to be JSON (a scan that does not validate): past a
// string's closing quote (the first after it not escaped by an odd run of
// backslashes, found with memchr: a conversation is mostly string bytes),
// past the bracket that closes an object or array, or at the comma,
// whitespace or bracket after a number or literal. Past the end of `text`
// (any value from text.size() up) when the value does not end in it.
std::size_t json_value_end(std::string_view text, std::size_t at);

// JSON text already known to be valid without the whitespace between its
// tokens (strings copied whole, found as json_value_end finds them): a
// tool call's input as a serialiser would write it, in its own order.
std::string compact_json(std::string_view json);

// A JSON string literal for `s` (quoted, escaped as nlohmann dumps it).
std::string json_string(std::string_view s);
// The same, appended to `out`.
void append_json_string(std::string& out, std::string_view s);
// A string appended as JSON: `text` already `escaped` (the text between a
// JSON string's quotes as a sender wrote it and a scan validated it) is
// quoted as it is; else it is valid UTF-8 (a parsed document's), written
// by append_json_string as dump() would, without a copy.
inline void append_json_text(std::string& out, std::string_view text, bool escaped) {
  if (escaped)
    out.append(1, '"').append(text).append(1, '"');
  else
    append_json_string(out, text);
}

}  // namespace llmgate::providers
