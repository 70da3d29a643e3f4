// server: and the top-level timeouts: sections.
#include <arpa/inet.h>

#include <string>

#include "config/quoting.h"
#include "config/sections.h"

namespace llmgate::config {
namespace {

constexpr unsigned kMaxWorkers = 1024;
// Bodies, heads and SSE events are buffered whole; a limit above 1GiB is a
// typo, and keeping below 4GiB lets the server use 32-bit parser limits.
constexpr std::size_t kMaxLimitBytes = std::size_t{1} << 30;

// Listeners bind literal addresses: no name resolution at start-up.
std::string read_ip_address(const ConfigNode& node) {
  std::string text = node.string();
  in_addr v4{};
  in6_addr v6{};
  if (inet_pton(AF_INET, text.c_str(), &v4) != 1 && inet_pton(AF_INET6, text.c_str(), &v6) != 1) {
    node.fail("expected an IP address such as 127.0.0.1, 0.0.0.0 or ::, got " + quote(text));
  }
  return text;
}

Listener read_listener(const ConfigNode& node) {
  Listener listener;
  node.read_map([&](ConfigMap& m) {
    m.read("address", listener.address, read_ip_address);
    m.read("port", listener.port, integer_in<std::uint16_t>(0, 65535));
  });
  return listener;
}

std::vector<Listener> read_listeners(const ConfigNode& node) {
  std::vector<Listener> listeners;
  for (const auto& item : node.items()) {
    Listener listener = read_listener(item);
    for (const auto& earlier : listeners) {
      // Port 0 asks the kernel for a fresh port each time, so it never clashes.
      if (listener.port != 0 && earlier.port == listener.port &&
          earlier.address == listener.address) {
        item.fail("duplicate listener " + listener.address + ":" + std::to_string(listener.port));
      }
    }
    listeners.push_back(std::move(listener));
  }
  if (listeners.empty()) node.fail("must list at least one listener");
  return listeners;
}

ServerLimits read_limits(const ConfigNode& node) {
  ServerLimits limits;
  node.read_map([&](ConfigMap& m) {
    m.read("max_body_size", limits.max_body_bytes, size_at_most(kMaxLimitBytes));
    m.read("max_embeddings_body_size", limits.max_embeddings_body_bytes,
           size_at_most(kMaxLimitBytes));
    m.read("max_header_size", limits.max_header_bytes, size_at_most(kMaxLimitBytes));
    m.read("max_event_size", limits.max_event_bytes, size_at_most(kMaxLimitBytes));
    m.read("max_connections", limits.max_connections, integer_in<std::size_t>(1, 10'000'000));
    m.read("client_header_timeout", limits.client_header_timeout, &ConfigNode::duration);
    m.read("client_idle_timeout", limits.client_idle_timeout, &ConfigNode::duration);
  });
  return limits;
}

Drain read_drain(const ConfigNode& node) {
  Drain drain;
  node.read_map([&](ConfigMap& m) {
    m.read("delay", drain.delay, &ConfigNode::duration_or_zero);
    m.read("timeout", drain.timeout, &ConfigNode::duration);
  });
  return drain;
}

}  // namespace

Server read_server(const ConfigNode& node) {
  Server server;
  node.read_map([&](ConfigMap& m) {
    m.read("listeners", server.listeners, read_listeners);
    m.read("admin_listener", server.admin_listener, read_listener);
    m.read("workers", server.workers, integer_in<unsigned>(0, kMaxWorkers));
    m.read("limits", server.limits, read_limits);
    m.read("drain", server.drain, read_drain);
    m.read("explain", server.explain, [](const ConfigNode& n) {
      const std::string v = n.string();
      if (v == "all") return Explain::kAll;
      if (v == "keys") return Explain::kKeys;
      n.fail("expected \"all\" or \"keys\", got " + quote(v));
    });
  });
  if (const auto& admin = server.admin_listener; admin && admin->port != 0) {
    for (const auto& l : server.listeners) {
      if (l.port == admin->port && l.address == admin->address) {
        node.fail("admin_listener " + admin->address + ":" + std::to_string(admin->port) +
                  " is also in listeners");
      }
    }
  }
  return server;
}

TimeoutOverrides read_timeout_overrides(const ConfigNode& node) {
  TimeoutOverrides timeouts;
  node.read_map([&](ConfigMap& m) {
    m.read("connect", timeouts.connect, &ConfigNode::duration);
    m.read("ttft", timeouts.ttft, &ConfigNode::duration);
    m.read("idle", timeouts.idle, &ConfigNode::duration);
    m.read("total", timeouts.total, &ConfigNode::duration);
  });
  return timeouts;
}

Timeouts read_default_timeouts(const ConfigNode& node) {
  // Same keys as a provider's overrides; what is left out keeps the built-in default.
  return read_timeout_overrides(node).apply_to(Timeouts{});
}

}  // namespace llmgate::config
