// A stored response at the provider that created it (Responses API):
// GET /v1/responses/{id} (also ?stream=true, whose events are relayed as
// they come), GET …/{id}/input_items, POST …/{id}/cancel and DELETE
// …/{id}. No other provider can know the id, so there is no routing and no
// failover: the gateway forwards to the owner it recorded when the response
// was created (ResponseOwners) and answers 404 for an id it did not see.
// Includes Beast: include only from gateway .cpp files.
#pragma once

#include <boost/asio/awaitable.hpp>

#include "gateway/http/http_response.h"
#include "gateway/proxy/response_owners.h"
#include "gateway/proxy/worker.h"

namespace llmgate::gateway {

// The 404 for a response id this gateway does not know (or that is another
// key's): OpenAI's wording, and what the gateway can and cannot know.
ApiError response_not_found(const std::string& id);

// Returns whether the client connection may be kept alive.
net::awaitable<bool> handle_response_resource(Worker& worker, beast::tcp_stream& client,
                                              const Request& request, const RequestContext& rc,
                                              const ResponsePath& path);

}  // namespace llmgate::gateway
