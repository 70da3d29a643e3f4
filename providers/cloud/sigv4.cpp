// AWS Signature Version 4 (sigv4.h).
#include "providers/cloud/sigv4.h"

#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <algorithm>
#include <array>

#include "config/ascii.h"
#include "config/percent.h"
#include "config/rfc3339.h"

namespace llmgate::providers::cloud {
namespace {

constexpr char kHex[] = "0123456789abcdef";
constexpr std::string_view kAlgorithm = "AWS4-HMAC-SHA256";

std::string hex(const unsigned char* p, std::size_t n) {
  std::string out(2 * n, '0');
  for (std::size_t i = 0; i < n; ++i) {
    out[2 * i] = kHex[p[i] >> 4];
    out[2 * i + 1] = kHex[p[i] & 0xf];
  }
  return out;
}

using Mac = std::array<unsigned char, 32>;

Mac hmac(std::string_view key, std::string_view data) {
  Mac out{};
  unsigned int len = 0;
  HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()),
       reinterpret_cast<const unsigned char*>(data.data()), data.size(), out.data(), &len);
  return out;
}

std::string_view view(const Mac& m) {
  return std::string_view(reinterpret_cast<const char*>(m.data()), m.size());
}

// A header value as SigV4 signs it: no leading or trailing spaces, runs of
// spaces as one.
std::string trimmed(std::string_view v) {
  std::string out;
  out.reserve(v.size());
  bool space = false;
  for (char c : config::trim_ows(v)) {
    if (c == ' ' || c == '\t') {
      space = true;
      continue;
    }
    if (space && !out.empty()) out += ' ';
    space = false;
    out += c;
  }
  return out;
}

// The query as SigV4 canonicalizes it: each name and value decoded and
// encoded again its way, sorted by name then value, joined with '&'.
std::string canonical_query(std::string_view query) {
  std::vector<std::pair<std::string, std::string>> params;
  while (!query.empty()) {
    const std::size_t amp = query.find('&');
    const std::string_view param = query.substr(0, amp);
    query = amp == std::string_view::npos ? std::string_view() : query.substr(amp + 1);
    if (param.empty()) continue;
    const std::size_t eq = param.find('=');
    const std::string_view name = param.substr(0, eq);
    const std::string_view value =
        eq == std::string_view::npos ? std::string_view() : param.substr(eq + 1);
    params.emplace_back(sigv4_uri_encode(config::percent_decode(name), false),
                        sigv4_uri_encode(config::percent_decode(value), false));
  }
  std::sort(params.begin(), params.end());
  std::string out;
  for (const auto& [name, value] : params) {
    if (!out.empty()) out += '&';
    out.append(name).append("=").append(value);
  }
  return out;
}

}  // namespace

std::string sha256_hex(std::string_view data) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_Digest(data.data(), data.size(), digest, &len, EVP_sha256(), nullptr);
  return hex(digest, len);
}

std::string sigv4_amz_date(std::chrono::system_clock::time_point t) {
  return config::format_utc(t, "%Y%m%dT%H%M%SZ");
}

std::optional<std::chrono::system_clock::time_point> sigv4_parse_amz_date(std::string_view s) {
  if (s.size() != 16) return std::nullopt;
  const std::string text(s);
  std::tm tm{};
  const char* end = strptime(text.c_str(), "%Y%m%dT%H%M%SZ", &tm);
  if (end != text.c_str() + text.size() || tm.tm_year < 70 || tm.tm_year > 250) return std::nullopt;
  return std::chrono::system_clock::from_time_t(timegm(&tm));
}

std::string sigv4_uri_encode(std::string_view s, bool keep_slash) {
  return config::percent_encode(s, keep_slash ? "/" : "");
}

std::string sigv4_canonical_request(const SigV4Request& r, std::string_view amz_date,
                                    std::string_view security_token, std::string* signed_headers) {
  // The headers signed: the request's, Host, x-amz-date and the session
  // token, by lower-case name (values of a repeated name joined by commas).
  std::vector<std::pair<std::string, std::string>> h;
  h.reserve(r.headers.size() + 3);
  for (const auto& [name, value] : r.headers)
    h.emplace_back(config::ascii_lowercase(name), trimmed(value));
  h.emplace_back("host", trimmed(r.host));
  h.emplace_back("x-amz-date", std::string(amz_date));
  if (!security_token.empty()) h.emplace_back("x-amz-security-token", std::string(security_token));
  std::stable_sort(h.begin(), h.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  std::string headers, names;
  for (std::size_t i = 0; i < h.size(); ++i) {
    if (i > 0 && h[i].first == h[i - 1].first) {
      headers.pop_back();  // the '\n'
      headers.append(",").append(h[i].second).append("\n");
      continue;
    }
    headers.append(h[i].first).append(":").append(h[i].second).append("\n");
    if (!names.empty()) names += ';';
    names += h[i].first;
  }
  // The path as sent, encoded once more (every AWS service but S3).
  const std::string path = r.path.empty() ? std::string("/") : sigv4_uri_encode(r.path, true);
  std::string out;
  out.reserve(256 + headers.size() + r.path.size());
  out.append(r.method).append("\n");
  out.append(path).append("\n");
  out.append(canonical_query(r.query)).append("\n");
  out.append(headers).append("\n");
  out.append(names).append("\n");
  out.append(sha256_hex(r.payload));
  if (signed_headers) *signed_headers = std::move(names);
  return out;
}

std::string sigv4_string_to_sign(std::string_view amz_date, std::string_view region,
                                 std::string_view service, std::string_view canonical_request) {
  std::string out(kAlgorithm);
  out.append("\n").append(amz_date).append("\n");
  out.append(amz_date.substr(0, 8)).append("/").append(region).append("/").append(service);
  out.append("/aws4_request\n");
  out.append(sha256_hex(canonical_request));
  return out;
}

std::string sigv4_signature(std::string_view secret, std::string_view date, std::string_view region,
                            std::string_view service, std::string_view string_to_sign) {
  const std::string first = "AWS4" + std::string(secret);
  const Mac k_date = hmac(first, date);
  const Mac k_region = hmac(view(k_date), region);
  const Mac k_service = hmac(view(k_region), service);
  const Mac k_signing = hmac(view(k_service), "aws4_request");
  const Mac sig = hmac(view(k_signing), string_to_sign);
  return hex(sig.data(), sig.size());
}

SigV4Headers sigv4_sign(const SigV4Request& r, const AwsCredentials& creds, std::string_view region,
                        std::string_view service, std::chrono::system_clock::time_point now) {
  SigV4Headers out;
  out.amz_date = sigv4_amz_date(now);
  out.security_token = creds.session_token;
  out.content_sha256 = sha256_hex(r.payload);
  SigV4Request with = r;
  with.headers.emplace_back("x-amz-content-sha256", out.content_sha256);
  std::string signed_headers;
  const std::string canonical =
      sigv4_canonical_request(with, out.amz_date, out.security_token, &signed_headers);
  const std::string to_sign = sigv4_string_to_sign(out.amz_date, region, service, canonical);
  const std::string date = out.amz_date.substr(0, 8);
  out.authorization = std::string(kAlgorithm) + " Credential=" + creds.access_key_id + "/" + date +
                      "/" + std::string(region) + "/" + std::string(service) +
                      "/aws4_request, SignedHeaders=" + signed_headers + ", Signature=" +
                      sigv4_signature(creds.secret_access_key, date, region, service, to_sign);
  return out;
}

}  // namespace llmgate::providers::cloud
