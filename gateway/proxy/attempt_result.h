// What one upstream attempt left behind for its request, and the check a
// coroutine makes after each wait for having been cancelled. Includes Asio:
// include only from gateway .cpp files.
#pragma once

#include <boost/asio/this_coro.hpp>

namespace llmgate::gateway {

struct AttemptResult {
  bool responded = false;  // the client has received a response (any status)
  bool keep_alive = true;  // the client connection is still usable
};

// True once the client-disconnect watcher (or the drain) has cancelled the
// calling coroutine. An operation that was completing as the cancellation
// arrived returns normally, so this is checked after each upstream wait.
#define LLMGATE_CANCELLED()                                             \
  ((co_await boost::asio::this_coro::cancellation_state).cancelled() != \
   boost::asio::cancellation_type::none)

}  // namespace llmgate::gateway
