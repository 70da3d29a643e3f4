#include "gateway/observe/vocabulary.h"

namespace llmgate::gateway {

const char* to_string(RequestOutcome o) {
  switch (o) {
    case RequestOutcome::kSuccess:
      return "success";
    case RequestOutcome::kError:
      return "error";
    case RequestOutcome::kRejected:
      return "rejected";
    case RequestOutcome::kClientError:
      return "client_error";
    case RequestOutcome::kClientGone:
      return "client_gone";
  }
  return "unknown";
}

const char* to_string(Refused r) {
  switch (r) {
    case Refused::kUnauthenticated:
      return "unauthenticated";
    case Refused::kModelNotAllowed:
      return "model_not_allowed";
    case Refused::kRateLimited:
      return "rate_limited";
    case Refused::kBudgetExhausted:
      return "budget_exhausted";
    case Refused::kSharedStateUnavailable:
      return "shared_state_unavailable";
    case Refused::kInvalidRequest:
      return "invalid_request";
    case Refused::kNotFound:
      return "not_found";
    case Refused::kLoopDetected:
      return "loop_detected";
  }
  return "unknown";
}

const char* to_string(HedgeResult r) {
  switch (r) {
    case HedgeResult::kWon:
      return "won";
    case HedgeResult::kLost:
      return "lost";
    case HedgeResult::kDenied:
      return "denied";
  }
  return "unknown";
}

const char* to_string(AuthRejection r) {
  switch (r) {
    case AuthRejection::kUnauthenticated:
      return "unauthenticated";
    case AuthRejection::kAdminUnauthenticated:
      return "admin_unauthenticated";
    case AuthRejection::kModelNotAllowed:
      return "model_not_allowed";
    case AuthRejection::kRateLimited:
      return "rate_limited";
    case AuthRejection::kBudgetExhausted:
      return "budget_exhausted";
  }
  return "unknown";
}

const char* to_string(Saturation s) {
  switch (s) {
    case Saturation::kQueueFull:
      return "queue_full";
    case Saturation::kQueueTimeout:
      return "queue_timeout";
    case Saturation::kPoolFull:
      return "pool_full";
    case Saturation::kSharedStateUnavailable:
      return "shared_state_unavailable";
  }
  return "unknown";
}

const char* to_string(SharedOp op) {
  switch (op) {
    case SharedOp::kRateLease:
      return "rate_lease";
    case SharedOp::kSlotAcquire:
      return "slot_acquire";
    case SharedOp::kSlotRelease:
      return "slot_release";
    case SharedOp::kSlotRenew:
      return "slot_renew";
    case SharedOp::kPublish:
      return "publish";
    case SharedOp::kUsageRead:
      return "usage_read";
    case SharedOp::kUsageCharge:
      return "usage_charge";
    case SharedOp::kHealthRead:
      return "health_read";
    case SharedOp::kAffinityRead:
      return "affinity_read";
    case SharedOp::kAffinityWrite:
      return "affinity_write";
  }
  return "unknown";
}

const char* to_string(SharedResult r) {
  switch (r) {
    case SharedResult::kOk:
      return "ok";
    case SharedResult::kError:
      return "error";
    case SharedResult::kTimeout:
      return "timeout";
    case SharedResult::kUnavailable:
      return "unavailable";
  }
  return "unknown";
}

}  // namespace llmgate::gateway
