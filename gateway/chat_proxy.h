// POST /v1/chat/completions (chat_proxy.cpp). Includes Beast: include only
// from gateway .cpp files.
#pragma once

#include <boost/asio/awaitable.hpp>

#include "gateway/http_response.h"
#include "gateway/worker.h"

namespace llmgate::gateway {

// POST /v1/chat/completions. Returns whether the connection may be kept alive.
net::awaitable<bool> handle_chat_completions(Worker& worker, beast::tcp_stream& client,
                                             const Request& request, const RequestContext& rc);

}  // namespace llmgate::gateway
