// Block-quantized matmul with AVX-512 VNNI: one zmm holds the 16 rows of a panel, and vpdpbusd
// multiplies 4 stored weights (u8) by 4 int8 activations per row and adds them into the row's
// int32 lane. R activation rows share every weight load. The integer sums and the float steps
// are those of quant_matmul_reference (quant_weight.h), so the results are bit-identical to it.
#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "core/check.h"
#include "kernels/packed_weight.h"
#include "kernels/quant_weight.h"

// GCC 12 warns that its own intrinsic headers read an uninitialized value (the pass-through
// operand of the unmasked conversions): a false positive.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

namespace strata::kernels {
namespace {

inline __m512i bcast4(const int8_t* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return _mm512_set1_epi32(v);
}

// Rows [i0, i0 + R) of the activations times panel `pan`, into y (cols valid columns).
template <int R, int BITS, bool SC, bool MIN>
void panel_rows(const QuantLayout& L, const uint8_t* pan, const QuantizedActivations& a, int64_t i0,
                float* y, int64_t ldy, int cols) {
  const int64_t K = a.k, nsb = K / L.super;
  const int nsub = L.num_sub(), sub = L.sub;
  const int64_t sub_bytes = int64_t{sub} * 16 * BITS / 8;
  const __m512i nib = _mm512_set1_epi8(0x0F);
  const __m512i b30 = _mm512_set1_epi8(0x30), b3f = _mm512_set1_epi8(0x3F);
  const __m512i b10 = _mm512_set1_epi8(0x10), b7f = _mm512_set1_epi8(0x7F);
  const __m512i zero = _mm512_set1_epi32(L.zero);
  __m512 facc[R];
  for (int r = 0; r < R; ++r) facc[r] = _mm512_setzero_ps();
  for (int64_t s = 0; s < nsb; ++s) {
    const uint8_t* u = pan + (s / L.group) * L.unit_bytes();
    const int64_t g = s % L.group;
    const __m512 d =
        _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(u + g * 32)));
    __m512 dmin = _mm512_setzero_ps();
    if constexpr (MIN)
      dmin = _mm512_cvtph_ps(
          _mm256_loadu_si256(reinterpret_cast<const __m256i*>(u + L.group * 32 + g * 32)));
    const uint8_t* sb = u + L.header_bytes() + g * (L.scale_bytes() + L.quant_bytes());
    const uint8_t* quants = sb + L.scale_bytes();
    __m512i T[R], M[R];
    for (int r = 0; r < R; ++r) T[r] = M[r] = _mm512_setzero_si512();
    for (int j = 0; j < nsub; ++j) {
      __m512i isum[R];
      for (int r = 0; r < R; ++r) isum[r] = _mm512_setzero_si512();
      const uint8_t* qj = quants + j * sub_bytes;
      const int64_t c0 = s * L.super + int64_t{j} * sub;
      if constexpr (BITS == 8) {
        for (int gi = 0; gi < sub / 4; ++gi) {
          const __m512i wv = _mm512_loadu_si512(qj + gi * 64);
#pragma GCC unroll 8
          for (int r = 0; r < R; ++r)
            isum[r] = _mm512_dpbusd_epi32(isum[r], wv, bcast4(a.xq + (i0 + r) * K + c0 + gi * 4));
        }
      } else {
        // 5- and 6-bit: the high bits of the sub-block's groups, consumed in group order.
        const uint8_t* high = qj + sub * 8;
        __m512i t = _mm512_setzero_si512();
        if constexpr (BITS != 4) t = _mm512_loadu_si512(high);
        for (int h = 0; h < sub / 8; ++h) {
          const __m512i raw = _mm512_loadu_si512(qj + h * 64);
          __m512i lo = _mm512_and_si512(raw, nib);
          __m512i hi = _mm512_and_si512(_mm512_srli_epi16(raw, 4), nib);
          if constexpr (BITS == 6) {
            if (h > 0 && h % 2 == 0) t = _mm512_loadu_si512(high + (h / 2) * 64);
            lo = _mm512_or_si512(lo, _mm512_and_si512(_mm512_slli_epi16(t, 4), b30));
            t = _mm512_and_si512(_mm512_srli_epi16(t, 2), b3f);
            hi = _mm512_or_si512(hi, _mm512_and_si512(_mm512_slli_epi16(t, 4), b30));
            t = _mm512_and_si512(_mm512_srli_epi16(t, 2), b3f);
          } else if constexpr (BITS == 5) {
            lo = _mm512_or_si512(lo, _mm512_and_si512(_mm512_slli_epi16(t, 4), b10));
            t = _mm512_and_si512(_mm512_srli_epi16(t, 1), b7f);
            hi = _mm512_or_si512(hi, _mm512_and_si512(_mm512_slli_epi16(t, 4), b10));
            t = _mm512_and_si512(_mm512_srli_epi16(t, 1), b7f);
          }
#pragma GCC unroll 8
          for (int r = 0; r < R; ++r) {
            const int8_t* xr = a.xq + (i0 + r) * K + c0 + h * 8;
            isum[r] = _mm512_dpbusd_epi32(isum[r], lo, bcast4(xr));
            isum[r] = _mm512_dpbusd_epi32(isum[r], hi, bcast4(xr + 4));
          }
        }
      }
      __m512i scv = _mm512_setzero_si512(), mv = _mm512_setzero_si512();
      if constexpr (SC)
        scv = _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(sb + j * 16)));
      if constexpr (SC && MIN)
        mv = _mm512_cvtepu8_epi32(
            _mm_loadu_si128(reinterpret_cast<const __m128i*>(sb + (nsub + j) * 16)));
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) {
        const __m512i xs = _mm512_set1_epi32(a.xs[((i0 + r) * nsb + s) * nsub + j]);
        __m512i v = _mm512_sub_epi32(isum[r], _mm512_mullo_epi32(zero, xs));
        if constexpr (SC)
          T[r] = _mm512_add_epi32(T[r], _mm512_mullo_epi32(scv, v));
        else
          T[r] = _mm512_add_epi32(T[r], v);
        if constexpr (MIN) {
          if constexpr (SC)
            M[r] = _mm512_add_epi32(M[r], _mm512_mullo_epi32(mv, xs));
          else
            M[r] = _mm512_add_epi32(M[r], xs);
        }
      }
    }
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      __m512 t = _mm512_mul_ps(d, _mm512_cvtepi32_ps(T[r]));
      if constexpr (MIN) t = _mm512_fnmadd_ps(dmin, _mm512_cvtepi32_ps(M[r]), t);
      facc[r] = _mm512_fmadd_ps(_mm512_set1_ps(a.dx[(i0 + r) * nsb + s]), t, facc[r]);
    }
  }
  const __mmask16 mask = static_cast<__mmask16>((1u << cols) - 1);
  for (int r = 0; r < R; ++r) _mm512_mask_storeu_ps(y + r * ldy, mask, facc[r]);
}

