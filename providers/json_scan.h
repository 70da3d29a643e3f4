// A single-pass validating JSON scanner: the base of the hot-path readers that
// must not build a DOM (inspect_chunk's chunk classification, RequestBody's
// admission of a client request). One pass over the text, no allocation.
//
// It accepts exactly the documents nlohmann::json::parse accepts (RFC 8259; a
// leading UTF-8 BOM; strings of well-formed UTF-8 with no raw control
// characters and no lone surrogates in \u escapes; numbers that do not
// overflow a double; space, tab, CR and LF as whitespace) -- the fuzzers
// (fuzz_chunk_inspect, fuzz_chat_request) hold it to that. A reader derives
// from it, walks the document with value() and members(), and looks at what
// it needs on the way. Beast-free, nlohmann-free.
#pragma once

#include <algorithm>
#include <array>
#include <bit>
#include <boost/container/small_vector.hpp>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "providers/json_depth.h"
#include "providers/utf8.h"

namespace llmgate::providers {

class JsonScanner {
 public:
  explicit JsonScanner(std::string_view text)
      : p_(text.data()), begin_(text.data()), end_(text.data() + text.size()) {}

  // Longer than every key a reader compares; longer keys read as "".
  static constexpr std::size_t kKeyCap = 32;

  // Counts from an upstream are untrusted: a token count is a non-negative
  // integer up to this (10^12), else 0, so sums cannot overflow.
  static constexpr std::int64_t kMaxCount = 1'000'000'000'000;

  // Where an object or array value begins and ends (past it), as offsets
  // in the text.
  struct Extent {
    std::uint32_t begin = 0;
    std::uint32_t end = 0;
  };
  // Containers shorter than this are not recorded: passing over one is
  // cheaper than looking it up.
  static constexpr std::uint32_t kMinExtent = 64;
  // A short request's few (its messages array, a message or two) are held
  // inline: no allocation.
  using Extents = boost::container::small_vector<Extent, 8>;
  // value() records the extent of each object and array of at least
  // kMinExtent bytes into `out`, in the order of their beginnings (a text
  // of 4 GiB or more records none): RequestBody's index of the containers
  // its readers pass over (RequestBody::walked).
  void record_extents(Extents* out) {
    extents_ = end_ - begin_ < (std::ptrdiff_t{1} << 32) ? out : nullptr;
  }

  struct Value {
    enum class Type { kNull, kFalse, kTrue, kString, kArray, kObject, kNumber };
    Type type = Type::kNull;
    std::size_t size = 0;  // kString: decoded bytes; kArray: elements; kObject: members
    // kNumber: the value as a token count (0..kMaxCount, else 0).
    std::int64_t count = 0;
    // kNumber: nlohmann reads it as an integer (no fraction or exponent, fits
    // a 64-bit integer, signed or not), and its value when that fits int64.
    bool integer = false;
    bool fits_int64 = false;
    std::int64_t int64 = 0;
    bool escaped = false;  // kString: the text has a backslash escape

    // A number nlohmann reads as an integer that fits int64 (what
    // anthropic::integer() takes from a document): its value.
    std::optional<std::int64_t> as_int64() const {
      if (type != Type::kNumber || !integer || !fits_int64) return std::nullopt;
      return int64;
    }
  };

  // A string, array or object with something in it.
  static bool non_empty(const Value& v) {
    return (v.type == Value::Type::kString || v.type == Value::Type::kArray ||
            v.type == Value::Type::kObject) &&
           v.size > 0;
  }

  // Sets `bit` in `seen`; false if it was set (a repeated key).
  static bool once(unsigned& seen, unsigned bit) {
    if (seen & bit) return false;
    seen |= bit;
    return true;
  }

  // key == lit: a memcmp of a constant length, which the compiler turns into
  // a few word compares (no call, no loop).
  template <std::size_t N>
  static bool is(std::string_view key, const char (&lit)[N]) {
    return key.size() == N - 1 && std::memcmp(key.data(), lit, N - 1) == 0;
  }

