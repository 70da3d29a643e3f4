#include "gateway/proxy/response_owners.h"

#include <algorithm>
#include <iterator>
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

std::string responses_query(std::string_view target) {
  static constexpr std::string_view kAllowed[] = {"stream",    "starting_after", "include",
                                                  "include[]", "include%5B%5D",  "after",
                                                  "before",    "limit",          "order"};
  const auto q = target.find('?');
  if (q == std::string_view::npos) return {};
  std::string_view rest = target.substr(q + 1);
  rest = rest.substr(0, rest.find('#'));  // a fragment is never sent on
  std::string out;
  while (!rest.empty()) {
    const auto amp = rest.find('&');
    const std::string_view param = rest.substr(0, amp);
    rest = amp == std::string_view::npos ? std::string_view() : rest.substr(amp + 1);
    const std::string_view name = param.substr(0, param.find('='));
    if (std::find(std::begin(kAllowed), std::end(kAllowed), name) == std::end(kAllowed)) continue;
    out.append(out.empty() ? "" : "&").append(param);
  }
  return out;
}

std::string_view part_path(ResponsePath::Part part) {
  switch (part) {
    case ResponsePath::Part::kResponse:
      return "";
    case ResponsePath::Part::kInputItems:
      return "/input_items";
    case ResponsePath::Part::kCancel:
      return "/cancel";
  }
  return "";
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
    if (part == part_path(ResponsePath::Part::kInputItems)) {
      r.part = ResponsePath::Part::kInputItems;
    } else if (part == part_path(ResponsePath::Part::kCancel)) {
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
