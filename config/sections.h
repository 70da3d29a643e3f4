// Readers for the sections of the config file. Internal to config/.
//
// Each takes the ConfigNode of its section and returns the typed, validated
// value, or throws ConfigError naming the path of the offending key. Named
// limits live next to the reader that enforces them.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "config/config.h"
#include "config/yaml_walker.h"

namespace llmgate::config {

// server:
Server read_server(const ConfigNode& node);

// timeouts: at the top level (defaults), and per provider (overrides).
Timeouts read_default_timeouts(const ConfigNode& node);
TimeoutOverrides read_timeout_overrides(const ConfigNode& node);

// providers: resolves api_key_env / api_key_file through `env` and the file system.
std::vector<Provider> read_providers(const ConfigNode& node, EnvLookup env);

// routing: the router's tuning and routing.defaults. Constraints may name
// only `providers`. The region is left "" when unset (parse_config falls back
// to $LLMGATE_REGION).
Routing read_routing(const ConfigNode& node, const std::vector<Provider>& providers);

// routing.defaults and models[].routing: `base` with the keys in `node`
// overridden, key by key and recursively (a list given replaces the list).
RoutingPolicy read_routing_policy(const ConfigNode& node, const RoutingPolicy& base,
                                  const std::vector<Provider>& providers);

// A number >= 0 (prices, weights, rates).
double read_non_negative(const ConfigNode& node);

// models: every deployment must name one of `providers`; each model's routing
// starts from `defaults`.
std::vector<Model> read_models(const ConfigNode& node, const std::vector<Provider>& providers,
                               const RoutingPolicy& defaults);

// Shared by the sections above.
// The name of one of `providers`, or fails: unknown provider "grok" (did you mean "groq"?)
std::string read_provider_ref(const ConfigNode& node, const std::vector<Provider>& providers);
// A speed in tokens per second, greater than zero.
double read_tokens_per_second(const ConfigNode& node);

// A secret named by an environment variable ({api_key,password}_env) or a
// file ({api_key,password}_file): trimmed, non-empty, no spaces or controls.
struct ApiKey {
  std::string value;
  std::string source;  // for logs: "env:NAME" / "file:/path"
};
// The secret under `<name>_env` or `<name>_file` of `m` (the map `node`), if
// either is set; both is an error.
std::optional<ApiKey> read_secret(ConfigMap& m, const ConfigNode& node, const std::string& name,
                                  EnvLookup env);
// providers[].auth: a Google service account, the metadata server or Entra
// ID, with what the environment supplies resolved.
ProviderAuth read_provider_auth(const ConfigNode& node, EnvLookup env);
// tls: {verify, ca_file, sni}
Tls read_tls(const ConfigNode& node);

// shared_state: the Redis that replicas share limits and cooldowns through.
SharedState read_shared_state(const ConfigNode& node, EnvLookup env);

// tracing: OTLP/HTTP traces; the OTEL_* variables give the defaults (their
// problems that are not errors go to `warnings`).
Tracing read_tracing(const std::optional<ConfigNode>& node, EnvLookup env,
                     std::vector<std::string>& warnings);
// Extra request headers ({name: value | {env: X} | {file: Y}}) into
// provider.headers (and their secrets into provider.header_secrets).
void read_headers(const ConfigNode& node, EnvLookup env, Provider& provider);

// auth: gateway keys; each key's models must be among `models`.
Auth read_auth(const ConfigNode& node, const std::vector<Model>& models);

}  // namespace llmgate::config
