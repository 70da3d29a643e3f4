// Per-worker state and the HTTP helpers shared by the gateway's handlers.
// Includes Beast: include only from gateway .cpp files.
#pragma once

#include <memory>
#include <string>

#include <boost/asio/awaitable.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/message.hpp>
#include <boost/beast/http/string_body.hpp>

#include "config/config.h"
#include "gateway/api_error.h"
#include "gateway/metrics.h"
#include "providers/upstream_pool.h"
#include <random>

#include "routing/routing_state.h"

namespace llmgate::gateway {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = boost::beast::http;

struct Worker {
  std::shared_ptr<const config::Config> config;
  routing::RoutingState* routing = nullptr;
  Metrics* metrics = nullptr;
  providers::UpstreamPools* pools = nullptr;
  std::mt19937_64 rng{1};  // this worker's: exploration, random policy
};

struct RequestContext {
  std::string request_id;
  unsigned version = 11;  // client's HTTP version: 10 or 11
  bool keep_alive = true;
};

using Request = http::request<http::string_body>;
using Response = http::response<http::string_body>;

// A JSON response carrying x-request-id; keep-alive as the request allows.
Response make_json_response(const RequestContext& rc, http::status status, std::string body);
Response make_error_response(const RequestContext& rc, const ApiError& error);

// Writes a whole response with a write deadline. Returns false if the client
// is gone (the caller closes the connection).
net::awaitable<bool> write_response(beast::tcp_stream& client, Response& response,
                                    std::chrono::milliseconds timeout);

// POST /v1/chat/completions. Returns whether the connection may be kept alive.
net::awaitable<bool> handle_chat_completions(Worker& worker, beast::tcp_stream& client,
                                             const Request& request, const RequestContext& rc);

}  // namespace llmgate::gateway
