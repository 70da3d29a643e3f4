#include "gateway/server/route_table.h"

#include <gtest/gtest.h>

#include <string>

namespace llmgate::gateway {
namespace {

TEST(RouteTable, TheClientApisAnswerPostWithAndWithoutV1) {
  for (const char* p : {"/v1/chat/completions", "/chat/completions"}) {
    const Route r = route_of(p);
    EXPECT_EQ(r.endpoint, Endpoint::kApi) << p;
    EXPECT_EQ(r.operation, config::Operation::kChat) << p;
    EXPECT_TRUE(r.allows("POST"));
    EXPECT_FALSE(r.allows("GET"));
    EXPECT_EQ(r.allow, "POST");
    EXPECT_FALSE(r.admin);
  }
  EXPECT_EQ(route_of("/v1/responses").operation, config::Operation::kResponses);
  EXPECT_EQ(route_of("/v1/embeddings").operation, config::Operation::kEmbeddings);
  EXPECT_EQ(route_of("/completions").operation, config::Operation::kCompletions);
  EXPECT_EQ(route_of("/v1/messages").endpoint, Endpoint::kMessages);
  EXPECT_EQ(route_of("/messages/count_tokens").endpoint, Endpoint::kCountTokens);
  // Near misses are no route.
  for (const char* p : {"/v1x/chat/completions", "/v1/chat/completions/", "/v1/chat", "/v2/models",
                        "/v1/messages/other", ""}) {
    EXPECT_EQ(route_of(p).endpoint, Endpoint::kUnknown) << p;
  }
}

TEST(RouteTable, ModelsAreListedAndLookedUpByADecodedId) {
  EXPECT_EQ(route_of("/v1/models").endpoint, Endpoint::kModels);
  const Route one = route_of("/v1/models/org%2Fmodel%zz");
  EXPECT_EQ(one.endpoint, Endpoint::kModel);
  EXPECT_EQ(one.model_id, "org/model%zz");  // a bad escape stays as it is
  EXPECT_TRUE(one.allows("GET"));
  EXPECT_TRUE(one.allows("HEAD"));
  EXPECT_FALSE(one.allows("POST"));
  EXPECT_EQ(route_of("/models/m").model_id, "m");
}

TEST(RouteTable, OperatorPathsAreAdminOnesAndStoredResponsesAreForwarded) {
  for (const char* p : {"/metrics", "/healthz", "/readyz", "/admin/console", "/admin/history",
                        "/admin/routes", "/admin/other"}) {
    EXPECT_TRUE(route_of(p).admin) << p;
  }
  EXPECT_EQ(route_of("/admin/routes").endpoint, Endpoint::kRoutes);
  EXPECT_EQ(route_of("/admin/nothing").endpoint, Endpoint::kAdminOther);
  EXPECT_FALSE(route_of("/v1/models").admin);
  const Route stored = route_of("/v1/responses/resp_1/input_items");
  EXPECT_EQ(stored.endpoint, Endpoint::kResponse);
  EXPECT_TRUE(stored.allows("DELETE"));  // its methods are the resource's own
  ASSERT_TRUE(stored.response);
  EXPECT_EQ(stored.response->id, "resp_1");
  EXPECT_EQ(stored.response->part, ResponsePath::Part::kInputItems);
}

TEST(RouteTable, APostsPathIsReadFromTheRawRequestLine) {
  EXPECT_EQ(post_path("POST /v1/embeddings HTTP/1.1\r\n"), "/v1/embeddings");
  EXPECT_EQ(post_path("\r\nPOST /v1/embeddings?x=1 HTTP/1.1\r\n"), "/v1/embeddings");
  EXPECT_EQ(post_path("GET /v1/embeddings HTTP/1.1\r\n"), std::nullopt);
  EXPECT_EQ(query_of("/admin/routes?format=text"), "format=text");
  EXPECT_EQ(query_of("/admin/routes"), "");
}

}  // namespace
}  // namespace llmgate::gateway