  // Offset of the cursor in the text.
  std::size_t offset() const { return static_cast<std::size_t>(p_ - begin_); }
  bool at_end() const { return p_ == end_; }

  // Inlined everywhere: most calls find no whitespace at all.
  [[gnu::always_inline]] void ws() {
    while (p_ != end_ && static_cast<unsigned char>(*p_) <= ' ' &&
           (*p_ == ' ' || *p_ == '\n' || *p_ == '\r' || *p_ == '\t')) {
      ++p_;
    }
  }
  bool eat(char ch) {
    if (p_ == end_ || *p_ != ch) return false;
    ++p_;
    return true;
  }
  // Past a UTF-8 byte order mark at the cursor (nlohmann skips one).
  void skip_bom() {
    if (end_ - p_ >= 3 && std::memcmp(p_, "\xEF\xBB\xBF", 3) == 0) p_ += 3;
  }
  // The document's top-level object opened: a BOM, whitespace and its '{'
  // passed (members(1, ...) reads it next).
  bool open_object() {
    skip_bom();
    ws();
    return eat('{');
  }
  // A null at the cursor (value() then reads it).
  bool at_null() const { return p_ != end_ && *p_ == 'n'; }
  // The value at the cursor, inside a container at `depth`, passed over
  // (and validated).
  bool skip(int depth) {
    Value v;
    return value(depth, v);
  }
  // A string value's text between its quotes: [at, cursor) is the value.
  std::string_view inner(const char* at) const {
    return {at + 1, static_cast<std::size_t>(p_ - at) - 2};
  }

  // p_ is past the opening quote. `size` gets the decoded length in bytes
  // (what the std::string nlohmann builds would hold). With kCapture, `key`
  // gets the decoded string when it is at most kKeyCap bytes long, else "":
  // the text itself when it has no escapes, else decoded into `buf` (kKeyCap
  // bytes). `escaped` (when not null) tells whether there was an escape.
  template <bool kCapture>
  bool string(std::size_t& size, char* buf, std::string_view* key, bool* escaped_out = nullptr);
  bool number(Value& v);
  // Any value at p_, inside a container at `depth` (0: the top level).
  bool value(int depth, Value& v);
  // p_ is past the '{' of an object at `depth`. For each member, p_ at its
  // value, on_member(key) must consume the value; the key is the decoded key
  // when it is at most kKeyCap bytes long and kCapture, else "". During the
  // call key_begin_ / key_end_ delimit the key's text (quotes included) and
  // key_escaped_ tells whether it had an escape. `resume`: p_ is where a
  // key is due (past the '{', or past a member's comma), whitespace before
  // it allowed, the object scanned up to there.
  template <bool kCapture, typename OnMember>
  bool members(int depth, OnMember&& on_member, bool resume = false);
  // p_ is past the '[' of an array at `depth`. For each element, p_ at it,
  // on_element() must consume it.
  template <typename OnElement>
  bool elements(int depth, OnElement&& on_element);

 protected:
  // Bytes a JSON string holds as they are: printable ASCII but '"' and '\'.
  static constexpr std::array<bool, 256> kPlain = [] {
    std::array<bool, 256> t{};
    for (int b = 0x20; b < 0x80; ++b) t[b] = b != '"' && b != '\\';
    return t;
  }();

  template <std::size_t N>
  bool literal(const char (&lit)[N]) {
    if (static_cast<std::size_t>(end_ - p_) < N - 1) return false;
    for (std::size_t i = 0; i < N - 1; ++i) {
      if (p_[i] != lit[i]) return false;
    }
    p_ += N - 1;
    return true;
  }
  static int hex(char ch) {
    if (ch >= '0' && ch <= '9') return ch - '0';
    if (ch >= 'a' && ch <= 'f') return ch - 'a' + 10;
    if (ch >= 'A' && ch <= 'F') return ch - 'A' + 10;
    return -1;
  }
  // Four hex digits after "\u": the code unit, or -1.
  int hex4() {
    if (end_ - p_ < 4) return -1;
    int v = 0;
    for (int i = 0; i < 4; ++i) {
      const int h = hex(p_[i]);
      if (h < 0) return -1;
      v = v << 4 | h;
    }
    p_ += 4;
    return v;
  }

