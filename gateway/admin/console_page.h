// The live routing console's page (gateway/admin/console/console.html), compiled
// into the binary: GET /admin/console serves it. Beast-free.
#pragma once

#include <string_view>

namespace llmgate::gateway {

std::string_view console_page();

}  // namespace llmgate::gateway
