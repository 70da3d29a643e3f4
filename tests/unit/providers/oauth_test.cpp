// Token endpoint flows (providers/cloud/oauth.h): a Google service account's
// RS256 JWT (verified here with the key's public half), Entra ID's client
// credentials and federated requests, OAuth token answers, AWS STS's
// AssumeRoleWithWebIdentity request and XML answer.
#include "providers/cloud/oauth.h"

#include <gtest/gtest.h>
#include <openssl/bio.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rsa.h>

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

namespace llmgate::providers::cloud {
namespace {

using json = nlohmann::json;

const SystemClock::time_point kNow = SystemClock::time_point(std::chrono::seconds(1764480000));

// OpenSSL's base64 decoder, as an oracle independent of ours.
std::string openssl_base64url_decode(std::string s) {
  for (char& c : s) c = c == '-' ? '+' : c == '_' ? '/' : c;
  while (s.size() % 4 != 0) s += '=';
  std::string out(s.size() / 4 * 3, '\0');
  const int n =
      EVP_DecodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                      reinterpret_cast<const unsigned char*>(s.data()), static_cast<int>(s.size()));
  if (n < 0) return {};
  out.resize(static_cast<std::size_t>(n) - (s.ends_with("==") ? 2 : s.ends_with("=") ? 1 : 0));
  return out;
}

// A fresh 2048-bit RSA key: its PKCS#8 PEM, and the key itself to verify with.
struct TestKey {
  std::unique_ptr<EVP_PKEY, decltype(&EVP_PKEY_free)> key{EVP_RSA_gen(2048), EVP_PKEY_free};
  std::string pem() const {
    std::unique_ptr<BIO, decltype(&BIO_free)> bio(BIO_new(BIO_s_mem()), BIO_free);
    PEM_write_bio_PrivateKey(bio.get(), key.get(), nullptr, nullptr, 0, nullptr, nullptr);
    char* data = nullptr;
    const long n = BIO_get_mem_data(bio.get(), &data);
    return std::string(data, static_cast<std::size_t>(n));
  }
  std::string public_pem() const {
    std::unique_ptr<BIO, decltype(&BIO_free)> bio(BIO_new(BIO_s_mem()), BIO_free);
    PEM_write_bio_PUBKEY(bio.get(), key.get());
    char* data = nullptr;
    const long n = BIO_get_mem_data(bio.get(), &data);
    return std::string(data, static_cast<std::size_t>(n));
  }
  bool verifies(std::string_view data, std::string_view sig) const {
    std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> ctx(EVP_MD_CTX_new(), EVP_MD_CTX_free);
    return EVP_DigestVerifyInit(ctx.get(), nullptr, EVP_sha256(), nullptr, key.get()) == 1 &&
           EVP_DigestVerify(ctx.get(), reinterpret_cast<const unsigned char*>(sig.data()),
                            sig.size(), reinterpret_cast<const unsigned char*>(data.data()),
                            data.size()) == 1;
  }
};

TEST(OAuth, Base64UrlAndFormEncoding) {
  EXPECT_EQ(base64url(""), "");
  EXPECT_EQ(base64url("f"), "Zg");
  EXPECT_EQ(base64url("fo"), "Zm8");
  EXPECT_EQ(base64url("foo"), "Zm9v");
  EXPECT_EQ(base64url("foob"), "Zm9vYg");
  EXPECT_EQ(base64url("\xfb\xff"), "-_8");  // "+/8=" in base64
  EXPECT_EQ(form_encode("a b&c=d/\xc3\xa9~"), "a%20b%26c%3Dd%2F%C3%A9~");
}

TEST(OAuth, Base64UrlAndFormsDecodeAsOpenSslAndBrowsersDo) {
  for (const std::string s : {"", "f", "fo", "foo", "foob", "\xfb\xff", "any bytes \x01\x80"}) {
    EXPECT_EQ(base64url_decode(base64url(s)), s);
    EXPECT_EQ(base64url_decode(base64url(s)), openssl_base64url_decode(base64url(s)));
  }
  EXPECT_EQ(base64url_decode("Zm9v="), std::nullopt);  // no padding in base64url
  EXPECT_EQ(base64url_decode("Zm9+"), std::nullopt);   // '+' is base64's, not base64url's
  EXPECT_EQ(base64url_decode("Z"), std::nullopt);      // no encoding is that long
  EXPECT_EQ(base64url_decode("Zh"), std::nullopt);     // "f" is "Zg": non-zero left-over bits
  using Fields = std::vector<std::pair<std::string, std::string>>;
  EXPECT_EQ(form_decode("a=1&b=x+y%26z&&c&d="),
            (Fields{{"a", "1"}, {"b", "x y&z"}, {"c", ""}, {"d", ""}}));
  EXPECT_EQ(form_decode(""), Fields{});
}

TEST(OAuth, Rs256VerifiesWithThePrivateOrThePublicKey) {
  const TestKey k;
  const ServiceAccount sa{"gw@p.iam.gserviceaccount.com", k.pem(), "", "https://t/token", ""};
  const std::string jwt = google_jwt_assertion(sa, "s", kNow);
  const std::size_t dot = jwt.rfind('.');
  const std::string sig = *base64url_decode(jwt.substr(dot + 1));
  EXPECT_TRUE(rs256_verify(k.pem(), jwt.substr(0, dot), sig));
  EXPECT_TRUE(rs256_verify(k.public_pem(), jwt.substr(0, dot), sig));
  EXPECT_FALSE(rs256_verify(k.pem(), jwt.substr(0, dot) + "x", sig));
  EXPECT_FALSE(rs256_verify(TestKey().pem(), jwt.substr(0, dot), sig));
  EXPECT_FALSE(rs256_verify("not a key", jwt.substr(0, dot), sig));
}

TEST(OAuth, AServiceAccountSignsAJwtItsPublicKeyVerifies) {
  const TestKey k;
  const json file = {{"type", "service_account"},
                     {"project_id", "proj"},
                     {"private_key_id", "kid1"},
                     {"private_key", k.pem()},
                     {"client_email", "gw@proj.iam.gserviceaccount.com"},
                     {"token_uri", "https://oauth2.googleapis.com/token"}};
  auto parsed = parse_service_account(file.dump());
  ASSERT_TRUE(std::holds_alternative<ServiceAccount>(parsed)) << std::get<std::string>(parsed);
  const ServiceAccount& sa = std::get<ServiceAccount>(parsed);
  std::string error;
  const std::string jwt = google_jwt_assertion(sa, kGoogleCloudScope, kNow, &error);
  ASSERT_FALSE(jwt.empty()) << error;
  const std::size_t dot1 = jwt.find('.'), dot2 = jwt.rfind('.');
  ASSERT_NE(dot1, dot2);
  const json header = json::parse(openssl_base64url_decode(jwt.substr(0, dot1)));
  const json claims = json::parse(openssl_base64url_decode(jwt.substr(dot1 + 1, dot2 - dot1 - 1)));
  EXPECT_EQ(header, json::parse(R"({"alg":"RS256","typ":"JWT","kid":"kid1"})"));
  EXPECT_EQ(claims["iss"], "gw@proj.iam.gserviceaccount.com");
  EXPECT_EQ(claims["aud"], "https://oauth2.googleapis.com/token");
  EXPECT_EQ(claims["scope"], "https://www.googleapis.com/auth/cloud-platform");
  EXPECT_EQ(claims["iat"], 1764480000);
  EXPECT_EQ(claims["exp"], 1764480000 + 3600);
  const std::string signed_part = jwt.substr(0, dot2);
  const std::string sig = openssl_base64url_decode(jwt.substr(dot2 + 1));
  EXPECT_TRUE(k.verifies(signed_part, sig));
  // Another key, or other claims, do not verify: the check can fail.
  EXPECT_FALSE(TestKey().verifies(signed_part, sig));
  EXPECT_FALSE(k.verifies(signed_part + "x", sig));

  const TokenRequest r = google_token_request(sa, jwt);
  EXPECT_EQ(r.url, "https://oauth2.googleapis.com/token");
  EXPECT_EQ(r.body, "grant_type=urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Ajwt-bearer&assertion=" +
                        jwt);  // a JWT is all unreserved characters and dots
}

TEST(OAuth, WhatIsNoServiceAccountKeyIsSaidSo) {
  EXPECT_EQ(std::get<std::string>(parse_service_account("[]")),
            "the service account key file is not a JSON object");
  EXPECT_EQ(std::get<std::string>(parse_service_account(R"({"type":"authorized_user"})")),
            "the key file is not a service account key (\"type\": \"authorized_user\")");
  EXPECT_EQ(std::get<std::string>(parse_service_account(R"({"type":"service_account"})")),
            "the service account key has no client_email or private_key");
  // (Found by fuzz_oauth: a member of another type threw.)
  EXPECT_EQ(std::get<std::string>(parse_service_account(R"({"type":7})")),
            "the key file is not a service account key (\"type\": \"\")");
  ServiceAccount bad;
  bad.client_email = "x@y";
  bad.private_key = "-----BEGIN PRIVATE KEY-----\nnot a key\n-----END PRIVATE KEY-----\n";
  std::string error;
  EXPECT_EQ(google_jwt_assertion(bad, kGoogleCloudScope, kNow, &error), "");
  EXPECT_EQ(error, "the service account's private_key is not a PEM private key");
}

TEST(OAuth, EntraRequestsForASecretAndAFederatedToken) {
  const TokenRequest s = entra_client_secret_request(kEntraAuthority, "tenant-1", "app-1",
                                                     "s3cr3t/+=", kCognitiveServicesScope);
  EXPECT_EQ(s.url, "https://login.microsoftonline.com/tenant-1/oauth2/v2.0/token");
  EXPECT_EQ(s.body,
            "grant_type=client_credentials&client_id=app-1&client_secret=s3cr3t%2F%2B%3D"
            "&scope=https%3A%2F%2Fcognitiveservices.azure.com%2F.default");
  const TokenRequest f = entra_federated_request(kEntraAuthority, "tenant-1", "app-1",
                                                 "eyJ.fed.token", kCognitiveServicesScope);
  EXPECT_EQ(f.body,
            "grant_type=client_credentials&client_id=app-1&client_assertion_type=urn%3Aietf%"
            "3Aparams%3Aoauth%3Aclient-assertion-type%3Ajwt-bearer&client_assertion=eyJ.fed."
            "token&scope=https%3A%2F%2Fcognitiveservices.azure.com%2F.default");
}

TEST(OAuth, TokenAnswersAndRefusals) {
  auto ok = parse_token_response(
      200, R"({"access_token":"ya29.x","expires_in":3599,"token_type":"Bearer"})", kNow);
  ASSERT_TRUE(std::holds_alternative<AccessToken>(ok));
  EXPECT_EQ(std::get<AccessToken>(ok).token, "ya29.x");
  EXPECT_EQ(std::get<AccessToken>(ok).expires, kNow + std::chrono::seconds(3599));
  auto entra = parse_token_response(
      200, R"({"token_type":"Bearer","expires_in":"3600","access_token":"eyJ0"})", kNow);
  ASSERT_TRUE(std::holds_alternative<AccessToken>(entra));
  EXPECT_EQ(std::get<AccessToken>(entra).expires, kNow + std::chrono::seconds(3600));
  EXPECT_EQ(
      std::get<std::string>(parse_token_response(
          400, R"({"error":"invalid_grant","error_description":"Invalid JWT Signature."})", kNow)),
      "the token endpoint refused: invalid_grant: Invalid JWT Signature.");
  EXPECT_EQ(std::get<std::string>(parse_token_response(500, "<html>", kNow)),
            "the token endpoint answered 500 without a JSON object");
  EXPECT_EQ(std::get<std::string>(parse_token_response(200, R"({"expires_in":5})", kNow)),
            "the token endpoint's answer has no access_token");
  // A day at most, whatever it says (a huge one would overflow the clock).
  auto long_lived =
      parse_token_response(200, R"({"access_token":"t","expires_in":9223372036854775807})", kNow);
  ASSERT_TRUE(std::holds_alternative<AccessToken>(long_lived));
  EXPECT_EQ(std::get<AccessToken>(long_lived).expires, kNow + std::chrono::hours(24));
}

TEST(OAuth, StsWebIdentityRequestAndAnswer) {
  const TokenRequest r =
      sts_web_identity_request("eu-west-1", "arn:aws:iam::123:role/gw", "llmgate", "eyJ.k8s.t");
  EXPECT_EQ(r.url, "https://sts.eu-west-1.amazonaws.com/");
  EXPECT_EQ(r.body,
            "Action=AssumeRoleWithWebIdentity&Version=2011-06-15&RoleArn=arn%3Aaws%3Aiam%3A%3A123%"
            "3Arole%2Fgw&RoleSessionName=llmgate&WebIdentityToken=eyJ.k8s.t");
  EXPECT_EQ(sts_web_identity_request("", "r", "s", "t").url, "https://sts.amazonaws.com/");
  const std::string answer =
      R"(<AssumeRoleWithWebIdentityResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/">
  <AssumeRoleWithWebIdentityResult>
    <Credentials>
      <SessionToken>FQoGZXIvYXdzEXAMPLE</SessionToken>
      <SecretAccessKey>wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY</SecretAccessKey>
      <Expiration>2026-11-30T07:00:00Z</Expiration>
      <AccessKeyId>ASIAEXAMPLE</AccessKeyId>
    </Credentials>
  </AssumeRoleWithWebIdentityResult>
</AssumeRoleWithWebIdentityResponse>)";
  auto c = parse_sts_response(200, answer);
  ASSERT_TRUE(std::holds_alternative<AwsCredentials>(c)) << std::get<std::string>(c);
  EXPECT_EQ(std::get<AwsCredentials>(c).access_key_id, "ASIAEXAMPLE");
  EXPECT_EQ(std::get<AwsCredentials>(c).session_token, "FQoGZXIvYXdzEXAMPLE");
  EXPECT_EQ(std::get<AwsCredentials>(c).expires,
            SystemClock::time_point(std::chrono::seconds(1796022000)));  // 2026-11-30T07:00:00Z
  EXPECT_EQ(std::get<std::string>(parse_sts_response(
                403,
                "<ErrorResponse><Error><Code>AccessDenied</Code><Message>Not authorized to "
                "perform sts:AssumeRoleWithWebIdentity</Message></Error></ErrorResponse>")),
            "STS refused (HTTP 403): AccessDenied: Not authorized to perform "
            "sts:AssumeRoleWithWebIdentity");
  EXPECT_EQ(std::get<std::string>(parse_sts_response(200, "<x/>")),
            "STS's answer has no complete credentials");
  // (Found by fuzz_oauth: a far year overflowed the clock.)
  std::string far = answer;
  far.replace(far.find("2026-11-30"), 4, "9999");
  EXPECT_EQ(std::get<std::string>(parse_sts_response(200, far)),
            "STS's answer has no complete credentials");
}

}  // namespace
}  // namespace llmgate::providers::cloud
