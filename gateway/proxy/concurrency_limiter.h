// A limit on concurrent upstream requests to one deployment, shared by all
// worker threads, with a bounded FIFO wait queue (Deployment::max_concurrent,
// max_queue). A slot is handed from a finishing request straight to the
// oldest waiter, whatever worker either runs on: the releasing thread marks
// the waiter granted under the lock and posts its wake-up to the waiter's own
// executor, so every timer is only ever touched on its own thread.
//
// Includes Asio: include only from gateway .cpp files.
#pragma once

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <deque>
#include <memory>
#include <mutex>

namespace llmgate::gateway {

class ConcurrencyLimiter : public std::enable_shared_from_this<ConcurrencyLimiter> {
 public:
  using Clock = std::chrono::steady_clock;
  ConcurrencyLimiter(unsigned max_concurrent, unsigned max_queue)
      : max_(max_concurrent), max_queue_(max_queue) {}

  // Holds one slot; releasing it (destruction) passes it to the oldest waiter.
  class Slot {
   public:
    Slot() = default;
    explicit Slot(std::shared_ptr<ConcurrencyLimiter> l) : limiter_(std::move(l)) {}
    Slot(Slot&&) = default;
    Slot& operator=(Slot&& o) noexcept {
      if (this != &o) {
        release();
        limiter_ = std::move(o.limiter_);
      }
      return *this;
    }
    ~Slot() { release(); }
    explicit operator bool() const { return limiter_ != nullptr; }

   private:
    void release() {
      if (auto l = std::move(limiter_)) l->release();
    }
    std::shared_ptr<ConcurrencyLimiter> limiter_;
  };

  enum class Result { kGranted, kQueueFull, kTimedOut };
  struct Acquired {
    Result result;
    Slot slot;  // set when granted
  };
  // A free slot now, else a place in the queue until `deadline` (or until the
  // calling coroutine is cancelled, which counts as kTimedOut).
  boost::asio::awaitable<Acquired> acquire(Clock::time_point deadline);

  // A reload may change the limits; running requests keep their slots.
  void set_limits(unsigned max_concurrent, unsigned max_queue);
  unsigned in_use() const;
  unsigned queued() const;

 private:
  struct Waiter {
    boost::asio::any_io_executor ex;
    boost::asio::steady_timer* timer = nullptr;  // valid while `waiting`; waiter's thread only
    bool waiting = true;                         // waiter's thread only
    bool granted = false;                        // mu_
    bool abandoned = false;                      // mu_
  };
  void release();
  void grant_waiters();  // mu_ held: hands free slots to waiters

  mutable std::mutex mu_;
  unsigned max_;
  unsigned max_queue_;
  unsigned in_use_ = 0;
  std::deque<std::shared_ptr<Waiter>> queue_;
};

}  // namespace llmgate::gateway
