// DeepSeek-V4 kernels (kernels/dsv4.h): every SIMD variant this CPU runs against the plain
// versions and a float64 evaluation, avx2 against avx512 bit for bit, and the results of a row /
// token independent of the batch and the thread count.
#include "kernels/dsv4.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/rng.h"
#include "kernel_test_util.h"
#include "kernels/backend.h"

namespace strata {
namespace {

using testing::fast_variants;
using testing::random_vector;

constexpr double kU = 0x1.0p-24;  // unit roundoff of f32

const float kE2m1[16] = {0.0f,  0.5f,  1.0f,  1.5f,  2.0f,  3.0f,  4.0f,  6.0f,
                         -0.0f, -0.5f, -1.0f, -1.5f, -2.0f, -3.0f, -4.0f, -6.0f};

struct Mxfp4 {
  int64_t n, k;
  std::vector<uint8_t> packed, scales;
  Mxfp4(int64_t n_, int64_t k_, uint64_t seed)
      : n(n_), k(k_), packed(n * k / 2), scales(n * k / 32) {
    Rng rng(seed);
    for (auto& b : packed) b = static_cast<uint8_t>(rng.next_u64());
    // Scales 2^-8 .. 2^7, the subnormal 2^-127 of e = 0 and 2^23.
    for (auto& s : scales) s = static_cast<uint8_t>(119 + rng.next_u64() % 16);
    scales[0] = 0;
    if (scales.size() > 3) scales[3] = 150;
  }
  double w(int64_t i, int64_t j) const {
    const uint8_t b = packed[i * (k / 2) + j / 2];
    return kE2m1[j % 2 == 0 ? b & 15 : b >> 4] *
           std::ldexp(1.0, scales[i * (k / 32) + j / 32] - 127);
  }
};

// |y - exact| <= (k / 32 + 40) u sum_j |w_j x_j| for the plain order (32-long dots, then the groups
// in order) and for the SIMD one (2 products per lane per group, the groups, a 16-lane sum); so two
// variants differ by at most twice that.
TEST(Mxfp4Matmul, EveryVariantWithinTheRoundingBoundOfTheExactProduct) {
  ThreadPool pool(2);
  for (int64_t k : {32, 96, 512}) {
    for (int64_t n : {1, 7, 64}) {
      const Mxfp4 W(n, k, 10 + k + n);
      for (int64_t m : {1, 3, 8, 9, 13}) {
        const auto x = random_vector(m * k, 20 + m);
        std::vector<double> exact(m * n), mag(m * n);
        for (int64_t r = 0; r < m; ++r)
          for (int64_t i = 0; i < n; ++i) {
            double s = 0, a = 0;
            for (int64_t j = 0; j < k; ++j) {
              s += W.w(i, j) * x[r * k + j];
              a += std::abs(W.w(i, j) * x[r * k + j]);
            }
            exact[r * n + i] = s;
            mag[r * n + i] = a;
          }
        std::vector<float> plain(m * n);
        kernels::mxfp4_matmul_plain(x.data(), W.packed.data(), W.scales.data(), m, n, k,
                                    plain.data(), &pool);
        for (const std::string& v : fast_variants()) {
          std::vector<float> y(m * n, -1.0f);
          mxfp4_matmul(kernel_ops(v), x.data(), W.packed.data(), W.scales.data(), m, n, k, y.data(),
                       &pool);
          for (int64_t e = 0; e < m * n; ++e) {
            const double bound = (k / 32.0 + 40) * kU * mag[e] + 1e-30;
            ASSERT_LE(std::abs(y[e] - exact[e]), bound)
                << v << " m=" << m << " n=" << n << " k=" << k << " at " << e;
            ASSERT_LE(std::abs(plain[e] - exact[e]), bound) << "plain at " << e;
          }
        }
      }
    }
  }
}

TEST(Mxfp4Matmul, Avx2AndAvx512AgreeBitForBitAndRowsIgnoreBatchAndThreads) {
  std::vector<std::string> simd;
  for (const std::string& v : fast_variants())
    if (kernel_ops(v).mxfp4_matmul != nullptr) simd.push_back(v);
  if (simd.empty()) GTEST_SKIP() << "no SIMD variant on this CPU";
  const int64_t n = 40, k = 256, m = 11;
  const Mxfp4 W(n, k, 5);
  const auto x = random_vector(m * k, 6);
  std::vector<float> first;
  for (const std::string& v : simd)
    for (int threads : {1, 2, 3}) {
      ThreadPool pool(threads);
      std::vector<float> y(m * n);
      mxfp4_matmul(kernel_ops(v), x.data(), W.packed.data(), W.scales.data(), m, n, k, y.data(),
                   &pool);
      if (first.empty()) first = y;
      EXPECT_EQ(y, first) << v << " threads=" << threads;
      // Each token alone (and through a null pool) gives its row of the batch.
      for (int64_t r = 0; r < m; ++r) {
        std::vector<float> one(n);
        mxfp4_matmul(kernel_ops(v), x.data() + r * k, W.packed.data(), W.scales.data(), 1, n, k,
                     one.data(), r % 2 ? &pool : nullptr);
        for (int64_t i = 0; i < n; ++i) ASSERT_EQ(one[i], first[r * n + i]) << v << " row " << r;
      }
    }
}

// fp8 indexer keys as the engine stores them: dim e4m3 bytes then an f32 scale.
struct IndexKeys {
  int64_t n, dim;
  std::vector<uint8_t> bytes;
  std::vector<const uint8_t*> rows;
  IndexKeys(int64_t n_, int64_t dim_, uint64_t seed)
      : n(n_), dim(dim_), bytes(n_ * (dim_ + 4)), rows(n_) {
    Rng rng(seed);
    for (int64_t r = 0; r < n; ++r) {
      uint8_t* row = bytes.data() + r * (dim + 4);
      for (int64_t i = 0; i < dim; ++i)
        row[i] = f32_to_fp8_e4m3(static_cast<float>(rng.normal() * 60.0));
      const float s = static_cast<float>(std::ldexp(1.0, -6) * (1.0 + 0.25 * (r % 3)));
      std::memcpy(row + dim, &s, 4);
      rows[r] = row;
    }
  }
  double key(int64_t r, int64_t i) const {
    float s;
    std::memcpy(&s, rows[r] + dim, 4);
    return static_cast<double>(fp8_e4m3_to_f32(rows[r][i]) * s);  // the f32 key every variant uses
  }
};

// |score - exact| <= scale * (sum_h |w_h| (dim + 2) u sum_i |q_hi k_i| + (heads + 20) u
// sum_h |w_h| |q_h . k|) for a sequential head sum or a 16-lane one, dots sequential or FMA chains.
TEST(Dsv4IndexerScores, EveryVariantWithinTheRoundingBoundOfTheExactScores) {
  for (int heads : {1, 5, 64, 70}) {
    for (int64_t dim : {8, 128, 132}) {
      const int64_t n = 600;  // more than two chunks of 256 when split over threads
      const IndexKeys K(n, dim, heads + dim);
      const auto q = random_vector(heads * dim, 3);
      const auto w = random_vector(heads, 4);
      const float scale = 0.0625f;
      std::vector<double> exact(n), bound(n);
      for (int64_t r = 0; r < n; ++r) {
        double s = 0, b1 = 0, b2 = 0;
        for (int h = 0; h < heads; ++h) {
          double dot = 0, mag = 0;
          for (int64_t i = 0; i < dim; ++i) {
            dot += q[h * dim + i] * K.key(r, i);
            mag += std::abs(q[h * dim + i] * K.key(r, i));
          }
          s += std::max(dot, 0.0) * w[h];
          b1 += std::abs(w[h]) * (dim + 2) * kU * mag;
          b2 += std::abs(w[h]) * (std::abs(dot) + (dim + 2) * kU * mag);
        }
        exact[r] = s * scale;
        bound[r] = scale * (b1 + (heads + 20) * kU * b2) + 1e-30;
      }
      std::vector<float> plain(n);
      kernels::dsv4_indexer_scores_plain(q.data(), w.data(), heads, dim, scale, K.rows.data(), n,
                                         plain.data());
      for (int64_t r = 0; r < n; ++r) ASSERT_LE(std::abs(plain[r] - exact[r]), bound[r]) << r;
      std::vector<float> first;
      for (const std::string& v : fast_variants()) {
        std::vector<float> got(n, -1.0f);
        dsv4_indexer_scores(kernel_ops(v), q.data(), w.data(), heads, dim, scale, K.rows.data(), n,
                            got.data());
        for (int64_t r = 0; r < n; ++r)
          ASSERT_LE(std::abs(got[r] - exact[r]), bound[r])
              << v << " heads=" << heads << " dim=" << dim << " key " << r;
        if (kernel_ops(v).dsv4_indexer_scores == nullptr) continue;
        if (first.empty()) first = got;
        EXPECT_EQ(got, first) << v << ": the SIMD variants agree bit for bit";
        // Split over a pool's threads: the same bits.
        ThreadPool pool(3);
        std::vector<float> split(n);
        dsv4_indexer_scores(kernel_ops(v), q.data(), w.data(), heads, dim, scale, K.rows.data(), n,
                            split.data(), &pool);
        EXPECT_EQ(split, got) << v << " split over threads";
        // A key's score does not depend on its neighbours: each key alone.
        for (int64_t r = 0; r < n; r += 5) {
          float one;
          dsv4_indexer_scores(kernel_ops(v), q.data(), w.data(), heads, dim, scale,
                              K.rows.data() + r, 1, &one);
          ASSERT_EQ(one, got[r]) << v << " key " << r;
        }
      }
    }
  }
}

// The SIMD e4m3 decode equals fp8_e4m3_to_f32 on every byte (subnormals and signs included):
// one head reads value i through a one-hot query, a second head its negation, so the score is
// |e4m3(b)| exactly.
TEST(Dsv4IndexerScores, DecodesEveryE4m3ByteExactly) {
  const int64_t dim = 16;
  for (int b = 0; b < 256; ++b) {
    if ((b & 0x7f) == 0x7f) continue;  // NaN
    std::vector<uint8_t> row(dim + 4, static_cast<uint8_t>(b));
    const float one = 1.0f;
    std::memcpy(row.data() + dim, &one, 4);
    const uint8_t* rows[1] = {row.data()};
    for (int64_t i : {0, 7, 15}) {
      std::vector<float> q(2 * dim, 0.0f);
      q[i] = 1.0f;
      q[dim + i] = -1.0f;
      const float w[2] = {1.0f, 1.0f};
      const float want = std::abs(fp8_e4m3_to_f32(static_cast<uint8_t>(b)));
      for (const std::string& v : fast_variants()) {
        float got = -1;
        dsv4_indexer_scores(kernel_ops(v), q.data(), w, 2, dim, 1.0f, rows, 1, &got);
        ASSERT_EQ(got, want) << v << " byte " << b << " at " << i;
      }
    }
  }
}

// Attention of one token over n rows: each variant within a bound of the float64 result. Per
// exponent an error dl <= scale (dim + 8) u sum_i |q_i v_i| (a sequential dot or 16 lane chains)
// plus the rounding of (logit - mx); the exp within a few ulp; the output a convex combination,
// so |out - exact| <= max|v| (2 max dl + (n + 24) 4u), the last term also covering the sums of
// the numerators, the denominator and the division.
TEST(Dsv4Attention, EveryVariantWithinTheRoundingBoundOfTheExactOutput) {
  for (int heads : {1, 3, 8}) {
    for (int64_t dim : {16, 48, 512}) {
      for (int64_t n : {1, 5, 17, 130}) {
        const auto q = random_vector(heads * dim, 7 + dim, 0.5f);
        const auto kv = random_vector(n * dim, 8 + n);
        const auto sinks = random_vector(heads, 9);
        const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(dim)));
        std::vector<double> exact(heads * dim);
        std::vector<double> tol(heads);
        double vmax = 0;
        for (float v : kv) vmax = std::max(vmax, static_cast<double>(std::abs(v)));
        for (int h = 0; h < heads; ++h) {
          std::vector<double> l(n), mag(n);
          double mx = sinks[h], dl = 0;
          for (int64_t j = 0; j < n; ++j) {
            double d = 0;
            mag[j] = 0;
            for (int64_t i = 0; i < dim; ++i) {
              d += static_cast<double>(q[h * dim + i]) * kv[j * dim + i];
              mag[j] += std::abs(static_cast<double>(q[h * dim + i]) * kv[j * dim + i]);
            }
            l[j] = d * scale;
            mx = std::max(mx, l[j]);
          }
          // Per exponent: the logit's error, then the rounding of (logit - mx) and of the scale.
          for (int64_t j = 0; j < n; ++j)
            dl = std::max(
                dl, scale * (dim + 8) * kU * mag[j] + 2 * kU * (std::abs(l[j]) + std::abs(mx)));
          dl = std::max(dl, 2 * kU * (std::abs(static_cast<double>(sinks[h])) + std::abs(mx)));
          double den = std::exp(sinks[h] - mx);
          for (int64_t j = 0; j < n; ++j) den += std::exp(l[j] - mx);
          for (int64_t i = 0; i < dim; ++i) {
            double o = 0;
            for (int64_t j = 0; j < n; ++j) o += std::exp(l[j] - mx) * kv[j * dim + i];
            exact[h * dim + i] = o / den;
          }
          tol[h] = vmax * (2 * dl + (n + 24) * 4 * kU) + 1e-30;
        }
        std::vector<float> first;
        std::vector<std::string> variants = {"plain"};
        for (const std::string& v : fast_variants()) variants.push_back(v);
        for (const std::string& v : variants) {
          std::vector<float> out(heads * dim, -7.0f);
          if (v == "plain")
            kernels::dsv4_attention_plain(q.data(), heads, dim, kv.data(), n, sinks.data(), scale,
                                          out.data());
          else
            dsv4_attention(kernel_ops(v), q.data(), heads, dim, kv.data(), n, sinks.data(), scale,
                           out.data());
          for (int h = 0; h < heads; ++h)
            for (int64_t i = 0; i < dim; ++i)
              ASSERT_LE(std::abs(out[h * dim + i] - exact[h * dim + i]), tol[h])
                  << v << " heads=" << heads << " dim=" << dim << " n=" << n << " at " << h << ","
                  << i;
          if (v == "plain" || kernel_ops(v).dsv4_attention == nullptr) continue;
          if (first.empty()) first = out;
          EXPECT_EQ(out, first) << v << ": the SIMD variants agree bit for bit";
          // Split over a pool's threads (blocks of 4 heads): the same bits.
          ThreadPool pool(3);
          std::vector<float> split(heads * dim);
          dsv4_attention(kernel_ops(v), q.data(), heads, dim, kv.data(), n, sinks.data(), scale,
                         split.data(), &pool);
          EXPECT_EQ(split, out) << v << " split over threads";
          // A head's output does not depend on the other heads (each head alone).
          for (int h = 0; h < heads; ++h) {
            std::vector<float> one(dim);
            dsv4_attention(kernel_ops(v), q.data() + h * dim, 1, dim, kv.data(), n,
                           sinks.data() + h, scale, one.data());
            for (int64_t i = 0; i < dim; ++i) ASSERT_EQ(one[i], out[h * dim + i]) << v << h;
          }
        }
      }
    }
  }
}

