// Samplers are tested by property: many draws, a stated tolerance, a fixed
// seed so a failure reproduces.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <nlohmann/json.hpp>
#include <vector>

#include "tools/sim/sim_profile.h"

namespace llmgate::sim {
namespace {

using nlohmann::json;

struct Moments {
  double mean = 0;
  double stddev = 0;
  double min = INFINITY;
};

Moments moments_of(const Distribution& d, int n, std::uint64_t seed = 42) {
  Rng rng(seed);
  double sum = 0, sum2 = 0;
  Moments m;
  for (int i = 0; i < n; ++i) {
    const double x = sample(d, rng);
    sum += x;
    sum2 += x * x;
    m.min = std::min(m.min, x);
  }
  m.mean = sum / n;
  m.stddev = std::sqrt(std::max(0.0, sum2 / n - m.mean * m.mean));
  return m;
}

TEST(SimSampler, FixedAlwaysReturnsTheMean) {
  Rng rng(1);
  for (int i = 0; i < 100; ++i) {
    EXPECT_DOUBLE_EQ(sample({Distribution::Kind::kFixed, 123.5, 99}, rng), 123.5);
  }
}

TEST(SimSampler, NormalHasTheGivenMeanAndStddev) {
  const Moments m = moments_of({Distribution::Kind::kNormal, 300, 40}, 50000);
  EXPECT_NEAR(m.mean, 300, 300 * 0.01);
  EXPECT_NEAR(m.stddev, 40, 40 * 0.03);
}

TEST(SimSampler, LogNormalHasTheGivenMeanAndStddevNotThoseOfItsLog) {
  const Moments m = moments_of({Distribution::Kind::kLogNormal, 200, 100}, 200000);
  EXPECT_NEAR(m.mean, 200, 200 * 0.02);
  EXPECT_NEAR(m.stddev, 100, 100 * 0.05);
  EXPECT_GT(m.min, 0);
}

TEST(SimSampler, DrawsAreNeverNegative) {
  EXPECT_GE(moments_of({Distribution::Kind::kNormal, 1, 50}, 20000).min, 0);
  EXPECT_GE(moments_of({Distribution::Kind::kFixed, -5, 0}, 10).min, 0);
}

TEST(SimSampler, TokensPerSecondIsAtLeastATenth) {
  Profile p;
  p.tps = {Distribution::Kind::kNormal, 1, 100};
  Rng rng(7);
  for (int i = 0; i < 20000; ++i) EXPECT_GE(sample_tokens_per_second(p, rng), kMinTokensPerSecond);
}

TEST(SimSampler, OutputTokensAreUniformOverTheInclusiveRange) {
  Profile p;
  p.output_tokens_min = 3;
  p.output_tokens_max = 7;
  Rng rng(3);
  std::map<int, int> counts;
  constexpr int kDraws = 50000;
  for (int i = 0; i < kDraws; ++i) ++counts[sample_output_tokens(p, rng)];
  ASSERT_EQ(counts.size(), 5u);
  EXPECT_EQ(counts.begin()->first, 3);
  EXPECT_EQ(counts.rbegin()->first, 7);
  for (const auto& [value, count] : counts) {
    EXPECT_NEAR(count, kDraws / 5, kDraws / 5 * 0.05) << "value " << value;
  }
}

TEST(SimSampler, ErrorRateIsTheShareOfInjectedErrors) {
  Profile p;
  p.error_rate = 0.25;
  Rng rng(11);
  int errors = 0;
  constexpr int kDraws = 40000;
  for (int i = 0; i < kDraws; ++i) errors += sample_error(p, rng);
  EXPECT_NEAR(errors / double(kDraws), 0.25, 0.01);

  p.error_rate = 0;
  for (int i = 0; i < 1000; ++i) EXPECT_FALSE(sample_error(p, rng));
  p.error_rate = 1;
  for (int i = 0; i < 1000; ++i) EXPECT_TRUE(sample_error(p, rng));
}

TEST(SimSampler, FaultRateIsTheShareOfRequestsWithFaults) {
  Profile p;
  p.fault_rate = 0.1;
  Rng rng(13);
  int faulted = 0;
  constexpr int kDraws = 40000;
  for (int i = 0; i < kDraws; ++i) faulted += sample_faults(p, rng);
  EXPECT_NEAR(faulted / double(kDraws), 0.1, 0.01);

  p.fault_rate = 0;
  for (int i = 0; i < 1000; ++i) EXPECT_FALSE(sample_faults(p, rng));
  p.fault_rate = 1;  // the default: faults apply to every request, as before
  for (int i = 0; i < 1000; ++i) EXPECT_TRUE(sample_faults(p, rng));
}

TEST(SimSampler, FaultRateDoesNotShiftTheOtherDraws) {
  // The fault draw is made whatever the rate, so two runs that differ only in
  // fault_rate see the same TTFTs, speeds and lengths.
  Profile p =
      profile_from_json({{"ttft_ms", {{"dist", "lognormal"}, {"mean", 300}, {"stddev", 90}}},
                         {"output_tokens", {{"min", 1}, {"max", 500}}},
                         {"stall_before_first_token_ms", 5000}});
  auto draw = [&](double rate) {
    p.fault_rate = rate;
    Rng rng(21);
    std::vector<double> v;
    for (int i = 0; i < 100; ++i) {
      v.push_back(sample_ttft_ms(p, rng));
      v.push_back(sample_output_tokens(p, rng));
      sample_faults(p, rng);
    }
    return v;
  };
  EXPECT_EQ(draw(0), draw(1));
  EXPECT_EQ(draw(0), draw(0.37));
}

TEST(SimSampler, SameSeedGivesTheSameSequence) {
  Profile p =
      profile_from_json({{"ttft_ms", {{"dist", "lognormal"}, {"mean", 300}, {"stddev", 90}}},
                         {"tps", {{"dist", "normal"}, {"mean", 50}, {"stddev", 10}}},
                         {"output_tokens", {{"min", 1}, {"max", 500}}}});
  auto draw = [&](std::uint64_t seed) {
    Rng rng(seed);
    std::vector<double> v;
    for (int i = 0; i < 100; ++i) {
      v.push_back(sample_ttft_ms(p, rng));
      v.push_back(sample_tokens_per_second(p, rng));
      v.push_back(sample_output_tokens(p, rng));
    }
    return v;
  };
  EXPECT_EQ(draw(17), draw(17));
  EXPECT_NE(draw(17), draw(18));
}

TEST(SimText, TokensCycleADeterministicWordList) {
  EXPECT_EQ(token_text(0), " lorem");
  EXPECT_EQ(token_text(1), " ipsum");
  std::size_t period = 1;
  while (token_text(period) != token_text(0)) ++period;
  EXPECT_GT(period, 5u);
  EXPECT_EQ(token_text(period + 1), token_text(1));
}

TEST(SimText, CompletionTextIsTheConcatenationOfItsTokens) {
  std::string expected;
  for (std::size_t i = 0; i < 40; ++i) expected += token_text(i);
  EXPECT_EQ(completion_text(40), expected);
  EXPECT_EQ(completion_text(0), "");
}

TEST(SimText, PromptTokensAreAboutAQuarterOfTheContentCharacters) {
  EXPECT_EQ(estimate_prompt_tokens(json::parse(R"([{"role":"user","content":"abcdefgh"}])")), 2);
  EXPECT_EQ(estimate_prompt_tokens(json::parse(
                R"([{"role":"system","content":"abcd"},{"role":"user","content":"efghi"}])")),
            3);  // 9 characters, rounded up
  EXPECT_EQ(estimate_prompt_tokens(json::parse(
                R"([{"role":"user","content":[{"type":"text","text":"abcdefghijkl"},
                                              {"type":"image_url","image_url":{"url":"x"}}]}])")),
            3);
}

TEST(SimText, PromptTokensAreAtLeastOne) {
  EXPECT_EQ(estimate_prompt_tokens(json::parse(R"([{"role":"user","content":""}])")), 1);
  EXPECT_EQ(estimate_prompt_tokens(json::parse(R"([{"role":"assistant","content":null}])")), 1);
  EXPECT_EQ(estimate_prompt_tokens(json::object()), 1);
}

}  // namespace
}  // namespace llmgate::sim
