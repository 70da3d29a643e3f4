// One connection to Redis (or anything speaking RESP2: Valkey, KeyDB,
// Dragonfly), driven by Asio on the caller's io_context: commands are
// pipelined (written as they come, replies matched in order), each with a
// deadline; TLS (rediss://) and AUTH / ACL users; reconnects with jittered
// exponential backoff. A connection made with channels to subscribe to is a
// subscriber: it takes no commands and hands each published message to
// `on_message`.
//
// Why not hiredis: Debian 12 packages hiredis 0.14, which has no TLS (that
// came with 1.0) and no Asio adapter; a RESP client on Asio is small, shares
// the gateway's OpenSSL setup, and never blocks a thread (docs/ARCHITECTURE.md).
//
// A command that gets no reply by its deadline fails with "timeout", and the
// connection is dropped and made again: a Redis that does not answer one
// command will not answer the next, and a paused one must cost each request
// at most one timeout, not one per command queued behind it. While not
// connected, commands fail at once ("not connected").
//
// Includes Asio: include only from gateway .cpp files.
#pragma once

#include <atomic>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ssl/context.hpp>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "config/config.h"
#include "gateway/shared/resp.h"

namespace llmgate::gateway {

struct RedisOptions {
  std::string host = "127.0.0.1";
  std::uint16_t port = 6379;
  // Set: TLS, with `tls`'s server name and verification (providers/tls_client.h).
  std::shared_ptr<boost::asio::ssl::context> tls_context;
  config::Tls tls;
  std::string username;  // an ACL user; "" = AUTH with the password alone
  std::string password;  // "" = no AUTH
  int db = 0;
  std::chrono::milliseconds timeout{50};  // per command, and per handshake step
  std::chrono::milliseconds connect_timeout{1000};
  std::chrono::milliseconds backoff_min{100};
  std::chrono::milliseconds backoff_max{5000};
};

// RedisReply::error and OnState's `why` for the failures callers tell apart.
inline constexpr const char* kRedisTimeout = "timeout";  // no reply by the deadline
inline constexpr const char* kRedisStopped = "stopped";  // stop() was called
inline constexpr const char* kRedisNotConnected = "not connected";

struct RedisReply {
  std::optional<resp::Value> value;  // the reply (an error reply is a kError value)
  std::string error;                 // why there is no reply
  bool ok() const { return value.has_value() && !value->is_error(); }
  // The reply's error text, or `error`.
  std::string what() const { return value ? value->str : error; }
};

class RedisConnection : public std::enable_shared_from_this<RedisConnection> {
 public:
  using Callback = std::function<void(RedisReply)>;
  // Every change between connected and not; `why` says what went wrong.
  using OnState = std::function<void(bool up, const std::string& why)>;
  using OnMessage = std::function<void(const std::string& channel, const std::string& message)>;

  static std::shared_ptr<RedisConnection> create(boost::asio::io_context& ioc, RedisOptions options,
                                                 std::vector<std::string> subscribe = {},
                                                 OnState on_state = {}, OnMessage on_message = {});
  virtual ~RedisConnection() = default;

  virtual void start() = 0;  // thread-safe; connects in the background
  virtual void stop() = 0;   // thread-safe; pending commands fail with "stopped"
  // Thread-safe. `cb` (may be empty) runs on the io_context, exactly once.
  virtual void call(std::vector<std::string> args, Callback cb) = 0;
  bool up() const { return up_.load(std::memory_order_relaxed); }

 protected:
  RedisConnection() = default;
  std::atomic<bool> up_{false};
};

}  // namespace llmgate::gateway
