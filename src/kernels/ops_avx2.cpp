// AVX2/FMA variants of the non-matmul kernels, and the variant's op table.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "core/check.h"
#include "kernels/dsv4.h"
#include "kernels/kernel_impl.h"
#include "kernels/mla_impl.h"
#include "kernels/simd_avx2.h"

namespace strata::kernels::avx2 {

void matmul(const float* x, int64_t m, int64_t ldx, const PackedWeight& w, float* y, int64_t ldy,
            ThreadPool& pool);

namespace {

// Sum of squares of x[0..n) in a fixed order (4 vector accumulators by index mod 32, then a
// scalar tail), so a row's norm never depends on anything but the row.
float sum_squares(const float* x, int64_t n) {
  __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
  int64_t j = 0;
  for (; j + 32 <= n; j += 32) {
    __m256 v0 = _mm256_loadu_ps(x + j), v1 = _mm256_loadu_ps(x + j + 8);
    __m256 v2 = _mm256_loadu_ps(x + j + 16), v3 = _mm256_loadu_ps(x + j + 24);
    a0 = _mm256_fmadd_ps(v0, v0, a0);
    a1 = _mm256_fmadd_ps(v1, v1, a1);
    a2 = _mm256_fmadd_ps(v2, v2, a2);
    a3 = _mm256_fmadd_ps(v3, v3, a3);
  }
  for (; j + 8 <= n; j += 8) {
    __m256 v = _mm256_loadu_ps(x + j);
    a0 = _mm256_fmadd_ps(v, v, a0);
  }
  float s = hsum8(_mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)));
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
      const __m256 vinv = _mm256_set1_ps(inv);
      int64_t j = 0;
      for (; j + 8 <= n; j += 8)
        _mm256_storeu_ps(yr + j, _mm256_mul_ps(_mm256_mul_ps(_mm256_loadu_ps(xr + j), vinv),
                                               _mm256_loadu_ps(weight + j)));
      for (; j < n; ++j) yr[j] = xr[j] * inv * weight[j];
    }
  });
}

void silu_mul(const float* gu, int64_t ldgu, int64_t m, int64_t f_dim, float* out, int64_t ldo,
              ThreadPool& pool) {
  const __m256 one = _mm256_set1_ps(1.0f);
  pool.parallel_for(m, 1, [&](int64_t r0, int64_t r1) {
    for (int64_t i = r0; i < r1; ++i) {
      const float* g = gu + i * ldgu;
      const float* u = g + f_dim;
      float* o = out + i * ldo;
      int64_t j = 0;
      for (; j + 8 <= f_dim; j += 8) {
        __m256 gv = _mm256_loadu_ps(g + j);
        __m256 e = exp8(_mm256_sub_ps(_mm256_setzero_ps(), gv));
        __m256 silu = _mm256_div_ps(gv, _mm256_add_ps(one, e));
        _mm256_storeu_ps(o + j, _mm256_mul_ps(silu, _mm256_loadu_ps(u + j)));
      }
      for (; j < f_dim; ++j) o[j] = g[j] / (1.0f + std::exp(-g[j])) * u[j];
    }
  });
}

void rope(float* x, int64_t m, int64_t ld, int num_heads, int head_dim, int rot_dim,
          const float* cos, const float* sin, bool neox) {
  const int half = rot_dim / 2;
  for (int64_t i = 0; i < m; ++i) {
    const float* c = cos + i * half;
    const float* s = sin + i * half;
    for (int h = 0; h < num_heads; ++h) {
      float* v = x + i * ld + static_cast<int64_t>(h) * head_dim;
      int j = 0;
      if (neox) {
        for (; j + 8 <= half; j += 8) {
          __m256 x0 = _mm256_loadu_ps(v + j), x1 = _mm256_loadu_ps(v + j + half);
          __m256 cv = _mm256_loadu_ps(c + j), sv = _mm256_loadu_ps(s + j);
          _mm256_storeu_ps(v + j, _mm256_fmsub_ps(x0, cv, _mm256_mul_ps(x1, sv)));
          _mm256_storeu_ps(v + j + half, _mm256_fmadd_ps(x1, cv, _mm256_mul_ps(x0, sv)));
        }
      }
      for (; j < half; ++j) {
        int a = neox ? j : 2 * j, b = neox ? j + half : 2 * j + 1;
        float x0 = v[a], x1 = v[b];
        v[a] = std::fma(x0, c[j], -(x1 * s[j]));
        v[b] = std::fma(x1, c[j], x0 * s[j]);
      }
    }
  }
}

