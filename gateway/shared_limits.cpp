#include "gateway/shared_limits.h"

#include <algorithm>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/bind_executor.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <thread>
#include <unordered_map>

#include "gateway/log.h"
#include "gateway/redis_client.h"
#include "providers/tls_client.h"

namespace llmgate::gateway {
namespace {

namespace net = boost::asio;
using Clock = std::chrono::steady_clock;

// A token bucket on Redis's clock. KEYS[1] the bucket; ARGV: capacity,
// refill per millisecond, tokens wanted. Takes min(wanted, whole tokens
// available); returns {taken, ms until the next whole token}.
constexpr const char* kBucketScript = R"lua(
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local cap = tonumber(ARGV[1])
local rate = tonumber(ARGV[2])
local want = tonumber(ARGV[3])
local b = redis.call('HMGET', KEYS[1], 'l', 't')
local level = tonumber(b[1])
local ts = tonumber(b[2])
if level == nil or ts == nil then
  level = cap
  ts = now
end
if now > ts then
  level = math.min(cap, level + (now - ts) * rate)
  ts = now
end
if level > cap then level = cap end
local got = math.floor(level)
if got > want then got = want end
if got < 0 then got = 0 end
level = level - got
redis.call('HSET', KEYS[1], 'l', tostring(level), 't', tostring(ts))
redis.call('PEXPIRE', KEYS[1], math.ceil(cap / rate) + 60000)
local wait = 0
if level < 1 then wait = math.ceil((1 - level) / rate) end
return {got, wait}
)lua";

// A max_concurrent slot. KEYS[1] the deployment's sorted set of slots scored
// by expiry; ARGV: limit, slot id, ttl ms. Returns 1 if taken, else 0.
constexpr const char* kSlotScript = R"lua(
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
if redis.call('ZCARD', KEYS[1]) < tonumber(ARGV[1]) then
  redis.call('ZADD', KEYS[1], now + tonumber(ARGV[3]), ARGV[2])
  redis.call('PEXPIRE', KEYS[1], tonumber(ARGV[3]) * 2)
  return 1
end
return 0
)lua";

// Pushes back the expiry of held slots that are still there. KEYS[1] the
// set; ARGV: ttl ms, slot ids... Returns how many were renewed.
constexpr const char* kRenewScript = R"lua(
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local n = 0
for i = 2, #ARGV do
  if redis.call('ZSCORE', KEYS[1], ARGV[i]) then
    redis.call('ZADD', KEYS[1], now + tonumber(ARGV[1]), ARGV[i])
    n = n + 1
  end
end
if n > 0 then redis.call('PEXPIRE', KEYS[1], tonumber(ARGV[1]) * 2) end
return n
)lua";

std::string num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

SharedResult classify(const RedisReply& r) {
  if (r.ok()) return SharedResult::kOk;
  if (r.value) return SharedResult::kError;
  if (r.error == kRedisTimeout) return SharedResult::kTimeout;
  return SharedResult::kUnavailable;
}

std::string random_id() {
  std::random_device rd;
  std::uniform_int_distribution<std::uint64_t> d;
  char buf[20];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(d(rd)));
  return buf;
}

// What travels on <prefix>:events: "cooldown <replica> <ms> <deployment>".
std::string cooldown_message(const std::string& replica, std::chrono::milliseconds after,
                             const std::string& deployment) {
  return "cooldown " + replica + " " + std::to_string(after.count()) + " " + deployment;
}

struct Cooldown {
  std::string_view replica;
  std::chrono::milliseconds after{0};
  std::string_view deployment;
};

std::optional<Cooldown> parse_cooldown(std::string_view message) {
  constexpr std::string_view kCooldown = "cooldown ";
  if (message.substr(0, kCooldown.size()) != kCooldown) return std::nullopt;
  message.remove_prefix(kCooldown.size());
  const auto sp1 = message.find(' ');
  if (sp1 == std::string_view::npos) return std::nullopt;
  Cooldown c;
  c.replica = message.substr(0, sp1);
  message.remove_prefix(sp1 + 1);
  const auto sp2 = message.find(' ');
  if (sp2 == std::string_view::npos) return std::nullopt;
  long long ms = 0;
  auto [p, ec] = std::from_chars(message.data(), message.data() + sp2, ms);
  if (ec != std::errc() || p != message.data() + sp2 || ms <= 0) return std::nullopt;
  c.after = std::chrono::milliseconds(ms);
  c.deployment = message.substr(sp2 + 1);
  if (c.deployment.empty()) return std::nullopt;
  return c;
}

