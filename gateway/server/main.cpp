// llmgate: the gateway binary.
#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <fstream>
#include <iostream>
#include <iterator>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "config/config.h"
#include "config/missing_secrets.h"
#include "gateway/access/auth.h"
#include "gateway/observe/log.h"
#include "gateway/server/config_watch.h"
#include "gateway/server/gateway.h"

namespace {

constexpr const char* kUsage = R"(usage: llmgate --config FILE [options]
       llmgate --check-config FILE
       llmgate --hash-key < KEY_FILE

  --config FILE          run the gateway with this YAML config (docs/config.md)
  --check-config FILE    validate FILE, print a summary or every error, and exit;
                         an unset api_key_env variable is a warning (CI has no secrets)
  --require-env          with --check-config: an unset variable is an error, as at startup
  --hash-key             read a gateway key on standard input, print its SHA-256 for
                         auth.keys[].sha256 (the config never holds the key itself)
  --log-level LEVEL      debug|info|warn|error; default info; debug logs every failed attempt
  --log-format FORMAT    text|json; default text; json writes one JSON object per line
  --watch-interval DUR   reload when FILE's content changes, checked this often
                         (default 2s; 0 turns it off). SIGHUP reloads at once.
  --port-file PATH       write the first listener's bound port here (useful with port 0)

Signals: SIGTERM/SIGINT drain gracefully (server.drain) and exit 0; SIGHUP reloads.
)";

std::optional<std::string> read_whole_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return std::nullopt;
  return std::string(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}

void write_port_file(const std::string& path, std::uint16_t port) {
  std::string tmp = path + ".tmp";
  {
    std::ofstream f(tmp);
    f << port << "\n";
  }
  std::rename(tmp.c_str(), path.c_str());
}

// Every client stream and every upstream connection is a descriptor:
// thousands of concurrent streams need more than the usual soft limit of
// 1024. Raise it to the hard limit (nginx's worker_rlimit_nofile, done for
// the operator), and say so when even that is short of what the config can use.
void raise_descriptor_limit(const llmgate::config::Config& cfg) {
  rlimit lim{};
  if (::getrlimit(RLIMIT_NOFILE, &lim) != 0) return;
  if (lim.rlim_cur < lim.rlim_max) {
    lim.rlim_cur = lim.rlim_max;
    ::setrlimit(RLIMIT_NOFILE, &lim);
    ::getrlimit(RLIMIT_NOFILE, &lim);
  }
  const unsigned workers = cfg.server.workers != 0
                               ? cfg.server.workers
                               : std::max(1u, std::thread::hardware_concurrency());
  std::size_t upstream = 0;
  for (const auto& p : cfg.providers) upstream += p.pool.max_connections;
  // A client connection each, and an upstream connection for each stream
  // (the pools' sum when that is smaller).
  const std::size_t clients = cfg.server.limits.max_connections;
  const std::size_t want = clients + std::min(clients, workers * upstream);
  if (lim.rlim_cur != RLIM_INFINITY && lim.rlim_cur < want) {
    llmgate::gateway::log_line(
        llmgate::gateway::LogLevel::kWarn,
        "open file limit is " + std::to_string(lim.rlim_cur) + "; the config may use up to " +
            std::to_string(want) +
            " descriptors (a client and an upstream connection for each of "
            "server.limits.max_connections): raise the limit (ulimit -n, LimitNOFILE=) or lower "
            "server.limits.max_connections");
  }
}

// --hash-key: the SHA-256 of the key on standard input, for auth.keys.
int hash_key_from_stdin() {
  std::string key;
  std::getline(std::cin, key);
  while (!key.empty() && (key.back() == '\r' || key.back() == ' ')) key.pop_back();
  if (key.empty()) {
    std::cerr << "llmgate: --hash-key reads the key on standard input; got nothing\n";
    return 2;
  }
  std::cout << llmgate::gateway::sha256_hex(key) << "\n";
  return 0;
}

struct Options {
  std::string config_path, check_path, port_file;
  bool require_env = false;
  std::chrono::milliseconds watch_interval{2000};
};

