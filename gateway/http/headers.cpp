#include "gateway/http/headers.h"

#include <arpa/inet.h>

#include <algorithm>
#include <array>
#include <ctime>
#include <random>

#include "config/ascii.h"

namespace llmgate::gateway {
namespace {

// Field names are ASCII tokens (RFC 9110 §5.1).
using config::ascii_iequals;
using config::ascii_lower;

bool starts_with_icase(std::string_view s, std::string_view prefix) {
  return s.size() >= prefix.size() && ascii_iequals(s.substr(0, prefix.size()), prefix);
}

// Lists of names searched by length: a name is compared only with the
// listed names of its length -- none for most of a client's names (an SDK's
// x-stainless-* set), one or two for the others. Built at compile time;
// a name longer than kMaxLength, or more than kPerLength of one length,
// does not build.
template <std::size_t kMaxLength, std::size_t kPerLength>
class NamesByLength {
 public:
  template <std::size_t... Ns>
  consteval explicit NamesByLength(const std::array<std::string_view, Ns>&... lists) {
    (add(lists), ...);
  }
  bool contains(std::string_view name) const {
    if (name.size() > kMaxLength) return false;
    for (const std::string_view n : by_length_[name.size()]) {
      if (n.empty()) return false;
      if (config::ascii_same_letters(name, n)) return true;
    }
    return false;
  }

