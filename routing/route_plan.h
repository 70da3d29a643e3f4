// One candidate of a request's plan: the deployment to try, its provider, and
// the deadlines for this attempt. routing::decide() (router.h) builds the
// ordered candidates; the attempt machinery in gateway/ runs them.
#pragma once

#include <chrono>

#include "config/config.h"

namespace llmgate::routing {

// Pointers live as long as the Config they point into.
struct Candidate {
  const config::Deployment* deployment = nullptr;
  const config::Provider* provider = nullptr;
  config::Timeouts timeouts;  // provider overrides merged over defaults; ttft as derived
  // The stall deadline: how long a stream may pause after its first token
  // while the attempt can still be replaced (the client has seen nothing
  // of it), derived from the deployment's live pauses; 0: timeouts.idle.
  std::chrono::milliseconds stall{0};
};

}  // namespace llmgate::routing