// Reads the command line into `o`; an exit code when the process is done
// (help, --hash-key, a usage error).
std::optional<int> parse_args(int argc, char** argv, Options& o) {
  using namespace llmgate;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::cerr << "llmgate: " << a << " needs a value\n" << kUsage;
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--config") {
      o.config_path = value();
    } else if (a == "--check-config") {
      o.check_path = value();
    } else if (a == "--require-env") {
      o.require_env = true;
    } else if (a == "--port-file") {
      o.port_file = value();
    } else if (a == "--watch-interval") {
      std::string v = value();
      try {
        o.watch_interval = v == "0" ? std::chrono::milliseconds(0) : config::parse_duration(v);
      } catch (const std::exception&) {
        std::cerr << "llmgate: --watch-interval takes a duration such as 2s or 500ms, or 0\n";
        return 2;
      }
    } else if (a == "--log-format") {
      gateway::LogFormat format;
      std::string v = value();
      if (!gateway::parse_log_format(v, format)) {
        std::cerr << "llmgate: unknown log format \"" << v << "\" (text or json)\n";
        return 2;
      }
      gateway::set_log_format(format);
    } else if (a == "--log-level") {
      gateway::LogLevel level;
      std::string v = value();
      if (!gateway::parse_log_level(v, level)) {
        std::cerr << "llmgate: unknown log level \"" << v << "\"\n";
        return 2;
      }
      gateway::set_log_level(level);
    } else if (a == "--hash-key") {
      return hash_key_from_stdin();
    } else if (a == "--help" || a == "-h") {
      std::cout << kUsage;
      return 0;
    } else {
      std::cerr << "llmgate: unknown argument \"" << a << "\"\n" << kUsage;
      return 2;
    }
  }
  return std::nullopt;
}

int check_config(const std::string& path, bool require_env) {
  try {
    // Without --require-env, a secret's unset variable is a warning: a
    // pipeline that checks a config has none of its secrets.
    std::optional<llmgate::config::MissingSecrets> missing;
    if (!require_env) missing.emplace();
    auto cfg = llmgate::config::load_config(path);
    for (const auto& name : missing ? missing->names() : std::vector<std::string>{}) {
      std::cerr << path << ": warning: environment variable \"" << name
                << "\" is not set (the gateway will not start without it; --require-env makes "
                   "this an error)\n";
    }
    std::size_t deployments = 0;
    for (const auto& m : cfg->models) deployments += m.deployments.size();
    std::cout << path << ": OK (" << cfg->providers.size() << " providers, " << cfg->models.size()
              << " models, " << deployments << " deployments";
    if (const auto& s = cfg->shared_state; s.enabled()) {
      std::cout << "; shared state " << (s.tls ? "rediss://" : "redis://") << s.host << ":"
                << s.port;
    }
    std::cout << ")\n";
    return 0;
  } catch (const std::exception& e) {
    std::cerr << e.what() << "\n";
    return 1;
  }
}

// Signals are taken synchronously on a dedicated thread, which also watches
// the config file. Blocked before any thread starts, so every thread
// inherits the mask; blocked signals also reach us as PID 1 in a container,
// where unhandled ones would be ignored.
sigset_t block_signals() {
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGHUP);
  sigaddset(&signals, SIGUSR2);  // internal: wakes the signal thread to exit
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  std::signal(SIGPIPE, SIG_IGN);
  return signals;
}

void warn_about(const llmgate::config::Config& cfg) {
  using namespace llmgate;
  for (const auto& warning : cfg.warnings) {
    gateway::log_line(gateway::LogLevel::kWarn, "config: " + warning);
  }
  if (cfg.auth.enabled()) return;
  for (const auto& l : cfg.server.listeners) {
    if (l.address.rfind("127.", 0) == 0 || l.address == "::1") continue;
    gateway::log_line(gateway::LogLevel::kWarn,
                      "the API on " + l.address + ":" + std::to_string(l.port) +
                          " needs no key (no auth.keys): anyone who can reach it may use every "
                          "model; see docs/security.md");
  }
}

