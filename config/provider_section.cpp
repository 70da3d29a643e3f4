// providers: upstream endpoints, their secrets, pools, timeouts, TLS and headers.
//
// Secrets: a key is referenced (api_key_env / api_key_file), resolved here
// once, and never appears in an error message — messages name the variable or
// the file instead.
#include <algorithm>
#include <set>
#include <stdexcept>
#include <string>
#include <string_view>

#include "config/ascii.h"
#include "config/missing_secrets.h"
#include "config/percent.h"
#include "config/quoting.h"
#include "config/read_file.h"
#include "config/sections.h"

namespace llmgate::config {
namespace {

constexpr std::size_t kMaxConnectionsPerWorker = 10'000;
constexpr std::size_t kMaxSecretFileBytes = 64 * 1024;
constexpr std::size_t kMaxCaFileBytes = 16 * 1024 * 1024;

// Set by the gateway itself, or hop-by-hop: configuring them would break
// framing, authentication or connection reuse.
constexpr std::string_view kReservedHeaders[] = {
    "authorization",      "host",       "content-length",   "transfer-encoding",
    "connection",         "keep-alive", "proxy-connection", "proxy-authorization",
    "proxy-authenticate", "te",         "trailer",          "upgrade",
};

// Provider names and regions become metric labels and log fields.
bool is_label_value(std::string_view text) {
  return !text.empty() && std::all_of(text.begin(), text.end(), [](char c) {
    return is_ascii_alnum(c) || c == '_' || c == '.' || c == '-';
  });
}

bool is_env_name(std::string_view text) {
  return !text.empty() && !is_ascii_digit(text.front()) &&
         std::all_of(text.begin(), text.end(),
                     [](char c) { return is_ascii_alnum(c) || c == '_'; });
}

// RFC 9110 token, the syntax of a header name.
bool is_token(std::string_view text) {
  return !text.empty() && std::all_of(text.begin(), text.end(), [](char c) {
    return is_ascii_alnum(c) ||
           std::string_view("!#$%&'*+-.^_`|~").find(c) != std::string_view::npos;
  });
}

// An API key goes into "Authorization: Bearer <key>": visible ASCII only, so
// a stray newline can never split the header.
bool is_header_safe_key(std::string_view key) {
  return !key.empty() &&
         std::all_of(key.begin(), key.end(), [](char c) { return c > 0x20 && c < 0x7f; });
}

std::string read_label_value(const ConfigNode& node) {
  std::string text = node.string();
  if (!is_label_value(text)) {
    node.fail("expected letters, digits, '_', '.' or '-', got " + quote(text));
  }
  return text;
}

UpstreamUrl read_url(const ConfigNode& node) {
  try {
    return parse_upstream_url(node.string());
  } catch (const std::invalid_argument& e) {
    node.fail(e.what());
  }
}

std::string read_path(const ConfigNode& node) {
  std::string path = node.string();
  if (path.empty()) node.fail("must not be empty");
  return path;
}

// --- secrets ----------------------------------------------------------------

ApiKey key_from_env(const ConfigNode& node, EnvLookup env) {
  const std::string name = node.string();
  // Not echoed: a value that is not a variable name may be a pasted key.
  if (!is_env_name(name)) {
    node.fail(
        "expected the name of an environment variable (letters, digits, '_'), not the key itself");
  }
  const std::optional<std::string> raw = env(name);
  const std::string where = "environment variable " + quote(name);
  if (!raw) {
    if (MissingSecrets* missing = MissingSecrets::current()) {
      missing->add(name);
      return ApiKey{"llmgate-check-config-stand-in", "env:" + name};
    }
    node.fail(where + " is not set");
  }
  const std::string_view key = trim_whitespace(*raw);
  if (key.empty()) node.fail(where + " is empty");
  if (!is_header_safe_key(key)) node.fail(where + " contains spaces or control characters");
  return ApiKey{std::string(key), "env:" + name};
}

ApiKey key_from_file(const ConfigNode& node) {
  const std::string path = read_path(node);
  std::string raw;
  try {
    raw = read_file(path, kMaxSecretFileBytes);
  } catch (const std::runtime_error& e) {
    node.fail("cannot read " + quote(path) + ": " + e.what());
  }
  const std::string_view key = trim_whitespace(raw);
  if (key.empty()) node.fail("file " + quote(path) + " is empty");
  if (!is_header_safe_key(key))
    node.fail("file " + quote(path) + " contains spaces or control characters inside the key");
  return ApiKey{std::string(key), "file:" + path};
}

}  // namespace

std::optional<ApiKey> read_secret(ConfigMap& m, const ConfigNode& node, const std::string& name,
                                  EnvLookup env) {
  const auto from_env = m.optional(name + "_env");
  const auto from_file = m.optional(name + "_file");
  if (from_env && from_file) node.fail("set at most one of " + name + "_env and " + name + "_file");
  if (from_env) return key_from_env(*from_env, env);
  if (from_file) return key_from_file(*from_file);
  return std::nullopt;
}

namespace {

// --- sub-sections -------------------------------------------------------------

Pool read_pool(const ConfigNode& node) {
  Pool pool;
  node.read_map([&](ConfigMap& m) {
    m.read("max_connections", pool.max_connections,
           integer_in<std::size_t>(1, kMaxConnectionsPerWorker));
    m.read("idle_timeout", pool.idle_timeout, &ConfigNode::duration);
  });
  return pool;
}

std::string read_ca_file(const ConfigNode& node) {
  std::string path = read_path(node);
  // Fail at start-up, not at the first TLS handshake.
  try {
    read_file(path, kMaxCaFileBytes);
  } catch (const std::runtime_error& e) {
    node.fail("cannot read " + quote(path) + ": " + e.what());
  }
  return path;
}

std::string read_sni(const ConfigNode& node) {
  std::string name = node.string();
  const bool valid = !name.empty() && std::all_of(name.begin(), name.end(), [](char c) {
    return is_ascii_alnum(c) || c == '-' || c == '.';
  });
  if (!valid) node.fail("expected a host name, got " + quote(name));
  return name;
}

}  // namespace

Tls read_tls(const ConfigNode& node) {
  Tls tls;
  node.read_map([&](ConfigMap& m) {
    m.read("verify", tls.verify, &ConfigNode::boolean);
    m.read("ca_file", tls.ca_file, read_ca_file);
    m.read("sni", tls.sni, read_sni);
  });
  return tls;
}

namespace {

// A header value: the text itself, or a secret read like api_key
// ({env: NAME} or {file: PATH}), which is then scrubbed like the key.
struct HeaderValue {
  std::string text;
  bool secret = false;
};

HeaderValue read_header_value(const ConfigNode& node, EnvLookup env) {
  if (node.is_map()) {
    HeaderValue out{"", true};
    node.read_map([&](ConfigMap& m) {
      const auto from_env = m.optional("env");
      const auto from_file = m.optional("file");
      if (from_env.has_value() == from_file.has_value()) node.fail("set one of env and file");
      out.text = (from_env ? key_from_env(*from_env, env) : key_from_file(*from_file)).value;
    });
    return out;
  }
  std::string value = node.string();
  // The value is not echoed: extra headers often carry credentials.
  const bool safe = std::all_of(value.begin(), value.end(), [](char c) {
    return c == '\t' || (static_cast<unsigned char>(c) >= 0x20 && c != 0x7f);
  });
  if (!safe) node.fail("header value contains control characters");
  return {std::move(value), false};
}

// A header name the gateway may send: a token, not one it manages itself.
void check_header_name(const ConfigNode& where, const std::string& name) {
  const std::string lower = ascii_lowercase(name);
  if (!is_token(name)) where.fail("invalid header name " + quote(name));
  if (std::find(std::begin(kReservedHeaders), std::end(kReservedHeaders), lower) !=
      std::end(kReservedHeaders)) {
    where.fail("header " + quote(name) + " is managed by the gateway and cannot be set" +
               (lower == "authorization" ? "; use api_key_env or api_key_file" : ""));
  }
}

}  // namespace

void read_headers(const ConfigNode& node, EnvLookup env, Provider& provider) {
  std::set<std::string> seen;  // lower-cased: header names are case-insensitive
  for (const auto& [name, value_node] : node.entries()) {
    check_header_name(value_node, name);
    if (!seen.insert(ascii_lowercase(name)).second)
      value_node.fail("duplicate header " + quote(name));
    HeaderValue value = read_header_value(value_node, env);
    if (value.secret) provider.header_secrets.push_back(value.text);
    provider.headers.emplace(name, std::move(value.text));
  }
}

namespace {

// A path below base_url: "/..." with no query or fragment; "{model}" allowed.
std::string read_chat_path(const ConfigNode& node) {
  std::string path = node.string();
  const bool ok =
      !path.empty() && path.front() == '/' && std::all_of(path.begin(), path.end(), [](char c) {
        return c > 0x20 && c < 0x7f && c != '?' && c != '#' && c != '%';
      });
  if (!ok) node.fail("expected a path starting with '/' (no query, no spaces), got " + quote(path));
  return path;
}

// {name: value, ...} in document order, encoded once: "a=b&c=d".
std::string read_query(const ConfigNode& node) {
  std::string query;
  for (const auto& [name, value] : node.entries()) {
    if (name.empty()) value.fail("empty query parameter name");
    query.append(query.empty() ? "" : "&")
        .append(percent_encode(name))
        .append("=")
        .append(percent_encode(value.string()));
  }
  return query;
}

// The region of a Bedrock endpoint's host: bedrock-runtime.REGION.amazonaws.com
// (also -fips, and .com.cn in China); "" if it names none.
std::string aws_region_of(std::string_view host) {
  for (std::string_view prefix : {"bedrock-runtime.", "bedrock-runtime-fips."}) {
    if (!host.starts_with(prefix)) continue;
    host.remove_prefix(prefix.size());
    const std::size_t dot = host.find('.');
    if (dot == std::string_view::npos || !host.substr(dot).starts_with(".amazonaws.com")) break;
    return std::string(host.substr(0, dot));
  }
  return {};
}

Protocol read_protocol(const ConfigNode& node) {
  const std::string& name = node.string();
  for (Protocol p :
       {Protocol::kOpenAi, Protocol::kAnthropic, Protocol::kGemini, Protocol::kBedrock}) {
    if (name == to_string(p)) return p;
  }
  node.fail("expected one of openai, anthropic, gemini, bedrock, got " + quote(name));
}

// A value sent as a header as it is: printable ASCII, no spaces.
std::string read_header_token(const ConfigNode& node) {
  std::string value = node.string();
  const bool ok = !value.empty() && std::all_of(value.begin(), value.end(),
                                                [](char c) { return c > 0x20 && c < 0x7f; });
  if (!ok) node.fail("expected printable ASCII without spaces, got " + quote(value));
  return value;
}

// {effort: tokens}: replaces the defaults whole.
std::map<std::string, std::int64_t> read_thinking_budgets(const ConfigNode& node) {
  std::map<std::string, std::int64_t> out;
  for (const auto& [effort, tokens] : node.entries()) {
    if (effort.empty()) tokens.fail("empty reasoning effort");
    out[effort] = tokens.integer(0, 10'000'000);
  }
  return out;
}

Provider read_provider(const ConfigNode& node, EnvLookup env,
                       const std::vector<Provider>& earlier) {
  Provider provider;
  node.read_map([&](ConfigMap& m) {
    const ConfigNode name = m.required("name");
    provider.name = read_label_value(name);
    recover([&] {  // the rest of the entry is still worth checking
      for (const auto& other : earlier) {
        if (other.name == provider.name)
          name.fail("duplicate provider name " + quote(provider.name));
      }
    });
    provider.base_url = read_url(m.required("base_url"));

    if (auto key = read_secret(m, node, "api_key", env)) {
      provider.api_key = std::move(key->value);
      provider.api_key_source = std::move(key->source);
    }

    if (auto auth = m.optional("auth")) {
      recover([&] {
        provider.auth = read_provider_auth(*auth, env);
        if (!provider.api_key_source.empty())
          auth->fail("set either api_key_env/api_key_file or auth, not both");
      });
    }
    m.read("region", provider.region, read_label_value);
    m.read("pool", provider.pool, read_pool);
    m.read("timeouts", provider.timeouts, read_timeout_overrides);
    if (auto tls = m.optional("tls")) {
      if (!provider.base_url.tls) tls->fail("base_url is http://; tls settings need https://");
      provider.tls = read_tls(*tls);
    }
    if (auto headers = m.optional("headers")) read_headers(*headers, env, provider);
    if (auto header = m.optional("api_key_header")) {
      const std::string name = header->string();
      const std::string lower = ascii_lowercase(name);
      // Authorization carries "Bearer <key>" (Vertex AI's token for Gemini);
      // any other header the key alone (Azure OpenAI's api-key).
      if (lower == "authorization") {
        provider.api_key_header = "Authorization";
      } else {
        check_header_name(*header, name);
        provider.api_key_header = name;
      }
      if (provider.auth.enabled())
        header->fail(
            "auth sends its token as Authorization: Bearer; api_key_header is for api_key");
      for (const auto& [other, value] : provider.headers) {
        if (ascii_lowercase(other) == lower)
          header->fail("header " + quote(name) + " is also set in headers");
      }
    }
    m.read("chat_path", provider.chat_path, read_chat_path);
    m.read("query", provider.query, read_query);
    m.read("stream_options", provider.stream_options, &ConfigNode::boolean);
    m.read("stream", provider.stream, &ConfigNode::boolean);
    m.read("protocol", provider.protocol, read_protocol);
    m.read("anthropic_version", provider.anthropic_version, read_header_token);
    m.read("max_tokens", provider.default_max_tokens, integer_in<std::int64_t>(1, 10'000'000));
    m.read("thinking_budgets", provider.thinking_budgets, read_thinking_budgets);
    const auto region = m.optional("aws_region");
    const auto profile = m.optional("aws_profile");
    if (region) provider.aws_region = read_label_value(*region);
    if (profile) provider.aws_profile = read_label_value(*profile);
    if (provider.protocol != Protocol::kBedrock) {
      if (region) region->fail("aws_region is for protocol: bedrock");
      if (profile) profile->fail("aws_profile is for protocol: bedrock");
    } else if (provider.auth.enabled()) {
      m.required("auth").fail(
          "protocol: bedrock signs with AWS credentials (the SDKs' chain, aws_profile), not auth");
    } else if (provider.aws_region.empty()) {
      provider.aws_region = aws_region_of(provider.base_url.host);
      if (provider.aws_region.empty()) {
        m.required("base_url")
            .fail("names no AWS region (bedrock-runtime.REGION.amazonaws.com): set aws_region");
      }
    }
  });
  return provider;
}

}  // namespace

const char* to_string(Protocol p) {
  switch (p) {
    case Protocol::kOpenAi:
      return "openai";
    case Protocol::kAnthropic:
      return "anthropic";
    case Protocol::kGemini:
      return "gemini";
    case Protocol::kBedrock:
      return "bedrock";
  }
  return "unknown";
}

std::vector<Provider> read_providers(const ConfigNode& node, EnvLookup env) {
  std::vector<Provider> providers;
  for (const auto& item : node.items()) {
    if (!recover([&] { providers.push_back(read_provider(item, env, providers)); })) {
      definition_failed(item, "provider");
    }
  }
  return providers;
}

}  // namespace llmgate::config
