// RESP2, the Redis serialization protocol: commands out (arrays of bulk
// strings) and replies in (simple strings, errors, integers, bulk strings,
// arrays, nulls). Only what a client needs; Beast-free, allocation-light,
// and total: any byte sequence parses to a value, "need more", or an error,
// never a crash (tests/fuzz/fuzz_resp.cpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace llmgate::gateway::resp {

struct Value {
  enum class Type { kSimple, kError, kInteger, kBulk, kNull, kArray };
  Type type = Type::kNull;
  std::string str;  // kSimple, kError, kBulk
  std::int64_t integer = 0;
  std::vector<Value> elements;  // kArray

  bool is_error() const { return type == Type::kError; }
  bool operator==(const Value&) const = default;
};

// Appends `args` as one command (an array of bulk strings) to `out`.
void append_command(std::string& out, std::span<const std::string> args);
void append_command(std::string& out, std::initializer_list<std::string_view> args);

// Appends the encoding of `v` (what a server would send); for tests and the fuzzer.
void append_value(std::string& out, const Value& v);

// Limits on what a reply may hold: a server that sends more is broken or not
// Redis, and the connection is dropped.
inline constexpr std::size_t kMaxBulk = 16 * 1024 * 1024;
inline constexpr std::size_t kMaxElements = 1 << 20;
inline constexpr int kMaxDepth = 8;

enum class Status { kValue, kNeedMore, kError };

// Parses one complete value from the front of `in`. On kValue, `consumed` is
// its length in bytes; on kError, `error` says what is wrong. kNeedMore: the
// value is not complete yet (call again with more bytes; nothing is kept
// between calls).
Status parse(std::string_view in, Value& out, std::size_t& consumed, std::string& error);

}  // namespace llmgate::gateway::resp
