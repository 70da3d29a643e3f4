#include "routing/prompt_affinity.h"

#include <algorithm>
#include <mutex>
#include <new>
#include <type_traits>

namespace llmgate::routing {

PromptAffinity::PromptAffinity(std::chrono::milliseconds ttl, std::size_t max_entries)
    : ttl_(std::max(ttl, std::chrono::milliseconds{0})),
      buckets_(std::max<std::size_t>(1, (max_entries + kWays - 1) / kWays)),
      entries_(static_cast<Entry*>(std::calloc(buckets_ * kWays, sizeof(Entry)))) {
  static_assert(std::is_aggregate_v<Entry> && std::is_trivially_destructible_v<Entry>);
  if (!entries_) throw std::bad_alloc();
}

Clock::time_point PromptAffinity::Entry::last() const {
  Clock::time_point t{};
  for (const Holder& h : holders) t = std::max(t, h.served);
  return t;
}

template <typename F>
void PromptAffinity::holders_of(std::uint64_t hash, Clock::time_point now, F&& f) const {
  const std::size_t b = bucket_of(hash);
  std::lock_guard lock(lock_of(b));
  const Entry* ways = &entries_[b * kWays];
  for (std::size_t w = 0; w < kWays; ++w) {
    if (ways[w].hash != hash) continue;
    for (const Holder& h : ways[w].holders) {
      if (h.deployment != 0 && now - h.served < ttl_) f(ways[w], h);
    }
    return;
  }
}

PromptAffinity::Found PromptAffinity::find(std::span<const config::PrefixCut> cuts,
                                           std::uint64_t key, config::PrefixCut key_held,
                                           Clock::time_point now) const {
  Found found;
  if (ttl_.count() == 0) return found;
  const auto hold = [&](std::uint64_t deployment, config::PrefixCut prefix, bool by_key) {
    for (std::size_t i = 0; i < found.count; ++i) {
      Held& h = found.held[i];
      if (h.deployment != deployment) continue;
      if (prefix.bytes > h.prefix.bytes) h = {deployment, prefix, by_key};
      return;
    }
    if (found.count < kHolders) found.held[found.count++] = {deployment, prefix, by_key};
  };
  // Longest first: a deployment's first hit is its longest prefix.
  for (std::size_t i = cuts.size(); i-- > 0;) {
    holders_of(cuts[i].hash, now, [&](const Entry& e, const Holder& h) {
      // (A collision of two prefixes is told apart by their sizes.)
      if (e.prefix.bytes == cuts[i].bytes) hold(h.deployment, cuts[i], false);
    });
  }
  if (key != 0) {
    holders_of(key, now, [&](const Entry& e, const Holder& h) {
      config::PrefixCut held = e.prefix;
      if (held.bytes > key_held.bytes) held = key_held;  // at most what the key vouches for
      held.hash = key;
      hold(h.deployment, held, true);
    });
  }
  return found;
}

void PromptAffinity::put(std::uint64_t hash, config::PrefixCut prefix, std::uint64_t deployment,
                         Clock::time_point now) {
  const std::size_t b = bucket_of(hash);
  std::lock_guard lock(lock_of(b));
  Entry* ways = &entries_[b * kWays];
  Entry* slot = nullptr;
  for (std::size_t w = 0; w < kWays && slot == nullptr; ++w) {
    if (ways[w].hash == hash) slot = &ways[w];
  }
  if (slot == nullptr) {
    // An empty or expired way, else the least recently served.
    slot = &ways[0];
    for (std::size_t w = 0; w < kWays; ++w) {
      if (ways[w].hash == 0 || now - ways[w].last() >= ttl_) {
        slot = &ways[w];
        break;
      }
      if (ways[w].last() < slot->last()) slot = &ways[w];
    }
    *slot = Entry{};
    slot->hash = hash;
  }
  slot->prefix = prefix;
  // The deployment's own holder, else an expired one, else the oldest.
  Holder* holder = &slot->holders[0];
  for (Holder& h : slot->holders) {
    if (h.deployment == deployment) {
      holder = &h;
      break;
    }
    if (h.served < holder->served) holder = &h;
  }
  *holder = {deployment, now};
}

void PromptAffinity::remember(std::span<const config::PrefixCut> cuts, std::uint64_t key,
                              config::PrefixCut whole, std::uint64_t deployment,
                              Clock::time_point now) {
  if (ttl_.count() == 0 || deployment == 0) return;
  for (const config::PrefixCut& c : cuts) put(c.hash, c, deployment, now);
  if (key != 0) put(key, whole, deployment, now);
}

}  // namespace llmgate::routing
