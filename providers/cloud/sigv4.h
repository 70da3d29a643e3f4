// AWS Signature Version 4 (sigv4.cpp): the Authorization header of a request
// to an AWS service, as AWS's SigV4 specification builds it -- a canonical
// request (method, the path encoded once more, the sorted query, the signed
// headers in lower case with their values trimmed, the payload's SHA-256),
// a string to sign naming the credential scope (date/region/service), and an
// HMAC-SHA256 chain from the secret key through the date, region and service.
// Used for Amazon Bedrock (service "bedrock"). Pure functions of their
// inputs, the clock included: tests pin the time. Beast-free.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace llmgate::providers::cloud {

struct AwsCredentials {
  std::string access_key_id;
  std::string secret_access_key;
  std::string
      session_token;  // temporary credentials (STS, SSO, IRSA): sent as x-amz-security-token
  // When temporary credentials stop working (max(): they do not expire).
  std::chrono::system_clock::time_point expires = std::chrono::system_clock::time_point::max();
  bool valid() const { return !access_key_id.empty() && !secret_access_key.empty(); }
};

// A request as it goes on the wire, to be signed.
struct SigV4Request {
  std::string_view method;  // "POST"
  std::string_view host;    // the Host header's value: "bedrock-runtime.us-east-1.amazonaws.com"
  // The path as sent, already percent-encoded once ("/model/a.b-v1%3A0/converse").
  std::string_view path;
  std::string_view query;  // as sent, without '?' ("" if none)
  // Other headers to sign (name, value), e.g. content-type. Host,
  // x-amz-date and x-amz-security-token are added by sign().
  std::vector<std::pair<std::string, std::string>> headers;
  std::string_view payload;
};

// What sign() adds to the request: x-amz-date, x-amz-content-sha256 (the
// payload's hash, signed too, as AWS's SDKs send it), x-amz-security-token
// (when the credentials have a session token) and Authorization.
struct SigV4Headers {
  std::string amz_date;  // "20150830T123600Z"
  std::string content_sha256;
  std::string security_token;
  std::string authorization;
};

// The steps, exposed for tests and for a server that checks signatures (the
// simulator's Bedrock mode).
std::string sigv4_amz_date(std::chrono::system_clock::time_point t);  // "YYYYMMDDTHHMMSSZ"
// The time an x-amz-date value names; nullopt when it is not one (or a year
// outside 1970..2150, which a nanosecond clock could not hold).
std::optional<std::chrono::system_clock::time_point> sigv4_parse_amz_date(std::string_view s);
// Percent-encoding as SigV4 wants it: every byte but A-Z a-z 0-9 - _ . ~
// as %XX (upper-case hex); with `keep_slash`, '/' stays.
std::string sigv4_uri_encode(std::string_view s, bool keep_slash);
std::string sigv4_canonical_request(const SigV4Request& r, std::string_view amz_date,
                                    std::string_view security_token,
                                    std::string* signed_headers = nullptr);
std::string sigv4_string_to_sign(std::string_view amz_date, std::string_view region,
                                 std::string_view service, std::string_view canonical_request);
// hex(HMAC-SHA256(signing key, string to sign)), the signing key derived
// from `secret` for the date (YYYYMMDD), region and service.
std::string sigv4_signature(std::string_view secret, std::string_view date, std::string_view region,
                            std::string_view service, std::string_view string_to_sign);
std::string sha256_hex(std::string_view data);

// Signs `r` for `service` in `region` with `creds` at time `now`.
SigV4Headers sigv4_sign(const SigV4Request& r, const AwsCredentials& creds, std::string_view region,
                        std::string_view service, std::chrono::system_clock::time_point now);

}  // namespace llmgate::providers::cloud