  // The high bit of every byte of the eight at `at` (little-endian) that is
  // < 0x20, '"', '\\' or >= 0x80: not kPlain (zero-byte tests: a borrow may
  // flag bytes after a special one, never one before it, so the lowest flag
  // is exact).
  [[gnu::always_inline]] static std::uint64_t special_bytes(const char* at) {
    constexpr std::uint64_t kOnes = 0x0101010101010101, kHigh = 0x8080808080808080;
    std::uint64_t x;
    std::memcpy(&x, at, 8);
    const std::uint64_t quote = x ^ (kOnes * '"');
    const std::uint64_t backslash = x ^ (kOnes * '\\');
    return (((x - kOnes * 0x20) & ~x) | ((quote - kOnes) & ~quote) |
            ((backslash - kOnes) & ~backslash) | x) &
           kHigh;
  }

  // Past the bytes a string holds as they are (kPlain): sixteen at a time
  // with SSE2 (x86-64's baseline; a signed compare below 0x20 also flags
  // the bytes from 0x80), else eight at a time (special_bytes). A long
  // conversation is mostly string bytes, scanned once to index the body and
  // again for its messages.
  [[gnu::always_inline]] void skip_plain() {
#if defined(__SSE2__)
    const __m128i space = _mm_set1_epi8(0x20), quote = _mm_set1_epi8('"'),
                  backslash = _mm_set1_epi8('\\');
    while (end_ - p_ >= 16) {
      const __m128i x = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p_));
      const __m128i special =
          _mm_or_si128(_mm_cmplt_epi8(x, space),
                       _mm_or_si128(_mm_cmpeq_epi8(x, quote), _mm_cmpeq_epi8(x, backslash)));
      if (const int mask = _mm_movemask_epi8(special); mask != 0) {
        p_ += std::countr_zero(static_cast<unsigned>(mask));
        return;
      }
      p_ += 16;
    }
#endif
    if constexpr (std::endian::native == std::endian::little) {
      while (end_ - p_ >= 8) {
        if (const std::uint64_t special = special_bytes(p_); special != 0) {
          p_ += std::countr_zero(special) / 8;
          return;
        }
        p_ += 8;
      }
    }
    while (p_ != end_ && kPlain[static_cast<unsigned char>(*p_)]) ++p_;
  }

  // A key of plain bytes whose closing quote is within the kKeyCap bytes at
  // p_ (p_ past its opening quote; most keys): `key` is its text, p_ past
  // the quote. Else false, p_ unmoved (string() reads it).
  [[gnu::always_inline]] bool short_plain_key(std::string_view& key) {
    if constexpr (std::endian::native == std::endian::little) {
      const auto left = static_cast<std::size_t>(end_ - p_);
      for (std::size_t word = 0; word < kKeyCap && word + 8 <= left; word += 8) {
        const std::uint64_t special = special_bytes(p_ + word);
        if (special == 0) continue;
        const std::size_t n = word + static_cast<std::size_t>(std::countr_zero(special)) / 8;
        if (p_[n] != '"') return false;
        key = std::string_view(p_, n);
        p_ += n + 1;
        return true;
      }
    }
    return false;
  }

  // An object or array begins at p_: its extent's slot (kNoExtent when not
  // recording), closed by close_extent once p_ is past it.
  static constexpr std::size_t kNoExtent = ~std::size_t{0};
  std::size_t open_extent() {
    if (extents_ == nullptr) return kNoExtent;
    extents_->push_back({static_cast<std::uint32_t>(p_ - begin_), 0});
    return extents_->size() - 1;
  }
  void close_extent(std::size_t slot) {
    if (slot == kNoExtent) return;
    Extent& e = (*extents_)[slot];
    e.end = static_cast<std::uint32_t>(p_ - begin_);
    // (A short container's own are shorter: already gone, it is the last.)
    if (e.end - e.begin < kMinExtent) extents_->pop_back();
  }

  const char* p_;
  const char* begin_;
  const char* end_;
  Extents* extents_ = nullptr;
  // The current member's key (members()).
  const char* key_begin_ = nullptr;
  const char* key_end_ = nullptr;
  bool key_escaped_ = false;
};

