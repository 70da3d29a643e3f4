#include "gateway/observe/trace_context.h"

#include <algorithm>

namespace llmgate::gateway {
namespace {

constexpr char kHex[] = "0123456789abcdef";

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;  // uppercase is not allowed in traceparent
}

// `text` (2 x N lowercase hex digits) into `out`.
template <std::size_t N>
bool read_hex(std::string_view text, std::array<std::uint8_t, N>& out) {
  if (text.size() != 2 * N) return false;
  for (std::size_t i = 0; i < N; ++i) {
    const int hi = hex_digit(text[2 * i]);
    const int lo = hex_digit(text[2 * i + 1]);
    if (hi < 0 || lo < 0) return false;
    out[i] = static_cast<std::uint8_t>(hi << 4 | lo);
  }
  return true;
}

template <std::size_t N>
std::string to_hex(const std::array<std::uint8_t, N>& bytes) {
  std::string s(2 * N, '0');
  for (std::size_t i = 0; i < N; ++i) {
    s[2 * i] = kHex[bytes[i] >> 4];
    s[2 * i + 1] = kHex[bytes[i] & 0xf];
  }
  return s;
}

template <std::size_t N>
bool any_set(const std::array<std::uint8_t, N>& bytes) {
  return std::any_of(bytes.begin(), bytes.end(), [](std::uint8_t b) { return b != 0; });
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

bool is_lcalpha(char c) { return c >= 'a' && c <= 'z'; }
bool is_digit(char c) { return c >= '0' && c <= '9'; }

// A tracestate key: simple-key, or tenant-id "@" system-id.
bool valid_key(std::string_view k) {
  const auto part = [](std::string_view p, std::size_t max, bool digit_first) {
    if (p.empty() || p.size() > max) return false;
    if (!is_lcalpha(p[0]) && !(digit_first && is_digit(p[0]))) return false;
    return std::all_of(p.begin() + 1, p.end(), [](char c) {
      return is_lcalpha(c) || is_digit(c) || c == '_' || c == '-' || c == '*' || c == '/';
    });
  };
  const auto at = k.find('@');
  if (at == std::string_view::npos) return part(k, 256, true);
  return part(k.substr(0, at), 241, true) && part(k.substr(at + 1), 14, false);
}

// A tracestate value: printable ASCII but ',' and '=', not ending in a space.
bool valid_value(std::string_view v) {
  if (v.empty() || v.size() > 256 || v.back() == ' ') return false;
  return std::all_of(v.begin(), v.end(),
                     [](char c) { return c >= 0x20 && c <= 0x7e && c != ',' && c != '='; });
}

}  // namespace

bool TraceId::valid() const { return any_set(bytes); }
std::string TraceId::hex() const { return to_hex(bytes); }
bool SpanId::valid() const { return any_set(bytes); }
std::string SpanId::hex() const { return to_hex(bytes); }

std::optional<SpanContext> parse_traceparent(std::string_view value) {
  value = trim(value);
  // version "-" trace-id "-" parent-id "-" flags: 2 + 1 + 32 + 1 + 16 + 1 + 2.
  constexpr std::size_t kLength = 55;
  if (value.size() < kLength) return std::nullopt;
  std::array<std::uint8_t, 1> version{};
  if (!read_hex(value.substr(0, 2), version) || version[0] == 0xff) return std::nullopt;
  // Version 00 is exactly this long; a later version may append "-" fields.
  if (version[0] == 0 ? value.size() != kLength : (value.size() > kLength && value[kLength] != '-'))
    return std::nullopt;
  if (value[2] != '-' || value[35] != '-' || value[52] != '-') return std::nullopt;
  SpanContext c;
  std::array<std::uint8_t, 1> flags{};
  if (!read_hex(value.substr(3, 32), c.trace.bytes) ||
      !read_hex(value.substr(36, 16), c.span.bytes) || !read_hex(value.substr(53, 2), flags)) {
    return std::nullopt;
  }
  if (!c.trace.valid() || !c.span.valid()) return std::nullopt;
  c.flags = flags[0];
  return c;
}

std::string format_traceparent(const SpanContext& c) {
  std::string s;
  s.reserve(55);
  s.append("00-").append(c.trace.hex()).append("-").append(c.span.hex()).append("-");
  s.push_back(kHex[c.flags >> 4]);
  s.push_back(kHex[c.flags & 0xf]);
  return s;
}

std::string clean_tracestate(std::string_view value) {
  if (value.size() > 512 * 2) return {};  // far over the limit even with spaces
  std::string out;
  int members = 0;
  while (!value.empty()) {
    const auto comma = value.find(',');
    const std::string_view member = trim(value.substr(0, comma));
    value = comma == std::string_view::npos ? std::string_view() : value.substr(comma + 1);
    if (member.empty()) continue;  // empty list members are allowed
    const auto eq = member.find('=');
    if (eq == std::string_view::npos || !valid_key(member.substr(0, eq)) ||
        !valid_value(member.substr(eq + 1)) || ++members > 32) {
      return {};
    }
    if (!out.empty()) out.push_back(',');
    out.append(member);
  }
  return out.size() <= 512 ? out : std::string();
}

IdGenerator::IdGenerator() : rng_(std::random_device{}()) {}

TraceId IdGenerator::trace_id() {
  TraceId id;
  do {
    for (std::size_t i = 0; i < 16; i += 8) {
      const std::uint64_t r = rng_();
      for (std::size_t b = 0; b < 8; ++b) id.bytes[i + b] = static_cast<std::uint8_t>(r >> (8 * b));
    }
  } while (!id.valid());
  return id;
}

SpanId IdGenerator::span_id() {
  SpanId id;
  do {
    const std::uint64_t r = rng_();
    for (std::size_t b = 0; b < 8; ++b) id.bytes[b] = static_cast<std::uint8_t>(r >> (8 * b));
  } while (!id.valid());
  return id;
}

bool sample_trace(const config::TraceSampler& sampler, const SpanContext* parent,
                  const TraceId& id) {
  using Root = config::TraceSampler::Root;
  if (sampler.parent_based && parent) return parent->sampled();
  switch (sampler.root) {
    case Root::kAlwaysOn:
      return true;
    case Root::kAlwaysOff:
      return false;
    case Root::kRatio:
      break;
  }
  if (sampler.ratio >= 1) return true;
  if (sampler.ratio <= 0) return false;
  // As the OpenTelemetry SDKs: the trace id's last 8 bytes, big-endian,
  // shifted to 63 bits, under ratio x 2^63.
  std::uint64_t x = 0;
  for (std::size_t i = 8; i < 16; ++i) x = x << 8 | id.bytes[i];
  const auto bound = static_cast<std::uint64_t>(sampler.ratio * 0x1p63);
  return (x >> 1) < bound;
}

}  // namespace llmgate::gateway
