// AVX-512 helpers shared by the *_avx512.cpp kernels (include only from files compiled with
// AVX-512 enabled).
#pragma once

#include <immintrin.h>

namespace strata::kernels::avx512 {

// The AVX2 exp8 polynomial (simd_avx2.h) on 16 lanes: the same operations per element, so an
// element's result is bit-identical to exp8's; inputs below -87.3 give 0, above 88 clamp.
inline __m512 exp16(__m512 x) {
  const __m512 lo = _mm512_set1_ps(-87.3365478515625f);
  const __mmask16 underflow = _mm512_cmp_ps_mask(x, lo, _CMP_LT_OQ);
  x = _mm512_min_ps(_mm512_max_ps(x, lo), _mm512_set1_ps(88.0f));
  const __m512 fx = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                         _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  x = _mm512_fnmadd_ps(fx, _mm512_set1_ps(0.693359375f), x);
  x = _mm512_fnmadd_ps(fx, _mm512_set1_ps(-2.12194440e-4f), x);
  __m512 y = _mm512_set1_ps(1.9875691500e-4f);
  y = _mm512_fmadd_ps(y, x, _mm512_set1_ps(1.3981999507e-3f));
  y = _mm512_fmadd_ps(y, x, _mm512_set1_ps(8.3334519073e-3f));
  y = _mm512_fmadd_ps(y, x, _mm512_set1_ps(4.1665795894e-2f));
  y = _mm512_fmadd_ps(y, x, _mm512_set1_ps(1.6666665459e-1f));
  y = _mm512_fmadd_ps(y, x, _mm512_set1_ps(5.0000001201e-1f));
  y = _mm512_fmadd_ps(y, _mm512_mul_ps(x, x), _mm512_add_ps(x, _mm512_set1_ps(1.0f)));
  const __m512i e = _mm512_add_epi32(_mm512_cvtps_epi32(fx), _mm512_set1_epi32(127));
  const __m512 r = _mm512_mul_ps(y, _mm512_castsi512_ps(_mm512_slli_epi32(e, 23)));
  return _mm512_maskz_mov_ps(static_cast<__mmask16>(~underflow), r);
}

}  // namespace strata::kernels::avx512
