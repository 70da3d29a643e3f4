// The security probe set (docs/security.md): what an attacker or a careless
// operator tries, replayed against the real gateway in-process on loopback,
// each probe with the answer it must get. Raw bytes on a socket, so nothing
// between the probe and the gateway's parser normalises the request.
//
//   - request framing: smuggling variants (CL+TE, TE+CL, duplicate CL, TE not
//     ending in chunked, TE obs-fold, TE in HTTP/1.0, chunk-size overflow),
//     oversized heads, bad methods, versions and targets, missing or doubled
//     Host, absolute-form targets, control bytes in the target and headers;
//   - paths that try to reach /admin (.., %2e%2e, %2f, //, absolute-form);
//   - slow and silent clients (head and body slowloris, on first and
//     keep-alive requests) and pipelining order;
//   - the request body: duplicate JSON keys;
//   - gateway keys (checked before the body is read, also with Expect) and
//     the separation of the admin listener.
// Overrides that try to loosen the operator's limits, reloads that would open
// the gateway, leaked upstream text, loops and the other defects fixed in the
// "Security" issue are rows of the conformance suite's "Security" table
// (tests/conformance, docs/failure-semantics.md); docs/security.md maps each
// threat to its test.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "gateway/access/auth.h"
#include "tests/support/base64.h"
#include "tests/support/gateway_harness.h"

