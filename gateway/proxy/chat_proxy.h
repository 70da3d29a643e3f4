// POST /v1/chat/completions (chat_proxy.cpp). Includes Beast: include only
// from gateway .cpp files.
#pragma once

#include <boost/asio/awaitable.hpp>

#include "gateway/access/admission.h"
#include "gateway/apis/client_api.h"
#include "gateway/http/http_response.h"
#include "gateway/proxy/worker.h"

namespace llmgate::gateway {

// POST to one of the client APIs (/v1/chat/completions, /v1/responses,
// /v1/embeddings, /v1/completions, /v1/messages). Returns whether the
// connection may be kept alive.
net::awaitable<bool> handle_api_request(Worker& worker, beast::tcp_stream& client, Request& request,
                                        const RequestContext& rc, const ClientApi& api);

// POST /v1/messages/count_tokens (count_tokens.cpp).
net::awaitable<bool> handle_count_tokens(Worker& worker, beast::tcp_stream& client,
                                         Request& request, const RequestContext& rc);

// What admission reads of a request's head (its views live as `request`).
RequestHead request_head(const Request& request);

}  // namespace llmgate::gateway
