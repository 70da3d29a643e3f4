// Where each prompt prefix was last served: prompt-cache affinity
// (docs/routing.md, "Prompt-cache affinity"). A provider keeps what it has
// read of a prompt for a few minutes (OpenAI 5-10, Anthropic 5 by default);
// a conversation's next turn sent there reads only its new part. This table
// remembers, for each prefix fingerprint (providers::prompt_prefixes) and
// each explicit conversation key (x-llmgate-session, prompt_cache_key),
// the deployments that served it within the TTL. The router reads
// it as a prefill the request would not pay there -- in the policy's own
// measure, so health, load, constraints and a much faster deployment still
// win (routing/router.h).
//
// Bounded: a fixed set-associative table (kWays entries per bucket, the
// least recently served of a bucket evicted), allocated once; each entry
// names up to kHolders deployments (a shared system prompt is cached at
// every deployment that served it). Lookups and updates take one of
// kStripes locks per probe: no allocation, no global lock.
#pragma once

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <span>

#include "config/fingerprint.h"
#include "routing/adaptive_mutex.h"
#include "routing/attempt_record.h"

namespace llmgate::routing {

class PromptAffinity {
 public:
  static constexpr std::size_t kHolders = 4;  // deployments remembered per prefix
  static constexpr std::size_t kWays = 8;     // entries per bucket
  static constexpr std::size_t kStripes = 64;

  // `ttl`: how long a served prefix is taken to stay cached (0: the table
  // forgets at once: affinity off). `max_entries`: the table's size.
  PromptAffinity(std::chrono::milliseconds ttl, std::size_t max_entries);

  // A deployment (config::Deployment::id_hash) and the longest prefix of
  // the request it served within the TTL.
  struct Held {
    std::uint64_t deployment = 0;
    config::PrefixCut prefix;
    bool by_key = false;  // known by the conversation's key, not its prefix
  };
  struct Found {
    std::array<Held, kHolders> held{};
    std::size_t count = 0;
    const Held* of(std::uint64_t deployment) const {
      for (std::size_t i = 0; i < count; ++i) {
        if (held[i].deployment == deployment) return &held[i];
      }
      return nullptr;
    }
  };

  // The deployments that hold a prefix of the request: `cuts` (shortest
  // first) and `key` (hash of an explicit conversation key; 0: none). A key
  // names a deployment with the prefix it last served there, at most
  // `key_held` (this request's whole prompt: a conversation grows).
  Found find(std::span<const config::PrefixCut> cuts, std::uint64_t key, config::PrefixCut key_held,
             Clock::time_point now) const;
  // `deployment` served the request: it holds each of `cuts` now, and
  // `key` names it with `whole`.
  void remember(std::span<const config::PrefixCut> cuts, std::uint64_t key, config::PrefixCut whole,
                std::uint64_t deployment, Clock::time_point now);

  std::chrono::milliseconds ttl() const { return ttl_; }
  std::size_t capacity() const { return buckets_ * kWays; }

 private:
  struct Holder {
    std::uint64_t deployment = 0;
    Clock::time_point served{};
  };
  struct Entry {
    std::uint64_t hash = 0;  // 0: empty
    config::PrefixCut prefix;
    std::array<Holder, kHolders> holders{};
    Clock::time_point last() const;  // its latest holder's serving
  };
  std::size_t bucket_of(std::uint64_t hash) const { return hash % buckets_; }
  AdaptiveMutex& lock_of(std::size_t bucket) const { return locks_[bucket % kStripes]; }
  // f(holder) for each live holder of `hash`, under its stripe's lock.
  template <typename F>
  void holders_of(std::uint64_t hash, Clock::time_point now, F&& f) const;
  void put(std::uint64_t hash, config::PrefixCut prefix, std::uint64_t deployment,
           Clock::time_point now);

  std::chrono::milliseconds ttl_;
  std::size_t buckets_;
  // buckets_ x kWays, zeroed by calloc: an Entry of zeros is an empty one
  // (an aggregate: its lifetime begins with the allocation), and a page no
  // prefix has reached yet is never touched (the table costs the memory it
  // uses, not its capacity).
  struct Free {
    void operator()(Entry* e) const { std::free(e); }
  };
  std::unique_ptr<Entry[], Free> entries_;
  mutable std::array<AdaptiveMutex, kStripes> locks_;
};

}  // namespace llmgate::routing
