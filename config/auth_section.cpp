// auth: gateway keys by SHA-256, with allowed models and rate limits.
#include <optional>
#include <string>

#include "config/quoting.h"
#include "config/sections.h"

namespace llmgate::config {
namespace {

std::string read_sha256(const ConfigNode& node) {
  std::string hex = node.string();
  bool ok = hex.size() == 64;
  for (char& c : hex) {
    if (c >= 'A' && c <= 'F') c = static_cast<char>(c - 'A' + 'a');
    ok = ok && ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'));
  }
  if (!ok) {
    node.fail(
        "expected the key's SHA-256 as 64 hex digits (llmgate --hash-key prints it), not the key "
        "itself");
  }
  return hex;
}

double read_rate(const ConfigNode& node) {
  double v = node.number();
  if (!(v > 0)) node.fail("must be greater than 0");
  return v;
}

GatewayKey read_key(const ConfigNode& node, const std::vector<Model>& models,
                    const std::vector<GatewayKey>& earlier) {
  GatewayKey key;
  node.read_map([&](ConfigMap& m) {
    key.name = m.required("name").string();
    key.sha256 = read_sha256(m.required("sha256"));
    if (auto list = m.optional("models")) {
      for (const auto& item : list->items()) {
        std::string name = item.string();
        bool known = false;
        for (const auto& model : models) known = known || model.name == name;
        if (!known && is_failed_definition("model", name)) continue;
        if (!known) item.fail("unknown model " + quote(name));
        key.models.push_back(std::move(name));
      }
    }
    m.read("requests_per_minute", key.requests_per_minute, read_rate);
    m.read("tokens_per_minute", key.tokens_per_minute, read_rate);
    if (auto budget = m.optional("budget")) {
      budget->read_map([&](ConfigMap& b) {
        b.read("usd_per_day", key.budget_usd_per_day, read_rate);
        b.read("usd_per_month", key.budget_usd_per_month, read_rate);
      });
    }
    m.read("allow_overrides", key.allow_overrides, &ConfigNode::boolean);
    m.read("explain", key.explain, &ConfigNode::boolean);
  });
  if (key.name.empty()) node.fail("name must not be empty");
  for (const auto& other : earlier) {
    if (other.name == key.name) node.fail("duplicate key name " + quote(key.name));
    if (other.sha256 == key.sha256)
      node.fail("the same key is listed twice (as " + quote(other.name) + ")");
  }
  return key;
}

}  // namespace

Auth read_auth(const ConfigNode& node, const std::vector<Model>& models) {
  Auth auth;
  std::optional<bool> enabled, admin_open;
  node.read_map([&](ConfigMap& m) {
    if (auto keys = m.optional("keys")) {
      for (const auto& item : keys->items()) {
        recover([&] { auth.keys.push_back(read_key(item, models, auth.keys)); });
      }
    }
    m.read("admin_key_sha256", auth.admin_key_sha256, read_sha256);
    m.read("enabled", enabled, &ConfigNode::boolean);
    m.read("admin_open", admin_open, &ConfigNode::boolean);
  });
  // Saying the gateway is open and configuring keys at once is a mistake
  // either way: refuse it rather than guess which was meant.
  if (enabled == false && !auth.keys.empty()) {
    node.fail("enabled: false, yet keys are configured (remove one or the other)");
  }
  if (enabled == true && auth.keys.empty()) {
    node.fail("enabled: true needs at least one key under keys");
  }
  if (admin_open == true && !auth.admin_key_sha256.empty()) {
    node.fail("admin_open: true, yet admin_key_sha256 is set (remove one or the other)");
  }
  auth.declared_open = enabled == false;
  auth.admin_declared_open = admin_open == true || enabled == false;
  return auth;
}

}  // namespace llmgate::config
