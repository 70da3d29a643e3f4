// The shared-state backend against a real redis-server (tools/setup.sh
// installs it): the RESP client's pipelining, deadline and reconnection, and
// SharedLimits as several replicas in one process would use it — request
// rates, usage and budgets, max_concurrent slots, cooldowns and ejections
// (published, and stored for replicas that connect later). Runs under the
// sanitizers too, so TSan sees the shared-state thread.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_future.hpp>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <future>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "gateway/shared/redis_client.h"
#include "gateway/shared/shared_limits.h"
#include "tests/support/ports.h"

extern char** environ;

namespace llmgate::gateway {
namespace {

namespace net = boost::asio;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

// A redis-server of this test's own, on a free port; stopped with the test.
class RedisServer {
 public:
  RedisServer() {
    port_ = free_port();
    int out[2];
    if (::pipe(out) != 0) return;
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, out[1], STDOUT_FILENO);
    posix_spawn_file_actions_addclose(&fa, out[0]);
    const std::string port = std::to_string(port_);
    std::vector<std::string> args{"redis-server", "--port",           port, "--bind",
                                  "127.0.0.1",    "--save",           "",   "--appendonly",
                                  "no",           "--daemonize",      "no", "--loglevel",
                                  "notice",       "--protected-mode", "no"};
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    const int rc = posix_spawnp(&pid_, "redis-server", &fa, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&fa);
    ::close(out[1]);
    if (rc != 0) {
      pid_ = -1;
      ::close(out[0]);
      return;
    }
    // Ready when it says so (its log goes to our pipe).
    std::string log;
    char buf[512];
    while (log.find("Ready to accept connections") == std::string::npos) {
      const ssize_t n = ::read(out[0], buf, sizeof buf);
      if (n <= 0) break;
      log.append(buf, static_cast<std::size_t>(n));
    }
    ready_ = log.find("Ready to accept connections") != std::string::npos;
    // Keep draining its log so that it never blocks on a full pipe.
    drain_ = std::thread([fd = out[0]] {
      char b[512];
      while (::read(fd, b, sizeof b) > 0) {
      }
      ::close(fd);
    });
  }
  ~RedisServer() {
    if (pid_ > 0) {
      ::kill(pid_, SIGCONT);
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
    if (drain_.joinable()) drain_.join();
  }
  bool ready() const { return ready_; }
  std::uint16_t port() const { return port_; }
  void pause() { ::kill(pid_, SIGSTOP); }
  void resume() { ::kill(pid_, SIGCONT); }

 private:
  static std::uint16_t free_port() {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    const std::uint16_t port = llmgate::testing::bind_loopback(fd);
    ::close(fd);
    return port;
  }
  pid_t pid_ = -1;
  std::uint16_t port_ = 0;
  bool ready_ = false;
  std::thread drain_;
};

// Waits until `done()` holds, checking it whenever `cv` is notified, for at
// most `limit` (generous: a loaded machine is slow, a hang is a failure).
template <class Done>
bool wait_for(std::mutex& mu, std::condition_variable& cv, Done done,
              std::chrono::milliseconds limit = 10s) {
  std::unique_lock lock(mu);
  return cv.wait_for(lock, limit, done);
}

// Polls `done` (a condition on another thread's effects that notify nothing)
// until it holds, for at most `limit`.
template <class Done>
bool eventually(Done done, std::chrono::milliseconds limit = 10s) {
  const auto until = Clock::now() + limit;
  while (!done()) {
    if (Clock::now() > until) return false;
    std::this_thread::sleep_for(5ms);
  }
  return true;
}

// An io_context on a thread of its own, stopped and joined however the test
// ends (an ASSERT returns early).
struct IoThread {
  net::io_context ioc;
  net::executor_work_guard<net::io_context::executor_type> work{ioc.get_executor()};
  std::thread thread{[this] { ioc.run(); }};
  ~IoThread() {
    work.reset();
    ioc.stop();
    thread.join();
  }
};

// The io_context the test's coroutines run on. It outlives every
// SharedLimits, as a gateway worker's does: their threads post replies to it
// and may still be inside that post (signalling it) when run() returns.
net::io_context& test_ioc() {
  static net::io_context ioc;
  return ioc;
}

template <class T>
T run(net::awaitable<T> a) {
  net::io_context& ioc = test_ioc();
  ioc.restart();
  auto f = net::co_spawn(ioc, std::move(a), net::use_future);
  ioc.run();
  return f.get();
}

class SharedStateTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(redis_.ready()) << "redis-server did not start (tools/setup.sh installs it)";
  }
  config::SharedState cfg(const std::string& prefix) const {
    config::SharedState s;
    s.host = "127.0.0.1";
    s.port = redis_.port();
    s.key_prefix = prefix;
    s.timeout = config::Duration{200};  // loaded CI machines, sanitizers
    s.connect_timeout = config::Duration{2000};
    return s;
  }
  // A replica's SharedLimits, connected.
  std::shared_ptr<SharedLimits> replica(const std::string& prefix, SharedLimits::Hooks hooks = {},
                                        bool share_ejections = true) const {
    config::SharedState c = cfg(prefix);
    c.share_ejections = share_ejections;
    auto s = SharedLimits::start(c, std::move(hooks));
    EXPECT_TRUE(eventually([&] { return s->up(); })) << "not connected to redis";
    return s;
  }
  RedisServer redis_;
};

