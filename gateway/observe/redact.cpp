#include "gateway/observe/redact.h"

#include <algorithm>
#include <array>

namespace llmgate::gateway {
namespace {

// Characters a key or token is made of (masked keys add '*' and '.').
bool token_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
         c == '_' || c == '*' || c == '.';
}

bool is_letter(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
bool is_digit(char c) { return c >= '0' && c <= '9'; }

char lower(char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; }

bool starts_with_icase(std::string_view s, std::string_view prefix) {
  if (s.size() < prefix.size()) return false;
  for (std::size_t i = 0; i < prefix.size(); ++i) {
    if (lower(s[i]) != lower(prefix[i])) return false;
  }
  return true;
}

// Vendor key prefixes (case as the vendors write them; matched exactly).
constexpr std::array<std::string_view, 14> kKeyPrefixes = {
    "sk-", "sk_", "rk_",  "pk_",         "gsk_",   "xai-", "AIza",
    "hf_", "r8_", "ghp_", "github_pat_", "glpat-", "AKIA", "key-"};

// How long the token starting at `s[0]` is.
std::size_t token_length(std::string_view s) {
  std::size_t n = 0;
  while (n < s.size() && token_char(s[n])) ++n;
  // A sentence's full stop is not part of the token.
  while (n > 0 && s[n - 1] == '.') --n;
  return n;
}

bool looks_like_credential(std::string_view token) {
  for (auto prefix : kKeyPrefixes) {
    // At least a few characters after the prefix: "sk-" alone is a word.
    if (token.size() >= prefix.size() + 4 && token.substr(0, prefix.size()) == prefix) return true;
  }
  if (token.size() < 32) return false;
  const bool letters = std::any_of(token.begin(), token.end(), is_letter);
  const bool digits = std::any_of(token.begin(), token.end(), is_digit);
  return letters && digits;
}

// Replaces each occurrence of a known secret. A "secret" that is part of the
// marker itself cannot be removed by it (and is no provider's key).
std::string without_known(std::string text, std::span<const std::string> known) {
  for (const auto& secret : known) {
    if (secret.size() < 8 || kRedacted.find(secret) != std::string_view::npos) continue;
    for (std::size_t at = text.find(secret); at != std::string::npos;
         at = text.find(secret, at + kRedacted.size())) {
      text.replace(at, secret.size(), kRedacted);
    }
  }
  return text;
}

// One pass of the token rules.
std::string without_tokens(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  std::size_t i = 0;
  while (i < text.size()) {
    const std::string_view rest = text.substr(i);
    // "Bearer <token>": the token goes, whatever it looks like.
    if (starts_with_icase(rest, "bearer ") && (i == 0 || !token_char(text[i - 1]))) {
      std::size_t skip = 7;
      while (skip < rest.size() && rest[skip] == ' ') ++skip;
      const std::size_t n = token_length(rest.substr(skip));
      if (n > 0) {
        out.append(rest.substr(0, skip)).append(kRedacted);
        i += skip + n;
        continue;
      }
    }
    if (token_char(text[i]) && (i == 0 || !token_char(text[i - 1]))) {
      const std::size_t n = token_length(rest);
      if (n > 0 && looks_like_credential(rest.substr(0, n))) {
        out.append(kRedacted);
        i += n;
        continue;
      }
      // Not a credential: copy the whole token (a suffix of it is never one).
      const std::size_t copy = std::max<std::size_t>(n, 1);
      out.append(rest.substr(0, copy));
      i += copy;
      continue;
    }
    out.push_back(text[i]);
    ++i;
  }
  return out;
}

}  // namespace

std::string redact_secrets(std::string_view input, std::span<const std::string> known) {
  // Replacing text can make new text: a marker next to what follows, a
  // split token. Repeat until nothing changes, so that the result holds no
  // known secret and nothing that looks like a key, and redacting it again
  // changes nothing. Real text settles in one or two rounds; what does not
  // settle (a "secret" built around the marker) is dropped whole.
  std::string text(input);
  for (int round = 0; round < 4; ++round) {
    std::string next = without_known(without_tokens(text), known);
    if (next == text) return text;
    text = std::move(next);
  }
  return std::string(kRedacted);
}

}  // namespace llmgate::gateway
