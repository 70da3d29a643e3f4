// OTEL_TRACES_SAMPLER's samplers (config::TraceSampler). Apart from the
// tracing section so that the fuzzer can build it alone.
#include <charconv>
#include <cstdio>
#include <string>

#include "config/ascii.h"
#include "config/config.h"

namespace llmgate::config {

std::optional<TraceSampler> parse_trace_sampler(std::string_view name, std::string_view arg,
                                                std::string* error) {
  TraceSampler s;
  constexpr std::string_view kParent = "parentbased_";
  name = trim_ows(name);
  s.parent_based = name.substr(0, kParent.size()) == kParent;
  if (s.parent_based) name.remove_prefix(kParent.size());
  if (name == "always_on") {
    s.root = TraceSampler::Root::kAlwaysOn;
  } else if (name == "always_off") {
    s.root = TraceSampler::Root::kAlwaysOff;
  } else if (name == "traceidratio") {
    s.root = TraceSampler::Root::kRatio;
    arg = trim_ows(arg);
    if (!arg.empty()) {
      double r = -1;
      auto [p, ec] = std::from_chars(arg.data(), arg.data() + arg.size(), r);
      if (ec != std::errc() || p != arg.data() + arg.size() || !(r >= 0 && r <= 1)) {
        if (error) {
          *error = "the sampler argument must be a ratio from 0 to 1, got \"" +
                   std::string(arg.substr(0, 40)) + "\"";
        }
        return std::nullopt;
      }
      s.ratio = r;
    }
  } else {
    if (error) {
      *error = "unknown sampler \"" + std::string(name.substr(0, 40)) +
               "\" (always_on, always_off, traceidratio, or one of them after parentbased_)";
    }
    return std::nullopt;
  }
  return s;
}

std::string to_string(const TraceSampler& s) {
  std::string out = s.parent_based ? "parentbased_" : "";
  switch (s.root) {
    case TraceSampler::Root::kAlwaysOn:
      return out + "always_on";
    case TraceSampler::Root::kAlwaysOff:
      return out + "always_off";
    case TraceSampler::Root::kRatio:
      break;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", s.ratio);
  return out + "traceidratio " + buf;
}

}  // namespace llmgate::config
