#include "providers/tls_client.h"

#include <boost/asio/ip/address.hpp>

namespace llmgate::providers {

namespace ssl = boost::asio::ssl;

std::shared_ptr<ssl::context> make_tls_context(const config::Tls& tls) {
  auto ctx = std::make_shared<ssl::context>(ssl::context::tls_client);
  ctx->set_options(ssl::context::default_workarounds | ssl::context::no_sslv2 |
                   ssl::context::no_sslv3 | ssl::context::no_tlsv1 | ssl::context::no_tlsv1_1);
  if (tls.ca_file.empty()) {
    ctx->set_default_verify_paths();
  } else {
    ctx->load_verify_file(tls.ca_file);  // throws: reported at start-up
  }
  return ctx;
}

bool set_server_name(SSL* ssl, const std::string& name) {
  boost::system::error_code not_ip;
  boost::asio::ip::make_address(name, not_ip);
  return !not_ip || SSL_set_tlsext_host_name(ssl, name.c_str()) == 1;
}

}  // namespace llmgate::providers
