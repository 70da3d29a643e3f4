// llmgate: the gateway binary.
#include <csignal>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <string>
#include <thread>

#include "config/config.h"
#include "gateway/gateway.h"
#include "gateway/log.h"

namespace {

constexpr const char* kUsage = R"(usage: llmgate --config FILE [--log-level debug|info|warn|error] [--port-file PATH]
       llmgate --check-config FILE

  --config FILE        run the gateway with this YAML config (docs/config.md)
  --check-config FILE  validate FILE, print a summary or the first error, and exit
  --log-level LEVEL    default info; debug logs every failed attempt
  --port-file PATH     write the first listener's bound port here (useful with port 0)
)";

void write_port_file(const std::string& path, std::uint16_t port) {
  std::string tmp = path + ".tmp";
  {
    std::ofstream f(tmp);
    f << port << "\n";
  }
  std::rename(tmp.c_str(), path.c_str());
}

}  // namespace

int main(int argc, char** argv) {
  using namespace llmgate;
  std::string config_path, check_path, port_file;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::cerr << "llmgate: " << a << " needs a value\n" << kUsage;
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--config") config_path = value();
    else if (a == "--check-config") check_path = value();
    else if (a == "--port-file") port_file = value();
    else if (a == "--log-level") {
      gateway::LogLevel level;
      std::string v = value();
      if (!gateway::parse_log_level(v, level)) {
        std::cerr << "llmgate: unknown log level \"" << v << "\"\n";
        return 2;
      }
      gateway::set_log_level(level);
    } else if (a == "--help" || a == "-h") {
      std::cout << kUsage;
      return 0;
    } else {
      std::cerr << "llmgate: unknown argument \"" << a << "\"\n" << kUsage;
      return 2;
    }
  }
  if (!check_path.empty()) {
    try {
      auto cfg = config::load_config(check_path);
      std::size_t deployments = 0;
      for (const auto& m : cfg->models) deployments += m.deployments.size();
      std::cout << check_path << ": OK (" << cfg->providers.size() << " providers, "
                << cfg->models.size() << " models, " << deployments << " deployments)\n";
      return 0;
    } catch (const std::exception& e) {
      std::cerr << e.what() << "\n";
      return 1;
    }
  }
  if (config_path.empty()) {
    std::cerr << kUsage;
    return 2;
  }

  // Signals are taken synchronously on a dedicated thread.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  std::signal(SIGPIPE, SIG_IGN);

  std::shared_ptr<const config::Config> cfg;
  try {
    cfg = config::load_config(config_path);
  } catch (const std::exception& e) {
    std::cerr << e.what() << "\n";
    return 1;
  }
  try {
    gateway::Gateway gw(cfg);
    auto ports = gw.start();
    for (std::size_t i = 0; i < ports.size(); ++i) {
      std::cout << "llmgate listening on " << cfg->server.listeners[i].address << ":" << ports[i]
                << std::endl;
    }
    if (!port_file.empty() && !ports.empty()) write_port_file(port_file, ports[0]);
    std::thread signal_thread([&] {
      int sig = 0;
      sigwait(&signals, &sig);
      gateway::log_line(gateway::LogLevel::kInfo, std::string("received ") + strsignal(sig) + ", stopping");
      gw.stop();
    });
    gw.wait();
    // Wake the signal thread if stop came from elsewhere.
    pthread_kill(signal_thread.native_handle(), SIGTERM);
    signal_thread.join();
  } catch (const std::exception& e) {
    std::cerr << "llmgate: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