// The bucket script's answer: {taken, ms until the next whole token}.
struct LeaseReply {
  std::int64_t got = 0;
  std::int64_t wait_ms = 0;
};
std::optional<LeaseReply> parse_lease(const RedisReply& r) {
  if (!r.ok() || r.value->type != resp::Value::Type::kArray || r.value->elements.size() != 2)
    return std::nullopt;
  return LeaseReply{r.value->elements[0].integer, r.value->elements[1].integer};
}

}  // namespace

struct SharedLimits::Impl {
  net::io_context ioc{1};
  net::executor_work_guard<net::io_context::executor_type> work{ioc.get_executor()};
  std::thread thread;
  Hooks hooks;
  std::string replica = random_id();
  std::string prefix;
  std::string channel;
  std::shared_ptr<RedisConnection> cmd;
  std::shared_ptr<RedisConnection> sub;
  net::steady_timer renew_timer{ioc};
  std::int64_t slot_ttl_ms = 15'000;
  double lease_window_ms = 100;

  struct Lease {
    double tokens = 0;
    Clock::time_point empty_until{};
    int empty_wait_ms = 0;
    bool refilling = false;
    int retry_after_s() const { return std::max(1, (empty_wait_ms + 999) / 1000); }
  };
  mutable std::mutex mu;
  std::unordered_map<std::string, Lease> leases;      // by key name
  std::map<std::string, std::set<std::string>> held;  // deployment -> slot ids
  std::uint64_t next_slot = 0;                        // mu

  std::string bucket_key(const std::string& key) const { return prefix + ":rate:req:" + key; }
  std::string slots_key(const std::string& deployment) const {
    return prefix + ":slots:" + deployment;
  }

