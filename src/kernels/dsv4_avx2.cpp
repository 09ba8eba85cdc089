// DeepSeek-V4 kernels (kernels/dsv4.h), AVX2: the AVX-512 variant's 16 lanes as two 8-lane
// halves (lo: lanes 0-7, hi: lanes 8-15) with the same operations per lane, so the two variants
// agree bit for bit.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "core/dtype.h"
#include "kernels/dsv4.h"
#include "kernels/simd_avx2.h"

namespace strata::kernels {
namespace {

constexpr int kGroup = 32;

inline float sum16(__m256 lo, __m256 hi) {
  return avx2::hsum8(_mm256_add_ps(lo, hi));
}

// e2m1 of the low 3 bits of each lane from the magnitude table, the sign from bit `sign_bit`.
template <int kSignShift>
inline __m256 e2m1x8(__m256 mag_table, __m256i idx, __m256i bits) {
  const __m256 mag = _mm256_permutevar8x32_ps(mag_table, idx);
  const __m256i sign =
      _mm256_and_si256(_mm256_slli_epi32(bits, kSignShift), _mm256_set1_epi32(INT32_MIN));
  return _mm256_or_ps(mag, _mm256_castsi256_ps(sign));
}

template <int NR>
void mxfp4_rows(const float* xd, const uint8_t* packed, const uint8_t* scales, int64_t n, int64_t k,
                int64_t r0, int64_t b, int64_t e, float* y) {
  const int64_t groups = k / kGroup;
  const float* e8m0 = e8m0_float_table();
  const __m256 mags = _mm256_setr_ps(0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f);
  for (int64_t i = b; i < e; ++i) {
    const uint8_t* row = packed + i * (k / 2);
    const uint8_t* sc = scales + i * groups;
    __m256 lo[NR], hi[NR];
    for (int r = 0; r < NR; ++r) lo[r] = hi[r] = _mm256_setzero_ps();
    for (int64_t g = 0; g < groups; ++g) {
      const __m128i raw = _mm_loadu_si128(reinterpret_cast<const __m128i*>(row + g * 16));
      const __m256i b0 = _mm256_cvtepu8_epi32(raw);
      const __m256i b1 = _mm256_cvtepu8_epi32(_mm_srli_si128(raw, 8));
      // Even elements: the low nibble (sign bit 3); odd: the high nibble (sign bit 7).
      const __m256 we0 = e2m1x8<28>(mags, b0, b0), we1 = e2m1x8<28>(mags, b1, b1);
      const __m256 wo0 = e2m1x8<24>(mags, _mm256_srli_epi32(b0, 4), b0);
      const __m256 wo1 = e2m1x8<24>(mags, _mm256_srli_epi32(b1, 4), b1);
      const __m256 s = _mm256_set1_ps(e8m0[sc[g]]);
      const float* xg = xd + r0 * k + g * kGroup;
#pragma GCC unroll 4
      for (int r = 0; r < NR; ++r) {
        const float* xr = xg + r * k;
        const __m256 d0 =
            _mm256_fmadd_ps(wo0, _mm256_loadu_ps(xr + 16), _mm256_mul_ps(we0, _mm256_loadu_ps(xr)));
        const __m256 d1 = _mm256_fmadd_ps(wo1, _mm256_loadu_ps(xr + 24),
                                          _mm256_mul_ps(we1, _mm256_loadu_ps(xr + 8)));
        lo[r] = _mm256_fmadd_ps(d0, s, lo[r]);
        hi[r] = _mm256_fmadd_ps(d1, s, hi[r]);
      }
    }
    for (int r = 0; r < NR; ++r) y[(r0 + r) * n + i] = sum16(lo[r], hi[r]);
  }
}

using RowsFn = void (*)(const float*, const uint8_t*, const uint8_t*, int64_t, int64_t, int64_t,
                        int64_t, int64_t, float*);
constexpr RowsFn kRows[5] = {nullptr, mxfp4_rows<1>, mxfp4_rows<2>, mxfp4_rows<3>, mxfp4_rows<4>};

// 8 e4m3 bytes as fp8_e4m3_to_f32 gives them (see dsv4_avx512.cpp).
inline __m256 e4m3x8(const uint8_t* p) {
  const __m256i b = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
  const __m256i mag = _mm256_and_si256(b, _mm256_set1_epi32(0x7f));
  const __m256i sign = _mm256_slli_epi32(_mm256_and_si256(b, _mm256_set1_epi32(0x80)), 24);
  const __m256 normal = _mm256_castsi256_ps(
      _mm256_add_epi32(_mm256_slli_epi32(mag, 20), _mm256_set1_epi32(120 << 23)));
  const __m256 sub = _mm256_mul_ps(_mm256_cvtepi32_ps(mag), _mm256_set1_ps(1.0f / 512.0f));
  const __m256 is_sub = _mm256_castsi256_ps(_mm256_cmpgt_epi32(_mm256_set1_epi32(8), mag));
  __m256 v = _mm256_blendv_ps(normal, sub, is_sub);
  const __m256 nan = _mm256_castsi256_ps(_mm256_cmpeq_epi32(mag, _mm256_set1_epi32(0x7f)));
  v = _mm256_blendv_ps(v, _mm256_set1_ps(std::numeric_limits<float>::quiet_NaN()), nan);
  return _mm256_or_ps(v, _mm256_castsi256_ps(sign));
}

void decode_index_key(const uint8_t* row, int64_t dim, float* out) {
  float rs;
  std::memcpy(&rs, row + dim, 4);
  const __m256 vs = _mm256_set1_ps(rs);
  int64_t i = 0;
  for (; i + 8 <= dim; i += 8) _mm256_storeu_ps(out + i, _mm256_mul_ps(e4m3x8(row + i), vs));
  for (; i < dim; ++i) out[i] = fp8_e4m3_to_f32(row[i]) * rs;
}

}  // namespace

void mxfp4_matmul_avx2(const float* x, const uint8_t* packed, const uint8_t* scales, int64_t m,
                       int64_t n, int64_t k, float* y, ThreadPool* pool) {
  std::vector<float> xd(static_cast<size_t>(m * k));
  mxfp4_deinterleave_x(x, m, k, xd.data());
  auto rows = [&](int64_t b, int64_t e) {
    for (int64_t r0 = 0; r0 < m; r0 += 4) {
      const int nr = static_cast<int>(std::min<int64_t>(4, m - r0));
      kRows[nr](xd.data(), packed, scales, n, k, r0, b, e, y);
    }
  };
  if (pool == nullptr || n < 2)
    rows(0, n);
  else
    pool->parallel_for(n, 1, rows);
}

// Heads in the lanes, 32 (four vectors) per pass and two keys; the per-key totals as two halves
// of the AVX-512 variant's 16 lanes (head h in lane h % 16).
void dsv4_indexer_scores_avx2(const float* q, const float* w, int heads, int64_t dim, float scale,
                              const uint8_t* const* rows, int64_t n, float* scores) {
  constexpr int kKeys = 2;
  const int hp = (heads + 31) / 32 * 32;
  thread_local std::vector<float> buf;
  buf.assign(static_cast<size_t>(dim * hp + hp + kKeys * dim), 0.0f);
  float* qt = buf.data();
  float* wp = qt + dim * hp;
  float* keys = wp + hp;
  for (int h = 0; h < heads; ++h) {
    wp[h] = w[h];
    for (int64_t e = 0; e < dim; ++e) qt[e * hp + h] = q[h * dim + e];
  }
  const __m256 zero = _mm256_setzero_ps();
  for (int64_t j0 = 0; j0 < n; j0 += kKeys) {
    for (int i = 0; i < kKeys; ++i)
      decode_index_key(rows[std::min<int64_t>(j0 + i, n - 1)], dim, keys + i * dim);
    __m256 tlo[kKeys], thi[kKeys];
    for (int i = 0; i < kKeys; ++i) tlo[i] = thi[i] = zero;
    for (int g = 0; g < hp; g += 32) {
      __m256 acc[kKeys][4];
      for (int i = 0; i < kKeys; ++i)
        for (int v = 0; v < 4; ++v) acc[i][v] = zero;
      const float* qg = qt + g;
      for (int64_t e = 0; e < dim; ++e) {
        const float* qe = qg + e * hp;
        const __m256 q0 = _mm256_loadu_ps(qe), q1 = _mm256_loadu_ps(qe + 8);
        const __m256 q2 = _mm256_loadu_ps(qe + 16), q3 = _mm256_loadu_ps(qe + 24);
#pragma GCC unroll 2
        for (int i = 0; i < kKeys; ++i) {
          const __m256 kb = _mm256_broadcast_ss(keys + i * dim + e);
          acc[i][0] = _mm256_fmadd_ps(q0, kb, acc[i][0]);
          acc[i][1] = _mm256_fmadd_ps(q1, kb, acc[i][1]);
          acc[i][2] = _mm256_fmadd_ps(q2, kb, acc[i][2]);
          acc[i][3] = _mm256_fmadd_ps(q3, kb, acc[i][3]);
        }
      }
      for (int v = 0; v < 4; ++v) {
        const __m256 wv = _mm256_loadu_ps(wp + g + 8 * v);
        for (int i = 0; i < kKeys; ++i) {
          __m256& t = (v % 2 == 0) ? tlo[i] : thi[i];
          t = _mm256_fmadd_ps(wv, _mm256_max_ps(acc[i][v], zero), t);
        }
      }
    }
    for (int i = 0; i < kKeys && j0 + i < n; ++i) scores[j0 + i] = sum16(tlo[i], thi[i]) * scale;
  }
}

// dsv4_attention_avx512's loops on 8-lane halves: logits in 2 x 2 (head, row) tiles, rows outer;
// outputs 32 values x 2 heads at a time.
void dsv4_attention_avx2(const float* q, int heads, int64_t dim, const float* kv, int64_t n,
                         const float* sinks, float scale, float* out) {
  constexpr int kH = 2, kR = 2;
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
      __m256 lo[kH][kR], hi[kH][kR];
      for (int a = 0; a < kH; ++a)
        for (int c = 0; c < kR; ++c) lo[a][c] = hi[a][c] = _mm256_setzero_ps();
      for (int64_t i = 0; i < dim; i += 16) {
        __m256 kl[kR], kh[kR];
        for (int c = 0; c < kR; ++c) {
          kl[c] = _mm256_loadu_ps(kr[c] + i);
          kh[c] = _mm256_loadu_ps(kr[c] + i + 8);
        }
        for (int a = 0; a < kH; ++a) {
          const __m256 ql = _mm256_loadu_ps(qh[a] + i), qhv = _mm256_loadu_ps(qh[a] + i + 8);
          for (int c = 0; c < kR; ++c) {
            lo[a][c] = _mm256_fmadd_ps(ql, kl[c], lo[a][c]);
            hi[a][c] = _mm256_fmadd_ps(qhv, kh[c], hi[a][c]);
          }
        }
      }
      for (int a = 0; a < nh; ++a)
        for (int c = 0; c < kR && j0 + c < n; ++c)
          buf[(h0 + a) * n16 + j0 + c] = sum16(lo[a][c], hi[a][c]) * scale;
    }
  }
  for (int h = 0; h < heads; ++h) {
    float* lg = buf.data() + h * n16;
    float mx = sinks[h];
    for (int64_t j = 0; j < n; ++j) mx = lg[j] > mx ? lg[j] : mx;
    for (int64_t j = n; j < n16; ++j) lg[j] = -INFINITY;
    const __m256 vmx = _mm256_set1_ps(mx);
    __m256 slo = _mm256_setzero_ps(), shi = _mm256_setzero_ps();
    for (int64_t j = 0; j < n16; j += 16) {
      const __m256 pl = avx2::exp8(_mm256_sub_ps(_mm256_loadu_ps(lg + j), vmx));
      const __m256 ph = avx2::exp8(_mm256_sub_ps(_mm256_loadu_ps(lg + j + 8), vmx));
      _mm256_storeu_ps(lg + j, pl);
      _mm256_storeu_ps(lg + j + 8, ph);
      slo = _mm256_add_ps(slo, pl);
      shi = _mm256_add_ps(shi, ph);
    }
    dens[h] = std::exp(sinks[h] - mx) + sum16(slo, shi);
  }
  for (int64_t i0 = 0; i0 < dim; i0 += 32) {
    const int nv = static_cast<int>(std::min<int64_t>(4, (dim - i0) / 8));
    for (int h0 = 0; h0 < heads; h0 += kH) {
      const int nh = std::min(kH, heads - h0);
      const float* pr[kH];
      for (int a = 0; a < kH; ++a) pr[a] = buf.data() + (h0 + std::min(a, nh - 1)) * n16;
      __m256 acc[kH][4];
      for (int a = 0; a < kH; ++a)
        for (int v = 0; v < 4; ++v) acc[a][v] = _mm256_setzero_ps();
      if (nv == 4) {
        for (int64_t j = 0; j < n; ++j) {
          const float* r = kv + j * dim + i0;
          const __m256 v0 = _mm256_loadu_ps(r), v1 = _mm256_loadu_ps(r + 8);
          const __m256 v2 = _mm256_loadu_ps(r + 16), v3 = _mm256_loadu_ps(r + 24);
          for (int a = 0; a < kH; ++a) {
            const __m256 p = _mm256_broadcast_ss(pr[a] + j);
            acc[a][0] = _mm256_fmadd_ps(p, v0, acc[a][0]);
            acc[a][1] = _mm256_fmadd_ps(p, v1, acc[a][1]);
            acc[a][2] = _mm256_fmadd_ps(p, v2, acc[a][2]);
            acc[a][3] = _mm256_fmadd_ps(p, v3, acc[a][3]);
          }
        }
      } else {
        for (int64_t j = 0; j < n; ++j) {
          const float* r = kv + j * dim + i0;
          for (int a = 0; a < kH; ++a) {
            const __m256 p = _mm256_broadcast_ss(pr[a] + j);
            for (int v = 0; v < nv; ++v)
              acc[a][v] = _mm256_fmadd_ps(p, _mm256_loadu_ps(r + 8 * v), acc[a][v]);
          }
        }
      }
      for (int a = 0; a < nh; ++a) {
        const __m256 den = _mm256_set1_ps(dens[h0 + a]);
        for (int v = 0; v < nv; ++v)
          _mm256_storeu_ps(out + (h0 + a) * dim + i0 + 8 * v, _mm256_div_ps(acc[a][v], den));
      }
    }
  }
}

void dsv4_unpack_fp8_row_avx2(const uint8_t* data, const uint8_t* scales, int64_t nope,
                              int64_t rope, float* out) {
  const float* e8m0 = e8m0_float_table();
  for (int64_t g = 0; g < nope / 64; ++g) {
    const __m256 s = _mm256_set1_ps(e8m0[scales[g]]);
    for (int i = 0; i < 64; i += 8)
      _mm256_storeu_ps(out + g * 64 + i, _mm256_mul_ps(e4m3x8(data + g * 64 + i), s));
  }
  int64_t i = 0;
  for (; i + 8 <= rope; i += 8)
    _mm256_storeu_ps(out + nope + i, avx2::load_bf16x8(data + nope + 2 * i));
  for (; i < rope; ++i) {
    uint16_t b;
    std::memcpy(&b, data + nope + 2 * i, 2);
    out[nope + i] = bf16_to_f32(b);
  }
}

}  // namespace strata::kernels
