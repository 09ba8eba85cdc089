// Internal to kernels/: the MLA attention variants behind mla_attention() (kernels/mla.h).
#pragma once

#include <algorithm>

#include "kernels/mla.h"

namespace strata::kernels {

// Heads one work item of the fast variants handles (a fixed count, so the split of work never
// depends on the batch).
constexpr int kMlaHeadBlock = 4;

// Rows [row_begin, row_end) of the batch; a.q and a.out point at row row_begin.
void mla_attention_reference(const AttentionArgs& a, int64_t kv_lora_rank, int64_t row_begin,
                             int64_t row_end);
void mla_attention_portable(const AttentionArgs& a, int64_t kv_lora_rank, ThreadPool& pool,
                            int64_t row_begin, int64_t row_end);
void mla_attention_avx2(const AttentionArgs& a, int64_t kv_lora_rank, ThreadPool& pool,
                        int64_t row_begin, int64_t row_end);

inline int mla_sequence_of_row(const AttentionArgs& a, int64_t t) {
  const int32_t* end = a.query_start + a.num_seqs + 1;
  return static_cast<int>(std::upper_bound(a.query_start, end, t) - a.query_start) - 1;
}

inline int64_t mla_slot(const AttentionArgs& a, int s, int64_t j) {
  const int64_t bs = a.kv->block_size;
  return static_cast<int64_t>(a.block_tables[s * a.max_blocks_per_seq + j / bs]) * bs + j % bs;
}

}  // namespace strata::kernels
