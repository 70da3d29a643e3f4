// A scripted upstream for conformance tests: a loopback TCP server that reads
// each HTTP request and then plays a script of raw bytes, pauses, closes and
// resets — the faults a real provider produces (headers then silence, a cut
// in the middle of an event, a reset, a trickle...). Blocking sockets, one
// thread per connection; for tests only.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace llmgate::testing {

struct Step {
  enum class Kind {
    kSend,       // write `bytes`
    kSleep,      // pause `ms`
    kClose,      // close normally (FIN)
    kReset,      // close with RST (SO_LINGER 0)
    kHold,       // stay silent until the peer closes (or the server stops)
    kTrickle,    // write `bytes` one byte every `ms`
    kFlood,      // write token events as fast as the peer takes them, until it closes
    kGate,       // the n-th of a script: wait until the test has called open_gate()
                 // n times (or the peer closes)
    kNext,       // the end of one request's part: request N plays the N-th part
                 // (the last part plays for every request after it)
    kKeepAlive,  // the answer is whole and the connection stays: read the next
                 // request on it and play that one's part (a real provider's
                 // kept-alive connection)
  };
  // Positional, each after the first optional: {Step::Kind::kClose},
  // {Step::Kind::kSend, bytes}, {Step::Kind::kTrickle, bytes, 100ms}.
  Step(Kind k, std::string b = {}, std::chrono::milliseconds m = std::chrono::milliseconds(0))
      : kind(k), bytes(std::move(b)), ms(m) {}
  Kind kind;
  std::string bytes;
  std::chrono::milliseconds ms{0};
};
using Script = std::vector<Step>;

// Script building blocks (an OpenAI-compatible chunked SSE response).
std::string sse_head(const std::string& content_type = "text/event-stream");
std::string chunk(const std::string& data);  // one HTTP/1.1 chunk
std::string last_chunk();                    // "0\r\n\r\n"
std::string event(const std::string& json);  // "data: <json>\n\n"
std::string role_event();                    // the role-only first chunk
std::string token_event(int i);              // one content token
std::string finish_event();                  // finish_reason "stop" + usage
std::string done_event();                    // "data: [DONE]\n\n"
std::string status_response(
    int status, const std::string& extra_headers = "",
    const std::string& body = R"({"error":{"message":"scripted","type":"x"}})");
// The whole of a healthy streamed answer of `tokens` tokens, then a clean end.
Script healthy_stream(int tokens);
// The same answer to every request, on kept-alive connections.
Script kept_alive_stream(int tokens);

struct ScriptedStats {
  std::uint64_t connections = 0;  // accepted
  std::uint64_t requests = 0;     // requests read
  std::uint64_t peer_closed = 0;  // connections the gateway closed (EOF/reset seen)
  std::uint64_t open = 0;         // connections open now
  std::uint64_t flood_bytes = 0;  // bytes a kFlood step managed to write
};

class ScriptedUpstream {
 public:
  // `read_request`: read each request before playing the script (false: play
  // at once, e.g. to answer a TLS ClientHello with plain HTTP).
  explicit ScriptedUpstream(Script script, bool read_request = true);
  ~ScriptedUpstream();  // stops: closes everything, joins every thread
  std::uint16_t start();
  std::uint16_t port() const;
  ScriptedStats stats() const;
  std::string last_request() const;  // head and body of the last request read
  void open_gate();                  // every connection at (or to reach) its next kGate goes on

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace llmgate::testing
