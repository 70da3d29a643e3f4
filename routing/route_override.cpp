#include "routing/route_override.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>

#include "config/ascii.h"
#include "config/closest_match.h"
#include "config/quoting.h"

namespace llmgate::routing {

bool RouteOverride::empty() const {
  return !policy && !max_ttft && !ttft_percentile && !max_output_price_per_1m && !min_tps &&
         !regions && !providers && !deny_providers && order.empty() && !allow_fallbacks && !hedge &&
         !max_attempts;
}

namespace {

using config::quote;
using nlohmann::json;

// A field's value, or the complete message for the 400.
template <typename T>
using Parsed = std::variant<T, std::string>;

std::string fail(const std::string& where, std::string_view message) {
  return where + ": " + std::string(message);
}

// ---- typed values, from text (headers) or JSON (body) -----------------------

std::string policy_names() {
  std::string names;
  for (config::Policy p : config::kAllPolicies) {
    if (!names.empty()) names += ", ";
    names += config::to_string(p);
  }
  return names;
}

Parsed<config::Policy> policy_named(std::string_view name, const std::string& where) {
  if (auto policy = config::parse_policy(name)) return *policy;
  return fail(where, "unknown policy " + quote(name) + " (expected one of " + policy_names() + ")");
}

Parsed<std::chrono::milliseconds> ttft_ms(std::optional<std::int64_t> value,
                                          const std::string& where) {
  if (!value || *value < 1) return fail(where, "must be a positive integer (milliseconds)");
  if (*value > kMaxOverrideTtftMs) {
    return fail(where, "must be at most " + std::to_string(kMaxOverrideTtftMs) + " (milliseconds)");
  }
  return std::chrono::milliseconds(*value);
}

Parsed<config::Percentile> percentile(std::optional<std::int64_t> value, const std::string& where) {
  if (value == 50) return config::Percentile::kP50;
  if (value == 95) return config::Percentile::kP95;
  if (value == 99) return config::Percentile::kP99;
  return fail(where, R"(must be "p50", "p95" or "p99")");
}

Parsed<double> non_negative(std::optional<double> value, const std::string& where,
                            std::string_view unit) {
  if (!value || !std::isfinite(*value) || *value < 0) {
    return fail(where, "must be a number >= 0 (" + std::string(unit) + ")");
  }
  return *value;
}

Parsed<unsigned> attempts(std::optional<std::int64_t> value, const std::string& where) {
  if (!value || *value < 1 || *value > kMaxOverrideAttempts) {
    return fail(where, "must be an integer from 1 to " + std::to_string(kMaxOverrideAttempts));
  }
  return static_cast<unsigned>(*value);
}

bool is_name(std::string_view text) {
  return !text.empty() && text.size() <= kMaxOverrideNameChars;
}

// Text: digits only (no sign, no spaces), else nullopt. Too many digits for
// an int64 saturate, so they read as "too large", not as malformed.
std::optional<std::int64_t> integer_text(std::string_view text) {
  if (text.empty() ||
      !std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    return std::nullopt;
  }
  std::int64_t value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec == std::errc::result_out_of_range) return std::numeric_limits<std::int64_t>::max();
  return value;
}

std::optional<double> number_text(std::string_view text) {
  double value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return value;
}

std::optional<std::int64_t> integer_json(const json& v) {
  if (v.is_number_unsigned()) {
    constexpr auto kMax = static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max());
    return static_cast<std::int64_t>(std::min(v.get<std::uint64_t>(), kMax));
  }
  if (v.is_number_integer()) return v.get<std::int64_t>();
  return std::nullopt;
}

std::optional<double> number_json(const json& v) {
  if (!v.is_number()) return std::nullopt;
  return v.get<double>();
}

Parsed<bool> boolean_text(std::string_view text, const std::string& where) {
  const std::string lower = config::ascii_lowercase(text);
  if (lower == "true") return true;
  if (lower == "false") return false;
  return fail(where, "must be true or false");
}

Parsed<std::vector<std::string>> names_json(const json& v, const std::string& where) {
  if (!v.is_array() || v.empty() || v.size() > kMaxOverrideNames) {
    return fail(where, "must be an array of 1 to " + std::to_string(kMaxOverrideNames) + " names");
  }
  std::vector<std::string> names;
  for (std::size_t i = 0; i < v.size(); ++i) {
    if (!v[i].is_string() || !is_name(v[i].get_ref<const std::string&>())) {
      return fail(where + "[" + std::to_string(i) + "]", "must be a non-empty string of at most " +
                                                             std::to_string(kMaxOverrideNameChars) +
                                                             " characters");
    }
    names.push_back(v[i].get<std::string>());
  }
  return names;
}

