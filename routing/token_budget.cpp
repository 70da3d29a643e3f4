#include "routing/token_budget.h"

#include <algorithm>
#include <cmath>

namespace llmgate::routing {

namespace {

std::int64_t to_units(double tokens) {
  return static_cast<std::int64_t>(std::llround(std::max(0.0, tokens) * 1e6));
}

}  // namespace

TokenBudget::TokenBudget(double ratio, double min_per_second, bool full)
    : deposit_(to_units(ratio)),
      per_second_(to_units(min_per_second)),
      cap_(std::max(kUnit, to_units(kReserveSeconds * std::max(0.0, min_per_second) +
                                    kDepositRequests * std::max(0.0, ratio)))),
      balance_(full ? cap_
                    : std::min(cap_, to_units(kReserveSeconds * std::max(0.0, min_per_second)))) {}

// Whole units accrued between last_ and now, floored, in integers (128-bit
// for the product, so hours of quiet cannot overflow).
std::int64_t TokenBudget::accrued(Clock::time_point now) const {
  if (!last_ || now <= *last_ || per_second_ == 0) return 0;
  const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(now - *last_).count();
  const __int128 units = static_cast<__int128>(per_second_) * ns / 1'000'000'000;
  return static_cast<std::int64_t>(std::min<__int128>(units, cap_));
}

std::int64_t TokenBudget::refill(Clock::time_point now) {
  const std::int64_t units = accrued(now);
  const std::int64_t balance = std::min(cap_, balance_.load(std::memory_order_relaxed) + units);
  // Calls less than a unit apart must not throw the accrual away: the clock
  // stands still until a whole unit has been earned (or the bucket is full).
  if (!last_ || units > 0 || balance == cap_) last_ = std::max(now, last_.value_or(now));
  return balance;
}

void TokenBudget::deposit(Clock::time_point now) {
  // Full (the usual state when little is retried): a deposit changes
  // nothing, so it takes no lock. last_ may then lag, which is harmless:
  // the balance leaves the cap only in try_spend(), whose refill at the cap
  // moves last_ to that moment first.
  if (balance_.load(std::memory_order_relaxed) == cap_) return;
  std::lock_guard lock(mu_);
  balance_.store(std::min(cap_, refill(now) + deposit_), std::memory_order_relaxed);
}

bool TokenBudget::try_spend(Clock::time_point now) {
  std::lock_guard lock(mu_);
  const std::int64_t balance = refill(now);
  if (balance < kUnit) {
    balance_.store(balance, std::memory_order_relaxed);
    ++exhausted_;
    return false;
  }
  balance_.store(balance - kUnit, std::memory_order_relaxed);
  return true;
}

double TokenBudget::balance(Clock::time_point now) const {
  std::lock_guard lock(mu_);
  return static_cast<double>(
             std::min(cap_, balance_.load(std::memory_order_relaxed) + accrued(now))) /
         kUnit;
}

double TokenBudget::cap() const { return static_cast<double>(cap_) / kUnit; }

std::uint64_t TokenBudget::exhausted_total() const {
  std::lock_guard lock(mu_);
  return exhausted_;
}

}  // namespace llmgate::routing
