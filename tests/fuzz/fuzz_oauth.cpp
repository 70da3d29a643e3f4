// Fuzzes what token endpoints answer (providers/cloud/oauth.cpp) and a
// service account key file: parse_token_response (OAuth 2: Google, Entra),
// parse_sts_response (AWS STS's XML), parse_container_credentials (ECS,
// EKS Pod Identity), parse_service_account, and the
// encodings a token endpoint reads (base64url both ways, form bodies:
// round trips). Each either
// gives a complete result or says why not; nothing throws, hangs or reads
// out of bounds.
//
// Input: arbitrary bytes; the first byte picks the status (200, 400, 403,
// 500) given to the response parsers, the rest is the body.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <variant>

#include "providers/cloud/oauth.h"
#include "tests/fuzz/fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace llmgate::providers::cloud;
  if (size == 0) return 0;
  static constexpr int kStatus[] = {200, 400, 403, 500};
  const int status = kStatus[data[0] % 4];
  const std::string_view body(reinterpret_cast<const char*>(data) + 1, size - 1);
  const auto now = SystemClock::time_point(std::chrono::seconds(1764480000));

  const auto token = parse_token_response(status, body, now);
  if (const auto* t = std::get_if<AccessToken>(&token)) {
    FUZZ_CHECK(status == 200 && !t->token.empty() && t->expires > now);
  } else {
    FUZZ_CHECK(!std::get<std::string>(token).empty());
  }
  const auto sts = parse_sts_response(status, body);
  if (const auto* c = std::get_if<AwsCredentials>(&sts)) {
    FUZZ_CHECK(status == 200 && c->valid() && !c->session_token.empty());
  } else {
    FUZZ_CHECK(!std::get<std::string>(sts).empty());
  }
  const auto container = parse_container_credentials(status, body);
  if (const auto* c = std::get_if<AwsCredentials>(&container)) {
    FUZZ_CHECK(status == 200 && c->valid());
  } else {
    FUZZ_CHECK(!std::get<std::string>(container).empty());
  }
  const auto sa = parse_service_account(body);
  if (const auto* s = std::get_if<ServiceAccount>(&sa)) {
    FUZZ_CHECK(!s->client_email.empty() && !s->private_key.empty() && !s->token_uri.empty());
  } else {
    FUZZ_CHECK(!std::get<std::string>(sa).empty());
  }
  // Encodings of whatever came: only unreserved bytes and escapes.
  for (const char c : form_encode(body)) {
    FUZZ_CHECK((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
               c == '-' || c == '_' || c == '.' || c == '~' || c == '%');
  }
  FUZZ_CHECK(base64url(body).size() == (body.size() * 4 + 2) / 3);
  // And back: base64url round-trips; whatever decodes, encodes to itself.
  FUZZ_CHECK(base64url_decode(base64url(body)) == std::string(body));
  if (const auto decoded = base64url_decode(body)) FUZZ_CHECK(base64url(*decoded) == body);
  // A form's fields, encoded again field by field, decode to the same.
  std::string again;
  const auto fields = form_decode(body);
  for (const auto& [name, value] : fields) {
    if (!again.empty()) again += '&';
    again += form_encode(name) + "=" + form_encode(value);
  }
  FUZZ_CHECK(form_decode(again) == fields);
  return 0;
}