  // The bucket script for `want` of `key`'s tokens at `per_minute`.
  std::vector<std::string> lease_command(const std::string& key, double per_minute,
                                         double want) const {
    return {"EVAL",          kBucketScript,   "1",
            bucket_key(key), num(per_minute), num(per_minute / 60'000.0),
            num(want)};
  }
  // The tokens one lease takes: what the key earns in lease_window, at least 1.
  double lease_size(double per_minute) const {
    return std::max(1.0, std::floor(per_minute / 60'000.0 * lease_window_ms));
  }

  // Not connected: counted as such, and the caller decides without Redis.
  bool unavailable(SharedOp op) const {
    if (cmd->up()) return false;
    if (hooks.metrics) hooks.metrics->on_shared_op(op, SharedResult::kUnavailable, 0);
    return true;
  }

  // Runs `args`; `done` gets the reply on the shared-state thread.
  void call(SharedOp op, std::vector<std::string> args, std::function<void(RedisReply)> done) {
    const auto start = Clock::now();
    MetricsRegistry* m = hooks.metrics;
    cmd->call(std::move(args), [op, start, m, done = std::move(done)](RedisReply r) {
      if (m) {
        m->on_shared_op(op, classify(r),
                        std::chrono::duration<double>(Clock::now() - start).count());
      }
      if (done) done(std::move(r));
    });
  }

  // The same, awaited on the calling coroutine's executor.
  net::awaitable<RedisReply> ask(SharedOp op, std::vector<std::string> args) {
    auto ex = co_await net::this_coro::executor;
    co_return co_await net::async_initiate<decltype(net::use_awaitable), void(RedisReply)>(
        [this, op, ex, &args](auto handler) {
          auto h = std::make_shared<decltype(handler)>(std::move(handler));
          call(op, std::move(args), [h, ex](RedisReply r) {
            net::post(ex, [h, r = std::move(r)]() mutable { (*h)(std::move(r)); });
          });
        },
        net::use_awaitable);
  }

  // A background lease's answer.
  void on_lease(const std::string& key, const RedisReply& r) {
    std::lock_guard lock(mu);
    Lease& l = leases[key];
    l.refilling = false;
    const auto lease = parse_lease(r);
    if (!lease) return;
    if (lease->got > 0) l.tokens += static_cast<double>(lease->got);
    if (lease->got < 1) note_empty(l, lease->wait_ms);
  }

  static void note_empty(Lease& l, std::int64_t wait_ms) {
    // Refuse locally until the next token is due (at most a second: another
    // replica's unspent lease does not come back to the bucket).
    const auto ms = std::clamp<std::int64_t>(wait_ms, 1, 1000);
    l.empty_until = Clock::now() + std::chrono::milliseconds(ms);
    l.empty_wait_ms = static_cast<int>(std::max<std::int64_t>(wait_ms, 1));
  }

  void renew() {
    std::map<std::string, std::vector<std::string>> batches;
    {
      std::lock_guard lock(mu);
      for (const auto& [dep, ids] : held) {
        if (!ids.empty()) batches[dep].assign(ids.begin(), ids.end());
      }
    }
    const std::string ttl = std::to_string(slot_ttl_ms);
    for (auto& [dep, ids] : batches) {
      std::vector<std::string> args{"EVAL", kRenewScript, "1", slots_key(dep), ttl};
      args.insert(args.end(), ids.begin(), ids.end());
      if (cmd->up()) call(SharedOp::kSlotRenew, std::move(args), {});
    }
  }

  void schedule_renew() {
    renew_timer.expires_after(std::chrono::milliseconds(slot_ttl_ms / 3));
    renew_timer.async_wait([this](boost::system::error_code ec) {
      if (ec) return;
      renew();
      schedule_renew();
    });
  }
};

std::shared_ptr<SharedLimits> SharedLimits::start(const config::SharedState& cfg, Hooks hooks) {
  return std::shared_ptr<SharedLimits>(new SharedLimits(cfg, std::move(hooks)));
}

SharedLimits::SharedLimits(const config::SharedState& cfg, Hooks hooks)
    : cfg_(cfg), impl_(std::make_unique<Impl>()) {
  Impl& i = *impl_;
  i.hooks = std::move(hooks);
  i.prefix = cfg.key_prefix;
  i.channel = cfg.key_prefix + ":events";
  i.slot_ttl_ms = cfg.slot_ttl.count();
  i.lease_window_ms = static_cast<double>(cfg.lease_window.count());
  if (i.hooks.metrics) {
    i.hooks.metrics->enable_shared_state();
    i.hooks.metrics->set_shared_up(false);
  }
  RedisOptions o;
  o.host = cfg.host;
  o.port = cfg.port;
  if (cfg.tls) o.tls_context = providers::make_tls_context(cfg.tls_settings);
  o.tls = cfg.tls_settings;
  o.username = cfg.username;
  o.password = cfg.password;
  o.db = cfg.db;
  o.timeout = cfg.timeout;
  o.connect_timeout = cfg.connect_timeout;
  const std::string where =
      (cfg.tls ? "rediss://" : "redis://") + cfg.host + ":" + std::to_string(cfg.port);
  const bool open = cfg.on_failure == config::SharedState::OnFailure::kOpen;
  log_line(LogLevel::kInfo, "shared state: " + where + " (prefix \"" + cfg.key_prefix +
                                "\", on_failure " + (open ? "open" : "closed") + ")");
  MetricsRegistry* m = i.hooks.metrics;
  i.cmd = RedisConnection::create(i.ioc, o, {}, [where, open, m](bool up, const std::string& why) {
    if (m) m->set_shared_up(up);
    if (up) {
      log_line(LogLevel::kInfo, "shared state: connected to " + where);
    } else if (why == kRedisStopped) {
      log_line(LogLevel::kInfo, "shared state: disconnected from " + where + " (stopping)");
    } else {
      log_line(LogLevel::kWarn,
               "shared state: " + where + " unavailable (" + why + "); " +
                   (open ? "failing open: key rate limits and max_concurrent are this "
                           "replica's own until it is back"
                         : "failing closed: requests that need it are refused until it is "
                           "back"));
    }
  });
  Impl* ip = impl_.get();
  i.sub = RedisConnection::create(
      i.ioc, o, {i.channel},
      [where](bool up, const std::string& why) {
        if (up) {
          log_line(LogLevel::kInfo, "shared state: subscribed to cooldowns at " + where);
        } else if (why != kRedisStopped) {
          log_line(LogLevel::kWarn, "shared state: no cooldown subscription at " + where + " (" +
                                        why + "); other replicas' cooldowns are not heard");
        }
      },
      [ip](const std::string&, const std::string& message) {
        const auto c = parse_cooldown(message);
        if (!c || c->replica == ip->replica) return;
        if (ip->hooks.on_cooldown) ip->hooks.on_cooldown(std::string(c->deployment), c->after);
        if (ip->hooks.metrics) ip->hooks.metrics->on_shared_event_applied();
      });
  i.cmd->start();
  i.sub->start();
  net::post(i.ioc, [ip] { ip->schedule_renew(); });
  i.thread = std::thread([ip] { ip->ioc.run(); });
}

SharedLimits::~SharedLimits() { stop(); }

void SharedLimits::stop() {
  Impl& i = *impl_;
  if (!i.thread.joinable()) return;
  i.cmd->stop();
  i.sub->stop();
  net::post(i.ioc, [ip = impl_.get()] {
    ip->renew_timer.cancel();
    ip->work.reset();
    // Whatever is still running (a resolve, a reconnect wait) ends here.
    net::post(ip->ioc, [ip] { ip->ioc.stop(); });
  });
  i.thread.join();
}

bool SharedLimits::up() const { return impl_->cmd->up(); }

net::awaitable<SharedLimits::RateDecision> SharedLimits::take_request(const std::string& key,
                                                                      double per_minute) {
  Impl& i = *impl_;
  const double batch = i.lease_size(per_minute);
  {
    std::unique_lock lock(i.mu);
    Impl::Lease& l = i.leases[key];
    if (l.tokens >= 1) {
      l.tokens -= 1;
      const bool refill = l.tokens < 1 && !l.refilling && i.cmd->up();
      if (refill) l.refilling = true;
      lock.unlock();
      if (refill) {
        // The next request should find a token here: lease now, in the background.
        i.call(SharedOp::kRateLease, i.lease_command(key, per_minute, batch),
               [ip = impl_.get(), key](RedisReply r) { ip->on_lease(key, r); });
      }
      co_return RateDecision{Verdict::kAllowed, 0};
    }
    if (Clock::now() < l.empty_until) co_return RateDecision{Verdict::kLimited, l.retry_after_s()};
  }
  if (i.unavailable(SharedOp::kRateLease)) co_return RateDecision{};
  // This request's token and the next lease in one round trip.
  RedisReply r = co_await i.ask(SharedOp::kRateLease, i.lease_command(key, per_minute, batch + 1));
  const auto lease = parse_lease(r);
  if (!lease) {
    if (r.value && !r.ok()) log_line(LogLevel::kWarn, "shared state: rate lease: " + r.what());
    co_return RateDecision{};
  }
  std::lock_guard lock(i.mu);
  Impl::Lease& l = i.leases[key];
  if (lease->got >= 1) {
    l.tokens += static_cast<double>(lease->got - 1);
    co_return RateDecision{Verdict::kAllowed, 0};
  }
  Impl::note_empty(l, lease->wait_ms);
  co_return RateDecision{Verdict::kLimited, l.retry_after_s()};
}

net::awaitable<SharedLimits::SlotResult> SharedLimits::acquire_slot(const std::string& deployment,
                                                                    unsigned limit,
                                                                    Clock::time_point deadline) {
  Impl& i = *impl_;
  if (i.unavailable(SharedOp::kSlotAcquire)) co_return SlotResult{};
  std::string id;
  {
    std::lock_guard lock(i.mu);
    id = i.replica + ":" + std::to_string(++i.next_slot);
  }
  const std::string ttl = std::to_string(i.slot_ttl_ms);
  constexpr auto kPoll = std::chrono::milliseconds(20);
  std::optional<net::steady_timer> timer;
  for (;;) {
    std::vector<std::string> args{
        "EVAL", kSlotScript, "1", i.slots_key(deployment), std::to_string(limit), id, ttl};
    RedisReply r = co_await i.ask(SharedOp::kSlotAcquire, std::move(args));
    if (!r.ok() || r.value->type != resp::Value::Type::kInteger) co_return SlotResult{};
    if (r.value->integer == 1) {
      {
        std::lock_guard lock(i.mu);
        i.held[deployment].insert(id);
      }
      co_return SlotResult{Verdict::kAllowed, Slot(shared_from_this(), deployment, id)};
    }
    const auto now = Clock::now();
    if (now + kPoll >= deadline) co_return SlotResult{Verdict::kLimited, Slot()};
    if (!timer) timer.emplace(co_await net::this_coro::executor);
    timer->expires_after(kPoll);
    co_await timer->async_wait(net::as_tuple(net::use_awaitable));
  }
}

unsigned SharedLimits::slots_held() const {
  std::lock_guard lock(impl_->mu);
  unsigned n = 0;
  for (const auto& [dep, ids] : impl_->held) n += static_cast<unsigned>(ids.size());
  return n;
}

void SharedLimits::publish_cooldown(const std::string& deployment,
                                    std::chrono::milliseconds after) {
  Impl& i = *impl_;
  if (i.unavailable(SharedOp::kPublish)) return;
  i.call(SharedOp::kPublish, {"PUBLISH", i.channel, cooldown_message(i.replica, after, deployment)},
         {});
}

SharedLimits::Slot::Slot(std::shared_ptr<SharedLimits> owner, std::string deployment,
                         std::string id)
    : owner_(std::move(owner)), deployment_(std::move(deployment)), id_(std::move(id)) {}

SharedLimits::Slot& SharedLimits::Slot::operator=(Slot&& o) noexcept {
  if (this != &o) {
    release();
    owner_ = std::move(o.owner_);
    deployment_ = std::move(o.deployment_);
    id_ = std::move(o.id_);
  }
  return *this;
}

void SharedLimits::Slot::release() {
  auto owner = std::move(owner_);
  if (!owner) return;
  Impl& i = *owner->impl_;
  {
    std::lock_guard lock(i.mu);
    if (auto it = i.held.find(deployment_); it != i.held.end()) {
      it->second.erase(id_);
      if (it->second.empty()) i.held.erase(it);
    }
  }
  // Not renewed from now on: if Redis does not hear of it, it expires.
  i.call(SharedOp::kSlotRelease, {"ZREM", i.slots_key(deployment_), id_}, {});
}

ApiError shared_state_unavailable() {
  return ApiError{503,
                  "service_unavailable",
                  "The gateway's shared rate-limit state is unavailable; try again shortly.",
                  std::nullopt,
                  "shared_state_unavailable",
                  1};
}

net::awaitable<std::optional<ApiError>> admit_shared_request(SharedLimits& shared, KeyStore& keys,
                                                             const config::GatewayKey& key,
                                                             MetricsRegistry& metrics) {
  if (!key.requests_per_minute) co_return std::nullopt;
  const SharedLimits::RateDecision d =
      co_await shared.take_request(key.name, *key.requests_per_minute);
  switch (d.verdict) {
    case SharedLimits::Verdict::kAllowed:
      co_return std::nullopt;
    case SharedLimits::Verdict::kLimited:
      metrics.on_auth_rejected(AuthRejection::kRateLimited);
      co_return KeyStore::requests_limited(key, d.retry_after_s);
    case SharedLimits::Verdict::kUnavailable:
      break;
  }
  metrics.on_shared_fallback(SharedOp::kRateLease, shared.fail_open());
  if (!shared.fail_open()) co_return shared_state_unavailable();
  auto local = keys.take_local_request(key);
  if (local) metrics.on_auth_rejected(AuthRejection::kRateLimited);
  co_return local;
}

}  // namespace llmgate::gateway
