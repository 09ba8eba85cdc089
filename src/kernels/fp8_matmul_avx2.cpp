// AVX2/FMA/F16C matmul over F8E4M3 block-scaled panels (kernels/packed_weight.h).
//
// e4m3 -> f32 in registers: an e4m3 byte sign-extended to 16 bits and shifted left by 7, with bit
// 14 cleared, is the f16 with the same sign, exponent field and mantissa bits; as f16's exponent
// bias is 8 more than e4m3's, that f16 is the e4m3 value / 256 (normal and subnormal alike). The
// factor 256 is folded into the row scales (exact), so weight = f16 * (scale * 256) equals
// e4m3 * scale bit for bit. (The e4m3 NaN bytes 0x7f/0xff read as +-480; checkpoints have none.)
//
// Two paths with the same arithmetic, as in matmul_avx2.cpp: small m streams the panels once and
// converts weights in registers; larger m converts a [kKc x 16] block of a panel to f32 in L1 and
// runs a 6x16 register-blocked micro-kernel. Every output element is one FMA chain over k in order
// from zero, so a row's result is bit-identical whichever path or thread computed it.
#include <algorithm>
#include <cstring>

#include "core/aligned_buffer.h"
#include "kernels/fp8_matmul.h"
#include "kernels/simd_avx2.h"

