// Internal to kernels/: the MLA attention variants behind mla_attention() (kernels/mla.h).
#pragma once

#include <algorithm>
#include <vector>

#include "kernels/mla.h"

namespace strata::kernels {

// The SIMD indexer scorers' layout of one row's queries: q [H][D] transposed into `buf` as
// [D][hp] (hp: the heads rounded up to the vector width the variant uses, the extra heads zero),
// followed by the head weights [hp] (zero beyond H). Returns the transposed queries; the weights
// start D * hp floats later.
inline float* transpose_dsa_queries(const float* q, const float* w, int H, int64_t D, int hp,
                                    std::vector<float>* buf) {
  buf->assign(static_cast<size_t>(D * hp + hp), 0.0f);
  float* qt = buf->data();
  float* wp = qt + D * hp;
  for (int h = 0; h < H; ++h) {
    wp[h] = w[h];
    for (int64_t e = 0; e < D; ++e) qt[e * hp + h] = q[h * D + e];
  }
  return qt;
}

// Heads one work item of the fast variants handles (a fixed count, so the split of work never
// depends on the batch).
constexpr int kMlaHeadBlock = 4;
// The widest block the sparse attention takes when the scratch holds it.
constexpr int kMlaMaxHeadBlock = 16;

// Scratch floats one work item of hb heads needs over n positions of rows of row_dim values:
// scores [hb][n + 8], accumulators [hb][kv_lora_rank], 9 converted rows, padding.
inline int64_t mla_head_block_floats(int hb, int64_t row_dim, int64_t kv_lora_rank, int64_t n) {
  return hb * (n + 8) + hb * kv_lora_rank + 9 * row_dim + 64;
}

// Rows [row_begin, row_end) of the batch; a.q and a.out point at row row_begin.
void mla_attention_reference(const AttentionArgs& a, int64_t kv_lora_rank, int64_t row_begin,
                             int64_t row_end);
void mla_attention_portable(const AttentionArgs& a, int64_t kv_lora_rank, ThreadPool& pool,
                            int64_t row_begin, int64_t row_end);
void mla_attention_avx2(const AttentionArgs& a, int64_t kv_lora_rank, ThreadPool& pool,
                        int64_t row_begin, int64_t row_end);

// DeepSeek Sparse Attention (kernels/mla.h): the plain versions (also the reference table's)
// and the SIMD ones; rows [row_begin, row_end) as for mla_attention.
void dsa_select_portable(const AttentionArgs& a, const float* weights, int64_t ldw, int64_t topk,
                         int32_t* selected, int32_t* counts, ThreadPool& pool, int64_t row_begin,
                         int64_t row_end);
void dsa_select_avx2(const AttentionArgs& a, const float* weights, int64_t ldw, int64_t topk,
                     int32_t* selected, int32_t* counts, ThreadPool& pool, int64_t row_begin,
                     int64_t row_end);
void dsa_select_avx512(const AttentionArgs& a, const float* weights, int64_t ldw, int64_t topk,
                       int32_t* selected, int32_t* counts, ThreadPool& pool, int64_t row_begin,
                       int64_t row_end);
void mla_sparse_attention_portable(const AttentionArgs& a, int64_t kv_lora_rank,
                                   const int32_t* selected, int64_t topk, const int32_t* counts,
                                   ThreadPool& pool, int64_t row_begin, int64_t row_end);
void mla_sparse_attention_avx2(const AttentionArgs& a, int64_t kv_lora_rank,
                               const int32_t* selected, int64_t topk, const int32_t* counts,
                               ThreadPool& pool, int64_t row_begin, int64_t row_end);

// The indexer scores of one query row (sequence s, its queries at q, per-head weights at w) at
// positions [j0, j1), into scores[j0..j1); scratch: room for 4 converted key rows. A position's
// score must depend only on the row and that position (never on j0, j1).
using DsaScoreFn = void (*)(const AttentionArgs& a, const float* q, const float* w, int s,
                            int64_t j0, int64_t j1, float* scores, float* scratch);
// dsa_select() with the scores of `score` and the shared exact top-k: every variant selects
// exactly the same set from the same scores. Fewer rows than threads: each row's positions are
// scored in parallel chunks (a position's score is the same whichever chunk computes it).
void dsa_select_with(const AttentionArgs& a, const float* weights, int64_t ldw, int64_t topk,
                     int32_t* selected, int32_t* counts, ThreadPool& pool, int64_t row_begin,
                     int64_t row_end, DsaScoreFn score);

inline int mla_sequence_of_row(const AttentionArgs& a, int64_t t) {
  const int32_t* end = a.query_start + a.num_seqs + 1;
  return static_cast<int>(std::upper_bound(a.query_start, end, t) - a.query_start) - 1;
}

inline int64_t mla_slot(const AttentionArgs& a, int s, int64_t j) {
  const int64_t bs = a.kv->block_size;
  return static_cast<int64_t>(a.block_tables[s * a.max_blocks_per_seq + j / bs]) * bs + j % bs;
}

}  // namespace strata::kernels
