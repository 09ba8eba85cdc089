// MoE routing with hand-computed scores: softmax and sigmoid scoring, the selection-only bias,
// group-limited selection (by best expert and by the sum of the best two), normalisation and
// scaling, ties, and the grouping of tokens by expert.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "kernels/moe_routing.h"

namespace strata {
namespace {

float sigmoid(float x) {
  return 1.0f / (1.0f + std::exp(-x));
}

TEST(MoeRouting, MixtralSoftmaxTopTwoRenormalised) {
  MoeRoutingConfig c{.num_experts = 4, .top_k = 2, .normalize = true};
  ASSERT_TRUE(c.validate().ok());
  const float logits[] = {1.0f, 3.0f, 2.0f, 0.0f};
  int32_t ids[2];
  float w[2];
  route_token(c, logits, nullptr, ids, w);
  EXPECT_EQ(ids[0], 1);
  EXPECT_EQ(ids[1], 2);
  // Renormalised softmax over the chosen logits {3, 2}.
  const float e = std::exp(1.0f);
  EXPECT_NEAR(w[0], e / (e + 1), 1e-6);
  EXPECT_NEAR(w[1], 1 / (e + 1), 1e-6);
}

TEST(MoeRouting, SoftmaxWithoutNormalisationIsScaled) {
  // DeepSeek-V2: softmax probabilities of the chosen experts times routed_scaling_factor.
  MoeRoutingConfig c{.num_experts = 4, .top_k = 2, .scaling = 16.0f};
  const float logits[] = {0.0f, std::log(2.0f), std::log(3.0f), std::log(4.0f)};  // p = k/10
  int32_t ids[2];
  float w[2];
  route_token(c, logits, nullptr, ids, w);
  EXPECT_EQ(ids[0], 3);
  EXPECT_EQ(ids[1], 2);
  EXPECT_NEAR(w[0], 0.4f * 16, 1e-5);
  EXPECT_NEAR(w[1], 0.3f * 16, 1e-5);
}

TEST(MoeRouting, SigmoidBiasChoosesButDoesNotWeigh) {
  // DeepSeek-V3: sigmoid scores; the correction bias moves expert 0 ahead of expert 2, but the
  // weights are the unbiased scores, renormalised, times 2.5.
  MoeRoutingConfig c{.num_experts = 4,
                     .top_k = 2,
                     .scoring = MoeScoring::kSigmoid,
                     .normalize = true,
                     .scaling = 2.5f};
  const float logits[] = {0.0f, 2.0f, 1.0f, -1.0f};
  const float bias[] = {0.5f, 0.0f, 0.0f, 0.0f};
  // Selection scores: s0 = 0.5 + 0.5 = 1.0, s1 = 0.881, s2 = 0.731, s3 = 0.269.
  int32_t ids[2];
  float w[2];
  route_token(c, logits, bias, ids, w);
  EXPECT_EQ(ids[0], 0);
  EXPECT_EQ(ids[1], 1);
  const float s0 = sigmoid(0.0f), s1 = sigmoid(2.0f);
  EXPECT_NEAR(w[0], s0 / (s0 + s1) * 2.5f, 1e-6);
  EXPECT_NEAR(w[1], s1 / (s0 + s1) * 2.5f, 1e-6);
  // Without the bias expert 2 wins the second place.
  route_token(c, logits, nullptr, ids, w);
  EXPECT_EQ(ids[0], 1);
  EXPECT_EQ(ids[1], 2);
}

TEST(MoeRouting, GroupLimitedByBestExpert) {
  // V2 group_limited_greedy: 8 experts in 4 groups of 2; keep the 2 groups with the best single
  // expert. Groups: {0,1} best 0.9, {2,3} best 0.8, {4,5} best 0.85, {6,7} best 0.7.
  // Kept: groups 0 and 2. Global top-3 would be 0, 4, 2 (0.9, 0.85, 0.8); limited: 0, 4, 1/5.
  MoeRoutingConfig c{.num_experts = 8,
                     .top_k = 3,
                     .scoring = MoeScoring::kSigmoid,
                     .num_groups = 4,
                     .topk_groups = 2,
                     .group_score = MoeGroupScore::kMax};
  ASSERT_TRUE(c.validate().ok());
  const float p[] = {0.9f, 0.5f, 0.8f, 0.75f, 0.85f, 0.6f, 0.7f, 0.1f};
  float logits[8];
  for (int i = 0; i < 8; ++i) logits[i] = std::log(p[i] / (1 - p[i]));  // sigmoid(logit) = p
  int32_t ids[3];
  float w[3];
  route_token(c, logits, nullptr, ids, w);
  EXPECT_EQ(ids[0], 0);
  EXPECT_EQ(ids[1], 4);
  EXPECT_EQ(ids[2], 5);  // 0.6 beats 0.5; expert 2 (0.8) is in a dropped group
  EXPECT_NEAR(w[2], 0.6f, 1e-6);
}

TEST(MoeRouting, GroupLimitedByTopTwoSumWithBias) {
  // V3 noaux_tc: groups scored by the sum of their two best biased scores. Group {0,1} has the
  // single best expert (0.95 + 0.05 = 1.0); group {2,3} sums 0.7 + 0.7 = 1.4; group {4,5}
  // 0.6 + 0.5 = 1.1 but a bias of +0.4 on expert 5 lifts it to 1.5. Keep 2 of 3 groups:
  // {4,5} and {2,3}; expert 0 is dropped although it scores best.
  MoeRoutingConfig c{.num_experts = 6,
                     .top_k = 2,
                     .scoring = MoeScoring::kSigmoid,
                     .normalize = true,
                     .scaling = 2.0f,
                     .num_groups = 3,
                     .topk_groups = 2,
                     .group_score = MoeGroupScore::kTopTwoSum};
  ASSERT_TRUE(c.validate().ok());
  const float p[] = {0.95f, 0.05f, 0.7f, 0.7f, 0.6f, 0.5f};
  const float bias[] = {0, 0, 0, 0, 0, 0.4f};
  float logits[6];
  for (int i = 0; i < 6; ++i) logits[i] = std::log(p[i] / (1 - p[i]));
  int32_t ids[2];
  float w[2];
  route_token(c, logits, bias, ids, w);
  // Selection scores: 5 -> 0.9, 2 -> 0.7, 3 -> 0.7 (tie: lower id), 4 -> 0.6.
  EXPECT_EQ(ids[0], 5);
  EXPECT_EQ(ids[1], 2);
  EXPECT_NEAR(w[0], 0.5f / 1.2f * 2.0f, 1e-5);  // unbiased 0.5 and 0.7, renormalised
  EXPECT_NEAR(w[1], 0.7f / 1.2f * 2.0f, 1e-5);
}

TEST(MoeRouting, TiesGoToTheLowerExpert) {
  MoeRoutingConfig c{.num_experts = 5, .top_k = 3};
  const float logits[] = {1.0f, 2.0f, 2.0f, 1.0f, 2.0f};
  int32_t ids[3];
  float w[3];
  route_token(c, logits, nullptr, ids, w);
  EXPECT_EQ(ids[0], 1);
  EXPECT_EQ(ids[1], 2);
  EXPECT_EQ(ids[2], 4);
}

TEST(MoeRouting, BatchRoutingMatchesTokenByToken) {
  MoeRoutingConfig c{.num_experts = 16,
                     .top_k = 4,
                     .scoring = MoeScoring::kSigmoid,
                     .normalize = true,
                     .scaling = 2.5f,
                     .num_groups = 4,
                     .topk_groups = 2,
                     .group_score = MoeGroupScore::kTopTwoSum};
  const int64_t T = 37;
  std::vector<float> logits(T * 16), bias(16);
  for (size_t i = 0; i < logits.size(); ++i) logits[i] = std::sin(0.37f * i) * 3;
  for (int e = 0; e < 16; ++e) bias[e] = 0.05f * (e % 3);
  std::vector<int32_t> ids(T * 4), one_ids(4);
  std::vector<float> w(T * 4), one_w(4);
  ThreadPool pool(3);
  route_tokens(c, logits.data(), 16, T, bias.data(), ids.data(), w.data(), pool);
  for (int64_t t = 0; t < T; ++t) {
    route_token(c, logits.data() + t * 16, bias.data(), one_ids.data(), one_w.data());
    for (int k = 0; k < 4; ++k) {
      EXPECT_EQ(ids[t * 4 + k], one_ids[k]);
      EXPECT_EQ(w[t * 4 + k], one_w[k]);
    }
    float sum = 0;
    for (int k = 0; k < 4; ++k) sum += w[t * 4 + k];
    EXPECT_NEAR(sum, 2.5f, 1e-5);
  }
}

TEST(MoeRouting, GroupByExpertKeepsTokenOrder) {
  // 3 tokens, top 2: token 0 -> {2, 0}, token 1 -> {0, 1}, token 2 -> {2, 1}.
  const int32_t ids[] = {2, 0, 0, 1, 2, 1};
  int32_t offsets[4], entries[6];
  group_by_expert(ids, 3, 2, 3, offsets, entries);
  const int32_t want_offsets[] = {0, 2, 4, 6};
  const int32_t want_entries[] = {1, 2, 3, 5, 0, 4};  // expert 0: (t0,s1),(t1,s0); ...
  for (int i = 0; i < 4; ++i) EXPECT_EQ(offsets[i], want_offsets[i]);
  for (int i = 0; i < 6; ++i) EXPECT_EQ(entries[i], want_entries[i]);
}

TEST(MoeRouting, ValidationNamesTheBadField) {
  MoeRoutingConfig c{.num_experts = 8, .top_k = 2, .num_groups = 3, .topk_groups = 1};
  auto s = c.validate();
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("n_group"), std::string::npos) << s.message();
  c = {.num_experts = 8, .top_k = 9};
  EXPECT_FALSE(c.validate().ok());
  c = {.num_experts = 8, .top_k = 4, .num_groups = 4, .topk_groups = 1};  // 1 group of 2 < 4
  EXPECT_FALSE(c.validate().ok());
  c = {.num_experts = 8, .top_k = 2, .num_groups = 4, .topk_groups = 5};
  EXPECT_NE(c.validate().message().find("topk_group"), std::string::npos);
}

}  // namespace
}  // namespace strata
