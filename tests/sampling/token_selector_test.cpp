#include "sampling/token_selector.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>

#include "core/rng.h"
#include "sampling/reference_sampler.h"
#include "selector_parity.h"

namespace strata::sampling {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

using Dist = std::vector<std::pair<int32_t, double>>;

Dist dist_of(const std::vector<float>& x, const FilterParams& f) {
  TokenSelector sel;
  Dist d;
  sel.distribution(x.data(), static_cast<int64_t>(x.size()), f, &d);
  return d;
}

// Logits whose softmax is exactly `probs` (up to float rounding).
std::vector<float> logits_for(const std::vector<double>& probs) {
  std::vector<float> x;
  for (double p : probs) x.push_back(static_cast<float>(std::log(p)));
  return x;
}

void expect_dist(const Dist& got, const std::map<int32_t, double>& want, double tol = 1e-6) {
  ASSERT_EQ(got.size(), want.size());
  for (const auto& [id, p] : got) {
    ASSERT_TRUE(want.count(id)) << "unexpected token " << id;
    EXPECT_NEAR(p, want.at(id), tol) << "token " << id;
  }
}

TEST(TokenSelectorTest, ArgmaxTiesGoToLowestIdAndSkipsNaN) {
  std::vector<float> x = {1.0f, 3.0f, 2.0f, 3.0f};
  EXPECT_EQ(argmax(x.data(), 4), 1);
  std::vector<float> y = {kNaN, 0.5f, kNaN, 0.5f};
  EXPECT_EQ(argmax(y.data(), 4), 1);
  std::vector<float> z = {kNegInf, kNegInf, kNaN};
  EXPECT_EQ(argmax(z.data(), 3), 0);
  std::vector<float> w = {kNegInf, -1e30f, kNegInf};
  EXPECT_EQ(argmax(w.data(), 3), 1);
}

TEST(TokenSelectorTest, TemperatureScalesTheSoftmax) {
  const std::vector<float> x = {1.0f, 2.0f, 0.0f};
  // softmax(x / 0.5) = exp(2x) / sum: exp(2), exp(4), exp(0).
  const double e2 = std::exp(2.0), e4 = std::exp(4.0), s = e2 + e4 + 1.0;
  expect_dist(dist_of(x, {.temperature = 0.5f}), {{0, e2 / s}, {1, e4 / s}, {2, 1.0 / s}});
  // T = 2: exp(x / 2).
  const double a = std::exp(0.5), b = std::exp(1.0), t = a + b + 1.0;
  expect_dist(dist_of(x, {.temperature = 2.0f}), {{0, a / t}, {1, b / t}, {2, 1.0 / t}});
}

TEST(TokenSelectorTest, TopKKeepsTheKLargestAndTiesAtTheKth) {
  const std::vector<float> x = {1.0f, 3.0f, 2.0f, 3.0f, 0.0f};
  expect_dist(dist_of(x, {.top_k = 2}), {{1, 0.5}, {3, 0.5}});
  const double e3 = std::exp(3.0), e2 = std::exp(2.0), s = 2 * e3 + e2;
  expect_dist(dist_of(x, {.top_k = 3}), {{1, e3 / s}, {2, e2 / s}, {3, e3 / s}});
  // top_k = 1 with a tie at the top keeps both (vLLM masks logits < the k-th value).
  expect_dist(dist_of(x, {.top_k = 1}), {{1, 0.5}, {3, 0.5}});
  // Ties at the k-th value: {2, 2} share the 2nd place.
  const std::vector<float> y = {1.0f, 2.0f, 2.0f, 5.0f};
  const double f5 = std::exp(5.0), f2 = std::exp(2.0), t = f5 + 2 * f2;
  expect_dist(dist_of(y, {.top_k = 2}), {{1, f2 / t}, {2, f2 / t}, {3, f5 / t}});
  // k >= vocab is off.
  EXPECT_EQ(dist_of(x, {.top_k = 5}).size(), 5u);
}

TEST(TokenSelectorTest, TopPKeepsTheShortestPrefixReachingTheMass) {
  // Probabilities 0.5, 0.2, 0.15, 0.1, 0.05 in a shuffled id order.
  const std::vector<float> x = logits_for({0.1, 0.5, 0.05, 0.2, 0.15});
  expect_dist(dist_of(x, {.top_p = 0.45f}), {{1, 1.0}});
  expect_dist(dist_of(x, {.top_p = 0.6f}), {{1, 0.5 / 0.7}, {3, 0.2 / 0.7}});
  expect_dist(dist_of(x, {.top_p = 0.8f}), {{1, 0.5 / 0.85}, {3, 0.2 / 0.85}, {4, 0.15 / 0.85}});
  expect_dist(dist_of(x, {.top_p = 0.9f}),
              {{0, 0.1 / 0.95}, {1, 0.5 / 0.95}, {3, 0.2 / 0.95}, {4, 0.15 / 0.95}});
  // Equal probabilities: the lower id ranks first.
  const std::vector<float> y = {0.0f, 0.0f, 0.0f, 0.0f};
  expect_dist(dist_of(y, {.top_p = 0.3f}), {{0, 0.5}, {1, 0.5}});
}

TEST(TokenSelectorTest, MinPKeepsTokensAboveAFractionOfTheMax) {
  const std::vector<float> x = logits_for({0.1, 0.5, 0.05, 0.2, 0.15});
  // min_p 0.25: p >= 0.125 keeps 0.5, 0.2, 0.15.
  expect_dist(dist_of(x, {.min_p = 0.25f}), {{1, 0.5 / 0.85}, {3, 0.2 / 0.85}, {4, 0.15 / 0.85}});
  // min_p 0.35: p >= 0.175 keeps 0.5, 0.2.
  expect_dist(dist_of(x, {.min_p = 0.35f}), {{1, 0.5 / 0.7}, {3, 0.2 / 0.7}});
  // min_p is relative to the tempered distribution: at T = 2 the probabilities flatten to
  // sqrt(p) / sum, and 0.35 * sqrt(0.5) = 0.247 keeps sqrt(0.1) = 0.316 and above.
  const Dist d = dist_of(x, {.temperature = 2.0f, .min_p = 0.35f});
  EXPECT_EQ(d.size(), 4u);  // drops only the 0.05 token (sqrt = 0.224)
}

TEST(TokenSelectorTest, MinPRunsBeforeTopPAsInVllmV1) {
  // min_p 0.25 keeps {0.5, 0.2, 0.15} -> renormalised 0.588, 0.235, 0.176; then top_p 0.8 stops
  // at 0.588 + 0.235 = 0.82. (Applying top_p first would have kept three tokens.)
  const std::vector<float> x = logits_for({0.1, 0.5, 0.05, 0.2, 0.15});
  expect_dist(dist_of(x, {.top_p = 0.8f, .min_p = 0.25f}), {{1, 0.5 / 0.7}, {3, 0.2 / 0.7}});
}

TEST(TokenSelectorTest, TopKThenTopP) {
  // top_k 3 keeps 0.5, 0.2, 0.15, renormalised to 0.588, 0.235, 0.176: top_p 0.85 needs all
  // three, top_p 0.75 two.
  const std::vector<float> x = logits_for({0.1, 0.5, 0.05, 0.2, 0.15});
  expect_dist(dist_of(x, {.top_k = 3, .top_p = 0.85f}),
              {{1, 0.5 / 0.85}, {3, 0.2 / 0.85}, {4, 0.15 / 0.85}});
  expect_dist(dist_of(x, {.top_k = 3, .top_p = 0.75f}), {{1, 0.5 / 0.7}, {3, 0.2 / 0.7}});
}

TEST(TokenSelectorTest, NeverPicksNaNOrMaskedTokens) {
  const std::vector<float> x = {kNaN, 1.0f, kNegInf, 1.0f, kNaN};
  expect_dist(dist_of(x, {}), {{1, 0.5}, {3, 0.5}});
  expect_dist(dist_of(x, {.top_k = 1}), {{1, 0.5}, {3, 0.5}});
  expect_dist(dist_of(x, {.top_p = 0.4f}), {{1, 1.0}});
  TokenSelector sel;
  for (double u : {0.0, 0.25, 0.4999, 0.5, 0.75, 0.999999}) {
    const int32_t t = sel.sample(x.data(), 5, {}, u);
    EXPECT_TRUE(t == 1 || t == 3) << u;
  }
  EXPECT_EQ(sel.sample(x.data(), 5, {}, 0.2), 1);
  EXPECT_EQ(sel.sample(x.data(), 5, {}, 0.7), 3);
  const std::vector<float> dead = {kNegInf, kNaN};
  EXPECT_EQ(sel.sample(dead.data(), 2, {}, 0.5), 0);
  // A +inf logit (a broken model) is taken, never a token with no weight.
  const std::vector<float> inf = {0.0f, 1.0f, std::numeric_limits<float>::infinity(), 2.0f};
  for (const FilterParams& f :
       {FilterParams{}, FilterParams{.top_k = 2}, FilterParams{.top_p = 0.5f}}) {
    EXPECT_EQ(sel.sample(inf.data(), 4, f, 0.7), 2);
  }
}

TEST(TokenSelectorTest, MatchesFullSortReferenceOnEveryPath) {
  // 20000 tokens reach every path of the fast code: heap and bucket top_k, list and dense
  // draws, the 64-candidate top_p and the bucket select. selector_parity_slow_test.cpp repeats
  // this on a 152k vocabulary.
  Rng rng(2024);
  const std::vector<float> x = lm_like_logits(rng, 20000, 2.0);
  expect_matches_reference_all_paths(x, rng);
}

TEST(TokenSelectorTest, MatchesReferenceWithManyTies) {
  Rng rng(5);
  std::vector<float> x(3000);
  for (auto& v : x) v = static_cast<float>(rng.below(6));  // values 0..5, many ties
  for (const FilterParams& f :
       {FilterParams{.top_k = 7}, FilterParams{.top_k = 700}, FilterParams{.top_p = 0.3f},
        FilterParams{.top_p = 0.97f}, FilterParams{.top_k = 600, .top_p = 0.5f, .min_p = 0.1f}}) {
    expect_matches_reference(x, f, rng, "ties");
  }
}

// Chi-square goodness of fit of many draws against the expected distribution. With a fixed seed
// the test is deterministic; the thresholds are the 99.9% quantiles, so a correct sampler passes
// with room while a wrong temperature, mask or walk (a few % off) fails by orders of magnitude.
TEST(TokenSelectorTest, DrawsFollowTheDistribution) {
  // Chi-square 99.9% quantiles by degrees of freedom (kept tokens - 1).
  const double kCritical[] = {0.0, 10.83, 13.82, 16.27, 18.47, 20.52, 22.46, 24.32};
  const std::vector<float> x = {0.3f, 1.2f, -0.4f, 2.0f, 0.9f, -1.5f, 1.7f, 0.0f};
  const std::vector<FilterParams> cases = {
      {.temperature = 1.0f},
      {.temperature = 0.6f, .top_k = 4},
      {.temperature = 1.4f, .top_p = 0.8f},
      {.temperature = 1.0f, .min_p = 0.3f},
      {.temperature = 0.5f, .top_k = 6, .top_p = 0.95f},
  };
  Rng rng(12345);
  TokenSelector sel;
  for (const auto& f : cases) {
    const std::vector<double> ref = reference::probabilities(x, f);
    std::vector<int> counts(x.size(), 0);
    const int draws = 40000;
    for (int i = 0; i < draws; ++i) counts[sel.sample(x.data(), 8, f, rng.uniform())]++;
    double chi2 = 0.0;
    int kept = 0;
    for (size_t t = 0; t < x.size(); ++t) {
      if (ref[t] == 0.0) {
        EXPECT_EQ(counts[t], 0) << "dropped token " << t << " was drawn";
        continue;
      }
      ++kept;
      const double expected = ref[t] * draws;
      chi2 += (counts[t] - expected) * (counts[t] - expected) / expected;
    }
    ASSERT_GE(kept, 2);
    EXPECT_LT(chi2, kCritical[kept - 1]) << "temperature " << f.temperature << " top_k " << f.top_k
                                         << " top_p " << f.top_p << " min_p " << f.min_p;
  }
}

// The same statistic has the power to see a 10% temperature error, so the bound above means
// something.
TEST(TokenSelectorTest, ChiSquareDetectsAWrongTemperature) {
  const std::vector<float> x = {0.3f, 1.2f, -0.4f, 2.0f, 0.9f, -1.5f, 1.7f, 0.0f};
  Rng rng(99);
  TokenSelector sel;
  std::vector<int> counts(x.size(), 0);
  const int draws = 40000;
  for (int i = 0; i < draws; ++i)
    counts[sel.sample(x.data(), 8, {.temperature = 1.1f}, rng.uniform())]++;
  const std::vector<double> wrong = reference::probabilities(x, {.temperature = 1.0f});
  double chi2 = 0.0;
  for (size_t t = 0; t < x.size(); ++t) {
    const double e = wrong[t] * draws;
    chi2 += (counts[t] - e) * (counts[t] - e) / e;
  }
  EXPECT_GT(chi2, 24.32 * 4);
}

TEST(TokenSelectorTest, ScratchIsReusedAcrossVocabularySizes) {
  TokenSelector sel;
  Rng rng(3);
  for (int64_t n : {10, 30000, 7, 5000}) {
    const std::vector<float> x = lm_like_logits(rng, n, 1.0);
    expect_matches_reference(x, {.top_p = 0.9f}, rng, "resize", sel);
    expect_matches_reference(x, {.top_k = 3}, rng, "resize", sel);
  }
}

}  // namespace
}  // namespace strata::sampling
