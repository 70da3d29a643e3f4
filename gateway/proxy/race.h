// A hedge race between two attempts (docs/routing.md, "Hedging"): the
// second starts after the first's hedge delay, unless the hedge budget says
// no (or, for a hedge on evidence of a stall, until the evidence is there);
// the first to produce an output token claims the client and the other
// is cancelled at once (its connection closed) and recorded as hedge_lost --
// unless it was started to learn about its deployment (learn_until): then it
// runs on, unclaimed, to its own first token or a bounded wait.
// Everything runs on the worker's one thread, so plain fields suffice.
// Includes Asio: include only from gateway .cpp files.
#pragma once

#include <boost/asio/awaitable.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <functional>

#include "gateway/observe/vocabulary.h"
#include "gateway/proxy/attempt_result.h"

namespace llmgate::gateway {

namespace net = boost::asio;

class Race {
 public:
  // Runs one side: branch 0 (the first candidate) or 1 (the hedge).
  using Attempt = std::function<net::awaitable<AttemptResult>(int branch)>;
  // Due to start the hedge: start it, deny it (the budget), or ask again
  // `recheck` later (the evidence it waits for is not there yet).
  enum class Gate { kStart, kDenied, kNotYet };
  using MayHedge = std::function<Gate()>;
  using OnHedge = std::function<void(HedgeResult)>;

  Race(Attempt attempt, MayHedge may_hedge, OnHedge on_hedge)
      : attempt_(std::move(attempt)),
        may_hedge_(std::move(may_hedge)),
        on_hedge_(std::move(on_hedge)) {}

  // Both sides, the hedge after `delay` (and, while the gate says kNotYet,
  // every `recheck` after that). Returns the winner's result, or the last
  // failure's when neither answered.
  net::awaitable<AttemptResult> run(std::chrono::milliseconds delay,
                                    std::chrono::milliseconds recheck = {});

  // The side that produced output first takes the client; the other is
  // cancelled. True for the winner (again), false for the loser -- and for a
  // side that declines (MayClaim) while the other is still running. `whole`:
  // the side holds its whole answer, which no prediction declines.
  bool claim(int branch, bool whole = false);
  // Under a policy that judges whole answers (e2e), a side with its first
  // output may decline the client: the other side is expected to finish
  // sooner. It is then deferred (docs/routing.md, "Hedging"): it reads on,
  // unclaimed, to measure its speed, and is not cancelled when the other
  // side claims the client; it takes the client after all if the other side
  // fails first. Asked once per side, while the other side runs.
  using MayClaim = std::function<bool(int branch)>;
  void set_may_claim(MayClaim f) { may_claim_ = std::move(f); }
  bool declined(int branch) const { return declined_[branch]; }
  // When the hedge started (the epoch before).
  std::chrono::steady_clock::time_point hedge_started_at() const { return hedge_started_at_; }
  // `branch` has a refusal for the client (a 4xx the caller would get: an
  // invalid request, a content filter): an answer beats a refusal, whatever
  // their timing. Waits while the other side is running and may still
  // answer; true when the refusal may go to the client (the other side
  // failed, refused too, or never started), false when the other side
  // answered (or this one was cancelled).
  net::awaitable<bool> settle_refusal(int branch);
  // A side has claimed the client, and it is not `branch`.
  bool lost(int branch) const { return winner_ >= 0 && winner_ != branch; }
  // `branch` was started to learn about its deployment (an exploration, a
  // re-check): if the other side claims the client first, it is not
  // cancelled then but runs on, unclaimed, until its own first token (a
  // sample, where cancelling would only have taught "slower than the
  // winner") or `until`, whichever comes first -- or the race's end, the
  // other side's whole answer (docs/routing.md, "What learning costs").
  void learn_until(int branch, std::chrono::steady_clock::time_point until) {
    learn_until_[branch] = until;
  }
  // `branch` lost and ran on to learn: its wait lasted until it stopped, not
  // until the race was decided.
  bool ran_on(int branch) const { return ran_on_[branch]; }
  // `branch`'s attempt has not ended.
  bool running(int branch) const { return live_[branch]; }
  bool hedge_started() const { return hedge_started_; }
  // When a side claimed the client (the other stopped waiting then, however
  // long its cancellation took); the epoch before.
  std::chrono::steady_clock::time_point decided_at() const { return decided_at_; }
  int winner() const { return winner_; }

 private:
  net::awaitable<AttemptResult> side(int branch);
  // Until `branch` is made to lose (and, learning, its run-on is over):
  // waits on lose_[branch]. (Not a timer& parameter: with one, GCC 12's
  // build crashed at the first wait, the reference read from a bad frame.)
  net::awaitable<void> until_lost(int branch);
  net::awaitable<AttemptResult> hedge(std::chrono::milliseconds delay,
                                      std::chrono::milliseconds recheck);

  Attempt attempt_;
  MayHedge may_hedge_;
  OnHedge on_hedge_;
  int winner_ = -1;  // the branch that claimed the client
  std::chrono::steady_clock::time_point decided_at_{};
  bool live_[2] = {true, false};                     // still able to win
  net::steady_timer* lose_[2] = {nullptr, nullptr};  // cancelled to make a branch lose
  bool hedge_started_ = false;
  std::chrono::steady_clock::time_point hedge_started_at_{};
  MayClaim may_claim_;
  bool declined_[2] = {false, false};
  net::steady_timer* hedge_timer_ = nullptr;  // the hedge's, while it waits to start
  bool start_now_ = false;                    // the first side declined: start the hedge now
  bool refused_[2] = {false, false};          // holds a refusal (settle_refusal)
  net::steady_timer* refusal_wait_[2] = {nullptr, nullptr};    // woken when the other side ends
  std::chrono::steady_clock::time_point learn_until_[2] = {};  // learn_until; epoch: not learning
  bool ran_on_[2] = {false, false};
};

}  // namespace llmgate::gateway
