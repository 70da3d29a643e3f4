#include "gateway/http/headers.h"

#include <gtest/gtest.h>

#include <cctype>
#include <string>

namespace llmgate::gateway {
namespace {

using TC = TransferCoding;

TEST(TransferEncoding, OnlyAFinalSingleChunkedIsAccepted) {
  EXPECT_EQ(classify_transfer_encoding({}), TC::kNone);
  EXPECT_EQ(classify_transfer_encoding({"chunked"}), TC::kChunked);
  EXPECT_EQ(classify_transfer_encoding({"Chunked"}), TC::kChunked);
  EXPECT_EQ(classify_transfer_encoding({"identity"}), TC::kInvalid);
  EXPECT_EQ(classify_transfer_encoding({"xchunked"}), TC::kInvalid);
  EXPECT_EQ(classify_transfer_encoding({"chunked, identity"}), TC::kInvalid);
  EXPECT_EQ(classify_transfer_encoding({"chunked", "identity"}), TC::kInvalid);
  EXPECT_EQ(classify_transfer_encoding({"chunked", "chunked"}), TC::kInvalid);
  EXPECT_EQ(classify_transfer_encoding({""}), TC::kInvalid);
  EXPECT_EQ(classify_transfer_encoding({"gzip, chunked"}), TC::kUnsupported);
  EXPECT_EQ(classify_transfer_encoding({"gzip", "chunked"}), TC::kUnsupported);
}

TEST(IsValidHost, HostNamesAddressesAndPorts) {
  for (const char* ok :
       {"x", "api.example.com", "127.0.0.1", "localhost:8080", "x:0", "x:65535", "x:", "", "[::1]",
        "[::1]:443", "[2001:db8::1]", "[::ffff:1.2.3.4]:80", "[v1.fe80::a+en1]", "a%20b", "a_b-c~d",
        "xn--bcher-kva.example", "a!$&'()*+;="}) {
    EXPECT_TRUE(is_valid_host(ok)) << ok;
  }
  for (const char* bad : {"a b",       "a/b",  "[::1",    "a,b",    "x:99999",     "x:65536",
                          "x:-1",      "x:8o", "x:80:80", "[::1]x", "[::1]:99999", "[::g]",
                          "[1.2.3.4]", "[]",   "[v1]",    "[vx.a]", "a%2",         "a%zz",
                          "user@x",    "a?b",  "a#b",     "a\"b",   "\x01",        "caf\xc3\xa9"}) {
    EXPECT_FALSE(is_valid_host(bad)) << bad;
  }
}

TEST(KeepAlive, EveryConnectionLineCounts) {
  EXPECT_TRUE(wants_keep_alive(11, {}));
  EXPECT_FALSE(wants_keep_alive(11, {"keep-alive", "x-hop", "close"}));
  EXPECT_FALSE(wants_keep_alive(10, {}));
  EXPECT_TRUE(wants_keep_alive(10, {"keep-alive"}));
  EXPECT_FALSE(wants_keep_alive(10, {"keep-alive", "close"}));
}

TEST(ListTokens, ElementsTrimmedEmptiesSkippedCaseKept) {
  ListTokens t;
  add_list_tokens(" Keep-Alive ,, x-hop,  ", t);
  add_list_tokens("close", t);
  add_list_tokens("", t);
  ASSERT_EQ(t.size(), 3u);
  EXPECT_EQ(t[0], "Keep-Alive");  // a view of the value: compared without case
  EXPECT_EQ(t[1], "x-hop");
  EXPECT_EQ(t[2], "close");
  EXPECT_FALSE(wants_keep_alive(11, t));
  EXPECT_TRUE(wants_keep_alive(10, {"KEEP-ALIVE"}));
  EXPECT_TRUE(is_hop_by_hop("X-Hop", t));
  // Inner whitespace stays in the element: not a coding we know.
  EXPECT_EQ(classify_transfer_encoding({"CHUNKED"}), TransferCoding::kChunked);
  EXPECT_EQ(classify_transfer_encoding({"gzip , Chunked"}), TransferCoding::kUnsupported);
  EXPECT_EQ(classify_transfer_encoding({"chun ked"}), TransferCoding::kInvalid);
  EXPECT_EQ(classify_transfer_encoding({"chunked", "chunked"}), TransferCoding::kInvalid);
  EXPECT_EQ(classify_transfer_encoding({" , "}), TransferCoding::kInvalid);
}

TEST(RequestPath, OriginAndAbsoluteFormsOnly) {
  EXPECT_EQ(request_path("/v1/models?x=1"), "/v1/models");
  EXPECT_EQ(request_path("http://h:8080/v1/models?x"), "/v1/models");
  EXPECT_EQ(request_path("HTTPS://h/admin/routes"), "/admin/routes");
  EXPECT_EQ(request_path("http://h"), "/");
  EXPECT_EQ(request_path("http://h?q"), "/");
  EXPECT_EQ(request_path("*"), "*");
  EXPECT_FALSE(request_path("h:443"));
  EXPECT_FALSE(request_path("v1/models"));
  EXPECT_FALSE(request_path(""));
  EXPECT_FALSE(request_path("http:///v1"));
  // Never decoded or normalised: these match no route.
  EXPECT_EQ(request_path("/v1/../admin/routes"), "/v1/../admin/routes");
  EXPECT_EQ(request_path("/%2e%2e/admin"), "/%2e%2e/admin");
}

TEST(RequestHead, EndIsFoundAcrossPiecesAndWithBareLineFeeds) {
  const std::string head = "GET / HTTP/1.1\r\nHost: x\r\n\r\nBODY";
  EXPECT_EQ(request_head_end(head), head.size() - 4);
  EXPECT_EQ(request_head_end("GET / HTTP/1.1\r\nHost: x\r\n"), std::string_view::npos);
  // Resuming: the blank line straddles the previous search's end.
  EXPECT_EQ(request_head_end(head, 25), head.size() - 4);
  EXPECT_EQ(request_head_end("\r\n\r\nGET / HTTP/1.1\r\n\r\n"), 22u);  // empty lines first
  EXPECT_EQ(request_head_end("GET / HTTP/1.1\nHost: x\n\n"), 24u);
}

TEST(RequestHead, ObsFoldAndBadTargetBytesAreFound) {
  EXPECT_TRUE(has_obs_fold("GET / HTTP/1.1\r\nTransfer-Encoding:\r\n chunked\r\n\r\n"));
  EXPECT_TRUE(has_obs_fold("GET / HTTP/1.1\r\nX: a\r\n\tb\r\n\r\n"));
  EXPECT_FALSE(has_obs_fold("GET / HTTP/1.1\r\nX: a b\r\n\r\n"));
  EXPECT_TRUE(has_unsupported_http_version("GET / HTTP/2.0\r\n"));
  EXPECT_TRUE(has_unsupported_http_version("GET / HTTP/1.2\r\nHost: x"));
  EXPECT_FALSE(has_unsupported_http_version("GET / HTTP/1.1\r\n"));
  EXPECT_FALSE(has_unsupported_http_version("GET /a b HTTP/1.1\r\n"));
  EXPECT_FALSE(has_unsupported_http_version("GET / HTTP/x.y\r\n"));
  EXPECT_TRUE(has_invalid_target_byte("/v1/a\x01"));
  EXPECT_TRUE(has_invalid_target_byte("/v1/a b"));
  EXPECT_TRUE(has_invalid_target_byte("/v1/\xc3\xa9"));
  EXPECT_FALSE(has_invalid_target_byte("/v1/models?a=%20&b=~"));
}

}  // namespace
}  // namespace llmgate::gateway

