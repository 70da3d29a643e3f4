#include "gateway/proxy/race.h"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <utility>
#include <variant>

namespace llmgate::gateway {
namespace {
using namespace net::experimental::awaitable_operators;
using Clock = std::chrono::steady_clock;
constexpr auto kUseTuple = net::as_tuple(net::use_awaitable);
}  // namespace

bool Race::claim(int branch, bool whole) {
  if (winner_ < 0) {
    // The other side runs, or (the hedge) is due to start.
    const bool other_runs = live_[1 - branch] || (branch == 0 && hedge_timer_ != nullptr);
    if (!whole && other_runs) {
      if (declined_[branch]) return false;  // until the other side fails
      if (may_claim_ && !may_claim_(branch)) {
        declined_[branch] = true;
        // Declined for a hedge not started yet: it starts now.
        if (branch == 0 && hedge_timer_ != nullptr) {
          start_now_ = true;
          hedge_timer_->cancel();
        }
        return false;
      }
    }
    winner_ = branch;
    decided_at_ = Clock::now();
    if (hedge_started_) on_hedge_(branch == 1 ? HedgeResult::kWon : HedgeResult::kLost);
    // (A deferred side reads on to its speed sample: it ends itself. A
    // learning one runs on to its first token: until_lost.)
    if (auto* other = lose_[1 - branch]; other && !declined_[1 - branch]) {
      ran_on_[1 - branch] = learn_until_[1 - branch] > decided_at_;
      other->cancel();
    }
    return true;
  }
  return winner_ == branch;
}

// One side. A side that fails or loses while the other can still win parks
// (its attempt and connection already released) until the race ends; the
// first side to finish with a response, or the last to fail, ends the race.
net::awaitable<AttemptResult> Race::side(int branch) {
  auto ex = co_await net::this_coro::executor;
  net::steady_timer lose(ex, Clock::time_point::max());
  lose_[branch] = &lose;
  std::variant<AttemptResult, std::monostate> v = co_await (attempt_(branch) || until_lost(branch));
  lose_[branch] = nullptr;
  AttemptResult r = v.index() == 0 ? std::get<0>(v) : AttemptResult{};
  if (r.responded) co_return r;
  live_[branch] = false;
  // A refusal the other side holds may go now: this side will not answer.
  if (auto* held = refusal_wait_[1 - branch]) held->cancel();
  if (live_[1 - branch] && !LLMGATE_CANCELLED()) {
    net::steady_timer park(ex, Clock::time_point::max());
    co_await park.async_wait(kUseTuple);  // until the race ends (the other side finishes)
  }
  co_return r;
}

net::awaitable<void> Race::until_lost(int branch) {
  net::steady_timer& lose = *lose_[branch];
  co_await lose.async_wait(kUseTuple);
  if (ran_on_[branch] && !LLMGATE_CANCELLED()) {
    // Lost, learning: its own first token ends the attempt (claim() says
    // lost), or this.
    lose.expires_at(learn_until_[branch]);
    co_await lose.async_wait(kUseTuple);
  }
}

net::awaitable<bool> Race::settle_refusal(int branch) {
  const int other = 1 - branch;
  // Running, and it has not refused: it may still answer.
  auto may_answer = [&] { return live_[other] && !refused_[other]; };
  if (winner_ >= 0) co_return winner_ == branch;
  if (!may_answer()) co_return true;
  refused_[branch] = true;
  auto ex = co_await net::this_coro::executor;
  net::steady_timer wait(ex, Clock::time_point::max());
  refusal_wait_[branch] = &wait;
  while (winner_ < 0 && may_answer()) {
    co_await wait.async_wait(kUseTuple);
    if (LLMGATE_CANCELLED()) break;  // the other side answered (or the client left)
    wait.expires_at(Clock::time_point::max());
  }
  refusal_wait_[branch] = nullptr;
  if (LLMGATE_CANCELLED()) co_return false;
  co_return winner_ < 0 || winner_ == branch;
}

net::awaitable<AttemptResult> Race::hedge(std::chrono::milliseconds delay,
                                          std::chrono::milliseconds recheck) {
  auto ex = co_await net::this_coro::executor;
  net::steady_timer timer(ex, delay);
  Gate gate = Gate::kNotYet;
  hedge_timer_ = &timer;
  for (;;) {
    auto [ec] = co_await timer.async_wait(kUseTuple);
    const bool now_due = std::exchange(start_now_, false);  // the first side declined
    if ((ec && !now_due) || winner_ >= 0 || !live_[0]) break;
    gate = may_hedge_();
    if (gate != Gate::kNotYet || recheck <= std::chrono::milliseconds::zero()) break;
    timer.expires_after(recheck);
  }
  hedge_timer_ = nullptr;
  if (gate != Gate::kStart || winner_ >= 0 || !live_[0]) {
    if (gate == Gate::kDenied && winner_ < 0 && live_[0]) on_hedge_(HedgeResult::kDenied);
    // No hedge: the first attempt decides alone.
    net::steady_timer park(ex, Clock::time_point::max());
    co_await park.async_wait(kUseTuple);
    co_return AttemptResult{};
  }
  live_[1] = true;
  hedge_started_ = true;
  hedge_started_at_ = Clock::now();
  co_return co_await side(1);
}

net::awaitable<AttemptResult> Race::run(std::chrono::milliseconds delay,
                                        std::chrono::milliseconds recheck) {
  std::variant<AttemptResult, AttemptResult> v = co_await (side(0) || hedge(delay, recheck));
  co_return v.index() == 0 ? std::get<0>(v) : std::get<1>(v);
}

}  // namespace llmgate::gateway
