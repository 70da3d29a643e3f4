// What replicas say to each other through Redis (shared_wire.cpp): the Lua
// scripts every limit runs atomically, the messages on <prefix>:events, the
// stored health entries, and the scripts' replies parsed. Shared by
// shared_limits.cpp; unit-tested on its own (tests/unit/gateway).
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "gateway/shared/redis_client.h"
#include "gateway/shared/shared_limits.h"

namespace llmgate::gateway::shared_wire {

// The scripts (Redis's clock; token buckets as hashes {l: level, t: ms}).
extern const std::string kBucketScript;         // take up to n tokens: {got, ms until one}
extern const std::string kSlotScript;           // a concurrency slot as a sorted-set lease
extern const std::string kAffinityWriteScript;  // prompt-cache affinity entries, with a TTL
extern const std::string kRenewScript;          // renew this replica's slot leases
extern const std::string kUsageScript;          // charge a key: tokens and spend
extern const std::string kHealthPublishScript;  // store and publish an ejection or cooldown
extern const std::string kHealthReadScript;     // the stored ones still running

// A number as Redis reads it back exactly ("%.17g").
std::string num(double v);
SharedResult classify(const RedisReply& r);
// This replica's id: 16 hex digits.
std::string random_id();

const char* event_name(HealthEvent e);
std::optional<HealthEvent> event_named(std::string_view name);

// "<event> <replica> <ms> <deployment>" on <prefix>:events.
std::string health_message(HealthEvent e, const std::string& replica,
                           std::chrono::milliseconds after, const std::string& deployment);
struct HealthNews {
  HealthEvent event = HealthEvent::kCooldown;
  std::string_view replica;
  std::chrono::milliseconds after{0};
  std::string_view deployment;
};
std::optional<HealthNews> parse_health_message(std::string_view line);
// A stored one: field "<event> <deployment>", value "<ms left> <replica>".
std::optional<HealthNews> parse_stored_health(std::string_view field, std::string_view value);

// "usage <replica> <key>": a charge took `key` over one of its limits;
// other replicas' views of it are out of date.
std::string usage_message(const std::string& replica, const std::string& key);
struct UsageNews {
  std::string_view replica;
  std::string_view key;
};
std::optional<UsageNews> parse_usage_message(std::string_view line);

// The bucket script's answer: {taken, ms until the next whole token}.
struct LeaseReply {
  std::int64_t got = 0;
  std::int64_t wait_ms = 0;
};
std::optional<LeaseReply> parse_lease(const RedisReply& r);
std::optional<double> parse_number(const resp::Value& v);
// The usage script's answer: {token level, ms until one, day USD, month USD}.
std::optional<KeyUsage> parse_usage(const RedisReply& r);

}  // namespace llmgate::gateway::shared_wire
