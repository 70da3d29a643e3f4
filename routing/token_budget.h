// The retry / hedge budget (Finagle's RetryBudget, gRPC's retry throttling):
// retries and hedges may add at most a fixed share of load on top of the
// original requests, so a failing upstream is not hit with a retry storm.
//
//   - every original request deposits `ratio` tokens; each retry or hedge
//     spends one;
//   - on top, `min_per_second` tokens accrue per second, so a quiet gateway
//     can still retry now and then;
//   - the balance is capped at kReserveSeconds x min_per_second +
//     kDepositRequests x ratio (at least 1): a long quiet period banks at most
//     ten seconds of the minimum plus the deposits of 100 requests, not an
//     outage's worth of retries;
//   - the budget starts with the reserve part, kReserveSeconds x
//     min_per_second, as if the gateway had been idle for that long.
//
// Tokens are counted in millionths, as integers, so that 100 deposits of 0.2
// buy exactly 20 retries. Thread-safe; time is passed in. A deposit into a
// full budget (the usual state) takes no lock.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <optional>

#include "routing/attempt_record.h"

namespace llmgate::routing {

class TokenBudget {
 public:
  static constexpr double kReserveSeconds = 10;
  static constexpr double kDepositRequests = 100;

  // Negative arguments count as 0. `full`: starts at its cap (a budget for
  // what a cold start needs most), else with the reserve part.
  TokenBudget(double ratio, double min_per_second, bool full = false);

  void deposit(Clock::time_point now);    // one original request
  bool try_spend(Clock::time_point now);  // one retry or hedge; false = exhausted (no change)
  double balance(Clock::time_point now) const;
  // At least one token as of the last deposit or spend (no lock: a hint for
  // a decision that spends later, after the fact).
  bool has_room() const { return balance_.load(std::memory_order_relaxed) >= kUnit; }
  double cap() const;
  std::uint64_t exhausted_total() const;  // how many try_spend() returned false

 private:
  static constexpr std::int64_t kUnit = 1'000'000;  // millionths of a token

  std::int64_t accrued(Clock::time_point now) const;  // mu_ held
  // The balance with what accrued up to `now` (mu_ held; the caller stores it).
  std::int64_t refill(Clock::time_point now);

  const std::int64_t deposit_;     // units per request
  const std::int64_t per_second_;  // units accrued per second
  const std::int64_t cap_;
  mutable std::mutex mu_;
  // Written under mu_ only; deposit() reads it without, to skip the lock
  // when the budget is full.
  std::atomic<std::int64_t> balance_;
  std::optional<Clock::time_point> last_;  // accrual is counted up to here
  std::uint64_t exhausted_ = 0;
};

}  // namespace llmgate::routing
