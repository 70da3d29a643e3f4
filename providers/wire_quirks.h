// What the gateway has learnt about the wire format each deployment accepts
// (docs/config.md, providers[].stream_options): a deployment that answered 400
// to `stream_options` is sent none from then on. Shared by every worker of one
// gateway; thread-safe.
#pragma once

#include <atomic>
#include <mutex>
#include <set>
#include <string>

namespace llmgate::providers {

class WireQuirks {
 public:
  // Records that `deployment` rejects stream_options. True the first time
  // (for a log line once).
  bool learn_no_stream_options(const std::string& deployment) {
    std::lock_guard lock(mu_);
    const bool first = no_stream_options_.insert(deployment).second;
    any_.store(true, std::memory_order_release);
    return first;
  }
  // Asked on every attempt: no lock while nothing was ever learnt.
  bool rejects_stream_options(const std::string& deployment) const {
    if (!any_.load(std::memory_order_acquire)) return false;
    std::lock_guard lock(mu_);
    return no_stream_options_.count(deployment) != 0;
  }

 private:
  mutable std::mutex mu_;
  std::set<std::string> no_stream_options_;
  std::atomic<bool> any_{false};
};

}  // namespace llmgate::providers
