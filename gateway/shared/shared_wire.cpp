// What replicas say to each other through Redis (shared_wire.h).
#include "gateway/shared/shared_wire.h"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <random>

namespace llmgate::gateway::shared_wire {
namespace {

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

}  // namespace

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

namespace {

// The first word of `line` (removed from it), or nullopt if there is no
// non-empty word followed by a space and more text.
std::optional<std::string_view> take_word(std::string_view& line) {
  const auto sp = line.find(' ');
  if (sp == 0 || sp == std::string_view::npos || sp + 1 == line.size()) return std::nullopt;
  const std::string_view word = line.substr(0, sp);
  line.remove_prefix(sp + 1);
  return word;
}

}  // namespace

namespace {

std::optional<std::chrono::milliseconds> positive_ms(std::string_view text) {
  long long ms = 0;
  auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), ms);
  if (ec != std::errc() || p != text.data() + text.size() || ms <= 0) return std::nullopt;
  return std::chrono::milliseconds(ms);
}

}  // namespace

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

}  // namespace llmgate::gateway::shared_wire
