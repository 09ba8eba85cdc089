// Block-quantized matmul with AVX2: a panel's 16 rows are two ymm halves of 8 int32 lanes;
// vpmaddubsw multiplies stored weights (u8) by int8 activations into 16-bit pair sums and
// vpmaddwd adds the pairs into the row's int32 lane. Pair sums must not saturate: 4-bit and
// up-to-6-bit weights cannot (63 * 127 * 2 < 32767); formats with 8-bit codes around a zero
// point of 128 (Q8_0, IQ4_NL, IQ4_XS) take the signed form q - 128 instead, its magnitude moved
// onto the weight and its sign onto the activation (|q - 128| * 127 * 2 < 32767), which gives
// the same integer sum. The float steps are those of quant_matmul_reference, so the results are
// bit-identical to it (quant_weight.h).
#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "core/check.h"
#include "kernels/packed_weight.h"
#include "kernels/quant_weight.h"

namespace strata::kernels {
namespace {

inline __m256i bcast4(const int8_t* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return _mm256_set1_epi32(v);
}

// int32 lane sums of u8 w times s8 x over 4-byte groups.
inline __m256i dot_u8s8(__m256i w, __m256i x) {
  return _mm256_madd_epi16(_mm256_maddubs_epi16(w, x), _mm256_set1_epi16(1));
}
// The same for signed w (given as q with its sign bit flipped: q - 128).
inline __m256i dot_s8s8(__m256i w, __m256i x) {
  const __m256i ws = _mm256_xor_si256(w, _mm256_set1_epi8(static_cast<char>(0x80)));
  return dot_u8s8(_mm256_sign_epi8(ws, ws), _mm256_sign_epi8(x, ws));
}

template <int BITS, bool SIGNED, bool SC, bool MIN>
void panel_row(const QuantLayout& L, const uint8_t* pan, const QuantizedActivations& a, int64_t i,
               float* y, int cols) {
  const int64_t K = a.k, nsb = K / L.super;
  const int nsub = L.num_sub(), sub = L.sub;
  const int64_t sub_bytes = int64_t{sub} * 16 * BITS / 8;
  const __m256i nib = _mm256_set1_epi8(0x0F);
  const __m256i b30 = _mm256_set1_epi8(0x30), b3f = _mm256_set1_epi8(0x3F);
  const __m256i b10 = _mm256_set1_epi8(0x10), b7f = _mm256_set1_epi8(0x7F);
  // The signed form already subtracts the zero point (128).
  const __m256i zero = _mm256_set1_epi32(SIGNED ? 0 : L.zero);
  __m256 facc[2] = {_mm256_setzero_ps(), _mm256_setzero_ps()};
  const int8_t* xrow = a.xq + i * K;
  for (int64_t s = 0; s < nsb; ++s) {
    const uint8_t* u = pan + (s / L.group) * L.unit_bytes();
    const int64_t g = s % L.group;
    __m256 d[2], dmin[2] = {_mm256_setzero_ps(), _mm256_setzero_ps()};
    for (int h = 0; h < 2; ++h) {
      d[h] =
          _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(u + g * 32 + h * 16)));
      if constexpr (MIN)
        dmin[h] = _mm256_cvtph_ps(
            _mm_loadu_si128(reinterpret_cast<const __m128i*>(u + L.group * 32 + g * 32 + h * 16)));
    }
    const uint8_t* sb = u + L.header_bytes() + g * (L.scale_bytes() + L.quant_bytes());
    const uint8_t* quants = sb + L.scale_bytes();
    __m256i T[2] = {_mm256_setzero_si256(), _mm256_setzero_si256()};
    __m256i M[2] = {_mm256_setzero_si256(), _mm256_setzero_si256()};
    for (int j = 0; j < nsub; ++j) {
      __m256i isum[2] = {_mm256_setzero_si256(), _mm256_setzero_si256()};
      const uint8_t* qj = quants + j * sub_bytes;
      const int8_t* xj = xrow + s * L.super + int64_t{j} * sub;
      if constexpr (BITS == 8) {
        for (int gi = 0; gi < sub / 4; ++gi) {
          const __m256i xb = bcast4(xj + gi * 4);
          for (int h = 0; h < 2; ++h) {
            const __m256i wv =
                _mm256_loadu_si256(reinterpret_cast<const __m256i*>(qj + gi * 64 + h * 32));
            isum[h] = _mm256_add_epi32(isum[h], SIGNED ? dot_s8s8(wv, xb) : dot_u8s8(wv, xb));
          }
        }
      } else {
        // 5- and 6-bit: the high bits of the sub-block's groups, consumed in group order.
        const uint8_t* high = qj + sub * 8;
        __m256i t[2] = {_mm256_setzero_si256(), _mm256_setzero_si256()};
        if constexpr (BITS != 4)
          for (int h = 0; h < 2; ++h)
            t[h] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(high + h * 32));
        for (int c = 0; c < sub / 8; ++c) {
          const __m256i xlo = bcast4(xj + c * 8), xhi = bcast4(xj + c * 8 + 4);
          for (int h = 0; h < 2; ++h) {
            const __m256i raw =
                _mm256_loadu_si256(reinterpret_cast<const __m256i*>(qj + c * 64 + h * 32));
            __m256i lo = _mm256_and_si256(raw, nib);
            __m256i hi = _mm256_and_si256(_mm256_srli_epi16(raw, 4), nib);
            if constexpr (BITS == 6) {
              if (c > 0 && c % 2 == 0)
                t[h] = _mm256_loadu_si256(
                    reinterpret_cast<const __m256i*>(high + (c / 2) * 64 + h * 32));
              lo = _mm256_or_si256(lo, _mm256_and_si256(_mm256_slli_epi16(t[h], 4), b30));
              t[h] = _mm256_and_si256(_mm256_srli_epi16(t[h], 2), b3f);
              hi = _mm256_or_si256(hi, _mm256_and_si256(_mm256_slli_epi16(t[h], 4), b30));
              t[h] = _mm256_and_si256(_mm256_srli_epi16(t[h], 2), b3f);
            } else if constexpr (BITS == 5) {
              lo = _mm256_or_si256(lo, _mm256_and_si256(_mm256_slli_epi16(t[h], 4), b10));
              t[h] = _mm256_and_si256(_mm256_srli_epi16(t[h], 1), b7f);
              hi = _mm256_or_si256(hi, _mm256_and_si256(_mm256_slli_epi16(t[h], 4), b10));
              t[h] = _mm256_and_si256(_mm256_srli_epi16(t[h], 1), b7f);
            }
            isum[h] =
                _mm256_add_epi32(isum[h], _mm256_add_epi32(dot_u8s8(lo, xlo), dot_u8s8(hi, xhi)));
          }
        }
      }
      const __m256i xs = _mm256_set1_epi32(a.xs[(i * nsb + s) * nsub + j]);
      for (int h = 0; h < 2; ++h) {
        const __m256i v = _mm256_sub_epi32(isum[h], _mm256_mullo_epi32(zero, xs));
        if constexpr (SC) {
          const __m256i scv = _mm256_cvtepi8_epi32(
              _mm_loadl_epi64(reinterpret_cast<const __m128i*>(sb + j * 16 + h * 8)));
          T[h] = _mm256_add_epi32(T[h], _mm256_mullo_epi32(scv, v));
        } else {
          T[h] = _mm256_add_epi32(T[h], v);
        }
        if constexpr (MIN) {
          if constexpr (SC) {
            const __m256i mv = _mm256_cvtepu8_epi32(
                _mm_loadl_epi64(reinterpret_cast<const __m128i*>(sb + (nsub + j) * 16 + h * 8)));
            M[h] = _mm256_add_epi32(M[h], _mm256_mullo_epi32(mv, xs));
          } else {
            M[h] = _mm256_add_epi32(M[h], xs);
          }
        }
      }
    }
    const __m256 dx = _mm256_set1_ps(a.dx[i * nsb + s]);
    for (int h = 0; h < 2; ++h) {
      __m256 t = _mm256_mul_ps(d[h], _mm256_cvtepi32_ps(T[h]));
      if constexpr (MIN) t = _mm256_fnmadd_ps(dmin[h], _mm256_cvtepi32_ps(M[h]), t);
      facc[h] = _mm256_fmadd_ps(dx, t, facc[h]);
    }
  }
  alignas(32) float out[16];
  _mm256_store_ps(out, facc[0]);
  _mm256_store_ps(out + 8, facc[1]);
  std::memcpy(y, out, static_cast<size_t>(cols) * 4);
}

