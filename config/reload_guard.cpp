#include "config/reload_guard.h"

namespace llmgate::config {

std::optional<std::string> reload_refusal(const Config& running, const Config& next) {
  if (running.auth.enabled() && !next.auth.enabled() && !next.auth.declared_open) {
    return "the new config has no gateway keys, which would open the API to anyone (a "
           "half-written file?); to turn authentication off on purpose, say auth: {enabled: false}";
  }
  if (!running.auth.admin_key_sha256.empty() && next.auth.admin_key_sha256.empty() &&
      !next.auth.admin_declared_open) {
    return "the new config has no auth.admin_key_sha256, which would open /admin/* (a "
           "half-written file?); to drop the admin key on purpose, say auth: {admin_open: true}";
  }
  if (!running.models.empty() && next.models.empty() && !next.models_declared) {
    return "the new config has no models section, which would remove every model (a "
           "half-written or empty file?); to serve no model on purpose, say models: []";
  }
  return std::nullopt;
}

}  // namespace llmgate::config
