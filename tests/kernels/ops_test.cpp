#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernel_test_util.h"
#include "kernels/backend.h"
#include "kernels/bandwidth.h"
#include "kernels/op_profile.h"
#include "kernels/ops.h"

namespace strata {
namespace {

using testing::fast_variants;
using testing::random_vector;

TEST(OpsParity, RmsNorm) {
  ThreadPool pool(2);
  for (int64_t n : {1, 7, 8, 33, 64, 100, 1000}) {
    const int64_t m = 5, ld = n + 1;
    auto x = random_vector(m * ld, n, 3.0f);
    auto w = random_vector(n, n + 1);
    std::vector<float> ref(m * ld), y(m * ld);
    reference_kernel_ops().rms_norm(x.data(), ld, w.data(), 1e-6f, m, n, ref.data(), ld, pool);
    for (const std::string& v : fast_variants()) {
      kernel_ops(v).rms_norm(x.data(), ld, w.data(), 1e-6f, m, n, y.data(), ld, pool);
      for (int64_t i = 0; i < m; ++i)
        for (int64_t j = 0; j < n; ++j)
          ASSERT_NEAR(y[i * ld + j], ref[i * ld + j], 1e-5f * std::fabs(ref[i * ld + j]) + 1e-6f)
              << v << " n=" << n;
      // In place.
      std::vector<float> xi = x;
      kernel_ops(v).rms_norm(xi.data(), ld, w.data(), 1e-6f, m, n, xi.data(), ld, pool);
      for (int64_t j = 0; j < n; ++j) ASSERT_EQ(xi[j], y[j]);
    }
  }
}

TEST(OpsParity, SiluMul) {
  ThreadPool pool(2);
  for (int64_t f : {1, 8, 13, 172, 2048}) {
    const int64_t m = 3;
    auto gu = random_vector(m * 2 * f, f, 6.0f);
    gu[0] = -100.0f;  // saturating inputs
    gu[1 % f] = 90.0f;
    std::vector<float> ref(m * f), y(m * f);
    reference_kernel_ops().silu_mul(gu.data(), 2 * f, m, f, ref.data(), f, pool);
    for (const std::string& v : fast_variants()) {
      kernel_ops(v).silu_mul(gu.data(), 2 * f, m, f, y.data(), f, pool);
      for (int64_t i = 0; i < m * f; ++i)
        ASSERT_NEAR(y[i], ref[i], 2e-6f * std::fabs(ref[i]) + 1e-6f) << v << " " << i;
    }
  }
}

TEST(OpsParity, RopeBothLayouts) {
  for (bool neox : {true, false}) {
    for (int head_dim : {8, 64, 80, 128}) {
      for (int rot_dim : {head_dim, head_dim / 2}) {
        const int64_t m = 4;
        const int heads = 3;
        const int64_t ld = heads * head_dim + 5;
        auto x = random_vector(m * ld, head_dim);
        std::vector<float> cos(m * rot_dim / 2), sin(m * rot_dim / 2);
        for (int64_t i = 0; i < m; ++i)
          for (int j = 0; j < rot_dim / 2; ++j) {
            double ang = (i + 3) * std::pow(10000.0, -2.0 * j / rot_dim);
            cos[i * rot_dim / 2 + j] = static_cast<float>(std::cos(ang));
            sin[i * rot_dim / 2 + j] = static_cast<float>(std::sin(ang));
          }
        std::vector<float> ref = x;
        reference_kernel_ops().rope(ref.data(), m, ld, heads, head_dim, rot_dim, cos.data(),
                                    sin.data(), neox);
        for (const std::string& v : fast_variants()) {
          std::vector<float> y = x;
          kernel_ops(v).rope(y.data(), m, ld, heads, head_dim, rot_dim, cos.data(), sin.data(),
                             neox);
          for (size_t i = 0; i < y.size(); ++i)
            ASSERT_NEAR(y[i], ref[i], 1e-6f * (1 + std::fabs(ref[i]))) << v;
        }
        // The rotation is the one we mean: neox pairs (j, j+half), else (2j, 2j+1).
        int a = neox ? 1 : 2, b = neox ? 1 + rot_dim / 2 : 3;
        float c = cos[1], s = sin[1];
        EXPECT_NEAR(ref[a], x[a] * c - x[b] * s, 1e-5f);
        EXPECT_NEAR(ref[b], x[b] * c + x[a] * s, 1e-5f);
      }
    }
  }
}

// The avx512 variant's RMSNorm, SiLU-and-multiply and RoPE repeat the AVX2 arithmetic: the two
// agree bit for bit, at every length (vector bodies and tails) and in both RoPE layouts.
TEST(OpsParity, Avx512EqualsAvx2BitForBit) {
  const KernelVariantInfo* a = find_kernel_variant("avx2");
  const KernelVariantInfo* b = find_kernel_variant("avx512");
  ASSERT_TRUE(a && b);
  if (!a->is_supported() || !b->is_supported())
    GTEST_SKIP() << "this CPU lacks AVX-512 (or AVX2); the avx512 variant is not run here";
  ThreadPool pool(2);
  for (int64_t n : {1, 7, 8, 15, 16, 24, 33, 40, 64, 100, 768, 1000, 2048}) {
    const int64_t m = 3, ld = 2 * n + 3;
    auto x = random_vector(m * ld, n, 4.0f);
    auto w = random_vector(n, n + 7);
    std::vector<float> ya(m * ld, 0), yb(m * ld, 0);
    a->ops().rms_norm(x.data(), ld, w.data(), 1e-6f, m, n, ya.data(), ld, pool);
    b->ops().rms_norm(x.data(), ld, w.data(), 1e-6f, m, n, yb.data(), ld, pool);
    ASSERT_EQ(std::memcmp(ya.data(), yb.data(), ya.size() * 4), 0) << "rms_norm n=" << n;
    x[0] = -100.0f;
    x[1 % n] = 90.0f;
    a->ops().silu_mul(x.data(), ld, m, n, ya.data(), ld, pool);
    b->ops().silu_mul(x.data(), ld, m, n, yb.data(), ld, pool);
    ASSERT_EQ(std::memcmp(ya.data(), yb.data(), ya.size() * 4), 0) << "silu_mul n=" << n;
  }
  for (bool neox : {true, false})
    for (int head_dim : {8, 24, 40, 64, 80, 128})
      for (int rot_dim : {head_dim, head_dim / 2}) {
        const int64_t m = 5;
        const int heads = 3;
        const int64_t ld = heads * head_dim + 5;
        auto x = random_vector(m * ld, head_dim + rot_dim);
        auto cs = random_vector(m * rot_dim, rot_dim);  // any cos/sin values test the arithmetic
        std::vector<float> ya = x, yb = x;
        a->ops().rope(ya.data(), m, ld, heads, head_dim, rot_dim, cs.data(),
                      cs.data() + m * rot_dim / 2, neox);
        b->ops().rope(yb.data(), m, ld, heads, head_dim, rot_dim, cs.data(),
                      cs.data() + m * rot_dim / 2, neox);
        ASSERT_EQ(std::memcmp(ya.data(), yb.data(), ya.size() * 4), 0)
            << "rope neox=" << neox << " head_dim=" << head_dim << " rot_dim=" << rot_dim;
      }
}

TEST(OpProfile, ForwardsEveryCallAndCountsIt) {
  ThreadPool pool(2);
  const KernelOps& inner = kernel_ops(fast_variants().back());
  const KernelOps& timed = profiling_ops(inner);
  EXPECT_STREQ(timed.name, inner.name);
  reset_op_times();
  const int64_t n = 40, k = 64;
  auto src = random_vector(n * k, 11);
  auto w = PackedWeight::pack(src.data(), DType::kF32, n, k, DType::kBF16);
  ASSERT_TRUE(w.ok());
  for (int64_t m : {1, 9}) {
    auto x = random_vector(m * k, 12);
    std::vector<float> want(m * n), got(m * n);
    inner.matmul(x.data(), m, k, *w, want.data(), n, pool);
    timed.matmul(x.data(), m, k, *w, got.data(), n, pool);
    EXPECT_EQ(got, want) << "m=" << m;
  }
  auto x = random_vector(3 * k, 13), nw = random_vector(k, 14);
  std::vector<float> want(3 * k), got(3 * k);
  inner.rms_norm(x.data(), k, nw.data(), 1e-6f, 3, k, want.data(), k, pool);
  timed.rms_norm(x.data(), k, nw.data(), 1e-6f, 3, k, got.data(), k, pool);
  EXPECT_EQ(got, want);
  for (const OpTime& t : op_times()) {
    const std::string name = t.name;
    const int64_t calls = (name == "gemv" || name == "gemm" || name == "rms_norm") ? 1 : 0;
    EXPECT_EQ(t.calls, calls) << name;
    if (calls == 0) {
      EXPECT_EQ(t.seconds, 0) << name;  // ops never called have no time
    }
    EXPECT_EQ(t.weight_bytes, calls > 0 && name != "rms_norm" ? w->bytes() : 0) << name;
  }
  reset_op_times();
  for (const OpTime& t : op_times()) EXPECT_EQ(t.calls, 0) << t.name;
}

TEST(ReadBandwidthMeter, BestIsTheHighestPass) {
  ThreadPool pool(2);
  ReadBandwidthMeter meter(pool, 8 << 20);
  EXPECT_EQ(meter.passes(), 0);
  EXPECT_EQ(meter.best(), 0);
  double highest = 0;
  for (int i = 0; i < 3; ++i) {
    const double bw = meter.pass();
    EXPECT_GT(bw, 1e6);  // bytes per second; any machine reads 8 MiB faster than in 8 s
    highest = std::max(highest, bw);
  }
  EXPECT_EQ(meter.passes(), 3);
  EXPECT_EQ(meter.best(), highest);
}

}  // namespace
}  // namespace strata
