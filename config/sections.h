// Readers for the sections of the config file. Internal to config/.
//
// Each takes the ConfigNode of its section and returns the typed, validated
// value, or throws ConfigError naming the path of the offending key. Named
// limits live next to the reader that enforces them.
#pragma once

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

// models: every deployment must name one of `providers`.
std::vector<Model> read_models(const ConfigNode& node, const std::vector<Provider>& providers);

}  // namespace llmgate::config
