// Where AWS credentials come from (aws_credentials.h).
#include "providers/cloud/aws_credentials.h"

#include <cstdlib>
#include <exception>
#include <stdexcept>

#include "config/ascii.h"
#include "config/config.h"
#include "config/read_file.h"

namespace llmgate::providers::cloud {

Getenv process_environment() {
  return [](const char* name) -> std::optional<std::string> {
    const char* v = std::getenv(name);
    if (v == nullptr) return std::nullopt;
    return std::string(v);
  };
}

namespace {

// A variable set to something (the SDKs treat an empty one as unset).
std::optional<std::string> set(const Getenv& env, const char* name) {
  std::optional<std::string> v = env(name);
  if (v && v->empty()) return std::nullopt;
  return v;
}

}  // namespace

IniSections parse_ini(std::string_view text) {
  IniSections out;
  std::string section;
  while (!text.empty()) {
    const std::size_t nl = text.find('\n');
    std::string_view line = config::trim_whitespace(text.substr(0, nl));
    text = nl == std::string_view::npos ? std::string_view() : text.substr(nl + 1);
    if (line.empty() || line.front() == '#' || line.front() == ';') continue;
    if (line.front() == '[') {
      const std::size_t close = line.find(']');
      if (close == std::string_view::npos) continue;  // not a header: ignored
      section = std::string(config::trim_whitespace(line.substr(1, close - 1)));
      out[section];
      continue;
    }
    const std::size_t eq = line.find('=');
    if (eq == std::string_view::npos || section.empty()) continue;
    std::string_view value = config::trim_whitespace(line.substr(eq + 1));
    // A comment after the value, as the SDKs read it: " #" or " ;".
    for (std::size_t i = 1; i < value.size(); ++i) {
      if ((value[i] == '#' || value[i] == ';') && (value[i - 1] == ' ' || value[i - 1] == '\t')) {
        value = config::trim_whitespace(value.substr(0, i));
        break;
      }
    }
    out[section][std::string(config::trim_whitespace(line.substr(0, eq)))] = std::string(value);
  }
  return out;
}

std::optional<FoundCredentials> credentials_from_environment(const Getenv& env,
                                                             std::string* error) {
  const auto id = set(env, "AWS_ACCESS_KEY_ID");
  const auto secret = set(env, "AWS_SECRET_ACCESS_KEY");
  if (!id && !secret) return std::nullopt;
  if (!id || !secret) {
    if (error) {
      *error = std::string(id ? "AWS_SECRET_ACCESS_KEY" : "AWS_ACCESS_KEY_ID") +
               " is not set, though " + (id ? "AWS_ACCESS_KEY_ID" : "AWS_SECRET_ACCESS_KEY") +
               " is";
    }
    return std::nullopt;
  }
  FoundCredentials f;
  f.credentials.access_key_id = *id;
  f.credentials.secret_access_key = *secret;
  f.credentials.session_token = set(env, "AWS_SESSION_TOKEN").value_or("");
  f.source = "environment";
  return f;
}

std::optional<FoundCredentials> credentials_from_file(std::string_view text,
                                                      std::string_view profile,
                                                      std::string_view path, std::string* error) {
  const IniSections ini = parse_ini(text);
  // The credentials file names a profile plainly; the config file writes
  // "profile NAME" (both are accepted).
  auto it = ini.find(std::string(profile));
  if (it == ini.end()) it = ini.find("profile " + std::string(profile));
  if (it == ini.end()) return std::nullopt;
  const auto& keys = it->second;
  const auto get = [&](const char* k) -> std::string {
    const auto v = keys.find(k);
    return v == keys.end() ? std::string() : v->second;
  };
  FoundCredentials f;
  f.credentials.access_key_id = get("aws_access_key_id");
  f.credentials.secret_access_key = get("aws_secret_access_key");
  f.credentials.session_token = get("aws_session_token");
  f.source = "file " + std::string(path) + " [profile " + std::string(profile) + "]";
  if (!f.credentials.valid()) {
    if (error) {
      *error =
          f.source + " has no " +
          (f.credentials.access_key_id.empty() ? "aws_access_key_id" : "aws_secret_access_key");
    }
    return std::nullopt;
  }
  return f;
}

std::string shared_credentials_path(const Getenv& env) {
  if (auto p = set(env, "AWS_SHARED_CREDENTIALS_FILE")) return *p;
  return set(env, "HOME").value_or("") + "/.aws/credentials";
}

std::string profile_name(const Getenv& env, std::string_view configured) {
  if (!configured.empty()) return std::string(configured);
  return set(env, "AWS_PROFILE").value_or("default");
}

std::optional<WebIdentity> web_identity_from_environment(const Getenv& env) {
  const auto file = set(env, "AWS_WEB_IDENTITY_TOKEN_FILE");
  const auto role = set(env, "AWS_ROLE_ARN");
  if (!file || !role) return std::nullopt;
  return WebIdentity{*file, *role, set(env, "AWS_ROLE_SESSION_NAME").value_or("llmgate")};
}

std::optional<ContainerCredentials> container_credentials_from_environment(const Getenv& env,
                                                                           std::string* error) {
  ContainerCredentials c;
  if (auto relative = set(env, "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI")) {
    c.url = "http://169.254.170.2" + *relative;
  } else if (auto full = set(env, "AWS_CONTAINER_CREDENTIALS_FULL_URI")) {
    c.url = *full;
    // Plain http only to this host or the ECS/EKS agents' addresses: the
    // token and the credentials must not cross a network in the clear.
    config::UpstreamUrl url;
    try {
      url = config::parse_upstream_url(c.url.substr(0, c.url.find('?')));
    } catch (const std::invalid_argument&) {
      if (error) *error = "AWS_CONTAINER_CREDENTIALS_FULL_URI is not an http(s) URL";
      return std::nullopt;
    }
    const std::string& host = url.host;
    const bool allowed = host == "localhost" || host.starts_with("127.") || host == "::1" ||
                         host == "169.254.170.2" || host == "169.254.170.23" ||
                         host == "fd00:ec2::23";
    if (!url.tls && !allowed) {
      if (error) {
        *error = "AWS_CONTAINER_CREDENTIALS_FULL_URI is plain http to " + host +
                 ", which is not a loopback or ECS/EKS agent address";
      }
      return std::nullopt;
    }
  } else {
    return std::nullopt;
  }
  c.token_file = set(env, "AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE").value_or("");
  if (c.token_file.empty()) c.token = set(env, "AWS_CONTAINER_AUTHORIZATION_TOKEN").value_or("");
  return c;
}

ReadFile read_small_file() {
  return [](const std::string& path) -> std::optional<std::string> {
    try {
      return config::read_file(path, 64 * 1024);
    } catch (const std::exception&) {
      return std::nullopt;
    }
  };
}

ResolvedCredentials resolve_aws_credentials(std::string_view configured_profile, const Getenv& env,
                                            const ReadFile& read) {
  ResolvedCredentials out;
  std::string tried;
  if (configured_profile.empty()) {
    std::string error;
    out.found = credentials_from_environment(env, &error);
    if (out.found) return out;
    tried = error.empty() ? "no AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY in the environment" : error;
  }
  const std::string path = shared_credentials_path(env);
  const std::string profile = profile_name(env, configured_profile);
  if (const std::optional<std::string> text = read(path)) {
    std::string error;
    out.found = credentials_from_file(*text, profile, path, &error);
    if (out.found) return out;
    tried += (tried.empty() ? "" : "; ") +
             (error.empty() ? "no profile [" + profile + "] in " + path : error);
  } else {
    tried += (tried.empty() ? "" : "; ") + path + " cannot be read";
  }
  out.error = "no AWS credentials: " + tried;
  return out;
}

}  // namespace llmgate::providers::cloud
