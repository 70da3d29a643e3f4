// The relay's steady state allocates nothing per event (issue 6, "the hot
// path"), and a request a bounded number of times: a counting global operator
// new around a real gateway in process.
//
// The same streamed request is relayed with 20 and with 400 content tokens;
// everything per request (the route, the headers, the log line; on new
// connections the connections and the scripted upstream's thread) is the
// same for both, so the difference in allocations, divided by the 380 extra
// events, is what one event costs. The upstream sends its whole answer in one
// write and the client reads into a fixed buffer, so neither allocates per
// event either. Measured on kept-alive connections (a client's and the
// pool's, as in production) and on a new pair per request.
//
// Its own executable: replacing operator new affects the whole program.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <malloc.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "config/config.h"
#include "gateway/server/gateway.h"
#include "tests/support/scripted_upstream.h"

namespace {
std::atomic<std::uint64_t> g_allocations{0};
// Asio (header-only: compiled into this program) takes coroutine frames and
// handler memory that its per-thread cache cannot recycle (a frame over 1 KiB,
// or a third at once) from aligned_alloc, not operator new: counted apart.
std::atomic<std::uint64_t> g_asio_allocations{0};
}  // namespace

extern "C" void* __libc_memalign(std::size_t alignment, std::size_t size);
extern "C" void* aligned_alloc(std::size_t alignment, std::size_t size) noexcept {
  g_asio_allocations.fetch_add(1, std::memory_order_relaxed);
  return __libc_memalign(alignment, size);
}

