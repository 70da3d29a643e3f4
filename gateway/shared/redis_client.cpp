#include "gateway/shared/redis_client.h"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/connect.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/ssl/stream.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <deque>
#include <random>

#include "providers/tls_client.h"

namespace llmgate::gateway {
namespace {

namespace net = boost::asio;
namespace ssl = boost::asio::ssl;
using tcp = net::ip::tcp;
using Clock = std::chrono::steady_clock;
constexpr auto kUseTuple = net::as_tuple(net::use_awaitable);

class Connection final : public RedisConnection {
 public:
  Connection(net::io_context& ioc, RedisOptions o, std::vector<std::string> subscribe,
             OnState on_state, OnMessage on_message)
      : ioc_(ioc),
        o_(std::move(o)),
        subscribe_(std::move(subscribe)),
        on_state_(std::move(on_state)),
        on_message_(std::move(on_message)),
        sock_(ioc),
        wake_(ioc),
        watchdog_(ioc),
        backoff_timer_(ioc),
        rng_(std::random_device{}()) {}

  void start() override {
    net::post(ioc_, [self = shared()] {
      if (self->started_ || self->stopped_) return;
      self->started_ = true;
      net::co_spawn(self->ioc_, self->run(), net::detached);
    });
  }

  void stop() override {
    net::post(ioc_, [self = shared()] {
      self->stopped_ = true;
      self->backoff_timer_.cancel();
      self->drop(kRedisStopped);
    });
  }

  void call(std::vector<std::string> args, Callback cb) override {
    if (!cb) cb = [](RedisReply) {};  // fire and forget: the reply is still read in order
    net::post(ioc_, [self = shared(), args = std::move(args), cb = std::move(cb)]() mutable {
      self->enqueue(args, std::move(cb));
    });
  }

 private:
  struct Pending {
    Callback cb;
    Clock::time_point deadline;
  };

  std::shared_ptr<Connection> shared() {
    return std::static_pointer_cast<Connection>(shared_from_this());
  }

  void enqueue(const std::vector<std::string>& args, Callback cb) {
    if (!connected_ || !subscribe_.empty()) {
      cb(RedisReply{std::nullopt, stopped_ ? kRedisStopped : kRedisNotConnected});
      return;
    }
    resp::append_command(out_, args);
    const bool first = pending_.empty();
    pending_.push_back(Pending{std::move(cb), Clock::now() + o_.timeout});
    wake_.cancel();
    if (first) watchdog_.cancel();
  }

  // Closes the connection; every pending command fails with `why`.
  void drop(const std::string& why) {
    if (drop_reason_.empty()) drop_reason_ = why;
    boost::system::error_code ignored;
    if (tls_) tls_->lowest_layer().close(ignored);
    sock_.close(ignored);
    wake_.cancel();
    watchdog_.cancel();
    fail_pending(why);
  }

  void fail_pending(const std::string& why) {
    auto pending = std::move(pending_);
    pending_.clear();
    out_.clear();
    for (auto& p : pending) p.cb(RedisReply{std::nullopt, why});
  }

  // Reports each change, and each new reason for staying down.
  void set_up(bool up, const std::string& why) {
    if (connected_ == up && (up || why == down_why_)) return;
    connected_ = up;
    up_.store(up, std::memory_order_relaxed);
    down_why_ = up ? std::string() : why;
    if (on_state_) on_state_(up, why);
  }

  tcp::socket& lowest() { return tls_ ? tls_->next_layer() : sock_; }

  net::awaitable<boost::system::error_code> write(std::string_view data) {
    auto [ec, n] = tls_ ? co_await net::async_write(*tls_, net::buffer(data), kUseTuple)
                        : co_await net::async_write(sock_, net::buffer(data), kUseTuple);
    (void)n;
    co_return ec;
  }

  net::awaitable<boost::system::error_code> read_more() {
    constexpr std::size_t kChunk = 4096;
    const std::size_t old = in_.size();
    in_.resize(old + kChunk);
    auto buf = net::buffer(in_.data() + old, kChunk);
    auto [ec, n] = tls_ ? co_await tls_->async_read_some(buf, kUseTuple)
                        : co_await sock_.async_read_some(buf, kUseTuple);
    in_.resize(old + n);
    co_return ec;
  }

