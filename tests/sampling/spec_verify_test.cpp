// Rejection sampling of speculative drafts (Sampler::verify_drafts): the tokens it returns follow
// exactly the distribution of plain sampling, step by step. Checked with a chi-square test over
// many draws with fixed seeds (so the test is deterministic), for several filters and drafts that
// are likely, unlikely and impossible under the target.
#include <gtest/gtest.h>

#include <cmath>
#include <map>

#include "sampling/sampler.h"

namespace strata::sampling {
namespace {

constexpr int64_t kVocab = 8;

// The distribution plain sampling draws from for one row.
std::vector<double> target(const std::vector<float>& logits, const SamplingParams& p) {
  TokenSelector sel;
  std::vector<std::pair<int32_t, double>> dist;
  sel.distribution(logits.data(), kVocab, {p.temperature, p.top_k, p.top_p, p.min_p}, &dist);
  std::vector<double> out(kVocab, 0.0);
  for (const auto& [id, prob] : dist) out[static_cast<size_t>(id)] = prob;
  return out;
}

// Chi-square statistic of observed counts against expected probabilities (bins with an expected
// count below 5 pooled), and its degrees of freedom.
std::pair<double, int> chi_square(const std::map<std::vector<int32_t>, int64_t>& counts,
                                  const std::map<std::vector<int32_t>, double>& expected,
                                  int64_t n) {
  double chi = 0, pooled_obs = 0, pooled_exp = 0;
  int bins = 0;
  for (const auto& [key, e] : expected) {
    const double exp_count = e * static_cast<double>(n);
    auto it = counts.find(key);
    const double obs = it == counts.end() ? 0.0 : static_cast<double>(it->second);
    if (exp_count < 5) {
      pooled_obs += obs;
      pooled_exp += exp_count;
      continue;
    }
    chi += (obs - exp_count) * (obs - exp_count) / exp_count;
    ++bins;
  }
  if (pooled_exp > 0) {
    chi += (pooled_obs - pooled_exp) * (pooled_obs - pooled_exp) / pooled_exp;
    ++bins;
  }
  for (const auto& [key, c] : counts)
    EXPECT_TRUE(expected.count(key)) << "an outcome of probability 0 was drawn";
  return {chi, bins - 1};
}

// Upper 0.1 % point of chi-square with k degrees of freedom (Wilson-Hilferty).
double chi_square_critical(int k) {
  const double z = 3.090;  // 0.999 quantile of the standard normal
  const double a = 2.0 / (9.0 * k);
  return k * std::pow(1 - a + z * std::sqrt(a), 3);
}

struct Case {
  const char* name;
  SamplingParams params;
  std::vector<int32_t> drafts;
};

TEST(VerifyDrafts, KeepsTheTargetDistributionExactly) {
  std::vector<std::vector<float>> rows = {{0.5f, 2.0f, 1.0f, -1.0f, 0.0f, 1.5f, -3.0f, 0.2f},
                                          {1.0f, -0.5f, 0.3f, 2.2f, 0.0f, -1.0f, 1.1f, 0.4f},
                                          {-2.0f, 0.1f, 1.7f, 0.9f, 0.8f, 0.0f, -0.3f, 1.2f}};
  SamplingParams base;
  base.temperature = 1.0f;
  SamplingParams hot = base;
  hot.temperature = 1.7f;
  SamplingParams topk = base;
  topk.top_k = 3;
  SamplingParams topp = base;
  topp.top_p = 0.8f;
  const Case cases[] = {
      {"likely draft", base, {1}}, {"unlikely draft", base, {6}},
      {"two drafts", hot, {5, 3}}, {"top_k, draft outside the top 3", topk, {7, 3}},
      {"top_p", topp, {1, 0}},
  };
  constexpr int64_t kTrials = 60000;
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    SamplerConfig sc;
    sc.vocab_size = kVocab;
    sc.seed = 1234;
    Sampler sampler(sc);
    const size_t d = c.drafts.size();
    std::vector<float> logits;
    for (size_t j = 0; j <= d; ++j) logits.insert(logits.end(), rows[j].begin(), rows[j].end());
    SamplingRow row{&c.params, {}, {}, nullptr};
    // Expected: the sequence plain sampling gives, cut where it leaves the drafts (its first
    // token that differs from the draft at that position, or the token after all drafts).
    std::map<std::vector<int32_t>, double> expected;
    std::vector<std::vector<double>> p;
    for (size_t j = 0; j <= d; ++j) p.push_back(target(rows[j], c.params));
    double prefix = 1.0;
    std::vector<int32_t> key;
    for (size_t j = 0; j <= d; ++j) {
      for (int32_t t = 0; t < kVocab; ++t) {
        if (j < d && t == c.drafts[j]) continue;
        const double q = prefix * p[j][static_cast<size_t>(t)];
        if (q <= 0) continue;
        auto k = key;
        k.push_back(t);
        expected[k] = q;
      }
      if (j == d) break;
      prefix *= p[j][static_cast<size_t>(c.drafts[j])];
      key.push_back(c.drafts[j]);
    }
    std::map<std::vector<int32_t>, int64_t> counts;
    std::vector<int32_t> out;
    for (int64_t i = 0; i < kTrials; ++i) {
      sampler.verify_drafts(logits.data(), row, c.drafts, &out);
      ASSERT_GE(out.size(), 1u);
      ASSERT_LE(out.size(), d + 1);
      for (size_t j = 0; j + 1 < out.size(); ++j) ASSERT_EQ(out[j], c.drafts[j]);
      ++counts[out];
    }
    const auto [chi, dof] = chi_square(counts, expected, kTrials);
    ASSERT_GT(dof, 0);
    EXPECT_LT(chi, chi_square_critical(dof)) << "chi-square " << chi << " with " << dof << " dof";
  }
}

// The test can fail: a verifier that always keeps the draft is far from the target.
TEST(VerifyDrafts, TheChiSquareCheckSeesABiasedVerifier) {
  std::map<std::vector<int32_t>, double> expected = {{{0}, 0.5}, {{1}, 0.3}, {{2}, 0.2}};
  std::map<std::vector<int32_t>, int64_t> biased = {{{0}, 5500}, {{1}, 2700}, {{2}, 1800}};
  const auto [chi, dof] = chi_square(biased, expected, 10000);
  EXPECT_GT(chi, chi_square_critical(dof));
}

}  // namespace
}  // namespace strata::sampling