void kv_write(const float* k, int64_t ldk, const float* v, int64_t ldv, int64_t m,
              const int64_t* slots, const PagedKvLayer& kv) {
  write_kv_rows(k, ldk, v, ldv, m, slots, kv);
}

// ---- attention -----------------------------------------------------------------------------
//
// Work item: a tile of up to kTileQ consecutive query rows of one sequence and one kv head (or,
// for a decode sequence, one query row and several adjacent kv heads). The tile shares every key
// and value row it converts (bf16/f16/fp8 -> f32) among its queries and the query heads of the
// GQA group, and walks the block table block by block (no division per key).
// Each query's arithmetic is the same whatever tile it lands in: its score for key j is one FMA
// chain over the head dims reduced in a fixed order, its softmax runs over its own keys only, and
// its output accumulates p_j * v_j key by key in order. So outputs stay bit-identical whatever
// the batch, the chunking of a prompt, the block size or the thread count.

// Query rows per tile (fewer when scratch is short). 16 rather than 8: a tile converts each
// key/value row once for all its queries, and at 2048 tokens the conversion was 19% of the time;
// prefill attention measured 15-20% faster.
constexpr int kTileQ = kAttentionTileRows;
constexpr int64_t kKeyChunk = 32;  // key/value rows converted at a time (a multiple of 8)

// Per-thread scratch layout: acc [kTileQ * group][hd], rows [(kKeyChunk + 8) * hd], then scores.
int64_t acc_floats(int group, int64_t hd) {
  return kTileQ * group * hd;
}
int64_t rows_floats(int64_t hd) {
  return (kKeyChunk + 8) * hd;
}

// Row indices (PagedKvLayer::row_index) of keys [j0, j0 + n) of a sequence for kv head g,
// walking its block table: the row of a key is base + row * head_dim elements.
void rows_of(const PagedKvLayer& kv, const int32_t* table, int64_t g, int64_t j0, int64_t n,
             int64_t* out) {
  const int64_t bs = kv.block_size;
  int64_t b = j0 / bs, i = j0 % bs;
  int64_t first = (static_cast<int64_t>(table[b]) * kv.num_kv_heads + g) * bs;
  for (int64_t r = 0; r < n; ++r) {
    out[r] = first + i;
    if (++i == bs && r + 1 < n) {
      i = 0;
      first = (static_cast<int64_t>(table[++b]) * kv.num_kv_heads + g) * bs;
    }
  }
}

// Prefetches the rows of keys [j0, j0 + kKeyChunk) (clipped to ctx), so that their reads overlap
// the work on the chunk before them. (Fetching further ahead in bigger bursts measured slower.)
// Value rows of tiles whose values take at most kEarlyValueBytes are fetched during the score
// pass instead.
constexpr int64_t kEarlyValueBytes = 96 * 1024;
void prefetch_chunk(const PagedKvLayer& kv, const std::byte* base, const int32_t* table, int64_t g,
                    int64_t j0, int64_t ctx) {
  if (j0 >= ctx) return;
  const int64_t n = std::min(kKeyChunk, ctx - j0);
  int64_t rix[kKeyChunk];
  rows_of(kv, table, g, j0, n, rix);
  const int64_t row_bytes = kv.head_dim * kv.elem_bytes();
  for (int64_t r = 0; r < n; ++r) {
    const char* p = reinterpret_cast<const char*>(base + rix[r] * row_bytes);
    for (int64_t off = 0; off < row_bytes; off += 64) _mm_prefetch(p + off, _MM_HINT_T0);
  }
}

// The factor a bf16/f16/fp8 cache row's values are multiplied by: the layer scale, for fp8 times
// the row's scale and 256 (see load_kv8).
template <DType D>
inline float kv_factor(float scale, const float* row_scales, int64_t row) {
  if constexpr (D != DType::kF8E4M3) return scale;
  float f = scale;
  if (row_scales != nullptr) f *= row_scales[row];
  return f * 256.0f;
}

