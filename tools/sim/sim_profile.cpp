#include "tools/sim/sim_profile.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>
#include <stdexcept>

namespace llmgate::sim {
namespace {

using nlohmann::json;

[[noreturn]] void fail(std::string_view key, std::string_view what) {
  throw std::invalid_argument(std::string(key) + ": " + std::string(what));
}

double read_number(const json& v, std::string_view key) {
  if (!v.is_number()) fail(key, "must be a number");
  const double d = v.get<double>();
  if (!std::isfinite(d)) fail(key, "must be finite");
  return d;
}

double read_non_negative(const json& v, std::string_view key) {
  const double d = read_number(v, key);
  if (d < 0) fail(key, "must be >= 0");
  return d;
}

int read_int(const json& v, std::string_view key) {
  if (!v.is_number_integer()) fail(key, "must be an integer");
  const auto i = v.get<std::int64_t>();
  if (i < std::numeric_limits<int>::min() || i > std::numeric_limits<int>::max()) {
    fail(key, "is out of range");
  }
  return static_cast<int>(i);
}

bool read_bool(const json& v, std::string_view key) {
  if (!v.is_boolean()) fail(key, "must be true or false");
  return v.get<bool>();
}

Distribution::Kind read_kind(const json& v, std::string_view key) {
  if (!v.is_string()) fail(key, "must be one of \"fixed\", \"normal\", \"lognormal\"");
  const auto& s = v.get_ref<const std::string&>();
  if (s == "fixed") return Distribution::Kind::kFixed;
  if (s == "normal") return Distribution::Kind::kNormal;
  if (s == "lognormal") return Distribution::Kind::kLogNormal;
  fail(key, "must be one of \"fixed\", \"normal\", \"lognormal\", not \"" + s + "\"");
}

// A number is a fixed distribution; an object merges over `base`, so
// {"mean": 900} keeps the shape and spread of the current distribution.
Distribution read_distribution(const json& v, const std::string& key, Distribution base) {
  if (v.is_number()) return {Distribution::Kind::kFixed, read_non_negative(v, key), 0};
  if (!v.is_object()) fail(key, "must be a number or an object {dist, mean, stddev}");
  for (const auto& [k, field] : v.items()) {
    const std::string path = key + "." + k;
    if (k == "dist") {
      base.kind = read_kind(field, path);
    } else if (k == "mean") {
      base.mean = read_non_negative(field, path);
    } else if (k == "stddev") {
      base.stddev = read_non_negative(field, path);
    } else {
      fail(path, "unknown key \"" + k + "\"");
    }
  }
  return base;
}

json distribution_to_json(const Distribution& d) {
  if (d.kind == Distribution::Kind::kFixed) return d.mean;
  return {{"dist", to_string(d.kind)}, {"mean", d.mean}, {"stddev", d.stddev}};
}

void read_output_tokens(const json& v, Profile& p) {
  constexpr std::string_view kKey = "output_tokens";
  if (v.is_number()) {
    p.output_tokens_min = p.output_tokens_max = read_int(v, kKey);
  } else if (v.is_object()) {
    for (const auto& [k, field] : v.items()) {
      const std::string path = std::string(kKey) + "." + k;
      if (k == "min") {
        p.output_tokens_min = read_int(field, path);
      } else if (k == "max") {
        p.output_tokens_max = read_int(field, path);
      } else {
        fail(path, "unknown key \"" + k + "\"");
      }
    }
  } else {
    fail(kKey, "must be an integer or an object {min, max}");
  }
  if (p.output_tokens_min < 0) fail(kKey, "min must be >= 0");
  if (p.output_tokens_max < p.output_tokens_min) fail(kKey, "max must be >= min");
}

// Lorem ipsum, lower-cased, one word per token with its leading space, the
// way BPE tokenizers split running English text.
constexpr std::array<std::string_view, 19> kWords = {
    " lorem",  " ipsum", " dolor",  " sit",     " amet,",  " consectetur", " adipiscing",
    " elit,",  " sed",   " do",     " eiusmod", " tempor", " incididunt",  " ut",
    " labore", " et",    " dolore", " magna",   " aliqua."};

}  // namespace

std::string_view to_string(Distribution::Kind kind) {
  switch (kind) {
    case Distribution::Kind::kFixed:
      return "fixed";
    case Distribution::Kind::kNormal:
      return "normal";
    case Distribution::Kind::kLogNormal:
      return "lognormal";
  }
  return "fixed";
}

Profile profile_from_json(const json& j, const Profile& base) {
  if (!j.is_object()) fail("profile", "must be an object");
  Profile p = base;
  for (const auto& [key, v] : j.items()) {
    if (key == "ttft_ms") {
      p.ttft = read_distribution(v, key, p.ttft);
    } else if (key == "tps") {
      p.tps = read_distribution(v, key, p.tps);
      if (p.tps.mean <= 0) fail("tps.mean", "must be > 0");
    } else if (key == "output_tokens") {
      read_output_tokens(v, p);
    } else if (key == "error_rate") {
      p.error_rate = read_number(v, key);
      if (p.error_rate < 0 || p.error_rate > 1) fail(key, "must be in [0, 1]");
    } else if (key == "error_status") {
      p.error_status = read_int(v, key);
      if (p.error_status < 400 || p.error_status > 599) fail(key, "must be in [400, 599]");
    } else if (key == "retry_after_s") {
      if (v.is_null()) {
        p.retry_after_s.reset();
      } else {
        p.retry_after_s = read_int(v, key);
        if (*p.retry_after_s < 0) fail(key, "must be >= 0 or null");
      }
    } else if (key == "fault_rate") {
      p.fault_rate = read_number(v, key);
      if (p.fault_rate < 0 || p.fault_rate > 1) fail(key, "must be in [0, 1]");
    } else if (key == "stall_before_first_token_ms") {
      p.stall_before_first_token_ms = read_int(v, key);
    } else if (key == "stall_after_tokens") {
      p.stall_after_tokens = read_int(v, key);
    } else if (key == "stall_ms") {
      p.stall_ms = read_int(v, key);
      if (p.stall_ms < 0) fail(key, "must be >= 0");
    } else if (key == "cut_after_tokens") {
      p.cut_after_tokens = read_int(v, key);
    } else if (key == "malformed_after_tokens") {
      p.malformed_after_tokens = read_int(v, key);
    } else if (key == "error_after_tokens") {
      p.error_after_tokens = read_int(v, key);
    } else if (key == "region") {
      if (!v.is_string()) fail(key, "must be a string");
      p.region = v.get<std::string>();
    } else if (key == "output") {
      const std::string o = v.is_string() ? v.get<std::string>() : "";
      if (o == "text") {
        p.output = Profile::Output::kText;
      } else if (o == "tool_call") {
        p.output = Profile::Output::kToolCall;
      } else if (o == "audio") {
        p.output = Profile::Output::kAudio;
      } else {
        fail(key, "must be \"text\", \"tool_call\" or \"audio\"");
      }
    } else if (key == "reasoning_tokens") {
      p.reasoning_tokens = read_int(v, key);
      if (p.reasoning_tokens < 0) fail(key, "must be >= 0");
    } else if (key == "ratelimit_headers") {
      p.ratelimit_headers = read_bool(v, key);
    } else if (key == "reject_stream_options") {
      p.reject_stream_options = read_bool(v, key);
    } else if (key == "reject_stream") {
      p.reject_stream = read_bool(v, key);
    } else if (key == "refuse_prefill") {
      p.refuse_prefill = read_bool(v, key);
    } else if (key == "reasoning_hidden") {
      p.reasoning_hidden = read_bool(v, key);
    } else if (key == "reasoning_field") {
      const std::string f = v.is_string() ? v.get<std::string>() : "";
      if (f != "reasoning_content" && f != "reasoning")
        fail(key, "must be \"reasoning_content\" or \"reasoning\"");
      p.reasoning_field = f;
    } else if (key == "annotations") {
      p.annotations = read_bool(v, key);
    } else if (key == "cached_tokens") {
      p.cached_tokens = read_int(v, key);
      if (p.cached_tokens < 0) fail(key, "must be >= 0");
    } else if (key == "prefill_ms_per_1k_tokens") {
      if (!v.is_number() || v.get<double>() < 0) fail(key, "must be a number >= 0");
      p.prefill_ms_per_1k_tokens = v.get<double>();
    } else if (key == "prefix_cache") {
      p.prefix_cache = read_bool(v, key);
    } else if (key == "prefix_cache_ttl_ms") {
      p.prefix_cache_ttl_ms = read_int(v, key);
      if (p.prefix_cache_ttl_ms < 0) fail(key, "must be >= 0");
    } else if (key == "prefix_cache_min_tokens") {
      p.prefix_cache_min_tokens = read_int(v, key);
      if (p.prefix_cache_min_tokens < 0) fail(key, "must be >= 0");
    } else if (key == "context_window") {
      p.context_window = read_int(v, key);
      if (p.context_window < 0) fail(key, "must be >= 0");
    } else if (key == "safety_block") {
      p.safety_block = read_bool(v, key);
    } else if (key == "embedding_dimensions") {
      p.embedding_dimensions = read_int(v, key);
      if (p.embedding_dimensions < 1 || p.embedding_dimensions > 65536)
        fail(key, "must be in [1, 65536]");
    } else {
      fail(key, "unknown key \"" + key + "\"");
    }
  }
  return p;
}

json profile_to_json(const Profile& p) {
  json output_tokens = p.output_tokens_min == p.output_tokens_max
                           ? json(p.output_tokens_min)
                           : json{{"min", p.output_tokens_min}, {"max", p.output_tokens_max}};
  return {
      {"ttft_ms", distribution_to_json(p.ttft)},
      {"tps", distribution_to_json(p.tps)},
      {"output_tokens", std::move(output_tokens)},
      {"error_rate", p.error_rate},
      {"error_status", p.error_status},
      {"retry_after_s", p.retry_after_s ? json(*p.retry_after_s) : json(nullptr)},
      {"fault_rate", p.fault_rate},
      {"stall_before_first_token_ms", p.stall_before_first_token_ms},
      {"stall_after_tokens", p.stall_after_tokens},
      {"stall_ms", p.stall_ms},
      {"cut_after_tokens", p.cut_after_tokens},
      {"malformed_after_tokens", p.malformed_after_tokens},
      {"error_after_tokens", p.error_after_tokens},
      {"region", p.region},
      {"output", to_string(p.output)},
      {"reasoning_tokens", p.reasoning_tokens},
      {"ratelimit_headers", p.ratelimit_headers},
      {"reject_stream_options", p.reject_stream_options},
      {"reject_stream", p.reject_stream},
      {"refuse_prefill", p.refuse_prefill},
      {"reasoning_hidden", p.reasoning_hidden},
      {"reasoning_field", p.reasoning_field},
      {"annotations", p.annotations},
      {"cached_tokens", p.cached_tokens},
      {"prefill_ms_per_1k_tokens", p.prefill_ms_per_1k_tokens},
      {"prefix_cache", p.prefix_cache},
      {"prefix_cache_ttl_ms", p.prefix_cache_ttl_ms},
      {"prefix_cache_min_tokens", p.prefix_cache_min_tokens},
      {"context_window", p.context_window},
      {"safety_block", p.safety_block},
      {"embedding_dimensions", p.embedding_dimensions},
  };
}

std::string_view to_string(Profile::Output output) {
  switch (output) {
    case Profile::Output::kToolCall:
      return "tool_call";
    case Profile::Output::kAudio:
      return "audio";
    case Profile::Output::kText:
      break;
  }
  return "text";
}

double sample(const Distribution& d, Rng& rng) {
  double x = d.mean;
  switch (d.kind) {
    case Distribution::Kind::kFixed:
      break;
    case Distribution::Kind::kNormal:
      if (d.stddev > 0) x = std::normal_distribution<double>(d.mean, d.stddev)(rng);
      break;
    case Distribution::Kind::kLogNormal:
      if (d.stddev > 0 && d.mean > 0) {
        // For X = exp(N(mu, sigma^2)): E[X] = exp(mu + sigma^2/2) and
        // Var[X] = (exp(sigma^2) - 1) E[X]^2; solve for mu and sigma.
        const double cv = d.stddev / d.mean;
        const double sigma2 = std::log1p(cv * cv);
        const double mu = std::log(d.mean) - sigma2 / 2;
        x = std::lognormal_distribution<double>(mu, std::sqrt(sigma2))(rng);
      }
      break;
  }
  return std::max(0.0, x);
}

double sample_ttft_ms(const Profile& p, Rng& rng) { return sample(p.ttft, rng); }

double sample_tokens_per_second(const Profile& p, Rng& rng) {
  return std::max(kMinTokensPerSecond, sample(p.tps, rng));
}

int sample_output_tokens(const Profile& p, Rng& rng) {
  const int lo = std::max(0, p.output_tokens_min);
  const int hi = std::max(lo, p.output_tokens_max);
  return std::uniform_int_distribution<int>(lo, hi)(rng);
}

bool sample_error(const Profile& p, Rng& rng) {
  // Always draw, so that the rest of the sequence does not depend on the rate.
  const double u = std::uniform_real_distribution<double>(0.0, 1.0)(rng);
  return u < p.error_rate;
}

bool sample_faults(const Profile& p, Rng& rng) {
  // Always draw, like sample_error: changing the rate leaves the other draws alone.
  const double u = std::uniform_real_distribution<double>(0.0, 1.0)(rng);
  return u < p.fault_rate;
}

Profile without_faults(Profile p) {
  p.stall_before_first_token_ms = -1;
  p.stall_after_tokens = -1;
  p.stall_ms = 0;
  p.cut_after_tokens = -1;
  p.malformed_after_tokens = -1;
  p.error_after_tokens = -1;
  return p;
}

std::string_view token_text(std::size_t index) { return kWords[index % kWords.size()]; }

std::string completion_text(std::size_t tokens) {
  std::string s;
  s.reserve(tokens * 8);
  for (std::size_t i = 0; i < tokens; ++i) s += token_text(i);
  return s;
}

std::size_t content_chars(const json& content) {
  if (content.is_string()) return content.get_ref<const std::string&>().size();
  std::size_t n = 0;
  if (content.is_array()) {
    for (const auto& part : content) {
      if (part.is_object()) {
        auto text = part.find("text");
        if (text != part.end() && text->is_string())
          n += text->get_ref<const std::string&>().size();
      }
    }
  }
  return n;
}

std::int64_t tokens_for_chars(std::size_t chars) {
  return std::max<std::int64_t>(1, static_cast<std::int64_t>((chars + 3) / 4));
}

std::int64_t estimate_prompt_tokens(const json& messages) {
  std::size_t chars = 0;
  if (messages.is_array()) {
    for (const auto& m : messages) {
      if (!m.is_object()) continue;
      auto content = m.find("content");
      if (content != m.end()) chars += content_chars(*content);
    }
  }
  return tokens_for_chars(chars);
}

}  // namespace llmgate::sim
