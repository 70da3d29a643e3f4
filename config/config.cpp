// Entry points: parse_config, load_config, lookups. The sections themselves
// are read in *_section.cpp; the YAML walking machinery is yaml_walker.h.
#include "config/config.h"

#include <sys/stat.h>
#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <stdexcept>

#include "config/missing_secrets.h"
#include "config/read_file.h"
#include "config/sections.h"
#include "config/yaml_walker.h"

namespace llmgate::config {
namespace {

constexpr std::size_t kMaxConfigFileBytes = 16 * 1024 * 1024;
// routing.region when the file sets none: one image can run in many regions.
constexpr const char* kRegionVariable = "LLMGATE_REGION";
// The shared_state section as YAML, for deployments that add a Redis to a
// config they do not own (deploy/kustomize/components/shared-state-redis).
constexpr const char* kSharedStateVariable = "LLMGATE_SHARED_STATE";

// Counts documents without keeping them.
struct DiscardEvents : YAML::EventHandler {
  void OnDocumentStart(const YAML::Mark&) override {}
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark&, YAML::anchor_t) override {}
  void OnAlias(const YAML::Mark&, YAML::anchor_t) override {}
  void OnScalar(const YAML::Mark&, const std::string&, YAML::anchor_t,
                const std::string&) override {}
  void OnSequenceStart(const YAML::Mark&, const std::string&, YAML::anchor_t,
                       YAML::EmitterStyle::value) override {}
  void OnSequenceEnd() override {}
  void OnMapStart(const YAML::Mark&, const std::string&, YAML::anchor_t,
                  YAML::EmitterStyle::value) override {}
  void OnMapEnd() override {}
};

// One YAML document; an empty one (or only comments) is an empty mapping.
//
// Not YAML::LoadAll: yaml-cpp 0.7 (Debian 12) loops forever on some invalid
// streams, e.g. a stray top-level ',' (jbeder/yaml-cpp#1040), reporting an
// empty document again and again without consuming input. Counting documents
// and stopping at the second one cannot loop; then Load takes the first.
YAML::Node parse_yaml(const std::string& text, const std::string& origin) {
  YAML::Node document;
  try {
    std::istringstream in(text);
    YAML::Parser parser(in);
    DiscardEvents discard;
    int documents = 0;
    while (parser.HandleNextDocument(discard)) {
      if (++documents > 1) {
        throw ConfigError(origin +
                          ": expected one YAML document, found 2 (or stray text after the "
                          "first, such as a ',' at the top level)");
      }
    }
    document = YAML::Load(text);
  } catch (const YAML::ParserException& e) {
    throw LocatedError(origin + ":" + std::to_string(e.mark.line + 1) + ":" +
                           std::to_string(e.mark.column + 1) + ": invalid YAML: " + e.msg,
                       static_cast<std::size_t>(e.mark.line) + 1,
                       static_cast<std::size_t>(e.mark.column) + 1);
  } catch (const YAML::Exception& e) {
    throw ConfigError(origin + ": invalid YAML: " + e.msg);
  }
  if (!document || document.IsNull()) return YAML::Node(YAML::NodeType::Map);
  return document;
}

}  // namespace

