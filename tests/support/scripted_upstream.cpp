#include "tests/support/scripted_upstream.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <mutex>
#include <stdexcept>
#include <thread>

namespace llmgate::testing {

std::string sse_head(const std::string& content_type) {
  return "HTTP/1.1 200 OK\r\ncontent-type: " + content_type +
         "\r\ntransfer-encoding: chunked\r\n\r\n";
}

std::string chunk(const std::string& data) {
  char size[32];
  std::snprintf(size, sizeof size, "%zx\r\n", data.size());
  return size + data + "\r\n";
}

std::string last_chunk() { return "0\r\n\r\n"; }
std::string event(const std::string& json) { return "data: " + json + "\n\n"; }

std::string role_event() {
  return event(
      R"({"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]})");
}

std::string token_event(int i) {
  return event(
      R"({"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"tok)" +
      std::to_string(i) + R"( "},"finish_reason":null}]})");
}

std::string finish_event() {
  return event(
      R"({"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{},"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":2,"total_tokens":5}})");
}

std::string done_event() { return "data: [DONE]\n\n"; }

std::string status_response(int status, const std::string& extra_headers, const std::string& body) {
  return "HTTP/1.1 " + std::to_string(status) + " Scripted\r\ncontent-type: application/json\r\n" +
         extra_headers + "content-length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
}

Script healthy_stream(int tokens) {
  std::string body = role_event();
  for (int i = 0; i < tokens; ++i) body += token_event(i);
  body += finish_event() + done_event();
  return {{Step::Kind::kSend, sse_head() + chunk(body) + last_chunk()}, {Step::Kind::kClose}};
}

Script kept_alive_stream(int tokens) {
  Script s = healthy_stream(tokens);
  s.back() = {Step::Kind::kKeepAlive};
  return s;
}

struct ScriptedUpstream::Impl {
  Script script;
  bool read_first = true;
  int listen_fd = -1;
  std::uint16_t port = 0;
  std::atomic<bool> stopping{false};
  std::atomic<int> gates_open{0};
  std::atomic<std::size_t> requests_played{0};  // requests whose part has been chosen
  mutable std::mutex mu;
  ScriptedStats stats;
  std::string last_request;
  std::vector<int> fds;  // open connection fds, for stop
  std::vector<std::thread> threads;
  std::thread acceptor;