namespace llmgate::gateway {
namespace {

// A client can neither send its own credentials upstream nor choose which
// account, project or deployment the operator's key bills or uses.
TEST(GatewayOwned, CredentialsAndProviderScopedHeadersStayHere) {
  for (const char* name :
       {"Authorization", "api-key", "X-Api-Key", "x-goog-api-key", "OpenAI-Organization",
        "OpenAI-Project", "X-Goog-User-Project", "azureml-model-deployment", "X-Amz-Security-Token",
        "x-amz-date", "x-amz-content-sha256", "x-llmgate-policy"}) {
    EXPECT_TRUE(is_gateway_owned(name)) << name;
  }
  for (const char* name : {"x-request-id", "traceparent", "anthropic-beta", "x-goog-api-client",
                           "x-stainless-lang", "x-amzn-trace-id"}) {
    EXPECT_FALSE(is_gateway_owned(name)) << name;
  }
}

}  // namespace
}  // namespace llmgate::gateway

namespace llmgate::gateway {
namespace {

// Every name of the lists, in any case, and names of the same lengths that
// are none of them (the lists are searched only for a name of a length
// among theirs).
TEST(Headers, EveryOwnedAndHopByHopNameIsFoundWhateverItsCase) {
  auto upper = [](std::string s) {
    for (char& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    return s;
  };
  for (const std::string name :
       {"host", "authorization", "api-key", "x-api-key", "x-goog-api-key", "content-length",
        "content-type", "accept", "accept-encoding", "expect", "cookie", "user-agent",
        "openai-organization", "openai-project", "x-goog-user-project", "azureml-model-deployment",
        "x-llmgate-anything", "x-amz-date"}) {
    EXPECT_TRUE(is_gateway_owned(name)) << name;
    EXPECT_TRUE(is_gateway_owned(upper(name))) << name;
  }
  for (const std::string name : {"hosu", "authorizatioN-", "x-api-kez", "x-stainless-os",
                                 "x-stainless-runtime", "x-llmgate", "x-amz", ""}) {
    EXPECT_FALSE(is_gateway_owned(name)) << name;
  }
  for (const std::string name :
       {"connection", "keep-alive", "proxy-connection", "te", "trailer", "transfer-encoding",
        "upgrade", "proxy-authenticate", "proxy-authorization"}) {
    EXPECT_TRUE(is_hop_by_hop(name, {})) << name;
    EXPECT_TRUE(is_hop_by_hop(upper(name), {})) << name;
  }
  for (const std::string name : {"tf", "trailex", "x-stainless-lang", "x-request-id", ""}) {
    EXPECT_FALSE(is_hop_by_hop(name, {})) << name;
  }
  // A name the Connection header lists: any length.
  ListTokens tokens;
  add_list_tokens("X-A-Name-Of-Any-Length-Longer-Than-Sixty-Four-Bytes-Is-Hop-By-Hop-Too", tokens);
  EXPECT_TRUE(is_hop_by_hop("x-a-name-of-any-length-longer-than-sixty-four-bytes-is-hop-by-hop-too",
                            tokens));
}

}  // namespace
}  // namespace llmgate::gateway
