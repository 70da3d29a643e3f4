// Header policy between client and upstream (RFC 9110 §7.6.1), Beast-free.
#pragma once

#include <boost/container/small_vector.hpp>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace llmgate::gateway {

// The elements of comma-separated header values (a Connection line's
// tokens, a Transfer-Encoding line's codings): views into the values, spaces
// around each element trimmed, empty elements skipped; compared without
// case. Inline for a head's usual few ("keep-alive"), so a request that
// sends one allocates nothing for it.
using ListTokens = boost::container::small_vector<std::string_view, 4>;
void add_list_tokens(std::string_view header_value, ListTokens& out);

// Connection-specific headers never forwarded by a proxy (RFC 9110 §7.6.1),
// plus those named in the request's own Connection header.
bool is_hop_by_hop(std::string_view name, const ListTokens& connection_tokens);

// Whether a client wants its connection kept open after this request, from
// every Connection line together (RFC 9112 §9.3): HTTP/1.1 unless one says
// "close", HTTP/1.0 only if one says "keep-alive".
bool wants_keep_alive(unsigned version, const ListTokens& connection_tokens);

// Client headers llmgate never forwards upstream even though they are
// end-to-end: the client's credentials (the provider key replaces them), the
// framing and content negotiation the gateway owns, its own controls, and
// the provider-scoped ones that choose what the provider bills or serves.
bool is_gateway_owned(std::string_view name);

// Appends the field line "name: value\r\n" to a head being written: one
// size change and four copies, not four appends (a head is a dozen lines).
inline void append_field_line(std::string& out, std::string_view name, std::string_view value) {
  const std::size_t at = out.size();
  out.resize(at + name.size() + value.size() + 4);
  char* p = out.data() + at;
  if (!name.empty()) std::memcpy(p, name.data(), name.size());
  p += name.size();
  *p++ = ':';
  *p++ = ' ';
  if (!value.empty()) std::memcpy(p, value.data(), value.size());
  p += value.size();
  *p++ = '\r';
  *p = '\n';
}

// A usable client x-request-id: 1..128 visible ASCII characters.
bool is_valid_request_id(std::string_view id);
std::string new_request_id();  // 32 hex digits

// The Transfer-Encoding a request declares, all its field lines together
// (RFC 9112 §6.1): kChunked for exactly "chunked"; kInvalid when the final
// coding is not chunked (the body length cannot be known: 400, RFC 9112
// §6.3) or chunked appears twice; kUnsupported for other codings before
// chunked (gzip, chunked: 501); kNone for no coding at all.
enum class TransferCoding { kNone, kChunked, kUnsupported, kInvalid };
TransferCoding classify_transfer_encoding(const std::vector<std::string_view>& field_values);

// The path of a request target (no query): origin-form "/v1/models?x" ->
// "/v1/models"; absolute-form "http://host/v1/models" -> "/v1/models" (RFC
// 9112 §3.2.2: a server must accept it); "*" -> "*". Anything else
// (authority-form, a relative path, an empty target) -> nullopt: a 400. The
// path is not decoded or normalised: "/v1/../admin" matches nothing and
// gets a 404, never another route.
std::optional<std::string_view> request_path(std::string_view target);

// Where a request head ends in `bytes`: the offset just past its blank line
// ("\r\n\r\n"), or npos if it has not all arrived. `from` is where to
// resume the search (the length already searched), for heads that arrive in
// pieces. Empty lines before a request line are skipped (RFC 9112 §2.2).
std::size_t request_head_end(std::string_view bytes, std::size_t from = 0);

// True if the head uses obsolete line folding (a field line continued on the
// next line after a space or tab, RFC 9112 §5.2): refused with a 400, never
// folded, since a proxy in front may read such a field differently.
bool has_obs_fold(std::string_view head);

// True if a head's request line ends in a well-formed version other than
// HTTP/1.0 and HTTP/1.1 ("HTTP/2.0"): a 505, where other malformed request
// lines are a 400.
bool has_unsupported_http_version(std::string_view head);

// True if a Host field value is a host and an optional port (RFC 9110 §7.2,
// RFC 3986 §3.2.2-3): a reg-name (unreserved characters, %-escapes and
// sub-delims, an IPv4 address among them), an IP-literal in brackets (an
// IPv6 address or IPvFuture), or nothing (RFC 9112 §3.2: for a target
// without an authority), then ":" and at most 65535 in digits, if any. A
// comma is refused although reg-name allows it: in a field value it
// separates list members, and Host is one host.
bool is_valid_host(std::string_view value);

// True if a request target has a byte no URI may have: a control, a space,
// DEL or a non-ASCII byte (RFC 3986 §2).
bool has_invalid_target_byte(std::string_view target);

// Retry-After: delay-seconds or an HTTP-date (RFC 9110 §10.2.3), relative to
// `now_unix`. Returns -1 when absent or unparseable.
int parse_retry_after(std::string_view value, long long now_unix);

}  // namespace llmgate::gateway
