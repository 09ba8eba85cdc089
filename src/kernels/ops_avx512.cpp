// AVX-512 element-wise ops of the avx512 variant: RMSNorm, SiLU-and-multiply and RoPE. Each
// repeats the AVX2 variant's arithmetic element for element (the same FMA chains, the same
// reduction order, the same exp polynomial), so the two variants agree bit for bit; only the
// width changes, and RoPE's adjacent-pair layout (GGUF llama) is vectorised instead of scalar.
#include <immintrin.h>

#include <cmath>

#include "kernels/kernel_impl.h"
#include "kernels/simd_avx2.h"
#include "kernels/simd_avx512.h"

#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

namespace strata::kernels::avx512 {
namespace {

// The AVX2 sum of squares: four 8-lane accumulators by index mod 32 (here two 16-lane ones),
// an 8-wide tail into the first, ((a0 + a1) + (a2 + a3)), hsum8, then the scalar tail.
float sum_squares(const float* x, int64_t n) {
  __m512 a01 = _mm512_setzero_ps(), a23 = _mm512_setzero_ps();
  int64_t j = 0;
  for (; j + 32 <= n; j += 32) {
    const __m512 v01 = _mm512_loadu_ps(x + j), v23 = _mm512_loadu_ps(x + j + 16);
    a01 = _mm512_fmadd_ps(v01, v01, a01);
    a23 = _mm512_fmadd_ps(v23, v23, a23);
  }
  for (; j + 8 <= n; j += 8) {
    const __m512 v = _mm512_maskz_loadu_ps(0x00FF, x + j);
    a01 = _mm512_mask3_fmadd_ps(v, v, a01, 0x00FF);
  }
  const __m256 a0 = _mm512_castps512_ps256(a01);
  const __m256 a1 = _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(a01), 1));
  const __m256 a2 = _mm512_castps512_ps256(a23);
  const __m256 a3 = _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(a23), 1));
  float s = avx2::hsum8(_mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)));
  for (; j < n; ++j) s += x[j] * x[j];
  return s;
}

void rms_norm(const float* x, int64_t ldx, const float* weight, float eps, int64_t m, int64_t n,
              float* y, int64_t ldy, ThreadPool& pool) {
  pool.parallel_for(m, 1, [&](int64_t r0, int64_t r1) {
    for (int64_t i = r0; i < r1; ++i) {
      const float* xr = x + i * ldx;
      float* yr = y + i * ldy;
      const float inv = 1.0f / std::sqrt(sum_squares(xr, n) / static_cast<float>(n) + eps);
      const __m512 vinv = _mm512_set1_ps(inv);
      int64_t j = 0;
      for (; j + 16 <= n; j += 16)
        _mm512_storeu_ps(yr + j, _mm512_mul_ps(_mm512_mul_ps(_mm512_loadu_ps(xr + j), vinv),
                                               _mm512_loadu_ps(weight + j)));
      for (; j < n; ++j) yr[j] = xr[j] * inv * weight[j];
    }
  });
}

void silu_mul(const float* gu, int64_t ldgu, int64_t m, int64_t f_dim, float* out, int64_t ldo,
              ThreadPool& pool) {
  const __m512 one = _mm512_set1_ps(1.0f);
  pool.parallel_for(m, 1, [&](int64_t r0, int64_t r1) {
    for (int64_t i = r0; i < r1; ++i) {
      const float* g = gu + i * ldgu;
      const float* u = g + f_dim;
      float* o = out + i * ldo;
      int64_t j = 0;
      // The AVX2 kernel's vector loop covers the multiples of 8; the same elements here.
      const int64_t vec = f_dim / 8 * 8;
      for (; j < vec; j += 16) {
        const __mmask16 mk = static_cast<__mmask16>(vec - j >= 16 ? 0xFFFF : 0x00FF);
        const __m512 gv = _mm512_maskz_loadu_ps(mk, g + j);
        const __m512 e = exp16(_mm512_sub_ps(_mm512_setzero_ps(), gv));
        const __m512 silu = _mm512_div_ps(gv, _mm512_add_ps(one, e));
        _mm512_mask_storeu_ps(o + j, mk, _mm512_mul_ps(silu, _mm512_maskz_loadu_ps(mk, u + j)));
      }
      for (j = vec; j < f_dim; ++j) o[j] = g[j] / (1.0f + std::exp(-g[j])) * u[j];
    }
  });
}