// Values e..e+7 of a bf16/f16/fp8 cache row times `factor`, as f32: the same values
// read_kv_row() gives. fp8: the e4m3 byte, sign-extended to 16 bits, shifted left by 7 with bit
// 14 cleared, is the f16 of value / 256 (f16's exponent bias is 8 more than e4m3's); x (f * 256)
// rounds once, as value * f does. (Caches hold no NaN bytes: kv_write saturates to 448.)
template <DType D>
inline __m256 load_kv8(const std::byte* row, int64_t e, __m256 factor) {
  if constexpr (D == DType::kBF16) {
    return _mm256_mul_ps(load_bf16x8(row + e * 2), factor);
  } else if constexpr (D == DType::kF16) {
    return _mm256_mul_ps(load_f16x8(row + e * 2), factor);
  } else {
    static_assert(D == DType::kF8E4M3);
    const __m128i h = _mm_cvtepi8_epi16(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(row + e)));
    return _mm256_mul_ps(
        _mm256_cvtph_ps(_mm_and_si128(_mm_slli_epi16(h, 7), _mm_set1_epi16(-16385))), factor);
  }
}

template <DType D>
void convert_rows(const PagedKvLayer& kv, const std::byte* base, const float* row_scales,
                  const int64_t* rows, int64_t n, float scale, float* buf, const float** out) {
  const int64_t hd = kv.head_dim, row_bytes = hd * kv.elem_bytes();
  for (int64_t r = 0; r < n; ++r) {
    float* dst = buf + r * hd;
    out[r] = dst;
    const std::byte* p = base + rows[r] * row_bytes;
    const __m256 f = _mm256_set1_ps(kv_factor<D>(scale, row_scales, rows[r]));
    for (int64_t e = 0; e < hd; e += 8) _mm256_storeu_ps(dst + e, load_kv8<D>(p, e, f));
  }
}

// Rows `rows[0..n)` of `base` as f32 pointers: into the cache for an unscaled f32 cache, else
// converted into buf (n rows of head_dim floats) exactly as read_kv_row() converts them.
void rows_f32(const PagedKvLayer& kv, const std::byte* base, const float* row_scales,
              const int64_t* rows, int64_t n, float scale, float* buf, const float** out) {
  const int64_t hd = kv.head_dim;
  const int64_t row_bytes = hd * kv.elem_bytes();
  if (kv.dtype == DType::kF32 && scale == 1.0f) {
    for (int64_t r = 0; r < n; ++r)
      out[r] = reinterpret_cast<const float*>(base + rows[r] * row_bytes);
    return;
  }
  if (hd % 8 == 0) {
    switch (kv.dtype) {
      case DType::kBF16:
        return convert_rows<DType::kBF16>(kv, base, row_scales, rows, n, scale, buf, out);
      case DType::kF16:
        return convert_rows<DType::kF16>(kv, base, row_scales, rows, n, scale, buf, out);
      case DType::kF8E4M3:
        return convert_rows<DType::kF8E4M3>(kv, base, row_scales, rows, n, scale, buf, out);
      default:
        break;
    }
  }
  // Other shapes (head_dim not a multiple of 8, a scaled f32 cache): the scalar reader, from the
  // slot and head of each row (row = (block * num_kv_heads + head) * block_size + i).
  const int64_t bs = kv.block_size;
  for (int64_t r = 0; r < n; ++r) {
    const int64_t block = rows[r] / bs / kv.num_kv_heads, head = rows[r] / bs % kv.num_kv_heads;
    out[r] = buf + r * hd;
    read_kv_row(kv, base, block * bs + rows[r] % bs, head, scale, buf + r * hd);
  }
}

