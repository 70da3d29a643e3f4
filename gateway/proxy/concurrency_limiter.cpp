#include "gateway/proxy/concurrency_limiter.h"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

namespace llmgate::gateway {

namespace net = boost::asio;

net::awaitable<ConcurrencyLimiter::Acquired> ConcurrencyLimiter::acquire(
    Clock::time_point deadline) {
  auto ex = co_await net::this_coro::executor;
  auto w = std::make_shared<Waiter>();
  {
    std::lock_guard lock(mu_);
    if (in_use_ < max_ && queue_.empty()) {
      ++in_use_;
      co_return Acquired{Result::kGranted, Slot(shared_from_this())};
    }
    if (queue_.size() >= max_queue_) co_return Acquired{Result::kQueueFull, Slot()};
    w->ex = ex;
    queue_.push_back(w);
  }
  net::steady_timer timer(ex, deadline);
  w->timer = &timer;
  // Woken by a grant (the timer is cancelled), the deadline or cancellation.
  // The error code says nothing the flags below do not: ignored.
  co_await timer.async_wait(net::as_tuple(net::use_awaitable));
  w->waiting = false;
  std::lock_guard lock(mu_);
  if (w->granted) co_return Acquired{Result::kGranted, Slot(shared_from_this())};
  w->abandoned = true;
  std::erase(queue_, w);
  co_return Acquired{Result::kTimedOut, Slot()};
}

void ConcurrencyLimiter::grant_waiters() {
  while (in_use_ < max_ && !queue_.empty()) {
    auto w = std::move(queue_.front());
    queue_.pop_front();
    if (w->abandoned) continue;
    ++in_use_;
    w->granted = true;
    // The waiter's timer lives on its own thread: wake it there. If it has
    // already resumed (deadline raced the grant), it saw `granted` itself.
    net::post(w->ex, [w] {
      if (w->waiting) w->timer->cancel();
    });
  }
}

void ConcurrencyLimiter::release() {
  std::lock_guard lock(mu_);
  --in_use_;
  grant_waiters();
}

void ConcurrencyLimiter::set_limits(unsigned max_concurrent, unsigned max_queue) {
  std::lock_guard lock(mu_);
  max_ = max_concurrent;
  max_queue_ = max_queue;
  grant_waiters();
}

unsigned ConcurrencyLimiter::in_use() const {
  std::lock_guard lock(mu_);
  return in_use_;
}

unsigned ConcurrencyLimiter::queued() const {
  std::lock_guard lock(mu_);
  return static_cast<unsigned>(queue_.size());
}

}  // namespace llmgate::gateway
