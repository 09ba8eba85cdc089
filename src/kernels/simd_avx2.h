// AVX2 helpers shared by the *_avx2.cpp kernel files (compiled with -mavx2 -mfma -mf16c).
#pragma once

#include <immintrin.h>

#include <cmath>
#include <cstdint>

namespace strata::kernels::avx2 {

inline __m256 load_bf16x8(const void* p) {
  __m128i v = _mm_loadu_si128(static_cast<const __m128i*>(p));
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(v), 16));
}

// The load goes to a register first: compilers fold it into vcvtph2ps's memory operand, and on
// Zen 1 that form is the slow one (a gemv streaming F16 weights: 21.5 against 23.8 GB/s). The
// empty asm only keeps the two instructions apart.
inline __m256 load_f16x8(const void* p) {
  __m128i v = _mm_loadu_si128(static_cast<const __m128i*>(p));
  asm("" : "+x"(v));
  return _mm256_cvtph_ps(v);
}

// Sum of the 8 lanes in a fixed order: ((l0+l4)+(l2+l6)) + ((l1+l5)+(l3+l7)).
inline float hsum8(__m256 v) {
  __m128 lo = _mm256_castps256_ps128(v), hi = _mm256_extractf128_ps(v, 1);
  __m128 s = _mm_add_ps(lo, hi);    // l0+l4, l1+l5, l2+l6, l3+l7
  __m128 sh = _mm_movehl_ps(s, s);  // l2+l6, l3+l7
  __m128 s2 = _mm_add_ps(s, sh);    // (l0+l4)+(l2+l6), (l1+l5)+(l3+l7)
  __m128 s3 = _mm_add_ss(s2, _mm_movehdup_ps(s2));
  return _mm_cvtss_f32(s3);
}

// e^x for each lane, relative error about 2 ulp; inputs below -87.3 give 0, above 88 clamp to e^88.
inline __m256 exp8(__m256 x) {
  const __m256 hi = _mm256_set1_ps(88.0f);
  const __m256 lo = _mm256_set1_ps(-87.3365478515625f);
  __m256 underflow = _mm256_cmp_ps(x, lo, _CMP_LT_OQ);
  x = _mm256_min_ps(_mm256_max_ps(x, lo), hi);
  __m256 fx = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                              _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  x = _mm256_fnmadd_ps(fx, _mm256_set1_ps(0.693359375f), x);
  x = _mm256_fnmadd_ps(fx, _mm256_set1_ps(-2.12194440e-4f), x);
  __m256 y = _mm256_set1_ps(1.9875691500e-4f);
  y = _mm256_fmadd_ps(y, x, _mm256_set1_ps(1.3981999507e-3f));
  y = _mm256_fmadd_ps(y, x, _mm256_set1_ps(8.3334519073e-3f));
  y = _mm256_fmadd_ps(y, x, _mm256_set1_ps(4.1665795894e-2f));
  y = _mm256_fmadd_ps(y, x, _mm256_set1_ps(1.6666665459e-1f));
  y = _mm256_fmadd_ps(y, x, _mm256_set1_ps(5.0000001201e-1f));
  __m256 x2 = _mm256_mul_ps(x, x);
  y = _mm256_fmadd_ps(y, x2, _mm256_add_ps(x, _mm256_set1_ps(1.0f)));
  __m256i e = _mm256_add_epi32(_mm256_cvtps_epi32(fx), _mm256_set1_epi32(127));
  __m256 pow2n = _mm256_castsi256_ps(_mm256_slli_epi32(e, 23));
  return _mm256_andnot_ps(underflow, _mm256_mul_ps(y, pow2n));
}

// Softmax numerators of one score row in place: sc[0..n) becomes exp(sc - max), the padding
// sc[n..n8) (n8 = n rounded up to 8) becomes 0; returns their sum (lane = index mod 8, then
// hsum8's fixed order), so a row's result depends on nothing but the row.
inline float softmax_numerators(float* sc, int64_t n, int64_t n8) {
  for (int64_t j = n; j < n8; ++j) sc[j] = -INFINITY;
  float mx = -INFINITY;
  for (int64_t j = 0; j < n; ++j) mx = sc[j] > mx ? sc[j] : mx;
  const __m256 vmx = _mm256_set1_ps(mx);
  __m256 vs = _mm256_setzero_ps();
  for (int64_t j = 0; j < n8; j += 8) {
    const __m256 e = exp8(_mm256_sub_ps(_mm256_loadu_ps(sc + j), vmx));
    _mm256_storeu_ps(sc + j, e);
    vs = _mm256_add_ps(vs, e);
  }
  return hsum8(vs);
}

}  // namespace strata::kernels::avx2