Parsed<std::vector<std::string>> names_text(std::string_view text, const std::string& where) {
  std::vector<std::string> names;
  while (true) {
    const auto comma = text.find(',');
    const std::string_view name = config::trim_whitespace(text.substr(0, comma));
    if (!is_name(name) || names.size() == kMaxOverrideNames) {
      return fail(where, "must be a comma-separated list of names");
    }
    names.emplace_back(name);
    if (comma == std::string_view::npos) return names;
    text.remove_prefix(comma + 1);
  }
}

// ---- the fields -------------------------------------------------------------

// A field reads its body value or its header text into the override and
// returns the message of a problem, if any.
struct Field {
  const char* key;
  const char* header;
  std::optional<std::string> (*from_json)(const json&, const std::string& where, RouteOverride&);
  std::optional<std::string> (*from_text)(std::string_view, const std::string& where,
                                          RouteOverride&);
};

template <typename T, typename U>
std::optional<std::string> store(Parsed<T> parsed, U& out) {
  if (auto* message = std::get_if<std::string>(&parsed)) return std::move(*message);
  out = std::move(std::get<T>(parsed));
  return std::nullopt;
}

// A list-of-names field (regions, providers, ...): the same parsing for every one.
template <auto Member>
constexpr Field names_field(const char* key, const char* header) {
  return Field{key, header,
               [](const json& v, const std::string& w, RouteOverride& o) {
                 return store(names_json(v, w), o.*Member);
               },
               [](std::string_view t, const std::string& w, RouteOverride& o) {
                 return store(names_text(t, w), o.*Member);
               }};
}

const Field kFields[] = {
    {"policy", "x-llmgate-policy",
     [](const json& v, const std::string& w, RouteOverride& o) {
       if (!v.is_string()) return std::optional(fail(w, "must be one of " + policy_names()));
       return store(policy_named(v.get_ref<const std::string&>(), w), o.policy);
     },
     [](std::string_view t, const std::string& w, RouteOverride& o) {
       return store(policy_named(t, w), o.policy);
     }},
    {"max_ttft_ms", "x-llmgate-max-ttft-ms",
     [](const json& v, const std::string& w, RouteOverride& o) {
       return store(ttft_ms(integer_json(v), w), o.max_ttft);
     },
     [](std::string_view t, const std::string& w, RouteOverride& o) {
       return store(ttft_ms(integer_text(t), w), o.max_ttft);
     }},
    {"ttft_percentile", "x-llmgate-ttft-percentile",
     [](const json& v, const std::string& w, RouteOverride& o) {
       std::optional<std::int64_t> n = integer_json(v);
       if (v.is_string()) {
         const auto& s = v.get_ref<const std::string&>();
         if (s.size() == 3 && s[0] == 'p') n = integer_text(std::string_view(s).substr(1));
       }
       return store(percentile(n, w), o.ttft_percentile);
     },
     [](std::string_view t, const std::string& w, RouteOverride& o) {
       const std::string lower = config::ascii_lowercase(t);
       std::string_view digits = lower;
       if (digits.size() == 3 && digits[0] == 'p') digits.remove_prefix(1);
       return store(percentile(digits.size() == 2 ? integer_text(digits) : std::nullopt, w),
                    o.ttft_percentile);
     }},
    {"max_output_price_per_1m", "x-llmgate-max-price",
     [](const json& v, const std::string& w, RouteOverride& o) {
       return store(non_negative(number_json(v), w, "USD per 1M output tokens"),
                    o.max_output_price_per_1m);
     },
     [](std::string_view t, const std::string& w, RouteOverride& o) {
       return store(non_negative(number_text(t), w, "USD per 1M output tokens"),
                    o.max_output_price_per_1m);
     }},
    {"min_tps", "x-llmgate-min-tps",
     [](const json& v, const std::string& w, RouteOverride& o) {
       return store(non_negative(number_json(v), w, "tokens per second"), o.min_tps);
     },
     [](std::string_view t, const std::string& w, RouteOverride& o) {
       return store(non_negative(number_text(t), w, "tokens per second"), o.min_tps);
     }},
    names_field<&RouteOverride::regions>("regions", "x-llmgate-regions"),
    names_field<&RouteOverride::providers>("providers", "x-llmgate-providers"),
    names_field<&RouteOverride::deny_providers>("deny_providers", "x-llmgate-deny-providers"),
    names_field<&RouteOverride::order>("order", "x-llmgate-order"),
    {"allow_fallbacks", "x-llmgate-allow-fallbacks",
     [](const json& v, const std::string& w, RouteOverride& o) {
       if (!v.is_boolean()) return std::optional<std::string>(fail(w, "must be true or false"));
       o.allow_fallbacks = v.get<bool>();
       return std::optional<std::string>();
     },
     [](std::string_view t, const std::string& w, RouteOverride& o) {
       return store(boolean_text(t, w), o.allow_fallbacks);
     }},
    {"hedge", "x-llmgate-hedge",
     [](const json& v, const std::string& w, RouteOverride& o) {
       if (!v.is_boolean()) return std::optional<std::string>(fail(w, "must be true or false"));
       o.hedge = v.get<bool>();
       return std::optional<std::string>();
     },
     [](std::string_view t, const std::string& w, RouteOverride& o) {
       return store(boolean_text(t, w), o.hedge);
     }},
    {"max_attempts", "x-llmgate-max-attempts",
     [](const json& v, const std::string& w, RouteOverride& o) {
       return store(attempts(integer_json(v), w), o.max_attempts);
     },
     [](std::string_view t, const std::string& w, RouteOverride& o) {
       return store(attempts(integer_text(t), w), o.max_attempts);
     }},
};

