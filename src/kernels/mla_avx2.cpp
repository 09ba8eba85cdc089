// AVX2/FMA MLA attention (absorbed form, kernels/mla.h). One work item is a query row and a fixed
// block of kMlaHeadBlock heads; every head of the block reads the same cached rows (multi-query),
// converted to f32 once per item and pass. Scores take 8 keys at a time, each lane one FMA chain
// over the row in order; softmax sums and the weighted latent sums run key by key in order. So a
// (token, head) result never depends on the batch, the chunking or the thread count.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "core/check.h"
#include "core/fp8_ds_mla.h"
#include "kernels/kernel_impl.h"
#include "kernels/mla_impl.h"
#include "kernels/simd_avx2.h"

namespace strata::kernels {
namespace {

using avx2::hsum8;
using avx2::load_bf16x8;
using avx2::load_f16x8;
using avx2::softmax_numerators;

// Row `slot` of the latent cache as f32 (times the cache scale): in place for an f32 cache with
// scale 1, else converted into tmp.
const float* row_f32(const PagedKvLayer& kv, int64_t slot, float* tmp) {
  if (kv.ds_mla_latent > 0) {
    const int64_t L = kv.ds_mla_latent, D = kv.head_dim;
    if (L % 8 != 0 || (D - L) % 8 != 0) {
      read_mla_row(kv, slot, tmp);
      return tmp;
    }
    // fp8_ds_mla in registers, the values read_mla_row() gives bit for bit: an e4m3 byte
    // sign-extended to 16 bits, shifted left by 7 with bit 14 cleared, is the f16 of value / 256
    // (exact), and x (group scale * k_scale * 256) rounds once as value * (group scale *
    // k_scale) does; the bf16 rotary part is exact, then times k_scale.
    const std::byte* p = kv.k + slot * ds_mla_row_bytes(D, L);
    const std::byte* scales = p + L;
    for (int64_t g = 0; g < ds_mla_scale_count(L); ++g) {
      float gs;
      std::memcpy(&gs, scales + 4 * g, 4);
      const __m256 f = _mm256_set1_ps(gs * kv.k_scale * 256.0f);
      for (int64_t e = g * kDsMlaGroup; e < std::min(L, (g + 1) * kDsMlaGroup); e += 8) {
        const __m128i h =
            _mm_cvtepi8_epi16(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p + e)));
        _mm256_storeu_ps(
            tmp + e,
            _mm256_mul_ps(
                _mm256_cvtph_ps(_mm_and_si128(_mm_slli_epi16(h, 7), _mm_set1_epi16(-16385))), f));
      }
    }
    const std::byte* rope = scales + 4 * ds_mla_scale_count(L);
    const __m256 sv = _mm256_set1_ps(kv.k_scale);
    for (int64_t e = L; e < D; e += 8) {
      const __m256 v = load_bf16x8(rope + (e - L) * 2);
      _mm256_storeu_ps(tmp + e, kv.k_scale != 1.0f ? _mm256_mul_ps(v, sv) : v);
    }
    return tmp;
  }
  const std::byte* p = kv.k + kv.offset(slot, 0);
  const int64_t D = kv.head_dim;
  const float scale = kv.k_scale;
  if (kv.dtype == DType::kF32 && scale == 1.0f) return reinterpret_cast<const float*>(p);
  if ((kv.dtype == DType::kBF16 || kv.dtype == DType::kF16) && D % 8 == 0) {
    const __m256 sv = _mm256_set1_ps(scale);
    for (int64_t e = 0; e < D; e += 8) {
      __m256 v = kv.dtype == DType::kBF16 ? load_bf16x8(p + e * 2) : load_f16x8(p + e * 2);
      _mm256_storeu_ps(tmp + e, _mm256_mul_ps(v, sv));
    }
    return tmp;
  }
  read_kv_row(kv, kv.k, slot, 0, scale, tmp);
  return tmp;
}

// Lane r = q . k[r] over D values: one FMA chain per lane, then hsum8, then the scalar tail.
inline __m256 dot8(const float* q, const float* const* k, int64_t D) {
  alignas(32) float out[8];
  __m256 acc[8];
  for (int r = 0; r < 8; ++r) acc[r] = _mm256_setzero_ps();
  int64_t e = 0;
  for (; e + 8 <= D; e += 8) {
    const __m256 qv = _mm256_loadu_ps(q + e);
#pragma GCC unroll 8
    for (int r = 0; r < 8; ++r) acc[r] = _mm256_fmadd_ps(qv, _mm256_loadu_ps(k[r] + e), acc[r]);
  }
  for (int r = 0; r < 8; ++r) {
    float s = hsum8(acc[r]);
    for (int64_t i = e; i < D; ++i) s += q[i] * k[r][i];
    out[r] = s;
  }
  return _mm256_load_ps(out);
}