void* operator new(std::size_t n) {
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(n ? n : 1)) return p;
  throw std::bad_alloc();
}
void* operator new[](std::size_t n) { return operator new(n); }
void* operator new(std::size_t n, std::align_val_t a) {
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  if (void* p = __libc_memalign(static_cast<std::size_t>(a), n ? n : 1)) {
    return p;
  }
  throw std::bad_alloc();
}
void* operator new[](std::size_t n, std::align_val_t a) { return operator new(n, a); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
void operator delete(void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete(void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }

namespace llmgate {
namespace {

using testing::ScriptedUpstream;

int connect_to(std::uint16_t port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

// One streamed request on `fd`; returns the bytes read. With `kept_alive`
// it reads until the answer's last chunk (and its trailers) has arrived, and
// the connection stays open for the next request; else until the gateway
// closes (the request said Connection: close). [DONE] and the last chunk are
// looked for across reads too: the last 5 bytes carry over. No allocation
// per read.
std::size_t stream_on(int fd, const char* request, std::size_t request_len, bool kept_alive,
                      bool& saw_done) {
  (void)!write(fd, request, request_len);
  char buf[5 + 8192];
  std::size_t carry = 0, total = 0;
  saw_done = false;
  bool last_chunk = false;  // "\r\n0\r\n" after [DONE]
  for (;;) {
    ssize_t n = read(fd, buf + carry, sizeof buf - carry);
    if (n <= 0) break;
    total += static_cast<std::size_t>(n);
    const std::size_t have = carry + static_cast<std::size_t>(n);
    const char* from = buf;
    if (!saw_done) {
      if (const void* d = memmem(buf, have, "[DONE]", 6)) {
        saw_done = true;
        from = static_cast<const char*>(d) + 6;
      }
    }
    if (saw_done && !last_chunk &&
        memmem(from, static_cast<std::size_t>(buf + have - from), "\r\n0\r\n", 5)) {
      last_chunk = true;
    }
    // The last chunk's trailer section ends with an empty line.
    if (kept_alive && last_chunk && have >= 4 && std::memcmp(buf + have - 4, "\r\n\r\n", 4) == 0) {
      break;
    }
    carry = std::min<std::size_t>(have, 5);
    std::memmove(buf, buf + have - carry, carry);
  }
  return total;
}

// One streamed request on a new connection that it closes.
std::size_t stream_once(std::uint16_t port, const char* request, std::size_t request_len,
                        bool& saw_done) {
  saw_done = false;
  const int fd = connect_to(port);
  if (fd < 0) return 0;
  const std::size_t n = stream_on(fd, request, request_len, false, saw_done);
  close(fd);
  return n;
}

struct Measured {
  std::uint64_t allocations = 0;       // operator new
  std::uint64_t asio_allocations = 0;  // aligned_alloc (asio's frames and handlers)
  std::size_t bytes = 0;
  int done = 0;
};

// One worker, one deployment at the scripted upstream on port `up`, with a
// provider's and a model's names as long as real ones (over the 15
// characters a std::string holds without an allocation).
std::shared_ptr<const config::Config> one_worker_config(std::uint16_t up) {
  return config::parse_config(R"(
server: {listeners: [{address: 127.0.0.1, port: 0}], workers: 1}
routing: {exploration: 0}
providers: [{name: openai-us-east, base_url: "http://127.0.0.1:)" +
                                  std::to_string(up) + R"(/v1"}]
models: [{name: gpt-4o-mini, deployments: [{provider: openai-us-east, model: gpt-4o-mini-2024-07-18}]}]
)",
                              "relay_alloc.yaml");
}

enum class Connections {
  kKeptAlive,  // as the OpenAI SDK and providers use them: one per client, pooled upstream
  kNewEach,    // a new client and upstream connection per request
};

// `requests` streamed requests through one gateway worker, from `clients`
// threads at once (so several relays are in flight together).
Measured relay(int tokens, int requests, int clients, Connections connections) {
  const bool kept_alive = connections == Connections::kKeptAlive;
  ScriptedUpstream upstream(kept_alive ? testing::kept_alive_stream(tokens)
                                       : testing::healthy_stream(tokens));
  const std::uint16_t up = upstream.start();
  gateway::Gateway gw(one_worker_config(up));
  const std::uint16_t port = gw.start().at(0);
  const std::string body =
      R"({"model":"gpt-4o-mini","stream":true,"messages":[{"role":"user","content":"hi"}]})";
  const std::string request =
      std::string("POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1:8080\r\n") +
      (kept_alive ? "Connection: keep-alive\r\n" : "Connection: close\r\n") +
      "Accept: application/json\r\n"
      "Content-Type: application/json\r\n"
      "User-Agent: OpenAI/JS 4.104.0\r\n"
      "X-Stainless-Lang: js\r\n"
      "X-Stainless-Package-Version: 4.104.0\r\n"
      "X-Stainless-OS: Linux\r\n"
      "X-Stainless-Arch: x64\r\n"
      "X-Stainless-Runtime: node\r\n"
      "X-Stainless-Runtime-Version: v18.19.0\r\n"
      "Authorization: Bearer sk-llmgate-0123456789abcdef\r\n"
      "X-Stainless-Retry-Count: 0\r\n"
      "Accept-Encoding: gzip, deflate\r\n"
      "Content-Length: " +
      std::to_string(body.size()) + "\r\n\r\n" + body;
  Measured r;
  std::vector<Measured> per_client(static_cast<std::size_t>(clients));
  std::vector<int> fds(static_cast<std::size_t>(clients), -1);
  // Warm-up: pools, metric children; kept alive, each client's connection
  // and the upstream connections the clients' requests will reuse.
  std::vector<std::thread> threads;
  threads.reserve(static_cast<std::size_t>(clients));
  for (int t = 0; t < (kept_alive ? clients : 1); ++t) {
    threads.emplace_back([&, t] {
      bool done = false;
      if (!kept_alive) {
        stream_once(port, request.data(), request.size(), done);
        return;
      }
      int& fd = fds[static_cast<std::size_t>(t)];
      fd = connect_to(port);
      if (fd >= 0) stream_on(fd, request.data(), request.size(), true, done);
    });
  }
  for (auto& th : threads) th.join();
  threads.clear();
  const std::uint64_t before = g_allocations.load();
  const std::uint64_t asio_before = g_asio_allocations.load();
  for (int t = 0; t < clients; ++t) {
    threads.emplace_back([&, t] {
      Measured& m = per_client[static_cast<std::size_t>(t)];
      for (int i = t; i < requests; i += clients) {
        bool ok = false;
        const int fd = fds[static_cast<std::size_t>(t)];
        m.bytes += kept_alive ? stream_on(fd, request.data(), request.size(), true, ok)
                              : stream_once(port, request.data(), request.size(), ok);
        m.done += ok;
      }
    });
  }
  for (auto& th : threads) th.join();
  r.allocations = g_allocations.load() - before;
  r.asio_allocations = g_asio_allocations.load() - asio_before;
  for (const auto& m : per_client) {
    r.bytes += m.bytes;
    r.done += m.done;
  }
  for (const int fd : fds) {
    if (fd >= 0) close(fd);
  }
  return r;
}

// Allocations per streamed request, with names as long as real ones and the
// head the OpenAI SDK sends (fifteen fields, Connection: keep-alive among
// them).
//
// Kept alive (as clients and providers use connections): operator new about
// 20 (1 or 8 clients; up to 22 with 8), two of them the scripted upstream's own (the request
// it reads, the answer it writes): llmgate's 18. 25 to 26 (with a head of
// three fields) before the upstream's targets and Via were written into
// kept or inline buffers, the health answers and statistics snapshots into
// the router's kept vectors, and the Connection tokens read in place (a
// Connection line cost two allocations, twice); 29 before the chunk
// prefix's three strings shared one buffer, the messages were checked
// without a vector and stream_options stopped copying its default; 40
// before the body was moved into admission rather than copied, the upstream
// target built in one piece, the outbox's and the client write's vectors
// kept inline, usage the client did not ask for cut out of its chunk
// without a parse and the log line sized at once; 46 to 47 before the head
// arena and the router's kept vectors; 53 while the health check copied
// each deployment's id into its answer, the upstream request copied the
// deployment's model, the upstream body took the model's JSON string as a
// temporary and the probe's move to the front took a buffer), asio's
// aligned_alloc about 22 to 24 more (its coroutine frames past the two its
// per-thread cache keeps, and handler memory; with 8 clients it depends on
// how the relays interleave).
//
// A new client and upstream connection per request: operator new about 32
// to 33 (with a head of three fields: 41 to 42 before the cuts of the
// paragraph above, 45 to 46 before the three before them, 56 to 57 before
// the others, 63 to 64 before the head arena and the router's kept vectors,
// 70 to 71 before the four allocations above; with one-letter names 66 to
// 67 before the request log line borrowed its fields, 69 to 70 while the
// router's stable sort took a buffer and the trailers grew twice, 73 to 74
// while the upstream response's head was a Beast field set); the SDK's head
// is one allocation too, its block sized from the head before it is parsed
// (HeadArena::expect then, ClientRequest::reserve now; ten more without). Asio's aligned_alloc
// about 37 to 40 more (67 to 72 while the exchange was raced with `||` against the disconnect watch
// and the drain: four coroutine threads a request; 44 to 46 while it ran in a coroutine thread of
// its own; 40 to 45 before the upstream request, the last write and an idle connection stopped
// taking a coroutine frame each). The request head is read, not found whole in the buffer as on a
// kept-alive connection, and the upstream connection is opened (resolved, connected) for each.
struct Bounds {
  double allocations, asio_allocations;
};
// Kept alive: the issue's 20 for llmgate, the scripted upstream's two, and
// one for how eight relays at once interleave (20.2 to 21.8 measured).
constexpr Bounds kKeptAliveBounds{23, 26};
constexpr Bounds kNewConnectionBounds{36, 45};

void expect_no_allocation_per_event(int clients, Connections connections) {
  constexpr int kRequests = 48;
  const Measured small = relay(20, kRequests, clients, connections);
  const Measured large = relay(400, kRequests, clients, connections);
  ASSERT_EQ(small.done, kRequests);
  ASSERT_EQ(large.done, kRequests);
  ASSERT_GT(large.bytes, small.bytes * 5);  // the events really went through
  auto per_request = [&](std::uint64_t n) { return static_cast<double>(n) / kRequests; };
  const double per_request_small = per_request(small.allocations);
  const double per_request_large = per_request(large.allocations);
  const double per_event = (per_request_large - per_request_small) / 380.0;
  const double asio_small = per_request(small.asio_allocations);
  const double asio_per_event = (per_request(large.asio_allocations) - asio_small) / 380.0;
  std::printf(
      "%d client(s), %s: allocations per request: %.1f with 20 events, %.1f with 400; per extra "
      "event: %.3f; asio's aligned_alloc per request: %.1f with 20 events, per extra event %.3f\n",
      clients, connections == Connections::kKeptAlive ? "kept alive" : "new connections",
      per_request_small, per_request_large, per_event, asio_small, asio_per_event);
  // Bigger answers may need a few more reads (and so a few buffer growths),
  // never one allocation per event.
  EXPECT_LT(per_event, 0.05);
  // Asio's do, per read rather than per event: the upstream read and the
  // client write each take their operation's memory from aligned_alloc when
  // it is larger than its recycling cache keeps (1 KiB), two or three per
  // 4 KiB read here (0.07 to 0.11 per event of ~120 bytes). A trickled
  // stream, one event per read, pays them per event: a known gap
  // (docs/ARCHITECTURE.md). This bound keeps it from growing.
  EXPECT_LT(asio_per_event, 0.25);
  // Per request on new connections (Connection: close), with one-letter
  // names until the last step: what is left after admission stopped building
  // a DOM (172 -> 133) and the upstream head, the route explanation and the
  // statistics snapshot stopped allocating (133 -> 85), then ids,
  // explanations and the exchange's own coroutine (85 -> 75), then the
  // override checks of a request that names no provider (75 -> 73), then the
  // router's sort and the trailers (69 -> 66), then the request log line
  // borrowing its names and ids (66 -> 63); with real names, the copies of
  // the deployment's id and model and the probe's partition (70 -> 63), then
  // the router's working vectors kept per thread (64 -> 61), then the
  // client's head fields from one block (HeadArena: 61 -> 56), then the body
  // moved, the target in one piece, the outbox's vectors inline, the usage
  // cut in place, the log line sized (56 -> 45), then the chunk prefix in
  // one buffer, the messages checked in place, stream_options' default not
  // copied (45 -> 41), then the targets, Via, the health answers, the
  // statistics snapshots and the Connection tokens without allocations of
  // their own, and an SDK's head in one block (41 -> 32, now with the SDK's
  // head). Kept alive, the bound is the issue's target of 20 (llmgate's own;
  // what is left: docs/ARCHITECTURE.md, known gaps); the others keep them
  // from growing back unnoticed.
  const Bounds& bounds =
      connections == Connections::kKeptAlive ? kKeptAliveBounds : kNewConnectionBounds;
  EXPECT_LT(per_request_small, bounds.allocations);
  EXPECT_LT(asio_small, bounds.asio_allocations);
}

TEST(RelayAllocations, NoneProportionalToTheNumberOfEvents) {
  expect_no_allocation_per_event(1, Connections::kKeptAlive);
}

// Relays in flight together share the worker thread's recycled handler and
// coroutine-frame memory.
TEST(RelayAllocations, NoneProportionalToTheNumberOfEventsWithConcurrentStreams) {
  expect_no_allocation_per_event(8, Connections::kKeptAlive);
}

TEST(RelayAllocations, NoneProportionalToTheNumberOfEventsOnNewConnections) {
  expect_no_allocation_per_event(1, Connections::kNewEach);
}

TEST(RelayAllocations, NoneProportionalToTheNumberOfEventsOnNewConnectionsConcurrently) {
  expect_no_allocation_per_event(8, Connections::kNewEach);
}

// Memory an open stream holds does not grow with its request: by the time the
// client has the first token, the client's body (read by admission), its
// indexed copy (kept for each attempt's upstream body until the commit) and
// the upstream request (until the response head) are freed. An agent's
// request is tens of KiB of conversation; a stream lasts minutes.
//
// Heap in use (glibc's mallinfo2, every arena) with 64 streams held open
// after their first token, for a small body and for a 64 KiB one. The
// scripted upstream keeps nothing per connection (it reads each request into
// a local string), and the client reads into a fixed buffer.

// Reads until `marker` has arrived (across reads); false at the end first.
bool read_until(int fd, std::string_view marker) {
  char buf[8192];
  std::size_t have = 0;
  for (;;) {
    const ssize_t n = read(fd, buf + have, sizeof buf - have);
    if (n <= 0) return false;
    have += static_cast<std::size_t>(n);
    if (memmem(buf, have, marker.data(), marker.size())) return true;
    const std::size_t keep = std::min(have, marker.size() - 1);
    std::memmove(buf, buf + have - keep, keep);
    have = keep;
  }
}

// Opens a stream and reads until the first token has arrived; returns the
// socket (open), or -1.
int open_until_first_token(std::uint16_t port, const std::string& request) {
  const int fd = connect_to(port);
  if (fd < 0) return -1;
  if (write(fd, request.data(), request.size()) != static_cast<ssize_t>(request.size()) ||
      !read_until(fd, "tok0 ")) {
    close(fd);
    return -1;
  }
  return fd;
}

std::string streamed_request(std::size_t history_bytes) {
  const std::string body =
      R"({"model":"gpt-4o-mini","stream":true,"messages":[{"role":"user","content":")" +
      std::string(history_bytes, 'x') + R"("}]})";
  return "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n"
         "Content-Type: application/json\r\nContent-Length: " +
         std::to_string(body.size()) + "\r\n\r\n" + body;
}