std::optional<std::string> unknown_key(const json& route) {
  std::vector<std::string> known;
  for (const Field& f : kFields) known.emplace_back(f.key);
  for (const auto& [key, value] : route.items()) {
    if (std::find(known.begin(), known.end(), key) != known.end()) continue;
    std::string message = "route: unknown key " + quote(key);
    if (auto hint = config::closest_match(key, known)) {
      message += " (did you mean " + quote(*hint) + "?)";
    }
    return message;
  }
  return std::nullopt;
}

// ---- check_override ---------------------------------------------------------

std::string at(std::string_view field, std::size_t i) {
  return "route." + std::string(field) + "[" + std::to_string(i) + "]";
}

std::string with_hint(std::string message, std::string_view name,
                      const std::vector<std::string>& known) {
  if (auto hint = config::closest_match(name, known)) {
    message += " (did you mean " + quote(*hint) + "?)";
  }
  return message;
}

bool contains(const std::vector<std::string>& names, std::string_view name) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

std::string joined(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& name : names) out += (out.empty() ? "" : ", ") + quote(name);
  return out;
}

}  // namespace

std::variant<RouteOverride, std::string> parse_route_override(const json& route,
                                                              const HeaderLookup& headers) {
  RouteOverride o;
  if (!route.is_null()) {
    if (!route.is_object()) return std::string("route: must be an object");
    if (auto message = unknown_key(route)) return *message;
    for (const Field& f : kFields) {
      auto it = route.find(f.key);
      if (it == route.end()) continue;
      if (auto message = f.from_json(*it, "route." + std::string(f.key), o)) return *message;
    }
  }
  if (headers) {
    for (const Field& f : kFields) {
      std::optional<std::string> value = headers(f.header);
      if (!value) continue;
      if (auto message =
              f.from_text(config::trim_whitespace(*value), "header " + std::string(f.header), o)) {
        return *message;
      }
    }
  }
  return o;
}

namespace {

// The stricter of the configured TTFT limit and the request's (the same
// percentile: the lower limit; a higher percentile with a limit no higher:
// the request's). When neither is stricter on both counts, both hold.
void narrow_ttft(config::Constraints& c, const RouteOverride& o) {
  const auto rank = [](config::Percentile p) { return static_cast<int>(p); };
  if (!o.max_ttft) {
    // A percentile alone tightens the configured limit, never loosens it.
    if (o.ttft_percentile && c.max_ttft && rank(*o.ttft_percentile) > rank(c.max_ttft_percentile)) {
      c.max_ttft_percentile = *o.ttft_percentile;
    }
    return;
  }
  const config::Percentile q = o.ttft_percentile.value_or(c.max_ttft_percentile);
  if (!c.max_ttft || (q == c.max_ttft_percentile) ||
      (rank(q) > rank(c.max_ttft_percentile) && *o.max_ttft <= *c.max_ttft)) {
    c.max_ttft =
        c.max_ttft && q == c.max_ttft_percentile ? std::min(*c.max_ttft, *o.max_ttft) : *o.max_ttft;
    c.max_ttft_percentile = q;
    return;
  }
  if (rank(q) < rank(c.max_ttft_percentile) && *o.max_ttft >= *c.max_ttft) return;
  c.extra_max_ttft = *o.max_ttft;
  c.extra_max_ttft_percentile = q;
}

template <typename T>
void take_lower(std::optional<T>& configured, const std::optional<T>& requested) {
  if (requested) configured = configured ? std::min(*configured, *requested) : *requested;
}

}  // namespace

