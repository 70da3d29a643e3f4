// The prompt-cache affinity table: where each prefix was served, for as
// long as a provider keeps it, in bounded memory.
#include "routing/prompt_affinity.h"

#include <gtest/gtest.h>

#include <vector>

namespace llmgate::routing {
namespace {

using namespace std::chrono_literals;
using config::PrefixCut;

constexpr std::uint64_t kA = 0xa, kB = 0xb, kC = 0xc;

struct Conversation {
  std::vector<PrefixCut> cuts;
  PrefixCut whole() const { return cuts.back(); }
};

// Cuts of `n` messages of 1,000 bytes each, as providers::prompt_prefixes
// reads them: message i's cut hashes everything up to it.
Conversation conversation(std::uint64_t id, std::size_t n) {
  Conversation c;
  for (std::size_t i = 1; i <= n; ++i) c.cuts.push_back({id * 1000 + i, i * 1000, 0});
  return c;
}

TEST(PromptAffinity, AFollowUpFindsTheDeploymentThatServedThePreviousTurn) {
  PromptAffinity t(5min, 1000);
  const auto now = Clock::now();
  const auto turn1 = conversation(1, 3);
  t.remember(turn1.cuts, 0, turn1.whole(), kA, now);
  const auto turn2 = conversation(1, 5);  // two more messages
  const auto found = t.find(turn2.cuts, 0, turn2.whole(), now + 10s);
  ASSERT_EQ(found.count, 1u);
  ASSERT_NE(found.of(kA), nullptr);
  EXPECT_EQ(found.of(kA)->prefix.bytes, 3000u);  // the previous turn's whole prompt
  EXPECT_FALSE(found.of(kA)->by_key);
  EXPECT_EQ(found.of(kB), nullptr);
  // Another conversation finds nothing.
  const auto other = conversation(2, 5);
  EXPECT_EQ(t.find(other.cuts, 0, other.whole(), now).count, 0u);
}

TEST(PromptAffinity, EachDeploymentHoldsItsLongestPrefix) {
  PromptAffinity t(5min, 1000);
  const auto now = Clock::now();
  // A shared system prompt (the first cut) served by both; the conversation
  // itself only by B.
  const auto c = conversation(1, 4);
  t.remember(std::span(c.cuts).first(1), 0, c.cuts[0], kA, now);
  t.remember(std::span(c.cuts).first(3), 0, c.cuts[2], kB, now);
  const auto found = t.find(c.cuts, 0, c.whole(), now);
  ASSERT_EQ(found.count, 2u);
  EXPECT_EQ(found.of(kA)->prefix.bytes, 1000u);
  EXPECT_EQ(found.of(kB)->prefix.bytes, 3000u);
}

TEST(PromptAffinity, EntriesExpireAfterTheTtlAndARemeberRenewsThem) {
  PromptAffinity t(5min, 1000);
  const auto now = Clock::now();
  const auto c = conversation(1, 2);
  t.remember(c.cuts, 0, c.whole(), kA, now);
  EXPECT_EQ(t.find(c.cuts, 0, c.whole(), now + 299s).count, 1u);
  EXPECT_EQ(t.find(c.cuts, 0, c.whole(), now + 300s).count, 0u);
  t.remember(c.cuts, 0, c.whole(), kA, now + 200s);
  EXPECT_EQ(t.find(c.cuts, 0, c.whole(), now + 450s).count, 1u);
  // TTL 0: affinity off.
  PromptAffinity off(0ms, 1000);
  off.remember(c.cuts, 0, c.whole(), kA, now);
  EXPECT_EQ(off.find(c.cuts, 0, c.whole(), now).count, 0u);
}

TEST(PromptAffinity, AFullTableEvictsTheLeastRecentlyServed) {
  // One bucket of kWays entries.
  PromptAffinity t(5min, PromptAffinity::kWays);
  EXPECT_EQ(t.capacity(), PromptAffinity::kWays);
  const auto now = Clock::now();
  std::vector<PrefixCut> cuts;
  for (std::size_t i = 0; i < PromptAffinity::kWays + 1; ++i) {
    cuts.push_back({100 + i, 1000, 0});
    t.remember(std::span(&cuts.back(), 1), 0, cuts.back(), kA,
               now + std::chrono::seconds(static_cast<long>(i)));
  }
  const auto at = now + 20s;
  // The first (oldest) went to make room; the rest are there.
  EXPECT_EQ(t.find(std::span(&cuts[0], 1), 0, cuts[0], at).count, 0u);
  for (std::size_t i = 1; i < cuts.size(); ++i)
    EXPECT_EQ(t.find(std::span(&cuts[i], 1), 0, cuts[i], at).count, 1u) << i;
}

TEST(PromptAffinity, APrefixNamesUpToKHoldersTheOldestGivingWay) {
  PromptAffinity t(5min, 1000);
  const auto now = Clock::now();
  const auto c = conversation(1, 1);
  for (std::uint64_t d = 1; d <= PromptAffinity::kHolders + 1; ++d)
    t.remember(c.cuts, 0, c.whole(), d, now + std::chrono::seconds(static_cast<long>(d)));
  const auto found = t.find(c.cuts, 0, c.whole(), now + 10s);
  EXPECT_EQ(found.count, PromptAffinity::kHolders);
  EXPECT_EQ(found.of(1), nullptr);  // the oldest
  EXPECT_NE(found.of(PromptAffinity::kHolders + 1), nullptr);
}

TEST(PromptAffinity, AConversationKeyNamesTheDeploymentAtMostTheRequestsPrompt) {
  PromptAffinity t(5min, 1000);
  const auto now = Clock::now();
  constexpr std::uint64_t kKey = 0x5e55;
  // Served with its key; the next request's messages do not match (the
  // client rewrote its history) but its key does.
  const auto served = conversation(1, 4);
  t.remember(served.cuts, kKey, served.whole(), kC, now);
  const auto next = conversation(9, 6);
  auto found = t.find(next.cuts, kKey, next.whole(), now);
  ASSERT_NE(found.of(kC), nullptr);
  EXPECT_TRUE(found.of(kC)->by_key);
  EXPECT_EQ(found.of(kC)->prefix.bytes, 4000u);
  // A shorter request than what was served: at most its own prompt.
  const auto shorter = conversation(9, 2);
  found = t.find(shorter.cuts, kKey, shorter.whole(), now);
  EXPECT_EQ(found.of(kC)->prefix.bytes, 2000u);
  // A prefix match beats the key's when longer.
  found = t.find(served.cuts, kKey, served.whole(), now);
  EXPECT_FALSE(found.of(kC)->by_key);
}

TEST(PromptAffinity, TwoPrefixesOfOneHashAreToldApartByTheirSizes) {
  PromptAffinity t(5min, 1000);
  const auto now = Clock::now();
  const PrefixCut served{42, 5000, 0};
  t.remember(std::span(&served, 1), 0, served, kA, now);
  const PrefixCut collision{42, 7000, 0};
  EXPECT_EQ(t.find(std::span(&collision, 1), 0, collision, now).count, 0u);
  EXPECT_EQ(t.find(std::span(&served, 1), 0, served, now).count, 1u);
}

}  // namespace
}  // namespace llmgate::routing