// The fp8 K=V row decode: every byte value in the nope part, scales from 2^-127 to 2^127 and the
// NaN byte, random bf16 rope values; every variant bit for bit the plain decode.
TEST(Dsv4UnpackFp8Row, EveryVariantGivesThePlainBits) {
  const int64_t nope = 448, rope = 64;
  Rng rng(17);
  for (int round = 0; round < 8; ++round) {
    std::vector<uint8_t> data(nope + 2 * rope), scales(nope / 64);
    for (int64_t i = 0; i < nope; ++i) data[i] = static_cast<uint8_t>((i * 7 + round * 31) & 0xff);
    for (int64_t i = nope; i < nope + 2 * rope; ++i) data[i] = static_cast<uint8_t>(rng.next_u64());
    for (int64_t g = 0; g < nope / 64; ++g)
      scales[g] = static_cast<uint8_t>(g == 0 ? (round == 0 ? 0 : 255) : 100 + rng.next_u64() % 60);
    std::vector<float> want(nope + rope);
    kernels::dsv4_unpack_fp8_row_plain(data.data(), scales.data(), nope, rope, want.data());
    for (const std::string& v : fast_variants()) {
      std::vector<float> got(nope + rope, -1.0f);
      dsv4_unpack_fp8_row(kernel_ops(v), data.data(), scales.data(), nope, rope, got.data());
      for (int64_t i = 0; i < nope + rope; ++i) {
        if (std::isnan(want[i])) {
          ASSERT_TRUE(std::isnan(got[i])) << v << " at " << i;
        } else {
          uint32_t a, b;
          std::memcpy(&a, &want[i], 4);
          std::memcpy(&b, &got[i], 4);
          ASSERT_EQ(a, b) << v << " round " << round << " at " << i << ": " << want[i] << " vs "
                          << got[i];
        }
      }
    }
  }
}

TEST(Dsv4Kernels, SimdVariantsHaveTheirOwnKernelsOrAreSkipped) {
  int checked = 0;
  for (const std::string& v : fast_variants()) {
    if (v != "avx2" && v != "avx512") continue;
    const KernelOps& ops = kernel_ops(v);
    EXPECT_NE(ops.mxfp4_matmul, nullptr) << v;
    EXPECT_NE(ops.dsv4_indexer_scores, nullptr) << v;
    EXPECT_NE(ops.dsv4_attention, nullptr) << v;
    EXPECT_NE(ops.dsv4_unpack_fp8_row, nullptr) << v;
    ++checked;
  }
  if (checked == 0) GTEST_SKIP() << "this CPU runs neither avx2 nor avx512";
  if (!cpu_features().avx512) GTEST_SKIP() << "no AVX-512 here: only avx2 checked";
}

}  // namespace
}  // namespace strata