 private:
  template <std::size_t N>
  consteval void add(const std::array<std::string_view, N>& list) {
    for (const std::string_view n : list) {
      if (n.empty() || n.size() > kMaxLength) throw "a name too long for the set";
      auto& same_length = by_length_[n.size()];
      std::size_t i = 0;
      while (i < kPerLength && !same_length[i].empty()) ++i;
      if (i == kPerLength) throw "more names of one length than the set holds";
      same_length[i] = n;
    }
  }
  std::array<std::array<std::string_view, kPerLength>, kMaxLength + 1> by_length_{};
};

}  // namespace

bool is_hop_by_hop(std::string_view name, const ListTokens& tokens) {
  static constexpr std::array<std::string_view, 9> kHopByHop = {"connection",
                                                                "keep-alive",
                                                                "proxy-connection",
                                                                "te",
                                                                "trailer",
                                                                "transfer-encoding",
                                                                "upgrade",
                                                                "proxy-authenticate",
                                                                "proxy-authorization"};
  static constexpr NamesByLength<24, 3> kNames(kHopByHop);
  if (kNames.contains(name)) return true;
  for (const auto& t : tokens) {
    if (ascii_iequals(name, t)) return true;
  }
  return false;
}

void add_list_tokens(std::string_view v, ListTokens& out) {
  while (!v.empty()) {
    const std::size_t comma = v.find(',');
    std::string_view t = v.substr(0, comma);
    v.remove_prefix(comma == std::string_view::npos ? v.size() : comma + 1);
    while (!t.empty() && t.front() == ' ') t.remove_prefix(1);
    while (!t.empty() && t.back() == ' ') t.remove_suffix(1);
    if (!t.empty()) out.push_back(t);
  }
}

bool wants_keep_alive(unsigned version, const ListTokens& tokens) {
  auto has = [&](std::string_view t) {
    return std::any_of(tokens.begin(), tokens.end(),
                       [&](std::string_view token) { return ascii_iequals(token, t); });
  };
  if (has("close")) return false;
  return version >= 11 || has("keep-alive");
}

bool is_gateway_owned(std::string_view name) {
  // Credentials of every provider protocol among them: a client's own key
  // must never reach an upstream beside the operator's.
  static constexpr std::array<std::string_view, 12> kOwned = {
      "host",           "authorization", "api-key", "x-api-key",       "x-goog-api-key",
      "content-length", "content-type",  "accept",  "accept-encoding", "expect",
      "cookie",         "user-agent"};
  // Provider-scoped: which account, project or deployment the provider
  // bills or serves is the operator's to say (providers[].headers), never a
  // client's (docs/providers.md, "Headers a client cannot send upstream").
  static constexpr std::array<std::string_view, 4> kProviderScoped = {
      "openai-organization",       // OpenAI: the organisation billed
      "openai-project",            // OpenAI: the project billed
      "x-goog-user-project",       // Google (Gemini API, Vertex AI): the project billed and quota
      "azureml-model-deployment",  // Azure ML endpoints: the deployment that serves
  };
  static constexpr NamesByLength<24, 3> kNames(kOwned, kProviderScoped);
  if (kNames.contains(name)) return true;
  // The gateway's own controls (x-llmgate-*); AWS's SigV4 inputs and session
  // token (x-amz-*), credentials. (Their third letter first: most of a
  // client's names start "x-" too.)
  if (name.size() < 6 || ascii_lower(name[0]) != 'x' || name[1] != '-') return false;
  const char third = ascii_lower(name[2]);
  return (third == 'l' && starts_with_icase(name, "x-llmgate-")) ||
         (third == 'a' && starts_with_icase(name, "x-amz-"));
}

bool is_valid_request_id(std::string_view id) {
  if (id.empty() || id.size() > 128) return false;
  return std::all_of(id.begin(), id.end(), [](char c) { return c > 0x20 && c < 0x7f; });
}

std::string new_request_id() {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  static constexpr char kHex[] = "0123456789abcdef";
  std::string id(32, '0');
  for (int half = 0; half < 2; ++half) {
    std::uint64_t v = rng();
    for (int i = 0; i < 16; ++i) id[half * 16 + i] = kHex[(v >> (i * 4)) & 0xf];
  }
  return id;
}

TransferCoding classify_transfer_encoding(const std::vector<std::string_view>& field_values) {
  // The same list syntax as Connection's. Whitespace inside a list element
  // (obs-fold turned into spaces) is not a coding we know: it will not
  // compare equal to "chunked".
  ListTokens codings;
  for (auto value : field_values) add_list_tokens(value, codings);
  if (codings.empty())
    return field_values.empty() ? TransferCoding::kNone : TransferCoding::kInvalid;
  auto chunked = [](std::string_view c) { return ascii_iequals(c, "chunked"); };
  if (!chunked(codings.back())) return TransferCoding::kInvalid;
  if (std::count_if(codings.begin(), codings.end(), chunked) > 1) return TransferCoding::kInvalid;
  return codings.size() == 1 ? TransferCoding::kChunked : TransferCoding::kUnsupported;
}

std::optional<std::string_view> request_path(std::string_view target) {
  if (target == "*") return target;
  if (!target.empty() && target.front() == '/') return target.substr(0, target.find('?'));
  for (std::string_view scheme : {std::string_view("http://"), std::string_view("https://")}) {
    if (!starts_with_icase(target, scheme)) continue;
    std::string_view rest = target.substr(scheme.size());
    const auto slash = rest.find_first_of("/?");
    if (slash == 0) return std::nullopt;  // no authority
    if (slash == std::string_view::npos || rest[slash] == '?') return std::string_view("/");
    rest.remove_prefix(slash);
    return rest.substr(0, rest.find('?'));
  }
  return std::nullopt;
}

std::size_t request_head_end(std::string_view bytes, std::size_t from) {
  std::size_t start = 0;
  while (bytes.substr(start, 2) == "\r\n") start += 2;
  // The blank line may straddle the previous search's end. A bare LF ends a
  // line too (so that a head of bare LFs is answered, by the parser's 400,
  // instead of waiting for a CRLF that never comes).
  for (std::size_t at = bytes.find('\n', std::max(start, from >= 2 ? from - 2 : 0));
       at != std::string_view::npos; at = bytes.find('\n', at + 1)) {
    if (at + 1 < bytes.size() && bytes[at + 1] == '\n') return at + 2;
    if (at + 2 < bytes.size() && bytes[at + 1] == '\r' && bytes[at + 2] == '\n') return at + 3;
  }
  return std::string_view::npos;
}

bool has_obs_fold(std::string_view head) {
  for (auto at = head.find("\r\n"); at != std::string_view::npos; at = head.find("\r\n", at + 2)) {
    if (at + 2 < head.size() && (head[at + 2] == ' ' || head[at + 2] == '\t')) return true;
  }
  return false;
}

bool has_unsupported_http_version(std::string_view head) {
  while (head.substr(0, 2) == "\r\n") head.remove_prefix(2);
  // The line ends at its first CR or LF (two memchr, not a set per byte).
  std::string_view line = head.substr(0, head.find('\n'));
  line = line.substr(0, line.find('\r'));
  const auto space = line.rfind(' ');
  if (space == std::string_view::npos) return false;
  const std::string_view v = line.substr(space + 1);
  const auto digit = [](char c) { return c >= '0' && c <= '9'; };
  if (v.size() != 8 || v.substr(0, 5) != "HTTP/" || !digit(v[5]) || v[6] != '.' || !digit(v[7])) {
    return false;
  }
  return v != "HTTP/1.0" && v != "HTTP/1.1";
}

bool is_valid_host(std::string_view value) {
  const auto alpha = [](char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); };
  const auto digit = [](char c) { return c >= '0' && c <= '9'; };
  const auto hex = [&](char c) {
    return digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
  };
  const auto unreserved = [&](char c) {
    return alpha(c) || digit(c) || c == '-' || c == '.' || c == '_' || c == '~';
  };
  // sub-delims without the comma (see the header)
  const auto sub_delim = [](char c) {
    return std::string_view("!$&'()*+;=").find(c) != std::string_view::npos;
  };
  std::string_view host = value, port;
  if (!value.empty() && value.front() == '[') {
    const auto close = value.find(']');
    if (close == std::string_view::npos) return false;
    host = value.substr(1, close - 1);
    const std::string_view rest = value.substr(close + 1);
    if (!rest.empty() && rest.front() != ':') return false;
    if (!rest.empty()) port = rest.substr(1);
    if (!host.empty() && (host.front() == 'v' || host.front() == 'V')) {
      // IPvFuture: "v" 1*HEXDIG "." 1*( unreserved / sub-delims / ":" )
      const auto dot = host.find('.');
      if (dot == std::string_view::npos || dot < 2 || dot + 1 == host.size()) return false;
      if (!std::all_of(host.begin() + 1, host.begin() + dot, hex)) return false;
      if (!std::all_of(host.begin() + dot + 1, host.end(),
                       [&](char c) { return unreserved(c) || sub_delim(c) || c == ':'; })) {
        return false;
      }
    } else {
      in6_addr ignored;
      if (host.size() >= INET6_ADDRSTRLEN) return false;
      char text[INET6_ADDRSTRLEN];
      host.copy(text, host.size());
      text[host.size()] = '\0';
      if (inet_pton(AF_INET6, text, &ignored) != 1) return false;
    }
  } else {
    const auto colon = value.find(':');
    host = value.substr(0, colon);
    if (colon != std::string_view::npos) port = value.substr(colon + 1);
    for (std::size_t i = 0; i < host.size(); ++i) {
      if (host[i] == '%') {
        if (i + 2 >= host.size() || !hex(host[i + 1]) || !hex(host[i + 2])) return false;
        i += 2;
      } else if (!unreserved(host[i]) && !sub_delim(host[i])) {
        return false;
      }
    }
  }
  // port = *DIGIT (RFC 3986 §3.2.3; empty is allowed), within 16 bits.
  unsigned long number = 0;
  for (char c : port) {
    if (!digit(c)) return false;
    number = number * 10 + static_cast<unsigned long>(c - '0');
    if (number > 65535) return false;
  }
  return true;
}

bool has_invalid_target_byte(std::string_view target) {
  return std::any_of(target.begin(), target.end(), [](char c) {
    const auto b = static_cast<unsigned char>(c);
    return b <= 0x20 || b >= 0x7f;
  });
}

int parse_retry_after(std::string_view value, long long now_unix) {
  while (!value.empty() && value.front() == ' ') value.remove_prefix(1);
  while (!value.empty() && value.back() == ' ') value.remove_suffix(1);
  if (value.empty()) return -1;
  if (std::all_of(value.begin(), value.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    if (value.size() > 9) return 1'000'000'000;
    return std::stoi(std::string(value));
  }
  // IMF-fixdate: "Sun, 06 Nov 1994 08:49:37 GMT"
  std::tm tm{};
  std::string s(value);
  const char* end = strptime(s.c_str(), "%a, %d %b %Y %H:%M:%S GMT", &tm);
  if (end == nullptr || *end != '\0') return -1;
  long long at = timegm(&tm);
  return static_cast<int>(std::max(0LL, at - now_unix));
}

}  // namespace llmgate::gateway