namespace llmgate {
namespace {

using namespace std::chrono_literals;
using json = nlohmann::json;
using testing::chat_body;
using testing::eventually;
using testing::Harness;
using testing::HttpClient;
using testing::metric_value;
using testing::RawClient;
using testing::Target;

// The status of every response in `raw`, in order.
std::vector<int> statuses(const std::string& raw) {
  std::vector<int> out;
  // A response may follow a JSON body directly: no line break before it.
  static const std::regex kStatusLine(R"(HTTP/1\.[01] (\d{3}) [A-Z])");
  for (auto it = std::sregex_iterator(raw.begin(), raw.end(), kStatusLine);
       it != std::sregex_iterator(); ++it) {
    out.push_back(std::stoi((*it)[1]));
  }
  return out;
}

std::string post(const std::string& extra_headers, const std::string& body,
                 const std::string& version = "HTTP/1.1") {
  return "POST /v1/chat/completions " + version +
         "\r\nHost: x\r\nContent-Type: application/json\r\n" + extra_headers + "\r\n" + body;
}

// A second request hidden in a body: if the gateway ever read it as a
// request, a second response would follow.
const std::string kSmuggled = "GET /v1/models HTTP/1.1\r\nHost: x\r\n\r\n";

std::string chunked(const std::string& body) {
  char size[16];
  std::snprintf(size, sizeof size, "%zx", body.size());
  return std::string(size) + "\r\n" + body + "\r\n0\r\n\r\n";
}

// ---- Framing, heads and targets: one exchange on a raw socket ----------------

struct Probe {
  std::string id;
  std::string bytes;      // sent as is
  int status;             // the only response's status
  bool closes = true;     // the gateway closes the connection after answering
  std::string code = "";  // error.code of the answer, if any
};

void PrintTo(const Probe& p, std::ostream* os) { *os << p.id; }

std::vector<Probe> framing_probes() {
  const std::string body = chat_body(false);
  const std::string len = std::to_string(body.size());
  return {
      // Request smuggling: any way of making the body's extent ambiguous is
      // answered 400 and the connection closed; the hidden request never runs.
      {"cl-then-te",
       post("Content-Length: " + len + "\r\nTransfer-Encoding: chunked\r\n",
            chunked(body) + kSmuggled),
       400},
      {"te-then-cl",
       post("Transfer-Encoding: chunked\r\nContent-Length: " + len + "\r\n",
            chunked(body) + kSmuggled),
       400},
      {"duplicate-cl-differing",
       post("Content-Length: " + len + "\r\nContent-Length: 3\r\n", body + kSmuggled), 400},
      {"cl-list-differing", post("Content-Length: " + len + ", 3\r\n", body + kSmuggled), 400},
      {"te-identity", post("Transfer-Encoding: identity\r\n", kSmuggled), 400, true,
       "bad_http_request"},
      {"te-xchunked", post("Transfer-Encoding: xchunked\r\n", kSmuggled), 400, true,
       "bad_http_request"},
      {"te-chunked-identity", post("Transfer-Encoding: chunked, identity\r\n", kSmuggled), 400,
       true, "bad_http_request"},
      {"te-two-lines-chunked-first",
       post("Transfer-Encoding: chunked\r\nTransfer-Encoding: identity\r\n", kSmuggled), 400},
      {"te-identity-and-cl",
       post("Transfer-Encoding: identity\r\nContent-Length: " + len + "\r\n", body + kSmuggled),
       400},
      {"te-gzip-chunked", post("Transfer-Encoding: gzip, chunked\r\n", chunked("x") + kSmuggled),
       501, true, "bad_http_request"},
      {"te-obs-fold", post("Transfer-Encoding:\r\n chunked\r\n", chunked(body) + kSmuggled), 400},
      {"te-in-http-1.0",
       post("Transfer-Encoding: chunked\r\n", chunked(body) + kSmuggled, "HTTP/1.0"), 400},
      {"chunk-size-overflow",
       post("Transfer-Encoding: chunked\r\n", "fffffffffffffffffff\r\n" + body), 400, true,
       "bad_http_request"},
      {"chunk-size-not-hex", post("Transfer-Encoding: chunked\r\n", "zz\r\n" + body), 400},
      // Heads.
      {"oversized-head",
       "GET /v1/models HTTP/1.1\r\nHost: x\r\nX-Big: " + std::string(9000, 'a') + "\r\n\r\n", 431,
       true, "headers_too_large"},
      {"many-headers",
       "GET /v1/models HTTP/1.1\r\nHost: x\r\n" +
           [] {
             std::string h;
             for (int i = 0; i < 2000; ++i) h += "X-" + std::to_string(i) + ": y\r\n";
             return h;
           }() +
           "\r\n",
       431},
      {"unknown-method", "FROB /v1/models HTTP/1.1\r\nHost: x\r\n\r\n", 405, false},
      {"lowercase-method", "get /v1/models HTTP/1.1\r\nHost: x\r\n\r\n", 405, false},
      {"version-1.2", "GET /v1/models HTTP/1.2\r\nHost: x\r\n\r\n", 505, true,
       "http_version_not_supported"},
      {"bare-lf-line-ends", "GET /v1/models HTTP/1.1\nHost: x\n\n", 400},
      {"version-2.0", "GET /v1/models HTTP/2.0\r\nHost: x\r\n\r\n", 505},
      {"version-garbage", "GET /v1/models HTTP/x.y\r\nHost: x\r\n\r\n", 400},
      {"http-0.9-request-line", "GET /v1/models\r\n\r\n", 400},
      {"missing-host", "GET /v1/models HTTP/1.1\r\n\r\n", 400, true, "bad_http_request"},
      // Host: a host name or address and an optional port (RFC 9110 §7.2).
      {"host-with-space", "GET /v1/models HTTP/1.1\r\nHost: a b\r\n\r\n", 400, true,
       "bad_http_request"},
      {"host-with-slash", "GET /v1/models HTTP/1.1\r\nHost: a/b\r\n\r\n", 400, true,
       "bad_http_request"},
      {"host-unclosed-bracket", "GET /v1/models HTTP/1.1\r\nHost: [::1\r\n\r\n", 400, true,
       "bad_http_request"},
      {"host-list", "GET /v1/models HTTP/1.1\r\nHost: a,b\r\n\r\n", 400, true, "bad_http_request"},
      {"host-port-past-65535", "GET /v1/models HTTP/1.1\r\nHost: x:99999\r\n\r\n", 400, true,
       "bad_http_request"},
      {"host-ipv6-and-port", "GET /v1/models HTTP/1.1\r\nHost: [::1]:8080\r\n\r\n", 200, false},
      {"host-empty", "GET /v1/models HTTP/1.1\r\nHost:\r\n\r\n", 200, false},
      {"two-hosts", "GET /v1/models HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", 400, true,
       "bad_http_request"},
      {"http-1.0-without-host", "GET /v1/models HTTP/1.0\r\n\r\n", 200},
      {"absolute-form", "GET http://x/v1/models HTTP/1.1\r\nHost: x\r\n\r\n", 200, false},
      {"authority-form", "CONNECT x:443 HTTP/1.1\r\nHost: x\r\n\r\n", 400},
      {"relative-target", "GET v1/models HTTP/1.1\r\nHost: x\r\n\r\n", 400},
      {"control-byte-in-target",
       std::string("GET /v1/mo\x01"
                   "dels HTTP/1.1\r\nHost: x\r\n\r\n"),
       400},
      {"space-in-target", "GET /v1/mo dels HTTP/1.1\r\nHost: x\r\n\r\n", 400},
      {"control-byte-in-header",
       std::string("GET /v1/models HTTP/1.1\r\nHost: x\r\nX-A: a\x01z\r\n\r\n"), 400},
      {"nul-in-header", std::string("GET /v1/models HTTP/1.1\r\nHost: x\r\nX-A: a\0z\r\n\r\n", 46),
       400},
      {"space-before-colon", "GET /v1/models HTTP/1.1\r\nHost: x\r\nX-A : b\r\n\r\n", 400},
      {"bare-cr", "GET /v1/models HTTP/1.1\r\nHost: x\rX-A: b\r\n\r\n", 400},
      {"content-encoding-gzip",
       post("Content-Length: " + len + "\r\nContent-Encoding: gzip\r\n", body), 415, false,
       "unsupported_content_encoding"},
  };
}

class Framing : public ::testing::TestWithParam<Probe> {};

TEST_P(Framing, AnsweredAsDocumented) {
  const Probe& p = GetParam();
  Harness h(Target::kScript, testing::healthy_stream(2));
  {
    RawClient raw(h.port());
    ASSERT_TRUE(raw.send(p.bytes));
    std::string got;
    if (p.closes) {
      got = raw.read_all();
      EXPECT_TRUE(raw.eof()) << "the connection was not closed";
    } else {
      // Kept open: read until the answer is whole (one response, small).
      EXPECT_TRUE(eventually(
          [&] {
            got += raw.read_some();
            auto end = got.find("\r\n\r\n");
            return end != std::string::npos && got.size() > end + 4 && got.back() == '}';
          },
          5s))
          << got;
      EXPECT_FALSE(raw.closed_by_server());
    }
    EXPECT_EQ(statuses(got), std::vector<int>{p.status}) << got.substr(0, 400);
    if (!p.code.empty()) {
      const auto body = got.substr(got.find("\r\n\r\n") + 4);
      EXPECT_EQ(json::parse(body, nullptr, false)["error"]["code"], p.code) << body;
    }
  }
  // A smuggled request never reached anything.
  EXPECT_EQ(h.upstream()->stats().requests, 0u);
  EXPECT_EQ(h.good().stats().requests, 0u);
  h.expect_quiescent();
}

// A CRLF and a space make an obsolete line fold only in a head: a
// pretty-printed JSON body with CRLF line ends that arrives with its head
// is a request like any other, on a new connection (the head is read) and
// on a kept-alive one (the head is found in the buffer). Both refused it as
// a fold while the check read the whole buffer, body included.
TEST(FramingBody, ACrlfAndASpaceInTheBodyAreNotALineFold) {
  Harness h(Target::kScript, testing::healthy_stream(2));
  const std::string compact = chat_body(false);
  const std::string body = "{\r\n  " + compact.substr(1, compact.size() - 2) + "\r\n}";
  ASSERT_TRUE(json::parse(body, nullptr, false).is_object());
  const std::string request = post("Content-Length: " + std::to_string(body.size()) + "\r\n", body);
  RawClient raw(h.port());
  std::string got;
  for (int round = 1; round <= 2; ++round) {
    ASSERT_TRUE(raw.send(request));
    EXPECT_TRUE(eventually(
        [&] {
          got += raw.read_some();
          return statuses(got).size() == static_cast<std::size_t>(round) && got.back() == '}';
        },
        5s))
        << got;
  }
  EXPECT_EQ(statuses(got), (std::vector<int>{200, 200})) << got.substr(0, 600);
  EXPECT_FALSE(raw.closed_by_server());
  EXPECT_EQ(h.upstream()->stats().requests, 2u);
}

const auto probe_name = [](const auto& info) {
  std::string n = info.param.id;
  for (auto& c : n) c = (c == '-' || c == '.') ? '_' : c;
  return n;
};

INSTANTIATE_TEST_SUITE_P(Probes, Framing, ::testing::ValuesIn(framing_probes()), probe_name);

// Transfer codings are case-insensitive (RFC 9112 §7): CHUNKED is chunked.
// It was refused as a coding other than chunked.
TEST(FramingBody, AnUpperCaseChunkedCodingIsChunked) {
  Harness h(Target::kScript, testing::healthy_stream(2));
  RawClient raw(h.port());
  ASSERT_TRUE(raw.send(
      post("Transfer-Encoding: CHUNKED\r\nConnection: close\r\n", chunked(chat_body(false)))));
  const std::string got = raw.read_all();
  EXPECT_EQ(statuses(got), std::vector<int>{200}) << got.substr(0, 400);
  EXPECT_EQ(h.upstream()->stats().requests, 1u);
  h.expect_quiescent();
}

// ---- Paths to /admin ------------------------------------------------------------

// With an admin listener, /admin/* is served there only, and nothing on the
// API listener reaches it, however the path is spelt.
TEST(AdminSeparation, NoSpellingOfAPathReachesAdminFromTheApiListener) {
  Harness h(Target::kScript, testing::healthy_stream(2), "", "", "", "",
            "\n  admin_listener: {address: 127.0.0.1, port: 0}");
  const std::uint16_t admin = h.gateway().admin_port().value();
  for (const std::string target :
       {"/admin/routes", "/v1/../admin/routes", "/v1/%2e%2e/admin/routes", "/%2e%2e/admin/routes",
        "/admin%2froutes", "//admin/routes", "/ADMIN/routes", "http://x/admin/routes",
        "/v1/chat/completions/../../admin/routes", "/admin/routes%00"}) {
    RawClient raw(h.port());
    ASSERT_TRUE(raw.send("GET " + target + " HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"));
    const std::string got = raw.read_all();
    ASSERT_FALSE(statuses(got).empty()) << target;
    EXPECT_EQ(statuses(got).front(), 404) << target << "\n" << got.substr(0, 300);
    EXPECT_EQ(got.find("\"models\""), std::string::npos) << target << " leaked the routes table";
  }
  HttpClient on_admin(admin);
  EXPECT_EQ(on_admin.request("GET", "/admin/routes").status, 200);
  // And the admin listener serves no API.
  EXPECT_EQ(on_admin.request("POST", "/v1/chat/completions", chat_body(false)).status, 404);
  EXPECT_EQ(on_admin.request("GET", "/v1/models").status, 404);
  h.expect_quiescent();
}

// ---- Slow and silent clients --------------------------------------------------------

// client_header_timeout is 1 s in the harness.
TEST(SlowClients, AHeadTrickledByteByByteIsCutAtTheHeaderTimeout) {
  Harness h(Target::kScript, testing::healthy_stream(2));
  {
    RawClient raw(h.port());
    const std::string head =
        "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n";
    const auto start = std::chrono::steady_clock::now();
    bool closed = false;
    for (std::size_t i = 0; i < head.size() && !closed; ++i) {
      raw.send(head.substr(i, 1));
      closed = eventually([&] { return raw.closed_by_server(); }, 100ms);
    }
    EXPECT_TRUE(closed || eventually([&] { return raw.closed_by_server(); }, 5s));
    EXPECT_LT(std::chrono::steady_clock::now() - start, 8s);
  }
  h.expect_quiescent();
}

TEST(SlowClients, ABodyThatNeverCompletesIsCutAtTheHeaderTimeout) {
  Harness h(Target::kScript, testing::healthy_stream(2));
  {
    RawClient raw(h.port());
    ASSERT_TRUE(raw.send(post("Content-Length: 1000\r\n", "{\"model\":")));
    EXPECT_TRUE(eventually([&] { return raw.closed_by_server(); }, 5s));
    EXPECT_EQ(h.upstream()->stats().requests, 0u);
  }
  h.expect_quiescent();
}

TEST(SlowClients, AnIdleKeepAliveConnectionWaitsForTheIdleTimeoutNotTheHeaderTimeout) {
  Harness h(Target::kScript, testing::healthy_stream(2), ", client_idle_timeout: 3s");
  {
    RawClient raw(h.port());
    ASSERT_TRUE(raw.send("GET /v1/models HTTP/1.1\r\nHost: x\r\n\r\n"));
    std::string first;
    ASSERT_TRUE(eventually(
        [&] {
          first += raw.read_some();
          return first.find("\"list\"") != std::string::npos;
        },
        5s));
    // Past the 1 s header timeout, the idle connection is still open...
    std::this_thread::sleep_for(1500ms);
    EXPECT_FALSE(raw.closed_by_server());
    // ... and it is closed by the idle timeout.
    EXPECT_TRUE(eventually([&] { return raw.closed_by_server(); }, 5s));
  }
  h.expect_quiescent();
}

TEST(Pipelining, ResponsesComeBackInRequestOrder) {
  Harness h(Target::kScript, testing::healthy_stream(2));
  {
    RawClient raw(h.port());
    const std::string body = chat_body(false);
    ASSERT_TRUE(raw.send("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n" +
                         post("Content-Length: " + std::to_string(body.size()) + "\r\n", body) +
                         "GET /v1/nope HTTP/1.1\r\nHost: x\r\n\r\n" +
                         "GET /v1/models HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"));
    const std::string got = raw.read_all();
    EXPECT_EQ(statuses(got), (std::vector<int>{200, 200, 404, 200})) << got;
    const auto a = got.find("\"status\":\"ok\""), b = got.find("chat.completion"),
               c = got.find("unknown_url"), d = got.find("\"list\"");
    ASSERT_NE(a, std::string::npos);
    ASSERT_NE(b, std::string::npos);
    ASSERT_NE(c, std::string::npos);
    ASSERT_NE(d, std::string::npos);
    EXPECT_LT(a, b);
    EXPECT_LT(b, c);
    EXPECT_LT(c, d);
  }
  h.expect_quiescent();
}

// ---- Chunk lines and trailers -----------------------------------------------------

// The process's resident memory (the gateway runs in it), in bytes.
std::size_t resident_bytes() {
  std::ifstream statm("/proc/self/statm");
  std::size_t pages = 0, resident = 0;
  statm >> pages >> resident;
  return resident * static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
}

// A chunked body with `bytes` of one chunk extension, or of one trailer field.
struct ChunkedOversize {
  std::string id;
  bool trailer;       // else an extension on the first chunk line
  std::size_t bytes;  // of the extension's value or the trailer field's
  int status;         // the only response's status
  std::string code;   // its error.code, if an error
};

void PrintTo(const ChunkedOversize& c, std::ostream* os) { *os << c.id; }

class ChunkedFraming : public ::testing::TestWithParam<ChunkedOversize> {};

// Beast kept a chunk line and the trailer section whole, whatever their size:
// one 400 MB extension took RSS from 59 to 480 MB and was then answered 200;
// a 100 MB trailer section +108 MB and a 502, and trailer fields were sent
// upstream as header fields. Now a chunk line is at most kMaxChunkLineBytes
// (4 KiB) and the trailer section server.limits.max_header_size (8 KiB
// here): past either, the answer (400, 431) comes as soon as it is passed,
// the connection closes, nothing goes upstream, and memory stays flat while
// the client goes on sending. Within them, trailer fields are dropped.
TEST_P(ChunkedFraming, AnsweredWithinTheLimitsAndWithoutHoldingTheBytes) {
  const ChunkedOversize& c = GetParam();
  Harness h(Target::kScript, testing::healthy_stream(2));
  const std::string body = chat_body(false);
  char size[16];
  std::snprintf(size, sizeof size, "%zx", body.size());
  const std::string head = post("Transfer-Encoding: chunked\r\nConnection: close\r\n", "");
  const std::string before = c.trailer ? std::string(size) + "\r\n" + body + "\r\n0\r\nX-Trailer: "
                                       : std::string(size) + ";x=";
  const std::string after = c.trailer ? "\r\n\r\n" : "\r\n" + body + "\r\n0\r\n\r\n";
  const std::size_t rss_before = resident_bytes();
  std::size_t rss_peak = rss_before;
  RawClient raw(h.port());
  // The client sends everything it can while the gateway answers; its sends
  // fail once the gateway has closed. Memory is sampled as it goes (after
  // the fact, freed buffers may have gone back to the system).
  std::thread client([&] {
    if (!raw.send(head + before)) return;
    const std::string block(64 * 1024, 'a');
    for (std::size_t sent = 0; sent < c.bytes; sent += block.size()) {
      if (!raw.send(block.substr(0, std::min(block.size(), c.bytes - sent)))) return;
      if (sent % (1024 * 1024) == 0) rss_peak = std::max(rss_peak, resident_bytes());
    }
    raw.send(after);
  });
  const std::string got = raw.read_all();
  client.join();
  rss_peak = std::max(rss_peak, resident_bytes());
  EXPECT_TRUE(raw.eof()) << "the connection was not closed";
  EXPECT_EQ(statuses(got), std::vector<int>{c.status}) << got.substr(0, 400);
  if (!c.code.empty()) {
    const auto answer = got.substr(got.find("\r\n\r\n") + 4);
    EXPECT_EQ(json::parse(answer, nullptr, false)["error"]["code"], c.code) << answer;
    EXPECT_EQ(h.upstream()->stats().requests, 0u);
    EXPECT_EQ(h.good().stats().requests, 0u);
  } else {
    EXPECT_EQ(h.upstream()->stats().requests, 1u);
    EXPECT_EQ(h.upstream()->last_request().find("X-Trailer"), std::string::npos)
        << "a trailer field went upstream";
  }
  EXPECT_LT(rss_peak - rss_before, 24u * 1024 * 1024)
      << "resident memory grew from " << rss_before << " to " << rss_peak << " bytes";
  h.expect_quiescent();
}

INSTANTIATE_TEST_SUITE_P(
    Sizes, ChunkedFraming,
    ::testing::Values(
        ChunkedOversize{"extension-1KiB", false, 1024, 200, ""},
        ChunkedOversize{"extension-1MiB", false, 1024 * 1024, 400, "bad_http_request"},
        ChunkedOversize{"extension-100MiB", false, 100 * 1024 * 1024, 400, "bad_http_request"},
        ChunkedOversize{"trailer-1KiB", true, 1024, 200, ""},
        ChunkedOversize{"trailer-1MiB", true, 1024 * 1024, 431, "headers_too_large"},
        ChunkedOversize{"trailer-100MiB", true, 100 * 1024 * 1024, 431, "headers_too_large"}),
    probe_name);

// ---- The request body ---------------------------------------------------------------

TEST(RequestBody, ADuplicateModelKeyRoutesAndForwardsOneAndTheSameValue) {
  // Key "app" may use "chat" only. The parser keeps the last "model": the
  // key check, the routing and the upstream body all see that one value.
  const std::string auth =
      "auth:\n  keys:\n    - {name: app, sha256: " + gateway::sha256_hex("sk-app") +
      ", models: [chat]}\n";
  Harness h(Target::kScript, testing::healthy_stream(2), "", "",
            "  - name: solo\n    deployments: [{provider: good, model: m}]\n" + auth);
  {
    const std::map<std::string, std::string> headers{{"content-type", "application/json"},
                                                     {"authorization", "Bearer sk-app"}};
    HttpClient c(h.port());
    auto denied = c.request(
        "POST", "/v1/chat/completions",
        R"({"model":"chat","model":"solo","messages":[{"role":"user","content":"hi"}]})", headers);
    EXPECT_EQ(denied.status, 403) << denied.body;  // the value that counts is "solo"
    auto served = c.request(
        "POST", "/v1/chat/completions",
        R"({"model":"solo","model":"chat","messages":[{"role":"user","content":"hi"}]})", headers);
    EXPECT_EQ(served.status, 200) << served.body;
    EXPECT_EQ(served.header("x-llmgate-deployment"), "");  // keys set: no route explanations
    const std::string upstream = h.upstream()->last_request();
    const std::string sent = upstream.substr(upstream.find("\r\n\r\n") + 4);
    std::size_t models = 0;
    for (auto at = sent.find("\"model\""); at != std::string::npos;
         at = sent.find("\"model\"", at + 1))
      ++models;
    EXPECT_EQ(models, 1u) << sent;
    EXPECT_NE(sent.find("\"model\":\"m\""), std::string::npos) << sent;
  }
  h.expect_quiescent();
}

std::string model_body(const std::string& model) {
  return R"({"model":")" + model + R"(","messages":[{"role":"user","content":"hi"}]})";
}

// ---- Gateway keys -----------------------------------------------------------------

const std::string kAuth = "auth:\n  admin_key_sha256: " + gateway::sha256_hex("sk-admin") +
                          "\n  keys:\n    - {name: app, sha256: " + gateway::sha256_hex("sk-app") +
                          "}\n";

TEST(Keys, AWrongKeyIsRefusedBeforeTheBodyIsRead) {
  Harness h(Target::kScript, testing::healthy_stream(2), "", "", kAuth);
  {
    RawClient raw(h.port());
    // A body announced but never sent: the 401 does not wait for it.
    ASSERT_TRUE(
        raw.send("POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer nope\r\n"
                 "Content-Type: application/json\r\nContent-Length: 60000\r\n\r\n"));
    std::string got;
    EXPECT_TRUE(eventually(
        [&] {
          got += raw.read_some();
          return !statuses(got).empty();
        },
        3s));
    EXPECT_EQ(statuses(got), std::vector<int>{401});
    EXPECT_TRUE(eventually([&] { return raw.closed_by_server(); }, 5s));
  }
  h.expect_quiescent();
}

TEST(Keys, UnknownPathsAndModelsSayNothingToACallerWithoutAKey) {
  Harness h(Target::kScript, testing::healthy_stream(2), "", "", kAuth);
  auto status = [&](const std::string& method, const std::string& target,
                    const std::string& body = "",
                    const std::map<std::string, std::string>& headers = {
                        {"content-type", "application/json"}}) {
    HttpClient c(h.port());  // a refused request with a body closes its connection
    return c.request(method, target, body, headers).status;
  };
  EXPECT_EQ(status("GET", "/v1/anything"), 401);
  EXPECT_EQ(status("POST", "/v1/chat/completions", model_body("no-such-model")), 401);
  EXPECT_EQ(status("GET", "/admin/routes", "", {{"authorization", "Bearer sk-app"}}), 401);
  EXPECT_EQ(status("GET", "/healthz"), 200);
  h.expect_quiescent();
}

TEST(Keys, TheConsoleAndItsDataNeedTheAdminKeyAndABrowserIsAskedForIt) {
  Harness h(Target::kScript, testing::healthy_stream(2), "", "", kAuth);
  for (const char* path : {"/admin/console", "/admin/history", "/admin/routes"}) {
    HttpClient c(h.port());
    auto denied = c.request("GET", path);
    EXPECT_EQ(denied.status, 401) << path;
    EXPECT_EQ(denied.header("www-authenticate"), "Basic realm=\"llmgate admin\"") << path;
    EXPECT_EQ(denied.body.find("<html"), std::string::npos) << path;
    // The application key is not the admin key, in either scheme.
    EXPECT_EQ(c.request("GET", path, "", {{"authorization", "Basic " + testing::base64(":sk-app")}})
                  .status,
              401)
        << path;
    EXPECT_EQ(
        c.request("GET", path, "", {{"authorization", "Basic " + testing::base64("x:sk-admin")}})
            .status,
        200)
        << path;
    EXPECT_EQ(c.request("GET", path, "", {{"authorization", "Bearer sk-admin"}}).status, 200)
        << path;
  }
  h.expect_quiescent();
}

}  // namespace
}  // namespace llmgate
