// Walking a YAML document while remembering where we are.
//
// Internal to config/. A ConfigNode is a YAML node plus its key path
// ("providers[2].timeouts"); every error it raises is a ConfigError that begins
// with the origin and that path. A ConfigMap reads one mapping: it hands out
// children by key, remembers which keys were asked for, and reports anything
// left over as an unknown key. A section reader therefore reads like a schema:
//
//   node.read_map([&](ConfigMap& m) {
//     m.read("connect", t.connect, &ConfigNode::duration);
//     m.read("port", listener.port, integer_in<std::uint16_t>(0, 65535));
//   });
//
// Scalars are typed strictly: numbers and booleans must be plain YAML scalars
// ("8080" in quotes is a string), booleans are true/false only, and null
// (`key:` with no value) is never accepted where a value is expected.
//
// A file with several mistakes reports all of them in one run. fail() still
// throws (a reader stops where it cannot go on); the nearest recovery point
// records the problem and reads on: a key's value (ConfigMap::read), each
// entry of a list the sections read with recover(), each section. Unknown
// keys are all reported, not only the first. What a failed definition would
// have supplied is not reported again: a deployment naming a provider whose
// own entry failed is left out silently (Problems::definition_failed).
#pragma once

#include <yaml-cpp/yaml.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "config/closest_match.h"
#include "config/config.h"

namespace llmgate::config {

// The problems of one parse. parse_config opens one for the walk (it is the
// thread's current one until destroyed); without one open, recover() and
// ConfigMap::read let errors propagate as before.
class Problems {
 public:
  Problems();
  ~Problems();
  Problems(const Problems&) = delete;
  Problems& operator=(const Problems&) = delete;
  static Problems* current();

  void add(const ConfigError& error);
  bool empty() const { return problems_.empty(); }
  // Throws one ConfigError listing every problem, one per line, in the
  // file's order (each line begins with `origin`).
  [[noreturn]] void raise(std::string_view origin) const;

  // `name` of `kind` ("provider", "model") was defined by an entry that
  // failed: references to it are not errors of their own.
  void definition_failed(std::string_view kind, std::string name);
  bool is_failed_definition(std::string_view kind, std::string_view name) const;

 private:
  struct Problem {
    std::size_t order;  // line (from 1), or past every line when unknown
    std::size_t column;
    std::string text;
  };
  std::vector<Problem> problems_;
  std::vector<std::pair<std::string, std::string>> failed_definitions_;
  Problems* previous_;
};

// A ConfigError with the line and column (from 1) it names, so that
// Problems sorts by them without reading them back from the text.
class LocatedError : public ConfigError {
 public:
  LocatedError(const std::string& what, std::size_t line, std::size_t column)
      : ConfigError(what), line(line), column(column) {}
  std::size_t line, column;
};

// Thrown instead of a second report of a problem already recorded (a
// reference to a failed definition): it stops the reader like any error, and
// Problems::add ignores it.
class AlreadyReported : public ConfigError {
 public:
  AlreadyReported() : ConfigError("(already reported)") {}
};

// Runs `read`; a ConfigError it throws is recorded in the current Problems
// (or rethrown when none is open). Returns whether `read` finished.
template <typename Read>
bool recover(Read&& read) {
  try {
    std::forward<Read>(read)();
    return true;
  } catch (const ConfigError& error) {
    Problems* problems = Problems::current();
    if (problems == nullptr) throw;
    problems->add(error);
    return false;
  }
}

class ConfigNode {
 public:
  // `origin` must outlive the node (parse_config owns it for the whole walk).
  ConfigNode(YAML::Node node, std::string_view origin, std::string path);

  const std::string& path() const { return path_; }

  // Throws ConfigError("<origin>:<line>:<column>: <path>: <message>"), the
  // location being this node's in the file (left out when unknown).
  [[noreturn]] void fail(std::string_view message) const;

