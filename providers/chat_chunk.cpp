#include "providers/chat_chunk.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cstring>
#include <functional>
#include <utility>

#include "providers/json_depth.h"
#include "providers/utf8.h"

namespace llmgate::providers {
namespace {

// Counts from an upstream are untrusted: anything negative or beyond any real
// usage (10^12 tokens) reads as 0, so sums cannot overflow.
constexpr std::int64_t kMaxTokens = 1'000'000'000'000;

std::size_t text_size(const nlohmann::json& delta, const char* key) {
  auto it = delta.find(key);
  if (it == delta.end() || !it->is_string()) return 0;
  return it->get_ref<const std::string&>().size();
}

// ---------------------------------------------------------------------------
// inspect_chunk's scanner: one pass over the text, no allocation. It accepts
// exactly the documents nlohmann::json::parse accepts (RFC 8259; a leading
// UTF-8 BOM; strings of well-formed UTF-8 with no raw control characters and
// no lone surrogates in \u escapes; numbers that do not overflow a double;
// space, tab, CR and LF as whitespace) and reads only what ChatChunk reports.
// It gives up (returns false) on anything it cannot answer exactly -- invalid
// JSON, nesting past kMaxJsonDepth, a non-null "error", no "choices" array, a
// key it reads appearing twice in one object (nlohmann keeps the last), a
// number too close to the double overflow threshold -- and inspect_chunk then
// asks parse_chunk, the reference.

// Longer than every key the scanner reads; longer keys are never compared.
constexpr std::size_t kKeyCap = 32;

// Bytes a JSON string holds as they are: printable ASCII but '"' and '\'.
constexpr std::array<bool, 256> kPlain = [] {
  std::array<bool, 256> t{};
  for (int b = 0x20; b < 0x80; ++b) t[b] = b != '"' && b != '\\';
  return t;
}();

class ChunkScanner {
 public:
  explicit ChunkScanner(std::string_view text) : p_(text.data()), end_(text.data() + text.size()) {}

  // Fills the classification fields of `c` (kind kChunk); false: give up.
  bool scan(ChatChunk& c);

 private:
  struct Value {
    enum class Type { kNull, kString, kArray, kObject, kNumber, kOther };
    Type type = Type::kOther;
    std::size_t size = 0;    // kString: decoded bytes; kArray: elements; kObject: members
    std::int64_t count = 0;  // kNumber: the value as usage_of reads it
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

  // Inlined everywhere: most calls find no whitespace at all.
  [[gnu::always_inline]] void ws() {
    while (p_ != end_ && static_cast<unsigned char>(*p_) <= ' ' &&
           (*p_ == ' ' || *p_ == '\n' || *p_ == '\r' || *p_ == '\t')) {
      ++p_;
    }
  }
  // key == lit, comparing a known number of bytes (unrolled, no memcmp call).
  template <std::size_t N>
  static bool is(std::string_view key, const char (&lit)[N]) {
    if (key.size() != N - 1) return false;
    for (std::size_t i = 0; i < N - 1; ++i) {
      if (key[i] != lit[i]) return false;
    }
    return true;
  }
  bool eat(char ch) {
    if (p_ == end_ || *p_ != ch) return false;
    ++p_;
    return true;
  }
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

  // Past the bytes a string holds as they are (kPlain), eight at a time.
  [[gnu::always_inline]] void skip_plain() {
    if constexpr (std::endian::native == std::endian::little) {
      constexpr std::uint64_t kOnes = 0x0101010101010101, kHigh = 0x8080808080808080;
      while (end_ - p_ >= 8) {
        std::uint64_t x;
        std::memcpy(&x, p_, 8);
        // The high bit of every byte that is < 0x20, '"', '\\' or >= 0x80
        // (zero-byte tests: a borrow may flag bytes after a special one, never
        // one before it, so the lowest flag is exact).
        const std::uint64_t quote = x ^ (kOnes * '"');
        const std::uint64_t backslash = x ^ (kOnes * '\\');
        const std::uint64_t special = (((x - kOnes * 0x20) & ~x) | ((quote - kOnes) & ~quote) |
                                       ((backslash - kOnes) & ~backslash) | x) &
                                      kHigh;
        if (special != 0) {
          p_ += std::countr_zero(special) / 8;
          return;
        }
        p_ += 8;
      }
    }
    while (p_ != end_ && kPlain[static_cast<unsigned char>(*p_)]) ++p_;
  }

