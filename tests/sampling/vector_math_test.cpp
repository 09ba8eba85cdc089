#include "sampling/vector_math.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <limits>

#include "core/rng.h"

namespace strata::sampling {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

// exp_approx against std::exp (the reference) over the whole range the sampler uses.
TEST(VectorMathTest, ExpApproxMatchesStdExp) {
  double worst = 0.0;
  for (float x = -87.0f; x <= 88.0f; x += 0.0137f) {
    const double ref = std::exp(static_cast<double>(x));
    const double rel = std::abs(exp_approx(x) - ref) / ref;
    worst = std::max(worst, rel);
  }
  EXPECT_LT(worst, 5e-7);
  Rng rng(1);
  for (int i = 0; i < 100000; ++i) {
    const float x = rng.uniform(-80.0f, 0.0f);
    const double ref = std::exp(static_cast<double>(x));
    ASSERT_LT(std::abs(exp_approx(x) - ref) / ref, 5e-7) << x;
  }
  EXPECT_EQ(exp_approx(0.0f), 1.0f);
  EXPECT_EQ(exp_approx(-kInf), 0.0f);
  EXPECT_EQ(exp_approx(-1000.0f), 0.0f);
  EXPECT_EQ(exp_approx(kNaN), 0.0f);
  EXPECT_NEAR(exp_approx(kInf) / std::exp(88.0), 1.0, 1e-6);
}

TEST(VectorMathTest, MaxIgnoresNaNAndHandlesTails) {
  std::vector<float> x = {1.0f, kNaN, 3.0f, -kInf, 2.0f, 7.5f, kNaN, 0.0f, 1.0f, 7.25f, kNaN};
  EXPECT_EQ(max_value(x.data(), static_cast<int64_t>(x.size())), 7.5f);
  EXPECT_EQ(max_value(x.data(), 3), 3.0f);
  EXPECT_EQ(max_value(x.data(), 0), -kInf);
  std::vector<float> nans(20, kNaN);
  EXPECT_EQ(max_value(nans.data(), 20), -kInf);
}

TEST(VectorMathTest, WeightsAndSums) {
  const std::vector<float> x = {0.0f, -1.0f, kNaN, -kInf, 2.0f, 1.0f};
  std::vector<float> w(x.size());
  exp_weights(x.data(), 6, /*m=*/2.0f, /*inv_t=*/0.5f, /*threshold=*/-0.5f, w.data());
  EXPECT_NEAR(w[0], std::exp(-1.0), 1e-7);
  EXPECT_EQ(w[1], 0.0f);  // below the threshold
  EXPECT_EQ(w[2], 0.0f);  // NaN
  EXPECT_EQ(w[3], 0.0f);  // -inf
  EXPECT_EQ(w[4], 1.0f);
  EXPECT_NEAR(w[5], std::exp(-0.5), 1e-7);
  EXPECT_NEAR(sum_range(w.data(), 0, 6), std::exp(-1.0) + 1.0 + std::exp(-0.5), 1e-6);
  EXPECT_NEAR(sum_exp(x.data(), 6, 2.0f), std::exp(-2.0) + std::exp(-3.0) + 1.0 + std::exp(-1.0),
              1e-6);
  // A long row: sum_exp against a plain double loop.
  Rng rng(4);
  std::vector<float> y(100003);
  for (auto& v : y) v = static_cast<float>(rng.normal() * 3.0);
  double ref = 0.0;
  for (float v : y) ref += std::exp(static_cast<double>(v) - 5.0);
  EXPECT_NEAR(sum_exp(y.data(), static_cast<int64_t>(y.size()), 5.0f) / ref, 1.0, 1e-6);
}

// The SSE2 and AVX2 builds must agree bit for bit (seeded sampling is then the same on every
// machine). On a CPU without AVX2 only the SSE2 build exists and this checks it against itself.
TEST(VectorMathTest, Avx2AndGenericBuildsAreBitIdentical) {
  Rng rng(8);
  const int64_t n = 10007;  // not a multiple of any vector width
  std::vector<float> x(n), w(n);
  for (auto& v : x) v = static_cast<float>(rng.normal() * 4.0);
  x[5] = kNaN;
  x[77] = -kInf;
  for (int64_t i = 0; i < n; ++i) w[i] = rng.below(4) == 0 ? 0.0f : rng.uniform(0.0f, 1.0f);

  struct Results {
    float max;
    std::vector<float> weights;
    double sum_exp, sum_range;
    std::vector<uint16_t> buckets;
    std::vector<float> kept;
  };
  auto compute = [&] {
    Results r;
    r.max = max_value(x.data(), n);
    r.weights.resize(n);
    exp_weights(x.data(), n, r.max, 1.0f / 0.7f, -3.0f, r.weights.data());
    r.sum_exp = sum_exp(x.data(), n, r.max);
    r.sum_range = sum_range(w.data(), 3, n - 2);
    r.buckets.resize(n);
    bucket_indices(x.data(), w.data(), n, -10.0f, 50.0f, 1000, r.buckets.data());
    r.kept = w;
    keep_at_or_above(x.data(), n, 0.5f, 5000, r.kept.data());
    return r;
  };
  const bool had_avx2 = vector_math_uses_avx2();
  const Results fast = compute();
  vector_math_force_generic(true);
  EXPECT_FALSE(vector_math_uses_avx2());
  const Results generic = compute();
  vector_math_force_generic(false);
  EXPECT_EQ(vector_math_uses_avx2(), had_avx2);
  EXPECT_EQ(std::bit_cast<uint32_t>(fast.max), std::bit_cast<uint32_t>(generic.max));
  EXPECT_EQ(std::memcmp(fast.weights.data(), generic.weights.data(), n * sizeof(float)), 0);
  EXPECT_EQ(std::bit_cast<uint64_t>(fast.sum_exp), std::bit_cast<uint64_t>(generic.sum_exp));
  EXPECT_EQ(std::bit_cast<uint64_t>(fast.sum_range), std::bit_cast<uint64_t>(generic.sum_range));
  EXPECT_EQ(fast.buckets, generic.buckets);
  EXPECT_EQ(std::memcmp(fast.kept.data(), generic.kept.data(), n * sizeof(float)), 0);
  // And the weights equal the scalar exp_approx element by element.
  for (int64_t i = 0; i < n; ++i) {
    const float want = x[i] >= -3.0f ? exp_approx((x[i] - fast.max) * (1.0f / 0.7f)) : 0.0f;
    ASSERT_EQ(std::bit_cast<uint32_t>(fast.weights[i]), std::bit_cast<uint32_t>(want)) << i;
  }
}

TEST(VectorMathTest, BucketsAreMonotoneAndKeepIsExact) {
  const std::vector<float> x = {-20.0f, -1.0f, 0.0f, 0.5f, 3.0f, 100.0f, 0.5f};
  const std::vector<float> w = {1.0f, 1.0f, 0.0f, 1.0f, 1.0f, 1.0f, 1.0f};
  std::vector<uint16_t> b(x.size());
  bucket_indices(x.data(), w.data(), 7, -2.0f, 10.0f, 50, b.data());
  // Clamped below to 0 and above to 49; the dropped token (w = 0) goes to the spare bucket 50.
  EXPECT_EQ(b, (std::vector<uint16_t>{0, 10, 50, 25, 49, 49, 25}));
  std::vector<float> kept = {1, 1, 1, 1, 1, 1, 1};
  keep_at_or_above(x.data(), 7, 0.5f, 3, kept.data());  // ties at 0.5 kept up to id 3
  EXPECT_EQ(kept, (std::vector<float>{0, 0, 0, 1, 1, 1, 0}));
}

}  // namespace
}  // namespace strata::sampling
