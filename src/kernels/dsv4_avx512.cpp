// DeepSeek-V4 kernels (kernels/dsv4.h), AVX-512: 16 lanes; kernels/dsv4_avx2.cpp does the same
// operations on two 8-lane halves, bit for bit.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "core/dtype.h"

#include "kernels/dsv4.h"
#include "kernels/simd_avx2.h"
#include "kernels/simd_avx512.h"

// GCC 12 reports the intrinsics' own undefined-vector idiom (as the other AVX-512 files note).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

namespace strata::kernels {
namespace {

constexpr int kGroup = 32;

// Lanes l and l + 8 added, then hsum8's fixed order (the AVX2 variant's two halves).
inline float sum16(__m512 v) {
  return avx2::hsum8(_mm256_add_ps(_mm512_castps512_ps256(v), _mm512_extractf32x8_ps(v, 1)));
}

// Rows [b, e) of W against NR tokens of the deinterleaved x.
template <int NR>
void mxfp4_rows(const float* xd, const uint8_t* packed, const uint8_t* scales, int64_t n, int64_t k,
                int64_t r0, int64_t b, int64_t e, float* y) {
  const int64_t groups = k / kGroup;
  const float* e8m0 = e8m0_float_table();
  const __m512 lut = _mm512_setr_ps(0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f, -0.0f, -0.5f,
                                    -1.0f, -1.5f, -2.0f, -3.0f, -4.0f, -6.0f);
  for (int64_t i = b; i < e; ++i) {
    const uint8_t* row = packed + i * (k / 2);
    const uint8_t* sc = scales + i * groups;
    __m512 acc[NR];
    for (int r = 0; r < NR; ++r) acc[r] = _mm512_setzero_ps();
    for (int64_t g = 0; g < groups; ++g) {
      const __m512i bytes =
          _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(row + g * 16)));
      const __m512 we = _mm512_permutexvar_ps(bytes, lut);
      const __m512 wo = _mm512_permutexvar_ps(_mm512_srli_epi32(bytes, 4), lut);
      const __m512 s = _mm512_set1_ps(e8m0[sc[g]]);
      const float* xg = xd + r0 * k + g * kGroup;
#pragma GCC unroll 8
      for (int r = 0; r < NR; ++r) {
        const float* xr = xg + r * k;
        const __m512 d =
            _mm512_fmadd_ps(wo, _mm512_loadu_ps(xr + 16), _mm512_mul_ps(we, _mm512_loadu_ps(xr)));
        acc[r] = _mm512_fmadd_ps(d, s, acc[r]);
      }
    }
    for (int r = 0; r < NR; ++r) y[(r0 + r) * n + i] = sum16(acc[r]);
  }
}

using RowsFn = void (*)(const float*, const uint8_t*, const uint8_t*, int64_t, int64_t, int64_t,
                        int64_t, int64_t, float*);
constexpr RowsFn kRows[9] = {nullptr,       mxfp4_rows<1>, mxfp4_rows<2>,
                             mxfp4_rows<3>, mxfp4_rows<4>, mxfp4_rows<5>,
                             mxfp4_rows<6>, mxfp4_rows<7>, mxfp4_rows<8>};

// One e4m3 row of `dim` bytes times `rs`, as fp8_e4m3_to_f32(b) * rs: normal values by their bits
// (exponent rebased from 7 to 127), subnormals as mantissa * 2^-9, 0x7f / 0xff NaN.
inline __m512 e4m3x16(const uint8_t* p) {
  const __m512i b = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  const __m512i mag = _mm512_and_si512(b, _mm512_set1_epi32(0x7f));
  const __m512i sign = _mm512_slli_epi32(_mm512_and_si512(b, _mm512_set1_epi32(0x80)), 24);
  const __m512 normal = _mm512_castsi512_ps(
      _mm512_add_epi32(_mm512_slli_epi32(mag, 20), _mm512_set1_epi32(120 << 23)));
  const __m512 sub = _mm512_mul_ps(_mm512_cvtepi32_ps(mag), _mm512_set1_ps(1.0f / 512.0f));
  const __mmask16 is_sub = _mm512_cmplt_epi32_mask(mag, _mm512_set1_epi32(8));
  __m512 v = _mm512_mask_mov_ps(normal, is_sub, sub);
  const __mmask16 nan = _mm512_cmpeq_epi32_mask(mag, _mm512_set1_epi32(0x7f));
  v = _mm512_mask_mov_ps(v, nan, _mm512_set1_ps(std::numeric_limits<float>::quiet_NaN()));
  return _mm512_castsi512_ps(_mm512_or_si512(_mm512_castps_si512(v), sign));
}

void decode_index_key(const uint8_t* row, int64_t dim, float* out) {
  float rs;
  std::memcpy(&rs, row + dim, 4);
  const __m512 vs = _mm512_set1_ps(rs);
  int64_t i = 0;
  for (; i + 16 <= dim; i += 16) _mm512_storeu_ps(out + i, _mm512_mul_ps(e4m3x16(row + i), vs));
  for (; i < dim; ++i) out[i] = fp8_e4m3_to_f32(row[i]) * rs;
}

}  // namespace

