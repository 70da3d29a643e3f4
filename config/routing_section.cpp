// routing: the router's tuning (docs/routing.md) and the RoutingPolicy every
// model starts from. models[].routing overrides that policy key by key, so
// the policy readers take the values to start from.
#include <charconv>
#include <string>
#include <string_view>
#include <vector>

#include "config/quoting.h"
#include "config/sections.h"

namespace llmgate::config {
namespace {

constexpr double kMaxExploration = 0.5;
constexpr double kMaxDeadlineFactor = 100;
constexpr double kMaxLoadFactor = 10;
constexpr std::int64_t kMaxMinTokensForTps = 100'000;
constexpr unsigned kMaxConsecutiveFailures = 1'000;
constexpr unsigned kMaxMinRequests = 1'000'000;
constexpr std::int64_t kMaxTypicalOutputTokens = 1'000'000;
constexpr unsigned kMaxAttempts = 10;

struct PercentileName {
  Percentile value;
  std::string_view name;
};
constexpr PercentileName kPercentiles[] = {{Percentile::kP50, "p50"},
                                           {Percentile::kP90, "p90"},
                                           {Percentile::kP95, "p95"},
                                           {Percentile::kP99, "p99"}};

// The shortest text that reads back as `value`: 0.5, 1, 100.
std::string format_number(double value) {
  char buffer[32];
  const auto result = std::to_chars(buffer, buffer + sizeof buffer, value);
  return std::string(buffer, result.ptr);
}

// In the largest unit that divides it: 5m, 10s, 250ms.
std::string format_duration(Duration duration) {
  const auto ms = duration.count();
  if (ms != 0 && ms % 3'600'000 == 0) return std::to_string(ms / 3'600'000) + "h";
  if (ms != 0 && ms % 60'000 == 0) return std::to_string(ms / 60'000) + "m";
  if (ms != 0 && ms % 1'000 == 0) return std::to_string(ms / 1'000) + "s";
  return std::to_string(ms) + "ms";
}

// " (did you mean "x"?)" when `name` is close to one of `names`, else the whole list.
std::string suggestion(std::string_view name, const std::vector<std::string>& names) {
  if (auto hint = closest_match(name, names)) return " (did you mean " + quote(*hint) + "?)";
  std::string list = " (expected one of: ";
  for (std::size_t i = 0; i < names.size(); ++i) list += (i ? ", " : "") + names[i];
  return list + ")";
}

// --- scalar readers -----------------------------------------------------------

enum class End { kClosed, kOpen };

// A reader for ConfigMap::read: a number in the interval from min to max;
// either end may be open ("must be at least 0 and less than 1, got 1").
auto number_in(double min, double max, End min_end = End::kClosed, End max_end = End::kClosed) {
  return [=](const ConfigNode& node) {
    const double value = node.number();
    const bool above = min_end == End::kOpen ? value > min : value >= min;
    const bool below = max_end == End::kOpen ? value < max : value <= max;
    if (!above || !below) {
      const std::string got = ", got " + escape_for_message(node.string());
      if (min_end == End::kClosed && max_end == End::kClosed) {
        node.fail("must be between " + format_number(min) + " and " + format_number(max) + got);
      }
      node.fail(std::string("must be ") + (min_end == End::kOpen ? "greater than " : "at least ") +
                format_number(min) + (max_end == End::kOpen ? " and less than " : " and at most ") +
                format_number(max) + got);
    }
    return value;
  };
}

Policy read_policy(const ConfigNode& node) {
  const std::string name = node.string();
  if (auto policy = parse_policy(name)) return *policy;
  std::vector<std::string> names;
  for (Policy policy : kAllPolicies) names.emplace_back(to_string(policy));
  node.fail("unknown policy " + quote(name) + suggestion(name, names));
}

// No did-you-mean: "p90" is one edit from both p50 and p99, and guessing
// either would be wrong.
Percentile read_percentile(const ConfigNode& node) {
  const std::string name = node.string();
  std::string names;
  for (const auto& percentile : kPercentiles) {
    if (percentile.name == name) return percentile.value;
    names += (names.empty() ? "" : ", ") + std::string(percentile.name);
  }
  node.fail("unknown percentile " + quote(name) + " (expected one of: " + names + ")");
}

// hedging.delay: a fixed duration, or a percentile name ("p95"): no fixed
// delay, wait for the candidate's live TTFT at that percentile.
void read_hedging_delay(const ConfigNode& node, Hedging& hedging) {
  const std::string text = node.string();
  if (!text.empty() && text[0] == 'p') {
    hedging.delay.reset();
    hedging.delay_percentile = read_percentile(node);
    return;
  }
  hedging.delay = node.duration();
}

std::vector<std::string> read_provider_list(const ConfigNode& node,
                                            const std::vector<Provider>& providers) {
  std::vector<std::string> names;
  for (const auto& item : node.items()) names.push_back(read_provider_ref(item, providers));
  return names;
}

std::vector<std::string> read_regions(const ConfigNode& node) {
  std::vector<std::string> regions;
  for (const auto& item : node.items()) {
    std::string region = item.string();
    if (region.empty()) item.fail("must not be empty");
    regions.push_back(std::move(region));
  }
  return regions;
}

// --- the policy: each reader starts from `base` and overrides what it names ---

Constraints read_constraints(const ConfigNode& node, const Constraints& base,
                             const std::vector<Provider>& providers) {
  Constraints constraints = base;
  const auto provider_list = [&](const ConfigNode& list) {
    return read_provider_list(list, providers);
  };
  node.read_map([&](ConfigMap& m) {
    m.read("max_output_price_per_1m", constraints.max_output_price_per_1m, read_non_negative);
    m.read("min_tps", constraints.min_tps, read_non_negative);
    m.read("max_ttft", constraints.max_ttft, &ConfigNode::duration);
    m.read("max_ttft_percentile", constraints.max_ttft_percentile, read_percentile);
    m.read("providers", constraints.allow_providers, provider_list);
    m.read("deny_providers", constraints.deny_providers, provider_list);
    m.read("regions", constraints.regions, read_regions);
  });
  return constraints;
}

BalancedWeights read_weights(const ConfigNode& node, const BalancedWeights& base) {
  BalancedWeights weights = base;
  node.read_map([&](ConfigMap& m) {
    m.read("ttft", weights.ttft, read_non_negative);
    m.read("tps", weights.tps, read_non_negative);
    m.read("price", weights.price, read_non_negative);
  });
  // Checked on the result: a model may zero one weight the defaults left non-zero.
  if (weights.ttft == 0 && weights.tps == 0 && weights.price == 0) {
    node.fail("ttft, tps and price must not all be zero");
  }
  return weights;
}

Hedging read_hedging(const ConfigNode& node, const Hedging& base) {
  Hedging hedging = base;
  node.read_map([&](ConfigMap& m) {
    m.read("enabled", hedging.enabled, &ConfigNode::boolean);
    if (auto delay = m.optional("delay")) read_hedging_delay(*delay, hedging);
    m.read("min_delay", hedging.min_delay, &ConfigNode::duration);
    m.read("max_extra_ratio", hedging.max_extra_ratio, number_in(0, 1));
    m.read("on_stall", hedging.on_stall, &ConfigNode::boolean);
  });
  return hedging;
}

// --- router tuning --------------------------------------------------------------

void read_priors(const ConfigNode& node, Routing& routing) {
  node.read_map([&](ConfigMap& m) {
    m.read("ttft", routing.ttft_prior, &ConfigNode::duration);
    m.read("tps", routing.tps_prior, read_tokens_per_second);
  });
}

void read_estimator(const ConfigNode& node, Routing& routing) {
  node.read_map([&](ConfigMap& m) {
    m.read("ttft_tau", routing.ttft_tau, &ConfigNode::duration);
    m.read("relax_tau", routing.relax_tau, &ConfigNode::duration);
    m.read("window", routing.window, &ConfigNode::duration);
    m.read("error_tau", routing.error_tau, &ConfigNode::duration);
    m.read("min_tokens_for_tps", routing.min_tokens_for_tps,
           integer_in<std::int64_t>(1, kMaxMinTokensForTps));
  });
}

Ejection read_ejection(const ConfigNode& node) {
  Ejection ejection;
  node.read_map([&](ConfigMap& m) {
    m.read("consecutive_failures", ejection.consecutive_failures,
           integer_in<unsigned>(1, kMaxConsecutiveFailures));
    m.read("error_rate", ejection.error_rate, number_in(0, 1, End::kOpen, End::kClosed));
    m.read("min_requests", ejection.min_requests, integer_in<unsigned>(1, kMaxMinRequests));
    const auto base_duration = m.optional("base_duration");
    if (base_duration) ejection.base_duration = base_duration->duration();
    const auto max_duration = m.optional("max_duration");
    if (max_duration) ejection.max_duration = max_duration->duration();
    m.read("jitter", ejection.jitter, number_in(0, 1, End::kClosed, End::kOpen));
    m.read("max_ejected_fraction", ejection.max_ejected_fraction, number_in(0, 1));
    m.read("probe_interval", ejection.probe_interval, &ConfigNode::duration_or_zero);

    if (ejection.max_duration < ejection.base_duration) {
      // Blame the key that was written: with both written, max_duration.
      if (max_duration) {
        max_duration->fail("must be at least base_duration (" +
                           format_duration(ejection.base_duration) + "), got " +
                           escape_for_message(max_duration->string()));
      }
      base_duration->fail("must be at most max_duration (" +
                          format_duration(ejection.max_duration) + "), got " +
                          escape_for_message(base_duration->string()));
    }
  });
  return ejection;
}

Affinity read_affinity(const ConfigNode& node) {
  Affinity affinity;
  node.read_map([&](ConfigMap& m) {
    m.read("ttl", affinity.ttl, &ConfigNode::duration_or_zero);  // 0s: off
    m.read("max_entries", affinity.max_entries, integer_in<std::size_t>(1, kMaxAffinityEntries));
  });
  return affinity;
}

RetryBudget read_retry_budget(const ConfigNode& node) {
  RetryBudget budget;
  node.read_map([&](ConfigMap& m) {
    m.read("ratio", budget.ratio, number_in(0, 1));
    m.read("min_per_second", budget.min_per_second, read_non_negative);
  });
  return budget;
}

}  // namespace

const char* to_string(Policy p) {
  switch (p) {
    case Policy::kLatency:
      return "latency";
    case Policy::kThroughput:
      return "throughput";
    case Policy::kE2e:
      return "e2e";
    case Policy::kCost:
      return "cost";
    case Policy::kBalanced:
      return "balanced";
    case Policy::kOrdered:
      return "ordered";
    case Policy::kRoundRobin:
      return "round_robin";
    case Policy::kRandom:
      return "random";
  }
  return "unknown";
}

std::optional<Policy> parse_policy(std::string_view name) {
  for (Policy policy : kAllPolicies) {
    if (name == to_string(policy)) return policy;
  }
  return std::nullopt;
}

RoutingPolicy read_routing_policy(const ConfigNode& node, const RoutingPolicy& base,
                                  const std::vector<Provider>& providers) {
  RoutingPolicy policy = base;
  node.read_map([&](ConfigMap& m) {
    m.read("policy", policy.policy, read_policy);
    m.read("typical_output_tokens", policy.typical_output_tokens,
           integer_in<std::int64_t>(1, kMaxTypicalOutputTokens));
    m.read("allow_fallbacks", policy.allow_fallbacks, &ConfigNode::boolean);
    m.read("max_attempts", policy.max_attempts, integer_in<unsigned>(1, kMaxAttempts));
    if (auto constraints = m.optional("constraints")) {
      policy.constraints = read_constraints(*constraints, base.constraints, providers);
    }
    if (auto weights = m.optional("weights")) policy.weights = read_weights(*weights, base.weights);
    if (auto hedging = m.optional("hedging")) policy.hedging = read_hedging(*hedging, base.hedging);
    if (auto guard = m.optional("commit_after")) {
      guard->read_map([&](ConfigMap& g) {
        g.read("tokens", policy.commit_after.tokens, integer_in<unsigned>(0, 1000));
        g.read("within", policy.commit_after.within, &ConfigNode::duration);
      });
    }
  });
  return policy;
}

Routing read_routing(const ConfigNode& node, const std::vector<Provider>& providers) {
  Routing routing;
  node.read_map([&](ConfigMap& m) {
    m.read("region", routing.region, &ConfigNode::string);
    m.read("exploration", routing.exploration, number_in(0, kMaxExploration));
    m.read("learning_budget", routing.learning_budget, number_in(0, 1));
    m.read("deadline_factor", routing.deadline_factor, number_in(1, kMaxDeadlineFactor));
    m.read("load_factor", routing.load_factor, number_in(0, kMaxLoadFactor));
    m.read("min_ttft_deadline", routing.min_ttft_deadline, &ConfigNode::duration);
    if (auto priors = m.optional("priors")) read_priors(*priors, routing);
    if (auto estimator = m.optional("estimator")) read_estimator(*estimator, routing);
    m.read("ejection", routing.ejection, read_ejection);
    m.read("retry_budget", routing.retry_budget, read_retry_budget);
    m.read("affinity", routing.affinity, read_affinity);
    if (auto defaults = m.optional("defaults")) {
      routing.defaults = read_routing_policy(*defaults, RoutingPolicy{}, providers);
    }
  });
  return routing;
}

}  // namespace llmgate::config
