#include "gateway/shared/shared_limits.h"

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

#include "gateway/observe/log.h"
#include "gateway/shared/redis_client.h"
#include "gateway/shared/shared_wire.h"
#include "providers/tls_client.h"

namespace llmgate::gateway {
namespace {

namespace net = boost::asio;
using Clock = std::chrono::steady_clock;
using namespace shared_wire;  // the wire's scripts, messages and parsers, throughout

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
  bool share_ejections = true;  // sent and applied

  struct Lease {
    double tokens = 0;
    Clock::time_point empty_until{};
    int empty_wait_ms = 0;
    bool refilling = false;
    int retry_after_s() const { return std::max(1, (empty_wait_ms + 999) / 1000); }
  };
  // A key's shared token level and spend as last read (or charged).
  struct UsageView {
    KeyUsage usage;
    SpendPeriods periods;  // the day and month it counts
    Clock::time_point at{};
    bool have = false;
    bool refreshing = false;
    // This replica's charges since `usage` was read (the fallback's part).
    double usd_since = 0;
    double tokens_since = 0;
    // `usage` was read once (`at` set; kept when `have` is cleared).
    bool known() const { return at != Clock::time_point{}; }
    // The view as of periods `p`: this replica's charges since it was read
    // added, a day or month that has turned since starting from zero.
    KeyUsage now(const SpendPeriods& p) const {
      KeyUsage u = usage;
      const bool month = periods.month == p.month, day = month && periods.day == p.day;
      if (!month) u.month_usd = 0;
      if (!day) u.day_usd = 0;
      u.day_usd += usd_since;
      u.month_usd += usd_since;
      u.token_level -= tokens_since;
      return u;
    }
  };
  mutable std::mutex mu;
  std::unordered_map<std::string, Lease> leases;      // by key name
  std::map<std::string, std::set<std::string>> held;  // deployment -> slot ids
  std::uint64_t next_slot = 0;                        // mu
  std::unordered_map<std::string, UsageView> usage;   // by key name; mu
  // Charges made while Redis was unreachable, sent when it is back.
  std::map<std::string, std::pair<config::GatewayKey, KeyStore::Charge>> unsent;  // mu

  std::string bucket_key(const std::string& key) const { return prefix + ":rate:req:" + key; }
  std::string health_key() const { return prefix + ":health"; }
  std::string affinity_key(std::uint64_t hash) const {
    char hex[17];
    std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(hash));
    return prefix + ":affinity:" + hex;
  }

