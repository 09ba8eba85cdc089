// Multi-head latent attention (MLA, DeepSeek-V2/V3) over a paged latent cache.
//
// Per token and layer the cache holds one row in kv.k (num_kv_heads = 1, head_dim = kv_lora_rank +
// rope_dim, kv.v unused): the latent c = kv_a_layernorm(kv_a_proj(x)[:kv_lora_rank]) followed by
// the rotated shared key k_pe. With per-head weights W_UK[h] [nope, kv_lora_rank] and
// W_UV[h] [v_dim, kv_lora_rank] (the rows of kv_b_proj), head h attends with
//   key_j = [W_UK[h] c_j | k_pe_j], value_j = W_UV[h] c_j           (expanded form)
// which equals, with q_lat = W_UK[h]^T q_nope,
//   score_j = scale * (q_lat . c_j + q_pe . k_pe_j), out = W_UV[h] (sum_j p_j c_j)   (absorbed)
// The absorbed form reads only the cache; mla_attention() computes its middle part, a multi-query
// attention whose key is the whole cached row and whose value is the row's first kv_lora_rank
// values.
#pragma once

#include <cstdint>
#include <span>

#include "core/thread_pool.h"
#include "kernels/ops.h"
#include "kernels/packed_weight.h"

namespace strata {

// Stores [latent | k_pe] rows at their slots (slot -1: not cached), quantising to the cache dtype
// (fp8: e4m3 of value / (row scale * kv.k_scale), the row scale amax / 448 kept in
// kv.k_row_scale, as for every fp8 cache row). latent: [m, kv_lora_rank] (row stride ld_latent); k_pe:
// [m, kv.head_dim - kv_lora_rank].
void mla_kv_write(const float* latent, int64_t ld_latent, const float* k_pe, int64_t ld_pe,
                  int64_t m, int64_t kv_lora_rank, const int64_t* slots, const PagedKvLayer& kv);

// Absorbed-form attention. args.q: [num_tokens, num_heads * kv.head_dim], per head
// [q_lat (kv_lora_rank) | q_pe (rope_dim)]; args.out: [num_tokens, num_heads * kv_lora_rank],
// per head sum_j p_j c_j. args.kv is the latent cache (num_kv_heads 1); the sequence fields are
// as for ordinary attention (kernels/ops.h), scratch as mla_attention_scratch_floats(). Uses the
// variant of `ops` (reference: double accumulation). Each (token, head) result is one fixed
// computation over its context, whatever else is in the batch (batch-invariant).
// Only query rows [row_begin, row_end) run (row_end -1: all); args.q and args.out then point at
// row row_begin (a token chunk of the batch, to bound the workspace).
void mla_attention(const KernelOps& ops, const AttentionArgs& args, int64_t kv_lora_rank,
                   ThreadPool& pool, int64_t row_begin = 0, int64_t row_end = -1);
int64_t mla_attention_scratch_floats(int num_heads, int64_t row_dim, int64_t kv_lora_rank,
                                     int64_t max_seq_len);

// The expanded form, written for clarity (double precision, no threading): keys and values of
// every context token are rebuilt per head from the cached latents. q: [num_tokens, num_heads *
// (nope + rope_dim)] per head [q_nope | q_pe (rotated)]; out: [num_tokens, num_heads * v_dim].
// w_uk_t[h]: W_UK[h]^T as a [kv_lora_rank, nope] weight; w_uv[h]: W_UV[h], [v_dim, kv_lora_rank].
// args.q/ldq/out/ldo/num_heads/scale/kv and the sequence fields are used; scratch is not.
void mla_attention_expanded_reference(const AttentionArgs& args, int64_t kv_lora_rank,
                                      std::span<const PackedWeight> w_uk_t,
                                      std::span<const PackedWeight> w_uv);

}  // namespace strata
