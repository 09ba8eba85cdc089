// AVX-512 attention for prefill tiles (several query rows of one kv head): the tile's query
// slots (query row i, query head h of the kv head's group) sit in the lanes of 512-bit vectors,
// so every step is a plain vector operation with no horizontal reductions or transposes:
//   scores:  s[j][slot] = (sum over e, in order, of k[j][e] * q[slot][e]) * scale — one FMA chain
//            per slot and key from zero (q transposed once per tile, k broadcast);
//   softmax: per lane over the keys it sees (j < its context), max, exp(s - max), the sum in key
//            order (keys past a lane's context are masked to 0);
//   values:  out[e][slot] += p[j][slot] * v[j][e], key by key in order.
// A slot's arithmetic depends only on its own query, keys and values, never on the other slots
// of the tile, so results are the same whatever the batch, chunking, block size or thread count
// (batch invariance within this variant; the AVX2 variant reduces in another order). Decode
// tiles (one query row) go to the AVX2 kernel, which is bandwidth-bound there.
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/kernel_impl.h"
#include "kernels/simd_avx512.h"

// GCC 12 warns that its intrinsic headers read an uninitialized pass-through operand.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

namespace strata::kernels::avx512 {
namespace {

constexpr int64_t kChunk = 32;  // key/value rows converted at a time

// Scores of key rows[0..n) for slot vectors [v0, v0 + NV), NK keys at a time. Each score is
// the AVX2 kernel's (dot8 then reduce8x8): eight partial FMA chains P_l over the head dims
// e = l, l + 8, ... in order, combined as ((P0 + P1) + (P2 + P3)) + ((P4 + P5) + (P6 + P7)),
// then times the scale. Here the eight partials of a slot are eight vectors (lanes = slots).
template <int NV, int NK>
void score_block(const float* qt, int64_t ns16, int v0, const float* const* rows, int64_t j,
                 int64_t hd, __m512 vs, float* out) {
  for (int v = 0; v < NV; ++v) {
    __m512 p[NK][8];
    for (int r = 0; r < NK; ++r)
      for (int l = 0; l < 8; ++l) p[r][l] = _mm512_setzero_ps();
    for (int64_t e0 = 0; e0 < hd; e0 += 8) {
#pragma GCC unroll 8
      for (int l = 0; l < 8; ++l) {
        const __m512 q = _mm512_loadu_ps(qt + (e0 + l) * ns16 + (v0 + v) * 16);
#pragma GCC unroll 4
        for (int r = 0; r < NK; ++r)
          p[r][l] = _mm512_fmadd_ps(q, _mm512_set1_ps(rows[j + r][e0 + l]), p[r][l]);
      }
    }
    for (int r = 0; r < NK; ++r) {
      const __m512 a =
          _mm512_add_ps(_mm512_add_ps(p[r][0], p[r][1]), _mm512_add_ps(p[r][2], p[r][3]));
      const __m512 b =
          _mm512_add_ps(_mm512_add_ps(p[r][4], p[r][5]), _mm512_add_ps(p[r][6], p[r][7]));
      _mm512_storeu_ps(out + (j + r) * ns16 + (v0 + v) * 16,
                       _mm512_mul_ps(_mm512_add_ps(a, b), vs));
    }
  }
}

void score_keys_all(const float* qt, int64_t ns16, int nv, const float* const* rows, int64_t n,
                    int64_t hd, float scale, float* out) {
  const __m512 vs = _mm512_set1_ps(scale);
  for (int v0 = 0; v0 < nv; ++v0) {
    int64_t j = 0;
    for (; j + 3 <= n; j += 3) score_block<1, 3>(qt, ns16, v0, rows, j, hd, vs, out);
    for (; j < n; ++j) score_block<1, 1>(qt, ns16, v0, rows, j, hd, vs, out);
  }
}

// One kv head g of a tile: query rows [t0, t0 + nq) of sequence s, all query heads of its group.
// Scores are kept for the whole context when the scratch holds them; otherwise they are computed
// twice, chunk by chunk (once for the maxima, once for the weights): the same operations either
// way, so the results are identical.
void tile_head(const AttentionArgs& a, int s, int64_t t0, int nq, int g, float* scratch,
               int64_t acc_floats, int64_t score_floats) {
  const PagedKvLayer& kv = *a.kv;
  const int64_t hd = kv.head_dim;
  const int group = a.num_heads / static_cast<int>(kv.num_kv_heads);
  const int nsl = nq * group, nv = (nsl + 15) / 16;
  const int64_t ns16 = int64_t{nv} * 16;
  const int64_t q1 = a.query_start[s + 1];
  int64_t ctx[kAttentionTileRows];
  for (int i = 0; i < nq; ++i) ctx[i] = a.seq_lens[s] - (q1 - (t0 + i)) + 1;
  const int64_t ctx_max = ctx[nq - 1];
  const bool stored = ctx_max * ns16 <= score_floats;
  const int32_t* table = a.block_tables + s * a.max_blocks_per_seq;
  float* qt = scratch;                 // [hd][ns16]: the queries
  float* out = qt + hd * ns16;         // [hd][ns16]: the weighted values
  float* rows = scratch + acc_floats;  // converted key / value rows
  float* sc = rows + kChunk * hd;      // scores: [ctx_max][ns16] stored, else [kChunk][ns16]
  // Queries transposed: qt[e][slot], slot = i * group + h; padding slots are zero.
  for (int64_t e = 0; e < hd; ++e)
    for (int64_t sl = 0; sl < ns16; ++sl)
      qt[e * ns16 + sl] =
          sl < nsl ? a.q[(t0 + sl / group) * a.ldq + (int64_t{g} * group + sl % group) * hd + e]
                   : 0.0f;
  // Each lane's context: keys j < lane_ctx count for it.
  alignas(64) int32_t lane_ctx[kAttentionTileRows * 64];
  for (int64_t sl = 0; sl < ns16; ++sl)
    lane_ctx[sl] = sl < nsl ? static_cast<int32_t>(ctx[sl / group]) : 0;
  int64_t rix[kChunk];
  const float* rp[kChunk];
  auto chunk_scores = [&](int64_t j0, int64_t n) {
    avx2::kv_rows_of(kv, table, g, j0, n, rix);
    avx2::kv_rows_f32(kv, kv.k, kv.k_row_scale, rix, n, kv.k_scale, rows, rp);
    float* dst = stored ? sc + j0 * ns16 : sc;
    score_keys_all(qt, ns16, nv, rp, n, hd, a.scale, dst);
    return dst;
  };
  // Pass 1: scores and each lane's maximum over its keys.
  __m512 mx[kAttentionTileRows * 4];
  for (int v = 0; v < nv; ++v) mx[v] = _mm512_set1_ps(-INFINITY);
  for (int64_t j0 = 0; j0 < ctx_max; j0 += kChunk) {
    const int64_t n = std::min(kChunk, ctx_max - j0);
    const float* c = chunk_scores(j0, n);
    for (int v = 0; v < nv; ++v) {
      const __m512i cv = _mm512_load_si512(lane_ctx + v * 16);
      for (int64_t j = 0; j < n; ++j) {
        const __mmask16 m =
            _mm512_cmpgt_epi32_mask(cv, _mm512_set1_epi32(static_cast<int32_t>(j0 + j)));
        mx[v] = _mm512_mask_max_ps(mx[v], m, mx[v], _mm512_loadu_ps(c + j * ns16 + v * 16));
      }
    }
  }
  // Pass 2: weights exp(s - max) (0 past a lane's context), their sums, and the weighted values,
  // key by key in order.
  // The sums as the AVX2 kernel forms them: eight partial sums by key index mod 8, combined as
  // ((S0 + S4) + (S2 + S6)) + ((S1 + S5) + (S3 + S7)).
  __m512 sum[kAttentionTileRows * 4][8];
  for (int v = 0; v < nv; ++v)
    for (int m = 0; m < 8; ++m) sum[v][m] = _mm512_setzero_ps();
  std::memset(out, 0, static_cast<size_t>(hd * ns16) * sizeof(float));
  for (int64_t j0 = 0; j0 < ctx_max; j0 += kChunk) {
    const int64_t n = std::min(kChunk, ctx_max - j0);
    float* c = stored ? sc + j0 * ns16 : chunk_scores(j0, n);
    for (int v = 0; v < nv; ++v) {
      const __m512i cv = _mm512_load_si512(lane_ctx + v * 16);
      for (int64_t j = 0; j < n; ++j) {
        const __mmask16 m =
            _mm512_cmpgt_epi32_mask(cv, _mm512_set1_epi32(static_cast<int32_t>(j0 + j)));
        float* p = c + j * ns16 + v * 16;
        const __m512 ev = _mm512_maskz_mov_ps(m, exp16(_mm512_sub_ps(_mm512_loadu_ps(p), mx[v])));
        _mm512_storeu_ps(p, ev);
        sum[v][(j0 + j) % 8] = _mm512_add_ps(sum[v][(j0 + j) % 8], ev);
      }
    }
    avx2::kv_rows_of(kv, table, g, j0, n, rix);
    avx2::kv_rows_f32(kv, kv.v, kv.v_row_scale, rix, n, kv.v_scale, rows, rp);
    for (int v = 0; v < nv; ++v) {
      for (int64_t e0 = 0; e0 < hd; e0 += 8) {
        __m512 acc[8];
        for (int t = 0; t < 8; ++t) acc[t] = _mm512_loadu_ps(out + (e0 + t) * ns16 + v * 16);
        for (int64_t j = 0; j < n; ++j) {
          const __m512 p = _mm512_loadu_ps(c + j * ns16 + v * 16);
          const float* vr = rp[j] + e0;
#pragma GCC unroll 8
          for (int t = 0; t < 8; ++t) acc[t] = _mm512_fmadd_ps(p, _mm512_set1_ps(vr[t]), acc[t]);
        }
        for (int t = 0; t < 8; ++t) _mm512_storeu_ps(out + (e0 + t) * ns16 + v * 16, acc[t]);
      }
    }
  }
  alignas(64) float sums[kAttentionTileRows * 64];
  for (int v = 0; v < nv; ++v) {
    const __m512* S = sum[v];
    const __m512 a = _mm512_add_ps(_mm512_add_ps(S[0], S[4]), _mm512_add_ps(S[2], S[6]));
    const __m512 b = _mm512_add_ps(_mm512_add_ps(S[1], S[5]), _mm512_add_ps(S[3], S[7]));
    _mm512_store_ps(sums + v * 16, _mm512_add_ps(a, b));
  }
  for (int sl = 0; sl < nsl; ++sl) {
    float* o = a.out + (t0 + sl / group) * a.ldo + (int64_t{g} * group + sl % group) * hd;
    const float inv = 1.0f / sums[sl];
    for (int64_t e = 0; e < hd; ++e) o[e] = out[e * ns16 + sl] * inv;
  }
}

bool wide_tile(const AttentionArgs& a, int s, int64_t t0, int nq, int g0, int ng, float* scratch,
               int64_t acc_floats, int64_t rows_floats, int64_t score_floats) {
  // Decode rows (one query row: nothing to share a key among) and shapes that do not fit go to
  // the AVX2 tile, whose arithmetic this one repeats exactly.
  const PagedKvLayer& kv = *a.kv;
  const int64_t hd = kv.head_dim;
  const int group = a.num_heads / static_cast<int>(kv.num_kv_heads);
  if (nq * group < 4 || hd % 8 != 0 || group > 64) return false;
  const int64_t ns16 = (int64_t{nq} * group + 15) / 16 * 16;
  // The queries and outputs take 2 * hd * ns16 floats (spilling past the accumulators into the
  // rows space when they must), then one chunk of rows and at least one chunk of scores.
  const int64_t q_space = std::max(acc_floats, 2 * hd * ns16);
  const int64_t left = acc_floats + rows_floats + score_floats - q_space - kChunk * hd;
  if (left < kChunk * ns16) return false;
  for (int g = g0; g < g0 + ng; ++g) tile_head(a, s, t0, nq, g, scratch, q_space, left);
  return true;
}
}  // namespace

void attention(const AttentionArgs& a, ThreadPool& pool) {
  avx2::attention_with(a, pool, wide_tile);
}

}  // namespace strata::kernels::avx512