  // The usage script for `key`, charging `used` (nothing: a read).
  std::vector<std::string> usage_command(const config::GatewayKey& key, const SpendPeriods& p,
                                         KeyStore::Charge used) const {
    const double cap = key.tokens_per_minute.value_or(0);
    const bool budget = key.budget_usd_per_day || key.budget_usd_per_month;
    constexpr std::int64_t kDayMs = 86'400'000;
    return {"EVAL",
            kUsageScript,
            "3",
            prefix + ":rate:tok:" + key.name,
            prefix + ":spend:" + key.name + ":d:" + std::to_string(p.day),
            prefix + ":spend:" + key.name + ":m:" + std::to_string(p.month),
            num(cap),
            num(cap / 60'000.0),
            std::to_string(cap > 0 ? std::max<std::int64_t>(0, used.tokens) : 0),
            num(std::max(0.0, used.usd)),
            budget ? "1" : "0",
            std::to_string(std::int64_t{p.day_left_s} * 1000 + kDayMs),
            std::to_string(std::int64_t{p.month_left_s} * 1000 + kDayMs)};
  }

  // The usage script's answer into the key's view (mu not held).
  std::optional<KeyUsage> on_usage(const std::string& key, const SpendPeriods& p,
                                   const RedisReply& r) {
    const auto u = parse_usage(r);
    std::lock_guard lock(mu);
    UsageView& v = usage[key];
    v.refreshing = false;
    if (!u) {
      if (r.value && !r.ok()) log_line(LogLevel::kWarn, "shared state: key usage: " + r.what());
      return std::nullopt;
    }
    v.usage = *u;
    v.periods = p;
    v.at = Clock::now();
    v.have = true;
    v.usd_since = v.tokens_since = 0;
    return u;
  }

  // A charge's answer: when it took the key over a limit, the other
  // replicas hear at once instead of at their next refresh.
  void on_charged(const config::GatewayKey& key, const SpendPeriods& p, const RedisReply& r) {
    const auto u = on_usage(key.name, p, r);
    if (u && usage_refusal(key, *u, p) && cmd->up()) {
      call(SharedOp::kPublish, {"PUBLISH", channel, usage_message(replica, key.name)}, {});
    }
  }

  // Another replica's charge took `key` over a limit: decide on a fresh view.
  void on_usage_news(const UsageNews& n) {
    if (n.replica == replica) return;
    std::lock_guard lock(mu);
    if (auto it = usage.find(std::string(n.key)); it != usage.end()) it->second.have = false;
  }

  // Cooldowns and ejections another replica told of (or stored).
  void apply(const HealthNews& n) {
    if (n.replica == replica) return;
    if (n.event == HealthEvent::kEjection && !share_ejections) return;
    if (hooks.on_health) hooks.on_health(n.event, std::string(n.deployment), n.after);
    if (hooks.metrics) hooks.metrics->on_shared_event_applied();
  }

  // The running ones, once per (re)subscription: what was published while
  // this replica was not listening. If the command connection is not up
  // when the subscription is, when it comes up (shared-state thread only).
  bool health_unread = false;
  void load_health() {
    if (!cmd->up()) return;
    health_unread = false;
    call(SharedOp::kHealthRead, {"EVAL", kHealthReadScript, "1", health_key()},
         [this](RedisReply r) {
           if (!r.ok() || r.value->type != resp::Value::Type::kArray) return;
           const auto& e = r.value->elements;
           for (std::size_t k = 0; k + 1 < e.size(); k += 2) {
             if (auto n = parse_stored_health(e[k].str, e[k + 1].str)) apply(*n);
           }
         });
  }

  // Charges held while Redis was unreachable.
  void send_unsent() {
    std::map<std::string, std::pair<config::GatewayKey, KeyStore::Charge>> out;
    {
      std::lock_guard lock(mu);
      out.swap(unsent);
    }
    const SpendPeriods p = SpendPeriods::at(std::chrono::system_clock::now());
    for (auto& [name, kc] : out) {
      call(SharedOp::kUsageCharge, usage_command(kc.first, p, kc.second),
           [this, key = kc.first, p](RedisReply r) { on_charged(key, p, r); });
    }
  }
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
  i.share_ejections = cfg.share_ejections;
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
  Impl* ip = impl_.get();
  i.cmd =
      RedisConnection::create(i.ioc, o, {}, [where, open, m, ip](bool up, const std::string& why) {
        if (m) m->set_shared_up(up);
        if (up) {
          log_line(LogLevel::kInfo, "shared state: connected to " + where);
          ip->send_unsent();
          if (ip->health_unread) ip->load_health();
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
  i.sub = RedisConnection::create(
      i.ioc, o, {i.channel},
      [where, ip](bool up, const std::string& why) {
        if (up) {
          log_line(LogLevel::kInfo,
                   "shared state: subscribed to cooldowns and ejections at " + where);
          ip->health_unread = true;
          ip->load_health();  // what was told while this replica was not listening
        } else if (why != kRedisStopped) {
          log_line(LogLevel::kWarn, "shared state: no subscription at " + where + " (" + why +
                                        "); other replicas' cooldowns and ejections are not "
                                        "heard until it is back");
        }
      },
      [ip](const std::string&, const std::string& message) {
        if (auto n = parse_health_message(message)) {
          ip->apply(*n);
        } else if (auto u = parse_usage_message(message)) {
          ip->on_usage_news(*u);
        }
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

net::awaitable<std::vector<SharedLimits::AffinityEntry>> SharedLimits::find_affinity(
    std::vector<std::uint64_t> hashes) {
  Impl& i = *impl_;
  std::vector<AffinityEntry> found;
  if (hashes.empty() || i.unavailable(SharedOp::kAffinityRead)) co_return found;
  std::vector<std::string> args{"MGET"};
  for (std::uint64_t h : hashes) args.push_back(i.affinity_key(h));
  const RedisReply r = co_await i.ask(SharedOp::kAffinityRead, std::move(args));
  if (!r.ok() || r.value->type != resp::Value::Type::kArray) co_return found;
  const auto& values = r.value->elements;
  for (std::size_t k = 0; k < values.size() && k < hashes.size(); ++k) {
    if (values[k].type != resp::Value::Type::kBulk) continue;
    // "<deployment hash, hex> <bytes> <media>"
    AffinityEntry e{hashes[k]};
    unsigned long long deployment = 0, bytes = 0;
    unsigned media = 0;
    if (std::sscanf(values[k].str.c_str(), "%llx %llu %u", &deployment, &bytes, &media) != 3 ||
        deployment == 0) {
      continue;
    }
    e.deployment = deployment;
    e.bytes = static_cast<std::size_t>(bytes);
    e.media = media;
    found.push_back(e);
  }
  co_return found;
}

void SharedLimits::remember_affinity(const std::vector<AffinityEntry>& entries,
                                     std::chrono::milliseconds ttl) {
  Impl& i = *impl_;
  if (entries.empty() || ttl.count() <= 0 || !i.cmd->up()) return;
  std::vector<std::string> args{"EVAL", kAffinityWriteScript, std::to_string(entries.size())};
  for (const auto& e : entries) args.push_back(i.affinity_key(e.hash));
  for (const auto& e : entries) {
    char value[64];
    std::snprintf(value, sizeof value, "%llx %llu %u",
                  static_cast<unsigned long long>(e.deployment),
                  static_cast<unsigned long long>(e.bytes), static_cast<unsigned>(e.media));
    args.emplace_back(value);
  }
  args.push_back(std::to_string(ttl.count()));
  i.call(SharedOp::kAffinityWrite, std::move(args), {});
}

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

void SharedLimits::publish(HealthEvent event, const std::string& deployment,
                           std::chrono::milliseconds after) {
  Impl& i = *impl_;
  if (after <= std::chrono::milliseconds::zero()) return;
  if (event == HealthEvent::kEjection && !cfg_.share_ejections) return;
  if (i.unavailable(SharedOp::kPublish)) return;
  i.call(SharedOp::kPublish,
         {"EVAL", kHealthPublishScript, "1", i.health_key(),
          std::string(event_name(event)) + " " + deployment, std::to_string(after.count()),
          i.replica, i.channel, health_message(event, i.replica, after, deployment)},
         {});
}

net::awaitable<SharedLimits::UsageDecision> SharedLimits::check_usage(
    const config::GatewayKey& key) {
  Impl& i = *impl_;
  if (!key.has_usage_limits()) co_return UsageDecision{Verdict::kAllowed, std::nullopt};
  const SpendPeriods p = SpendPeriods::at(std::chrono::system_clock::now());
  const auto fresh_for = std::chrono::milliseconds(static_cast<std::int64_t>(i.lease_window_ms));
  // A view older than this is not decided on: Redis is asked (or, if it
  // cannot be, the fallback decides).
  const auto usable_for = std::max<Clock::duration>(10 * fresh_for, std::chrono::seconds(1));
  const auto decide = [&](const KeyUsage& u) {
    auto no = usage_refusal(key, u, p);
    return UsageDecision{no ? Verdict::kLimited : Verdict::kAllowed, std::move(no)};
  };
  {
    std::unique_lock lock(i.mu);
    Impl::UsageView& v = i.usage[key.name];
    const auto age = Clock::now() - v.at;
    if (v.have && v.periods.day == p.day && v.periods.month == p.month && age < usable_for) {
      // The view, and what this replica has charged since it was read.
      const KeyUsage u = v.now(p);
      const bool refresh = age >= fresh_for && !v.refreshing && i.cmd->up();
      if (refresh) v.refreshing = true;
      lock.unlock();
      if (refresh) {
        i.call(SharedOp::kUsageRead, i.usage_command(key, p, {}),
               [ip = impl_.get(), name = key.name, p](RedisReply r) { ip->on_usage(name, p, r); });
      }
      co_return decide(u);
    }
  }
  if (i.unavailable(SharedOp::kUsageRead)) co_return UsageDecision{};
  RedisReply r = co_await i.ask(SharedOp::kUsageRead, i.usage_command(key, p, {}));
  const auto u = i.on_usage(key.name, p, r);
  if (!u) co_return UsageDecision{};
  co_return decide(*u);
}

std::optional<ApiError> SharedLimits::budget_refusal_without_redis(
    const config::GatewayKey& key) const {
  if (!key.budget_usd_per_day && !key.budget_usd_per_month) return std::nullopt;
  const Impl& i = *impl_;
  const SpendPeriods p = SpendPeriods::at(std::chrono::system_clock::now());
  KeyUsage u;
  {
    std::lock_guard lock(i.mu);
    auto it = i.usage.find(key.name);
    if (it == i.usage.end() || !it->second.known()) return std::nullopt;
    u = it->second.now(p);
  }
  u.token_level = 1;  // the token rate is this replica's own to decide (KeyStore)
  return usage_refusal(key, u, p);
}

void SharedLimits::charge_usage(const config::GatewayKey& key, KeyStore::Charge used) {
  Impl& i = *impl_;
  if (!key.has_usage_limits() || (used.tokens <= 0 && !(used.usd > 0))) return;
  {
    std::lock_guard lock(i.mu);
    Impl::UsageView& v = i.usage[key.name];
    v.usd_since += used.usd;
    v.tokens_since += static_cast<double>(used.tokens);
  }
  if (i.unavailable(SharedOp::kUsageCharge)) {
    std::lock_guard lock(i.mu);
    auto& [k, sum] = i.unsent[key.name];
    k = key;
    sum.tokens += used.tokens;
    sum.usd += used.usd;
    return;
  }
  const SpendPeriods p = SpendPeriods::at(std::chrono::system_clock::now());
  i.call(SharedOp::kUsageCharge, i.usage_command(key, p, used),
         [ip = impl_.get(), key, p](RedisReply r) { ip->on_charged(key, p, r); });
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
  const auto refused = [&](ApiError e) {
    metrics.on_auth_rejected(rejection_of(e));
    return std::optional<ApiError>(std::move(e));
  };
  if (key.has_usage_limits()) {
    SharedLimits::UsageDecision d = co_await shared.check_usage(key);
    if (d.verdict == SharedLimits::Verdict::kLimited) co_return refused(std::move(*d.refusal));
    if (d.verdict == SharedLimits::Verdict::kUnavailable) {
      metrics.on_shared_fallback(SharedOp::kUsageRead, shared.fail_open());
      if (!shared.fail_open()) co_return shared_state_unavailable();
      // Budgets: the fleet's spend as last known plus this replica's since;
      // then this replica's own limits (its token rate, and its budgets when
      // it never knew the fleet's).
      if (auto spent = shared.budget_refusal_without_redis(key))
        co_return refused(std::move(*spent));
      if (auto local = keys.check_local_usage(key)) co_return refused(std::move(*local));
    }
  }
  if (!key.requests_per_minute) co_return std::nullopt;
  const SharedLimits::RateDecision d =
      co_await shared.take_request(key.name, *key.requests_per_minute);
  switch (d.verdict) {
    case SharedLimits::Verdict::kAllowed:
      co_return std::nullopt;
    case SharedLimits::Verdict::kLimited:
      co_return refused(KeyStore::requests_limited(key, d.retry_after_s));
    case SharedLimits::Verdict::kUnavailable:
      break;
  }
  metrics.on_shared_fallback(SharedOp::kRateLease, shared.fail_open());
  if (!shared.fail_open()) co_return shared_state_unavailable();
  if (auto local = keys.take_local_request(key)) co_return refused(std::move(*local));
  co_return std::nullopt;
}

void charge_key(SharedLimits* shared, KeyStore& keys, const config::GatewayKey& key,
                KeyStore::Charge used) {
  keys.charge(key, used);
  if (shared) shared->charge_usage(key, used);
}

}  // namespace llmgate::gateway
