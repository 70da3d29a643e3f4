// providers[].auth: short-lived credentials the gateway fetches and refreshes
// itself -- a Google service account (Vertex AI), the GCE/GKE metadata
// server, Microsoft Entra ID (Azure OpenAI). What the environment supplies
// is resolved here, as the clouds' own SDKs read it; the secret (Entra's
// client secret) is referenced like api_key and never echoed.
#include <stdexcept>
#include <string>
#include <string_view>

#include "config/missing_secrets.h"
#include "config/quoting.h"
#include "config/read_file.h"
#include "config/sections.h"

namespace llmgate::config {
namespace {

constexpr std::size_t kMaxCredentialFileBytes = 64 * 1024;

// The metadata server's token for the default service account.
constexpr std::string_view kMetadataTokenPath =
    "/computeMetadata/v1/instance/service-accounts/default/token";

std::string env_or(EnvLookup env, const char* name, std::string fallback = {}) {
  if (auto v = env(name); v && !v->empty()) return *v;
  return fallback;
}

// A file read at each refresh: its absence is an error now, not at the first
// request -- except under --check-config, which runs where secrets are not.
void check_readable(const ConfigNode& node, const std::string& path) {
  if (MissingSecrets::current()) return;
  try {
    read_file(path, kMaxCredentialFileBytes);
  } catch (const std::runtime_error& e) {
    node.fail("cannot read " + quote(path) + ": " + e.what());
  }
}

// An http(s) URL (the token endpoint, the authority).
std::string read_endpoint(const ConfigNode& node) {
  std::string text = node.string();
  try {
    parse_upstream_url(text);
  } catch (const std::invalid_argument& e) {
    node.fail(e.what());
  }
  while (!text.empty() && text.back() == '/') text.pop_back();
  return text;
}

std::string read_identifier(const ConfigNode& node) {
  std::string text = node.string();
  for (const char c : text) {
    if (c <= 0x20 || c >= 0x7f || c == '/' || c == '?' || c == '#' || c == '%')
      node.fail("expected an identifier (no spaces, '/', '?', '#' or '%'), got " + quote(text));
  }
  if (text.empty()) node.fail("must not be empty");
  return text;
}

void read_entra(const ConfigNode& node, EnvLookup env, ProviderAuth& auth) {
  auth.kind = ProviderAuth::Kind::kEntra;
  node.read_map([&](ConfigMap& m) {
    auth.tenant_id = env_or(env, "AZURE_TENANT_ID");
    auth.client_id = env_or(env, "AZURE_CLIENT_ID");
    auth.authority = env_or(env, "AZURE_AUTHORITY_HOST", "https://login.microsoftonline.com");
    m.read("tenant_id", auth.tenant_id, read_identifier);
    m.read("client_id", auth.client_id, read_identifier);
    m.read("authority", auth.authority, read_endpoint);
    while (!auth.authority.empty() && auth.authority.back() == '/') auth.authority.pop_back();
    if (auto secret = read_secret(m, node, "client_secret", env)) {
      auth.client_secret = std::move(secret->value);
      auth.client_secret_source = std::move(secret->source);
      auth.source = "entra client secret (" + auth.client_secret_source + ")";
    }
    const auto federated = m.optional("federated_token_file");
    if (federated && !auth.client_secret_source.empty())
      federated->fail("set either client_secret_env/client_secret_file or federated_token_file");
    if (auth.client_secret_source.empty()) {
      auth.file = federated ? federated->string() : env_or(env, "AZURE_FEDERATED_TOKEN_FILE");
      if (auth.file.empty()) {
        node.fail(
            "names no credential: set client_secret_env, client_secret_file or "
            "federated_token_file (or AZURE_FEDERATED_TOKEN_FILE for workload identity)");
      }
      check_readable(federated ? *federated : node, auth.file);
      auth.source = "entra workload identity (federated token file " + auth.file + ")";
    }
    if (auth.tenant_id.empty()) node.fail("names no tenant: set tenant_id (or AZURE_TENANT_ID)");
    if (auth.client_id.empty()) node.fail("names no client: set client_id (or AZURE_CLIENT_ID)");
  });
}

}  // namespace

const char* to_string(ProviderAuth::Kind k) {
  switch (k) {
    case ProviderAuth::Kind::kNone:
      return "none";
    case ProviderAuth::Kind::kGoogleServiceAccount:
      return "google_service_account";
    case ProviderAuth::Kind::kGoogleMetadata:
      return "google_metadata";
    case ProviderAuth::Kind::kEntra:
      return "entra";
  }
  return "unknown";
}

ProviderAuth read_provider_auth(const ConfigNode& node, EnvLookup env) {
  ProviderAuth auth;
  node.read_map([&](ConfigMap& m) {
    const auto sa_file = m.optional("google_service_account_file");
    const auto google = m.optional("google");
    const auto entra = m.optional("entra");
    if ((sa_file ? 1 : 0) + (google ? 1 : 0) + (entra ? 1 : 0) != 1) {
      node.fail("set exactly one of google_service_account_file, google and entra");
    }
    if (sa_file) {
      auth.kind = ProviderAuth::Kind::kGoogleServiceAccount;
      auth.file = sa_file->string();
      check_readable(*sa_file, auth.file);
      auth.source = "google service account (key file " + auth.file + ")";
    } else if (google) {
      const std::string how = google->string();
      const std::string adc = env_or(env, "GOOGLE_APPLICATION_CREDENTIALS");
      if (how == "default" && !adc.empty()) {
        // Application Default Credentials: the key file the variable names.
        auth.kind = ProviderAuth::Kind::kGoogleServiceAccount;
        auth.file = adc;
        check_readable(*google, auth.file);
        auth.source = "google application default credentials (GOOGLE_APPLICATION_CREDENTIALS " +
                      auth.file + ")";
      } else if (how == "default" || how == "metadata") {
        auth.kind = ProviderAuth::Kind::kGoogleMetadata;
        const std::string host = env_or(env, "GCE_METADATA_HOST", "metadata.google.internal");
        auth.token_url = "http://" + host + std::string(kMetadataTokenPath);
        auth.source = "google metadata server (" + host + ")";
      } else {
        google->fail("expected default or metadata, got " + quote(how));
      }
    } else {
      read_entra(*entra, env, auth);
    }
    m.read("token_url", auth.token_url, read_endpoint);
    m.read("scope", auth.scope, [](const ConfigNode& n) {
      std::string text = n.string();
      for (const char c : text) {
        if (c < 0x20 || c >= 0x7f) n.fail("scope contains control characters");
      }
      if (text.empty()) n.fail("must not be empty");
      return text;
    });
  });
  return auth;
}

}  // namespace llmgate::config