// The signal thread: SIGTERM/SIGINT drain, SIGHUP reloads, and the config
// file is reloaded when what its path reads changes (a ConfigMap update
// swaps a symlink). Returns when draining starts or `done` is set.
void handle_signals(llmgate::gateway::Gateway& gw, const sigset_t& signals, const Options& o,
                    const std::optional<std::string>& config_text, const std::atomic<bool>& done) {
  using namespace llmgate;
  using std::chrono::milliseconds;
  // A changed file is reloaded once it reads the same for kSettle (a file
  // being written is never taken half-way); meanwhile it is polled every
  // kSettlePoll.
  constexpr milliseconds kSettle{500}, kSettlePoll{100};
  gateway::ConfigWatch watch(config_text, kSettle);
  for (;;) {
    milliseconds poll = o.watch_interval.count() > 0 ? o.watch_interval : milliseconds(1000);
    if (watch.settling()) poll = std::min(poll, kSettlePoll);
    timespec ts{static_cast<time_t>(poll.count() / 1000),
                static_cast<long>(poll.count() % 1000) * 1'000'000};
    int sig = sigtimedwait(&signals, nullptr, &ts);
    if (done.load()) return;
    if (sig == SIGTERM || sig == SIGINT) {
      gateway::log_line(gateway::LogLevel::kInfo,
                        std::string("received ") + strsignal(sig) + ", draining");
      gw.drain();
      return;
    }
    if (sig == SIGHUP) {
      gateway::log_line(gateway::LogLevel::kInfo, "received SIGHUP, reloading " + o.config_path);
      watch.applied(read_whole_file(o.config_path));
      gw.reload_from_file(o.config_path);
      continue;
    }
    if (sig < 0 && o.watch_interval.count() > 0 &&
        watch.observe(read_whole_file(o.config_path), std::chrono::steady_clock::now())) {
      gateway::log_line(gateway::LogLevel::kInfo, o.config_path + " changed, reloading");
      gw.reload_from_file(o.config_path);
    }
  }
}

// Runs the gateway on `cfg` until it has drained and stopped.
void serve(std::shared_ptr<const llmgate::config::Config> cfg, const Options& o,
           const sigset_t& signals, const std::optional<std::string>& config_text) {
  using namespace llmgate;
  gateway::Gateway gw(cfg);
  auto ports = gw.start();
  for (std::size_t i = 0; i < ports.size(); ++i) {
    std::cout << "llmgate listening on " << cfg->server.listeners[i].address << ":" << ports[i]
              << std::endl;
  }
  if (auto admin = gw.admin_port()) {
    std::cout << "llmgate admin listener on " << cfg->server.admin_listener->address << ":"
              << *admin << std::endl;
  }
  if (!o.port_file.empty() && !ports.empty()) write_port_file(o.port_file, ports[0]);
  std::atomic<bool> done{false};
  std::thread signal_thread([&] { handle_signals(gw, signals, o, config_text, done); });
  gw.wait();
  // Wake the signal thread if stop came from elsewhere.
  done = true;
  pthread_kill(signal_thread.native_handle(), SIGUSR2);
  signal_thread.join();
}

}  // namespace

int main(int argc, char** argv) {
  using namespace llmgate;
  Options o;
  if (std::optional<int> exit_code = parse_args(argc, argv, o)) return *exit_code;
  if (!o.check_path.empty()) return check_config(o.check_path, o.require_env);
  if (o.config_path.empty()) {
    std::cerr << kUsage;
    return 2;
  }
  const sigset_t signals = block_signals();
  std::shared_ptr<const config::Config> cfg;
  std::optional<std::string> config_text = read_whole_file(o.config_path);
  try {
    cfg = config::load_config(o.config_path);
  } catch (const std::exception& e) {
    std::cerr << e.what() << "\n";
    return 1;
  }
  raise_descriptor_limit(*cfg);
  warn_about(*cfg);
  try {
    serve(cfg, o, signals, config_text);
  } catch (const std::exception& e) {
    std::cerr << "llmgate: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
