#include "routing/token_budget.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

namespace llmgate::routing {
namespace {

using namespace std::chrono_literals;
const Clock::time_point t0{std::chrono::seconds(5000)};

int spend_all(TokenBudget& b, Clock::time_point now) {
  int spent = 0;
  while (b.try_spend(now)) ++spent;
  return spent;
}

TEST(TokenBudget, OneHundredRequestsAtRatioPointTwoBuyExactlyTwentyRetries) {
  TokenBudget b(0.2, 0);
  EXPECT_DOUBLE_EQ(b.balance(t0), 0);
  EXPECT_FALSE(b.try_spend(t0));
  for (int i = 0; i < 100; ++i) b.deposit(t0);
  EXPECT_DOUBLE_EQ(b.balance(t0), 20);
  EXPECT_EQ(spend_all(b, t0), 20);
  EXPECT_DOUBLE_EQ(b.balance(t0), 0);
  EXPECT_EQ(b.exhausted_total(), 2u);
}

TEST(TokenBudget, DepositsInterleavedWithRetriesKeepTheRatio) {
  TokenBudget b(0.1, 0);
  int retries = 0;
  for (int i = 0; i < 1000; ++i) {
    b.deposit(t0);
    if (b.try_spend(t0)) ++retries;  // every request wants a retry
  }
  EXPECT_EQ(retries, 100);
  EXPECT_EQ(b.exhausted_total(), 900u);
}

TEST(TokenBudget, AFailedSpendChangesNothing) {
  TokenBudget b(0.5, 0);
  b.deposit(t0);
  EXPECT_FALSE(b.try_spend(t0));
  EXPECT_DOUBLE_EQ(b.balance(t0), 0.5);
  b.deposit(t0);
  EXPECT_TRUE(b.try_spend(t0));
  EXPECT_DOUBLE_EQ(b.balance(t0), 0);
  EXPECT_EQ(b.exhausted_total(), 1u);
}

TEST(TokenBudget, StartsWithTenSecondsOfTheMinimum) {
  TokenBudget b(0.2, 3);
  EXPECT_DOUBLE_EQ(b.balance(t0), 30);
  EXPECT_DOUBLE_EQ(b.cap(), 50);  // 10 s x 3 + 100 x 0.2
  EXPECT_EQ(spend_all(b, t0), 30);
}

TEST(TokenBudget, TheMinimumRefillsWithTime) {
  TokenBudget b(0, 2);
  EXPECT_EQ(spend_all(b, t0), 20);
  EXPECT_DOUBLE_EQ(b.balance(t0 + 250ms), 0.5);
  EXPECT_FALSE(b.try_spend(t0 + 250ms));
  EXPECT_DOUBLE_EQ(b.balance(t0 + 500ms), 1);
  EXPECT_TRUE(b.try_spend(t0 + 500ms));
  EXPECT_DOUBLE_EQ(b.balance(t0 + 500ms), 0);
  EXPECT_EQ(spend_all(b, t0 + 3s), 5);  // 2.5 s x 2/s
  EXPECT_DOUBLE_EQ(b.balance(t0 + 3s), 0);
}

TEST(TokenBudget, TheCapHoldsForDepositsAndForQuietTime) {
  TokenBudget deposits(0.2, 0);
  for (int i = 0; i < 1000; ++i) deposits.deposit(t0);
  EXPECT_DOUBLE_EQ(deposits.balance(t0), 20);
  EXPECT_EQ(spend_all(deposits, t0), 20);

  TokenBudget quiet(0.2, 10);  // cap 10 s x 10 + 100 x 0.2 = 120
  quiet.deposit(t0);
  EXPECT_DOUBLE_EQ(quiet.balance(t0), 100.2);
  EXPECT_DOUBLE_EQ(quiet.balance(t0 + 24h), 120);
  EXPECT_EQ(spend_all(quiet, t0 + 24h), 120);
  TokenBudget full(0, 1);  // starts at its cap of 10
  EXPECT_TRUE(full.try_spend(t0));
  EXPECT_DOUBLE_EQ(full.balance(t0 + 1h), 10);
}

TEST(TokenBudget, TheCapIsAtLeastOneToken) {
  TokenBudget none(0, 0);
  EXPECT_DOUBLE_EQ(none.cap(), 1);
  EXPECT_FALSE(none.try_spend(t0 + 1h));

  TokenBudget tiny(0.005, 0);  // 100 x 0.005 = 0.5 < 1
  for (int i = 0; i < 1000; ++i) tiny.deposit(t0);
  EXPECT_DOUBLE_EQ(tiny.balance(t0), 1);
  EXPECT_EQ(spend_all(tiny, t0), 1);
}

TEST(TokenBudget, CallsCloserThanOneMillionthOfATokenStillAccrue) {
  TokenBudget b(0, 0.001);  // one millionth of a token per ms
  const double start = b.balance(t0);
  b.try_spend(t0);
  for (int i = 1; i <= 2000; ++i) b.try_spend(t0 + i * 500us);  // half a unit apart
  EXPECT_DOUBLE_EQ(b.balance(t0 + 1s), start + 0.001);
}

TEST(TokenBudget, AClockThatGoesBackwardsAddsNothing) {
  TokenBudget b(0, 1);
  EXPECT_EQ(spend_all(b, t0), 10);
  EXPECT_FALSE(b.try_spend(t0 - 5s));
  EXPECT_DOUBLE_EQ(b.balance(t0), 0);
  EXPECT_DOUBLE_EQ(b.balance(t0 + 1s), 1);
}

TEST(TokenBudget, ADepositIntoAFullBudgetChangesNothingAndQuietTimeIsNotCountedTwice) {
  TokenBudget b(0.2, 1);  // cap 10 + 20 = 30, starts at 10
  for (int i = 0; i < 100; ++i) b.deposit(t0);
  EXPECT_DOUBLE_EQ(b.balance(t0), 30);
  for (int i = 0; i < 100; ++i) b.deposit(t0 + 50s);  // full: nothing to add
  EXPECT_DOUBLE_EQ(b.balance(t0 + 50s), 30);
  // Leaving the cap, the accrual starts from the spend, not from the last
  // deposit that found it full.
  EXPECT_TRUE(b.try_spend(t0 + 50s));
  EXPECT_DOUBLE_EQ(b.balance(t0 + 50s), 29);
  EXPECT_DOUBLE_EQ(b.balance(t0 + 50500ms), 29.5);
  b.deposit(t0 + 50500ms);
  EXPECT_DOUBLE_EQ(b.balance(t0 + 50500ms), 29.7);
  EXPECT_DOUBLE_EQ(b.balance(t0 + 60s), 30);
}

TEST(TokenBudget, ConcurrentDepositsAndSpendsLoseNothing) {
  // One token per deposit, none accrued, a cap never reached: every deposit
  // counts, so what was spent and what is left add up to the deposits.
  TokenBudget b(1, 0);  // cap 100, starts at 0
  std::atomic<int> spent{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 1000; ++i) {
        b.deposit(t0);
        if (b.try_spend(t0)) ++spent;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_DOUBLE_EQ(spent.load() + b.balance(t0), 4000);
}

TEST(TokenBudget, ConcurrentSpendsNeverOverdraw) {
  TokenBudget b(0, 100);  // starts with 1000
  std::atomic<int> spent{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 500; ++i) {
        if (b.try_spend(t0)) ++spent;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(spent.load(), 1000);
  EXPECT_EQ(b.exhausted_total(), 1000u);
}

}  // namespace
}  // namespace llmgate::routing
