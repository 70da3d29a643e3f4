// One exchange with a provider up to its response head (upstream_exchange.h),
// the request as it goes on the wire, and its write.
#include "gateway/proxy/upstream_exchange.h"

#include <algorithm>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/container/small_vector.hpp>
#include <cassert>
#include <charconv>
#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "config/ascii.h"
#include "gateway/http/headers.h"
#include "gateway/proxy/attempt_result.h"
#include "gateway/proxy/upstream_body.h"

namespace llmgate::gateway {
namespace {

using Clock = std::chrono::steady_clock;
constexpr auto kUseTuple = net::as_tuple(net::use_awaitable);

// now + d, never past `by` (d may be max(): none of its own).
Clock::time_point within(Clock::time_point now, Clock::duration d, Clock::time_point by) {
  return d >= by - now ? by : now + d;
}

}  // namespace

std::string Exchanged::why_no_head() const {
  switch (status) {
    case Status::kHead:
      return {};
    case Status::kConnectError:
      return "cannot connect: " + error.substr(0, 200);
    case Status::kWriteError:
      return "cannot send the request: " + ec.message();
    case Status::kHeadError:
      return head_timed_out() ? "no answer in time"
                              : "the connection closed before an answer (" + ec.message() + ")";
    case Status::kCancelled:
      return "cancelled";
  }
  return {};
}

net::awaitable<Exchanged> exchange_head(providers::ConnectionPool& pool, providers::Lease& lease,
                                        std::optional<UpstreamParser>& parser,
                                        const UpstreamMessage& m, const ExchangeTimes& times,
                                        bool may_retry_stale) {
  Exchanged x;
  for (bool may_retry = may_retry_stale;; may_retry = false) {
    const Clock::time_point acquire_start = Clock::now();
    // (An idle connection without acquire()'s coroutine frame.)
    lease = may_retry ? pool.take_idle() : providers::Lease();
    if (!lease) {
      providers::AcquireResult acq =
          co_await pool.acquire(within(acquire_start, times.connect, times.by), may_retry);
      if (!acq.lease) {
        x.status = Exchanged::Status::kConnectError;
        x.error = std::move(acq.error);
        co_return x;
      }
      lease = std::move(acq.lease);
    }
    const Clock::time_point writing = Clock::now();
    x.acquire_time = writing - acquire_start;
    // The first token is timed from the moment the request left. Written at
    // once (a request that fits the socket's buffer), that is now: a clock
    // read after the write could come late -- the worker preempted between
    // the two -- and make a 5 ms first token read as 0.1 ms.
    UpstreamWrite write(lease, m);
    beast::error_code wec = write.error();
    const bool at_once = write.done();
    if (!at_once) wec = co_await write.rest(within(Clock::now(), times.write, times.by));
    if (wec) {
      if (lease.reused() && may_retry) continue;
      x.status = Exchanged::Status::kWriteError;
      x.ec = wec;
      co_return x;
    }
    x.sent = at_once ? writing : Clock::now();
    parser.emplace();
    parser->body_limit(boost::none);  // a body is bounded by its reader
    parser->header_limit(kMaxUpstreamHeader);
    lease->stream.tcp().expires_at(within(x.sent, times.head, times.by));
    lease->reserve_for_head();
    const std::size_t buffered_before = lease->buffer.size();
    auto [hec, hn] =
        co_await http::async_read_header(lease->stream, lease->buffer, *parser, kUseTuple);
    if (LLMGATE_CANCELLED()) {
      x.status = Exchanged::Status::kCancelled;
      co_return x;
    }
    if (!hec) {
      x.status = Exchanged::Status::kHead;
      co_return x;
    }
    // A reused connection the peer had closed as we took it says nothing
    // about the provider: once more on a fresh one -- only when nothing of
    // an answer came at all: no head parsed, and no byte of one waiting in
    // the buffer (a head cut short leaves its bytes there). (Over TLS a
    // peer that closes without close_notify, as most servers end an idle
    // connection, reads as a truncated stream.)
    const bool stale = lease.reused() && may_retry && buffered_before == 0 && hn == 0 &&
                       lease->buffer.size() == 0 &&
                       (hec == http::error::end_of_stream || hec == net::error::connection_reset ||
                        hec == net::error::eof || hec == net::ssl::error::stream_truncated);
    if (stale) continue;
    x.status = Exchanged::Status::kHeadError;
    x.ec = hec;
    co_return x;
  }
}

// The deployment's chat target below base_url's path: the protocol's
// (path and query), its path replaced by chat_path (with {model} put in)
// when one is set, then the provider's query.
std::string_view upstream_target(std::string& target, const config::Provider& p,
                                 const std::string& model, std::string_view protocol_target) {
  const auto q = protocol_target.find('?');
  const std::string_view protocol_path = protocol_target.substr(0, q);
  const std::string_view protocol_query =
      q == std::string_view::npos ? std::string_view() : protocol_target.substr(q + 1);
  // The path as up to two pieces (chat_path's prefix and the protocol's
  // path), so that the usual target is built in one piece.
  std::string_view path_head, path_tail = protocol_path;
  if (!p.chat_path.empty()) {
    // chat_path is chat's; the other endpoints take the same prefix when it
    // ends with /chat/completions (Azure's /deployments/{model}/embeddings).
    constexpr std::string_view kChat = "/chat/completions";
    const std::string_view chat(p.chat_path);
    const bool other_api = protocol_path == "/responses" ||
                           protocol_path.substr(0, 11) == "/responses/" ||
                           protocol_path == "/embeddings" || protocol_path == "/completions";
    if (!other_api) {
      path_tail = chat;
    } else if (chat.size() >= kChat.size() && chat.substr(chat.size() - kChat.size()) == kChat) {
      path_head = chat.substr(0, chat.size() - kChat.size());
    }
  }
  assert(protocol_target.data() < target.data() ||
         protocol_target.data() >= target.data() + target.capacity());  // not a view into it
  target.clear();
  target.reserve(p.base_url.path_prefix.size() + path_head.size() + path_tail.size() +
                 protocol_query.size() + p.query.size() + 2);
  target.append(p.base_url.path_prefix).append(path_head).append(path_tail);
  if (auto at = target.find("{model}", p.base_url.path_prefix.size()); at != std::string::npos) {
    std::string encoded;
    for (unsigned char c : model) {
      // A model name is printable ASCII; what would end or split a path is encoded.
      if (c == '?' || c == '#' || c == '%' || c == ' ') {
        static constexpr char kHex[] = "0123456789ABCDEF";
        encoded += '%';
        encoded += kHex[c >> 4];
        encoded += kHex[c & 15];
      } else {
        encoded += static_cast<char>(c);
      }
    }
    target.replace(at, 7, encoded);
  }
  for (std::string_view query : {protocol_query, std::string_view(p.query)}) {
    if (!query.empty())
      target.append(target.find('?') == std::string::npos ? "?" : "&").append(query);
  }
  return target;
}

namespace {

constexpr std::string_view kCrlf = "\r\n";

// The fields the gateway sets on an upstream request, in order: a later one
// of a name replaces an earlier one (as Beast's set() did), and each
// replaces what the client sent under that name.
class SetFields {
 public:
  void set(std::string_view name, std::string_view value) {
    lines_.erase(std::remove_if(lines_.begin(), lines_.end(),
                                [&](const Line& l) { return beast::iequals(l.name, name); }),
                 lines_.end());
    lines_.push_back({name, value});
  }
  // Neither the client's `name` nor one of ours.
  void drop(std::string_view name) {
    set(name, {});
    lines_.back().dropped = true;
  }
  bool has(std::string_view name) const {
    return std::any_of(lines_.begin(), lines_.end(),
                       [&](const Line& l) { return config::ascii_iequals(l.name, name); });
  }
  void append_to(std::string& out) const {
    for (const Line& l : lines_) {
      if (!l.dropped) append_field_line(out, l.name, l.value);
    }
  }