TEST(RelayMemory, AnOpenStreamHoldsNoCopyOfItsRequest) {
  using testing::Step;
  ScriptedUpstream upstream(
      {{Step::Kind::kSend, testing::sse_head() + testing::chunk(testing::role_event()) +
                               testing::chunk(testing::token_event(0))},
       {Step::Kind::kHold}});
  const std::uint16_t up = upstream.start();
  gateway::Gateway gw(one_worker_config(up));
  const std::uint16_t port = gw.start().at(0);
  // Enough streams that glibc's per-thread caches (freed chunks it counts
  // as in use, a few per size) do not weigh in.
  constexpr int kStreams = 64;
  // Heap held per open stream (bytes).
  auto held_per_stream = [&](const std::string& request) {
    const std::size_t before = mallinfo2().uordblks;
    std::vector<int> fds;
    for (int i = 0; i < kStreams; ++i) {
      const int fd = open_until_first_token(port, request);
      EXPECT_GE(fd, 0);
      if (fd >= 0) fds.push_back(fd);
    }
    const std::size_t during = mallinfo2().uordblks;
    for (int fd : fds) close(fd);
    // The gateway sees the hang-ups and closes its upstream connections.
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (upstream.stats().open > 0 && std::chrono::steady_clock::now() < until)
      std::this_thread::yield();
    EXPECT_EQ(upstream.stats().open, 0u);
    return (static_cast<double>(during) - static_cast<double>(before)) / kStreams;
  };
  const std::string small = streamed_request(16), large = streamed_request(64 * 1024);
  held_per_stream(large);  // warm-up: pools, metric children, recycled memory
  // The medians of five rounds each, taken in turn.
  std::vector<double> smalls, larges;
  for (int round = 0; round < 5; ++round) {
    smalls.push_back(held_per_stream(small));
    larges.push_back(held_per_stream(large));
  }
  auto median = [](std::vector<double>& v) {
    std::nth_element(v.begin(), v.begin() + 2, v.end());
    return v[2];
  };
  const double held_small = median(smalls);
  const double held_large = median(larges);
  std::printf("heap held per open stream: %.0f bytes with a %zu-byte request, %.0f with %zu\n",
              held_small, small.size(), held_large, large.size());
  // One copy of the 64 KiB body kept by any of the three would be 64 KiB more
  // (measured: 70 KiB more when the indexed copy was kept); the rest of an
  // open stream's heap, the same for both, reads up to 15 KiB apart from one
  // round to the next (the upstream's threads come and go), hence medians.
  EXPECT_LT(held_large - held_small, 32 * 1024);
  // The first events came with the head, into its 16 KiB read buffer: they
  // move to a buffer their size, and the SSE parser is offered as much
  // (measured: 15.9 KiB a stream; 46.9 KiB when both kept 16 KiB, 22.4 KiB
  // with a 4 KiB head buffer).
  EXPECT_LT(held_small, 32 * 1024);
}

