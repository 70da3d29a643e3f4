// What the gateway has learnt about the wire format each deployment accepts
// (docs/config.md, providers[].stream_options): a deployment that answered 400
// to `stream_options` is sent none from then on. Shared by every worker of one
// gateway; thread-safe.
#pragma once

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
    return no_stream_options_.insert(deployment).second;
  }
  bool rejects_stream_options(const std::string& deployment) const {
    std::lock_guard lock(mu_);
    return no_stream_options_.count(deployment) != 0;
  }

 private:
  mutable std::mutex mu_;
  std::set<std::string> no_stream_options_;
};

}  // namespace llmgate::providers
