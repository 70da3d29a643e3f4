// libFuzzer target for the upstream response parser (gateway/proxy/upstream_parser.cpp):
// Beast's HTTP/1 parser with the gateway's own field keeping and body buffer.
// Differential oracle: whatever the bytes, however they arrive (the first two
// input bytes choose the read size and the body buffer's size), the verdict
// (an error or not), the status, the body and keep-alive are those of Beast's
// own response_parser<string_body> fed the same reads, and the fields
// kept are exactly the ones kept_upstream_field() names (each name's values
// in order), with operator[] answering the first value as Beast's field set
// does.
#include <algorithm>
#include <boost/asio/buffer.hpp>
#include <boost/beast/core/string.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/string_body.hpp>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "beast_assert.h"
#include "fuzz_check.h"
#include "gateway/proxy/upstream_parser.h"

namespace beast = boost::beast;
namespace http = boost::beast::http;
namespace net = boost::asio;
using llmgate::gateway::kept_upstream_field;
using llmgate::gateway::UpstreamHead;
using llmgate::gateway::UpstreamParser;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 2) return 0;
  const std::size_t piece = 1 + data[0] % 64, space = 1 + data[1] % 64;
  const std::string_view wire(reinterpret_cast<const char*>(data) + 2, size - 2);

  // Both parsers are fed alike (`piece` bytes arrive at a time, what a put
  // leaves is kept for the next): the reference's body goes to a string, the
  // gateway's into a `space`-byte buffer per put, as the relay's does.
  // The gateway's parser without a body limit, as it runs; the reference
  // with one, since its string_body reserves what a Content-Length says (an
  // input over it is not compared).
  constexpr std::uint64_t kBodyLimit = 64 * 1024;
  http::response_parser<http::string_body> ref;
  ref.body_limit(kBodyLimit);
  UpstreamParser p;
  std::string buf(space, '\0'), body;
  const auto feed = [&](auto& parser, auto before_put, auto after_put) {
    std::string pending;
    std::size_t off = 0;
    bool want_more = true;
    beast::error_code ec;
    for (int guard = 0; !parser.is_done(); ++guard) {
      FUZZ_CHECK(guard < 1000000);  // no endless need_buffer loop
      if (pending.empty() || want_more) {
        if (off == wire.size()) break;
        const std::size_t n = std::min(piece, wire.size() - off);
        pending.append(wire.substr(off, n));
        off += n;
      }
      before_put();
      ec = {};
      const std::size_t used = parser.put(net::buffer(pending), ec);
      FUZZ_CHECK(used <= pending.size());
      pending.erase(0, used);
      after_put();
      want_more = ec == http::error::need_more;
      if (ec == http::error::need_buffer || want_more) ec = {};
      if (ec) break;
    }
    // The input ends: the connection closes (a body to the end of it ends
    // here; anything unfinished is a partial message).
    if (!ec && !parser.is_done() && parser.got_some()) parser.put_eof(ec);
    return ec;
  };
  const beast::error_code ref_ec = feed(
      ref, [] {}, [] {});
  const beast::error_code ec = feed(
      p,
      [&] {
        p.get().body().data = buf.data();
        p.get().body().size = buf.size();
      },
      [&] {
        FUZZ_CHECK(p.get().body().size <= buf.size());
        body.append(buf.data(), buf.size() - p.get().body().size);
      });

  if (ref_ec == http::error::body_limit) return 0;
  FUZZ_CHECK(static_cast<bool>(ec) == static_cast<bool>(ref_ec));
  FUZZ_CHECK(p.is_done() == ref.is_done());
  if (!p.is_header_done()) return 0;
  FUZZ_CHECK(ref.is_header_done());
  FUZZ_CHECK(p.get().result_int() == ref.get().result_int());
  if (!ec) FUZZ_CHECK(body == ref.get().body().substr(0, body.size()));
  if (p.is_done()) {
    FUZZ_CHECK(body == ref.get().body());
    FUZZ_CHECK(p.keep_alive() == ref.keep_alive());
  }
  // The kept fields: the reference's fields that kept_upstream_field()
  // names, as they were sent, each name's values in order. (Beast's field set
  // moves a repeated name up to its first line; the gateway keeps arrival
  // order: hence the comparison by name.)
  using Kept = std::tuple<std::string, http::field, std::string, std::string>;
  const auto lower = [](std::string_view s) {
    std::string out(s);
    for (char& c : out) c = (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c;
    return out;
  };
  std::vector<Kept> want, got;
  for (const auto& f : ref.get()) {
    const std::string_view name(f.name_string().data(), f.name_string().size());
    if (!kept_upstream_field(f.name(), name)) continue;
    want.emplace_back(lower(name), f.name(), std::string(name),
                      std::string(f.value().data(), f.value().size()));
  }
  for (std::size_t i = 0; i < p.get().size(); ++i) {
    const UpstreamHead::Field k = p.get()[i];
    got.emplace_back(lower(k.name_string), k.name, std::string(k.name_string),
                     std::string(k.value));
  }
  const auto by_name = [](const Kept& a, const Kept& b) { return std::get<0>(a) < std::get<0>(b); };
  std::stable_sort(want.begin(), want.end(), by_name);
  std::stable_sort(got.begin(), got.end(), by_name);
  FUZZ_CHECK(want == got);
  for (const http::field name : {http::field::content_type, http::field::retry_after}) {
    const auto want = ref.get()[name];
    FUZZ_CHECK(p.get()[name] == std::string_view(want.data(), want.size()));
  }
  return 0;
}