template <bool kCapture>
bool JsonScanner::string(std::size_t& size, char* buf, std::string_view* key, bool* escaped_out) {
  const char* const begin = p_;
  std::size_t n = 0;
  bool escaped = false;  // since the first '\\' (kCapture: decoding into buf)
  auto put = [&](unsigned b) {
    if constexpr (kCapture) {
      if (n < kKeyCap) buf[n] = static_cast<char>(b);
    }
    ++n;
  };
  for (;;) {
    const char* run = p_;
    skip_plain();
    const auto len = static_cast<std::size_t>(p_ - run);
    if constexpr (kCapture) {
      if (escaped && n < kKeyCap) std::memcpy(buf + n, run, std::min(len, kKeyCap - n));
    }
    n += len;
    if (p_ == end_) return false;
    const auto b = static_cast<unsigned char>(*p_++);
    if (b == '"') {
      size = n;
      if (escaped_out) *escaped_out = escaped;
      if constexpr (kCapture) {
        if (n > kKeyCap) {
          *key = {};
        } else {
          *key = escaped ? std::string_view(buf, n) : std::string_view(begin, n);
        }
      }
      return true;
    }
    if (b == '\\') {
      if (!escaped) {  // so far the text is the decoded string
        escaped = true;
        if constexpr (kCapture) std::memcpy(buf, begin, std::min(n, kKeyCap));
      }
      if (p_ == end_) return false;
      switch (*p_++) {
        case '"':
          put('"');
          break;
        case '\\':
          put('\\');
          break;
        case '/':
          put('/');
          break;
        case 'b':
          put('\b');
          break;
        case 'f':
          put('\f');
          break;
        case 'n':
          put('\n');
          break;
        case 'r':
          put('\r');
          break;
        case 't':
          put('\t');
          break;
        case 'u': {
          int cp = hex4();
          if (cp < 0) return false;
          if (cp >= 0xD800 && cp <= 0xDBFF) {  // must be followed by a low surrogate
            if (end_ - p_ < 2 || p_[0] != '\\' || p_[1] != 'u') return false;
            p_ += 2;
            const int lo = hex4();
            if (lo < 0xDC00 || lo > 0xDFFF) return false;
            cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
          } else if (cp >= 0xDC00 && cp <= 0xDFFF) {
            return false;
          }
          encode_utf8(static_cast<unsigned>(cp), put);
          break;
        }
        default:
          return false;
      }
      continue;
    }
    if (b < 0x80) return false;  // a control character
    // A multi-byte UTF-8 sequence, with nlohmann's (RFC 3629's) ranges.
    unsigned lo = 0x80, hi = 0xBF;
    int more;
    if (b >= 0xC2 && b <= 0xDF) {
      more = 1;
    } else if (b == 0xE0) {
      more = 2, lo = 0xA0;
    } else if (b >= 0xE1 && b <= 0xEF) {
      more = 2;
      if (b == 0xED) hi = 0x9F;  // no UTF-16 surrogates
    } else if (b == 0xF0) {
      more = 3, lo = 0x90;
    } else if (b >= 0xF1 && b <= 0xF3) {
      more = 3;
    } else if (b == 0xF4) {
      more = 3, hi = 0x8F;  // nothing past U+10FFFF
    } else {
      return false;  // 80..C1, F5..FF
    }
    if (end_ - p_ < more) return false;
    const auto b1 = static_cast<unsigned char>(p_[0]);
    if (b1 < lo || b1 > hi) return false;
    for (int i = 1; i < more; ++i) {
      const auto bi = static_cast<unsigned char>(p_[i]);
      if (bi < 0x80 || bi > 0xBF) return false;
    }
    p_ += more;
    if constexpr (kCapture) {
      if (escaped) {
        for (int i = 0; i <= more; ++i) put(static_cast<unsigned char>(p_[i - more - 1]));
        continue;
      }
    }
    n += static_cast<std::size_t>(more) + 1;
  }
}