void mxfp4_matmul_avx512(const float* x, const uint8_t* packed, const uint8_t* scales, int64_t m,
                         int64_t n, int64_t k, float* y, ThreadPool* pool) {
  std::vector<float> xd(static_cast<size_t>(m * k));
  mxfp4_deinterleave_x(x, m, k, xd.data());
  auto rows = [&](int64_t b, int64_t e) {
    for (int64_t r0 = 0; r0 < m; r0 += 8) {
      const int nr = static_cast<int>(std::min<int64_t>(8, m - r0));
      kRows[nr](xd.data(), packed, scales, n, k, r0, b, e, y);
    }
  };
  if (pool == nullptr || n < 2)
    rows(0, n);
  else
    pool->parallel_for(n, 1, rows);
}

// Heads in the lanes, 64 (four vectors) per pass, four keys sharing each load of the queries.
void dsv4_indexer_scores_avx512(const float* q, const float* w, int heads, int64_t dim, float scale,
                                const uint8_t* const* rows, int64_t n, float* scores) {
  constexpr int kKeys = 4;
  const int hp = (heads + 63) / 64 * 64;
  thread_local std::vector<float> buf;
  buf.assign(static_cast<size_t>(dim * hp + hp + kKeys * dim), 0.0f);
  float* qt = buf.data();
  float* wp = qt + dim * hp;
  float* keys = wp + hp;
  for (int h = 0; h < heads; ++h) {
    wp[h] = w[h];
    for (int64_t e = 0; e < dim; ++e) qt[e * hp + h] = q[h * dim + e];
  }
  const __m512 zero = _mm512_setzero_ps();
  for (int64_t j0 = 0; j0 < n; j0 += kKeys) {
    for (int i = 0; i < kKeys; ++i)
      decode_index_key(rows[std::min<int64_t>(j0 + i, n - 1)], dim, keys + i * dim);
    __m512 total[kKeys];
    for (int i = 0; i < kKeys; ++i) total[i] = zero;
    for (int g = 0; g < hp; g += 64) {
      __m512 acc[kKeys][4];
      for (int i = 0; i < kKeys; ++i)
        for (int v = 0; v < 4; ++v) acc[i][v] = zero;
      const float* qg = qt + g;
      for (int64_t e = 0; e < dim; ++e) {
        const float* qe = qg + e * hp;
        const __m512 q0 = _mm512_loadu_ps(qe), q1 = _mm512_loadu_ps(qe + 16);
        const __m512 q2 = _mm512_loadu_ps(qe + 32), q3 = _mm512_loadu_ps(qe + 48);
#pragma GCC unroll 4
        for (int i = 0; i < kKeys; ++i) {
          const __m512 kb = _mm512_set1_ps(keys[i * dim + e]);
          acc[i][0] = _mm512_fmadd_ps(q0, kb, acc[i][0]);
          acc[i][1] = _mm512_fmadd_ps(q1, kb, acc[i][1]);
          acc[i][2] = _mm512_fmadd_ps(q2, kb, acc[i][2]);
          acc[i][3] = _mm512_fmadd_ps(q3, kb, acc[i][3]);
        }
      }
      for (int v = 0; v < 4; ++v) {
        const __m512 wv = _mm512_loadu_ps(wp + g + 16 * v);
        for (int i = 0; i < kKeys; ++i)
          total[i] = _mm512_fmadd_ps(wv, _mm512_max_ps(acc[i][v], zero), total[i]);
      }
    }
    for (int i = 0; i < kKeys && j0 + i < n; ++i) scores[j0 + i] = sum16(total[i]) * scale;
  }
}

