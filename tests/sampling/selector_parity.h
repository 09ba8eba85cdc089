// Parity checks of TokenSelector against the full-sort reference, shared by the unit and the slow
// test executables.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "core/rng.h"
#include "sampling/reference_sampler.h"
#include "sampling/token_selector.h"

namespace strata::sampling {

// Random logits shaped like a language model's: a few large, a long tail.
inline std::vector<float> lm_like_logits(Rng& rng, int64_t n, double scale) {
  std::vector<float> x(n);
  for (auto& v : x) v = static_cast<float>(rng.normal() * scale);
  for (int i = 0; i < 20; ++i) x[rng.below(n)] += static_cast<float>(8.0 + rng.normal());
  return x;
}

inline void expect_matches_reference(const std::vector<float>& x, const FilterParams& f, Rng& rng,
                                     const char* what, TokenSelector& sel) {
  SCOPED_TRACE(what);
  std::vector<std::pair<int32_t, double>> fast;
  sel.distribution(x.data(), static_cast<int64_t>(x.size()), f, &fast);
  const std::vector<double> ref = reference::probabilities(x, f);
  size_t ref_kept = 0;
  for (double p : ref) ref_kept += p > 0.0;
  ASSERT_EQ(fast.size(), ref_kept);
  for (const auto& [id, p] : fast) {
    ASSERT_GT(ref[id], 0.0) << "token " << id << " kept only by the fast path";
    ASSERT_NEAR(p, ref[id], 1e-12 + 1e-9 * ref[id]) << "token " << id;
  }
  // reference::pick walks the cumulative sum; a binary search over the same sums is equivalent
  // (zero-probability tokens never raise it) and keeps this test fast on 152k tokens.
  std::vector<double> cdf(ref.size());
  double cum = 0.0;
  for (size_t i = 0; i < ref.size(); ++i) cdf[i] = cum += ref[i];
  for (int draw = 0; draw < 200; ++draw) {
    const double u = rng.uniform();
    auto it = std::upper_bound(cdf.begin(), cdf.end(), u);
    const int32_t want =
        it == cdf.end() ? reference::pick(ref, u) : static_cast<int32_t>(it - cdf.begin());
    ASSERT_EQ(sel.sample(x.data(), static_cast<int64_t>(x.size()), f, u), want) << "u = " << u;
  }
  const double u = 0.123456789;  // the linear walk itself, once
  EXPECT_EQ(sel.sample(x.data(), static_cast<int64_t>(x.size()), f, u), reference::pick(ref, u));
}

inline void expect_matches_reference(const std::vector<float>& x, const FilterParams& f, Rng& rng,
                                     const char* what) {
  TokenSelector sel;
  expect_matches_reference(x, f, rng, what, sel);
}

// Every parameter mix that selects a different path in the fast code.
inline void expect_matches_reference_all_paths(const std::vector<float>& x, Rng& rng) {
  expect_matches_reference(x, {.temperature = 0.7f}, rng, "temperature only");
  expect_matches_reference(x, {.temperature = 1.0f, .top_k = 50}, rng, "top_k 50 (heap)");
  expect_matches_reference(x, {.temperature = 1.3f, .top_k = 2000}, rng, "top_k 2000 (buckets)");
  expect_matches_reference(x, {.temperature = 1.0f, .top_k = 6000}, rng, "top_k 6000 (dense)");
  expect_matches_reference(x, {.temperature = 0.8f, .top_p = 0.9f}, rng, "top_p 0.9");
  expect_matches_reference(x, {.temperature = 1.5f, .top_p = 0.999f}, rng, "top_p 0.999 (select)");
  expect_matches_reference(x, {.temperature = 1.0f, .min_p = 0.05f}, rng, "min_p (list)");
  expect_matches_reference(x, {.temperature = 3.0f, .min_p = 0.001f}, rng, "min_p (dense)");
  expect_matches_reference(x, {.temperature = 0.9f, .top_k = 40, .top_p = 0.95f, .min_p = 0.01f},
                           rng, "all filters");
  expect_matches_reference(x, {.temperature = 2.0f, .top_k = 8000, .top_p = 0.5f}, rng,
                           "large top_k then top_p");
}

}  // namespace strata::sampling
