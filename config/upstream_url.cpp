// parse_upstream_url: "https://api.groq.com/openai/v1" -> UpstreamUrl.
//
// Accepted: scheme://host[:port][/path-prefix], scheme http or https (any
// case), host a DNS name, an IPv4 literal or an IPv6 literal in brackets.
// Rejected: user info, query strings and fragments — a base URL is joined with
// "/chat/completions", and credentials belong in api_key_env/api_key_file.
// Messages echo only the offending component, never the whole URL, because a
// rejected URL may carry a credential in its user info or query.
#include <arpa/inet.h>

#include <algorithm>
#include <charconv>
#include <stdexcept>
#include <string_view>

#include "config/ascii.h"
#include "config/config.h"
#include "config/quoting.h"

namespace llmgate::config {
namespace {

constexpr std::uint16_t kHttpPort = 80;
constexpr std::uint16_t kHttpsPort = 443;

[[noreturn]] void invalid(const std::string& reason) {
  throw std::invalid_argument("invalid URL: " + reason);
}

// RFC 3986 reg-name without percent-encoding: what DNS names and IPv4 literals use.
bool is_host_char(char c) {
  return is_ascii_alnum(c) || c == '-' || c == '.' || c == '_' || c == '~';
}

// RFC 3986 pchar plus '/': unreserved, sub-delims, ':', '@', and '%' for escapes.
bool is_path_char(char c) {
  return is_ascii_alnum(c) ||
         std::string_view("-._~!$&'()*+,;=:@%/").find(c) != std::string_view::npos;
}

bool default_port(const UpstreamUrl& url) { return url.port == (url.tls ? kHttpsPort : kHttpPort); }

// Splits "host[:port]" / "[v6]:port" into url.host and url.port.
void parse_authority(std::string_view authority, UpstreamUrl& url) {
  std::string_view port_text;
  if (!authority.empty() && authority.front() == '[') {
    const std::size_t close = authority.find(']');
    if (close == std::string_view::npos) invalid("unterminated IPv6 address " + quote(authority));
    url.host = std::string(authority.substr(1, close - 1));
    in6_addr ignored{};
    if (inet_pton(AF_INET6, url.host.c_str(), &ignored) != 1) {
      invalid("invalid IPv6 address " + quote(authority.substr(0, close + 1)));
    }
    const std::string_view rest = authority.substr(close + 1);
    if (!rest.empty() && rest.front() != ':')
      invalid("unexpected " + quote(rest) + " after IPv6 address");
    if (!rest.empty()) port_text = rest.substr(1);
    if (!rest.empty() && port_text.empty()) invalid("empty port");
  } else {
    if (std::count(authority.begin(), authority.end(), ':') > 1) {
      invalid("invalid host " + quote(authority) + " (IPv6 addresses go in brackets)");
    }
    const std::size_t colon = authority.find(':');
    url.host = std::string(authority.substr(0, colon));
    if (colon != std::string_view::npos) {
      port_text = authority.substr(colon + 1);
      if (port_text.empty()) invalid("empty port");
    }
    if (url.host.empty()) invalid("missing host");
    if (!std::all_of(url.host.begin(), url.host.end(), is_host_char)) {
      invalid("invalid host " + quote(url.host) + " (IPv6 addresses go in brackets)");
    }
  }

  url.port = url.tls ? kHttpsPort : kHttpPort;
  if (!port_text.empty()) {
    unsigned value = 0;
    const auto [ptr, ec] =
        std::from_chars(port_text.data(), port_text.data() + port_text.size(), value);
    if (ec != std::errc() || ptr != port_text.data() + port_text.size() || value == 0 ||
        value > 65535) {
      invalid("invalid port " + quote(port_text) + " (expected 1-65535)");
    }
    url.port = static_cast<std::uint16_t>(value);
  }
}

}  // namespace

UpstreamUrl parse_upstream_url(const std::string& text_in) {
  const std::string_view text = text_in;
  const std::size_t scheme_end = text.find("://");
  if (scheme_end == std::string_view::npos)
    invalid("expected scheme://host, e.g. https://api.openai.com/v1");

  UpstreamUrl url;
  const std::string scheme = ascii_lowercase(text.substr(0, scheme_end));
  if (scheme == "https") {
    url.tls = true;
  } else if (scheme != "http") {
    invalid("unsupported scheme " + quote(text.substr(0, scheme_end)) +
            " (expected http or https)");
  }

  const std::string_view rest = text.substr(scheme_end + 3);
  if (rest.find('#') != std::string_view::npos) invalid("fragments (#...) are not allowed");
  if (rest.find('?') != std::string_view::npos) invalid("query strings (?...) are not allowed");
  const std::size_t path_start = rest.find('/');
  const std::string_view authority = rest.substr(0, path_start);
  if (authority.find('@') != std::string_view::npos) {
    invalid("user info (user:password@) is not allowed; use api_key_env or api_key_file");
  }
  parse_authority(authority, url);

  if (path_start != std::string_view::npos) {
    std::string_view path = rest.substr(path_start);
    if (!std::all_of(path.begin(), path.end(), is_path_char)) {
      invalid("invalid character in path " + quote(path));
    }
    while (!path.empty() && path.back() == '/') path.remove_suffix(1);
    url.path_prefix = std::string(path);
  }
  return url;
}

std::string UpstreamUrl::authority() const {
  std::string out = host.find(':') != std::string::npos ? "[" + host + "]" : host;
  if (!default_port(*this)) out += ":" + std::to_string(port);
  return out;
}

std::string UpstreamUrl::to_string() const {
  return std::string(tls ? "https://" : "http://") + authority() + path_prefix;
}

}  // namespace llmgate::config
