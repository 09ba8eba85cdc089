#include "sampling/vector_math.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

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

// Caps the sampler's vector math at a variant for one scope (vector_math_limit is process-wide).
class ScopedVariant {
 public:
  explicit ScopedVariant(VectorMathVariant v) { vector_math_limit(v); }
  ~ScopedVariant() { vector_math_limit(VectorMathVariant::kAvx512); }
};

// Every row-wide helper on one row, as raw bytes so that results compare bit for bit.
struct AllResults {
  uint32_t max = 0, min = 0;
  std::vector<float> weights, block_weights, chunk_maxes, kept;
  std::vector<double> block_sums;
  uint64_t sum_exp = 0, sum_range = 0;
  int64_t count = 0;
  std::vector<uint16_t> buckets, buckets_all;
};

AllResults compute_all(const std::vector<float>& x, const std::vector<float>& w) {
  const int64_t n = static_cast<int64_t>(x.size());
  AllResults r;
  const float m = max_value(x.data(), n);
  r.max = std::bit_cast<uint32_t>(m);
  const float lo = min_finite(x.data(), n);
  r.min = std::bit_cast<uint32_t>(lo);
  r.weights.resize(n);
  exp_weights(x.data(), n, m, 1.0f / 0.7f, -3.0f, r.weights.data());
  constexpr int64_t kBlock = 1000;
  r.block_weights.resize(n);
  r.block_sums.resize((n + kBlock - 1) / kBlock);
  exp_weights_blocks(x.data(), n, m, 1.25f, -1.0f, r.block_weights.data(), kBlock,
                     r.block_sums.data());
  constexpr int64_t kChunk = 256;
  r.chunk_maxes.resize((n + kChunk - 1) / kChunk);
  chunk_max(x.data(), n, kChunk, r.chunk_maxes.data());
  r.sum_exp = std::bit_cast<uint64_t>(sum_exp(x.data(), n, m));
  r.sum_range = std::bit_cast<uint64_t>(sum_range(w.data(), n > 5 ? 3 : 0, n > 5 ? n - 2 : n));
  r.count = count_at_least(x.data(), n, 0.5f);
  r.buckets.resize(n);
  r.buckets_all.resize(n);
  const float scale = std::isfinite(lo) && std::isfinite(m) && m > lo ? 999.0f / (m - lo) : 1.0f;
  bucket_indices(x.data(), w.data(), n, lo, scale, 1000, r.buckets.data());
  bucket_indices_all(x.data(), n, lo, scale, 1000, r.buckets_all.data());
  r.kept = w;
  keep_at_or_above(x.data(), n, 0.5f, n / 2, r.kept.data());
  return r;
}

template <typename T>
bool same_bytes(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0;
}

void expect_bit_identical(const AllResults& fast, const AllResults& portable, int64_t n) {
  EXPECT_EQ(fast.max, portable.max) << "max_value, n = " << n;
  EXPECT_EQ(fast.min, portable.min) << "min_finite, n = " << n;
  EXPECT_TRUE(same_bytes(fast.weights, portable.weights)) << "exp_weights, n = " << n;
  EXPECT_TRUE(same_bytes(fast.block_weights, portable.block_weights))
      << "exp_weights_blocks, n = " << n;
  EXPECT_TRUE(same_bytes(fast.block_sums, portable.block_sums)) << "block sums, n = " << n;
  EXPECT_TRUE(same_bytes(fast.chunk_maxes, portable.chunk_maxes)) << "chunk_max, n = " << n;
  EXPECT_EQ(fast.sum_exp, portable.sum_exp) << "sum_exp, n = " << n;
  EXPECT_EQ(fast.sum_range, portable.sum_range) << "sum_range, n = " << n;
  EXPECT_EQ(fast.count, portable.count) << "count_at_least, n = " << n;
  EXPECT_EQ(fast.buckets, portable.buckets) << "bucket_indices, n = " << n;
  EXPECT_EQ(fast.buckets_all, portable.buckets_all) << "bucket_indices_all, n = " << n;
  EXPECT_TRUE(same_bytes(fast.kept, portable.kept)) << "keep_at_or_above, n = " << n;
}

// A logits-like row of length n: normal values, some NaN and -inf, and (with `with_pos_inf`) a
// +inf; w: weights with a quarter zeroed.
void make_row(int64_t n, uint64_t seed, bool with_pos_inf, std::vector<float>* x,
              std::vector<float>* w) {
  Rng rng(seed);
  x->resize(n);
  w->resize(n);
  for (auto& v : *x) v = static_cast<float>(rng.normal() * 4.0);
  for (int64_t i = 0; i < n; ++i) {
    const uint64_t r = rng.below(97);
    if (r == 0) (*x)[i] = kNaN;
    if (r == 1) (*x)[i] = -kInf;
    if (r == 2) (*x)[i] = 0.5f;  // ties for count_at_least and keep_at_or_above
  }
  if (with_pos_inf && n > 3) (*x)[n / 3] = kInf;
  for (auto& v : *w) v = rng.below(4) == 0 ? 0.0f : rng.uniform(0.0f, 1.0f);
}

