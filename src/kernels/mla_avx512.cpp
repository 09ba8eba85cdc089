// AVX-512 DeepSeek Sparse Attention indexer scores (dsa_select(), kernels/mla.h): the AVX2
// layout (heads in the lanes, kernels/mla_avx2.cpp) on 16 lanes, four keys sharing each load of
// the transposed queries. A key's score is one fixed sequence of operations whatever its
// neighbours, the batch or the thread count.
#include <algorithm>
#include <vector>

#include "kernels/kernel_impl.h"
#include "kernels/mla_impl.h"
#include "kernels/simd_avx512.h"

namespace strata::kernels {
namespace {

constexpr int kKeys = 4;  // keys per pass

// qt: the row's queries transposed, [D][hp] (hp: the heads rounded up to 64, the extra ones zero,
// as are their weights). Per key and head one FMA chain over e = 0..D-1; the score adds
// w_h * max(0, dot_h) vector by vector in head order, then the 16 lanes (reduce_add).
void dsa_scores(const AttentionArgs& a, const float* q, const float* w, int s, int64_t j_begin,
                int64_t j_end, float* scores, float* scratch) {
  const PagedKvLayer& kv = *a.kv;
  const int64_t D = kv.head_dim;
  const int H = a.num_heads;
  const int hp = (H + 63) / 64 * 64;
  thread_local std::vector<float> qt_buf;
  float* qt = transpose_dsa_queries(q, w, H, D, hp, &qt_buf);
  float* wp = qt + D * hp;
  const bool direct = kv.ds_mla_latent == 0;
  const __m512 zero = _mm512_setzero_ps();
  for (int64_t j0 = j_begin; j0 < j_end; j0 += kKeys) {
    const float* key[kKeys];
    if (direct) {
      int64_t rows[kKeys];
      for (int i = 0; i < kKeys; ++i)
        rows[i] = kv.row_index(mla_slot(a, s, std::min(j0 + i, j_end - 1)), 0);
      avx2::kv_rows_f32(kv, kv.k, kv.k_row_scale, rows, kKeys, kv.k_scale, scratch, key);
    } else {
      for (int i = 0; i < kKeys; ++i) {
        read_mla_row(kv, mla_slot(a, s, std::min(j0 + i, j_end - 1)), scratch + i * D);
        key[i] = scratch + i * D;
      }
    }
    __m512 total[kKeys];
    for (int i = 0; i < kKeys; ++i) total[i] = zero;
    for (int g = 0; g < hp; g += 64) {
      __m512 acc[kKeys][4];
      for (int i = 0; i < kKeys; ++i)
        for (int v = 0; v < 4; ++v) acc[i][v] = zero;
      const float* qg = qt + g;
      for (int64_t e = 0; e < D; ++e) {
        const float* qe = qg + e * hp;
        const __m512 q0 = _mm512_loadu_ps(qe), q1 = _mm512_loadu_ps(qe + 16);
        const __m512 q2 = _mm512_loadu_ps(qe + 32), q3 = _mm512_loadu_ps(qe + 48);
#pragma GCC unroll 4
        for (int i = 0; i < kKeys; ++i) {
          const __m512 b = _mm512_set1_ps(key[i][e]);
          acc[i][0] = _mm512_fmadd_ps(q0, b, acc[i][0]);
          acc[i][1] = _mm512_fmadd_ps(q1, b, acc[i][1]);
          acc[i][2] = _mm512_fmadd_ps(q2, b, acc[i][2]);
          acc[i][3] = _mm512_fmadd_ps(q3, b, acc[i][3]);
        }
      }
      for (int v = 0; v < 4; ++v) {
        const __m512 wv = _mm512_loadu_ps(wp + g + 16 * v);
        for (int i = 0; i < kKeys; ++i)
          total[i] = _mm512_fmadd_ps(wv, _mm512_max_ps(acc[i][v], zero), total[i]);
      }
    }
    for (int i = 0; i < kKeys && j0 + i < j_end; ++i)
      scores[j0 + i] = _mm512_reduce_add_ps(total[i]);
  }
}

}  // namespace

void dsa_select_avx512(const AttentionArgs& a, const float* weights, int64_t ldw, int64_t topk,
                       int32_t* selected, int32_t* counts, ThreadPool& pool, int64_t row_begin,
                       int64_t row_end) {
  dsa_select_with(a, weights, ldw, topk, selected, counts, pool, row_begin, row_end, dsa_scores);
}

}  // namespace strata::kernels