TEST_F(SharedStateTest, TheClientPipelinesAndAnswersInOrder) {
  IoThread io;
  std::mutex mu;
  std::condition_variable cv;
  bool up = false;
  RedisOptions o;
  o.port = redis_.port();
  o.timeout = 2000ms;
  auto c = RedisConnection::create(io.ioc, o, {}, [&](bool u, const std::string&) {
    std::lock_guard lock(mu);
    up = u;
    cv.notify_all();
  });
  c->start();
  ASSERT_TRUE(wait_for(mu, cv, [&] { return up; }));
  constexpr int kN = 200;
  std::vector<std::string> got(kN);
  int answered = 0;
  for (int i = 0; i < kN; ++i) {
    c->call({"SET", "k" + std::to_string(i), "v" + std::to_string(i)}, {});
    c->call({"GET", "k" + std::to_string(i)}, [&, i](RedisReply r) {
      std::lock_guard lock(mu);
      got[static_cast<std::size_t>(i)] = r.ok() ? r.value->str : "error: " + r.what();
      ++answered;
      cv.notify_all();
    });
  }
  ASSERT_TRUE(wait_for(mu, cv, [&] { return answered == kN; }));
  for (int i = 0; i < kN; ++i) EXPECT_EQ(got[static_cast<std::size_t>(i)], "v" + std::to_string(i));
  c->stop();
}

TEST_F(SharedStateTest, APausedRedisCostsOneTimeoutThenTheClientReconnects) {
  IoThread io;
  std::mutex mu;
  std::condition_variable cv;
  int ups = 0;
  bool up = false;
  RedisOptions o;
  o.port = redis_.port();
  o.timeout = 100ms;
  o.connect_timeout = 300ms;
  auto c = RedisConnection::create(io.ioc, o, {}, [&](bool u, const std::string&) {
    std::lock_guard lock(mu);
    up = u;
    ups += u ? 1 : 0;
    cv.notify_all();
  });
  c->start();
  ASSERT_TRUE(wait_for(mu, cv, [&] { return up; }));
  redis_.pause();
  std::optional<RedisReply> reply;
  const auto sent = Clock::now();
  c->call({"PING"}, [&](RedisReply r) {
    std::lock_guard lock(mu);
    reply = std::move(r);
    cv.notify_all();
  });
  ASSERT_TRUE(wait_for(mu, cv, [&] { return reply.has_value(); }));
  EXPECT_EQ(reply->error, kRedisTimeout);
  EXPECT_LT(Clock::now() - sent, 2s) << "a paused Redis costs about one timeout";
  ASSERT_TRUE(wait_for(mu, cv, [&] { return !up; }));
  // While it is down, commands fail at once.
  std::optional<RedisReply> fast;
  c->call({"PING"}, [&](RedisReply r) {
    std::lock_guard lock(mu);
    fast = std::move(r);
    cv.notify_all();
  });
  ASSERT_TRUE(wait_for(mu, cv, [&] { return fast.has_value(); }));
  EXPECT_FALSE(fast->ok());
  redis_.resume();
  ASSERT_TRUE(wait_for(mu, cv, [&] { return up && ups >= 2; })) << "reconnected";
  std::optional<RedisReply> pong;
  c->call({"PING"}, [&](RedisReply r) {
    std::lock_guard lock(mu);
    pong = std::move(r);
    cv.notify_all();
  });
  ASSERT_TRUE(wait_for(mu, cv, [&] { return pong.has_value(); }));
  EXPECT_TRUE(pong->ok()) << pong->what();
  c->stop();
}

