#include "gateway/server/config_watch.h"

namespace llmgate::gateway {

bool ConfigWatch::observe(std::optional<std::string> content, Clock::time_point now) {
  if (!content || content == applied_) {
    // Unreadable, or back to what runs: nothing to do (a pending change that
    // was reverted is forgotten).
    if (content) pending_.reset();
    return false;
  }
  if (content != pending_) {
    pending_ = std::move(content);
    pending_since_ = now;
    return false;
  }
  if (now - pending_since_ < settle_) return false;
  applied_ = std::move(pending_);
  pending_.reset();
  return true;
}

void ConfigWatch::applied(std::optional<std::string> content) {
  applied_ = std::move(content);
  pending_.reset();
}

}  // namespace llmgate::gateway
