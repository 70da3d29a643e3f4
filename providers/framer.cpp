#include "providers/framer.h"

#include <cctype>

namespace llmgate::providers {

bool announces(std::string_view v, Framing f) {
  // A media type is case-insensitive (RFC 9110 §8.3.1); its parameters and
  // the whitespace around it do not matter here.
  v = v.substr(0, v.find(';'));
  while (!v.empty() && (v.front() == ' ' || v.front() == '\t')) v.remove_prefix(1);
  while (!v.empty() && (v.back() == ' ' || v.back() == '\t')) v.remove_suffix(1);
  const std::string_view want = content_type(f);
  if (v.size() != want.size()) return false;
  for (std::size_t i = 0; i < v.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(v[i])) != want[i]) return false;
  }
  return true;
}

}  // namespace llmgate::providers