// Lane r of the result = sum of the 8 lanes of a[r], in a fixed order.
inline __m256 reduce8x8(const __m256* a) {
  __m256 h01 = _mm256_hadd_ps(a[0], a[1]), h23 = _mm256_hadd_ps(a[2], a[3]);
  __m256 h45 = _mm256_hadd_ps(a[4], a[5]), h67 = _mm256_hadd_ps(a[6], a[7]);
  __m256 h0123 = _mm256_hadd_ps(h01, h23), h4567 = _mm256_hadd_ps(h45, h67);
  return _mm256_add_ps(_mm256_permute2f128_ps(h0123, h4567, 0x20),
                       _mm256_permute2f128_ps(h0123, h4567, 0x31));
}

// Key/value rows as the dot products and the weighted sum read them. F32Rows: f32 rows (in an
// f32 cache, or converted into scratch by rows_f32, shared by a tile's queries). CacheRows<D>:
// bf16/f16/fp8 rows of the cache converted in registers exactly as rows_f32 converts them, for
// tiles whose rows are used once (decode), where a round trip through scratch costs more than
// the arithmetic. Both give the same f32 values, so the results are bit-identical.
struct F32Rows {
  static constexpr bool kTail = true;  // head_dim % 8 != 0 allowed
  const float* const* rows;
  __m256 load(int64_t r, int64_t e) const { return _mm256_loadu_ps(rows[r] + e); }
  float at(int64_t r, int64_t e) const { return rows[r][e]; }
};

template <DType D, bool kScaled = true>
struct CacheRows {
  static constexpr bool kTail = false;  // only for head_dim % 8 == 0
  const std::byte* const* rows;
  const float* factor;  // per row: bf16/f16: the layer scale; fp8: scale * row scale * 256
  __m256 load(int64_t r, int64_t e) const {
    if constexpr (!kScaled) {
      // bf16/f16 with a layer scale of 1 (the usual case): x * 1 is x, so the multiply is skipped.
      static_assert(D != DType::kF8E4M3);
      return D == DType::kBF16 ? load_bf16x8(rows[r] + e * 2) : load_f16x8(rows[r] + e * 2);
    }
    return load_kv8<D>(rows[r], e, _mm256_set1_ps(factor[r]));
  }
  float at(int64_t, int64_t) const { return 0.0f; }  // never called (kTail is false)
};

// Dot products of q (head_dim floats) with key rows r0..r0+7; lane r = q . k[r0 + r]: one FMA
// chain per key over the head dims in order, a fixed reduction, then the scalar tail dims.
template <class Rows>
inline __m256 dot8(const float* q, const Rows& k, int64_t r0, int64_t hd) {
  __m256 acc[8];
  for (int r = 0; r < 8; ++r) acc[r] = _mm256_setzero_ps();
  int64_t e = 0;
  for (; e + 8 <= hd; e += 8) {
    __m256 qv = _mm256_loadu_ps(q + e);
#pragma GCC unroll 8
    for (int r = 0; r < 8; ++r) acc[r] = _mm256_fmadd_ps(qv, k.load(r0 + r, e), acc[r]);
  }
  __m256 s = reduce8x8(acc);
  if constexpr (Rows::kTail) {
    if (e == hd) return s;
    alignas(32) float out[8];
    _mm256_store_ps(out, s);
    for (int r = 0; r < 8; ++r)
      for (int64_t t = e; t < hd; ++t) out[r] += q[t] * k.at(r0 + r, t);
    return _mm256_load_ps(out);
  }
  return s;
}

// acc[0 .. 8*NR) += p[j] * v[j][e0 ..] for j in [0, n), key by key, in registers.
template <int NR, class Rows>
inline void accumulate_values(float* acc, const float* p, const Rows& v, int64_t n, int64_t e0) {
  __m256 a[NR];
  for (int r = 0; r < NR; ++r) a[r] = _mm256_loadu_ps(acc + 8 * r);
  for (int64_t j = 0; j < n; ++j) {
    const __m256 pj = _mm256_set1_ps(p[j]);
#pragma GCC unroll 8
    for (int r = 0; r < NR; ++r) a[r] = _mm256_fmadd_ps(pj, v.load(j, e0 + 8 * r), a[r]);
  }
  for (int r = 0; r < NR; ++r) _mm256_storeu_ps(acc + 8 * r, a[r]);
}