// Heads [h0, h0 + nb) of one query row of sequence s (its queries at q, its output at out) over
// n cached positions: positions[k], or k when positions is null. The scratch is laid out for
// blocks of `cap` >= nb heads (mla_head_block_floats(cap, ...)). Every head's arithmetic is its
// own (nb and cap change only how often the rows are converted), so results never depend on them.
void attend_positions(const AttentionArgs& a, int64_t r, int s, const float* q_row, float* out_row,
                      const int32_t* positions, int64_t ctx, int h0, int nb, float* scratch,
                      int cap = kMlaHeadBlock) {
  const PagedKvLayer& kv = *a.kv;
  const int64_t D = kv.head_dim;
  const int64_t ctx8 = (ctx + 7) / 8 * 8;
  float* scores = scratch;                // [nb][ctx8] (room for ctx + 8 each)
  float* acc = scores + cap * (ctx + 8);  // [nb][r]
  float* rows = acc + cap * r;            // 8 converted key rows + 1 value row
  auto slot = [&](int64_t k) { return mla_slot(a, s, positions != nullptr ? positions[k] : k); };
  const __m256 vscale = _mm256_set1_ps(a.scale);
  for (int64_t j0 = 0; j0 < ctx; j0 += 8) {
    const float* krow[8];
    for (int i = 0; i < 8; ++i) {
      const int64_t j = std::min(j0 + i, ctx - 1);  // the tail repeats the last key (masked)
      krow[i] = row_f32(kv, slot(j), rows + i * D);
    }
    for (int h = 0; h < nb; ++h) {
      const float* q = q_row + (h0 + h) * D;
      _mm256_storeu_ps(scores + h * ctx8 + j0, _mm256_mul_ps(dot8(q, krow, D), vscale));
    }
  }
  float sums[kMlaMaxHeadBlock];
  for (int h = 0; h < nb; ++h) {
    sums[h] = softmax_numerators(scores + h * ctx8, ctx, ctx8);
    std::memset(acc + h * r, 0, r * sizeof(float));
  }
  float* vtmp = rows + 8 * D;
  for (int64_t j = 0; j < ctx; ++j) {
    const float* vr = row_f32(kv, slot(j), vtmp);
    for (int h = 0; h < nb; ++h) {
      const float pj = scores[h * ctx8 + j];
      const __m256 p = _mm256_set1_ps(pj);
      float* ac = acc + h * r;
      int64_t e = 0;
      for (; e + 8 <= r; e += 8)
        _mm256_storeu_ps(ac + e,
                         _mm256_fmadd_ps(p, _mm256_loadu_ps(vr + e), _mm256_loadu_ps(ac + e)));
      for (; e < r; ++e) ac[e] = std::fma(pj, vr[e], ac[e]);
    }
  }
  for (int h = 0; h < nb; ++h) {
    float* o = out_row + (h0 + h) * r;
    const float inv = 1.0f / sums[h];
    for (int64_t e = 0; e < r; ++e) o[e] = acc[h * r + e] * inv;
  }
}

void attend_heads(const AttentionArgs& a, int64_t r, int s, int64_t t, int64_t row_begin, int h0,
                  int nb, float* scratch) {
  const int64_t ctx = a.seq_lens[s] - (a.query_start[s + 1] - t) + 1;
  attend_positions(a, r, s, a.q + (t - row_begin) * a.ldq, a.out + (t - row_begin) * a.ldo, nullptr,
                   ctx, h0, nb, scratch);
}

