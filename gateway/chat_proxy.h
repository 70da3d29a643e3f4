// POST /v1/chat/completions (chat_proxy.cpp). Includes Beast: include only
// from gateway .cpp files.
#pragma once

#include <boost/asio/awaitable.hpp>

#include "gateway/client_api.h"
#include "gateway/http_response.h"
#include "gateway/worker.h"

namespace llmgate::gateway {

// POST to one of the client APIs (/v1/chat/completions, /v1/responses,
// /v1/embeddings, /v1/completions). Returns whether the connection may be
// kept alive.
net::awaitable<bool> handle_api_request(Worker& worker, beast::tcp_stream& client, Request& request,
                                        const RequestContext& rc, const ClientApi& api);

}  // namespace llmgate::gateway