  // Next reply in in_, reading as needed. Empty on error (`why` set).
  net::awaitable<std::optional<resp::Value>> next(std::string& why) {
    for (;;) {
      resp::Value v;
      std::size_t used = 0;
      std::string perr;
      const resp::Status s = resp::parse(std::string_view(in_).substr(in_pos_), v, used, perr);
      if (s == resp::Status::kValue) {
        in_pos_ += used;
        if (in_pos_ == in_.size()) {
          in_.clear();
          in_pos_ = 0;
        }
        co_return v;
      }
      if (s == resp::Status::kError) {
        why = "protocol error: " + perr;
        co_return std::nullopt;
      }
      if (in_pos_ > 0) {
        in_.erase(0, in_pos_);
        in_pos_ = 0;
      }
      if (auto ec = co_await read_more()) {
        why = drop_reason_.empty() ? "read: " + ec.message() : drop_reason_;
        co_return std::nullopt;
      }
    }
  }

  // Closes the socket when `deadline` passes before `done` is set.
  void arm_deadline(net::steady_timer& t, Clock::time_point deadline, std::shared_ptr<bool> done,
                    const char* what) {
    t.expires_at(deadline);
    t.async_wait([self = shared(), done, what](boost::system::error_code ec) {
      if (ec || *done) return;
      self->drop_reason_ = what;
      boost::system::error_code ignored;
      self->lowest().close(ignored);
    });
  }

  // Connects, authenticates, selects the db and subscribes or pings.
  net::awaitable<bool> connect_once(std::string& why) {
    drop_reason_.clear();
    in_.clear();
    in_pos_ = 0;
    tls_.reset();
    sock_ = tcp::socket(ioc_);
    net::steady_timer timer(ioc_);
    auto done = std::make_shared<bool>(false);
    struct Disarm {
      std::shared_ptr<bool> d;
      net::steady_timer& t;
      ~Disarm() {
        *d = true;
        t.cancel();
      }
    } disarm{done, timer};

    tcp::resolver resolver(ioc_);
    auto [rec, results] =
        co_await resolver.async_resolve(o_.host, std::to_string(o_.port), kUseTuple);
    if (rec) {
      why = "resolve " + o_.host + ": " + rec.message();
      co_return false;
    }
    arm_deadline(timer, Clock::now() + o_.connect_timeout, done, "connect timeout");
    auto [cec, ep] = co_await net::async_connect(sock_, results, kUseTuple);
    (void)ep;
    if (cec) {
      why = drop_reason_.empty() ? "connect: " + cec.message() : drop_reason_;
      co_return false;
    }
    boost::system::error_code ignored;
    sock_.set_option(tcp::no_delay(true), ignored);
    if (o_.tls_context) {
      tls_ = std::make_unique<ssl::stream<tcp::socket>>(std::move(sock_), *o_.tls_context);
      sock_ = tcp::socket(ioc_);
      if (!providers::prepare_tls_client(*tls_, o_.tls, o_.host)) {
        why = "cannot set TLS SNI to " + providers::tls_server_name(o_.tls, o_.host);
        co_return false;
      }
      auto [hec] = co_await tls_->async_handshake(ssl::stream_base::client, kUseTuple);
      if (hec) {
        why = drop_reason_.empty() ? "TLS handshake: " + hec.message() : drop_reason_;
        co_return false;
      }
    }
    // The handshake: one pipelined write, then one reply per command.
    std::string hello;
    std::size_t replies = 0;
    if (!o_.password.empty()) {
      if (o_.username.empty()) {
        resp::append_command(hello, {"AUTH", o_.password});
      } else {
        resp::append_command(hello, {"AUTH", o_.username, o_.password});
      }
      ++replies;
    }
    if (o_.db != 0) {
      resp::append_command(hello, {"SELECT", std::to_string(o_.db)});
      ++replies;
    }
    if (subscribe_.empty()) {
      resp::append_command(hello, {"PING"});
      ++replies;
    } else {
      std::vector<std::string> cmd{"SUBSCRIBE"};
      cmd.insert(cmd.end(), subscribe_.begin(), subscribe_.end());
      resp::append_command(hello, cmd);
      replies += subscribe_.size();
    }
    timer.cancel();
    arm_deadline(timer, Clock::now() + o_.connect_timeout, done, "handshake timeout");
    if (auto ec = co_await write(hello)) {
      why = drop_reason_.empty() ? "write: " + ec.message() : drop_reason_;
      co_return false;
    }
    for (std::size_t i = 0; i < replies; ++i) {
      auto v = co_await next(why);
      if (!v) co_return false;
      if (v->is_error()) {
        why = "handshake refused: " + v->str;
        co_return false;
      }
    }
    co_return true;
  }

