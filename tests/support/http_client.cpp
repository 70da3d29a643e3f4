#include "tests/support/http_client.h"

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <cctype>
#include <ctime>
#include <stdexcept>

#include "providers/sse_parser.h"

namespace llmgate::testing {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = boost::beast::http;
using tcp = net::ip::tcp;

struct HttpClient::Impl {
  net::io_context io;
  tcp::socket socket{io};
  beast::flat_buffer buffer;
  std::chrono::milliseconds timeout;
  std::unique_ptr<http::response_parser<http::buffer_body>> parser;
  providers::SseParser sse{1 << 24};
  std::vector<std::string> ready_events;
  std::string raw;
  bool ended = false;

  void set_timeouts() {
    struct timeval tv;
    tv.tv_sec = timeout.count() / 1000;
    tv.tv_usec = (timeout.count() % 1000) * 1000;
    setsockopt(socket.native_handle(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    setsockopt(socket.native_handle(), SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  }

  void send(const std::string& method, const std::string& target, const std::string& body,
            const std::map<std::string, std::string>& headers) {
    http::request<http::string_body> req{http::string_to_verb(method), target, 11};
    req.set(http::field::host, "127.0.0.1");
    for (const auto& [k, v] : headers) req.set(k, v);
    req.body() = body;
    req.prepare_payload();
    http::write(socket, req);
  }

  static HttpResponse head_of(const http::response_header<>& h) {
    HttpResponse r;
    r.status = static_cast<int>(h.result_int());
    for (const auto& f : h) {
      std::string name(f.name_string());
      for (auto& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      r.headers[name] = std::string(f.value());
    }
    return r;
  }
};

HttpClient::HttpClient(std::uint16_t port, std::chrono::milliseconds timeout)
    : impl_(std::make_unique<Impl>()) {
  impl_->timeout = timeout;
  impl_->socket.connect(tcp::endpoint(net::ip::make_address("127.0.0.1"), port));
  impl_->set_timeouts();
}

HttpClient::~HttpClient() = default;

HttpResponse HttpClient::request(const std::string& method, const std::string& target,
                                 const std::string& body,
                                 const std::map<std::string, std::string>& headers) {
  impl_->send(method, target, body, headers);
  http::response_parser<http::string_body> p;
  p.body_limit(1 << 26);
  http::read(impl_->socket, impl_->buffer, p);
  HttpResponse r = Impl::head_of(p.get().base());
  r.body = p.get().body();
  // Beast's parser adds a chunked body's trailer fields to the head: those
  // the Trailer header names are the trailers.
  std::string names = r.header("trailer");
  for (std::size_t at = 0; at < names.size();) {
    std::size_t end = names.find(',', at);
    if (end == std::string::npos) end = names.size();
    std::string name = names.substr(at, end - at);
    name.erase(0, name.find_first_not_of(' '));
    name.erase(name.find_last_not_of(' ') + 1);
    for (auto& ch : name) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    if (auto it = r.headers.find(name); it != r.headers.end()) r.trailers[name] = it->second;
    at = end + 1;
  }
  return r;
}

HttpResponse HttpClient::start(const std::string& method, const std::string& target,
                               const std::string& body,
                               const std::map<std::string, std::string>& headers) {
  impl_->send(method, target, body, headers);
  impl_->parser = std::make_unique<http::response_parser<http::buffer_body>>();
  impl_->parser->body_limit(boost::none);
  impl_->sse = providers::SseParser(1 << 24);
  impl_->ready_events.clear();
  impl_->raw.clear();
  impl_->ended = false;
  http::read_header(impl_->socket, impl_->buffer, *impl_->parser);
  return Impl::head_of(impl_->parser->get().base());
}

std::optional<std::string> HttpClient::next_event() {
  auto& p = *impl_->parser;
  while (impl_->ready_events.empty()) {
    if (impl_->ended || p.is_done()) {
      impl_->ended = true;
      return std::nullopt;
    }
    char buf[4096];
    p.get().body().data = buf;
    p.get().body().size = sizeof buf;
    beast::error_code ec;
    http::read_some(impl_->socket, impl_->buffer, p, ec);
    if (ec == http::error::need_buffer) ec = {};
    std::size_t got = sizeof buf - p.get().body().size;
    impl_->raw.append(buf, got);
    impl_->sse.feed(std::string_view(buf, got), [&](const providers::Frame& e) {
      if (e.has_data) impl_->ready_events.emplace_back(e.data);
    });
    if (ec) {
      if (ec == net::error::would_block || ec == net::error::try_again) {
        throw std::runtime_error("timed out waiting for an event");
      }
      impl_->ended = true;
    }
  }
  std::string e = std::move(impl_->ready_events.front());
  impl_->ready_events.erase(impl_->ready_events.begin());
  return e;
}

std::vector<std::string> HttpClient::rest_of_events() {
  std::vector<std::string> out;
  while (auto e = next_event()) out.push_back(std::move(*e));
  return out;
}

const std::string& HttpClient::raw_body() const { return impl_->raw; }

void HttpClient::close() {
  beast::error_code ec;
  impl_->socket.shutdown(tcp::socket::shutdown_both, ec);
  impl_->socket.close(ec);
}

bool HttpClient::connection_open() {
  char b;
  ssize_t n = ::recv(impl_->socket.native_handle(), &b, 1, MSG_PEEK | MSG_DONTWAIT);
  return n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
}

}  // namespace llmgate::testing
