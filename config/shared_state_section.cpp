// shared_state: the Redis that llmgate replicas share limits and cooldowns
// through.
//
//   shared_state:
//     url: redis://redis.llm.svc:6379/0   # rediss:// for TLS
//     username: llmgate                    # an ACL user (optional)
//     password_env: REDIS_PASSWORD         # or password_file
//     tls: {ca_file: /etc/redis-ca.pem}    # rediss:// only
//     key_prefix: llmgate                  # one prefix per gateway fleet
//     on_failure: open                     # or closed
//     timeout: 50ms                        # per command
//     lease_window: 100ms
//     slot_ttl: 15s
#include <charconv>
#include <string>
#include <string_view>

#include "config/quoting.h"
#include "config/sections.h"

namespace llmgate::config {
namespace {

// redis://host[:port][/db] or rediss://...; credentials are not taken from
// the URL (a secret in the config file): username and password_env do that.
void read_url(const ConfigNode& node, SharedState& s) {
  const std::string url = node.string();
  std::string_view rest = url;
  if (rest.rfind("redis://", 0) == 0) {
    rest.remove_prefix(8);
  } else if (rest.rfind("rediss://", 0) == 0) {
    rest.remove_prefix(9);
    s.tls = true;
  } else {
    node.fail("expected redis://host[:port][/db] or rediss://host[:port][/db]");
  }
  if (rest.find('@') != std::string_view::npos) {
    node.fail(
        "credentials do not belong in the URL (a secret in the config file): use username and "
        "password_env or password_file");
  }
  std::string_view hostport = rest.substr(0, rest.find('/'));
  if (const auto slash = rest.find('/'); slash != std::string_view::npos) {
    std::string_view db = rest.substr(slash + 1);
    if (!db.empty()) {
      int n = -1;
      auto [p, ec] = std::from_chars(db.data(), db.data() + db.size(), n);
      if (ec != std::errc() || p != db.data() + db.size() || n < 0 || n > 1000)
        node.fail("the database after the host must be a number (0..1000)");
      s.db = n;
    }
  }
  std::string_view host = hostport;
  if (!hostport.empty() && hostport.front() == '[') {  // [::1]:6379
    const auto close = hostport.find(']');
    if (close == std::string_view::npos) node.fail("unterminated IPv6 address");
    host = hostport.substr(1, close - 1);
    hostport.remove_prefix(close + 1);
    if (!hostport.empty() && hostport.front() != ':') node.fail("expected :port after ]");
  } else if (const auto colon = hostport.rfind(':'); colon != std::string_view::npos) {
    host = hostport.substr(0, colon);
    hostport.remove_prefix(colon);
  } else {
    hostport = {};
  }
  if (!hostport.empty()) {  // ":port"
    std::string_view port = hostport.substr(1);
    unsigned n = 0;
    auto [p, ec] = std::from_chars(port.data(), port.data() + port.size(), n);
    if (ec != std::errc() || p != port.data() + port.size() || n == 0 || n > 65535)
      node.fail("bad port " + quote(std::string(port)));
    s.port = static_cast<std::uint16_t>(n);
  }
  if (host.empty()) node.fail("the URL has no host");
  for (char c : host) {
    if (static_cast<unsigned char>(c) <= ' ' || c == '/' || c == '?' || c == '#')
      node.fail("bad host in the URL");
  }
  s.host = std::string(host);
}

std::string read_prefix(const ConfigNode& node) {
  std::string p = node.string();
  if (p.empty() || p.size() > 64) node.fail("must be 1 to 64 characters");
  for (char c : p) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '-' || c == '_' || c == '.' || c == ':';
    if (!ok) node.fail("letters, digits and - _ . : only");
  }
  return p;
}

SharedState::OnFailure read_on_failure(const ConfigNode& node) {
  const std::string v = node.string();
  if (v == "open") return SharedState::OnFailure::kOpen;
  if (v == "closed") return SharedState::OnFailure::kClosed;
  node.fail("expected open (decide with this replica's own limits) or closed (refuse)");
}

}  // namespace

SharedState read_shared_state(const ConfigNode& node, EnvLookup env) {
  SharedState s;
  node.read_map([&](ConfigMap& m) {
    read_url(m.required("url"), s);
    m.read("username", s.username, &ConfigNode::string);
    if (auto pw = read_secret(m, node, "password", env)) {
      s.password = std::move(pw->value);
      s.password_source = std::move(pw->source);
    }
    if (auto tls = m.optional("tls")) {
      if (!s.tls) tls->fail("url is redis://; tls settings need rediss://");
      s.tls_settings = read_tls(*tls);
    }
    m.read("key_prefix", s.key_prefix, read_prefix);
    m.read("on_failure", s.on_failure, read_on_failure);
    m.read("timeout", s.timeout, &ConfigNode::duration);
    m.read("connect_timeout", s.connect_timeout, &ConfigNode::duration);
    m.read("lease_window", s.lease_window, &ConfigNode::duration);
    m.read("slot_ttl", s.slot_ttl, &ConfigNode::duration);
    m.read("share_ejections", s.share_ejections, &ConfigNode::boolean);
  });
  if (!s.username.empty() && s.password.empty())
    node.fail("username needs a password (password_env or password_file)");
  if (s.slot_ttl < Duration{1'000}) node.fail("slot_ttl must be at least 1s");
  if (s.timeout > Duration{5'000})
    node.fail("timeout over 5s: a request would wait that long for a hung Redis");
  return s;
}

}  // namespace llmgate::config