template <int BITS, bool SC, bool MIN>
void run(const QuantLayout& L, const QuantizedActivations& a, const PackedWeight& w, float* y,
         int64_t ldy, ThreadPool& pool) {
  constexpr int kR = 4;
  const int64_t m = a.m, N = w.n();
  pool.parallel_for(w.num_panels(), 1, [&](int64_t p0, int64_t p1) {
    for (int64_t p = p0; p < p1; ++p) {
      const auto* pan = reinterpret_cast<const uint8_t*>(w.panel(p));
      const int cols = static_cast<int>(std::min<int64_t>(kPanelRows, N - p * kPanelRows));
      float* yp = y + p * kPanelRows;
      int64_t i = 0;
      for (; i + kR <= m; i += kR)
        panel_rows<kR, BITS, SC, MIN>(L, pan, a, i, yp + i * ldy, ldy, cols);
      switch (m - i) {
        case 3:
          panel_rows<3, BITS, SC, MIN>(L, pan, a, i, yp + i * ldy, ldy, cols);
          break;
        case 2:
          panel_rows<2, BITS, SC, MIN>(L, pan, a, i, yp + i * ldy, ldy, cols);
          break;
        case 1:
          panel_rows<1, BITS, SC, MIN>(L, pan, a, i, yp + i * ldy, ldy, cols);
          break;
        default:
          break;
      }
    }
  });
}

}  // namespace

void quant_matmul_avx512vnni(const float* x, int64_t m, int64_t ldx, const PackedWeight& w,
                             float* y, int64_t ldy, ThreadPool& pool) {
  if (m <= 0) return;
  const QuantLayout& L = w.quant_layout();
  const QuantizedActivations a = quantize_activations(x, m, ldx, w.k(), L.super, L.sub);
  const int key = (L.has_sc ? 2 : 0) | (L.has_min ? 1 : 0);
  switch (L.bits * 4 + key) {
#define STRATA_QCASE(B, K, SC, MIN) \
  case B * 4 + K:                   \
    return run<B, SC, MIN>(L, a, w, y, ldy, pool);
    STRATA_QCASE(4, 0, false, false)
    STRATA_QCASE(4, 1, false, true)
    STRATA_QCASE(4, 2, true, false)
    STRATA_QCASE(4, 3, true, true)
    STRATA_QCASE(5, 0, false, false)
    STRATA_QCASE(5, 1, false, true)
    STRATA_QCASE(5, 3, true, true)
    STRATA_QCASE(6, 2, true, false)
    STRATA_QCASE(8, 0, false, false)
    STRATA_QCASE(8, 2, true, false)
    STRATA_QCASE(8, 3, true, true)
#undef STRATA_QCASE
    default:
      STRATA_CHECK(false) << "no VNNI kernel for " << dtype_name(w.dtype());
  }
}

}  // namespace strata::kernels