  // Reads one request (head + Content-Length body). False if the peer closed.
  bool read_request(int fd) {
    std::string data;
    char buf[4096];
    std::size_t head_end = std::string::npos;
    while (head_end == std::string::npos) {
      ssize_t n = ::recv(fd, buf, sizeof buf, 0);
      if (n <= 0) return false;
      data.append(buf, static_cast<std::size_t>(n));
      head_end = data.find("\r\n\r\n");
    }
    std::size_t length = 0;
    std::string lower = data.substr(0, head_end);
    for (auto& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (auto p = lower.find("content-length:"); p != std::string::npos) {
      length = std::stoul(lower.substr(p + 15));
    }
    while (data.size() < head_end + 4 + length) {
      ssize_t n = ::recv(fd, buf, sizeof buf, 0);
      if (n <= 0) return false;
      data.append(buf, static_cast<std::size_t>(n));
    }
    std::lock_guard lock(mu);
    ++stats.requests;
    last_request = data;
    return true;
  }

  bool send_all(int fd, const char* p, std::size_t n) {
    while (n > 0) {
      ssize_t w = ::send(fd, p, n, MSG_NOSIGNAL);
      if (w <= 0) return false;
      p += w;
      n -= static_cast<std::size_t>(w);
    }
    return true;
  }

  // Waits for EOF/reset from the peer, or until `limit` (zero: forever) or stop.
  bool wait_peer_close(int fd, std::chrono::milliseconds limit) {
    auto end = std::chrono::steady_clock::now() + limit;
    char buf[4096];
    while (!stopping.load()) {
      pollfd p{fd, POLLIN, 0};
      if (::poll(&p, 1, 20) > 0) {
        ssize_t n = ::recv(fd, buf, sizeof buf, 0);
        if (n <= 0) return true;
      }
      if (limit.count() > 0 && std::chrono::steady_clock::now() >= end) return false;
    }
    return false;
  }

  // The steps request `n` plays: its part of the script (Step::kNext).
  std::pair<std::size_t, std::size_t> part(std::size_t n) const {
    std::size_t begin = 0;
    for (std::size_t i = 0; i < script.size(); ++i) {
      if (script[i].kind != Step::Kind::kNext) continue;
      if (n == 0) return {begin, i};
      --n;
      begin = i + 1;
    }
    return {begin, script.size()};
  }

  void serve(int fd) {
    bool peer_gone = false;
    int gates = 0;  // kGate steps reached
    for (bool next = true; next;) {
      next = false;
      if (read_first && !read_request(fd)) {
        peer_gone = true;
        break;
      }
      const auto [begin, end] = part(requests_played++);
      for (std::size_t i = begin; i < end; ++i) {
        const Step& step = script[i];
        if (stopping.load()) break;
        bool ok = true;
        switch (step.kind) {
          case Step::Kind::kSend:
            ok = send_all(fd, step.bytes.data(), step.bytes.size());
            break;
          case Step::Kind::kSleep:
            if (wait_peer_close(fd, step.ms)) ok = false;
            break;
          case Step::Kind::kTrickle:
            for (char c : step.bytes) {
              if (!send_all(fd, &c, 1) || wait_peer_close(fd, step.ms)) {
                ok = false;
                break;
              }
            }
            break;
          case Step::Kind::kGate:
            ++gates;
            while (ok && gates_open.load() < gates && !stopping.load())
              ok = !wait_peer_close(fd, std::chrono::milliseconds(5));
            break;
          case Step::Kind::kHold:
            wait_peer_close(fd, std::chrono::milliseconds(0));
            ok = false;
            break;
          case Step::Kind::kFlood: {
            std::string block;
            for (int i = 0; i < 64; ++i) block += token_event(i);
            std::string c = chunk(block);
            while (!stopping.load() && send_all(fd, c.data(), c.size())) {
              std::lock_guard lock(mu);
              stats.flood_bytes += c.size();
            }
            ok = false;
            break;
          }
          case Step::Kind::kClose:
            // Half-close, then wait briefly for the gateway to close too.
            ::shutdown(fd, SHUT_WR);
            wait_peer_close(fd, std::chrono::milliseconds(2000));
            ok = false;
            break;
          case Step::Kind::kNext:  // parts end before it
            break;
          case Step::Kind::kKeepAlive:
            next = read_first;
            break;
          case Step::Kind::kReset: {
            linger l{1, 0};
            ::setsockopt(fd, SOL_SOCKET, SO_LINGER, &l, sizeof l);
            ok = false;
            break;
          }
        }
        if (!ok) {
          peer_gone = step.kind != Step::Kind::kClose && step.kind != Step::Kind::kReset;
          break;
        }
      }
    }
    std::lock_guard lock(mu);
    if (peer_gone) ++stats.peer_closed;
    --stats.open;
    std::erase(fds, fd);
    ::close(fd);
  }
};

ScriptedUpstream::ScriptedUpstream(Script script, bool read_request)
    : impl_(std::make_unique<Impl>()) {
  impl_->script = std::move(script);
  impl_->read_first = read_request;
}

void ScriptedUpstream::open_gate() { ++impl_->gates_open; }

ScriptedUpstream::~ScriptedUpstream() {
  impl_->stopping = true;
  if (impl_->listen_fd >= 0) ::shutdown(impl_->listen_fd, SHUT_RDWR);
  if (impl_->acceptor.joinable()) impl_->acceptor.join();
  {
    std::lock_guard lock(impl_->mu);
    for (int fd : impl_->fds) ::shutdown(fd, SHUT_RDWR);
  }
  for (auto& t : impl_->threads) t.join();
  if (impl_->listen_fd >= 0) ::close(impl_->listen_fd);
}

std::uint16_t ScriptedUpstream::start() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 || ::listen(fd, 128) != 0) {
    throw std::runtime_error("scripted upstream: cannot listen");
  }
  socklen_t len = sizeof addr;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  impl_->listen_fd = fd;
  impl_->port = ntohs(addr.sin_port);
  impl_->acceptor = std::thread([impl = impl_.get()] {
    for (;;) {
      int c = ::accept(impl->listen_fd, nullptr, nullptr);
      if (c < 0) {
        if (impl->stopping.load()) return;
        if (errno == EINTR) continue;
        return;
      }
      int one = 1;
      ::setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
      std::lock_guard lock(impl->mu);
      ++impl->stats.connections;
      ++impl->stats.open;
      impl->fds.push_back(c);
      impl->threads.emplace_back([impl, c] { impl->serve(c); });
    }
  });
  return impl_->port;
}

std::uint16_t ScriptedUpstream::port() const { return impl_->port; }

ScriptedStats ScriptedUpstream::stats() const {
  std::lock_guard lock(impl_->mu);
  return impl_->stats;
}

std::string ScriptedUpstream::last_request() const {
  std::lock_guard lock(impl_->mu);
  return impl_->last_request;
}

}  // namespace llmgate::testing
