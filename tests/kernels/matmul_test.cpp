#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "kernel_test_util.h"
#include "kernels/backend.h"
#include "kernels/ops.h"

namespace strata {
namespace {

using testing::fast_variants;
using testing::random_vector;

struct Case {
  int64_t m, n, k;
};

// Row-major source matrix of `dtype` built from f32 values.
std::vector<std::byte> make_source(const std::vector<float>& f, int64_t n, int64_t k, DType dtype) {
  std::vector<std::byte> out(dtype_bytes(dtype, n * k));
  for (int64_t r = 0; r < n; ++r)
    quantize_row(dtype, f.data() + r * k, out.data() + r * dtype_bytes(dtype, k), k);
  return out;
}

TEST(PackedWeightTest, PackKeepsValues) {
  for (DType dt : {DType::kF32, DType::kF16, DType::kBF16, DType::kQ8_0}) {
    const int64_t n = 19, k = 64;
    auto f = random_vector(n * k, 7);
    auto src = make_source(f, n, k, dt);
    auto w = PackedWeight::pack(src.data(), dt, n, k, dt);
    ASSERT_TRUE(w.ok()) << w.status().to_string();
    std::vector<float> row(k);
    for (int64_t r = 0; r < n; ++r) {
      dequantize_row(dt, src.data() + r * dtype_bytes(dt, k), row.data(), k);
      for (int64_t c = 0; c < k; ++c) ASSERT_EQ(w->at(r, c), row[c]) << dtype_name(dt);
    }
  }
}

TEST(PackedWeightTest, PlaceInOrderKeepsEveryWeightAndItsResults) {
  ThreadPool pool(2);
  const DType types[] = {DType::kF32, DType::kBF16, DType::kQ8_0, DType::kF16, DType::kF8E4M3};
  const int64_t ns[] = {19, 48, 7, 33, 130}, ks[] = {64, 96, 32, 40, 160};
  std::vector<PackedWeight> w;
  for (int i = 0; i < 5; ++i) {
    auto f = random_vector(ns[i] * ks[i], 20 + i);
    auto p = PackedWeight::pack(f.data(), DType::kF32, ns[i], ks[i], types[i]);
    ASSERT_TRUE(p.ok()) << p.status().to_string();
    w.push_back(std::move(*p));
  }
  // Results and values before.
  const KernelOps& ops = kernel_ops(fast_variants().back());
  std::vector<std::vector<float>> before(5);
  for (int i = 0; i < 5; ++i) {
    auto x = random_vector(3 * ks[i], 30 + i);
    before[i].resize(3 * ns[i]);
    ops.matmul(x.data(), 3, ks[i], w[i], before[i].data(), ns[i], pool);
  }
  const float corner = w[4].at(129, 159);
  PackedWeight empty;
  std::vector<PackedWeight*> order = {&w[3], &empty, &w[0], &w[4], &w[1], &w[2]};
  ASSERT_TRUE(PackedWeight::place_in_order(order).ok());
  EXPECT_FALSE(empty.placed());
  for (int i = 0; i < 5; ++i) EXPECT_TRUE(w[i].placed()) << i;
  // Back to back in the given order, each 64-byte aligned.
  EXPECT_LT(w[3].panel(0), w[0].panel(0));
  EXPECT_LT(w[0].panel(0), w[4].panel(0));
  EXPECT_LT(w[4].panel(0), w[1].panel(0));
  EXPECT_LT(w[1].panel(0), w[2].panel(0));
  EXPECT_EQ(reinterpret_cast<uintptr_t>(w[1].panel(0)) % 64, 0u);
  EXPECT_EQ(w[4].at(129, 159), corner);
  // Moving a placed weight (as the models' vectors do) keeps it readable; the arena lives while
  // any weight uses it.
  std::vector<PackedWeight> moved;
  for (auto& x : w) moved.push_back(std::move(x));
  w.clear();
  for (int i = 0; i < 5; ++i) {
    auto x = random_vector(3 * ks[i], 30 + i);
    std::vector<float> after(3 * ns[i]);
    ops.matmul(x.data(), 3, ks[i], moved[i], after.data(), ns[i], pool);
    EXPECT_EQ(after, before[i]) << dtype_name(types[i]);
  }
}

TEST(PackedWeightTest, PackRowsConcatenates) {
  auto a = random_vector(3 * 32, 1), b = random_vector(20 * 32, 2);
  PackedWeight::Part parts[] = {{a.data(), DType::kF32, 3}, {b.data(), DType::kF32, 20}};
  auto w = PackedWeight::pack_rows(parts, 2, 32, DType::kBF16);
  ASSERT_TRUE(w.ok());
  EXPECT_EQ(w->n(), 23);
  EXPECT_EQ(w->at(4, 5), bf16_to_f32(f32_to_bf16(b[1 * 32 + 5])));
  EXPECT_FALSE(PackedWeight::pack(a.data(), DType::kF32, 3, 30, DType::kQ8_0).ok());
}

class MatmulParity : public ::testing::TestWithParam<DType> {};

TEST_P(MatmulParity, FastMatchesReference) {
  const DType dt = GetParam();
  const Case cases[] = {{1, 1, 32},   {1, 17, 64},  {2, 33, 96},   {3, 16, 32},    {4, 100, 64},
                        {5, 15, 128}, {7, 64, 288}, {13, 40, 544}, {150, 35, 320}, {200, 64, 96}};
  for (int threads : {1, 2, 3}) {
    ThreadPool pool(threads);
    for (const Case& c : cases) {
      int64_t k = c.k;
      if (dt != DType::kQ8_0 && c.k % 3 == 0) k = c.k + 5;  // odd k for non-block types
      auto wf = random_vector(c.n * k, 11 + c.n);
      auto src = make_source(wf, c.n, k, dt);
      auto w = PackedWeight::pack(src.data(), dt, c.n, k, dt);
      ASSERT_TRUE(w.ok());
      const int64_t ldx = k + 3, ldy = c.n + 2;
      auto x = random_vector(c.m * ldx, 5 + c.m);
      std::vector<float> ref(c.m * ldy, 0), y(c.m * ldy, -7.0f);
      reference_kernel_ops().matmul(x.data(), c.m, ldx, *w, ref.data(), ldy, pool);
      for (const std::string& v : fast_variants()) {
        kernel_ops(v).matmul(x.data(), c.m, ldx, *w, y.data(), ldy, pool);
        for (int64_t i = 0; i < c.m; ++i) {
          for (int64_t n = 0; n < c.n; ++n) {
            double mag = 0;
            for (int64_t kk = 0; kk < k; ++kk) mag += std::fabs(x[i * ldx + kk] * w->at(n, kk));
            ASSERT_NEAR(y[i * ldy + n], ref[i * ldy + n], 1e-5 * mag + 1e-6)
                << v << " m=" << c.m << " n=" << c.n << " k=" << k << " at " << i << "," << n
                << " threads=" << threads;
          }
          // Padding columns past n are never written.
          ASSERT_EQ(y[i * ldy + c.n], -7.0f) << v;
        }
      }
    }
  }
}

// Block-quantized weights (Q8_0 ...) quantize activations to int8: quant_matmul_test.cpp checks
// them against their integer reference and the rounding bound instead.
INSTANTIATE_TEST_SUITE_P(AllWeightTypes, MatmulParity,
                         ::testing::Values(DType::kF32, DType::kF16, DType::kBF16),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

// The AVX-512 matmul keeps the AVX2 arithmetic for float weights (one FMA chain per output over
// k in order), so the two variants agree bit for bit, gemv and gemm alike.
TEST(MatmulVariants, Avx512AndAvx2AgreeBitForBitOnFloatWeights) {
  const KernelVariantInfo* a = find_kernel_variant("avx2");
  const KernelVariantInfo* b = find_kernel_variant("avx512");
  ASSERT_TRUE(a && b);
  if (!a->is_supported() || !b->is_supported())
    GTEST_SKIP() << "this CPU lacks AVX-512 (or AVX2); the avx512 variant is not run here";
  ThreadPool pool(2);
  for (DType dt : {DType::kF32, DType::kF16, DType::kBF16}) {
    for (int64_t n : {16, 35, 64, 100}) {
      const int64_t k = 333;
      auto wf = random_vector(n * k, 7 + n);
      auto src = make_source(wf, n, k, dt);
      auto w = PackedWeight::pack(src.data(), dt, n, k, dt);
      ASSERT_TRUE(w.ok());
      for (int64_t m : {1, 2, 3, 4, 5, 12, 13, 25, 150}) {
        auto x = random_vector(m * k, 3 + m);
        std::vector<float> ya(m * n), yb(m * n);
        a->ops().matmul(x.data(), m, k, *w, ya.data(), n, pool);
        b->ops().matmul(x.data(), m, k, *w, yb.data(), n, pool);
        ASSERT_EQ(std::memcmp(ya.data(), yb.data(), ya.size() * 4), 0)
            << dtype_name(dt) << " m=" << m << " n=" << n;
      }
    }
  }
}

// A row's result is bit-identical alone, inside any batch size, and with any thread count.
TEST(MatmulInvariance, RowResultIndependentOfBatchAndThreads) {
  for (DType dt : {DType::kF32, DType::kBF16, DType::kQ8_0}) {
    const int64_t n = 70, k = 320;
    auto wf = random_vector(n * k, 3);
    auto src = make_source(wf, n, k, dt);
    auto w = PackedWeight::pack(src.data(), dt, n, k, dt);
    ASSERT_TRUE(w.ok());
    const int64_t big = 300;
    auto x = random_vector(big * k, 9);
    for (const std::string& v : fast_variants()) {
      ThreadPool p1(1), p3(3);
      std::vector<float> all(big * n);
      kernel_ops(v).matmul(x.data(), big, k, *w, all.data(), n, p3);
      for (int64_t m : {1, 2, 3, 4, 5, 6, 11, 150}) {
        std::vector<float> part(m * n);
        const int64_t start = 17;
        kernel_ops(v).matmul(x.data() + start * k, m, k, *w, part.data(), n, m % 2 ? p1 : p3);
        ASSERT_EQ(std::memcmp(part.data(), all.data() + start * n, m * n * 4), 0)
            << v << " " << dtype_name(dt) << " m=" << m;
      }
    }
  }
}

}  // namespace
}  // namespace strata
