// Header policy between client and upstream (RFC 9110 §7.6.1), Beast-free.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace llmgate::gateway {

// Connection-specific headers never forwarded by a proxy (RFC 9110 §7.6.1),
// plus those named in the request's own Connection header.
bool is_hop_by_hop(std::string_view name, const std::vector<std::string>& connection_tokens);

// Parses a Connection header value into lower-case tokens.
std::vector<std::string> connection_tokens(std::string_view connection_header);

// Client headers llmgate never forwards upstream even though they are
// end-to-end: the client's credentials (the provider key replaces them), the
// framing and content negotiation the gateway owns, and its own controls.
bool is_gateway_owned(std::string_view name);

// A usable client x-request-id: 1..128 visible ASCII characters.
bool is_valid_request_id(std::string_view id);
std::string new_request_id();  // 32 hex digits

// Retry-After: delay-seconds or an HTTP-date (RFC 9110 §10.2.3), relative to
// `now_unix`. Returns -1 when absent or unparseable.
int parse_retry_after(std::string_view value, long long now_unix);

}  // namespace llmgate::gateway