 private:
  struct Line {
    std::string_view name, value;
    bool dropped = false;
  };
  boost::container::small_vector<Line, 16> lines_;
};

}  // namespace

std::optional<RequestTrace> begin_trace(const Snapshot& snapshot, const Request& client_request,
                                        const RequestContext& rc) {
  if (!snapshot.tracer) return std::nullopt;
  std::string tracestate;
  for (const auto& f : client_request) {
    if (beast::iequals(f.name_string(), "tracestate"))
      tracestate.append(tracestate.empty() ? "" : ",").append(f.value());
  }
  return snapshot.tracer->begin(client_request["traceparent"], tracestate, rc.received);
}

UpstreamMessage make_upstream_request(http::verb method, std::string_view target, std::string body,
                                      bool stream, const Request& client_request,
                                      const RequestContext& rc, std::string_view via_name,
                                      const config::Provider& provider,
                                      const providers::UpstreamProtocol& protocol,
                                      std::string_view traceparent, std::string_view tracestate,
                                      const providers::cloud::Credential* credential) {
  const auto& url = provider.base_url;
  // End-to-end client headers pass through (RFC 9110 §7.6); hop-by-hop ones,
  // those the Connection header names, and the client's credentials do not.
  // Every Connection line counts (a second one must not smuggle a header
  // past the hop-by-hop filter), and so does every Via line.
  ListTokens hop;
  // The Via value: the client's, then ours (inline for the usual one).
  boost::container::small_vector<char, 128> via;
  auto via_append = [&via](std::string_view piece) {
    via.insert(via.end(), piece.begin(), piece.end());
  };
  for (const auto& f : client_request) {
    if (f.name() == http::field::connection) {
      add_list_tokens(f.value(), hop);
    } else if (f.name() == http::field::via) {
      via_append(via.empty() ? "" : ", ");
      via_append(f.value());
    }
  }
  via_append(via.empty() ? "" : ", ");
  via_append(rc.version == 10 ? "1.0 " : "1.1 ");
  via_append(via_name);
  const std::string host = url.authority();
  SetFields set;
  set.set("Via", std::string_view(via.data(), via.size()));
  set.set("Host", host);
  if (!body.empty()) set.set("Content-Type", "application/json");
  set.set("Accept", stream ? providers::content_type(protocol.framing()) : "application/json");
  set.set("User-Agent", "llmgate/0.1");
  set.set("x-request-id", rc.request_id);  // the client's own, or the one we made
  if (!traceparent.empty()) {
    // Traced: the upstream's parent is the attempt's span (the client's
    // tracestate goes on only if well-formed).
    set.set("traceparent", traceparent);
    tracestate.empty() ? set.drop("tracestate") : set.set("tracestate", tracestate);
  }
  // The key: in the header the provider names (Authorization as a Bearer
  // token, any other alone: Azure's api-key), else where the protocol puts
  // it; then the protocol's fixed headers (anthropic-version).
  const auto& key_header = provider.api_key_header;
  const bool own_key_header = !key_header.empty() && !provider.api_key.empty();
  std::string bearer;
  if (own_key_header) {
    if (beast::iequals(key_header, "authorization")) {
      bearer = "Bearer " + provider.api_key;
      set.set(key_header, bearer);
    } else {
      set.set(key_header, provider.api_key);
    }
  }
  const auto protocol_headers =
      protocol.headers(own_key_header ? std::string() : provider.api_key, provider);
  for (const auto& [name, value] : protocol_headers) set.set(name, value);
  for (const auto& [name, value] : provider.headers) set.set(name, value);
  if (credential && !credential->bearer.empty()) {
    bearer = "Bearer " + credential->bearer;
    set.set("Authorization", bearer);
  }
  const providers::cloud::AwsCredentials* aws =
      credential && credential->aws ? &*credential->aws : nullptr;
  // Signed last, over what is sent: the method, the target, the Host, the
  // Content-Type and the body (the other headers are not signed, as AWS's
  // SDKs sign them not either).
  providers::cloud::SigV4Headers signed_with;
  if (aws) {
    const std::string_view t = target;
    const std::size_t q = t.find('?');
    providers::cloud::SigV4Request r;
    r.method = http::to_string(method);
    r.host = host;
    r.path = t.substr(0, q);
    r.query = q == std::string_view::npos ? std::string_view() : t.substr(q + 1);
    if (!body.empty()) r.headers.emplace_back("content-type", "application/json");
    r.payload = body;
    signed_with = providers::cloud::sigv4_sign(r, *aws, provider.aws_region, "bedrock",
                                               std::chrono::system_clock::now());
    set.set("x-amz-date", signed_with.amz_date);
    set.set("x-amz-content-sha256", signed_with.content_sha256);
    if (!signed_with.security_token.empty())
      set.set("x-amz-security-token", signed_with.security_token);
    set.set("Authorization", signed_with.authorization);
  }

  UpstreamMessage m;
  std::string& h = m.head;
  h.reserve(512 + target.size());
  const auto verb = http::to_string(method);
  h.append(verb.data(), verb.size())
      .append(1, ' ')
      .append(target)
      .append(std::string_view(" HTTP/1.1\r\n"));
  for (const auto& f : client_request) {
    const std::string_view name = f.name_string();
    if (is_hop_by_hop(name, hop) || is_gateway_owned(name) || f.name() == http::field::via ||
        set.has(name)) {
      continue;
    }
    append_field_line(h, name, f.value());
  }
  set.append_to(h);
  // As prepare_payload: a length for a body, and for an empty one where the
  // method expects a body.
  if (!body.empty() || method == http::verb::post || method == http::verb::put ||
      method == http::verb::options) {
    char n[24];
    const auto r = std::to_chars(n, n + sizeof n, body.size());
    h.append(std::string_view("Content-Length: ")).append(n, r.ptr).append(kCrlf);
  }
  h.append(kCrlf);
  m.body = std::move(body);
  return m;
}

UpstreamWrite::UpstreamWrite(providers::Lease& lease, const UpstreamMessage& m)
    : lease_(lease), w_(m.head, m.body) {
  // (As Asio's own first attempt at a write would, without its operation.)
  if (lease->stream.tls() == nullptr) ec_ = w_.send_now(lease->stream.tcp().socket());
}

net::awaitable<beast::error_code> UpstreamWrite::rest(Clock::time_point deadline) {
  lease_->stream.tcp().expires_at(deadline);
  auto [ec, n] = co_await net::async_write(lease_->stream, w_.rest, kUseTuple);
  ec_ = ec;
  co_return ec;
}

net::awaitable<WholeAnswer> exchange_whole(providers::ConnectionPool& pool,
                                           const UpstreamMessage& m, const ExchangeTimes& times,
                                           std::size_t limit) {
  providers::Lease lease;
  std::optional<UpstreamParser> parser;
  const Exchanged x = co_await exchange_head(pool, lease, parser, m, times);
  if (x.status != Exchanged::Status::kHead) co_return WholeAnswer{0, {}, x.why_no_head()};
  std::string body;
  const beast::error_code ec = co_await read_whole(lease, *parser, body, limit + 1, times.by);
  if (!parser->is_done() || body.size() > limit)
    co_return WholeAnswer{0, {}, "no whole answer: " + (ec ? ec.message() : "too large")};
  if (parser->keep_alive()) lease.give_back();
  co_return WholeAnswer{static_cast<int>(parser->get().result_int()), std::move(body), {}};
}

}  // namespace llmgate::gateway
