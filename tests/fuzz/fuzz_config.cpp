// Fuzzes configuration loading: config::parse_config(yaml, "fuzz.yaml", env)
// must return a Config or throw config::ConfigError, promptly. Any other
// exception (a yaml-cpp exception that slipped through, std::out_of_range,
// ...), a sanitizer report, a broken invariant below, or a hang or runaway
// memory (libFuzzer's -timeout and -rss_limit_mb, which tools/fuzz.sh sets)
// is a finding.
//
// Regression seed: corpus/fuzz_config/regression-config-yaml-loadall-endless-loop.yaml
// (a stray top-level ',', on which yaml-cpp 0.7's LoadAll never returned;
// tests/fuzz/findings/README.md).
//
// Input: the YAML text. The environment is fixed (see fuzz_env); files named
// by api_key_file / tls.ca_file come from fake_read_file.cpp.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <typeinfo>
#include <utility>

#include "config/config.h"
#include "tests/fuzz/fuzz_check.h"

namespace {

namespace config = llmgate::config;

constexpr std::string_view kEnvSecret = "sk-fuzz-env-secret";
constexpr std::string_view kFileSecret = "sk-fuzz-file-key";  // fake_read_file.cpp

// LLMGATE_FUZZ_VERBOSE=1: print each input's outcome (for triage and seeds).
bool g_verbose = false;

// Variables named UNSET* are not set, EMPTY* are empty, SPACE* hold a key with
// a space in it; LLMGATE_REGION is "eu-west"; the variables that stand for
// whole sections (LLMGATE_SHARED_STATE, OTEL_*) are not set: the input is the
// file; every other one holds kEnvSecret.
std::optional<std::string> fuzz_env(const std::string& name) {
  if (name == "LLMGATE_REGION") return "eu-west";
  if (name == "LLMGATE_SHARED_STATE" || name.rfind("OTEL_", 0) == 0) return std::nullopt;
  if (name.rfind("UNSET", 0) == 0) return std::nullopt;
  if (name.rfind("EMPTY", 0) == 0) return "";
  if (name.rfind("SPACE", 0) == 0) return "sk fuzz";
  return std::string(kEnvSecret);
}

bool header_safe(std::string_view value) {
  for (unsigned char c : value) {
    if (c != '\t' && (c < 0x20 || c == 0x7f)) return false;
  }
  return true;
}

// Lowercase hex, 64 digits: how every configured SHA-256 is stored.
bool sha256_hex(std::string_view s) {
  if (s.size() != 64) return false;
  for (char c : s) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

void check_auth(const config::Config& cfg) {
  std::set<std::string> names, hashes;
  for (const auto& k : cfg.auth.keys) {
    FUZZ_CHECK(!k.name.empty() && names.insert(k.name).second);
    FUZZ_CHECK(sha256_hex(k.sha256) && hashes.insert(k.sha256).second);
    for (const auto& m : k.models) FUZZ_CHECK(cfg.find_model(m) != nullptr);
    for (const auto& rate : {k.requests_per_minute, k.tokens_per_minute}) {
      FUZZ_CHECK(!rate || (std::isfinite(*rate) && *rate > 0));
    }
  }
  FUZZ_CHECK(cfg.auth.admin_key_sha256.empty() || sha256_hex(cfg.auth.admin_key_sha256));
}

void check_config(const config::Config& cfg) {
  FUZZ_CHECK(!cfg.server.listeners.empty());
  std::set<std::pair<std::string, std::uint16_t>> listeners;
  for (const auto& l : cfg.server.listeners) {
    FUZZ_CHECK(!l.address.empty());
    FUZZ_CHECK(l.port == 0 || listeners.emplace(l.address, l.port).second);
  }
  const auto& limits = cfg.server.limits;
  FUZZ_CHECK(limits.max_body_bytes > 0 && limits.max_header_bytes > 0 &&
             limits.max_event_bytes > 0);
  FUZZ_CHECK(limits.client_header_timeout.count() > 0 && limits.client_idle_timeout.count() > 0);
  FUZZ_CHECK(cfg.server.drain.delay.count() >= 0 && cfg.server.drain.timeout.count() > 0);
  FUZZ_CHECK(cfg.timeouts.connect.count() > 0 && cfg.timeouts.ttft.count() > 0 &&
             cfg.timeouts.idle.count() > 0 && cfg.timeouts.total.count() > 0);

  std::set<std::string> providers;
  for (const auto& p : cfg.providers) {
    FUZZ_CHECK(!p.name.empty());
    FUZZ_CHECK(providers.insert(p.name).second);
    FUZZ_CHECK(!p.base_url.host.empty());
    FUZZ_CHECK(p.base_url.path_prefix.empty() || p.base_url.path_prefix.back() != '/');
    FUZZ_CHECK(p.api_key.find_first_of(" \t\r\n") == std::string::npos);
    FUZZ_CHECK(p.api_key.empty() == p.api_key_source.empty());
    for (const auto& [name, value] : p.headers) {
      FUZZ_CHECK(!name.empty());
      FUZZ_CHECK(header_safe(value));
    }
    const config::Timeouts t = cfg.timeouts_for(p);
    FUZZ_CHECK(t.connect.count() > 0 && t.ttft.count() > 0 && t.idle.count() > 0 &&
               t.total.count() > 0);
  }

  std::set<std::string> models;
  for (const auto& m : cfg.models) {
    FUZZ_CHECK(!m.name.empty());
    FUZZ_CHECK(models.insert(m.name).second);
    FUZZ_CHECK(cfg.find_model(m.name) == &m);
    FUZZ_CHECK(!m.deployments.empty());
    std::set<std::string> ids;
    for (const auto& d : m.deployments) {
      FUZZ_CHECK(cfg.find_provider(d.provider) != nullptr);
      FUZZ_CHECK(ids.insert(d.id()).second);
      FUZZ_CHECK(d.price.input_per_1m >= 0 && d.price.output_per_1m >= 0);
    }
    FUZZ_CHECK(m.routing.max_attempts >= 1);
  }
  check_auth(cfg);
  // tracing: a bounded buffer, batches within it, a ratio in [0, 1].
  const auto& t = cfg.tracing;
  FUZZ_CHECK(t.max_queue_size >= 1 && t.max_export_batch_size >= 1);
  FUZZ_CHECK(t.max_export_batch_size <= t.max_queue_size);
  FUZZ_CHECK(t.sampler.ratio >= 0 && t.sampler.ratio <= 1);
  FUZZ_CHECK(t.timeout > config::Duration::zero() && !t.service_name.empty());
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  g_verbose = std::getenv("LLMGATE_FUZZ_VERBOSE") != nullptr;
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string yaml(reinterpret_cast<const char*>(data), size);
  std::shared_ptr<const config::Config> cfg;
  try {
    cfg = config::parse_config(yaml, "fuzz.yaml", &fuzz_env);
  } catch (const config::ConfigError& e) {
    const std::string_view what = e.what();
    if (g_verbose) std::fprintf(stderr, "ConfigError: %s\n", e.what());
    // One problem per line, each "fuzz.yaml: " or "fuzz.yaml:<line>:<column>: ".
    for (std::string_view rest = what; !rest.empty();) {
      const std::size_t newline = rest.find('\n');
      FUZZ_CHECK(newline != 0);
      std::string_view line = rest.substr(0, newline);
      rest = newline == std::string_view::npos ? std::string_view() : rest.substr(newline + 1);
      FUZZ_CHECK(line.rfind("fuzz.yaml:", 0) == 0);
      line.remove_prefix(10);
      for (int field = 0; field < 2 && !line.empty() && line[0] != ' '; ++field) {
        const std::size_t digits = line.find_first_not_of("0123456789");
        FUZZ_CHECK(digits != 0 && digits != std::string_view::npos && line[digits] == ':');
        line.remove_prefix(digits + 1);
      }
      FUZZ_CHECK(line.rfind(" ", 0) == 0);
    }
    // "It never contains an API key" (config.h), unless the YAML spelt it out.
    for (std::string_view secret : {kEnvSecret, kFileSecret}) {
      FUZZ_CHECK(yaml.find(secret) != std::string::npos ||
                 what.find(secret) == std::string_view::npos);
    }
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "parse_config threw %s (not ConfigError): %s\n", typeid(e).name(),
                 e.what());
    std::abort();
  }
  FUZZ_CHECK(cfg != nullptr);
  if (g_verbose) {
    std::fprintf(stderr, "accepted: %zu providers, %zu models\n", cfg->providers.size(),
                 cfg->models.size());
  }
  check_config(*cfg);
  return 0;
}
