// What a hot reload may not do silently (docs/security.md, "Reloads").
//
// A config file picked up by the file watch can be half-written (a slow copy,
// a shell redirect that truncates first) and still parse: the part before
// `auth:` is a valid config without keys. Such a reload would open the API to
// anyone, or `/admin/*`, or drop every model. A reload that weakens the
// gateway this way is refused unless the new file says so explicitly:
//   - every gateway key removed        -> needs `auth: {enabled: false}`
//   - the admin key removed            -> needs `auth: {admin_open: true}` (or enabled: false)
//   - every model removed              -> needs an explicit `models: []`
// Beast-free and pure: tests/unit/config/reload_guard_test.cpp.
#pragma once

#include <optional>
#include <string>

#include "config/config.h"

namespace llmgate::config {

// Why `next` may not replace `running`, or nullopt if it may.
std::optional<std::string> reload_refusal(const Config& running, const Config& next);

}  // namespace llmgate::config