TEST_F(SharedStateTest, ReplicasShareARequestRate) {
  auto a = replica("rate");
  auto b = replica("rate");
  int allowed = 0, limited = 0;
  for (int i = 0; i < 60; ++i) {
    auto& r = i % 2 ? *a : *b;
    const auto d = run(r.take_request("team", 30));
    allowed += d.verdict == SharedLimits::Verdict::kAllowed;
    limited += d.verdict == SharedLimits::Verdict::kLimited;
    if (d.verdict == SharedLimits::Verdict::kLimited) {
      EXPECT_GE(d.retry_after_s, 1);
    }
  }
  EXPECT_EQ(allowed + limited, 60);
  // 30 a minute: the burst of 30, plus what refills during the test (a
  // token every 2 s), not 30 each.
  EXPECT_GE(allowed, 28);  // at most replicas x lease (1) refused early
  EXPECT_LE(allowed, 32);
}

TEST_F(SharedStateTest, ReplicasShareTokenUsageAndBudgets) {
  auto a = replica("usage");
  auto b = replica("usage");
  config::GatewayKey key;
  key.name = "team";
  key.tokens_per_minute = 1000;
  key.budget_usd_per_day = 1.0;
  EXPECT_EQ(run(b->check_usage(key)).verdict, SharedLimits::Verdict::kAllowed);
  a->charge_usage(key, {400, 0.6});
  a->charge_usage(key, {100, 0.5});  // $1.10 of $1.00: over the budget, on another replica
  // b hears that a charge took the key over, and reads it again.
  ASSERT_TRUE(eventually(
      [&] { return run(b->check_usage(key)).verdict == SharedLimits::Verdict::kLimited; }));
  const auto d = run(b->check_usage(key));
  ASSERT_TRUE(d.refusal.has_value());
  EXPECT_EQ(d.refusal->code, "insufficient_quota");
  EXPECT_NE(d.refusal->message.find("$1.10 of $1.00"), std::string::npos) << d.refusal->message;
  // Tokens: another key, 500 of 1000 a minute used on each replica.
  config::GatewayKey tokens;
  tokens.name = "tokens";
  tokens.tokens_per_minute = 1000;
  a->charge_usage(tokens, {500, 0});
  b->charge_usage(tokens, {600, 0});
  ASSERT_TRUE(eventually(
      [&] { return run(a->check_usage(tokens)).verdict == SharedLimits::Verdict::kLimited; }));
  EXPECT_EQ(run(a->check_usage(tokens)).refusal->type, "tokens");
}

TEST_F(SharedStateTest, ReplicasSharePromptCacheAffinityForItsTtl) {
  auto a = replica("affinity");
  auto b = replica("affinity");
  auto other = replica("affinity-elsewhere");  // another fleet (key_prefix)
  a->remember_affinity({{11, 0xd1, 8000, 0}, {12, 0xd2, 12000, 3}}, 60s);
  a->remember_affinity({{13, 0xd3, 500, 0}}, 100ms);
  std::vector<SharedLimits::AffinityEntry> found;
  ASSERT_TRUE(eventually([&] {
    found = run(b->find_affinity({11, 12, 13, 14}));
    return found.size() == 3;
  }));
  EXPECT_EQ(found[0].hash, 11u);
  EXPECT_EQ(found[0].deployment, 0xd1u);
  EXPECT_EQ(found[0].bytes, 8000u);
  EXPECT_EQ(found[1].hash, 12u);
  EXPECT_EQ(found[1].media, 3u);
  EXPECT_TRUE(run(other->find_affinity({11, 12})).empty());
  // The short-lived entry expires; a later serving elsewhere replaces one.
  ASSERT_TRUE(eventually([&] { return run(b->find_affinity({13})).empty(); }));
  b->remember_affinity({{11, 0xee, 9000, 0}}, 60s);
  ASSERT_TRUE(eventually([&] {
    const auto again = run(a->find_affinity({11}));
    return again.size() == 1 && again[0].deployment == 0xee;
  }));
  EXPECT_TRUE(run(a->find_affinity({})).empty());
}

