#include "gateway/response_owners.h"

#include <utility>

namespace llmgate::gateway {

void ResponseOwners::remember(const std::string& id, Owner owner, Clock::time_point now) {
  if (id.empty() || id.size() > kMaxIdBytes || capacity_ == 0) return;
  std::lock_guard lock(mu_);
  owners_[id] = Entry{std::move(owner), now};
  order_.emplace_back(id, now);
  expire(now);
}

std::optional<ResponseOwners::Owner> ResponseOwners::owner_of(const std::string& id,
                                                              Clock::time_point now) {
  std::lock_guard lock(mu_);
  expire(now);
  auto it = owners_.find(id);
  if (it == owners_.end()) return std::nullopt;
  return it->second.owner;
}

void ResponseOwners::forget(const std::string& id) {
  std::lock_guard lock(mu_);
  owners_.erase(id);  // its place in order_ goes when it comes up (no entry matches it)
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

std::optional<ResponsePath> response_path(std::string_view path) {
  if (path.substr(0, 3) == "/v1") path.remove_prefix(3);
  constexpr std::string_view kPrefix = "/responses/";
  if (path.substr(0, kPrefix.size()) != kPrefix) return std::nullopt;
  path.remove_prefix(kPrefix.size());
  ResponsePath r;
  const auto slash = path.find('/');
  const std::string_view id = path.substr(0, slash);
  if (slash != std::string_view::npos) {
    const std::string_view part = path.substr(slash);
    if (part == "/input_items") {
      r.part = ResponsePath::Part::kInputItems;
    } else if (part == "/cancel") {
      r.part = ResponsePath::Part::kCancel;
    } else {
      return std::nullopt;
    }
  }
  if (id.empty() || id.size() > ResponseOwners::kMaxIdBytes || id == "." || id == "..")
    return std::nullopt;
  for (unsigned char c : id) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '_' || c == '-' || c == '.' || c == ':';
    if (!ok) return std::nullopt;
  }
  r.id = std::string(id);
  return r;
}

}  // namespace llmgate::gateway
