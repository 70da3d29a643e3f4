// Reading members of a parsed JSON document the way the translators do: a
// member that is absent or null is unset, and a value of another type than
// the one asked for reads as the fallback. Header-only, Beast-free.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace llmgate::providers {

// The member `key` of `obj` when `obj` is an object and the member is
// present and not null; else null.
inline const nlohmann::json* member(const nlohmann::json& obj, std::string_view key) {
  if (!obj.is_object()) return nullptr;
  auto it = obj.find(key);
  return it == obj.end() || it->is_null() ? nullptr : &*it;
}

// The string member `key`, else `fallback`.
inline std::string string_or(const nlohmann::json& obj, std::string_view key,
                             std::string fallback = {}) {
  const nlohmann::json* v = member(obj, key);
  return v && v->is_string() ? v->get<std::string>() : fallback;
}

}  // namespace llmgate::providers
