// parse_size: "1048576", "512KiB", "4MiB", "1GiB", "64KB" -> bytes.
//
// A whole number, optionally followed (without a space) by a unit:
//   B, KiB, MiB, GiB (powers of 1024) or KB, MB, GB (powers of 1000).
// Units are case-sensitive so that "mb" (millibits?) is not silently guessed.
#include <charconv>
#include <cstdint>
#include <stdexcept>
#include <string_view>

#include "config/config.h"
#include "config/quoting.h"

namespace llmgate::config {
namespace {

struct Unit {
  std::string_view name;
  std::uint64_t factor;
};
constexpr Unit kUnits[] = {
    {"", 1},
    {"B", 1},
    {"KiB", 1ULL << 10},
    {"MiB", 1ULL << 20},
    {"GiB", 1ULL << 30},
    {"KB", 1'000},
    {"MB", 1'000'000},
    {"GB", 1'000'000'000},
};

[[noreturn]] void invalid(std::string_view text) {
  throw std::invalid_argument("invalid size " + quote(text) +
                              " (expected e.g. 1048576, 512KiB, 4MiB)");
}

}  // namespace

std::size_t parse_size(const std::string& text_in) {
  const std::string_view text = text_in;
  std::size_t digits = 0;
  while (digits < text.size() && text[digits] >= '0' && text[digits] <= '9') ++digits;
  if (digits == 0) invalid(text);

  const std::string_view unit_name = text.substr(digits);
  const Unit* unit = nullptr;
  for (const auto& candidate : kUnits) {
    if (candidate.name == unit_name) unit = &candidate;
  }
  if (unit == nullptr) invalid(text);

  std::uint64_t count = 0;
  std::uint64_t bytes = 0;
  const auto [ptr, ec] = std::from_chars(text.data(), text.data() + digits, count);
  if (ec != std::errc() || __builtin_mul_overflow(count, unit->factor, &bytes) ||
      bytes > SIZE_MAX) {
    throw std::invalid_argument("size " + quote(text) + " is too large");
  }
  return static_cast<std::size_t>(bytes);
}

}  // namespace llmgate::config