// Each SIMD build must agree with the portable (SSE2) one bit for bit, so that seeded sampling is
// the same on every machine: on real vocabulary sizes and on lengths that leave tails for every
// vector width, with NaN, -inf and +inf in the rows. Run for each build this CPU has.
class VectorMathVariantTest : public ::testing::TestWithParam<VectorMathVariant> {};

TEST_P(VectorMathVariantTest, BitIdenticalToPortable) {
  const VectorMathVariant v = GetParam();
  if (!vector_math_supported(v))
    GTEST_SKIP() << "this CPU cannot run the " << vector_math_variant_name(v)
                 << " build of the sampler's vector math; only the builds it has are checked";
  for (const int64_t n : {int64_t{1}, int64_t{7}, int64_t{15}, int64_t{17}, int64_t{33},
                          int64_t{257}, int64_t{1001}, int64_t{10007}, int64_t{32000},
                          int64_t{151936}, int64_t{151936 + 13}, int64_t{152064 - 1}}) {
    for (const bool pos_inf : {false, true}) {
      std::vector<float> x, w;
      make_row(n, static_cast<uint64_t>(n) * 2 + pos_inf, pos_inf, &x, &w);
      AllResults portable, fast;
      {
        ScopedVariant cap(VectorMathVariant::kPortable);
        ASSERT_EQ(vector_math_variant(), VectorMathVariant::kPortable);
        portable = compute_all(x, w);
      }
      {
        ScopedVariant cap(v);
        ASSERT_EQ(vector_math_variant(), v);
        fast = compute_all(x, w);
      }
      expect_bit_identical(fast, portable, n);
      // The weights are the scalar exp_approx element by element.
      const float m = std::bit_cast<float>(fast.max);
      for (int64_t i = 0; i < n; ++i) {
        const float want = x[i] >= -3.0f ? exp_approx((x[i] - m) * (1.0f / 0.7f)) : 0.0f;
        ASSERT_EQ(std::bit_cast<uint32_t>(fast.weights[i]), std::bit_cast<uint32_t>(want))
            << "n = " << n << ", i = " << i;
      }
    }
  }
  // Rows with nothing finite: NaN and -inf only.
  for (const int64_t n : {int64_t{5}, int64_t{31}, int64_t{4099}}) {
    std::vector<float> x(n), w(n, 1.0f);
    for (int64_t i = 0; i < n; ++i) x[i] = i % 3 == 0 ? -kInf : kNaN;
    AllResults portable, fast;
    {
      ScopedVariant cap(VectorMathVariant::kPortable);
      portable = compute_all(x, w);
    }
    {
      ScopedVariant cap(v);
      fast = compute_all(x, w);
    }
    expect_bit_identical(fast, portable, n);
    EXPECT_EQ(std::bit_cast<float>(fast.max), -kInf);
    EXPECT_EQ(std::bit_cast<float>(fast.min), kInf);
    EXPECT_EQ(fast.count, 0);
  }
}

INSTANTIATE_TEST_SUITE_P(Builds, VectorMathVariantTest,
                         ::testing::Values(VectorMathVariant::kAvx2, VectorMathVariant::kAvx512),
                         [](const auto& info) {
                           return std::string(vector_math_variant_name(info.param));
                         });

TEST(VectorMathTest, VariantChoiceFollowsTheCpuAndTheCap) {
  EXPECT_TRUE(vector_math_supported(VectorMathVariant::kPortable));
  // With no cap: the fastest build this CPU has.
  const VectorMathVariant best =
      vector_math_supported(VectorMathVariant::kAvx512) ? VectorMathVariant::kAvx512
      : vector_math_supported(VectorMathVariant::kAvx2) ? VectorMathVariant::kAvx2
                                                        : VectorMathVariant::kPortable;
  EXPECT_EQ(vector_math_variant(), best);
  {
    ScopedVariant cap(VectorMathVariant::kAvx2);
    EXPECT_EQ(vector_math_variant(), vector_math_supported(VectorMathVariant::kAvx2)
                                         ? VectorMathVariant::kAvx2
                                         : VectorMathVariant::kPortable);
  }
  {
    ScopedVariant cap(VectorMathVariant::kPortable);
    EXPECT_EQ(vector_math_variant(), VectorMathVariant::kPortable);
  }
  EXPECT_EQ(vector_math_variant(), best);
  // The engine's --kernels names.
  EXPECT_EQ(vector_math_variant_for_kernels("reference"), VectorMathVariant::kPortable);
  EXPECT_EQ(vector_math_variant_for_kernels("portable"), VectorMathVariant::kPortable);
  EXPECT_EQ(vector_math_variant_for_kernels("avx2"), VectorMathVariant::kAvx2);
  EXPECT_EQ(vector_math_variant_for_kernels("avx512"), VectorMathVariant::kAvx512);
  EXPECT_EQ(vector_math_variant_for_kernels("avx512_bf16"), VectorMathVariant::kAvx512);
  EXPECT_EQ(vector_math_variant_for_kernels("auto"), VectorMathVariant::kAvx512);
  EXPECT_STREQ(vector_math_variant_name(VectorMathVariant::kAvx512), "avx512");
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
