#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <stdexcept>
#include <string>

#include "config/config.h"

namespace llmgate::config {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

std::string url_error(const std::string& text) {
  try {
    parse_upstream_url(text);
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "<no error>";
}

TEST(ParseUpstreamUrl, HttpsDefaultsToPort443AndKeepsThePathPrefix) {
  const UpstreamUrl url = parse_upstream_url("https://api.groq.com/openai/v1");
  EXPECT_TRUE(url.tls);
  EXPECT_EQ(url.host, "api.groq.com");
  EXPECT_EQ(url.port, 443);
  EXPECT_EQ(url.path_prefix, "/openai/v1");
}

TEST(ParseUpstreamUrl, HttpDefaultsToPort80AndAnEmptyPrefix) {
  const UpstreamUrl url = parse_upstream_url("http://localhost");
  EXPECT_FALSE(url.tls);
  EXPECT_EQ(url.host, "localhost");
  EXPECT_EQ(url.port, 80);
  EXPECT_EQ(url.path_prefix, "");
}

TEST(ParseUpstreamUrl, ReadsAnExplicitPort) {
  const UpstreamUrl url = parse_upstream_url("http://127.0.0.1:8000/v1");
  EXPECT_EQ(url.host, "127.0.0.1");
  EXPECT_EQ(url.port, 8000);
  EXPECT_EQ(url.path_prefix, "/v1");
}

TEST(ParseUpstreamUrl, TrimsTrailingSlashesFromThePrefix) {
  EXPECT_EQ(parse_upstream_url("https://h/v1/").path_prefix, "/v1");
  EXPECT_EQ(parse_upstream_url("https://h/").path_prefix, "");
  EXPECT_EQ(parse_upstream_url("https://h//").path_prefix, "");
  EXPECT_EQ(parse_upstream_url("https://h/a/b/c/").path_prefix, "/a/b/c");
}

TEST(ParseUpstreamUrl, TreatsTheSchemeCaseInsensitively) {
  EXPECT_TRUE(parse_upstream_url("HTTPS://h").tls);
  EXPECT_FALSE(parse_upstream_url("Http://h").tls);
}

TEST(ParseUpstreamUrl, AcceptsBracketedIpv6LiteralsAndStoresTheHostWithoutBrackets) {
  const UpstreamUrl url = parse_upstream_url("http://[::1]:9000/v1");
  EXPECT_EQ(url.host, "::1");
  EXPECT_EQ(url.port, 9000);
  EXPECT_EQ(url.authority(), "[::1]:9000");
  EXPECT_EQ(url.to_string(), "http://[::1]:9000/v1");
  EXPECT_EQ(parse_upstream_url("https://[2001:db8::5]").authority(), "[2001:db8::5]");
}

TEST(ParseUpstreamUrl, AuthorityOmitsOnlyTheSchemesDefaultPort) {
  EXPECT_EQ(parse_upstream_url("https://h:443").authority(), "h");
  EXPECT_EQ(parse_upstream_url("http://h:80").authority(), "h");
  EXPECT_EQ(parse_upstream_url("https://h:80").authority(), "h:80");
  EXPECT_EQ(parse_upstream_url("http://h:443").authority(), "h:443");
}

TEST(ParseUpstreamUrl, ToStringRoundTripsCanonicalUrls) {
  for (const char* text : {"https://api.groq.com/openai/v1", "http://127.0.0.1:8000/v1",
                           "https://h", "http://[::1]:9000", "https://h:8443/a/b"}) {
    EXPECT_EQ(parse_upstream_url(text).to_string(), text);
  }
  EXPECT_EQ(parse_upstream_url("HTTPS://h:443/v1/").to_string(), "https://h/v1");
}

TEST(ParseUpstreamUrl, RejectsMalformedUrlsNamingTheProblem) {
  EXPECT_EQ(url_error("api.groq.com/v1"),
            "invalid URL: expected scheme://host, e.g. https://api.openai.com/v1");
  EXPECT_EQ(url_error("ftp://h"),
            R"(invalid URL: unsupported scheme "ftp" (expected http or https))");
  EXPECT_EQ(url_error("https://"), "invalid URL: missing host");
  EXPECT_EQ(url_error("https://:443"), "invalid URL: missing host");
  EXPECT_EQ(url_error("https://h:"), "invalid URL: empty port");
  EXPECT_EQ(url_error("https://h:0"), R"(invalid URL: invalid port "0" (expected 1-65535))");
  EXPECT_EQ(url_error("https://h:65536"),
            R"(invalid URL: invalid port "65536" (expected 1-65535))");
  EXPECT_EQ(url_error("https://h:8x"), R"(invalid URL: invalid port "8x" (expected 1-65535))");
  EXPECT_EQ(url_error("https://h/v1#x"), "invalid URL: fragments (#...) are not allowed");
  EXPECT_EQ(url_error("http://[::1"), R"(invalid URL: unterminated IPv6 address "[::1")");
  EXPECT_EQ(url_error("http://[::g]/"), R"(invalid URL: invalid IPv6 address "[::g]")");
  EXPECT_EQ(url_error("http://[::1]x"), R"(invalid URL: unexpected "x" after IPv6 address)");
  EXPECT_EQ(url_error("http://::1/"),
            R"(invalid URL: invalid host "::1" (IPv6 addresses go in brackets))");
  EXPECT_EQ(url_error("https://a b/"),
            R"(invalid URL: invalid host "a b" (IPv6 addresses go in brackets))");
  EXPECT_EQ(url_error("https://h/a b"), R"(invalid URL: invalid character in path "/a b")");
}

TEST(ParseUpstreamUrl, RejectsCredentialsWithoutEchoingThem) {
  const std::string userinfo = url_error("https://user:hunter2@h/v1");
  EXPECT_EQ(
      userinfo,
      "invalid URL: user info (user:password@) is not allowed; use api_key_env or api_key_file");
  const std::string query = url_error("https://h/v1?key=hunter2");
  EXPECT_EQ(query, "invalid URL: query strings (?...) are not allowed");
  EXPECT_THAT(userinfo + query, Not(HasSubstr("hunter2")));
}

}  // namespace
}  // namespace llmgate::config