template <class Rows>
void accumulate_row(float* acc, const float* p, const Rows& v, int64_t n, int64_t hd) {
  int64_t e = 0;
  for (; e + 64 <= hd; e += 64) accumulate_values<8>(acc + e, p, v, n, e);
  switch ((hd - e) / 8) {
    case 7:
      accumulate_values<7>(acc + e, p, v, n, e);
      break;
    case 6:
      accumulate_values<6>(acc + e, p, v, n, e);
      break;
    case 5:
      accumulate_values<5>(acc + e, p, v, n, e);
      break;
    case 4:
      accumulate_values<4>(acc + e, p, v, n, e);
      break;
    case 3:
      accumulate_values<3>(acc + e, p, v, n, e);
      break;
    case 2:
      accumulate_values<2>(acc + e, p, v, n, e);
      break;
    case 1:
      accumulate_values<1>(acc + e, p, v, n, e);
      break;
    default:
      break;
  }
  e += (hd - e) / 8 * 8;
  if constexpr (Rows::kTail) {
    for (; e < hd; ++e)
      for (int64_t j = 0; j < n; ++j) acc[e] = std::fma(p[j], v.at(j, e), acc[e]);
  }
}

// Query rows [t0, t0 + nq) of sequence s, all query heads of kv heads [g0, g0 + ng) (nq * ng <=
// kTileQ; several kv heads only for decode tiles, nq == 1). D = kF32: rows through rows_f32
// (F32Rows); otherwise the cache's dtype, converted in registers (CacheRows<D>). Each kv head's
// arithmetic is the same whichever heads share its tile: the heads only take turns chunk by
// chunk, so that a decode tile reads the cache's adjacent heads of a block together (one longer
// run of memory instead of ng short ones).
template <DType D, bool kScaled = true>
void attend_tile(const AttentionArgs& a, int s, int64_t t0, int nq, int g0, int ng,
                 float* scratch) {
  const PagedKvLayer& kv = *a.kv;
  const int64_t hd = kv.head_dim;
  const int group = a.num_heads / static_cast<int>(kv.num_kv_heads);
  const int64_t q1 = a.query_start[s + 1];
  const int32_t* table = a.block_tables + s * a.max_blocks_per_seq;
  // Query i of the tile sees keys [0, ctx[i]).
  int64_t ctx[kTileQ];
  for (int i = 0; i < nq; ++i) ctx[i] = a.seq_lens[s] - (q1 - (t0 + i)) + 1;
  const int64_t ctx_max = ctx[nq - 1];
  const int64_t stride = (ctx_max + 7) / 8 * 8;  // per-head score row, whole vectors
  float* acc = scratch;                          // [ng * nq * group][hd]
  float* rows = acc + acc_floats(group, hd);     // converted rows
  float* scores = rows + rows_floats(hd);        // [ng * nq * group][stride]
  // Slot of (kv head gi of the tile, query i, query head h of the group): its acc and score row.
  auto slot = [&](int gi, int i, int h) { return (gi * nq + i) * group + h; };
  int64_t rix[kKeyChunk];
  const float* rp[kKeyChunk];
  const std::byte* raw[kKeyChunk];
  float factor[kKeyChunk];
  const int64_t row_bytes = hd * kv.elem_bytes();
  // The rows of keys [j0, j0 + n) of kv head g in `base`, padded to whole groups of 8 with the
  // last row.
  auto chunk_rows = [&](const std::byte* base, const float* row_scales, float scale, int g,
                        int64_t j0, int64_t n) {
    rows_of(kv, table, g, j0, n, rix);
    const int64_t n8 = (n + 7) / 8 * 8;
    if constexpr (D == DType::kF32) {
      rows_f32(kv, base, row_scales, rix, n, scale, rows, rp);
      for (int64_t r = n; r < n8; ++r) rp[r] = rp[n - 1];
      return F32Rows{rp};
    } else {
      for (int64_t r = 0; r < n; ++r) {
        raw[r] = base + rix[r] * row_bytes;
        factor[r] = kv_factor<D>(scale, row_scales, rix[r]);
      }
      for (int64_t r = n; r < n8; ++r) {
        raw[r] = raw[n - 1];
        factor[r] = factor[n - 1];
      }
      return CacheRows<D, kScaled>{raw, factor};
    }
  };
  const __m256 vscale = _mm256_set1_ps(a.scale);
  auto qrow = [&](int i, int g, int h) {
    return a.q + (t0 + i) * a.ldq + (static_cast<int64_t>(g) * group + h) * hd;
  };
  // When the tile's value rows fit in L2 comfortably (decode over short contexts), they are
  // fetched during the score pass so their reads overlap the dot products; longer sequences fetch
  // them a chunk ahead of the weighted sum instead.
  const bool values_early = ng * ctx_max * row_bytes <= kEarlyValueBytes;
  // Scores, 8 keys at a time (a query's lanes past its last key are masked below).
  for (int gi = 0; gi < ng; ++gi) prefetch_chunk(kv, kv.k, table, g0 + gi, 0, ctx_max);
  int64_t ahead[kKeyChunk];
  for (int64_t j0 = 0; j0 < ctx_max; j0 += kKeyChunk) {
    const int64_t n = std::min(kKeyChunk, ctx_max - j0);
    const int64_t na = std::max<int64_t>(0, std::min(kKeyChunk, ctx_max - j0 - kKeyChunk));
    for (int gi = 0; gi < ng; ++gi) {
      const int g = g0 + gi;
      if (na > 0) rows_of(kv, table, g, j0 + kKeyChunk, na, ahead);
      const auto keys = chunk_rows(kv.k, kv.k_row_scale, kv.k_scale, g, j0, n);
      for (int64_t jg = 0; jg < n; jg += 8) {
        // The next chunk's keys, 8 rows per 8 keys scored (and this chunk's values when they are
        // fetched early): a steady trickle of prefetches rather than bursts.
        for (int64_t r = jg; r < std::min(jg + 8, na); ++r)
          for (int64_t off = 0; off < row_bytes; off += 64)
            _mm_prefetch(reinterpret_cast<const char*>(kv.k + ahead[r] * row_bytes) + off,
                         _MM_HINT_T0);
        if (values_early)
          for (int64_t r = jg; r < std::min(jg + 8, n); ++r)
            for (int64_t off = 0; off < row_bytes; off += 64)
              _mm_prefetch(reinterpret_cast<const char*>(kv.v + rix[r] * row_bytes) + off,
                           _MM_HINT_T0);
        for (int i = 0; i < nq; ++i) {
          if (j0 + jg >= ctx[i]) continue;
          for (int h = 0; h < group; ++h)
            _mm256_storeu_ps(scores + slot(gi, i, h) * stride + j0 + jg,
                             _mm256_mul_ps(dot8(qrow(i, g, h), keys, jg, hd), vscale));
        }
      }
    }
  }
  // Softmax numerators and sums (lane = key index mod 8, then a fixed reduction).
  float sums[kTileQ * 64];
  STRATA_CHECK(group <= 64) << "GQA group of " << group;
  for (int gi = 0; gi < ng; ++gi) {
    for (int i = 0; i < nq; ++i) {
      const int64_t c = ctx[i], c8 = (c + 7) / 8 * 8;
      for (int h = 0; h < group; ++h) {
        sums[slot(gi, i, h)] = softmax_numerators(scores + slot(gi, i, h) * stride, c, c8);
        std::memset(acc + slot(gi, i, h) * hd, 0, hd * sizeof(float));
      }
    }
  }
  // Weighted values, key by key in order.
  if (!values_early)
    for (int gi = 0; gi < ng; ++gi) prefetch_chunk(kv, kv.v, table, g0 + gi, 0, ctx_max);
  for (int64_t j0 = 0; j0 < ctx_max; j0 += kKeyChunk) {
    const int64_t n = std::min(kKeyChunk, ctx_max - j0);
    for (int gi = 0; gi < ng; ++gi) {
      const int g = g0 + gi;
      if (!values_early) prefetch_chunk(kv, kv.v, table, g, j0 + kKeyChunk, ctx_max);
      const auto values = chunk_rows(kv.v, kv.v_row_scale, kv.v_scale, g, j0, n);
      for (int i = 0; i < nq; ++i) {
        const int64_t ni = std::min(n, ctx[i] - j0);
        if (ni <= 0) continue;
        for (int h = 0; h < group; ++h)
          accumulate_row(acc + slot(gi, i, h) * hd, scores + slot(gi, i, h) * stride + j0, values,
                         ni, hd);
      }
    }
  }
  for (int gi = 0; gi < ng; ++gi) {
    for (int i = 0; i < nq; ++i) {
      for (int h = 0; h < group; ++h) {
        float* o = a.out + (t0 + i) * a.ldo + (static_cast<int64_t>(g0 + gi) * group + h) * hd;
        const float inv = 1.0f / sums[slot(gi, i, h)];
        const float* ac = acc + slot(gi, i, h) * hd;
        for (int64_t e = 0; e < hd; ++e) o[e] = ac[e] * inv;
      }
    }
  }
}

