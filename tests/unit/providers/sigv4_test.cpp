// AWS Signature Version 4 (providers/cloud/sigv4.h): AWS's own test-suite
// values, and agreement with AWS's SDK for JavaScript on a Bedrock request.
#include "providers/cloud/sigv4.h"

#include <gtest/gtest.h>

#include <chrono>
#include <string>

namespace llmgate::providers::cloud {
namespace {

using std::chrono::system_clock;

// 2015-08-30T12:36:00Z, the time of AWS's SigV4 test suite.
system_clock::time_point suite_time() {
  return system_clock::time_point(std::chrono::seconds(1440938160));
}

constexpr const char* kSecret = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY";

TEST(SigV4, AmzDateIsTheUtcBasicFormat) {
  EXPECT_EQ(sigv4_amz_date(suite_time()), "20150830T123600Z");
  EXPECT_EQ(sigv4_parse_amz_date("20150830T123600Z"), suite_time());
  EXPECT_FALSE(sigv4_parse_amz_date("20150830T123600"));
  EXPECT_FALSE(sigv4_parse_amz_date("20150830T1236000"));
  EXPECT_FALSE(sigv4_parse_amz_date("99990830T123600Z"));  // beyond a nanosecond clock
}

// AWS's Signature Version 4 test suite (2011 edition, "get-vanilla-query"
// style: GET / with two values of foo), step by step.
TEST(SigV4, TheStringToSignAndSignatureOfAwsTestSuite) {
  const std::string canonical =
      "GET\n/\nfoo=Zoo&foo=aha\ndate:Mon, 09 Sep 2011 23:36:00 GMT\nhost:host.foo.com\n\n"
      "date;host\ne3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";
  const std::string to_sign =
      sigv4_string_to_sign("20110909T233600Z", "us-east-1", "host", canonical);
  EXPECT_EQ(to_sign,
            "AWS4-HMAC-SHA256\n20110909T233600Z\n20110909/us-east-1/host/aws4_request\n"
            "e25f777ba161a0f1baf778a87faf057187cf5987f17953320e3ca399feb5f00d");
  EXPECT_EQ(sigv4_signature(kSecret, "20110909", "us-east-1", "host", to_sign),
            "be7148d34ebccdc6423b19085378aa0bee970bdc61d144bd1a8c48c33079ab09");
  EXPECT_EQ(sha256_hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
}

TEST(SigV4, EncodingKeepsOnlyUnreservedBytes) {
  EXPECT_EQ(sigv4_uri_encode("anthropic.claude-3-v1:0", false), "anthropic.claude-3-v1%3A0");
  EXPECT_EQ(sigv4_uri_encode("a b/c~d_e", false), "a%20b%2Fc~d_e");
  EXPECT_EQ(sigv4_uri_encode("/a b/c", true), "/a%20b/c");
  EXPECT_EQ(sigv4_uri_encode("\xc3\xa9", false), "%C3%A9");
}

SigV4Request bedrock_request() {
  SigV4Request r;
  r.method = "POST";
  r.host = "bedrock-runtime.us-east-1.amazonaws.com";
  r.path = "/model/anthropic.claude-3-5-sonnet-20240620-v1%3A0/converse-stream";
  r.headers = {{"Content-Type", "application/json"}};
  r.payload = R"({"messages":[{"role":"user","content":[{"text":"hi"}]}]})";
  return r;
}

TEST(SigV4, ThePathIsEncodedOnceMoreTheQuerySortedTheHeadersTrimmed) {
  SigV4Request r = bedrock_request();
  r.query = "b=2&a=x%20y&a=1";
  r.headers.push_back({"X-Custom", "  two   spaces  "});
  std::string names;
  const std::string c = sigv4_canonical_request(r, "20150830T123600Z", "", &names);
  EXPECT_EQ(c,
            "POST\n"
            "/model/anthropic.claude-3-5-sonnet-20240620-v1%253A0/converse-stream\n"
            "a=1&a=x%20y&b=2\n"
            "content-type:application/json\n"
            "host:bedrock-runtime.us-east-1.amazonaws.com\n"
            "x-amz-date:20150830T123600Z\n"
            "x-custom:two spaces\n"
            "\n"
            "content-type;host;x-amz-date;x-custom\n" +
                sha256_hex(r.payload));
  EXPECT_EQ(names, "content-type;host;x-amz-date;x-custom");
}

// The values AWS's SDK for JavaScript signs the same request with
// (@aws-sdk/signature-v4 3.374.0 and @aws-crypto/sha256-js, signingDate
// 2015-08-30T12:36:00Z, region us-east-1, service bedrock; the e2e test
// tests/e2e/bedrock.test.mjs checks live requests the same way).
TEST(SigV4, AgreesWithAwsSdkForJavaScript) {
  AwsCredentials creds{"AKIDEXAMPLE", kSecret, ""};
  SigV4Headers h = sigv4_sign(bedrock_request(), creds, "us-east-1", "bedrock", suite_time());
  EXPECT_EQ(h.amz_date, "20150830T123600Z");
  EXPECT_EQ(h.content_sha256, "c3335e07d6e89650bf94cb98664be69f8774dbc3198df221f113db0a59ea14f0");
  EXPECT_EQ(h.authorization,
            "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/bedrock/aws4_request, "
            "SignedHeaders=content-type;host;x-amz-content-sha256;x-amz-date, "
            "Signature=a483086df09963ea59c223c5b83fb09a1648d18ab76c911b2e0f87b40df02dff");
  creds.session_token = "SESSIONTOKEN";
  h = sigv4_sign(bedrock_request(), creds, "us-east-1", "bedrock", suite_time());
  EXPECT_EQ(h.security_token, "SESSIONTOKEN");
  EXPECT_EQ(h.authorization,
            "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/bedrock/aws4_request, "
            "SignedHeaders=content-type;host;x-amz-content-sha256;x-amz-date;x-amz-security-token, "
            "Signature=eb18bf2c90bd0f93385cdeef2f98e92ff350c6568948d537f92892b43dc5e7dc");
}

TEST(SigV4, AnyChangeToWhatIsSignedChangesTheSignature) {
  const AwsCredentials creds{"AKIDEXAMPLE", kSecret, ""};
  const std::string base =
      sigv4_sign(bedrock_request(), creds, "us-east-1", "bedrock", suite_time()).authorization;
  SigV4Request body = bedrock_request();
  body.payload = R"({"messages":[{"role":"user","content":[{"text":"hI"}]}]})";
  SigV4Request path = bedrock_request();
  path.path = "/model/anthropic.claude-3-5-sonnet-20240620-v1%3A0/converse";
  for (const SigV4Request& r : {body, path}) {
    EXPECT_NE(sigv4_sign(r, creds, "us-east-1", "bedrock", suite_time()).authorization, base);
  }
  EXPECT_NE(
      sigv4_sign(bedrock_request(), creds, "us-west-2", "bedrock", suite_time()).authorization,
      base);
  EXPECT_NE(sigv4_sign(bedrock_request(), creds, "us-east-1", "bedrock",
                       suite_time() + std::chrono::seconds(1))
                .authorization,
            base);
}

}  // namespace
}  // namespace llmgate::providers::cloud
