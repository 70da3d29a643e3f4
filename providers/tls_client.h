// TLS client setup shared by every outgoing TLS connection (providers, the
// shared-state Redis): the context — TLS 1.2 or later, the configured CA file
// or the system store — and, per connection, the server name it sends (SNI)
// and verifies the peer's certificate against.
//
// Includes Asio's SSL: include only from .cpp files.
#pragma once

#include <openssl/ssl.h>

#include <boost/asio/ssl/context.hpp>
#include <boost/asio/ssl/host_name_verification.hpp>
#include <boost/asio/ssl/stream.hpp>
#include <memory>
#include <string>

#include "config/config.h"

namespace llmgate::providers {

// Throws on a bad CA file (start-up and reload report it).
std::shared_ptr<boost::asio::ssl::context> make_tls_context(const config::Tls& tls);

// The name a connection to `host` sends and checks: tls.sni, else the host.
inline const std::string& tls_server_name(const config::Tls& tls, const std::string& host) {
  return tls.sni.empty() ? host : tls.sni;
}

// Sets the SNI of `ssl` to `name`, unless `name` is an IP address (RFC 6066
// §3: a literal is never sent as a server name). False if OpenSSL refuses it.
bool set_server_name(SSL* ssl, const std::string& name);

// Before the handshake: SNI, and the peer verified against the server name
// (host_name_verification matches IP addresses against IP SANs) unless
// tls.verify is off. False if the SNI cannot be set.
template <class Next>
bool prepare_tls_client(boost::asio::ssl::stream<Next>& stream, const config::Tls& tls,
                        const std::string& host) {
  namespace ssl = boost::asio::ssl;
  const std::string& name = tls_server_name(tls, host);
  if (!set_server_name(stream.native_handle(), name)) return false;
  if (tls.verify) {
    stream.set_verify_mode(ssl::verify_peer);
    stream.set_verify_callback(ssl::host_name_verification(name));
  } else {
    stream.set_verify_mode(ssl::verify_none);
  }
  return true;
}

}  // namespace llmgate::providers
