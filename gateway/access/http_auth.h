// The credentials of an Authorization header value (RFC 9110 §11.6.2):
// Bearer tokens, and HTTP Basic (RFC 7617), which a browser sends for the
// console once asked. Beast-free; fuzzed by tests/fuzz/fuzz_http_auth.cpp.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace llmgate::gateway {

// The credentials after `scheme` (lower case, with its trailing space) in an
// Authorization value, spaces trimmed; empty when the scheme differs.
std::string_view credentials(std::string_view authorization, std::string_view scheme);
// "Bearer <key>" (scheme case-insensitive): the key, else "".
std::string_view bearer(std::string_view authorization);
// "Basic <base64 of user:password>": the password (after the first colon);
// nullopt when the scheme differs, the base64 is invalid (or over 1024
// characters) or there is no colon.
std::optional<std::string> basic_password(std::string_view authorization);

}  // namespace llmgate::gateway
