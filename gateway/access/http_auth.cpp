#include "gateway/access/http_auth.h"

#include <cctype>

namespace llmgate::gateway {

std::string_view credentials(std::string_view authorization, std::string_view scheme) {
  if (authorization.size() <= scheme.size()) return {};
  for (std::size_t i = 0; i < scheme.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(authorization[i])) != scheme[i]) return {};
  }
  std::string_view key = authorization.substr(scheme.size());
  while (!key.empty() && key.front() == ' ') key.remove_prefix(1);
  while (!key.empty() && key.back() == ' ') key.remove_suffix(1);
  return key;
}

std::string_view bearer(std::string_view authorization) {
  return credentials(authorization, "bearer ");
}

std::optional<std::string> basic_password(std::string_view authorization) {
  std::string_view b64 = credentials(authorization, "basic ");
  if (b64.empty() || b64.size() > 1024) return std::nullopt;
  std::string out;
  unsigned bits = 0;
  int have = 0;
  std::size_t padding = 0;
  for (char c : b64) {
    int v;
    if (c >= 'A' && c <= 'Z')
      v = c - 'A';
    else if (c >= 'a' && c <= 'z')
      v = c - 'a' + 26;
    else if (c >= '0' && c <= '9')
      v = c - '0' + 52;
    else if (c == '+')
      v = 62;
    else if (c == '/')
      v = 63;
    else if (c == '=') {
      ++padding;
      continue;
    } else {
      return std::nullopt;
    }
    if (padding) return std::nullopt;  // data after padding
    bits = (bits << 6) | static_cast<unsigned>(v);
    have += 6;
    if (have >= 8) {
      have -= 8;
      out.push_back(static_cast<char>((bits >> have) & 0xff));
    }
  }
  if (padding > 2) return std::nullopt;
  auto colon = out.find(':');
  if (colon == std::string::npos) return std::nullopt;
  return out.substr(colon + 1);
}

}  // namespace llmgate::gateway