// A stream that trickles after a burst gives back the buffers its first read
// took. The upstream's head is read into 16 KiB, and the SSE parser is
// offered as much; when a burst of events (more than an eighth of that)
// comes with the head, the buffer is kept for it and is not empty
// afterwards: Beast's parser leaves the CRLF that ends each chunk in it until
// the next chunk's header arrives, so it never is empty between events.
// After a run of reads that each used little of their room, both go back to
// the minimum: at a thousand streams, 31 KiB each is 31 MiB. (A few events
// with the head move to a buffer their size at once: the test above.)
TEST(RelayMemory, ATricklingStreamGivesBackItsReadBuffers) {
  using testing::Step;
  constexpr int kBurst = 24;  // ~3.5 KB of events with the head
  std::string burst = testing::sse_head() + testing::chunk(testing::role_event());
  for (int i = 0; i < kBurst; ++i) burst += testing::chunk(testing::token_event(i));
  testing::Script script{{Step::Kind::kSend, burst}, {Step::Kind::kGate}};
  constexpr int kTrickled = 12;  // more than the relay's run of quiet reads (8)
  for (int i = kBurst; i < kBurst + kTrickled; ++i) {
    script.push_back({Step::Kind::kSend, testing::chunk(testing::token_event(i))});
    script.push_back({Step::Kind::kSleep, {}, std::chrono::milliseconds(5)});  // a read each
  }
  // Then a quiet stretch of comments (a provider's keep-alive), a read each,
  // and one more token: a stream that has shrunk stays as it is.
  script.push_back({Step::Kind::kGate});
  for (int i = 0; i < 3 * 8; ++i) {
    script.push_back({Step::Kind::kSend, testing::chunk(": keep-alive\n\n")});
    script.push_back({Step::Kind::kSleep, {}, std::chrono::milliseconds(5)});
  }
  script.push_back({Step::Kind::kSend, testing::chunk(testing::token_event(kBurst + kTrickled))});
  script.push_back({Step::Kind::kHold});
  ScriptedUpstream upstream(script);
  const std::uint16_t up = upstream.start();
  gateway::Gateway gw(one_worker_config(up));
  const std::uint16_t port = gw.start().at(0);
  const std::string request = streamed_request(16);
  constexpr int kStreams = 64;
  std::vector<int> fds;
  for (int i = 0; i < kStreams; ++i) {
    const int fd = open_until_first_token(port, request);
    ASSERT_GE(fd, 0);
    fds.push_back(fd);
  }
  const std::size_t at_first_token = mallinfo2().uordblks;
  upstream.open_gate();
  const std::string last = "tok" + std::to_string(kBurst + kTrickled - 1) + " ";
  for (int fd : fds) EXPECT_TRUE(read_until(fd, last));
  const std::size_t trickling = mallinfo2().uordblks;
  const std::uint64_t allocations_before = g_allocations.load() + g_asio_allocations.load();
  upstream.open_gate();
  const std::string after_quiet = "tok" + std::to_string(kBurst + kTrickled) + " ";
  for (int fd : fds) EXPECT_TRUE(read_until(fd, after_quiet));
  const double allocations_per_stream =
      static_cast<double>(g_allocations.load() + g_asio_allocations.load() - allocations_before) /
      kStreams;
  for (int fd : fds) close(fd);
  const double given_back =
      (static_cast<double>(at_first_token) - static_cast<double>(trickling)) / kStreams;
  std::printf(
      "heap given back per stream after %d quiet reads: %.0f bytes; allocations per stream over "
      "24 more quiet reads and an event: %.2f\n",
      kTrickled, given_back, allocations_per_stream);
  // 16,384 + 16,384 bytes held, 514 + 514 after, and what the relay's outbox
  // held before the commit (measured: 410 bytes when the burst's buffers
  // were not kept, 7 KiB with a 4 KiB head buffer).
  EXPECT_GT(given_back, 20 * 1024);
  // Shrunk once, for good: what a shrink leaves is not shrunk (and taken
  // again) every eight quiet reads.
  EXPECT_LT(allocations_per_stream, 0.5);
}

}  // namespace
}  // namespace llmgate