TEST_F(SharedStateTest, MaxConcurrentSlotsHoldAcrossReplicas) {
  auto a = replica("slots");
  auto b = replica("slots");
  const auto soon = [] { return Clock::now() + 100ms; };
  auto s1 = run(a->acquire_slot("p/m", 2, soon()));
  auto s2 = run(b->acquire_slot("p/m", 2, soon()));
  ASSERT_EQ(s1.verdict, SharedLimits::Verdict::kAllowed);
  ASSERT_EQ(s2.verdict, SharedLimits::Verdict::kAllowed);
  EXPECT_EQ(run(a->acquire_slot("p/m", 2, soon())).verdict, SharedLimits::Verdict::kLimited);
  EXPECT_EQ(run(b->acquire_slot("p/m", 2, soon())).verdict, SharedLimits::Verdict::kLimited);
  EXPECT_EQ(run(b->acquire_slot("other/m", 2, soon())).verdict, SharedLimits::Verdict::kAllowed);
  s1.slot = SharedLimits::Slot();  // released
  EXPECT_EQ(a->slots_held(), 0u);
  // A waiter on the other replica gets it within its deadline.
  EXPECT_EQ(run(b->acquire_slot("p/m", 2, Clock::now() + 5s)).verdict,
            SharedLimits::Verdict::kAllowed);
}

TEST_F(SharedStateTest, CooldownsAndEjectionsReachTheOthersAndLaterReplicas) {
  struct Heard {
    std::mutex mu;
    std::condition_variable cv;
    std::vector<std::tuple<HealthEvent, std::string, std::chrono::milliseconds>> events;
    SharedLimits::Hooks hooks() {
      SharedLimits::Hooks h;
      h.on_health = [this](HealthEvent e, const std::string& dep, std::chrono::milliseconds ms) {
        std::lock_guard lock(mu);
        events.emplace_back(e, dep, ms);
        cv.notify_all();
      };
      return h;
    }
  };
  Heard heard_a, heard_b, heard_late;
  auto a = replica("health", heard_a.hooks());
  auto b = replica("health", heard_b.hooks());
  // Heard by pub/sub, or (if b's subscription was not up yet) read from what
  // is stored when it subscribes: either way, with the time left.
  a->publish(HealthEvent::kCooldown, "p/m", 30s);
  a->publish(HealthEvent::kEjection, "q/m", 20s);
  ASSERT_TRUE(wait_for(heard_b.mu, heard_b.cv, [&] {
    bool cooldown = false, ejection = false;
    for (const auto& [e, dep, ms] : heard_b.events) {
      cooldown |= e == HealthEvent::kCooldown && dep == "p/m" && ms <= 30s && ms > 25s;
      ejection |= e == HealthEvent::kEjection && dep == "q/m" && ms <= 20s && ms > 15s;
    }
    return cooldown && ejection;
  }));
  {
    std::lock_guard lock(heard_a.mu);
    EXPECT_TRUE(heard_a.events.empty()) << "a replica does not apply its own news";
  }
  // A replica that starts now learns both from what is stored; one with
  // share_ejections: false only the cooldown.
  Heard heard_solo;
  auto late = replica("health", heard_late.hooks());
  auto solo = replica("health", heard_solo.hooks(), false);
  ASSERT_TRUE(
      wait_for(heard_late.mu, heard_late.cv, [&] { return heard_late.events.size() >= 2; }));
  // solo can learn p/m only from what is stored, in the same reply as q/m's
  // ejection: once it has p/m, q/m was either applied or ignored.
  a->publish(HealthEvent::kCooldown, "s/m", 30s);
  const auto heard = [&](const char* dep) {
    return std::any_of(heard_solo.events.begin(), heard_solo.events.end(),
                       [&](const auto& e) { return std::get<1>(e) == dep; });
  };
  ASSERT_TRUE(wait_for(heard_solo.mu, heard_solo.cv, [&] { return heard("p/m") && heard("s/m"); }));
  {
    std::lock_guard lock(heard_solo.mu);
    for (const auto& e : heard_solo.events) EXPECT_EQ(std::get<0>(e), HealthEvent::kCooldown);
  }
}

}  // namespace
}  // namespace llmgate::gateway