config::RoutingPolicy apply_override(const config::RoutingPolicy& base, const RouteOverride& o,
                                     OverrideScope scope) {
  config::RoutingPolicy p = base;
  config::Constraints& c = p.constraints;
  if (o.policy) p.policy = *o.policy;
  if (o.regions) c.regions = *o.regions;  // inside the configured list: check_override
  if (o.providers) c.allow_providers = *o.providers;
  if (o.deny_providers) {
    // Added, not replaced: a request may shut providers out, never let them in.
    for (const auto& name : *o.deny_providers) {
      if (!contains(c.deny_providers, name)) c.deny_providers.push_back(name);
    }
  }
  if (scope == OverrideScope::kWiden) {
    if (o.max_ttft) c.max_ttft = *o.max_ttft;
    if (o.ttft_percentile) c.max_ttft_percentile = *o.ttft_percentile;
    if (o.max_output_price_per_1m) c.max_output_price_per_1m = *o.max_output_price_per_1m;
    if (o.min_tps) c.min_tps = *o.min_tps;
    if (o.allow_fallbacks) p.allow_fallbacks = *o.allow_fallbacks;
    if (o.hedge) {
      p.hedging.enabled = *o.hedge;
      if (!*o.hedge) p.hedging.on_stall = false;
    }
    if (o.max_attempts) p.max_attempts = *o.max_attempts;
    return p;
  }
  narrow_ttft(c, o);
  take_lower(c.max_output_price_per_1m, o.max_output_price_per_1m);
  if (o.min_tps) c.min_tps = std::max(c.min_tps.value_or(0.0), *o.min_tps);
  if (o.allow_fallbacks) p.allow_fallbacks = p.allow_fallbacks && *o.allow_fallbacks;
  if (o.hedge) {
    p.hedging.enabled = p.hedging.enabled && *o.hedge;
    p.hedging.on_stall = p.hedging.on_stall && *o.hedge;  // "no hedge" means none at all
  }
  if (o.max_attempts) p.max_attempts = std::min(p.max_attempts, *o.max_attempts);
  return p;
}

std::optional<std::string> check_override(const RouteOverride& o, const config::Model& model) {
  // Only names are checked (most requests name none: nothing to build).
  if (!o.providers && !o.deny_providers && o.order.empty() && !o.regions) return std::nullopt;
  std::vector<std::string> providers, ids;
  for (const auto& d : model.deployments) {
    if (!contains(providers, d.provider)) providers.push_back(d.provider);
    ids.push_back(d.id());
  }
  const std::string model_name = quote(model.name);
  const auto no_provider = [&](std::string_view field, std::size_t i, const std::string& name) {
    return with_hint(
        at(field, i) + ": model " + model_name + " has no deployment on provider " + quote(name),
        name, providers);
  };
  const config::Constraints& configured = model.routing.constraints;

  if (o.providers) {
    for (std::size_t i = 0; i < o.providers->size(); ++i) {
      const std::string& name = (*o.providers)[i];
      if (!contains(providers, name)) return no_provider("providers", i, name);
      if (!configured.allow_providers.empty() && !contains(configured.allow_providers, name)) {
        return at("providers", i) + ": model " + model_name + " only routes to providers " +
               joined(configured.allow_providers);
      }
      if (contains(configured.deny_providers, name)) {
        return at("providers", i) + ": provider " + quote(name) + " is denied for model " +
               model_name;
      }
    }
  }
  if (o.deny_providers) {
    for (std::size_t i = 0; i < o.deny_providers->size(); ++i) {
      const std::string& name = (*o.deny_providers)[i];
      if (!contains(providers, name)) return no_provider("deny_providers", i, name);
    }
  }
  for (std::size_t i = 0; i < o.order.size(); ++i) {
    const std::string& name = o.order[i];
    if (contains(providers, name) || contains(ids, name)) continue;
    // Provider names cannot contain '/' (they are metric labels): a slash means a deployment id.
    if (name.find('/') == std::string::npos) return no_provider("order", i, name);
    return with_hint(at("order", i) + ": model " + model_name + " has no deployment " + quote(name),
                     name, ids);
  }
  if (o.regions && !configured.regions.empty()) {
    for (std::size_t i = 0; i < o.regions->size(); ++i) {
      if (!contains(configured.regions, (*o.regions)[i])) {
        return at("regions", i) + ": model " + model_name + " only routes to regions " +
               joined(configured.regions);
      }
    }
  }
  return std::nullopt;
}

}  // namespace llmgate::routing
