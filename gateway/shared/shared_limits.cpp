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
#include "providers/tls_client.h"

namespace llmgate::gateway {
namespace {

namespace net = boost::asio;
using Clock = std::chrono::steady_clock;

// Shared by every script: Redis's clock, and token buckets kept as hashes
// {l: level, t: ms of the level}, refilled continuously up to `cap` at `rate`
// per ms (the level may be below zero: a debt, for tokens charged after the
// fact). A bucket expires once it would be full again.
constexpr const char* kLuaPrelude = R"lua(
local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local function bucket_level(key, cap, rate, now)
  local b = redis.call('HMGET', key, 'l', 't')
  local level = tonumber(b[1])
  local ts = tonumber(b[2])
  if level == nil or ts == nil then return cap end
  if now > ts then level = level + (now - ts) * rate end
  return math.min(cap, level)
end
local function bucket_store(key, level, cap, rate, now)
  redis.call('HSET', key, 'l', tostring(level), 't', tostring(now))
  redis.call('PEXPIRE', key, math.ceil((cap - level) / rate) + 60000)
end
local function ms_until_one(level, rate)
  if level >= 1 then return 0 end
  return math.ceil((1 - level) / rate)
end
)lua";

std::string script(const char* body) { return std::string(kLuaPrelude) + body; }

// A token bucket. KEYS[1] the bucket; ARGV: capacity, refill per
// millisecond, tokens wanted. Takes min(wanted, whole tokens available);
// returns {taken, ms until the next whole token}.
const std::string kBucketScript = script(R"lua(
local now = now_ms()
local cap = tonumber(ARGV[1])
local rate = tonumber(ARGV[2])
local level = bucket_level(KEYS[1], cap, rate, now)
local got = math.max(0, math.min(math.floor(level), tonumber(ARGV[3])))
level = level - got
bucket_store(KEYS[1], level, cap, rate, now)
return {got, ms_until_one(level, rate)}
)lua");

// A max_concurrent slot. KEYS[1] the deployment's sorted set of slots scored
// by expiry; ARGV: limit, slot id, ttl ms. Returns 1 if taken, else 0.
const std::string kSlotScript = script(R"lua(
local now = now_ms()
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
if redis.call('ZCARD', KEYS[1]) < tonumber(ARGV[1]) then
  redis.call('ZADD', KEYS[1], now + tonumber(ARGV[3]), ARGV[2])
  redis.call('PEXPIRE', KEYS[1], tonumber(ARGV[3]) * 2)
  return 1
end
return 0
)lua");

// Stores affinity entries. KEYS: the entries' keys; ARGV: their values, then
// the TTL in ms.
const std::string kAffinityWriteScript = script(R"lua(
local ttl = ARGV[#ARGV]
for i = 1, #KEYS do redis.call('SET', KEYS[i], ARGV[i], 'PX', ttl) end
return #KEYS
)lua");

// Pushes back the expiry of held slots that are still there. KEYS[1] the
// set; ARGV: ttl ms, slot ids... Returns how many were renewed.
const std::string kRenewScript = script(R"lua(
local now = now_ms()
local n = 0
for i = 2, #ARGV do
  if redis.call('ZSCORE', KEYS[1], ARGV[i]) then
    redis.call('ZADD', KEYS[1], now + tonumber(ARGV[1]), ARGV[i])
    n = n + 1
  end
end
if n > 0 then redis.call('PEXPIRE', KEYS[1], tonumber(ARGV[1]) * 2) end
return n
)lua");

// A key's token bucket and spend. KEYS[1] the token bucket (as above),
// KEYS[2] / KEYS[3] the spend of the day / month. ARGV: token capacity (0 =
// no token rate), refill per ms, tokens to charge, USD to charge, "1" if the
// key has a budget, day / month key ttl ms. Returns {token level, ms until
// one token, day USD, month USD} (numbers as strings: Lua would truncate).
const std::string kUsageScript = script(R"lua(
local level = 0
local wait = 0
local cap = tonumber(ARGV[1])
if cap > 0 then
  local now = now_ms()
  local rate = tonumber(ARGV[2])
  level = bucket_level(KEYS[1], cap, rate, now) - tonumber(ARGV[3])
  bucket_store(KEYS[1], level, cap, rate, now)
  wait = ms_until_one(level, rate)
end
local day = '0'
local month = '0'
if ARGV[5] == '1' then
  if tonumber(ARGV[4]) > 0 then
    day = redis.call('INCRBYFLOAT', KEYS[2], ARGV[4])
    month = redis.call('INCRBYFLOAT', KEYS[3], ARGV[4])
    redis.call('PEXPIRE', KEYS[2], ARGV[6])
    redis.call('PEXPIRE', KEYS[3], ARGV[7])
  else
    day = redis.call('GET', KEYS[2]) or '0'
    month = redis.call('GET', KEYS[3]) or '0'
  end
end
return {tostring(level), wait, day, month}
)lua");

// A cooldown or ejection, stored and published. KEYS[1] the hash of running
// ones (field "<kind> <deployment>", value "<until ms> <replica>"); ARGV:
// field, ms, replica, channel, message. Drops the ended ones.
const std::string kHealthPublishScript = script(R"lua(
local now = now_ms()
local untilms = now + tonumber(ARGV[2])
local cur = redis.call('HGET', KEYS[1], ARGV[1])
local curms = cur and tonumber(string.match(cur, '^(%d+)')) or 0
if untilms > curms then
  redis.call('HSET', KEYS[1], ARGV[1], string.format('%d %s', untilms, ARGV[3]))
end
local all = redis.call('HGETALL', KEYS[1])
local last = now
for i = 1, #all, 2 do
  local u = tonumber(string.match(all[i + 1], '^(%d+)'))
  if u == nil or u <= now then
    redis.call('HDEL', KEYS[1], all[i])
  elseif u > last then
    last = u
  end
end
if last > now then redis.call('PEXPIRE', KEYS[1], last - now) end
redis.call('PUBLISH', ARGV[4], ARGV[5])
return 1
)lua");

// The running cooldowns and ejections: {field, "<ms left> <replica>", ...}.
const std::string kHealthReadScript = script(R"lua(
local now = now_ms()
local all = redis.call('HGETALL', KEYS[1])
local out = {}
for i = 1, #all, 2 do
  local u, who = string.match(all[i + 1], '^(%d+) (.*)$')
  u = tonumber(u)
  if u ~= nil and u > now then
    out[#out + 1] = all[i]
    out[#out + 1] = string.format('%d %s', u - now, who)
  end
end
return out
)lua");

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

const char* event_name(HealthEvent e) { return e == HealthEvent::kCooldown ? "cooldown" : "eject"; }
std::optional<HealthEvent> event_named(std::string_view name) {
  if (name == "cooldown") return HealthEvent::kCooldown;
  if (name == "eject") return HealthEvent::kEjection;
  return std::nullopt;
}

// What travels on <prefix>:events: "<event> <replica> <ms> <deployment>".
std::string health_message(HealthEvent e, const std::string& replica,
                           std::chrono::milliseconds after, const std::string& deployment) {
  return std::string(event_name(e)) + " " + replica + " " + std::to_string(after.count()) + " " +
         deployment;
}

struct HealthNews {
  HealthEvent event = HealthEvent::kCooldown;
  std::string_view replica;
  std::chrono::milliseconds after{0};
  std::string_view deployment;
};

// The first word of `line` (removed from it), or nullopt if there is no
// non-empty word followed by a space and more text.
std::optional<std::string_view> take_word(std::string_view& line) {
  const auto sp = line.find(' ');
  if (sp == 0 || sp == std::string_view::npos || sp + 1 == line.size()) return std::nullopt;
  const std::string_view word = line.substr(0, sp);
  line.remove_prefix(sp + 1);
  return word;
}

std::optional<std::chrono::milliseconds> positive_ms(std::string_view text) {
  long long ms = 0;
  auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), ms);
  if (ec != std::errc() || p != text.data() + text.size() || ms <= 0) return std::nullopt;
  return std::chrono::milliseconds(ms);
}

std::optional<HealthNews> parse_health_message(std::string_view line) {
  // <event> <replica> <ms> <deployment>
  const auto event = take_word(line);
  const auto replica = event ? take_word(line) : std::nullopt;
  const auto ms = replica ? take_word(line) : std::nullopt;
  if (!ms) return std::nullopt;
  const auto e = event_named(*event);
  const auto after = positive_ms(*ms);
  if (!e || !after) return std::nullopt;
  return HealthNews{*e, *replica, *after, line};
}

// "usage <replica> <key>": a charge took `key` over one of its limits; other
// replicas' views of it are out of date.
std::string usage_message(const std::string& replica, const std::string& key) {
  return "usage " + replica + " " + key;
}
struct UsageNews {
  std::string_view replica;
  std::string_view key;
};
std::optional<UsageNews> parse_usage_message(std::string_view line) {
  const auto kind = take_word(line);
  const auto replica = kind && *kind == "usage" ? take_word(line) : std::nullopt;
  if (!replica) return std::nullopt;
  return UsageNews{*replica, line};
}

// A stored one: field "<event> <deployment>", value "<ms left> <replica>".
std::optional<HealthNews> parse_stored_health(std::string_view field, std::string_view value) {
  const auto event = take_word(field);
  const auto ms = take_word(value);
  if (!event || !ms) return std::nullopt;
  const auto e = event_named(*event);
  const auto after = positive_ms(*ms);
  if (!e || !after) return std::nullopt;
  return HealthNews{*e, value, *after, field};
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

std::optional<double> parse_number(const resp::Value& v) {
  if (v.type == resp::Value::Type::kInteger) return static_cast<double>(v.integer);
  if (v.type != resp::Value::Type::kBulk && v.type != resp::Value::Type::kSimple)
    return std::nullopt;
  double d = 0;
  auto [p, ec] = std::from_chars(v.str.data(), v.str.data() + v.str.size(), d);
  if (ec != std::errc() || p != v.str.data() + v.str.size() || !std::isfinite(d))
    return std::nullopt;
  return d;
}

// The usage script's answer: {token level, ms until one, day USD, month USD}.
std::optional<KeyUsage> parse_usage(const RedisReply& r) {
  if (!r.ok() || r.value->type != resp::Value::Type::kArray || r.value->elements.size() != 4)
    return std::nullopt;
  const auto& e = r.value->elements;
  const auto level = parse_number(e[0]);
  const auto wait = parse_number(e[1]);
  const auto day = parse_number(e[2]);
  const auto month = parse_number(e[3]);
  if (!level || !wait || !day || !month) return std::nullopt;
  KeyUsage u;
  u.token_level = *level;
  u.token_wait_s = static_cast<int>(std::ceil(std::max(0.0, *wait) / 1000.0));
  u.day_usd = *day;
  u.month_usd = *month;
  return u;
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
