// llmgate-loadgen: an HTTP/1.1 load generator for chat completion endpoints.
//
// One thread, one epoll loop, non-blocking sockets, no coroutines and no
// allocation per request in steady state: it has to stay cheaper per request
// than the proxies it measures (bench/overhead compares its CPU time with
// theirs).
//
// Closed loop: N keep-alive connections, each sends its next request as soon
// as the previous response ends; latency runs from the actual send.
// Open loop: requests are due at fixed intended times (uniform or Poisson
// arrivals); a due request takes an idle connection, opens a new one (up to
// --connections) or waits in a FIFO backlog. Latency runs from the intended
// time, so a stalled server is charged for the requests it delayed
// (no coordinated omission).
//
// Per request: time to first response byte (ttfb), time to first content
// token (ttft: the first SSE event whose data carries a non-empty
// "content"), total time, and the gaps between consecutive SSE events.
// Percentiles are exact (all samples are kept and sorted at the end).
#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sched.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <deque>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

namespace {

using Nanos = std::int64_t;

Nanos now_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return Nanos{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
}

double cpu_seconds() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
         static_cast<double>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

[[noreturn]] void die(const std::string& msg) {
  std::cerr << "llmgate-loadgen: " << msg << "\n";
  std::exit(2);
}

constexpr const char* kUsage = R"(usage: llmgate-loadgen --url http://HOST:PORT/PATH [options]
  --body-file FILE      POST body (default: a small chat request; add "stream":true yourself)
  --stream              use the default body with "stream": true
  --header "N: v"       extra request header (repeatable)
  --connections N       closed loop: N keep-alive connections (default 64);
                        with --rate: the most connections to open (default 1024)
  --rate R              open loop: R requests/s at intended send times
  --arrival KIND        uniform (default) or poisson
  --duration S          measured seconds (default 10)
  --warmup S            seconds run first and not recorded (default 1)
  --ramp S              closed loop: open the connections spread over S seconds (default 0)
  --drain S             after the measured window, wait this long for requests in flight (default 30)
  --seed N              RNG seed for poisson arrivals (default 1)
  --cpu N               pin to CPU N
  --json FILE           write results as JSON
  --quiet               no human summary on stdout
  --event-delay         per SSE event with "x_sim_ns":N (llmgate-sim --stamp-events), record
                        its arrival time minus N (same host, CLOCK_MONOTONIC): "delay"
Errors: connection failures, non-200 statuses, and event streams that end without
"data: [DONE]" (or Anthropic's message_stop) or carry an error event.
)";

struct Options {
  std::string host = "127.0.0.1";
  std::string port = "80";
  std::string path = "/";
  std::string body;
  std::vector<std::string> headers;
  int connections = -1;
  double rate = 0;
  bool poisson = false;
  double duration = 10;
  double warmup = 1;
  double ramp = 0;
  double drain = 30;
  std::uint64_t seed = 1;
  int cpu = -1;
  std::string json_path;
  bool quiet = false;
  bool event_delay = false;
};

std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) die("cannot read " + path);
  std::ostringstream s;
  s << f.rdbuf();
  return s.str();
}

double to_double(const std::string& flag, const std::string& v) {
  char* end = nullptr;
  double d = std::strtod(v.c_str(), &end);
  if (v.empty() || *end != '\0' || !(d >= 0))
    die(flag + " takes a non-negative number, got \"" + v + "\"");
  return d;
}

