#include "sampling/logprobs.h"

#include <gtest/gtest.h>

#include <cmath>

#include "core/rng.h"
#include "sampling/reference_sampler.h"

namespace strata::sampling {
namespace {

// log(e^1 + e^2 + e^3 + e^0) = log(31.19287485...) = 3.44018969...
constexpr double kLse = 3.4401896985611953;

TEST(LogprobsTest, HandComputedLogSoftmax) {
  const std::vector<float> x = {1.0f, 2.0f, 3.0f, 0.0f};
  LogprobsComputer c;
  TokenLogprobs out;
  c.compute(x.data(), 4, /*token=*/1, /*num_top=*/2, &out);
  EXPECT_EQ(out.chosen.token_id, 1);
  EXPECT_NEAR(out.chosen.logprob, 2.0 - kLse, 1e-6);
  EXPECT_EQ(out.chosen.rank, 2);
  ASSERT_EQ(out.top.size(), 2u);
  EXPECT_EQ(out.top[0].token_id, 2);
  EXPECT_NEAR(out.top[0].logprob, 3.0 - kLse, 1e-6);
  EXPECT_EQ(out.top[0].rank, 1);
  EXPECT_EQ(out.top[1].token_id, 1);
  EXPECT_NEAR(out.top[1].logprob, 2.0 - kLse, 1e-6);
  EXPECT_EQ(out.top[1].rank, 2);

  c.compute(x.data(), 4, /*token=*/3, /*num_top=*/0, &out);
  EXPECT_NEAR(out.chosen.logprob, -kLse, 1e-6);
  EXPECT_EQ(out.chosen.rank, 4);
  EXPECT_TRUE(out.top.empty());

  // More alternatives than the vocabulary: all of them.
  c.compute(x.data(), 4, 0, 10, &out);
  ASSERT_EQ(out.top.size(), 4u);
  EXPECT_EQ(out.top[3].token_id, 3);
  EXPECT_EQ(out.top[3].rank, 4);
}

TEST(LogprobsTest, TiesShareTheWorseRankAndListLowerIdsFirst) {
  const std::vector<float> x = {1.0f, 1.0f, 0.0f};
  LogprobsComputer c;
  TokenLogprobs out;
  c.compute(x.data(), 3, 0, 2, &out);
  EXPECT_EQ(out.chosen.rank, 2);  // vLLM counts tokens with logprob >= the chosen one
  EXPECT_EQ(out.top[0].token_id, 0);
  EXPECT_EQ(out.top[1].token_id, 1);
  // log(1/(2 + e^-1))
  EXPECT_NEAR(out.top[0].logprob, -std::log(2.0 + std::exp(-1.0)), 1e-6);
}

TEST(LogprobsTest, LargeLogitsDoNotOverflow) {
  const std::vector<float> x = {1000.0f, 999.0f, -1000.0f};
  LogprobsComputer c;
  TokenLogprobs out;
  c.compute(x.data(), 3, 1, 1, &out);
  EXPECT_NEAR(out.chosen.logprob, -1.0 - std::log1p(std::exp(-1.0)), 1e-5);
  EXPECT_NEAR(out.top[0].logprob, -std::log1p(std::exp(-1.0)), 1e-5);
}

TEST(LogprobsTest, MatchesReferenceOnALongRow) {
  Rng rng(11);
  const int64_t n = 50000;
  std::vector<float> x(n);
  for (auto& v : x) v = static_cast<float>(rng.normal() * 3.0);
  LogprobsComputer c;
  TokenLogprobs out;
  for (int trial = 0; trial < 5; ++trial) {
    const int32_t token = static_cast<int32_t>(rng.below(n));
    c.compute(x.data(), n, token, 20, &out);
    const TokenLogprobs ref = reference::logprobs(x, token, 20);
    EXPECT_EQ(out.chosen.token_id, token);
    EXPECT_NEAR(out.chosen.logprob, ref.chosen.logprob, 2e-5);
    EXPECT_EQ(out.chosen.rank, ref.chosen.rank);
    ASSERT_EQ(out.top.size(), ref.top.size());
    for (size_t j = 0; j < ref.top.size(); ++j) {
      EXPECT_EQ(out.top[j].token_id, ref.top[j].token_id);
      EXPECT_NEAR(out.top[j].logprob, ref.top[j].logprob, 2e-5);
      EXPECT_EQ(out.top[j].rank, ref.top[j].rank);
    }
  }
}

}  // namespace
}  // namespace strata::sampling
