// Block-quantized weights (Q8_0 and the GGUF quants): packing keeps the file's values, every
// integer kernel variant equals the plain integer reference bit for bit, the result is within the
// bound that int8 activation rounding allows of the exact product with the dequantized weights,
// and a row's result does not depend on its batch or the thread count.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "core/rng.h"
#include "kernel_test_util.h"
#include "kernels/backend.h"
#include "kernels/packed_weight.h"
#include "kernels/quant_weight.h"

namespace strata {
namespace {

using testing::random_vector;

const DType kTypes[] = {DType::kQ8_0, DType::kQ4_0,   DType::kQ4_1, DType::kQ5_0,
                        DType::kQ5_1, DType::kIQ4_NL, DType::kQ2_K, DType::kQ3_K,
                        DType::kQ4_K, DType::kQ5_K,   DType::kQ6_K, DType::kIQ4_XS};

// Byte offsets of the f16 scale fields in one block of `t`.
std::vector<int> f16_fields(DType t) {
  switch (t) {
    case DType::kQ4_1:
    case DType::kQ5_1:
    case DType::kQ4_K:
    case DType::kQ5_K:
      return {0, 2};
    case DType::kQ2_K:
      return {80, 82};
    case DType::kQ3_K:
      return {108};
    case DType::kQ6_K:
      return {208};
    default:
      return {0};
  }
}

// Rows of random blocks: every byte random except the f16 scales, which are finite values of
// moderate size (as a quantizer writes them).
std::vector<uint8_t> random_blocks(DType t, int64_t n, int64_t k, uint64_t seed) {
  Rng rng(seed);
  const int64_t bytes = dtype_bytes(t, n * k), bb = dtype_block_bytes(t);
  std::vector<uint8_t> out(bytes);
  for (auto& b : out) b = static_cast<uint8_t>(rng.next_u64() & 0xFF);
  for (int64_t b = 0; b < bytes / bb; ++b)
    for (int off : f16_fields(t)) {
      const uint16_t h = f32_to_f16(static_cast<float>(rng.normal()) * 0.02f);
      std::memcpy(&out[b * bb + off], &h, 2);
    }
  return out;
}

std::vector<float> dequantized(DType t, const std::vector<uint8_t>& src, int64_t n, int64_t k) {
  std::vector<float> out(n * k);
  for (int64_t r = 0; r < n; ++r)
    dequantize_row(t, src.data() + r * dtype_bytes(t, k), out.data() + r * k, k);
  return out;
}

// A k that fits every format (256) and one that exercises the 32-column formats' odd group count.
int64_t k_for(DType t, bool odd) {
  if (dtype_block_elems(t) == 256) return odd ? 768 : 512;
  return odd ? 96 : 512;
}

TEST(QuantWeight, PackingKeepsTheFilesValues) {
  for (DType t : kTypes) {
    for (bool odd : {false, true}) {
      const int64_t n = 37, k = k_for(t, odd);
      auto src = random_blocks(t, n, k, 1 + static_cast<int>(t));
      auto w = PackedWeight::pack(src.data(), t, n, k, t);
      ASSERT_TRUE(w.ok()) << dtype_name(t) << ": " << w.status().to_string();
      EXPECT_EQ(w->dtype(), t);
      const auto ref = dequantized(t, src, n, k);
      for (int64_t r = 0; r < n; ++r)
        for (int64_t c = 0; c < k; ++c) {
          // Same value; the formulas differ only in the order of one rounding.
          const float a = w->at(r, c), b = ref[r * k + c];
          ASSERT_NEAR(a, b, 1e-6f * std::fabs(b) + 1e-30f)
              << dtype_name(t) << " row " << r << " col " << c;
        }
    }
  }
}

TEST(QuantWeight, RowsThatAreNotWholeBlocksAreRefused) {
  std::vector<uint8_t> src(dtype_bytes(DType::kQ4_K, 256));
  auto w = PackedWeight::pack(src.data(), DType::kQ4_K, 1, 128, DType::kQ4_K);
  ASSERT_FALSE(w.ok());
  EXPECT_NE(w.status().message().find("multiple of 256"), std::string::npos)
      << w.status().message();
  // No quantizer into the GGUF formats: only to Q8_0.
  auto f = random_vector(256, 1);
  EXPECT_FALSE(PackedWeight::pack(f.data(), DType::kF32, 1, 256, DType::kQ4_K).ok());
  EXPECT_TRUE(PackedWeight::pack(f.data(), DType::kF32, 1, 256, DType::kQ8_0).ok());
}

// The integer kernels each variant runs (those this CPU has).
struct Kernel {
  const char* name;
  void (*fn)(const float*, int64_t, int64_t, const PackedWeight&, float*, int64_t, ThreadPool&);
  bool supported;
};
std::vector<Kernel> kernels_here() {
  const CpuFeatures& f = cpu_features();
  return {{"avx2", kernels::quant_matmul_avx2, f.avx2},
          {"avx512_vnni", kernels::quant_matmul_avx512vnni, f.avx512 && f.avx512_vnni}};
}

TEST(QuantMatmul, EveryVariantEqualsTheIntegerReferenceBitForBit) {
  int ran = 0;
  for (const Kernel& kern : kernels_here()) {
    if (!kern.supported) {
      std::printf("[ skipped  ] %s: this CPU lacks it\n", kern.name);
      continue;
    }
    ++ran;
    for (int threads : {1, 2}) {
      ThreadPool pool(threads);
      for (DType t : kTypes) {
        for (bool odd : {false, true}) {
          const int64_t n = 37, k = k_for(t, odd);
          auto src = random_blocks(t, n, k, 40 + static_cast<int>(t));
          auto w = PackedWeight::pack(src.data(), t, n, k, t);
          ASSERT_TRUE(w.ok());
          for (int64_t m : {1, 2, 3, 4, 5, 9}) {
            const int64_t ldx = k + 3, ldy = n + 2;
            auto x = random_vector(m * ldx, 7 + m);
            std::vector<float> ref(m * ldy, -7.0f), y(m * ldy, -7.0f);
            kernels::quant_matmul_reference(x.data(), m, ldx, *w, ref.data(), ldy, pool);
            kern.fn(x.data(), m, ldx, *w, y.data(), ldy, pool);
            ASSERT_EQ(std::memcmp(ref.data(), y.data(), y.size() * 4), 0)
                << kern.name << " " << dtype_name(t) << " k=" << k << " m=" << m;
            for (int64_t i = 0; i < m; ++i) ASSERT_EQ(y[i * ldy + n], -7.0f) << "padding written";
          }
        }
      }
    }
  }
  if (ran == 0) GTEST_SKIP() << "no SIMD integer kernel runs on this CPU";
}

// Against the exact product with the dequantized weights: the only error is the rounding of each
// activation to int8, at most dx / 2 per element (dx = its super-block's max|x| / 127), so
// |y - y_exact| <= sum_c |w_c| * dx_c / 2, plus float rounding.
TEST(QuantMatmul, WithinTheActivationRoundingBoundOfTheExactProduct) {
  ThreadPool pool(2);
  for (DType t : kTypes) {
    const int64_t n = 21, k = k_for(t, false), m = 3;
    auto src = random_blocks(t, n, k, 90 + static_cast<int>(t));
    auto w = PackedWeight::pack(src.data(), t, n, k, t);
    ASSERT_TRUE(w.ok());
    const auto wf = dequantized(t, src, n, k);
    auto x = random_vector(m * k, 5);
    std::vector<float> y(m * n);
    kernel_ops(default_kernel_variant()).matmul(x.data(), m, k, *w, y.data(), n, pool);
    const int64_t S = dtype_block_elems(t);
    for (int64_t i = 0; i < m; ++i)
      for (int64_t r = 0; r < n; ++r) {
        double exact = 0, bound = 0, mag = 0;
        for (int64_t s = 0; s < k / S; ++s) {
          float amax = 0;
          for (int64_t c = s * S; c < (s + 1) * S; ++c)
            amax = std::max(amax, std::fabs(x[i * k + c]));
          for (int64_t c = s * S; c < (s + 1) * S; ++c) {
            const double wv = wf[r * k + c];
            exact += wv * x[i * k + c];
            bound += std::fabs(wv) * amax / 127.0 / 2.0;
            mag += std::fabs(wv * x[i * k + c]);
          }
        }
        ASSERT_LE(std::fabs(y[i * n + r] - exact), bound * 1.001 + 1e-5 * mag)
            << dtype_name(t) << " row " << i << " out " << r;
        // And the bound is not vacuous: it is a small fraction of the output's magnitude.
        EXPECT_LT(bound, 0.1 * mag) << dtype_name(t);
      }
  }
}

// A row's result is bit-identical alone, inside any batch, and with any thread count, for every
// variant this CPU runs (the model's batch invariance rests on it).
TEST(QuantMatmul, RowResultIndependentOfBatchAndThreads) {
  for (const std::string& v : testing::fast_variants()) {
    for (DType t : {DType::kQ4_K, DType::kQ6_K, DType::kQ4_0, DType::kQ8_0}) {
      const int64_t n = 70, k = 512, m = 11;
      auto src = random_blocks(t, n, k, 3);
      auto w = PackedWeight::pack(src.data(), t, n, k, t);
      ASSERT_TRUE(w.ok());
      auto x = random_vector(m * k, 9);
      ThreadPool one(1), three(3);
      std::vector<float> batch(m * n), alone(n);
      kernel_ops(v).matmul(x.data(), m, k, *w, batch.data(), n, three);
      for (int64_t i = 0; i < m; ++i) {
        kernel_ops(v).matmul(x.data() + i * k, 1, k, *w, alone.data(), n, one);
        ASSERT_EQ(std::memcmp(alone.data(), batch.data() + i * n, n * 4), 0)
            << v << " " << dtype_name(t) << " row " << i;
      }
    }
  }
}

// AWQ/GPTQ integer weights (W4G, W8G): random codes, zero points (8-bit ones on both sides of
// 128, GPTQ v1's 2^bits included) and f16 scales for several group sizes.
struct IntWeight {
  int bits;
  int64_t n, k, group;
  std::vector<uint8_t> q;
  std::vector<uint16_t> zeros, scales;
  float value(int64_t r, int64_t c) const {
    const int64_t g = r * (k / group) + c / group;
    return f16_to_f32(scales[g]) * static_cast<float>(int{q[r * k + c]} - zeros[g]);
  }
};
IntWeight random_int_weight(int bits, int64_t n, int64_t k, int64_t group, uint64_t seed) {
  Rng rng(seed);
  IntWeight w{bits, n, k, group, std::vector<uint8_t>(n * k), {}, {}};
  const int levels = 1 << bits;
  for (auto& v : w.q) v = static_cast<uint8_t>(rng.next_u64() % levels);
  for (int64_t i = 0; i < n * (k / group); ++i) {
    w.zeros.push_back(static_cast<uint16_t>(rng.next_u64() % (levels + 1)));
    w.scales.push_back(f32_to_f16(static_cast<float>(std::fabs(rng.normal()) * 0.01 + 1e-4)));
  }
  return w;
}
Result<PackedWeight> pack_int(const IntWeight& w) {
  PackedWeight::IntPart part{w.q.data(), w.zeros.data(), w.scales.data(), w.n};
  return PackedWeight::pack_int_rows(&part, 1, w.k, w.bits, w.group);
}

struct IntCase {
  int bits;
  int64_t k, group;
};
const IntCase kIntCases[] = {{4, 256, 32},  {4, 256, 64}, {4, 384, 128}, {4, 512, 256},
                             {4, 160, 160}, {8, 256, 32}, {8, 384, 128}, {8, 512, 512}};

TEST(IntWeight, PackingKeepsScaleTimesCodeMinusZeroExactly) {
  for (const IntCase& ic : kIntCases) {
    const IntWeight src = random_int_weight(ic.bits, 37, ic.k, ic.group, ic.k + ic.bits);
    auto w = pack_int(src);
    ASSERT_TRUE(w.ok()) << w.status().to_string();
    EXPECT_EQ(w->dtype(), ic.bits == 4 ? DType::kW4G : DType::kW8G);
    EXPECT_EQ(w->quant_layout().super, std::min<int64_t>(128, ic.group == 160 ? 32 : ic.group));
    for (int64_t r = 0; r < src.n; ++r)
      for (int64_t c = 0; c < src.k; ++c)
        ASSERT_EQ(f32_to_bits(w->at(r, c)), f32_to_bits(src.value(r, c)))
            << ic.bits << "-bit g" << ic.group << " row " << r << " col " << c;
  }
}

TEST(IntWeight, GroupsThatDoNotFitAreRefused) {
  const IntWeight src = random_int_weight(4, 4, 96, 48, 1);
  auto w = pack_int(src);
  ASSERT_FALSE(w.ok());
  EXPECT_NE(w.status().message().find("groups of 48"), std::string::npos) << w.status().message();
  IntWeight bad = random_int_weight(4, 4, 64, 32, 2);
  bad.q[5] = 16;
  EXPECT_FALSE(pack_int(bad).ok());
  auto f = random_vector(256, 1);
  EXPECT_FALSE(PackedWeight::pack(f.data(), DType::kF32, 1, 256, DType::kW4G).ok());
}

TEST(IntWeight, EveryVariantEqualsTheReferenceAndStaysWithinTheRoundingBound) {
  for (const IntCase& ic : kIntCases) {
    const int64_t n = 37;
    const IntWeight src = random_int_weight(ic.bits, n, ic.k, ic.group, 70 + ic.k);
    auto w = pack_int(src);
    ASSERT_TRUE(w.ok());
    const int64_t S = w->quant_layout().super;
    for (int threads : {1, 2}) {
      ThreadPool pool(threads);
      for (int64_t m : {1, 3, 4, 6}) {
        const int64_t ldx = ic.k + 3, ldy = n + 2;
        auto x = random_vector(m * ldx, 11 + m);
        std::vector<float> ref(m * ldy, -7.0f);
        kernels::quant_matmul_reference(x.data(), m, ldx, *w, ref.data(), ldy, pool);
        for (const Kernel& kern : kernels_here()) {
          if (!kern.supported) continue;
          std::vector<float> y(m * ldy, -7.0f);
          kern.fn(x.data(), m, ldx, *w, y.data(), ldy, pool);
          ASSERT_EQ(std::memcmp(ref.data(), y.data(), y.size() * 4), 0)
              << kern.name << " " << ic.bits << "-bit g" << ic.group << " m=" << m;
        }
        for (int64_t i = 0; i < m; ++i)
          for (int64_t r = 0; r < n; ++r) {
            double exact = 0, bound = 0, mag = 0;
            for (int64_t s = 0; s < ic.k / S; ++s) {
              float amax = 0;
              for (int64_t c = s * S; c < (s + 1) * S; ++c)
                amax = std::max(amax, std::fabs(x[i * ldx + c]));
              for (int64_t c = s * S; c < (s + 1) * S; ++c) {
                const double wv = src.value(r, c);
                exact += wv * x[i * ldx + c];
                bound += std::fabs(wv) * amax / 127.0 / 2.0;
                mag += std::fabs(wv * x[i * ldx + c]);
              }
            }
            ASSERT_LE(std::fabs(ref[i * ldy + r] - exact), bound * 1.001 + 1e-5 * mag)
                << ic.bits << "-bit g" << ic.group << " row " << i << " out " << r;
            EXPECT_LT(bound, 0.1 * mag);
          }
      }
    }
  }
}

}  // namespace
}  // namespace strata