Options parse_args(int argc, char** argv) {
  Options o;
  bool stream = false;
  std::string url, body_file;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) die(a + " needs a value");
      return argv[++i];
    };
    if (a == "--url")
      url = value();
    else if (a == "--body-file")
      body_file = value();
    else if (a == "--stream")
      stream = true;
    else if (a == "--header")
      o.headers.push_back(value());
    else if (a == "--connections")
      o.connections = static_cast<int>(to_double(a, value()));
    else if (a == "--rate")
      o.rate = to_double(a, value());
    else if (a == "--arrival") {
      std::string v = value();
      if (v != "uniform" && v != "poisson") die("--arrival is uniform or poisson");
      o.poisson = v == "poisson";
    } else if (a == "--duration")
      o.duration = to_double(a, value());
    else if (a == "--warmup")
      o.warmup = to_double(a, value());
    else if (a == "--ramp")
      o.ramp = to_double(a, value());
    else if (a == "--drain")
      o.drain = to_double(a, value());
    else if (a == "--seed")
      o.seed = static_cast<std::uint64_t>(to_double(a, value()));
    else if (a == "--cpu")
      o.cpu = static_cast<int>(to_double(a, value()));
    else if (a == "--json")
      o.json_path = value();
    else if (a == "--quiet")
      o.quiet = true;
    else if (a == "--event-delay")
      o.event_delay = true;
    else if (a == "--help" || a == "-h") {
      std::cout << kUsage;
      std::exit(0);
    } else
      die("unknown argument " + a + "\n" + kUsage);
  }
  constexpr std::string_view kScheme = "http://";
  if (url.rfind(kScheme, 0) != 0) die("--url must start with http:// (TLS is not supported)");
  std::string rest = url.substr(kScheme.size());
  auto slash = rest.find('/');
  std::string authority = rest.substr(0, slash);
  o.path = slash == std::string::npos ? "/" : rest.substr(slash);
  auto colon = authority.rfind(':');
  if (colon == std::string::npos)
    o.host = authority;
  else {
    o.host = authority.substr(0, colon);
    o.port = authority.substr(colon + 1);
  }
  if (!o.host.empty() && o.host.front() == '[') o.host = o.host.substr(1, o.host.size() - 2);
  if (o.connections < 0) o.connections = o.rate > 0 ? 1024 : 64;
  if (o.connections < 1) die("--connections must be at least 1");
  if (o.duration <= 0) die("--duration must be positive");
  o.body =
      body_file.empty()
          ? std::string(R"({"model":"bench","messages":[{"role":"user","content":"Say hello."}])") +
                (stream ? R"(,"stream":true})" : "}")
          : read_file(body_file);
  return o;
}

// ---------------------------------------------------------------------------
// Results

struct Samples {
  std::vector<Nanos> v;
  void add(Nanos x) { v.push_back(x); }
};

struct Results {
  Samples total, ttfb, ttft, gap, delay;
  std::uint64_t requests = 0, errors = 0, bytes = 0, events = 0;
  // Events that arrived inside the measured window, whenever their request
  // started (a long stream's events are relayed across the window's edges).
  std::uint64_t window_events = 0;
  std::map<std::string, std::uint64_t> error_kinds;
  void error(const std::string& kind) {
    ++errors;
    ++error_kinds[kind];
  }
};

// ---------------------------------------------------------------------------
// The response parser: an incremental HTTP/1.1 response state machine that
// keeps only a header buffer and the current SSE event.

enum class Phase {
  kHeaders,
  kBodyLength,
  kChunkSize,
  kChunkData,
  kChunkDataEnd,
  kTrailers,
  kUntilClose,
  kDone
};

struct Conn {
  int fd = -1;
  bool connected = false;
  bool busy = false;  // a request is on this connection
  bool write_pending = false;
  std::size_t written = 0;
  // The request in flight.
  Nanos start = 0;      // intended (open loop) or actual (closed loop) start
  bool record = false;  // started inside the measured window
  Nanos first_byte = 0, first_token = 0, last_event = 0;
  bool saw_done = false, saw_error_event = false;
  int status = 0;
  bool sse = false, chunked = false, close_after = false;
  std::uint64_t body_left = 0;
  Phase phase = Phase::kHeaders;
  std::string head;          // response headers so far, or the chunk-size / trailer line
  std::string event;         // the current SSE event
  std::size_t line_len = 0;  // bytes of the current SSE line so far
  bool last_cr = false;      // the last body byte was '\r'
  Nanos ramp_at = 0;         // closed loop: when this connection starts
};

bool iequals_prefix(std::string_view line, std::string_view name) {
  if (line.size() < name.size()) return false;
  for (std::size_t i = 0; i < name.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(line[i])) != name[i]) return false;
  }
  return true;
}

