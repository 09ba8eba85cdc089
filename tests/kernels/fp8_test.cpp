// Block-scaled FP8 weights: quantisation of known BF16 values, the packed layout, and the FP8
// matmul of every variant against the reference, including shapes that are not multiples of the
// 128 x 128 blocks or of the 16-row panels.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "core/dtype.h"
#include "kernel_test_util.h"
#include "kernels/fp8.h"
#include "kernels/backend.h"
#include "kernels/ops.h"
#include "kernels/packed_weight.h"

namespace strata {
namespace {

using testing::fast_variants;
using testing::random_vector;

// BF16-representable values with a spread of magnitudes (so blocks get different scales).
std::vector<float> bf16_values(int64_t n, int64_t k, uint64_t seed) {
  auto v = random_vector(n * k, seed, 0.05f);
  for (int64_t i = 0; i < n * k; ++i) {
    const int64_t r = i / k, c = i % k;
    v[i] *= 1.0f + static_cast<float>((r / 128 + 2 * (c / 128)) % 5);
    v[i] = bf16_to_f32(f32_to_bf16(v[i]));
  }
  return v;
}

TEST(Fp8Blocks, QuantiseKnownValuesByHand) {
  // One 2 x 3 matrix in 2 x 2 blocks: block (0,0) = {1, -2, 0.5, 4}, (0,1) = {448, 896},
  // (1, *) doesn't exist (n = 2 fits in one block row).
  const float w[] = {1.0f, -2.0f, 448.0f, 0.5f, 4.0f, 896.0f};
  uint8_t q[6];
  float scales[2];
  quantize_fp8_blocks(w, 2, 3, 2, 2, q, scales);
  EXPECT_FLOAT_EQ(scales[0], 4.0f / 448.0f);    // amax 4
  EXPECT_FLOAT_EQ(scales[1], 896.0f / 448.0f);  // amax 896
  // 4 / scale = 448 (the largest e4m3 value, 0x7e); 448 / 2 = 224 (0x76), 896 / 2 = 448.
  EXPECT_EQ(q[4], 0x7e);
  EXPECT_EQ(q[2], 0x76);
  EXPECT_EQ(q[5], 0x7e);
  float back[6];
  dequantize_fp8_blocks(q, scales, 2, 3, 2, 2, back);
  for (int i = 0; i < 6; ++i) EXPECT_NEAR(back[i], w[i], std::fabs(w[i]) / 16) << i;
  EXPECT_FLOAT_EQ(back[4], 4.0f);
  EXPECT_FLOAT_EQ(back[5], 896.0f);
  // An all-zero block gets scale 1 and zero bytes.
  const float z[] = {0, 0, 0, 0};
  quantize_fp8_blocks(z, 2, 2, 2, 2, q, scales);
  EXPECT_EQ(scales[0], 1.0f);
  EXPECT_EQ(q[0] | q[1] | q[2] | q[3], 0);
}

TEST(Fp8Blocks, RoundTripErrorIsWithinE4M3Precision) {
  const int64_t n = 300, k = 200;  // 3 x 2 blocks of 128, partial at both edges
  auto w = bf16_values(n, k, 1);
  std::vector<uint8_t> q(n * k);
  std::vector<float> scales(fp8_block_count(n, 128) * fp8_block_count(k, 128));
  quantize_fp8_blocks(w.data(), n, k, 128, 128, q.data(), scales.data());
  std::vector<float> back(n * k);
  dequantize_fp8_blocks(q.data(), scales.data(), n, k, 128, 128, back.data());
  for (int64_t i = 0; i < n * k; ++i) {
    const float scale = scales[(i / k / 128) * 2 + (i % k) / 128];
    // 3 mantissa bits: half an ulp is 1/16 relative; below the normal range, half of 2^-9.
    const float tol = std::max(std::fabs(w[i]) / 16, scale * std::ldexp(1.0f, -10)) * 1.0001f;
    ASSERT_NEAR(back[i], w[i], tol) << i;
  }
}

// FP8 parts with their checkpoint scales, packed, read back with at().
TEST(Fp8Packed, LayoutHoldsEveryValueAndScale) {
  const int64_t k = 200;
  const int64_t rows[] = {37, 130};  // fused parts, neither a multiple of 16 or 128
  std::vector<std::vector<uint8_t>> q(2);
  std::vector<std::vector<float>> scales(2);
  std::vector<PackedWeight::Fp8Part> parts;
  for (int p = 0; p < 2; ++p) {
    auto w = bf16_values(rows[p], k, 10 + p);
    q[p].resize(rows[p] * k);
    scales[p].resize(fp8_block_count(rows[p], 128) * fp8_block_count(k, 128));
    quantize_fp8_blocks(w.data(), rows[p], k, 128, 128, q[p].data(), scales[p].data());
    parts.push_back({q[p].data(), DType::kF8E4M3, rows[p], scales[p].data()});
  }
  auto packed = PackedWeight::pack_fp8_rows(parts.data(), 2, k, 128, 128);
  ASSERT_TRUE(packed.ok()) << packed.status().to_string();
  const PackedWeight& pw = *packed;
  EXPECT_EQ(pw.dtype(), DType::kF8E4M3);
  EXPECT_EQ(pw.n(), 167);
  // About one byte per weight: the scales add 64 bytes per 16 x 128 block.
  EXPECT_LT(pw.bytes(), 167 * k * 11 / 10 + 16 * 64 * 2);
  for (int p = 0, r0 = 0; p < 2; r0 += rows[p], ++p)
    for (int64_t r = 0; r < rows[p]; ++r)
      for (int64_t c = 0; c < k; ++c) {
        const float want = fp8_e4m3_to_f32(q[p][r * k + c]) * scales[p][(r / 128) * 2 + c / 128];
        ASSERT_EQ(pw.at(r0 + r, c), want) << p << " " << r << " " << c;
      }
}

TEST(Fp8Packed, FloatPartsAreQuantisedInto128Blocks) {
  const int64_t n = 20, k = 144;
  auto w = bf16_values(n, k, 3);
  std::vector<uint16_t> bf(n * k);
  for (int64_t i = 0; i < n * k; ++i) bf[i] = f32_to_bf16(w[i]);
  auto packed = PackedWeight::pack(bf.data(), DType::kBF16, n, k, DType::kF8E4M3);
  ASSERT_TRUE(packed.ok()) << packed.status().to_string();
  std::vector<uint8_t> q(n * k);
  std::vector<float> scales(2);
  quantize_fp8_blocks(w.data(), n, k, 128, 128, q.data(), scales.data());
  for (int64_t r = 0; r < n; ++r)
    for (int64_t c = 0; c < k; ++c)
      ASSERT_EQ(packed->at(r, c), fp8_e4m3_to_f32(q[r * k + c]) * scales[c / 128]);
}

TEST(Fp8Packed, RejectsUnsupportedBlocksAndMissingScales) {
  std::vector<uint8_t> q(32 * 32);
  std::vector<float> s(4, 1.0f);
  PackedWeight::Fp8Part part{q.data(), DType::kF8E4M3, 32, s.data()};
  EXPECT_FALSE(PackedWeight::pack_fp8_rows(&part, 1, 32, 16, 24).ok());  // 24 % 16 != 0
  part.scales = nullptr;
  EXPECT_FALSE(PackedWeight::pack_fp8_rows(&part, 1, 32, 16, 16).ok());
}

TEST(Fp8Matmul, EveryVariantMatchesTheReferenceOnOddShapes) {
  const KernelOps& ref = reference_kernel_ops();
  ThreadPool pool(3);
  for (int64_t n : {1, 17, 300}) {
    for (int64_t k : {16, 200, 384}) {
      auto w = bf16_values(n, k, n * 1000 + k);
      std::vector<uint8_t> q(n * k);
      std::vector<float> scales(fp8_block_count(n, 128) * fp8_block_count(k, 128));
      quantize_fp8_blocks(w.data(), n, k, 128, 128, q.data(), scales.data());
      PackedWeight::Fp8Part part{q.data(), DType::kF8E4M3, n, scales.data()};
      auto pw = PackedWeight::pack_fp8_rows(&part, 1, k, 128, 128);
      ASSERT_TRUE(pw.ok());
      for (int64_t m : {1, 2, 3, 4, 5, 7, 13}) {
        const int64_t ldx = k + 3, ldy = n + 5;
        auto x = random_vector(m * ldx, m + n + k, 1.0f);
        std::vector<float> want(m * ldy, -7.0f), got(m * ldy, -7.0f);
        ref.matmul(x.data(), m, ldx, *pw, want.data(), ldy, pool);
        // The reference reads the dequantised weight values: check it against plain maths too.
        std::vector<float> deq(n * k);
        dequantize_fp8_blocks(q.data(), scales.data(), n, k, 128, 128, deq.data());
        for (int64_t i = 0; i < m; ++i)
          for (int64_t j = 0; j < n; ++j) {
            double d = 0;
            for (int64_t c = 0; c < k; ++c) d += double{x[i * ldx + c]} * deq[j * k + c];
            ASSERT_NEAR(want[i * ldy + j], d, 1e-5 * (1 + std::fabs(d)));
          }
        for (const std::string& v : fast_variants()) {
          std::fill(got.begin(), got.end(), -7.0f);
          kernel_ops(v).matmul(x.data(), m, ldx, *pw, got.data(), ldy, pool);
          for (int64_t i = 0; i < m; ++i) {
            for (int64_t j = 0; j < n; ++j)
              ASSERT_NEAR(got[i * ldy + j], want[i * ldy + j],
                          2e-5 * (1 + std::fabs(want[i * ldy + j])))
                  << v << " m=" << m << " n=" << n << " k=" << k;
            for (int64_t j = n; j < ldy; ++j) ASSERT_EQ(got[i * ldy + j], -7.0f) << "wrote padding";
          }
        }
      }
    }
  }
}

TEST(Fp8Matmul, RowsDoNotDependOnTheBatchOrThreads) {
  const int64_t n = 100, k = 272, m = 11;
  auto w = bf16_values(n, k, 5);
  std::vector<uint8_t> q(n * k);
  std::vector<float> scales(fp8_block_count(n, 128) * fp8_block_count(k, 128));
  quantize_fp8_blocks(w.data(), n, k, 128, 128, q.data(), scales.data());
  PackedWeight::Fp8Part part{q.data(), DType::kF8E4M3, n, scales.data()};
  auto pw = PackedWeight::pack_fp8_rows(&part, 1, k, 128, 128);
  ASSERT_TRUE(pw.ok());
  auto x = random_vector(m * k, 9, 1.0f);
  ThreadPool one(1), three(3);
  for (const std::string& v : fast_variants()) {
    std::vector<float> all(m * n), row(n);
    kernel_ops(v).matmul(x.data(), m, k, *pw, all.data(), n, three);
    for (int64_t i = 0; i < m; ++i) {
      kernel_ops(v).matmul(x.data() + i * k, 1, k, *pw, row.data(), n, one);
      ASSERT_EQ(std::memcmp(row.data(), all.data() + i * n, n * sizeof(float)), 0)
          << v << " row " << i;
    }
  }
}

}  // namespace
}  // namespace strata
