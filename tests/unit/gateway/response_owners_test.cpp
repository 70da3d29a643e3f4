// ResponseOwners (which provider stored each response: bounded in number and
// time) and the paths that name a stored response.
#include "gateway/proxy/response_owners.h"

#include <gtest/gtest.h>

namespace llmgate::gateway {
namespace {

using Clock = ResponseOwners::Clock;
using Part = ResponsePath::Part;

ResponseOwners::Owner at(const std::string& provider) {
  return {provider, "gpt", "gpt-4o", "tenant"};
}

TEST(ResponseOwners, RemembersWhereAResponseLivesUntilTheTtl) {
  ResponseOwners owners(10, std::chrono::hours(1));
  const auto t0 = Clock::time_point{} + std::chrono::hours(100);
  owners.remember("resp_1", at("a"), t0);
  ASSERT_TRUE(owners.owner_of("resp_1", t0 + std::chrono::minutes(59)));
  EXPECT_EQ(*owners.owner_of("resp_1", t0), at("a"));
  EXPECT_FALSE(owners.owner_of("resp_2", t0));
  EXPECT_FALSE(owners.owner_of("resp_1", t0 + std::chrono::hours(1)));
  EXPECT_EQ(owners.size(), 0u);
}

TEST(ResponseOwners, TheOldestGoFirstPastTheCapacity) {
  ResponseOwners owners(2);
  const auto t0 = Clock::now();
  owners.remember("r1", at("a"), t0);
  owners.remember("r2", at("b"), t0);
  owners.remember("r3", at("c"), t0);
  EXPECT_FALSE(owners.owner_of("r1", t0));
  EXPECT_EQ(owners.owner_of("r2", t0)->provider, "b");
  EXPECT_EQ(owners.owner_of("r3", t0)->provider, "c");
  EXPECT_EQ(owners.size(), 2u);
}

TEST(ResponseOwners, ARememberedAgainIdKeepsItsNewerEntry) {
  ResponseOwners owners(10, std::chrono::hours(1));
  const auto t0 = Clock::time_point{} + std::chrono::hours(100);
  owners.remember("r", at("a"), t0);
  owners.remember("r", at("b"), t0 + std::chrono::minutes(30));
  // The first entry's expiry does not take the second with it.
  EXPECT_EQ(owners.owner_of("r", t0 + std::chrono::minutes(61))->provider, "b");
}

TEST(ResponseOwners, ADeletedResponseIsForgotten) {
  ResponseOwners owners;
  const auto t0 = Clock::now();
  owners.remember("r", at("a"), t0);
  owners.forget("r");
  EXPECT_FALSE(owners.owner_of("r", t0));
  owners.remember("r", at("b"), t0);  // the stale place in the order does not remove it
  owners.remember("s", at("b"), t0);
  EXPECT_EQ(owners.owner_of("r", t0)->provider, "b");
}

TEST(ResponseOwners, IdsTooLongOrEmptyAreNotKept) {
  ResponseOwners owners;
  const auto t0 = Clock::now();
  owners.remember("", at("a"), t0);
  owners.remember(std::string(ResponseOwners::kMaxIdBytes + 1, 'x'), at("a"), t0);
  EXPECT_EQ(owners.size(), 0u);
}

TEST(ResponsePath, NamesTheResponseAndThePartOfIt) {
  auto r = response_path("/v1/responses/resp_abc123");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->id, "resp_abc123");
  EXPECT_EQ(r->part, Part::kResponse);
  r = response_path("/responses/resp_1/input_items");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->id, "resp_1");
  EXPECT_EQ(r->part, Part::kInputItems);
  r = response_path("/v1/responses/resp-1.x:y/cancel");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->part, Part::kCancel);
}

TEST(ResponsePath, AnythingElseIsNotAStoredResponse) {
  for (const char* p :
       {"/v1/responses", "/v1/responses/", "/v1/responses//cancel", "/v1/responses/r/other",
        "/v1/responses/r/cancel/x", "/v1/responses/a%2Fb", "/v1/responses/a b",
        "/v1/responses/../admin", "/v2/responses/r", "/v1/chat/completions"}) {
    EXPECT_FALSE(response_path(p)) << p;
  }
  EXPECT_FALSE(response_path("/v1/responses/" + std::string(ResponseOwners::kMaxIdBytes + 1, 'r')));
}

TEST(ResponsesQuery, OnlyTheApisOwnParametersGoOnInTheClientsOrder) {
  EXPECT_EQ(responses_query("/v1/responses/r?stream=true&starting_after=3"),
            "stream=true&starting_after=3");
  EXPECT_EQ(responses_query("/v1/responses/r/input_items?api-version=x&limit=5&order=asc&key=k"),
            "limit=5&order=asc");
  EXPECT_EQ(responses_query("/v1/responses/r?include[]=a&include%5B%5D=b&x"),
            "include[]=a&include%5B%5D=b");
  EXPECT_EQ(responses_query("/v1/responses/r?limit=1#frag&api-version=2"), "limit=1");
  EXPECT_EQ(responses_query("/v1/responses/r"), "");
  EXPECT_EQ(responses_query("/v1/responses/r?"), "");
  EXPECT_EQ(responses_query("/v1/responses/r?&&api-version=1&"), "");
}

}  // namespace
}  // namespace llmgate::gateway