template <int BITS, bool SIGNED, bool SC, bool MIN>
void run(const QuantLayout& L, const QuantizedActivations& a, const PackedWeight& w, float* y,
         int64_t ldy, ThreadPool& pool) {
  const int64_t N = w.n();
  pool.parallel_for(w.num_panels(), 1, [&](int64_t p0, int64_t p1) {
    for (int64_t p = p0; p < p1; ++p) {
      const auto* pan = reinterpret_cast<const uint8_t*>(w.panel(p));
      const int cols = static_cast<int>(std::min<int64_t>(kPanelRows, N - p * kPanelRows));
      for (int64_t i = 0; i < a.m; ++i)
        panel_row<BITS, SIGNED, SC, MIN>(L, pan, a, i, y + i * ldy + p * kPanelRows, cols);
    }
  });
}

}  // namespace

void quant_matmul_avx2(const float* x, int64_t m, int64_t ldx, const PackedWeight& w, float* y,
                       int64_t ldy, ThreadPool& pool) {
  if (m <= 0) return;
  const QuantLayout& L = w.quant_layout();
  const QuantizedActivations a = quantize_activations(x, m, ldx, w.k(), L.super, L.sub);
  if (L.bits == 8 && L.zero == 128) {
    if (L.has_sc && L.has_min) return run<8, true, true, true>(L, a, w, y, ldy, pool);  // W8G
    if (L.has_sc) return run<8, true, true, false>(L, a, w, y, ldy, pool);
    return run<8, true, false, false>(L, a, w, y, ldy, pool);
  }
  const int key = (L.has_sc ? 2 : 0) | (L.has_min ? 1 : 0);
  switch (L.bits * 4 + key) {
#define STRATA_QCASE(B, K, SC, MIN) \
  case B * 4 + K:                   \
    return run<B, false, SC, MIN>(L, a, w, y, ldy, pool);
    STRATA_QCASE(4, 0, false, false)
    STRATA_QCASE(4, 1, false, true)
    STRATA_QCASE(4, 2, true, false)
    STRATA_QCASE(4, 3, true, true)
    STRATA_QCASE(5, 0, false, false)
    STRATA_QCASE(5, 1, false, true)
    STRATA_QCASE(5, 3, true, true)
    STRATA_QCASE(6, 2, true, false)
#undef STRATA_QCASE
    default:
      STRATA_CHECK(false) << "no AVX2 kernel for " << dtype_name(w.dtype());
  }
}

}  // namespace strata::kernels