// The logits of every head in 4 x 4 (head, row) tiles, rows outer (a tile of rows stays in L1
// while the queries stream from L2), then each head's softmax numerators, then the outputs 64
// values x 4 heads at a time over every row (a 64-value column of the rows stays in L2 across
// the heads). Every value is one fixed chain of operations whatever the tiling.
void dsv4_attention_avx512(const float* q, int heads, int64_t dim, const float* kv, int64_t n,
                           const float* sinks, float scale, float* out) {
  constexpr int kH = 4, kR = 4;
  const int64_t n16 = (n + 15) / 16 * 16;
  thread_local std::vector<float> buf, dens;
  buf.resize(static_cast<size_t>(heads * n16));
  dens.resize(static_cast<size_t>(heads));
  for (int64_t j0 = 0; j0 < n; j0 += kR) {
    const float* kr[kR];
    for (int c = 0; c < kR; ++c) kr[c] = kv + std::min<int64_t>(j0 + c, n - 1) * dim;
    for (int h0 = 0; h0 < heads; h0 += kH) {
      const int nh = std::min(kH, heads - h0);
      const float* qh[kH];
      for (int a = 0; a < kH; ++a) qh[a] = q + (h0 + std::min(a, nh - 1)) * dim;
      __m512 acc[kH][kR];
      for (int a = 0; a < kH; ++a)
        for (int c = 0; c < kR; ++c) acc[a][c] = _mm512_setzero_ps();
      for (int64_t i = 0; i < dim; i += 16) {
        __m512 kvv[kR];
        for (int c = 0; c < kR; ++c) kvv[c] = _mm512_loadu_ps(kr[c] + i);
#pragma GCC unroll 4
        for (int a = 0; a < kH; ++a) {
          const __m512 qv = _mm512_loadu_ps(qh[a] + i);
          for (int c = 0; c < kR; ++c) acc[a][c] = _mm512_fmadd_ps(qv, kvv[c], acc[a][c]);
        }
      }
      for (int a = 0; a < nh; ++a)
        for (int c = 0; c < kR && j0 + c < n; ++c)
          buf[(h0 + a) * n16 + j0 + c] = sum16(acc[a][c]) * scale;
    }
  }
  for (int h = 0; h < heads; ++h) {
    float* lg = buf.data() + h * n16;
    float mx = sinks[h];
    for (int64_t j = 0; j < n; ++j) mx = lg[j] > mx ? lg[j] : mx;
    for (int64_t j = n; j < n16; ++j) lg[j] = -INFINITY;
    const __m512 vmx = _mm512_set1_ps(mx);
    __m512 vs = _mm512_setzero_ps();
    for (int64_t j = 0; j < n16; j += 16) {
      const __m512 p = avx512::exp16(_mm512_sub_ps(_mm512_loadu_ps(lg + j), vmx));
      _mm512_storeu_ps(lg + j, p);
      vs = _mm512_add_ps(vs, p);
    }
    dens[h] = std::exp(sinks[h] - mx) + sum16(vs);
  }
  for (int64_t i0 = 0; i0 < dim; i0 += 64) {
    const int nv = static_cast<int>(std::min<int64_t>(4, (dim - i0) / 16));
    for (int h0 = 0; h0 < heads; h0 += kH) {
      const int nh = std::min(kH, heads - h0);
      const float* pr[kH];
      for (int a = 0; a < kH; ++a) pr[a] = buf.data() + (h0 + std::min(a, nh - 1)) * n16;
      __m512 acc[kH][4];
      for (int a = 0; a < kH; ++a)
        for (int v = 0; v < 4; ++v) acc[a][v] = _mm512_setzero_ps();
      if (nv == 4) {
        for (int64_t j = 0; j < n; ++j) {
          const float* r = kv + j * dim + i0;
          const __m512 v0 = _mm512_loadu_ps(r), v1 = _mm512_loadu_ps(r + 16);
          const __m512 v2 = _mm512_loadu_ps(r + 32), v3 = _mm512_loadu_ps(r + 48);
#pragma GCC unroll 4
          for (int a = 0; a < kH; ++a) {
            const __m512 p = _mm512_set1_ps(pr[a][j]);
            acc[a][0] = _mm512_fmadd_ps(p, v0, acc[a][0]);
            acc[a][1] = _mm512_fmadd_ps(p, v1, acc[a][1]);
            acc[a][2] = _mm512_fmadd_ps(p, v2, acc[a][2]);
            acc[a][3] = _mm512_fmadd_ps(p, v3, acc[a][3]);
          }
        }
      } else {
        for (int64_t j = 0; j < n; ++j) {
          const float* r = kv + j * dim + i0;
          for (int a = 0; a < kH; ++a) {
            const __m512 p = _mm512_set1_ps(pr[a][j]);
            for (int v = 0; v < nv; ++v)
              acc[a][v] = _mm512_fmadd_ps(p, _mm512_loadu_ps(r + 16 * v), acc[a][v]);
          }
        }
      }
      for (int a = 0; a < nh; ++a) {
        const __m512 den = _mm512_set1_ps(dens[h0 + a]);
        for (int v = 0; v < nv; ++v)
          _mm512_storeu_ps(out + (h0 + a) * dim + i0 + 16 * v, _mm512_div_ps(acc[a][v], den));
      }
    }
  }
}

void dsv4_unpack_fp8_row_avx512(const uint8_t* data, const uint8_t* scales, int64_t nope,
                                int64_t rope, float* out) {
  const float* e8m0 = e8m0_float_table();
  for (int64_t g = 0; g < nope / 64; ++g) {
    const __m512 s = _mm512_set1_ps(e8m0[scales[g]]);
    for (int i = 0; i < 64; i += 16)
      _mm512_storeu_ps(out + g * 64 + i, _mm512_mul_ps(e4m3x16(data + g * 64 + i), s));
  }
  int64_t i = 0;
  for (; i + 16 <= rope; i += 16) {
    const __m256i b = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(data + nope + 2 * i));
    _mm512_storeu_ps(out + nope + i,
                     _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(b), 16)));
  }
  for (; i < rope; ++i) {
    uint16_t b;
    std::memcpy(&b, data + nope + 2 * i, 2);
    out[nope + i] = bf16_to_f32(b);
  }
}

}  // namespace strata::kernels
