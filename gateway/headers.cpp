#include "gateway/headers.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <ctime>
#include <random>

namespace llmgate::gateway {
namespace {

bool iequals(std::string_view a, std::string_view b) {
  return a.size() == b.size() &&
         std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) ==
                  std::tolower(static_cast<unsigned char>(y));
         });
}

bool starts_with_icase(std::string_view s, std::string_view prefix) {
  return s.size() >= prefix.size() && iequals(s.substr(0, prefix.size()), prefix);
}

}  // namespace

bool is_hop_by_hop(std::string_view name, const std::vector<std::string>& tokens) {
  static constexpr std::array<std::string_view, 9> kHopByHop = {
      "connection", "keep-alive", "proxy-connection", "te", "trailer", "transfer-encoding",
      "upgrade", "proxy-authenticate", "proxy-authorization"};
  for (auto h : kHopByHop) {
    if (iequals(name, h)) return true;
  }
  for (const auto& t : tokens) {
    if (iequals(name, t)) return true;
  }
  return false;
}

std::vector<std::string> connection_tokens(std::string_view v) {
  std::vector<std::string> out;
  std::string cur;
  auto flush = [&] {
    while (!cur.empty() && cur.back() == ' ') cur.pop_back();
    if (!cur.empty()) out.push_back(cur);
    cur.clear();
  };
  for (char c : v) {
    if (c == ',') {
      flush();
    } else if (!(c == ' ' && cur.empty())) {
      cur.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
    }
  }
  flush();
  return out;
}

bool is_gateway_owned(std::string_view name) {
  static constexpr std::array<std::string_view, 13> kOwned = {
      "host",           "authorization",  "api-key",          "x-api-key",
      "content-length", "content-type",   "accept",           "accept-encoding",
      "expect",         "cookie",         "openai-organization", "openai-project",
      "user-agent"};
  for (auto h : kOwned) {
    if (iequals(name, h)) return true;
  }
  return starts_with_icase(name, "x-llmgate-");
}

bool is_valid_request_id(std::string_view id) {
  if (id.empty() || id.size() > 128) return false;
  return std::all_of(id.begin(), id.end(), [](char c) { return c > 0x20 && c < 0x7f; });
}

std::string new_request_id() {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  static constexpr char kHex[] = "0123456789abcdef";
  std::string id(32, '0');
  for (int half = 0; half < 2; ++half) {
    std::uint64_t v = rng();
    for (int i = 0; i < 16; ++i) id[half * 16 + i] = kHex[(v >> (i * 4)) & 0xf];
  }
  return id;
}

int parse_retry_after(std::string_view value, long long now_unix) {
  while (!value.empty() && value.front() == ' ') value.remove_prefix(1);
  while (!value.empty() && value.back() == ' ') value.remove_suffix(1);
  if (value.empty()) return -1;
  if (std::all_of(value.begin(), value.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    if (value.size() > 9) return 1'000'000'000;
    return std::stoi(std::string(value));
  }
  // IMF-fixdate: "Sun, 06 Nov 1994 08:49:37 GMT"
  std::tm tm{};
  std::string s(value);
  const char* end = strptime(s.c_str(), "%a, %d %b %Y %H:%M:%S GMT", &tm);
  if (end == nullptr || *end != '\0') return -1;
  long long at = timegm(&tm);
  return static_cast<int>(std::max(0LL, at - now_unix));
}

}  // namespace llmgate::gateway
