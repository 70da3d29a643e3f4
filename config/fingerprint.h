// A prompt's prefix, fingerprinted: the vocabulary providers/prompt_prefix.h
// (which reads a request) and routing/prompt_affinity.h (which remembers
// where each prefix was served) share. The hash is the project's own, the
// same on every machine and in every build, so replicas sharing affinity
// through Redis agree on it. Not cryptographic: a collision costs one
// request a mistaken guess of a cached prefix, nothing else.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>

namespace llmgate::config {

// The end of a 64-bit hash: every input bit reaches every output bit
// (MurmurHash3's finaliser).
constexpr std::uint64_t fmix64(std::uint64_t h) {
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdULL;
  h ^= h >> 33;
  h *= 0xc4ceb9fe1a85ec53ULL;
  h ^= h >> 33;
  return h;
}

// `bytes` hashed after `seed`, eight bytes at a time (about 1 ns per word):
// hash64(b, hash64(a)) is a hash of a then b.
inline std::uint64_t hash64(std::string_view bytes, std::uint64_t seed = 0) {
  constexpr std::uint64_t c1 = 0x87c37b91114253d5ULL, c2 = 0x4cf5ad432745937fULL;
  std::uint64_t h = seed ^ (bytes.size() * 0x9e3779b97f4a7c15ULL);
  const char* p = bytes.data();
  std::size_t n = bytes.size();
  const auto word = [&](std::uint64_t k) {
    k *= c1;
    k = std::rotl(k, 31);
    k *= c2;
    h ^= k;
    h = std::rotl(h, 27) * 5 + 0x52dce729;
  };
  for (; n >= 8; p += 8, n -= 8) {
    std::uint64_t k;
    std::memcpy(&k, p, 8);
    word(k);
  }
  if (n > 0) {
    std::uint64_t k = 0;
    std::memcpy(&k, p, n);
    word(k ^ (std::uint64_t{n} << 56));
  }
  return fmix64(h);
}

// One prefix of a prompt: what a provider reads before a message boundary.
struct PrefixCut {
  std::uint64_t hash = 0;   // of everything before the boundary (never 0)
  std::size_t bytes = 0;    // its bytes outside inline media (providers::PromptSize's unit)
  std::uint32_t media = 0;  // its inline media
};

}  // namespace llmgate::config
