// What the gateway has learnt about the wire format each deployment accepts
// (docs/config.md, providers[].stream_options and stream): a deployment that
// answered 400 to `stream_options` is sent none from then on; one that
// answered 400 to `stream` is asked for JSON answers from then on. Shared by
// every worker of one gateway; thread-safe; shown in /admin/routes.
#pragma once

#include <atomic>
#include <map>
#include <mutex>
#include <string>

namespace llmgate::providers {

enum class Quirk : unsigned {
  kNoStreamOptions = 1,  // refuses stream_options
  kNoStream = 2,         // refuses "stream": true
};

class WireQuirks {
 public:
  // Records that `deployment` refuses what `q` names. True the first time
  // (for a log line once).
  bool learn(const std::string& deployment, Quirk q) {
    std::lock_guard lock(mu_);
    unsigned& bits = learnt_[deployment];
    const bool first = (bits & static_cast<unsigned>(q)) == 0;
    bits |= static_cast<unsigned>(q);
    any_.store(true, std::memory_order_release);
    return first;
  }
  // Everything learnt of `deployment`: Quirk bits.
  unsigned learnt(const std::string& deployment) const {
    if (!any_.load(std::memory_order_acquire)) return 0;
    std::lock_guard lock(mu_);
    auto it = learnt_.find(deployment);
    return it == learnt_.end() ? 0 : it->second;
  }
  // Asked on every attempt: no lock while nothing was ever learnt.
  bool has(const std::string& deployment, Quirk q) const {
    if (!any_.load(std::memory_order_acquire)) return false;
    std::lock_guard lock(mu_);
    auto it = learnt_.find(deployment);
    return it != learnt_.end() && (it->second & static_cast<unsigned>(q)) != 0;
  }

 private:
  mutable std::mutex mu_;
  std::map<std::string, unsigned> learnt_;
  std::atomic<bool> any_{false};
};

}  // namespace llmgate::providers