void attention_impl(const AttentionArgs& a, ThreadPool& pool, WideTileFn wide) {
  const PagedKvLayer& kv = *a.kv;
  const int nkv = static_cast<int>(kv.num_kv_heads);
  const int group = a.num_heads / nkv;
  const int64_t score_floats =
      a.scratch_floats_per_thread - acc_floats(group, kv.head_dim) - rows_floats(kv.head_dim);
  // Tiles per sequence: kTileQ query rows, fewer when the scores of a whole tile over the
  // sequence's length would not fit in the scratch. A decode sequence (one query row) takes
  // several kv heads per tile instead, as many as leave about two tiles per thread in all.
  int64_t decode_heads = 0;
  for (int s = 0; s < a.num_seqs; ++s)
    if (a.query_start[s + 1] - a.query_start[s] == 1) decode_heads += nkv;
  const int64_t heads_per_decode_tile =
      std::max<int64_t>(1, decode_heads / (2 * static_cast<int64_t>(pool.size())));
  std::vector<int64_t> first_item(a.num_seqs + 1, 0);
  std::vector<int> tile_rows(a.num_seqs), tile_heads(a.num_seqs);
  for (int s = 0; s < a.num_seqs; ++s) {
    const int64_t row = group * ((int64_t{a.seq_lens[s]} + 7) / 8 * 8);
    const int64_t fit = row > 0 ? score_floats / row : kTileQ;
    STRATA_CHECK(fit >= 1) << "attention scratch too small for a sequence of " << a.seq_lens[s];
    const int64_t qn = a.query_start[s + 1] - a.query_start[s];
    tile_rows[s] = static_cast<int>(std::min<int64_t>(kTileQ, fit));
    tile_heads[s] = qn == 1 ? static_cast<int>(std::min<int64_t>(
                                  {heads_per_decode_tile, int64_t{tile_rows[s]}, int64_t{nkv}}))
                            : 1;
    if (qn == 1) tile_rows[s] = 1;
    const int64_t head_groups = (nkv + tile_heads[s] - 1) / tile_heads[s];
    first_item[s + 1] = first_item[s] + (qn + tile_rows[s] - 1) / tile_rows[s] * head_groups;
  }
  const int64_t items = first_item[a.num_seqs];
  pool.parallel_for(items, 1, [&](int64_t i0, int64_t i1) {
    float* scratch = a.scratch + ThreadPool::current_thread_index() * a.scratch_floats_per_thread;
    for (int64_t idx = i0; idx < i1; ++idx) {
      // Last tiles first: within a prompt later tiles attend to more keys, so the pool's
      // chunks go from the most to the least work and the threads finish together.
      const int64_t item = items - 1 - idx;
      const int s = static_cast<int>(std::upper_bound(first_item.begin(), first_item.end(), item) -
                                     first_item.begin() - 1);
      const int64_t head_groups = (nkv + tile_heads[s] - 1) / tile_heads[s];
      const int64_t local = item - first_item[s];
      const int64_t t0 = a.query_start[s] + local / head_groups * tile_rows[s];
      const int nq = static_cast<int>(std::min<int64_t>(tile_rows[s], a.query_start[s + 1] - t0));
      const int g0 = static_cast<int>(local % head_groups) * tile_heads[s];
      const int ng = std::min(tile_heads[s], nkv - g0);
      // A row used by at most 2 query heads (decode, small GQA groups) is converted in
      // registers; bigger tiles share one conversion through scratch.
      const bool direct = nq * group <= 2 && kv.head_dim % 8 == 0;
      const bool unit = kv.k_scale == 1.0f && kv.v_scale == 1.0f;
      if (wide != nullptr && wide(a, s, t0, nq, g0, ng, scratch, acc_floats(group, kv.head_dim),
                                  rows_floats(kv.head_dim), score_floats)) {
        continue;
      }
      if (direct && kv.dtype == DType::kBF16) {
        if (unit)
          attend_tile<DType::kBF16, false>(a, s, t0, nq, g0, ng, scratch);
        else
          attend_tile<DType::kBF16>(a, s, t0, nq, g0, ng, scratch);
      } else if (direct && kv.dtype == DType::kF16) {
        if (unit)
          attend_tile<DType::kF16, false>(a, s, t0, nq, g0, ng, scratch);
        else
          attend_tile<DType::kF16>(a, s, t0, nq, g0, ng, scratch);
      } else if (direct && kv.dtype == DType::kF8E4M3) {
        attend_tile<DType::kF8E4M3>(a, s, t0, nq, g0, ng, scratch);
      } else {
        attend_tile<DType::kF32>(a, s, t0, nq, g0, ng, scratch);
      }
    }
  });
}

