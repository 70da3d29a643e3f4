#include "gateway/response_owners.h"

namespace llmgate::gateway {

void ResponseOwners::remember(const std::string& id, const std::string& provider,
                              Clock::time_point now) {
  if (id.empty() || id.size() > kMaxIdBytes || capacity_ == 0) return;
  std::lock_guard lock(mu_);
  owners_[id] = Entry{provider, now};
  order_.emplace_back(id, now);
  expire(now);
}

std::optional<std::string> ResponseOwners::provider_of(const std::string& id,
                                                       Clock::time_point now) {
  std::lock_guard lock(mu_);
  expire(now);
  auto it = owners_.find(id);
  if (it == owners_.end()) return std::nullopt;
  return it->second.provider;
}

std::size_t ResponseOwners::size() const {
  std::lock_guard lock(mu_);
  return owners_.size();
}

void ResponseOwners::expire(Clock::time_point now) {
  while (!order_.empty() && (order_.size() > capacity_ || now - order_.front().second >= ttl_)) {
    auto& [id, at] = order_.front();
    // A later remember() of the same id left a newer entry in the order.
    if (auto it = owners_.find(id); it != owners_.end() && it->second.at == at) owners_.erase(it);
    order_.pop_front();
  }
}

}  // namespace llmgate::gateway