  net::awaitable<void> writer(std::uint64_t session) {
    auto self = shared();
    while (connected_ && session == session_) {
      if (out_.empty()) {
        wake_.expires_at(Clock::time_point::max());
        co_await wake_.async_wait(kUseTuple);
        continue;
      }
      std::string sending;
      sending.swap(out_);
      auto ec = co_await write(sending);
      if (session != session_) co_return;
      if (ec) {
        drop(drop_reason_.empty() ? "write: " + ec.message() : drop_reason_);
        co_return;
      }
    }
  }

  net::awaitable<void> watchdog(std::uint64_t session) {
    auto self = shared();
    while (connected_ && session == session_) {
      watchdog_.expires_at(pending_.empty() ? Clock::time_point::max() : pending_.front().deadline);
      auto [ec] = co_await watchdog_.async_wait(kUseTuple);
      if (!connected_ || session != session_) co_return;
      if (!ec && !pending_.empty() && pending_.front().deadline <= Clock::now()) {
        drop(kRedisTimeout);
        co_return;
      }
    }
  }

  // Reads replies and hands them to their commands (or messages to on_message).
  net::awaitable<std::string> reader() {
    for (;;) {
      std::string why;
      auto v = co_await next(why);
      if (!v) co_return why;
      if (!subscribe_.empty()) {
        // ["message", channel, payload]; subscribe confirmations and pongs pass.
        if (v->type == resp::Value::Type::kArray && v->elements.size() == 3 &&
            v->elements[0].str == "message" && on_message_) {
          on_message_(v->elements[1].str, v->elements[2].str);
        }
        continue;
      }
      if (pending_.empty()) co_return "protocol error: a reply nobody asked for";
      Pending p = std::move(pending_.front());
      pending_.pop_front();
      if (pending_.empty()) watchdog_.cancel();
      p.cb(RedisReply{std::move(*v), {}});
    }
  }

  net::awaitable<void> run() {
    auto self = shared();
    std::chrono::milliseconds backoff = o_.backoff_min;
    while (!stopped_) {
      std::string why;
      if (co_await connect_once(why) && !stopped_) {
        backoff = o_.backoff_min;
        ++session_;
        set_up(true, "");
        net::co_spawn(ioc_, writer(session_), net::detached);
        net::co_spawn(ioc_, watchdog(session_), net::detached);
        why = co_await reader();
        if (!drop_reason_.empty()) why = drop_reason_;
        set_up(false, why);
        drop(why);
      } else {
        set_up(false, why);
      }
      if (stopped_) break;
      std::uniform_real_distribution<double> jitter(0.5, 1.0);
      backoff_timer_.expires_after(
          std::chrono::duration_cast<Clock::duration>(backoff * jitter(rng_)));
      co_await backoff_timer_.async_wait(kUseTuple);
      backoff = std::min(o_.backoff_max, backoff * 2);
    }
    drop(kRedisStopped);
    set_up(false, kRedisStopped);
  }

  net::io_context& ioc_;
  RedisOptions o_;
  std::vector<std::string> subscribe_;
  OnState on_state_;
  OnMessage on_message_;
  tcp::socket sock_;
  std::unique_ptr<ssl::stream<tcp::socket>> tls_;
  net::steady_timer wake_;
  net::steady_timer watchdog_;
  net::steady_timer backoff_timer_;
  std::mt19937_64 rng_;
  std::string in_;
  std::size_t in_pos_ = 0;
  std::string out_;
  std::deque<Pending> pending_;
  std::string drop_reason_;
  bool started_ = false;
  bool stopped_ = false;
  bool connected_ = false;
  std::string down_why_;       // the reason last reported for being down
  std::uint64_t session_ = 0;  // +1 per connection made; ends the last one's writer and watchdog
};

}  // namespace

std::shared_ptr<RedisConnection> RedisConnection::create(net::io_context& ioc, RedisOptions options,
                                                         std::vector<std::string> subscribe,
                                                         OnState on_state, OnMessage on_message) {
  return std::make_shared<Connection>(ioc, std::move(options), std::move(subscribe),
                                      std::move(on_state), std::move(on_message));
}

}  // namespace llmgate::gateway