class LoadGen {
 public:
  explicit LoadGen(Options o) : o_(std::move(o)), rng_(o_.seed) {
    build_request();
    resolve();
    ep_ = epoll_create1(EPOLL_CLOEXEC);
    tfd_ = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
    if (ep_ < 0 || tfd_ < 0) die(std::string("epoll/timerfd: ") + std::strerror(errno));
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.u64 = kTimerTag;
    epoll_ctl(ep_, EPOLL_CTL_ADD, tfd_, &ev);
    conns_.resize(static_cast<std::size_t>(o_.connections));
    for (auto& c : conns_) {
      c.head.reserve(1024);
      c.event.reserve(1024);
    }
    std::size_t expect =
        static_cast<std::size_t>((o_.rate > 0 ? o_.rate : 50'000.0) * o_.duration * 1.2 + 1024);
    r_.total.v.reserve(expect);
    r_.ttfb.v.reserve(expect);
  }

  int run() {
    t0_ = now_ns();
    window_start_ = t0_ + static_cast<Nanos>(o_.warmup * 1e9);
    window_end_ = window_start_ + static_cast<Nanos>(o_.duration * 1e9);
    const Nanos drain_end = window_end_ + static_cast<Nanos>(o_.drain * 1e9);
    open_loop_ = o_.rate > 0;
    if (open_loop_) {
      next_due_ = t0_;
    } else {
      for (std::size_t i = 0; i < conns_.size(); ++i) {
        conns_[i].ramp_at = t0_ + static_cast<Nanos>(o_.ramp * 1e9 * static_cast<double>(i) /
                                                     static_cast<double>(conns_.size()));
      }
    }
    cpu0_ = cpu_seconds();
    std::vector<epoll_event> events(1024);
    for (;;) {
      Nanos now = now_ns();
      if (now >= window_end_ && !stopping_) {
        stopping_ = true;
        backlog_.clear();  // intended after the window: never sent
      }
      if (stopping_ && (in_flight_ == 0 || now >= drain_end)) break;
      if (!stopping_) {
        retry(now);
        if (open_loop_)
          issue_due(now);
        else
          start_ramped(now);
      }
      arm_timer();
      int n =
          epoll_wait(ep_, events.data(), static_cast<int>(events.size()), stopping_ ? 100 : 1000);
      if (n < 0 && errno != EINTR) die(std::string("epoll_wait: ") + std::strerror(errno));
      for (int i = 0; i < n; ++i) {
        if (events[i].data.u64 == kTimerTag) {
          std::uint64_t expirations;
          [[maybe_unused]] auto rd = read(tfd_, &expirations, sizeof expirations);
          continue;
        }
        Conn& c = conns_[events[i].data.u64];
        if (c.fd < 0) continue;
        if (events[i].events & (EPOLLOUT | EPOLLERR | EPOLLHUP)) on_writable(c);
        if (c.fd >= 0 && (events[i].events & (EPOLLIN | EPOLLHUP | EPOLLERR))) on_readable(c);
      }
    }
    cpu1_ = cpu_seconds();
    for (auto& c : conns_) {
      if (c.fd >= 0 && c.busy && c.record) r_.error("unfinished");
      if (c.fd >= 0) close(c.fd);
    }
    report();
    return 0;
  }

 private:
  static constexpr std::uint64_t kTimerTag = ~std::uint64_t{0};

  void build_request() {
    std::string h =
        "POST " + o_.path + " HTTP/1.1\r\nHost: " + o_.host + ":" + o_.port +
        "\r\nContent-Type: application/json\r\nContent-Length: " + std::to_string(o_.body.size()) +
        "\r\n";
    for (auto& x : o_.headers) h += x + "\r\n";
    h += "\r\n";
    request_ = h + o_.body;
  }

  void resolve() {
    addrinfo hints{};
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* res = nullptr;
    int rc = getaddrinfo(o_.host.c_str(), o_.port.c_str(), &hints, &res);
    if (rc != 0 || !res) die("cannot resolve " + o_.host + ":" + o_.port + ": " + gai_strerror(rc));
    std::memcpy(&addr_, res->ai_addr, res->ai_addrlen);
    addr_len_ = res->ai_addrlen;
    family_ = res->ai_family;
    freeaddrinfo(res);
  }

  std::size_t index_of(const Conn& c) const { return static_cast<std::size_t>(&c - conns_.data()); }

  // Opens the socket; the request is sent once the connect completes.
  bool open(Conn& c) {
    c.fd = socket(family_, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (c.fd < 0) {
      r_.error(std::string("socket: ") + std::strerror(errno));
      return false;
    }
    int one = 1;
    setsockopt(c.fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    c.connected = false;
    int rc = connect(c.fd, reinterpret_cast<sockaddr*>(&addr_), addr_len_);
    if (rc < 0 && errno != EINPROGRESS) {
      close(c.fd);
      c.fd = -1;
      return false;
    }
    c.connected = rc == 0;
    epoll_event ev{};
    ev.events = EPOLLIN | EPOLLOUT;
    ev.data.u64 = index_of(c);
    epoll_ctl(ep_, EPOLL_CTL_ADD, c.fd, &ev);
    c.write_pending = true;
    ++open_;
    ++opened_;
    return true;
  }

  void close_conn(Conn& c) {
    if (c.fd < 0) return;
    close(c.fd);
    c.fd = -1;
    c.connected = false;
    c.write_pending = false;
    --open_;
  }

  void set_out(Conn& c, bool want) {
    if (c.write_pending == want) return;
    c.write_pending = want;
    epoll_event ev{};
    ev.events = EPOLLIN | (want ? EPOLLOUT : 0u);
    ev.data.u64 = index_of(c);
    epoll_ctl(ep_, EPOLL_CTL_MOD, c.fd, &ev);
  }

  // Starts a request on `c` (opening it if needed), timed from `start`.
  void begin(Conn& c, Nanos start) {
    c.busy = true;
    ++in_flight_;
    c.start = start;
    c.record = start >= window_start_ && start < window_end_;
    c.first_byte = c.first_token = c.last_event = 0;
    c.saw_done = c.saw_error_event = false;
    c.status = 0;
    c.sse = c.chunked = c.close_after = false;
    c.phase = Phase::kHeaders;
    c.head.clear();
    c.event.clear();
    c.line_len = 0;
    c.last_cr = false;
    c.written = 0;
    if (c.fd < 0) {
      if (!open(c)) fail(c, "connect");
      return;  // on_writable sends once connected
    }
    write_some(c);
  }

  void write_some(Conn& c) {
    while (c.written < request_.size()) {
      ssize_t n =
          send(c.fd, request_.data() + c.written, request_.size() - c.written, MSG_NOSIGNAL);
      if (n < 0) {
        if (errno == EAGAIN) {
          set_out(c, true);
          return;
        }
        fail(c, "write");
        return;
      }
      c.written += static_cast<std::size_t>(n);
    }
    set_out(c, false);
  }

  void on_writable(Conn& c) {
    if (!c.connected) {
      int err = 0;
      socklen_t len = sizeof err;
      getsockopt(c.fd, SOL_SOCKET, SO_ERROR, &err, &len);
      if (err != 0) {
        fail(c, "connect");
        return;
      }
      c.connected = true;
    }
    if (c.busy && c.written < request_.size())
      write_some(c);
    else
      set_out(c, false);
  }

  void on_readable(Conn& c) {
    char* buf = rbuf_;
    for (;;) {
      ssize_t n = recv(c.fd, buf, sizeof rbuf_, 0);
      if (n == 0) {
        if (c.busy && c.phase == Phase::kUntilClose) {
          c.phase = Phase::kDone;
          complete(c);
        } else if (c.busy) {
          fail(c, c.first_byte ? "cut" : "closed");
        } else {
          close_conn(c);  // an idle keep-alive connection closed by the server
        }
        return;
      }
      if (n < 0) {
        if (errno == EAGAIN) return;
        fail(c, "read");
        return;
      }
      if (!c.busy) {  // bytes nobody asked for
        close_conn(c);
        return;
      }
      Nanos t = now_ns();
      if (!c.first_byte) c.first_byte = t;
      if (!parse(c, std::string_view(buf, static_cast<std::size_t>(n)), t)) {
        fail(c, "bad_response");
        return;
      }
      if (c.phase == Phase::kDone) {
        complete(c);
        return;
      }
      if (static_cast<std::size_t>(n) < sizeof rbuf_) return;
    }
  }

  // Feeds response bytes; false on a protocol error.
  bool parse(Conn& c, std::string_view in, Nanos t) {
    if (c.record) r_.bytes += in.size();
    while (!in.empty()) {
      switch (c.phase) {
        case Phase::kHeaders: {
          std::size_t before = c.head.size();
          c.head.append(in);
          auto end = c.head.find("\r\n\r\n", before >= 3 ? before - 3 : 0);
          if (end == std::string::npos) {
            if (c.head.size() > 65536) return false;
            return true;
          }
          std::size_t used = end + 4 - before;
          if (!parse_head(c, std::string_view(c.head).substr(0, end + 2))) return false;
          in.remove_prefix(used);
          c.head.clear();
          break;
        }
        case Phase::kBodyLength:
          if (take_body(c, in, t)) c.phase = Phase::kDone;
          break;
        case Phase::kUntilClose:
          body(c, in, t);
          in = {};
          break;
        case Phase::kChunkSize:
        case Phase::kTrailers: {
          auto lf = in.find('\n');
          c.head.append(in.substr(0, lf == std::string_view::npos ? in.size() : lf + 1));
          if (c.head.size() > 4096) return false;
          if (lf == std::string_view::npos) return true;
          in.remove_prefix(lf + 1);
          std::string_view line(c.head);
          while (!line.empty() && (line.back() == '\n' || line.back() == '\r'))
            line.remove_suffix(1);
          if (c.phase == Phase::kTrailers) {
            if (line.empty()) c.phase = Phase::kDone;
          } else {
            std::uint64_t size = 0;
            auto semi = line.find(';');
            auto hex = line.substr(0, semi);
            auto [p, ec] = std::from_chars(hex.data(), hex.data() + hex.size(), size, 16);
            if (ec != std::errc() || hex.empty()) return false;
            c.body_left = size;
            c.phase = size == 0 ? Phase::kTrailers : Phase::kChunkData;
          }
          c.head.clear();
          if (c.phase == Phase::kDone) return in.empty();
          break;
        }
        case Phase::kChunkData: {
          if (take_body(c, in, t)) {
            c.phase = Phase::kChunkDataEnd;
            c.body_left = 2;
          }
          break;
        }
        case Phase::kChunkDataEnd: {
          std::size_t take = std::min<std::uint64_t>(c.body_left, in.size());
          in.remove_prefix(take);
          c.body_left -= take;
          if (c.body_left == 0) c.phase = Phase::kChunkSize;
          break;
        }
        case Phase::kDone:
          return false;  // bytes after the response
      }
    }
    return true;
  }

  // Up to c.body_left bytes of `in` are body: consumed and counted down.
  // True when the last of them arrived.
  bool take_body(Conn& c, std::string_view& in, Nanos t) {
    const std::size_t take = std::min<std::uint64_t>(c.body_left, in.size());
    body(c, in.substr(0, take), t);
    in.remove_prefix(take);
    c.body_left -= take;
    return c.body_left == 0;
  }

  bool parse_head(Conn& c, std::string_view head) {
    // "HTTP/1.1 200 OK\r\n" then "Name: value\r\n" lines.
    if (head.size() < 12 || head.substr(0, 5) != "HTTP/") return false;
    auto sp = head.find(' ');
    if (sp == std::string_view::npos) return false;
    std::from_chars(head.data() + sp + 1, head.data() + head.size(), c.status);
    const bool http10 = head.substr(0, 8) == "HTTP/1.0";
    c.close_after = http10;
    bool have_length = false;
    std::size_t pos = head.find("\r\n") + 2;
    while (pos < head.size()) {
      auto eol = head.find("\r\n", pos);
      std::string_view line = head.substr(pos, eol - pos);
      pos = eol + 2;
      auto value = [&](std::size_t name_len) {
        std::string_view v = line.substr(name_len);
        while (!v.empty() && (v.front() == ' ' || v.front() == '\t')) v.remove_prefix(1);
        return v;
      };
      if (iequals_prefix(line, "content-length:")) {
        auto v = value(15);
        std::from_chars(v.data(), v.data() + v.size(), c.body_left);
        have_length = true;
      } else if (iequals_prefix(line, "transfer-encoding:")) {
        c.chunked = value(18).find("chunked") != std::string_view::npos;
      } else if (iequals_prefix(line, "content-type:")) {
        c.sse = value(13).find("text/event-stream") != std::string_view::npos;
      } else if (iequals_prefix(line, "connection:")) {
        auto v = value(11);
        if (v.find("close") != std::string_view::npos) c.close_after = true;
        if (v.find("keep-alive") != std::string_view::npos) c.close_after = false;
      }
    }
    if (c.chunked)
      c.phase = Phase::kChunkSize;
    else if (have_length)
      c.phase = c.body_left ? Phase::kBodyLength : Phase::kDone;
    else {
      c.phase = Phase::kUntilClose;
      c.close_after = true;
    }
    return true;
  }

  // Body bytes: SSE bodies are cut into events at blank lines (LF or CRLF
  // line ends); other bodies are only counted.
  void body(Conn& c, std::string_view b, Nanos t) {
    if (!c.sse) return;
    while (!b.empty()) {
      auto nl = b.find('\n');
      if (nl == std::string_view::npos) {
        c.event.append(b);
        c.line_len += b.size();
        c.last_cr = b.back() == '\r';
        return;
      }
      std::string_view part = b.substr(0, nl + 1);
      b.remove_prefix(nl + 1);
      std::size_t content = c.line_len + part.size() - 1;  // the line without its '\n'
      const bool cr = part.size() >= 2 ? part[part.size() - 2] == '\r' : c.last_cr;
      if (cr && content > 0) --content;
      c.event.append(part);
      c.line_len = 0;
      c.last_cr = false;
      if (content == 0) {  // a blank line ends the event
        end_event(c, t);
        c.event.clear();
      }
    }
  }

  void end_event(Conn& c, Nanos t) {
    std::string_view e(c.event);
    if (e.find("data:") == std::string_view::npos) return;  // comments, keep-alives
    if (c.record) {
      ++r_.events;
      if (c.last_event) r_.gap.add(t - c.last_event);
    }
    c.last_event = t;
    if (t >= window_start_ && t < window_end_) {
      ++r_.window_events;
      if (o_.event_delay) {
        constexpr std::string_view kStamp = "\"x_sim_ns\":";
        if (auto k = e.find(kStamp); k != std::string_view::npos) {
          Nanos sent = 0;
          const char* p = e.data() + k + kStamp.size();
          const char* end = e.data() + e.size();
          auto [ptr, ec] = std::from_chars(p, end, sent);
          if (ec == std::errc() && ptr != p) r_.delay.add(t - sent);
        }
      }
    }
    // The end: OpenAI's [DONE], or Anthropic's message_stop (the Messages API).
    if (e.find("[DONE]") != std::string_view::npos ||
        e.find("\"type\":\"message_stop\"") != std::string_view::npos) {
      c.saw_done = true;
      return;
    }
    if (e.find("\"error\"") != std::string_view::npos &&
        e.find("\"choices\"") == std::string_view::npos) {
      c.saw_error_event = true;
    }
    // The first token: a non-empty "content" string (a chat chunk's delta),
    // or "text" (a Messages API text_delta).
    for (std::string_view key : {std::string_view("\"content\":"), std::string_view("\"text\":")}) {
      if (c.first_token) break;
      auto k = e.find(key);
      if (k != std::string_view::npos) {
        std::string_view v = e.substr(k + key.size());
        while (!v.empty() && v.front() == ' ') v.remove_prefix(1);
        if (v.size() >= 2 && v[0] == '"' && v[1] != '"') c.first_token = t;
      }
    }
  }

  void complete(Conn& c) {
    const Nanos t = now_ns();
    std::string kind;
    if (c.status != 200)
      kind = "status_" + std::to_string(c.status);
    else if (c.sse && c.saw_error_event)
      kind = "error_event";
    else if (c.sse && !c.saw_done)
      kind = "no_done";
    if (c.record) {
      ++r_.requests;
      if (!kind.empty())
        r_.error(kind);
      else {
        r_.total.add(t - c.start);
        r_.ttfb.add(c.first_byte - c.start);
        if (c.first_token) r_.ttft.add(c.first_token - c.start);
      }
    }
    c.busy = false;
    --in_flight_;
    if (c.close_after) close_conn(c);
    next(c, t);
  }

  void fail(Conn& c, const char* kind) {
    if (c.busy) {
      if (c.record) {
        ++r_.requests;
        r_.error(kind);
      }
      c.busy = false;
      --in_flight_;
    }
    close_conn(c);
    next(c, now_ns());
  }

  // `c` is free: the closed loop sends again; the open loop serves the
  // backlog. A connection that must be reopened waits for the next loop turn
  // (no recursion when connects fail at once).
  void next(Conn& c, Nanos t) {
    if (stopping_ || t >= window_end_) return;
    if (c.fd < 0) {
      if (++reconnects_ <= 1'000'000) retry_.push_back(index_of(c));
      return;
    }
    reuse(c, t);
  }

  void reuse(Conn& c, Nanos t) {
    if (!open_loop_)
      begin(c, t);
    else if (!backlog_.empty()) {
      Nanos due = backlog_.front();
      backlog_.pop_front();
      begin(c, due);
    } else
      idle_.push_back(index_of(c));
  }

  void retry(Nanos now) {
    if (retry_.empty()) return;
    retry_now_.swap(retry_);
    for (std::size_t i : retry_now_) reuse(conns_[i], now);
    retry_now_.clear();
  }

  void start_ramped(Nanos now) {
    while (started_ < conns_.size() && conns_[started_].ramp_at <= now) {
      begin(conns_[started_], now);
      ++started_;
    }
  }

  Nanos interval() {
    double mean = 1e9 / o_.rate;
    if (!o_.poisson) return static_cast<Nanos>(mean);
    std::exponential_distribution<double> d(1.0 / mean);
    return static_cast<Nanos>(d(rng_));
  }

  void issue_due(Nanos now) {
    while (next_due_ <= now && next_due_ < window_end_) {
      Nanos due = next_due_;
      next_due_ += interval();
      Conn* c = nullptr;
      while (!idle_.empty() && !c) {
        Conn& cand = conns_[idle_.back()];
        idle_.pop_back();
        if (!cand.busy) c = &cand;
      }
      if (!c && used_ < conns_.size()) c = &conns_[used_++];
      if (c)
        begin(*c, due);
      else
        backlog_.push_back(due);
    }
  }

  void arm_timer() {
    Nanos at = 0;
    if (!stopping_) {
      if (open_loop_)
        at = std::min(next_due_, window_end_);
      else if (started_ < conns_.size())
        at = std::min(conns_[started_].ramp_at, window_end_);
      else
        at = window_end_;
    }
    if (at == armed_) return;
    armed_ = at;
    itimerspec its{};
    if (at > 0) {
      its.it_value.tv_sec = at / 1'000'000'000;
      its.it_value.tv_nsec = at % 1'000'000'000;
    }
    timerfd_settime(tfd_, TFD_TIMER_ABSTIME, &its, nullptr);
  }

  struct Summary {
    double p50, p90, p99, p999, max, mean;
    std::size_t count;
  };

  static Summary summarize(std::vector<Nanos>& v) {
    Summary s{};
    s.count = v.size();
    if (v.empty()) return s;
    std::sort(v.begin(), v.end());
    auto q = [&](double p) {
      std::size_t i = static_cast<std::size_t>(std::ceil(p * static_cast<double>(v.size())));
      i = i == 0 ? 0 : i - 1;
      return static_cast<double>(v[std::min(i, v.size() - 1)]) / 1e3;
    };
    s.p50 = q(0.5);
    s.p90 = q(0.9);
    s.p99 = q(0.99);
    s.p999 = q(0.999);
    s.max = static_cast<double>(v.back()) / 1e3;
    long double sum = 0;
    for (auto x : v) sum += static_cast<long double>(x);
    s.mean = static_cast<double>(sum / static_cast<long double>(v.size())) / 1e3;
    return s;
  }

  static std::string fmt(double v) {
    char b[64];
    std::snprintf(b, sizeof b, "%.1f", v);
    return b;
  }

  void report() {
    Summary total = summarize(r_.total.v), ttfb = summarize(r_.ttfb.v), ttft = summarize(r_.ttft.v),
            gap = summarize(r_.gap.v), delay = summarize(r_.delay.v);
    const double rate = static_cast<double>(r_.requests) / o_.duration;
    const double cpu = cpu1_ - cpu0_;
    auto js = [&](const Summary& s) {
      return "{\"p50\":" + fmt(s.p50) + ",\"p90\":" + fmt(s.p90) + ",\"p99\":" + fmt(s.p99) +
             ",\"p999\":" + fmt(s.p999) + ",\"max\":" + fmt(s.max) + ",\"mean\":" + fmt(s.mean) +
             ",\"count\":" + std::to_string(s.count) + "}";
    };
    if (!o_.json_path.empty()) {
      std::string kinds;
      for (auto& [k, n] : r_.error_kinds) {
        if (!kinds.empty()) kinds += ",";
        kinds += "\"" + k + "\":" + std::to_string(n);
      }
      std::ofstream f(o_.json_path);
      f << "{\"mode\":\"" << (open_loop_ ? "open" : "closed")
        << "\",\"connections\":" << o_.connections
        << ",\"target_rate\":" << (open_loop_ ? fmt(o_.rate) : "null")
        << ",\"duration_s\":" << fmt(o_.duration) << ",\"requests\":" << r_.requests
        << ",\"errors\":" << r_.errors << ",\"error_kinds\":{" << kinds
        << "},\"rate\":" << fmt(rate) << ",\"bytes_received\":" << r_.bytes
        << ",\"events\":" << r_.events << ",\"window_events\":" << r_.window_events
        << ",\"connections_opened\":" << opened_total()
        << ",\"latency_us\":{\"total\":" << js(total) << ",\"ttfb\":" << js(ttfb)
        << ",\"ttft\":" << js(ttft) << ",\"gap\":" << js(gap) << ",\"delay\":" << js(delay)
        << "},\"loadgen_cpu_s\":" << cpu << "}\n";
      if (!f) die("cannot write " + o_.json_path);
    }
    if (o_.quiet) return;
    std::printf(
        "%s loop, %s, %.1f s: %llu requests, %llu errors, %.1f req/s, loadgen CPU %.2f s (%.1f "
        "us/req)\n",
        open_loop_ ? "open" : "closed",
        open_loop_ ? (fmt(o_.rate) + " req/s target").c_str()
                   : (std::to_string(o_.connections) + " connections").c_str(),
        o_.duration, static_cast<unsigned long long>(r_.requests),
        static_cast<unsigned long long>(r_.errors), rate, cpu,
        r_.requests ? cpu * 1e6 / static_cast<double>(r_.requests) : 0.0);
    for (auto& [k, n] : r_.error_kinds)
      std::printf("  error %s: %llu\n", k.c_str(), static_cast<unsigned long long>(n));
    std::printf("  %-6s %10s %10s %10s %10s %10s %10s  (us)\n", "", "p50", "p90", "p99", "p99.9",
                "max", "mean");
    auto line = [](const char* name, const Summary& s) {
      if (!s.count) return;
      std::printf("  %-6s %10.1f %10.1f %10.1f %10.1f %10.1f %10.1f  n=%zu\n", name, s.p50, s.p90,
                  s.p99, s.p999, s.max, s.mean, s.count);
    };
    line("total", total);
    line("ttfb", ttfb);
    line("ttft", ttft);
    line("gap", gap);
    line("delay", delay);
  }

  std::uint64_t opened_total() const { return opened_; }

  Options o_;
  std::mt19937_64 rng_;
  std::string request_;
  sockaddr_storage addr_{};
  socklen_t addr_len_ = 0;
  int family_ = AF_INET;
  int ep_ = -1, tfd_ = -1;
  std::vector<Conn> conns_;
  std::vector<std::size_t> idle_, retry_, retry_now_;
  std::deque<Nanos> backlog_;
  std::size_t used_ = 0, started_ = 0;
  std::uint64_t in_flight_ = 0, reconnects_ = 0, opened_ = 0;
  std::int64_t open_ = 0;
  Nanos t0_ = 0, window_start_ = 0, window_end_ = 0, next_due_ = 0, armed_ = -1;
  bool open_loop_ = false, stopping_ = false;
  double cpu0_ = 0, cpu1_ = 0;
  Results r_;
  char rbuf_[65536];
};

}  // namespace

int main(int argc, char** argv) {
  signal(SIGPIPE, SIG_IGN);
  Options o = parse_args(argc, argv);
  if (o.cpu >= 0) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(o.cpu, &set);
    if (sched_setaffinity(0, sizeof set, &set) != 0)
      die("cannot pin to CPU " + std::to_string(o.cpu));
  }
  rlimit rl{};
  getrlimit(RLIMIT_NOFILE, &rl);
  if (rl.rlim_cur < static_cast<rlim_t>(o.connections) + 64) {
    rl.rlim_cur = std::min<rlim_t>(rl.rlim_max, static_cast<rlim_t>(o.connections) + 64);
    setrlimit(RLIMIT_NOFILE, &rl);
  }
  auto lg = std::make_unique<LoadGen>(std::move(o));
  return lg->run();
}