// p_ is at '-' or a digit. nlohmann reads an integer as uint64 / int64 and
// anything else (a fraction, an exponent, an integer that does not fit) as a
// double with strtod, rejecting the document if that overflows to infinity.
inline bool JsonScanner::number(Value& v) {
  const char* const begin = p_;
  const bool negative = eat('-');
  const char* int_begin = p_;
  if (p_ == end_) return false;
  // The integer part's first 19 digits, accumulated as they are passed
  // (19 digits cannot overflow: UINT64_MAX has 20).
  std::uint64_t x = 0;
  if (*p_ == '0') {
    ++p_;
  } else if (*p_ >= '1' && *p_ <= '9') {
    const char* const fast_end = p_ + std::min<std::ptrdiff_t>(end_ - p_, 19);
    while (p_ != fast_end && *p_ >= '0' && *p_ <= '9')
      x = x * 10 + static_cast<std::uint64_t>(*p_++ - '0');
    while (p_ != end_ && *p_ >= '0' && *p_ <= '9') ++p_;
  } else {
    return false;
  }
  const char* int_end = p_;
  const char* frac_begin = nullptr;
  const char* frac_end = nullptr;
  if (eat('.')) {
    frac_begin = p_;
    while (p_ != end_ && *p_ >= '0' && *p_ <= '9') ++p_;
    if (p_ == frac_begin) return false;
    frac_end = p_;
  }
  bool has_exponent = false;
  std::int64_t exponent = 0;  // saturates at 10^9 and more: far past any double
  if (p_ != end_ && (*p_ == 'e' || *p_ == 'E')) {
    ++p_;
    has_exponent = true;
    bool exponent_negative = false;
    if (p_ != end_ && (*p_ == '+' || *p_ == '-')) exponent_negative = *p_++ == '-';
    const char* digits = p_;
    while (p_ != end_ && *p_ >= '0' && *p_ <= '9') {
      if (exponent < 1'000'000'000) exponent = exponent * 10 + (*p_ - '0');
      ++p_;
    }
    if (p_ == digits) return false;
    if (exponent_negative) exponent = -exponent;
  }
  v = Value{};
  v.type = Value::Type::kNumber;
  // An integer literal: nlohmann's int64 (negative) or uint64, when it fits.
  const auto digits = int_end - int_begin;
  if (!frac_begin && !has_exponent && digits <= 20) {
    bool overflow = false;
    // The first 19 digits are in x: the 20th is checked, without a
    // division per digit (a nanosecond timestamp is 19).
    const char* const unchecked = int_begin + std::min<std::ptrdiff_t>(digits, 19);
    for (const char* q = unchecked; q != int_end; ++q) {
      const auto d = static_cast<std::uint64_t>(*q - '0');
      if (x > (UINT64_MAX - d) / 10) {
        overflow = true;
        break;
      }
      x = x * 10 + d;
    }
    if (!overflow) {
      if (!negative) {
        v.integer = true;
        v.fits_int64 = x <= static_cast<std::uint64_t>(INT64_MAX);
        if (v.fits_int64) v.int64 = static_cast<std::int64_t>(x);
        if (x <= static_cast<std::uint64_t>(kMaxCount)) v.count = static_cast<std::int64_t>(x);
        return true;
      }
      if (x <= static_cast<std::uint64_t>(INT64_MAX) + 1) {
        v.integer = v.fits_int64 = true;
        v.int64 = x == static_cast<std::uint64_t>(INT64_MAX) + 1 ? INT64_MIN
                                                                 : -static_cast<std::int64_t>(x);
        return true;
      }
    }
  }
  // A double. The value is in [10^k, 10^(k+1)) for the k of its leading
  // non-zero digit: below 10^308 it is finite (DBL_MAX is 1.79e308); from
  // there on, strtod decides as it does for nlohmann.
  const char* lead = nullptr;
  std::int64_t k = 0;
  if (*int_begin != '0') {
    lead = int_begin;
    k = (int_end - int_begin) - 1 + exponent;
  } else if (frac_begin) {
    for (const char* q = frac_begin; q != frac_end; ++q) {
      if (*q != '0') {
        lead = q;
        k = -(q - frac_begin) - 1 + exponent;
        break;
      }
    }
  }
  if (lead && k >= 308) {
    const std::string token(begin, p_);  // rare: a NUL-terminated copy for strtod
    if (!std::isfinite(std::strtod(token.c_str(), nullptr))) return false;
  }
  return true;
}

inline bool JsonScanner::value(int depth, Value& v) {
  if (p_ == end_) return false;
  switch (*p_) {
    case '{': {
      const std::size_t slot = open_extent();
      ++p_;
      v = Value{};
      v.type = Value::Type::kObject;
      const bool ok = members<false>(depth + 1, [&](std::string_view) {
        ++v.size;
        Value inner;
        return value(depth + 1, inner);
      });
      if (ok) close_extent(slot);
      return ok;
    }
    case '[': {
      const std::size_t slot = open_extent();
      ++p_;
      v = Value{};
      v.type = Value::Type::kArray;
      const bool ok = elements(depth + 1, [&] {
        ++v.size;
        Value inner;
        return value(depth + 1, inner);
      });
      if (ok) close_extent(slot);
      return ok;
    }
    case '"':
      ++p_;
      v = Value{};
      v.type = Value::Type::kString;
      return string<false>(v.size, nullptr, nullptr, &v.escaped);
    case 't':
      v = Value{};
      v.type = Value::Type::kTrue;
      return literal("true");
    case 'f':
      v = Value{};
      v.type = Value::Type::kFalse;
      return literal("false");
    case 'n':
      v = Value{};
      v.type = Value::Type::kNull;
      return literal("null");
    default:
      if (*p_ == '-' || (*p_ >= '0' && *p_ <= '9')) return number(v);
      return false;
  }
}

template <bool kCapture, typename OnMember>
bool JsonScanner::members(int depth, OnMember&& on_member, bool resume) {
  if (depth > kMaxJsonDepth) return false;
  ws();
  if (!resume && eat('}')) return true;
  for (;;) {
    const char* const key_begin = p_;
    if (!eat('"')) return false;
    char buf[kKeyCap];
    std::size_t size = 0;
    std::string_view key;
    bool escaped = false;
    if (short_plain_key(key)) {
      if constexpr (!kCapture) key = {};
    } else if (!string<kCapture>(size, buf, &key, &escaped)) {
      return false;
    }
    key_begin_ = key_begin;
    key_end_ = p_;
    key_escaped_ = escaped;
    ws();
    if (!eat(':')) return false;
    ws();
    if (!on_member(key)) return false;
    ws();
    if (eat(',')) {
      ws();
      continue;
    }
    return eat('}');
  }
}

template <typename OnElement>
bool JsonScanner::elements(int depth, OnElement&& on_element) {
  if (depth > kMaxJsonDepth) return false;
  ws();
  if (eat(']')) return true;
  for (;;) {
    if (!on_element()) return false;
    ws();
    if (eat(',')) {
      ws();
      continue;
    }
    return eat(']');
  }
}

}  // namespace llmgate::providers