  // The scalar under `key` if this is a mapping that has one (names of
  // entries that failed, for Problems::definition_failed).
  std::optional<std::string> scalar_member(std::string_view key) const;

  // Reads this node as a mapping: `read_fields(ConfigMap&)` asks for the keys
  // it knows, then every key it did not ask for is rejected as unknown.
  template <typename ReadFields>
  void read_map(ReadFields&& read_fields) const;

  // A list; element i has the path "<path>[i]".
  std::vector<ConfigNode> items() const;
  // A mapping with free-form keys (e.g. extra headers), in document order.
  // Keys must be unique; element "k" has the path "<path>.k".
  std::vector<std::pair<std::string, ConfigNode>> entries() const;

  bool is_map() const;         // a mapping (else a scalar or a list)
  std::string string() const;  // any scalar, as written
  bool boolean() const;        // true / false
  std::int64_t integer(std::int64_t min, std::int64_t max) const;
  double number() const;                    // any finite number
  Duration duration() const;                // parse_duration(), and greater than zero
  Duration duration_or_zero() const;        // parse_duration(); "0s" allowed
  std::size_t size(std::size_t max) const;  // parse_size(), in 1..max

 private:
  friend class ConfigMap;
  ConfigNode child(std::string_view key, YAML::Node node) const;
  const std::string& scalar(std::string_view expected) const;  // or fail()
  const std::string& plain_scalar(std::string_view expected) const;
  [[noreturn]] void fail_at(const YAML::Mark& mark, std::string_view message) const;

  YAML::Node node_;
  std::string_view origin_;
  std::string path_;
};

class ConfigMap {
 public:
  explicit ConfigMap(const ConfigNode& node);  // fails unless node is a mapping

  // The child under `key`, if present. Either way `key` becomes a known key.
  std::optional<ConfigNode> optional(std::string_view key);
  // The child under `key`; fails with `missing required key "<key>"` if absent
  // (or, when an unknown key looks like a typo of it, reports that key instead).
  ConfigNode required(std::string_view key);

  // If `key` is present, out = read(child). `read` is any callable taking a
  // ConfigNode, including a member pointer such as &ConfigNode::duration.
  // A value that fails is recorded (see recover()) and `out` left as it was.
  template <typename T, typename Read>
  void read(std::string_view key, T& out, Read&& read) {
    if (auto child = optional(key)) {
      recover([&] { out = std::invoke(std::forward<Read>(read), *child); });
    }
  }

  // Reports every key (in document order) that nobody asked for: all of them
  // when a Problems is open, else the first, thrown.
  void reject_unknown_keys() const;

 private:
  struct Entry {
    std::string key;
    YAML::Mark mark;  // the key's
    YAML::Node value;
    bool used = false;
  };
  Entry* find(std::string_view key);
  [[noreturn]] void fail_unknown(const Entry& entry) const;

  ConfigNode node_;
  std::vector<Entry> entries_;
  std::vector<std::string> known_;  // keys asked for, in the order asked
};

template <typename ReadFields>
void ConfigNode::read_map(ReadFields&& read_fields) const {
  ConfigMap map(*this);
  std::forward<ReadFields>(read_fields)(map);
  map.reject_unknown_keys();
}

// An entry of a list that defines a `kind` by its "name" failed: see
// Problems::definition_failed. And whether `name` is such a definition.
void definition_failed(const ConfigNode& entry, std::string_view kind);
bool is_failed_definition(std::string_view kind, std::string_view name);

// A reader for ConfigMap::read: an integer in [min, max] converted to T.
template <typename T>
auto integer_in(T min, T max) {
  return [min, max](const ConfigNode& node) {
    return static_cast<T>(
        node.integer(static_cast<std::int64_t>(min), static_cast<std::int64_t>(max)));
  };
}

// A reader for ConfigMap::read: a size in 1..max bytes.
inline auto size_at_most(std::size_t max) {
  return [max](const ConfigNode& node) { return node.size(max); };
}

}  // namespace llmgate::config
