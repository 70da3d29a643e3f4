#include "config/yaml_walker.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <stdexcept>

#include "config/ascii.h"
#include "config/quoting.h"

namespace llmgate::config {
namespace {

// What a node is, for "expected X, got Y".
std::string describe(const YAML::Node& node) {
  switch (node.Type()) {
    case YAML::NodeType::Null:
      return "null";
    case YAML::NodeType::Sequence:
      return "a list";
    case YAML::NodeType::Map:
      return "a mapping";
    case YAML::NodeType::Scalar:
      return node.Tag() == "!" ? "the quoted string " + quote(node.Scalar()) : quote(node.Scalar());
    case YAML::NodeType::Undefined:
      break;
  }
  return "nothing";
}

// "8080" (quoted) or `!!str 8080` are strings in YAML, not numbers.
bool is_string_tagged(const YAML::Node& node) {
  return node.Tag() == "!" || node.Tag() == "tag:yaml.org,2002:str";
}

std::string format_bytes(std::size_t bytes) {
  struct Unit {
    std::size_t factor;
    const char* suffix;
  };
  static constexpr Unit kUnits[] = {{1ULL << 30, "GiB"}, {1ULL << 20, "MiB"}, {1ULL << 10, "KiB"}};
  for (const auto& unit : kUnits) {
    if (bytes >= unit.factor && bytes % unit.factor == 0) {
      return std::to_string(bytes / unit.factor) + unit.suffix;
    }
  }
  return std::to_string(bytes) + " bytes";
}

std::size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diagonal = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

}  // namespace

std::optional<std::string> closest_match(std::string_view name,
                                         const std::vector<std::string>& candidates) {
  const std::string wanted = ascii_lowercase(name);
  std::optional<std::string> best;
  std::size_t best_distance = 0;
  for (const auto& candidate : candidates) {
    const std::size_t distance = edit_distance(wanted, ascii_lowercase(candidate));
    const std::size_t allowed = std::max<std::size_t>(1, candidate.size() / 3);
    if (distance <= allowed && distance < candidate.size() && (!best || distance < best_distance)) {
      best = candidate;
      best_distance = distance;
    }
  }
  return best;
}

// ---------------------------------------------------------------------------
// Problems

namespace {
thread_local Problems* current_problems = nullptr;
// A file with more mistakes than this is not worth listing further.
constexpr std::size_t kMaxProblems = 50;

}  // namespace

Problems::Problems() : previous_(current_problems) { current_problems = this; }
Problems::~Problems() { current_problems = previous_; }
Problems* Problems::current() { return current_problems; }

void Problems::add(const ConfigError& error) {
  if (dynamic_cast<const AlreadyReported*>(&error) != nullptr) return;
  const auto* at = dynamic_cast<const LocatedError*>(&error);
  problems_.push_back(Problem{at ? at->line : SIZE_MAX, at ? at->column : 0, error.what()});
}

void Problems::raise(std::string_view origin) const {
  std::vector<Problem> sorted = problems_;
  std::stable_sort(sorted.begin(), sorted.end(), [](const Problem& a, const Problem& b) {
    return a.order != b.order ? a.order < b.order : a.column < b.column;
  });
  std::string text;
  for (std::size_t i = 0; i < sorted.size() && i < kMaxProblems; ++i) {
    if (i > 0 && sorted[i].text == sorted[i - 1].text) continue;
    if (!text.empty()) text += '\n';
    text += sorted[i].text;
  }
  if (sorted.size() > kMaxProblems) {
    text += '\n';
    text += origin;
    text += ": " + std::to_string(sorted.size() - kMaxProblems) + " more problems not shown";
  }
  throw ConfigError(text);
}

void Problems::definition_failed(std::string_view kind, std::string name) {
  failed_definitions_.emplace_back(std::string(kind), std::move(name));
}

bool Problems::is_failed_definition(std::string_view kind, std::string_view name) const {
  for (const auto& [k, n] : failed_definitions_) {
    if (k == kind && n == name) return true;
  }
  return false;
}

void definition_failed(const ConfigNode& entry, std::string_view kind) {
  if (Problems* problems = Problems::current()) {
    if (auto name = entry.scalar_member("name")) problems->definition_failed(kind, *name);
  }
}

bool is_failed_definition(std::string_view kind, std::string_view name) {
  const Problems* problems = Problems::current();
  return problems != nullptr && problems->is_failed_definition(kind, name);
}

// ---------------------------------------------------------------------------
// ConfigNode

ConfigNode::ConfigNode(YAML::Node node, std::string_view origin, std::string path)
    : node_(std::move(node)), origin_(origin), path_(std::move(path)) {}

void ConfigNode::fail(std::string_view message) const { fail_at(node_.Mark(), message); }

void ConfigNode::fail_at(const YAML::Mark& mark, std::string_view message) const {
  std::string text(origin_);
  if (!mark.is_null()) {
    text += ':';
    text += std::to_string(mark.line + 1);
    text += ':';
    text += std::to_string(mark.column + 1);
  }
  text += ": ";
  if (!path_.empty()) {
    text += path_;
    text += ": ";
  }
  text += message;
  if (mark.is_null()) throw ConfigError(text);
  throw LocatedError(text, static_cast<std::size_t>(mark.line) + 1,
                     static_cast<std::size_t>(mark.column) + 1);
}

ConfigNode ConfigNode::child(std::string_view key, YAML::Node node) const {
  std::string key_text = escape_for_message(key);
  return ConfigNode(std::move(node), origin_, path_.empty() ? key_text : path_ + "." + key_text);
}

std::optional<std::string> ConfigNode::scalar_member(std::string_view key) const {
  if (!node_.IsMap()) return std::nullopt;
  for (auto it = node_.begin(); it != node_.end(); ++it) {
    if (it->first.IsScalar() && it->first.Scalar() == key && it->second.IsScalar()) {
      return it->second.Scalar();
    }
  }
  return std::nullopt;
}

std::vector<ConfigNode> ConfigNode::items() const {
  if (!node_.IsSequence()) fail("expected a list, got " + describe(node_));
  std::vector<ConfigNode> out;
  out.reserve(node_.size());
  for (std::size_t i = 0; i < node_.size(); ++i) {
    out.emplace_back(node_[i], origin_, path_ + "[" + std::to_string(i) + "]");
  }
  return out;
}

std::vector<std::pair<std::string, ConfigNode>> ConfigNode::entries() const {
  ConfigMap map(*this);  // checks: a mapping, string keys, no duplicates
  std::vector<std::pair<std::string, ConfigNode>> out;
  for (auto it = node_.begin(); it != node_.end(); ++it) {
    const std::string& key = it->first.Scalar();
    out.emplace_back(key, child(key, it->second));
  }
  return out;
}

const std::string& ConfigNode::scalar(std::string_view expected) const {
  if (!node_.IsScalar()) fail("expected " + std::string(expected) + ", got " + describe(node_));
  return node_.Scalar();
}

const std::string& ConfigNode::plain_scalar(std::string_view expected) const {
  const std::string& text = scalar(expected);
  if (is_string_tagged(node_))
    fail("expected " + std::string(expected) + ", got " + describe(node_));
  return text;
}

std::string ConfigNode::string() const { return scalar("a string"); }

bool ConfigNode::is_map() const { return node_.IsMap(); }

bool ConfigNode::boolean() const {
  const std::string& text = plain_scalar("true or false");
  if (text == "true" || text == "True" || text == "TRUE") return true;
  if (text == "false" || text == "False" || text == "FALSE") return false;
  fail("expected true or false, got " + describe(node_));
}

std::int64_t ConfigNode::integer(std::int64_t min, std::int64_t max) const {
  const std::string& text = plain_scalar("a number");
  const char* end = text.data() + text.size();
  std::int64_t value = 0;
  const auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (ec == std::errc::result_out_of_range && ptr == end) {
    value = text.front() == '-' ? INT64_MIN : INT64_MAX;  // reported as out of range below
  } else if (ec != std::errc() || ptr != end) {
    double fractional = 0;
    const auto parsed = std::from_chars(text.data(), end, fractional);
    if (parsed.ec == std::errc() && parsed.ptr == end && std::isfinite(fractional)) {
      fail("expected a whole number, got " + escape_for_message(text));
    }
    fail("expected a number, got " + describe(node_));
  }
  if (value < min || value > max) {
    fail("must be between " + std::to_string(min) + " and " + std::to_string(max) + ", got " +
         escape_for_message(text));
  }
  return value;
}

double ConfigNode::number() const {
  const std::string& text = plain_scalar("a number");
  const char* end = text.data() + text.size();
  double value = 0;
  const auto [ptr, ec] = std::from_chars(text.data(), end, value);
  // from_chars also accepts "inf" and "nan"; a price or weight never is one.
  if (ec != std::errc() || ptr != end || !std::isfinite(value)) {
    fail("expected a number, got " + describe(node_));
  }
  return value;
}

Duration ConfigNode::duration() const {
  Duration value = duration_or_zero();
  if (value.count() <= 0) fail("must be greater than zero");
  return value;
}

Duration ConfigNode::duration_or_zero() const {
  const std::string& text = scalar("a duration such as 2s");
  Duration value{};
  try {
    value = parse_duration(text);
  } catch (const std::invalid_argument& e) {
    fail(e.what());
  }
  return value;
}

std::size_t ConfigNode::size(std::size_t max) const {
  const std::string& text = scalar("a size such as 4MiB");
  std::size_t value = 0;
  try {
    value = parse_size(text);
  } catch (const std::invalid_argument& e) {
    fail(e.what());
  }
  if (value == 0) fail("must be greater than zero");
  if (value > max)
    fail("must be at most " + format_bytes(max) + ", got " + escape_for_message(text));
  return value;
}

// ---------------------------------------------------------------------------
// ConfigMap

ConfigMap::ConfigMap(const ConfigNode& node) : node_(node) {
  const YAML::Node& yaml = node.node_;
  if (!yaml.IsMap()) node.fail("expected a mapping, got " + describe(yaml));
  for (auto it = yaml.begin(); it != yaml.end(); ++it) {
    if (!it->first.IsScalar()) {
      node.fail_at(it->first.Mark(), "expected string keys, got " + describe(it->first));
    }
    const std::string& key = it->first.Scalar();
    // yaml-cpp keeps both copies of a repeated key and lookups see only the
    // first, so a duplicate would silently drop the later value.
    if (find(key) != nullptr) node.fail_at(it->first.Mark(), "duplicate key " + quote(key));
    entries_.push_back(Entry{key, it->first.Mark(), it->second});
  }
}

ConfigMap::Entry* ConfigMap::find(std::string_view key) {
  for (auto& entry : entries_) {
    if (entry.key == key) return &entry;
  }
  return nullptr;
}

std::optional<ConfigNode> ConfigMap::optional(std::string_view key) {
  if (std::find(known_.begin(), known_.end(), key) == known_.end()) known_.emplace_back(key);
  Entry* entry = find(key);
  if (entry == nullptr) return std::nullopt;
  entry->used = true;
  return node_.child(key, entry->value);
}

ConfigNode ConfigMap::required(std::string_view key) {
  if (auto child = optional(key)) return *std::move(child);
  // A missing key is most often a misspelt one: point at the typo instead.
  // (Only keys asked for so far are candidates, so this cannot misreport a
  // key the reader has yet to ask for as long as no two keys are near-twins.)
  for (const auto& entry : entries_) {
    if (!entry.used && closest_match(entry.key, known_) == key) fail_unknown(entry);
  }
  node_.fail("missing required key " + quote(key));
}

void ConfigMap::fail_unknown(const Entry& entry) const {
  std::string message = "unknown key " + quote(entry.key);
  if (auto hint = closest_match(entry.key, known_)) {
    message += " (did you mean " + quote(*hint) + "?)";
  } else if (!known_.empty()) {
    message += " (expected one of: ";
    for (std::size_t i = 0; i < known_.size(); ++i) message += (i ? ", " : "") + known_[i];
    message += ")";
  }
  node_.fail_at(entry.mark, message);
}

void ConfigMap::reject_unknown_keys() const {
  for (const auto& entry : entries_) {
    if (!entry.used) recover([&] { fail_unknown(entry); });
  }
}

}  // namespace llmgate::config
