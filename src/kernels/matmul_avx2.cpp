// AVX2/FMA matmul over packed weight panels (kernels/packed_weight.h).
//
// Two paths with the same arithmetic: every output element is one chain of FMAs over k in order,
// starting from zero, using the exact f32 value of each weight. So a row's result is bit-identical
// whichever path computed it (batch invariance).
//  - small m (decode): stream the panels once, one panel at a time, converting weights in
//    registers. One sequential stream per thread (with a software prefetch ahead of it) keeps
//    closer to the machine's read bandwidth from DRAM than interleaving several panels (~0.97 of a
//    plain read loop against ~0.88 for four streams on the development machine); the two
//    accumulator chains per row are enough to keep up with memory.
//  - larger m (prefill): per thread, convert a [kKc x 16] block of a panel to f32 in L1, then a
//    6x16 register-blocked micro-kernel runs over the rows; rows are blocked by kMc so the x
//    block stays in L2 across panels.
#include <algorithm>
#include <cstring>

#include "core/aligned_buffer.h"
#include "kernels/kernel_impl.h"
#include "kernels/quant_weight.h"
#include "kernels/simd_avx2.h"

namespace strata::kernels::avx2 {
namespace {

constexpr int64_t kKc = 256;
constexpr int64_t kMc = 144;
constexpr int64_t kMaxGemvRows = 4;

float* thread_scratch(int64_t floats) {
  thread_local AlignedBuffer buf;
  if (buf.size() < static_cast<size_t>(floats) * 4) buf.resize(static_cast<size_t>(floats) * 4);
  return buf.as<float>();
}

template <DType D>
inline void load_w16(const std::byte* pan, int64_t k, __m256& lo, __m256& hi) {
  if constexpr (D == DType::kF32) {
    const float* p = reinterpret_cast<const float*>(pan) + k * kPanelRows;
    lo = _mm256_load_ps(p);
    hi = _mm256_load_ps(p + 8);
  } else if constexpr (D == DType::kBF16) {
    const uint16_t* p = reinterpret_cast<const uint16_t*>(pan) + k * kPanelRows;
    lo = load_bf16x8(p);
    hi = load_bf16x8(p + 8);
  } else {
    static_assert(D == DType::kF16);
    const uint16_t* p = reinterpret_cast<const uint16_t*>(pan) + k * kPanelRows;
    lo = load_f16x8(p);
    hi = load_f16x8(p + 8);
  }
}

// The 16 weights of one k for the streaming (gemv) kernels, in the order that is cheapest to
// convert: for BF16 one 32-byte load, then a = rows 0,2,..,14 (shift) and b = rows 1,3,..,15
// (mask); for the other types a = rows 0..7, b = rows 8..15. unpermute16<D>() restores rows
// 0..7 / 8..15 from accumulators kept in that order.
template <DType D>
inline void load_w16_gemv(const std::byte* pan, int64_t k, __m256& a, __m256& b) {
  if constexpr (D == DType::kBF16) {
    const __m256i v = _mm256_loadu_si256(
        reinterpret_cast<const __m256i*>(reinterpret_cast<const uint16_t*>(pan) + k * kPanelRows));
    a = _mm256_castsi256_ps(_mm256_slli_epi32(v, 16));
    b = _mm256_castsi256_ps(_mm256_and_si256(v, _mm256_set1_epi32(static_cast<int>(0xffff0000u))));
  } else {
    load_w16<D>(pan, k, a, b);
  }
}

template <DType D>
inline void unpermute16(__m256& a, __m256& b) {
  if constexpr (D == DType::kBF16) {
    const __m256 lo = _mm256_unpacklo_ps(a, b);  // rows 0..3 | 8..11
    const __m256 hi = _mm256_unpackhi_ps(a, b);  // rows 4..7 | 12..15
    a = _mm256_permute2f128_ps(lo, hi, 0x20);
    b = _mm256_permute2f128_ps(lo, hi, 0x31);
  }
}

// Stores a 16-wide accumulator pair to y[0..cols).
inline void store16(float* y, __m256 lo, __m256 hi, int64_t cols) {
  if (cols == kPanelRows) {
    _mm256_storeu_ps(y, lo);
    _mm256_storeu_ps(y + 8, hi);
    return;
  }
  alignas(32) float tmp[kPanelRows];
  _mm256_store_ps(tmp, lo);
  _mm256_store_ps(tmp + 8, hi);
  std::memcpy(y, tmp, cols * sizeof(float));
}

// ---- small m: stream the panels one at a time ---------------------------------------------------

// MR rows of x against one panel.
template <DType D, int MR>
void gemv_rx1(const float* x, int64_t ldx, const PackedWeight& w, int64_t p, float* y,
              int64_t ldy) {
  const int64_t K = w.k();
  const std::byte* pan = w.panel(p);
  __m256 lo_acc[MR], hi_acc[MR];
#pragma GCC unroll 4
  for (int i = 0; i < MR; ++i) lo_acc[i] = hi_acc[i] = _mm256_setzero_ps();
  constexpr int64_t kStep = kPanelRows * (D == DType::kF32 ? 4 : 2);  // bytes of one k
  constexpr int64_t kAhead = 1024;  // software prefetch distance, bytes
  for (int64_t k = 0; k < K; ++k) {
    // Non-temporal: each weight line is used once per step, and fetched this way it does not
    // push the KV cache and activations out of L2/L3 (decode measured 2-8% faster, and its
    // attention ~10% faster, against a T0 prefetch).
    if ((k * kStep) % 64 == 0)
      _mm_prefetch(reinterpret_cast<const char*>(pan + k * kStep + kAhead), _MM_HINT_NTA);
    __m256 lo, hi;
    load_w16_gemv<D>(pan, k, lo, hi);
#pragma GCC unroll 4
    for (int i = 0; i < MR; ++i) {
      const __m256 xb = _mm256_broadcast_ss(x + i * ldx + k);
      lo_acc[i] = _mm256_fmadd_ps(xb, lo, lo_acc[i]);
      hi_acc[i] = _mm256_fmadd_ps(xb, hi, hi_acc[i]);
    }
  }
  const int64_t cols = std::min<int64_t>(kPanelRows, w.n() - p * kPanelRows);
#pragma GCC unroll 4
  for (int i = 0; i < MR; ++i) {
    unpermute16<D>(lo_acc[i], hi_acc[i]);
    store16(y + i * ldy + p * kPanelRows, lo_acc[i], hi_acc[i], cols);
  }
}

template <DType D, int MR>
void gemv_typed(const float* x, int64_t ldx, const PackedWeight& w, float* y, int64_t ldy,
                ThreadPool& pool) {
  pool.parallel_for(w.num_panels(), 1, [&](int64_t p0, int64_t p1) {
    for (int64_t p = p0; p < p1; ++p) gemv_rx1<D, MR>(x, ldx, w, p, y, ldy);
  });
}

template <int MR>
void gemv(const float* x, int64_t ldx, const PackedWeight& w, float* y, int64_t ldy,
          ThreadPool& pool) {
  switch (w.dtype()) {
    case DType::kF32:
      return gemv_typed<DType::kF32, MR>(x, ldx, w, y, ldy, pool);
    case DType::kBF16:
      return gemv_typed<DType::kBF16, MR>(x, ldx, w, y, ldy, pool);
    case DType::kF16:
      return gemv_typed<DType::kF16, MR>(x, ldx, w, y, ldy, pool);
    default:
      return;
  }
}

// ---- larger m: convert a panel block to f32, then a 6x16 micro-kernel ------------------------

void panel_block_to_f32(const PackedWeight& w, int64_t p, int64_t k0, int64_t k1, float* dst) {
  const std::byte* pan = w.panel(p);
  const int64_t n = (k1 - k0) * kPanelRows;
  switch (w.dtype()) {
    case DType::kF32:
      std::memcpy(dst, reinterpret_cast<const float*>(pan) + k0 * kPanelRows, n * 4);
      return;
    case DType::kBF16: {
      const uint16_t* s = reinterpret_cast<const uint16_t*>(pan) + k0 * kPanelRows;
      for (int64_t i = 0; i < n; i += 8) _mm256_store_ps(dst + i, load_bf16x8(s + i));
      return;
    }
    case DType::kF16: {
      const uint16_t* s = reinterpret_cast<const uint16_t*>(pan) + k0 * kPanelRows;
      for (int64_t i = 0; i < n; i += 8) _mm256_store_ps(dst + i, load_f16x8(s + i));
      return;
    }
    default:
      return;
  }
}

// c[MR][16] (row stride ldc) = (first ? 0 : c) + x[MR][kc] * wb[kc][16].
template <int MR>
inline void ukernel(const float* x, int64_t ldx, const float* wb, int64_t kc, float* c, int64_t ldc,
                    bool first) {
  __m256 acc[MR][2];
#pragma GCC unroll 6
  for (int i = 0; i < MR; ++i) {
    if (first) {
      acc[i][0] = acc[i][1] = _mm256_setzero_ps();
    } else {
      acc[i][0] = _mm256_loadu_ps(c + i * ldc);
      acc[i][1] = _mm256_loadu_ps(c + i * ldc + 8);
    }
  }
#pragma GCC unroll 2
  for (int64_t k = 0; k < kc; ++k) {
    __m256 w0 = _mm256_load_ps(wb + k * kPanelRows);
    __m256 w1 = _mm256_load_ps(wb + k * kPanelRows + 8);
#pragma GCC unroll 6
    for (int i = 0; i < MR; ++i) {
      __m256 b = _mm256_broadcast_ss(x + i * ldx + k);
      acc[i][0] = _mm256_fmadd_ps(b, w0, acc[i][0]);
      acc[i][1] = _mm256_fmadd_ps(b, w1, acc[i][1]);
    }
  }
#pragma GCC unroll 6
  for (int i = 0; i < MR; ++i) {
    _mm256_storeu_ps(c + i * ldc, acc[i][0]);
    _mm256_storeu_ps(c + i * ldc + 8, acc[i][1]);
  }
}

void ukernel_rows(int64_t rows, const float* x, int64_t ldx, const float* wb, int64_t kc, float* c,
                  int64_t ldc, bool first) {
  int64_t i = 0;
  for (; i + 6 <= rows; i += 6) ukernel<6>(x + i * ldx, ldx, wb, kc, c + i * ldc, ldc, first);
  switch (rows - i) {
    case 1:
      ukernel<1>(x + i * ldx, ldx, wb, kc, c + i * ldc, ldc, first);
      break;
    case 2:
      ukernel<2>(x + i * ldx, ldx, wb, kc, c + i * ldc, ldc, first);
      break;
    case 3:
      ukernel<3>(x + i * ldx, ldx, wb, kc, c + i * ldc, ldc, first);
      break;
    case 4:
      ukernel<4>(x + i * ldx, ldx, wb, kc, c + i * ldc, ldc, first);
      break;
    case 5:
      ukernel<5>(x + i * ldx, ldx, wb, kc, c + i * ldc, ldc, first);
      break;
    default:
      break;
  }
}

void gemm(const float* x, int64_t m, int64_t ldx, const PackedWeight& w, float* y, int64_t ldy,
          ThreadPool& pool) {
  const int64_t K = w.k(), N = w.n();
  pool.parallel_for(w.num_panels(), 1, [&](int64_t p0, int64_t p1) {
    float* wb = thread_scratch(kKc * kPanelRows + kMc * kPanelRows);
    float* edge = wb + kKc * kPanelRows;  // [kMc][16] for a last panel narrower than 16
    for (int64_t m0 = 0; m0 < m; m0 += kMc) {
      const int64_t mb = std::min(kMc, m - m0);
      for (int64_t k0 = 0; k0 < K; k0 += kKc) {
        const int64_t k1 = std::min(K, k0 + kKc);
        for (int64_t p = p0; p < p1; ++p) {
          panel_block_to_f32(w, p, k0, k1, wb);
          const bool full = (p + 1) * kPanelRows <= N;
          float* c = full ? y + m0 * ldy + p * kPanelRows : edge;
          ukernel_rows(mb, x + m0 * ldx + k0, ldx, wb, k1 - k0, c, full ? ldy : kPanelRows,
                       k0 == 0);
          if (!full && k1 == K) {
            const int64_t cols = N - p * kPanelRows;
            for (int64_t i = 0; i < mb; ++i)
              std::memcpy(y + (m0 + i) * ldy + p * kPanelRows, edge + i * kPanelRows, cols * 4);
          }
        }
      }
    }
  });
}

}  // namespace

void matmul(const float* x, int64_t m, int64_t ldx, const PackedWeight& w, float* y, int64_t ldy,
            ThreadPool& pool) {
  if (m <= 0) return;
  if (is_block_quant(w.dtype())) return quant_matmul_avx2(x, m, ldx, w, y, ldy, pool);
  if (m > kMaxGemvRows) return gemm(x, m, ldx, w, y, ldy, pool);
  switch (m) {
    case 1:
      return gemv<1>(x, ldx, w, y, ldy, pool);
    case 2:
      return gemv<2>(x, ldx, w, y, ldy, pool);
    case 3:
      return gemv<3>(x, ldx, w, y, ldy, pool);
    default:
      return gemv<4>(x, ldx, w, y, ldy, pool);
  }
}

}  // namespace strata::kernels::avx2
