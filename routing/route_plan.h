// One candidate of a request's plan: the deployment to try, its provider, and
// the deadlines for this attempt. routing::decide() (router.h) builds the
// ordered candidates; the attempt machinery in gateway/ runs them.
#pragma once

#include "config/config.h"

namespace llmgate::routing {

// Pointers live as long as the Config they point into.
struct Candidate {
  const config::Deployment* deployment = nullptr;
  const config::Provider* provider = nullptr;
  config::Timeouts timeouts;  // provider overrides merged over defaults; ttft as derived
};

}  // namespace llmgate::routing
