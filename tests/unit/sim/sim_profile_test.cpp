#include "tools/sim/sim_profile.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace llmgate::sim {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;

// The message of the std::invalid_argument that parsing `j` throws, or "".
std::string parse_error(const json& j, const Profile& base = {}) {
  try {
    profile_from_json(j, base);
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "";
}

TEST(SimProfileJson, EmptyObjectKeepsTheBase) {
  Profile base;
  base.region = "eu-west";
  base.error_rate = 0.25;
  EXPECT_EQ(profile_to_json(profile_from_json(json::object(), base)), profile_to_json(base));
}

TEST(SimProfileJson, ToJsonThenFromJsonRoundTrips) {
  Profile p;
  p.ttft = {Distribution::Kind::kLogNormal, 350, 120};
  p.tps = {Distribution::Kind::kNormal, 80, 5};
  p.output_tokens_min = 10;
  p.output_tokens_max = 20;
  p.error_rate = 0.1;
  p.error_status = 429;
  p.retry_after_s = 2;
  p.stall_before_first_token_ms = 1000;
  p.stall_after_tokens = 5;
  p.stall_ms = 300;
  p.cut_after_tokens = 7;
  p.malformed_after_tokens = 3;
  p.fault_rate = 0.1;
  p.region = "us-east";
  p.reject_stream = true;
  p.reasoning_hidden = true;
  p.reasoning_field = "reasoning";
  p.annotations = true;
  p.cached_tokens = 12;
  p.error_after_tokens = 4;
  p.safety_block = true;
  EXPECT_EQ(profile_to_json(profile_from_json(profile_to_json(p))), profile_to_json(p));
  const Profile back = profile_from_json(profile_to_json(p));
  EXPECT_EQ(back.error_after_tokens, 4);
  EXPECT_TRUE(back.safety_block);
}

TEST(SimProfileJson, RealProviderKeysAreCheckedByName) {
  EXPECT_THROW(profile_from_json(json{{"reasoning_field", "thoughts"}}), std::invalid_argument);
  EXPECT_THROW(profile_from_json(json{{"reject_stream", 1}}), std::invalid_argument);
  EXPECT_THROW(profile_from_json(json{{"cached_tokens", -1}}), std::invalid_argument);
  EXPECT_EQ(profile_from_json(json{{"reasoning_field", "reasoning"}}).reasoning_field, "reasoning");
}

TEST(SimProfileJson, ErrorAfterTokensAndSafetyBlockDefaultOffAndAreChecked) {
  EXPECT_EQ(profile_to_json(Profile{})["error_after_tokens"], -1);
  EXPECT_EQ(profile_to_json(Profile{})["safety_block"], false);
  EXPECT_EQ(profile_from_json({{"error_after_tokens", 3}}).error_after_tokens, 3);
  EXPECT_TRUE(profile_from_json({{"safety_block", true}}).safety_block);
  EXPECT_THAT(parse_error({{"error_after_tokens", 2.5}}), HasSubstr("error_after_tokens"));
  EXPECT_THAT(parse_error({{"error_after_tokens", "3"}}), HasSubstr("error_after_tokens"));
  EXPECT_THAT(parse_error({{"safety_block", 1}}), HasSubstr("safety_block"));
}

TEST(SimProfileJson, NumberMeansFixedDistribution) {
  Profile base;
  base.ttft = {Distribution::Kind::kNormal, 100, 30};
  const Profile p = profile_from_json({{"ttft_ms", 750}, {"tps", 42.5}}, base);
  EXPECT_EQ(p.ttft.kind, Distribution::Kind::kFixed);
  EXPECT_DOUBLE_EQ(p.ttft.mean, 750);
  EXPECT_EQ(p.tps.kind, Distribution::Kind::kFixed);
  EXPECT_DOUBLE_EQ(p.tps.mean, 42.5);
}

TEST(SimProfileJson, DistributionObjectMergesOverTheCurrentOne) {
  Profile base;
  base.ttft = {Distribution::Kind::kLogNormal, 100, 30};
  const Profile p = profile_from_json({{"ttft_ms", {{"mean", 500}}}}, base);
  EXPECT_EQ(p.ttft.kind, Distribution::Kind::kLogNormal);
  EXPECT_DOUBLE_EQ(p.ttft.mean, 500);
  EXPECT_DOUBLE_EQ(p.ttft.stddev, 30);

  const Profile q =
      profile_from_json({{"tps", {{"dist", "normal"}, {"mean", 60}, {"stddev", 4}}}}, base);
  EXPECT_EQ(q.tps.kind, Distribution::Kind::kNormal);
  EXPECT_DOUBLE_EQ(q.tps.mean, 60);
  EXPECT_DOUBLE_EQ(q.tps.stddev, 4);
}

TEST(SimProfileJson, PartialUpdateLeavesOtherFieldsAlone) {
  Profile base;
  base.region = "ap-south";
  base.error_rate = 0.5;
  base.cut_after_tokens = 9;
  const Profile p = profile_from_json({{"tps", 80}}, base);
  EXPECT_EQ(p.region, "ap-south");
  EXPECT_DOUBLE_EQ(p.error_rate, 0.5);
  EXPECT_EQ(p.cut_after_tokens, 9);
  EXPECT_DOUBLE_EQ(p.tps.mean, 80);
}

TEST(SimProfileJson, OutputTokensAcceptsNumberOrRange) {
  const Profile fixed = profile_from_json({{"output_tokens", 12}});
  EXPECT_EQ(fixed.output_tokens_min, 12);
  EXPECT_EQ(fixed.output_tokens_max, 12);

  Profile base;
  base.output_tokens_min = 5;
  base.output_tokens_max = 10;
  const Profile wider = profile_from_json({{"output_tokens", {{"max", 100}}}}, base);
  EXPECT_EQ(wider.output_tokens_min, 5);
  EXPECT_EQ(wider.output_tokens_max, 100);
}

TEST(SimProfileJson, RetryAfterNullClearsIt) {
  Profile base;
  base.retry_after_s = 5;
  EXPECT_FALSE(profile_from_json({{"retry_after_s", nullptr}}, base).retry_after_s);
  EXPECT_EQ(profile_from_json({{"retry_after_s", 3}}).retry_after_s, 3);
}

TEST(SimProfileJson, UnknownKeyIsRejectedByName) {
  EXPECT_THAT(parse_error({{"ttft", 100}}), HasSubstr("\"ttft\""));
  EXPECT_THAT(parse_error({{"ttft_ms", {{"mean", 1}, {"sigma", 2}}}}), HasSubstr("ttft_ms.sigma"));
  EXPECT_THAT(parse_error({{"output_tokens", {{"avg", 2}}}}), HasSubstr("output_tokens.avg"));
}

TEST(SimProfileJson, WrongTypesAreRejectedWithTheKey) {
  EXPECT_THAT(parse_error({{"tps", "fast"}}), HasSubstr("tps"));
  EXPECT_THAT(parse_error({{"ttft_ms", {{"dist", "gamma"}}}}), HasSubstr("ttft_ms.dist"));
  EXPECT_THAT(parse_error({{"error_status", 500.5}}), HasSubstr("error_status"));
  EXPECT_THAT(parse_error({{"region", 3}}), HasSubstr("region"));
  EXPECT_THAT(parse_error({{"cut_after_tokens", true}}), HasSubstr("cut_after_tokens"));
  EXPECT_THAT(parse_error({{"retry_after_s", "soon"}}), HasSubstr("retry_after_s"));
  EXPECT_THAT(parse_error(json::array()), HasSubstr("object"));
}

TEST(SimProfileJson, OutOfRangeValuesAreRejectedWithTheKey) {
  EXPECT_THAT(parse_error({{"error_rate", 1.5}}), HasSubstr("error_rate"));
  EXPECT_THAT(parse_error({{"error_status", 200}}), HasSubstr("error_status"));
  EXPECT_THAT(parse_error({{"ttft_ms", -1}}), HasSubstr("ttft_ms"));
  EXPECT_THAT(parse_error({{"tps", 0}}), HasSubstr("tps"));
  EXPECT_THAT(parse_error({{"stall_ms", -5}}), HasSubstr("stall_ms"));
  EXPECT_THAT(parse_error({{"output_tokens", {{"min", 9}, {"max", 3}}}}),
              HasSubstr("output_tokens"));
  EXPECT_THAT(parse_error({{"output_tokens", -1}}), HasSubstr("output_tokens"));
}

TEST(SimProfileJson, FaultRateDefaultsToOneAndIsReadAndWritten) {
  EXPECT_DOUBLE_EQ(Profile{}.fault_rate, 1);
  EXPECT_EQ(profile_to_json(Profile{})["fault_rate"], 1.0);
  const Profile p =
      profile_from_json({{"stall_before_first_token_ms", 600000}, {"fault_rate", 0.1}});
  EXPECT_DOUBLE_EQ(p.fault_rate, 0.1);
  EXPECT_EQ(p.stall_before_first_token_ms, 600000);
  EXPECT_DOUBLE_EQ(profile_from_json({{"fault_rate", 0}}).fault_rate, 0);
  EXPECT_DOUBLE_EQ(profile_from_json({{"fault_rate", 1}}).fault_rate, 1);
  // A partial update that does not name it keeps it.
  EXPECT_DOUBLE_EQ(profile_from_json({{"cut_after_tokens", 3}}, p).fault_rate, 0.1);
}

TEST(SimProfileJson, FaultRateOutsideZeroOneOrNotANumberIsRejected) {
  EXPECT_THAT(parse_error({{"fault_rate", 1.01}}), HasSubstr("fault_rate"));
  EXPECT_THAT(parse_error({{"fault_rate", -0.1}}), HasSubstr("fault_rate"));
  EXPECT_THAT(parse_error({{"fault_rate", "10%"}}), HasSubstr("fault_rate"));
  EXPECT_THAT(parse_error({{"fault_rate", nullptr}}), HasSubstr("fault_rate"));
}

TEST(SimProfileJson, WithoutFaultsDisablesEveryFaultAndKeepsTheRest) {
  Profile p;
  p.ttft = {Distribution::Kind::kLogNormal, 350, 120};
  p.error_rate = 0.2;
  p.region = "eu-west";
  p.fault_rate = 0.3;
  p.stall_before_first_token_ms = 1000;
  p.stall_after_tokens = 5;
  p.stall_ms = 300;
  p.cut_after_tokens = 7;
  p.malformed_after_tokens = 3;
  p.error_after_tokens = 2;
  p.safety_block = true;
  const Profile q = without_faults(p);
  EXPECT_LT(q.error_after_tokens, 0);
  EXPECT_TRUE(q.safety_block);  // a property of the model, not a fault
  EXPECT_LT(q.stall_before_first_token_ms, 0);
  EXPECT_LT(q.stall_after_tokens, 0);
  EXPECT_EQ(q.stall_ms, 0);
  EXPECT_LT(q.cut_after_tokens, 0);
  EXPECT_LT(q.malformed_after_tokens, 0);
  EXPECT_EQ(profile_to_json(q)["ttft_ms"], profile_to_json(p)["ttft_ms"]);
  EXPECT_DOUBLE_EQ(q.error_rate, 0.2);
  EXPECT_EQ(q.region, "eu-west");
}

TEST(SimProfileJson, NegativeFaultPositionsDisableFaults) {
  const Profile p = profile_from_json({{"cut_after_tokens", -1}, {"stall_after_tokens", -7}});
  EXPECT_LT(p.cut_after_tokens, 0);
  EXPECT_LT(p.stall_after_tokens, 0);
}

TEST(SimProfileJson, ToJsonWritesFixedAsNumberAndOthersAsObject) {
  Profile p;
  p.ttft = {Distribution::Kind::kFixed, 100, 0};
  p.tps = {Distribution::Kind::kLogNormal, 50, 10};
  const json j = profile_to_json(p);
  EXPECT_EQ(j["ttft_ms"], 100.0);
  EXPECT_EQ(j["tps"]["dist"], "lognormal");
  EXPECT_EQ(j["tps"]["stddev"], 10.0);
}

}  // namespace
}  // namespace llmgate::sim
