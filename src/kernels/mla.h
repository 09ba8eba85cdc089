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
// kv.k_row_scale, as for every fp8 cache row; the fp8_ds_mla layout, kv.ds_mla_latent ==
// kv_lora_rank: ds_mla_quantize_row() of each row, kv.k_scale must be 1). latent: [m, kv_lora_rank]
// (row stride ld_latent); k_pe: [m, kv.head_dim - kv_lora_rank].
void mla_kv_write(const float* latent, int64_t ld_latent, const float* k_pe, int64_t ld_pe,
                  int64_t m, int64_t kv_lora_rank, const int64_t* slots, const PagedKvLayer& kv);

// One fp8_ds_mla row (core/fp8_ds_mla.h): ds_mla_quantize_row() packs row[row_dim], its first
// `latent` values in e4m3 with one f32 scale per 128 (amax / 448, 1 for an all-zero group), the
// rest in bf16, into ds_mla_row_bytes(row_dim, latent) bytes at dst; ds_mla_dequantize_row()
// unpacks such a row to f32, each value times `scale` (e4m3 * (group scale * scale), bf16 *
// scale). The *_reference versions are written for clarity, one value at a time with the
// reference conversions (core/dtype.h); the two must agree bit for bit.
void ds_mla_quantize_row(const float* row, int64_t row_dim, int64_t latent, std::byte* dst);
void ds_mla_dequantize_row(const std::byte* src, int64_t row_dim, int64_t latent, float scale,
                           float* out);
void ds_mla_quantize_row_reference(const float* row, int64_t row_dim, int64_t latent,
                                   std::byte* dst);
void ds_mla_dequantize_row_reference(const std::byte* src, int64_t row_dim, int64_t latent,
                                     float scale, float* out);
// Row `slot` of an MLA latent cache layer as f32 times kv.k_scale, whatever its layout (plain
// rows of kv.dtype, or fp8_ds_mla): what every MLA attention variant reads.
void read_mla_row(const PagedKvLayer& kv, int64_t slot, float* out);

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

// DeepSeek-V3.2's sparse attention (DeepSeek Sparse Attention, "lightning indexer"): which
// cached positions each query row attends to. args.kv is the indexer-key cache as a one-head
// layer (PagedKvLayer::aux_layer(), head_dim D); args.q: [num_tokens, num_heads * D] the indexer
// queries (rotated as the keys are); weights: [num_tokens, num_heads] (row stride ldw), the
// per-head weights with every scale already applied. For query row t at position p:
//   score_j = sum_h weights[t, h] * max(0, q[t, h] . k_j),   j = 0..p
// and the selection is the `topk` positions of highest score (ties: the lower position), or all
// p + 1 positions when p + 1 <= topk, written in ascending order to selected[(t - row_begin) *
// topk ...] with their number in counts[t - row_begin]. Rows [row_begin, row_end) as for
// mla_attention (args.q and weights point at row row_begin). scratch:
// dsa_select_scratch_floats() per thread.
//
// Uses the variant of `ops`: the plain one (reference and portable tables: per key and head one
// f32 dot product in order) or a SIMD one (avx2, avx512: lanes are heads, a key's score one fixed
// sequence of FMAs over its dims, then a fixed sum over the heads). Every variant is
// batch-invariant (a row's scores depend only on that row's query, weights and the cache) and
// takes the top-k of its scores exactly; variants' scores differ only in the rounding of the
// dot products, so their selections can differ only between positions whose scores agree
// within that rounding. The overload without `ops` runs the plain version.
void dsa_select(const KernelOps& ops, const AttentionArgs& args, const float* weights, int64_t ldw,
                int64_t topk, int32_t* selected, int32_t* counts, ThreadPool& pool,
                int64_t row_begin, int64_t row_end);
void dsa_select(const AttentionArgs& args, const float* weights, int64_t ldw, int64_t topk,
                int32_t* selected, int32_t* counts, ThreadPool& pool, int64_t row_begin,
                int64_t row_end);
int64_t dsa_select_scratch_floats(int64_t head_dim, int64_t max_seq_len);
// Stores indexer keys ([m, keys.head_dim], row stride ldk) at their slots (slot -1: not cached)
// in the one-head layer `keys` (PagedKvLayer::aux_layer()), quantising as mla_kv_write() does.
void dsa_key_write(const float* k, int64_t ldk, int64_t m, const int64_t* slots,
                   const PagedKvLayer& keys);

// mla_attention() (absorbed form, the same arguments) over the selected positions of each row
// only (dsa_select()'s output for rows [row_begin, row_end)), batch-invariant; scratch as
// mla_attention_scratch_floats() with max_seq_len >= topk. Uses the variant of `ops`: plain C++
// with f32 accumulation (reference and portable tables), or the AVX2 one (the avx2 and avx512
// tables: mla_attention_avx2's arithmetic over the selected rows). The overload without `ops`
// runs the plain version.
void mla_sparse_attention(const KernelOps& ops, const AttentionArgs& args, int64_t kv_lora_rank,
                          const int32_t* selected, int64_t topk, const int32_t* counts,
                          ThreadPool& pool, int64_t row_begin, int64_t row_end);
void mla_sparse_attention(const AttentionArgs& args, int64_t kv_lora_rank, const int32_t* selected,
                          int64_t topk, const int32_t* counts, ThreadPool& pool, int64_t row_begin,
                          int64_t row_end);

// The expanded form, written for clarity (double precision, no threading): keys and values of
// every context token are rebuilt per head from the cached latents. q: [num_tokens, num_heads *
// (nope + rope_dim)] per head [q_nope | q_pe (rotated)]; out: [num_tokens, num_heads * v_dim].
// w_uk_t[h]: W_UK[h]^T as a [kv_lora_rank, nope] weight; w_uv[h]: W_UV[h], [v_dim, kv_lora_rank].
// args.q/ldq/out/ldo/num_heads/scale/kv and the sequence fields are used; scratch is not.
void mla_attention_expanded_reference(const AttentionArgs& args, int64_t kv_lora_rank,
                                      std::span<const PackedWeight> w_uk_t,
                                      std::span<const PackedWeight> w_uv);

}  // namespace strata