void attention(const AttentionArgs& a, ThreadPool& pool) {
  attention_impl(a, pool, nullptr);
}

}  // namespace

void attention_with(const AttentionArgs& a, ThreadPool& pool, WideTileFn wide) {
  attention_impl(a, pool, wide);
}

void kv_rows_of(const PagedKvLayer& kv, const int32_t* table, int64_t g, int64_t j0, int64_t n,
                int64_t* out) {
  rows_of(kv, table, g, j0, n, out);
}

void kv_rows_f32(const PagedKvLayer& kv, const std::byte* base, const float* row_scales,
                 const int64_t* rows, int64_t n, float scale, float* buf, const float** out) {
  rows_f32(kv, base, row_scales, rows, n, scale, buf, out);
}

const KernelOps kOps = {"avx2",
                        matmul,
                        rms_norm,
                        silu_mul,
                        rope,
                        kv_write,
                        attention,
                        mla_attention_avx2,
                        dsa_select_avx2,
                        mla_sparse_attention_avx2,
                        mxfp4_matmul_avx2,
                        dsv4_indexer_scores_avx2,
                        dsv4_attention_avx2,
                        dsv4_unpack_fp8_row_avx2};

}  // namespace strata::kernels::avx2

namespace strata::kernels::avx2 {

// Streams p[0..n) (n a multiple of 32) through four vector accumulators.
float sum_floats(const float* p, int64_t n) {
  __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
  for (int64_t i = 0; i + 32 <= n; i += 32) {
    a0 = _mm256_add_ps(a0, _mm256_load_ps(p + i));
    a1 = _mm256_add_ps(a1, _mm256_load_ps(p + i + 8));
    a2 = _mm256_add_ps(a2, _mm256_load_ps(p + i + 16));
    a3 = _mm256_add_ps(a3, _mm256_load_ps(p + i + 24));
  }
  return hsum8(_mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)));
}

}  // namespace strata::kernels::avx2

namespace strata::kernels::avx2 {

// Twelve independent FMA chains with distinct values (so no two can be merged), `iterations`
// steps each. Returns the FLOPs performed.
double fma_chains(int64_t iterations, const float* seeds) {
  __m256 a[12];
  for (int i = 0; i < 12; ++i) a[i] = _mm256_loadu_ps(seeds + 8 * i);
  const __m256 m = _mm256_set1_ps(0.9999f), c = _mm256_set1_ps(1e-4f);  // converges, no overflow
  for (int64_t it = 0; it < iterations; ++it) {
#pragma GCC unroll 12
    for (int i = 0; i < 12; ++i) a[i] = _mm256_fmadd_ps(a[i], m, c);
  }
  __m256 s = a[0];
  for (int i = 1; i < 12; ++i) s = _mm256_add_ps(s, a[i]);
  volatile float sink = hsum8(s);
  (void)sink;
  return static_cast<double>(iterations) * 12 * 16;
}

}  // namespace strata::kernels::avx2
