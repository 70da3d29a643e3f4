#include "providers/framer.h"

#include <algorithm>

#include "config/ascii.h"

namespace llmgate::providers {

bool announces(std::string_view v, Framing f) {
  // A media type is case-insensitive (RFC 9110 §8.3.1); its parameters and
  // the whitespace around it do not matter here.
  v = config::trim_ows(v.substr(0, v.find(';')));
  const std::string_view want = content_type(f);
  return v.size() == want.size() &&
         std::equal(v.begin(), v.end(), want.begin(),
                    [](char c, char w) { return config::ascii_lower(c) == w; });
}

}  // namespace llmgate::providers
