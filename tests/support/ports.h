// Loopback ports for tests: a free one, and one that refuses connections.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdint>

namespace llmgate::testing {

// Binds `fd` (a TCP socket) to a free port on 127.0.0.1: that port.
inline std::uint16_t bind_loopback(int fd) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  socklen_t len = sizeof a;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  return ntohs(a.sin_port);
}

// A port that refuses connections for as long as this lives: a socket bound
// to it that does not listen (the kernel answers a SYN with a reset). Held,
// not bound and closed again: a freed port may be handed to the next process
// that listens on port 0 -- another test's gateway, when tests run in
// parallel -- and a "refused" upstream would then answer.
class RefusedPort {
 public:
  RefusedPort() : fd_(::socket(AF_INET, SOCK_STREAM, 0)), port_(bind_loopback(fd_)) {}
  RefusedPort(const RefusedPort&) = delete;
  RefusedPort& operator=(const RefusedPort&) = delete;
  ~RefusedPort() { ::close(fd_); }
  std::uint16_t port() const { return port_; }

 private:
  int fd_;
  std::uint16_t port_;
};

}  // namespace llmgate::testing