std::shared_ptr<const Config> parse_config(const std::string& yaml_text, const std::string& origin,
                                           EnvLookup env) {
  if (env == nullptr) env = &process_env;
  // Every problem in the file, reported together at the end (yaml_walker.h).
  Problems problems;
  const ConfigNode root(parse_yaml(yaml_text, origin), origin, "");
  auto config = std::make_shared<Config>();

  ConfigMap sections(root);
  const auto server = sections.optional("server");
  const auto timeouts = sections.optional("timeouts");
  const auto providers = sections.optional("providers");
  const auto models = sections.optional("models");
  const auto routing = sections.optional("routing");
  const auto auth = sections.optional("auth");
  const auto shared_state = sections.optional("shared_state");
  const auto tracing = sections.optional("tracing");
  // Checked first, and alone: a misspelt "providers:" would otherwise
  // surface as "unknown provider" errors under models.
  sections.reject_unknown_keys();
  if (!problems.empty()) problems.raise(origin);

  if (server) recover([&] { config->server = read_server(*server); });
  if (timeouts) recover([&] { config->timeouts = read_default_timeouts(*timeouts); });
  if (providers) recover([&] { config->providers = read_providers(*providers, env); });
  // After providers (constraints name them), before models (whose routing
  // starts from routing.defaults).
  if (routing) recover([&] { config->routing = read_routing(*routing, config->providers); });
  if (config->routing.region.empty()) config->routing.region = env(kRegionVariable).value_or("");
  if (models) {
    recover([&] {
      config->models = read_models(*models, config->providers, config->routing.defaults);
    });
  }
  config->models_declared = models.has_value();
  // After models: keys name them.
  if (auth) recover([&] { config->auth = read_auth(*auth, config->models); });
  const auto shared_from_env = env(kSharedStateVariable);
  recover([&] {
    if (shared_state) {
      if (shared_from_env) {
        shared_state->fail(std::string("is also set by the environment variable ") +
                           kSharedStateVariable + "; keep one");
      }
      config->shared_state = read_shared_state(*shared_state, env);
    } else if (shared_from_env) {
      const std::string from = std::string("$") + kSharedStateVariable;
      const ConfigNode node(parse_yaml(*shared_from_env, from), from, "shared_state");
      config->shared_state = read_shared_state(node, env);
    }
  });
  recover([&] { config->tracing = read_tracing(tracing, env, config->warnings); });
  if (!problems.empty()) problems.raise(origin);
  for (const auto& p : config->providers) {
    // A provider key readable by other users of the machine is a leak
    // waiting to happen (ssh refuses such keys; we warn).
    constexpr std::string_view kFile = "file:";
    if (p.api_key_source.rfind(kFile, 0) != 0) continue;
    const std::string path = p.api_key_source.substr(kFile.size());
    struct stat st {};
    if (::stat(path.c_str(), &st) == 0 && (st.st_mode & (S_IRWXG | S_IRWXO)) != 0) {
      char mode[8];
      std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.st_mode & 07777));
      config->warnings.push_back("providers." + p.name + ".api_key_file " + path + " has mode " +
                                 mode + ": readable by group or others; chmod 600 (or 400) it");
    }
  }
  return config;
}

std::shared_ptr<const Config> load_config(const std::string& path, EnvLookup env) {
  std::string text;
  try {
    text = read_file(path, kMaxConfigFileBytes);
  } catch (const std::runtime_error& e) {
    throw ConfigError(path + ": cannot read config file: " + e.what());
  }
  return parse_config(text, path, env);
}

namespace {
thread_local MissingSecrets* missing_secrets = nullptr;
}  // namespace

MissingSecrets::MissingSecrets() : previous_(missing_secrets) { missing_secrets = this; }
MissingSecrets::~MissingSecrets() { missing_secrets = previous_; }
MissingSecrets* MissingSecrets::current() { return missing_secrets; }
void MissingSecrets::add(const std::string& name) {
  if (std::find(names_.begin(), names_.end(), name) == names_.end()) names_.push_back(name);
}

std::optional<std::string> process_env(const std::string& name) {
  // getenv is not safe against concurrent setenv; config is loaded at start-up
  // (or on reload) and nothing in llmgate calls setenv.
  if (const char* value = std::getenv(name.c_str())) return std::string(value);
  return std::nullopt;
}

// Linear scans: a handful of entries, and a Config built or edited by hand
// (tests) stays correct without an index to keep in sync.
const Provider* Config::find_provider(const std::string& name) const {
  for (const auto& provider : providers) {
    if (provider.name == name) return &provider;
  }
  return nullptr;
}

const Model* Config::find_model(const std::string& name) const {
  for (const auto& model : models) {
    if (model.name == name) return &model;
  }
  return nullptr;
}

}  // namespace llmgate::config