  template <bool kCapture>
  bool string(std::size_t& size, char* buf, std::string_view* key);
  bool number(Value& v);
  bool value(int depth, Value& v);
  template <bool kCapture, typename OnMember>
  bool members(int depth, OnMember&& on_member);
  bool choices(int depth, std::size_t& count, ChatChunk& c);
  bool choice(int depth, ChatChunk& c);
  bool delta(int depth, ChatChunk& c);
  bool usage(int depth, Usage& u);
  template <std::size_t N>
  bool detail(int depth, const char (&name)[N], std::int64_t& out);

  const char* p_;
  const char* end_;
  // ChatChunk::plain, as far as seen: cleared by anything that would make the
  // assembler read more than the content.
  bool plain_ = true;
  const char* content_ = nullptr;  // the content string's text, between the quotes
  std::size_t content_len_ = 0;
  unsigned meta_ = 0;
};

// p_ is past the opening quote. `size` gets the decoded length in bytes (what
// the std::string nlohmann builds would hold). With kCapture, `key` gets the
// decoded string when it is at most kKeyCap bytes long, else "": the text
// itself when it has no escapes, else decoded into `buf` (kKeyCap bytes).
template <bool kCapture>
bool ChunkScanner::string(std::size_t& size, char* buf, std::string_view* key) {
  const char* const begin = p_;
  std::size_t n = 0;
  bool escaped = false;  // kCapture: decoding into buf since the first '\\'
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
      if constexpr (kCapture) {
        if (!escaped) {  // so far the text is the decoded string
          escaped = true;
          std::memcpy(buf, begin, std::min(n, kKeyCap));
        }
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
// double, rejecting the document if that overflows to infinity.
bool ChunkScanner::number(Value& v) {
  const bool negative = eat('-');
  const char* int_begin = p_;
  if (p_ == end_) return false;
  if (*p_ == '0') {
    ++p_;
  } else if (*p_ >= '1' && *p_ <= '9') {
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
  // The value is in [10^k, 10^(k+1)) for the k of its leading non-zero digit.
  // Below 10^308 it is finite (DBL_MAX is 1.79e308); from there on, overflow
  // or too close to call: let parse_chunk decide.
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
  if (lead && k >= 308) return false;
  v.type = Value::Type::kNumber;
  v.count = 0;
  // usage_of: a non-negative integer up to kMaxTokens (13 digits), else 0.
  if (!negative && !frac_begin && !has_exponent && int_end - int_begin <= 13) {
    std::int64_t x = 0;
    for (const char* q = int_begin; q != int_end; ++q) x = x * 10 + (*q - '0');
    if (x <= kMaxTokens) v.count = x;
  }
  return true;
}

// Any value at p_, inside a container at `depth` (0: the top level).
bool ChunkScanner::value(int depth, Value& v) {
  if (p_ == end_) return false;
  switch (*p_) {
    case '{':
      ++p_;
      v.type = Value::Type::kObject;
      v.size = 0;
      return members<false>(depth + 1, [&](std::string_view) {
        ++v.size;
        Value inner;
        return value(depth + 1, inner);
      });
    case '[': {
      ++p_;
      v.type = Value::Type::kArray;
      v.size = 0;
      if (depth + 1 > kMaxJsonDepth) return false;
      ws();
      if (eat(']')) return true;
      for (;;) {
        ++v.size;
        Value inner;
        if (!value(depth + 1, inner)) return false;
        ws();
        if (eat(',')) {
          ws();
          continue;
        }
        return eat(']');
      }
    }
    case '"':
      ++p_;
      v.type = Value::Type::kString;
      return string<false>(v.size, nullptr, nullptr);
    case 't':
      v.type = Value::Type::kOther;
      return literal("true");
    case 'f':
      v.type = Value::Type::kOther;
      return literal("false");
    case 'n':
      v.type = Value::Type::kNull;
      return literal("null");
    default:
      if (*p_ == '-' || (*p_ >= '0' && *p_ <= '9')) return number(v);
      return false;
  }
}

// p_ is past the '{' of an object at `depth`. For each member, p_ at its
// value, on_member(key) must consume the value; the key is the decoded key
// when it is at most kKeyCap bytes long and kCapture, else "".
template <bool kCapture, typename OnMember>
bool ChunkScanner::members(int depth, OnMember&& on_member) {
  if (depth > kMaxJsonDepth) return false;
  ws();
  if (eat('}')) return true;
  for (;;) {
    if (!eat('"')) return false;
    char buf[kKeyCap];
    std::size_t size = 0;
    std::string_view key;
    if (!string<kCapture>(size, buf, &key)) return false;
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

// p_ is past the '[' of the top-level "choices" array, at `depth`.
bool ChunkScanner::choices(int depth, std::size_t& count, ChatChunk& c) {
  if (depth > kMaxJsonDepth) return false;
  ws();
  if (eat(']')) return true;
  for (;;) {
    ++count;
    if (eat('{')) {
      if (!choice(depth + 1, c)) return false;
    } else {
      Value v;
      if (!value(depth, v)) return false;
    }
    ws();
    if (eat(',')) {
      ws();
      continue;
    }
    return eat(']');
  }
}

bool ChunkScanner::choice(int depth, ChatChunk& c) {
  unsigned seen = 0;
  bool has_delta = false;
  const bool ok = members<true>(depth, [&](std::string_view key) {
    if (is(key, "delta")) {
      if (!once(seen, 1)) return false;
      if (eat('{')) {
        has_delta = true;
        return delta(depth + 1, c);
      }
      plain_ = false;
    } else if (is(key, "finish_reason")) {
      if (!once(seen, 2)) return false;
      Value v;
      if (!value(depth, v)) return false;
      if (v.type != Value::Type::kNull) {
        c.has_finish = true;
        plain_ = false;
      }
      return true;
    } else if (is(key, "index")) {
      const char* at = p_;
      Value v;
      if (!value(depth, v)) return false;
      if (std::string_view(at, static_cast<std::size_t>(p_ - at)) != "0") plain_ = false;
      return true;
    }
    Value v;
    if (!value(depth, v)) return false;
    if (v.type != Value::Type::kNull) plain_ = false;  // logprobs, content filters...: kept
    return true;
  });
  if (!has_delta) plain_ = false;
  return ok;
}

bool ChunkScanner::delta(int depth, ChatChunk& c) {
  unsigned seen = 0;
  // Other fields seen, by a hash of the name: a repeated one goes to
  // parse_chunk, where the last value wins (the scanner would count them
  // all). A collision or more than kOthers of them only costs that fallback.
  constexpr std::size_t kOthers = 8;
  std::array<std::size_t, kOthers> others{};
  std::size_t n_others = 0;
  return members<true>(depth, [&](std::string_view key) {
    enum : unsigned { kText = 1, kToolCalls = 2, kFunctionCall = 4, kOther = 8 };
    unsigned what = kOther;
    unsigned bit = 0;
    if (is(key, "content")) {
      what = kText, bit = 1;
    } else if (is(key, "refusal")) {
      what = kText, bit = 2;
    } else if (is(key, "reasoning_content")) {
      what = kText, bit = 4;
    } else if (is(key, "reasoning")) {
      what = kText, bit = 8;
    } else if (is(key, "tool_calls")) {
      what = kToolCalls, bit = 16;
    } else if (is(key, "function_call")) {
      what = kFunctionCall, bit = 32;
    }
    if (bit && !once(seen, bit)) return false;
    const bool role = is(key, "role");
    if (!bit && !role) {
      const std::size_t h = std::hash<std::string_view>{}(key);
      if (n_others == kOthers ||
          std::find(others.begin(), others.begin() + n_others, h) != others.begin() + n_others) {
        return false;
      }
      others[n_others++] = h;
    }
    const char* at = p_;
    Value v;
    if (!value(depth, v)) return false;
    // The assembler reads more than content (a null adds nothing).
    if (bit != 1 && v.type != Value::Type::kNull) plain_ = false;
    if (bit == 1) {
      if (v.type == Value::Type::kString) {
        content_ = at + 1;
        content_len_ = static_cast<std::size_t>(p_ - at) - 2;
      } else {
        plain_ = false;
      }
    }
    if (what == kText && v.type == Value::Type::kString) {
      c.output_chars += v.size;
      if (v.size > 0) c.has_output = true;
      if (v.size > 0 && (bit == 4 || bit == 8)) c.has_reasoning = true;
    } else if (what == kToolCalls && v.type == Value::Type::kArray && v.size > 0) {
      c.has_output = true;
    } else if (what == kFunctionCall && v.type != Value::Type::kNull) {
      c.has_output = true;
    } else if (what == kOther && !role && non_empty(v)) {
      c.has_output = true;  // audio, annotations, a field of tomorrow: output all the same
    }
    return true;
  });
}

bool ChunkScanner::usage(int depth, Usage& u) {
  unsigned seen = 0;
  return members<true>(depth, [&](std::string_view key) {
    std::int64_t* field = nullptr;
    unsigned bit = 0;
    if (is(key, "prompt_tokens")) {
      field = &u.prompt_tokens, bit = 1;
    } else if (is(key, "completion_tokens")) {
      field = &u.completion_tokens, bit = 2;
    } else if (is(key, "total_tokens")) {
      field = &u.total_tokens, bit = 4;
    } else if (is(key, "completion_tokens_details")) {
      if (!once(seen, 8)) return false;
      if (eat('{')) return detail(depth + 1, "reasoning_tokens", u.reasoning_tokens);
    } else if (is(key, "prompt_tokens_details")) {
      if (!once(seen, 16)) return false;
      if (eat('{')) return detail(depth + 1, "cached_tokens", u.cached_tokens);
    }
    if (bit && !once(seen, bit)) return false;
    Value v;
    if (!value(depth, v)) return false;
    if (field && v.type == Value::Type::kNumber) *field = v.count;
    return true;
  });
}

// One count inside a usage details object (p_ past its '{').
template <std::size_t N>
bool ChunkScanner::detail(int depth, const char (&name)[N], std::int64_t& out) {
  bool seen = false;
  return members<true>(depth, [&](std::string_view key) {
    const bool mine = is(key, name);
    if (mine && std::exchange(seen, true)) return false;  // nlohmann keeps the last
    Value v;
    if (!value(depth, v)) return false;
    if (mine && v.type == Value::Type::kNumber) out = v.count;
    return true;
  });
}

bool ChunkScanner::scan(ChatChunk& c) {
  if (end_ - p_ >= 3 && std::memcmp(p_, "\xEF\xBB\xBF", 3) == 0) p_ += 3;  // nlohmann skips a BOM
  ws();
  if (!eat('{')) return false;
  unsigned seen = 0;
  std::size_t choice_count = 0;
  Usage u;
  bool has_usage = false;
  const bool ok = members<true>(1, [&](std::string_view key) {
    if (is(key, "choices")) {
      if (!once(seen, 1) || !eat('[')) return false;
      return choices(2, choice_count, c);
    }
    if (is(key, "usage")) {
      if (!once(seen, 2)) return false;
      if (eat('{')) {
        has_usage = true;
        plain_ = false;
        return usage(2, u);
      }
    } else if (is(key, "error")) {  // only a null one stays on this path
      if (!once(seen, 4) || p_ == end_ || *p_ != 'n') return false;
    } else {
      unsigned meta = is(key, "id")                   ? ChatChunk::kMetaId
                      : is(key, "created")            ? ChatChunk::kMetaCreated
                      : is(key, "model")              ? ChatChunk::kMetaModel
                      : is(key, "system_fingerprint") ? ChatChunk::kMetaSystemFingerprint
                      : is(key, "service_tier")       ? ChatChunk::kMetaServiceTier
                                                      : 0;
      if (meta) {
        if (!once(seen, meta << 3)) plain_ = false;  // repeated: the last one counts
        Value v;
        if (!value(1, v)) return false;
        if (v.type != Value::Type::kNull) meta_ |= meta;
        return true;
      }
    }
    Value v;
    if (!value(1, v)) return false;
    // Anything else the assembler keeps (a stream's own `obfuscation` aside).
    if (v.type != Value::Type::kNull && !is(key, "object") && !is(key, "obfuscation"))
      plain_ = false;
    return true;
  });
  if (!ok) return false;
  ws();
  if (p_ != end_ || !(seen & 1)) return false;
  c.kind = ChatChunk::Kind::kChunk;
  if (has_usage) {
    if (u.total_tokens == 0) u.total_tokens = u.prompt_tokens + u.completion_tokens;
    c.usage = u;
  }
  c.usage_only = choice_count == 0 && c.usage.has_value();
  if (plain_ && choice_count == 1 && content_) {
    c.plain = true;
    c.content = std::string_view(content_, content_len_);
    c.meta_keys = meta_;
  }
  return true;
}

}  // namespace

namespace {
// A token count as the scanner reads it: a non-negative integer up to
// kMaxTokens, else 0.
std::int64_t token_count(const nlohmann::json& parent, const char* key) {
  auto f = parent.find(key);
  if (f == parent.end()) return 0;
  if (f->is_number_unsigned()) {
    auto v = f->get<std::uint64_t>();
    return v <= static_cast<std::uint64_t>(kMaxTokens) ? static_cast<std::int64_t>(v) : 0;
  }
  if (f->is_number_integer()) {
    auto v = f->get<std::int64_t>();
    return v >= 0 && v <= kMaxTokens ? v : 0;
  }
  return 0;
}
}  // namespace

std::optional<Usage> usage_of(const nlohmann::json& j) {
  auto it = j.find("usage");
  if (it == j.end() || !it->is_object()) return std::nullopt;
  Usage u;
  u.prompt_tokens = token_count(*it, "prompt_tokens");
  u.completion_tokens = token_count(*it, "completion_tokens");
  u.total_tokens = token_count(*it, "total_tokens");
  auto detail = [&](const char* object, const char* key) -> std::int64_t {
    auto d = it->find(object);
    return d != it->end() && d->is_object() ? token_count(*d, key) : 0;
  };
  u.reasoning_tokens = detail("completion_tokens_details", "reasoning_tokens");
  u.cached_tokens = detail("prompt_tokens_details", "cached_tokens");
  if (u.total_tokens == 0) u.total_tokens = u.prompt_tokens + u.completion_tokens;
  return u;
}

ChatChunk parse_chunk(std::string_view data) {
  ChatChunk c;
  if (data == "[DONE]") {
    c.kind = ChatChunk::Kind::kDone;
    return c;
  }
  if (data.find('\0') != std::string_view::npos) {  // the parser would stop there
    c.kind = ChatChunk::Kind::kMalformed;
    c.error_message = "upstream sent an event with a NUL byte";
    return c;
  }
  if (json_too_deep(data)) {
    c.kind = ChatChunk::Kind::kMalformed;
    c.error_message =
        "upstream sent an event nested more than " + std::to_string(kMaxJsonDepth) + " levels deep";
    return c;
  }
  c.json = nlohmann::json::parse(data, nullptr, /*allow_exceptions=*/false);
  if (c.json.is_discarded() || !c.json.is_object()) {
    c.kind = ChatChunk::Kind::kMalformed;
    c.error_message = "upstream sent an event that is not a JSON object";
    c.json = nullptr;
    return c;
  }
  if (auto err = c.json.find("error"); err != c.json.end() && !err->is_null()) {
    c.kind = ChatChunk::Kind::kError;
    if (err->is_object() && err->contains("message") && (*err)["message"].is_string()) {
      c.error_message = (*err)["message"].get<std::string>();
    } else {
      c.error_message = err->dump();
    }
    return c;
  }
  auto choices = c.json.find("choices");
  if (choices == c.json.end() || !choices->is_array()) {
    c.kind = ChatChunk::Kind::kMalformed;
    c.error_message = "upstream event has no \"choices\" array";
    return c;
  }
  c.kind = ChatChunk::Kind::kChunk;
  c.usage = usage_of(c.json);
  c.usage_only = choices->empty() && c.usage.has_value();
  for (const auto& choice : *choices) {
    if (!choice.is_object()) continue;
    if (auto fr = choice.find("finish_reason"); fr != choice.end() && !fr->is_null()) {
      c.has_finish = true;
    }
    auto delta = choice.find("delta");
    if (delta == choice.end() || !delta->is_object()) continue;
    std::size_t chars = text_size(*delta, "content") + text_size(*delta, "refusal") +
                        text_size(*delta, "reasoning_content") + text_size(*delta, "reasoning");
    c.output_chars += chars;
    for (const auto& [key, value] : delta->items()) {
      // As the scanner reads it: text fields when they are non-empty strings,
      // tool calls as a non-empty array, a function call when not null, and
      // any other field but `role` (audio, annotations, a field of tomorrow)
      // when it is a non-empty string, array or object.
      const bool text = value.is_string() && !value.get_ref<const std::string&>().empty();
      if (key == "role") continue;
      if (key == "content" || key == "refusal" || key == "reasoning_content" ||
          key == "reasoning") {
        if (text) c.has_output = true;
        if (text && key != "content" && key != "refusal") c.has_reasoning = true;
      } else if (key == "tool_calls") {
        if (value.is_array() && !value.empty()) c.has_output = true;
      } else if (key == "function_call") {
        if (!value.is_null()) c.has_output = true;
      } else if (text || ((value.is_array() || value.is_object()) && !value.empty())) {
        c.has_output = true;
      }
    }
  }
  return c;
}

ChatChunk inspect_chunk(std::string_view data) {
  ChatChunk c;
  if (data == "[DONE]") {
    c.kind = ChatChunk::Kind::kDone;
    return c;
  }
  if (!ChunkScanner(data).scan(c)) return parse_chunk(data);
  return c;
}

}  // namespace llmgate::providers