// The indexer scores with the heads in the lanes: qt holds the row's queries transposed,
// [D][hp] (hp: the heads rounded up to 32, the extra ones zero, as are their weights), so one
// key value broadcast times one vector of qt advances 8 heads' dot products. Two keys share each
// load of qt; per key and head the dot product is one FMA chain over e = 0..D-1, and the score
// sum_h w_h * max(0, dot_h) adds the heads' vectors in order, then the 8 lanes (hsum8): the
// same operations whatever the key's neighbours.
void dsa_scores(const AttentionArgs& a, const float* q, const float* w, int s, int64_t j_begin,
                int64_t j_end, float* scores, float* scratch) {
  const PagedKvLayer& kv = *a.kv;
  const int64_t D = kv.head_dim;
  const int H = a.num_heads;
  const int hp = (H + 31) / 32 * 32;
  thread_local std::vector<float> qt_buf;
  float* qt = transpose_dsa_queries(q, w, H, D, hp, &qt_buf);
  float* wp = qt + D * hp;
  const bool direct = kv.ds_mla_latent == 0;
  for (int64_t j0 = j_begin; j0 < j_end; j0 += 2) {
    const float* key[2];
    if (direct) {
      int64_t rows[2];
      for (int i = 0; i < 2; ++i)
        rows[i] = kv.row_index(mla_slot(a, s, std::min(j0 + i, j_end - 1)), 0);
      avx2::kv_rows_f32(kv, kv.k, kv.k_row_scale, rows, 2, kv.k_scale, scratch, key);
    } else {
      for (int i = 0; i < 2; ++i) {
        read_mla_row(kv, mla_slot(a, s, std::min(j0 + i, j_end - 1)), scratch + i * D);
        key[i] = scratch + i * D;
      }
    }
    __m256 total0 = _mm256_setzero_ps(), total1 = _mm256_setzero_ps();
    const __m256 zero = _mm256_setzero_ps();
    for (int g = 0; g < hp; g += 32) {
      __m256 a0[4], a1[4];
      for (int v = 0; v < 4; ++v) a0[v] = a1[v] = zero;
      const float* qg = qt + g;
      for (int64_t e = 0; e < D; ++e) {
        const __m256 b0 = _mm256_set1_ps(key[0][e]), b1 = _mm256_set1_ps(key[1][e]);
        const float* qe = qg + e * hp;
#pragma GCC unroll 4
        for (int v = 0; v < 4; ++v) {
          const __m256 qv = _mm256_loadu_ps(qe + 8 * v);
          a0[v] = _mm256_fmadd_ps(qv, b0, a0[v]);
          a1[v] = _mm256_fmadd_ps(qv, b1, a1[v]);
        }
      }
      for (int v = 0; v < 4; ++v) {
        const __m256 wv = _mm256_loadu_ps(wp + g + 8 * v);
        total0 = _mm256_fmadd_ps(wv, _mm256_max_ps(a0[v], zero), total0);
        total1 = _mm256_fmadd_ps(wv, _mm256_max_ps(a1[v], zero), total1);
      }
    }
    scores[j0] = hsum8(total0);
    if (j0 + 1 < j_end) scores[j0 + 1] = hsum8(total1);
  }
}

}  // namespace

void mla_attention_avx2(const AttentionArgs& a, int64_t r, ThreadPool& pool, int64_t row_begin,
                        int64_t row_end) {
  const int blocks = (a.num_heads + kMlaHeadBlock - 1) / kMlaHeadBlock;
  const int64_t items = (row_end - row_begin) * blocks;
  pool.parallel_for(items, 1, [&](int64_t i0, int64_t i1) {
    float* scratch = a.scratch + ThreadPool::current_thread_index() * a.scratch_floats_per_thread;
    for (int64_t item = i0; item < i1; ++item) {
      const int64_t t = row_begin + item / blocks;
      const int h0 = static_cast<int>(item % blocks) * kMlaHeadBlock;
      attend_heads(a, r, mla_sequence_of_row(a, t), t, row_begin, h0,
                   std::min(kMlaHeadBlock, a.num_heads - h0), scratch);
    }
  });
}

void mla_sparse_attention_avx2(const AttentionArgs& a, int64_t r, const int32_t* selected,
                               int64_t topk, const int32_t* counts, ThreadPool& pool,
                               int64_t row_begin, int64_t row_end) {
  // The widest head block the scratch holds (each selected row is converted once per block and
  // pass; the rows are few, so a wider block saves most of the conversions).
  int hb = kMlaHeadBlock;
  for (int c : {kMlaMaxHeadBlock, kMlaMaxHeadBlock / 2})
    if (c <= a.num_heads &&
        mla_head_block_floats(c, a.kv->head_dim, r, topk) <= a.scratch_floats_per_thread) {
      hb = c;
      break;
    }
  const int blocks = (a.num_heads + hb - 1) / hb;
  pool.parallel_for((row_end - row_begin) * blocks, 1, [&](int64_t i0, int64_t i1) {
    float* scratch = a.scratch + ThreadPool::current_thread_index() * a.scratch_floats_per_thread;
    for (int64_t item = i0; item < i1; ++item) {
      const int64_t i = item / blocks, t = row_begin + i;
      const int h0 = static_cast<int>(item % blocks) * hb;
      attend_positions(a, r, mla_sequence_of_row(a, t), a.q + i * a.ldq, a.out + i * a.ldo,
                       selected + i * topk, counts[i], h0, std::min(hb, a.num_heads - h0), scratch,
                       hb);
    }
  });
}

void dsa_select_avx2(const AttentionArgs& a, const float* weights, int64_t ldw, int64_t topk,
                     int32_t* selected, int32_t* counts, ThreadPool& pool, int64_t row_begin,
                     int64_t row_end) {
  dsa_select_with(a, weights, ldw, topk, selected, counts, pool, row_begin, row_end, dsa_scores);
}

}  // namespace strata::kernels
