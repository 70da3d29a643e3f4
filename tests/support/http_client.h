// A small blocking HTTP/1.1 client for integration tests, Beast-free in its
// interface. Every read has a timeout, so a broken gateway fails a test
// instead of hanging it.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace llmgate::testing {

struct HttpResponse {
  int status = 0;
  std::map<std::string, std::string> headers;  // lower-case names
  std::string body;
  std::map<std::string, std::string> trailers;
  std::string header(const std::string& name) const {
    auto it = headers.find(name);
    return it == headers.end() ? "" : it->second;
  }
};

class HttpClient {
 public:
  explicit HttpClient(std::uint16_t port,
                      std::chrono::milliseconds timeout = std::chrono::seconds(10));
  ~HttpClient();

  // One whole request/response on this connection (kept alive if allowed).
  HttpResponse request(const std::string& method, const std::string& target,
                       const std::string& body = "",
                       const std::map<std::string, std::string>& headers = {
                           {"content-type", "application/json"}});

  // Streaming: send a request and read only the response head.
  HttpResponse start(const std::string& method, const std::string& target, const std::string& body,
                     const std::map<std::string, std::string>& headers = {
                         {"content-type", "application/json"}});
  // The next complete SSE event's data (raw "data:" payload), or nullopt at
  // the end of the body. Throws on timeout.
  std::optional<std::string> next_event();
  // Reads the rest of a streamed body; returns all event payloads.
  std::vector<std::string> rest_of_events();
  // Bytes of the raw stream body read so far.
  const std::string& raw_body() const;
  void close();            // drop the connection abruptly
  bool connection_open();  // false if the server closed it

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Polls `cond` until it holds or `limit` passes; returns whether it held.
// For waiting on another process's state, never for timing assertions.
template <class Cond>
bool eventually(Cond cond, std::chrono::milliseconds limit = std::chrono::seconds(10)) {
  auto end = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < end) {
    if (cond()) return true;
    struct timespec ts {
      0, 5'000'000
    };
    nanosleep(&ts, nullptr);
  }
  return cond();
}

}  // namespace llmgate::testing