namespace strata::kernels {
namespace {

constexpr int64_t kKc = 256;
constexpr int64_t kMc = 144;
constexpr int64_t kMaxGemvRows = 4;

float* thread_scratch(int64_t floats) {
  thread_local AlignedBuffer buf;
  if (buf.size() < static_cast<size_t>(floats) * 4) buf.resize(static_cast<size_t>(floats) * 4);
  return buf.as<float>();
}

// 16 e4m3 bytes -> their values / 256 as two f32 vectors (lanes 0-7, 8-15).
inline void fp8x16(const void* q, __m256& lo, __m256& hi) {
  const __m256i h = _mm256_cvtepi8_epi16(_mm_loadu_si128(static_cast<const __m128i*>(q)));
  const __m256i f16 = _mm256_and_si256(_mm256_slli_epi16(h, 7), _mm256_set1_epi16(-16385));
  lo = _mm256_cvtph_ps(_mm256_castsi256_si128(f16));
  hi = _mm256_cvtph_ps(_mm256_extracti128_si256(f16, 1));
}

// The 16 row scales of column block b of a panel, times 256.
inline void block_scales(const std::byte* blk, __m256& lo, __m256& hi) {
  const __m256 k256 = _mm256_set1_ps(256.0f);
  lo = _mm256_mul_ps(_mm256_loadu_ps(reinterpret_cast<const float*>(blk)), k256);
  hi = _mm256_mul_ps(_mm256_loadu_ps(reinterpret_cast<const float*>(blk) + 8), k256);
}

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

// ---- small m: MR rows of x against NP panels, weights converted in registers -------------------

template <int MR, int NP>
void gemv_panels(const float* x, int64_t ldx, const PackedWeight& w, int64_t p, float* y,
                 int64_t ldy) {
  const int64_t K = w.k(), bk = w.fp8_block_k();
  __m256 acc[MR][NP][2];
  for (int i = 0; i < MR; ++i)
    for (int q = 0; q < NP; ++q) acc[i][q][0] = acc[i][q][1] = _mm256_setzero_ps();
  for (int64_t b = 0; b < w.fp8_num_blocks(); ++b) {
    const std::byte* bytes[NP];
    alignas(32) float scale[NP][kPanelRows];
    for (int q = 0; q < NP; ++q) {
      const std::byte* blk = w.panel(p + q) + w.fp8_block_offset(b);
      __m256 lo, hi;
      block_scales(blk, lo, hi);
      _mm256_store_ps(scale[q], lo);
      _mm256_store_ps(scale[q] + 8, hi);
      bytes[q] = blk + PackedWeight::kFp8ScaleBytes;
    }
    const int64_t k0 = b * bk, k1 = std::min(K, k0 + bk);
    for (int64_t k = k0; k < k1; ++k) {
      __m256 xb[MR];
#pragma GCC unroll 4
      for (int i = 0; i < MR; ++i) xb[i] = _mm256_broadcast_ss(x + i * ldx + k);
#pragma GCC unroll 4
      for (int q = 0; q < NP; ++q) {
        const std::byte* src = bytes[q] + (k - k0) * kPanelRows;
        if ((k & 3) == 0) _mm_prefetch(reinterpret_cast<const char*>(src) + 512, _MM_HINT_T0);
        __m256 lo, hi;
        fp8x16(src, lo, hi);
        lo = _mm256_mul_ps(lo, _mm256_load_ps(scale[q]));
        hi = _mm256_mul_ps(hi, _mm256_load_ps(scale[q] + 8));
#pragma GCC unroll 4
        for (int i = 0; i < MR; ++i) {
          acc[i][q][0] = _mm256_fmadd_ps(xb[i], lo, acc[i][q][0]);
          acc[i][q][1] = _mm256_fmadd_ps(xb[i], hi, acc[i][q][1]);
        }
      }
    }
  }
  for (int q = 0; q < NP; ++q) {
    const int64_t cols = std::min<int64_t>(kPanelRows, w.n() - (p + q) * kPanelRows);
    for (int i = 0; i < MR; ++i)
      store16(y + i * ldy + (p + q) * kPanelRows, acc[i][q][0], acc[i][q][1], cols);
  }
}

template <int MR>
void gemv(const float* x, int64_t ldx, const PackedWeight& w, float* y, int64_t ldy,
          ThreadPool& pool) {
  constexpr int NP = MR == 1 ? 4 : (MR == 2 ? 2 : 1);
  pool.parallel_for(w.num_panels(), NP, [&](int64_t p0, int64_t p1) {
    int64_t p = p0;
    for (; p + NP <= p1; p += NP) gemv_panels<MR, NP>(x, ldx, w, p, y, ldy);
    for (; p < p1; ++p) gemv_panels<MR, 1>(x, ldx, w, p, y, ldy);
  });
}

// ---- larger m: convert a panel block to f32, then a 6x16 micro-kernel ------------------------

void panel_block_to_f32(const PackedWeight& w, int64_t p, int64_t k0, int64_t k1, float* dst) {
  const std::byte* pan = w.panel(p);
  const int64_t bk = w.fp8_block_k();
  int64_t k = k0;
  while (k < k1) {
    const int64_t b = k / bk, kb1 = std::min(k1, (b + 1) * bk);
    const std::byte* blk = pan + w.fp8_block_offset(b);
    __m256 s_lo, s_hi;
    block_scales(blk, s_lo, s_hi);
    const std::byte* bytes = blk + PackedWeight::kFp8ScaleBytes;
    for (; k < kb1; ++k) {
      __m256 lo, hi;
      fp8x16(bytes + (k - b * bk) * kPanelRows, lo, hi);
      _mm256_store_ps(dst + (k - k0) * kPanelRows, _mm256_mul_ps(lo, s_lo));
      _mm256_store_ps(dst + (k - k0) * kPanelRows + 8, _mm256_mul_ps(hi, s_hi));
    }
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
  for (int64_t k = 0; k < kc; ++k) {
    const __m256 w0 = _mm256_load_ps(wb + k * kPanelRows);
    const __m256 w1 = _mm256_load_ps(wb + k * kPanelRows + 8);
#pragma GCC unroll 6
    for (int i = 0; i < MR; ++i) {
      const __m256 b = _mm256_broadcast_ss(x + i * ldx + k);
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
  const float* xr = x + i * ldx;
  float* cr = c + i * ldc;
  switch (rows - i) {
    case 1:
      return ukernel<1>(xr, ldx, wb, kc, cr, ldc, first);
    case 2:
      return ukernel<2>(xr, ldx, wb, kc, cr, ldc, first);
    case 3:
      return ukernel<3>(xr, ldx, wb, kc, cr, ldc, first);
    case 4:
      return ukernel<4>(xr, ldx, wb, kc, cr, ldc, first);
    case 5:
      return ukernel<5>(xr, ldx, wb, kc, cr, ldc, first);
    default:
      return;
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

void fp8_matmul_avx2(const float* x, int64_t m, int64_t ldx, const PackedWeight& w, float* y,
                     int64_t ldy, ThreadPool& pool) {
  if (m <= 0) return;
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

}  // namespace strata::kernels