void rope(float* x, int64_t m, int64_t ld, int num_heads, int head_dim, int rot_dim,
          const float* cos, const float* sin, bool neox) {
  const int half = rot_dim / 2;
  // Adjacent pairs (2j, 2j + 1): y = x * c' + swap(x) * s', with c' = (c_j, c_j) and
  // s' = (-s_j, s_j) per pair: fma(x0, c, -(x1 * s)) and fma(x1, c, x0 * s), as the scalar loop.
  const __m512i dup = _mm512_set_epi32(7, 7, 6, 6, 5, 5, 4, 4, 3, 3, 2, 2, 1, 1, 0, 0);
  const __m512 sign =
      _mm512_castsi512_ps(_mm512_set_epi32(0, INT32_MIN, 0, INT32_MIN, 0, INT32_MIN, 0, INT32_MIN,
                                           0, INT32_MIN, 0, INT32_MIN, 0, INT32_MIN, 0, INT32_MIN));
  for (int64_t i = 0; i < m; ++i) {
    const float* c = cos + i * half;
    const float* s = sin + i * half;
    for (int h = 0; h < num_heads; ++h) {
      float* v = x + i * ld + static_cast<int64_t>(h) * head_dim;
      int j = 0;
      if (neox) {
        for (; j + 16 <= half; j += 16) {
          const __m512 x0 = _mm512_loadu_ps(v + j), x1 = _mm512_loadu_ps(v + j + half);
          const __m512 cv = _mm512_loadu_ps(c + j), sv = _mm512_loadu_ps(s + j);
          _mm512_storeu_ps(v + j, _mm512_fmsub_ps(x0, cv, _mm512_mul_ps(x1, sv)));
          _mm512_storeu_ps(v + j + half, _mm512_fmadd_ps(x1, cv, _mm512_mul_ps(x0, sv)));
        }
        for (; j + 8 <= half; j += 8) {
          const __m256 x0 = _mm256_loadu_ps(v + j), x1 = _mm256_loadu_ps(v + j + half);
          const __m256 cv = _mm256_loadu_ps(c + j), sv = _mm256_loadu_ps(s + j);
          _mm256_storeu_ps(v + j, _mm256_fmsub_ps(x0, cv, _mm256_mul_ps(x1, sv)));
          _mm256_storeu_ps(v + j + half, _mm256_fmadd_ps(x1, cv, _mm256_mul_ps(x0, sv)));
        }
      } else {
        for (; j + 8 <= half; j += 8) {
          const __m512 xv = _mm512_loadu_ps(v + 2 * j);
          const __m512 cv =
              _mm512_permutexvar_ps(dup, _mm512_castps256_ps512(_mm256_loadu_ps(c + j)));
          const __m512 sv = _mm512_xor_ps(
              _mm512_permutexvar_ps(dup, _mm512_castps256_ps512(_mm256_loadu_ps(s + j))), sign);
          const __m512 sw = _mm512_permute_ps(xv, 0xB1);  // (x1, x0) per pair
          _mm512_storeu_ps(v + 2 * j, _mm512_fmadd_ps(xv, cv, _mm512_mul_ps(sw, sv)));
        }
      }
      for (; j < half; ++j) {
        const int a = neox ? j : 2 * j, b = neox ? j + half : 2 * j + 1;
        const float x0 = v[a], x1 = v[b];
        v[a] = std::fma(x0, c[j], -(x1 * s[j]));
        v[b] = std::fma(x1, c[j], x0 * s[j]);
      }
    }
  }
}

}  // namespace

void fill_elementwise_ops(KernelOps* o) {
  o->rms_norm = rms_norm;
  o->silu_mul = silu_mul;
  o->rope = rope;
}

}  // namespace strata::kernels::avx512
