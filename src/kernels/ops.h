// The kernel set the models call. Each op has a plain reference implementation (reference.cpp,
// written for clarity, double accumulation) and fast variants (portable.cpp: threaded, blocked,
// plain C++; *_avx2.cpp: AVX2/FMA/F16C), registered by name (kernels/backend.h) and chosen at run
// time from the CPU's features. Parity tests compare every variant with the reference
// (tests/kernels/). Model code calls a table's ops without knowing which variant it is.
//
// Shapes are given as [rows, cols]; `ld*` is the row stride in elements. All activations are f32.
// Pointers are memory of the backend the table belongs to; `pool` is the CPU backend's compute
// threads.
#pragma once

#include <cstdint>
#include <string>

#include "core/dtype.h"
#include "core/thread_pool.h"
#include "kernels/packed_weight.h"

namespace strata {

// One layer's paged KV cache. Layout of k and v: [num_blocks][num_kv_heads][block_size][head_dim]
// in `dtype` (F32, F16, BF16 or F8E4M3). Slot s = block * block_size + i. An fp8 cache stores each
// row (one token, one head) as e4m3 values of value / row_scale, with row_scale = max|value| / 448
// kept in k_row_scale / v_row_scale ([num_blocks][num_kv_heads][block_size] f32).
// v (and v_row_scale) is null for caches without values (MLA: one latent + rotary-key row per
// token in k; see kernels/mla.h); kv_write and attention need both.
struct PagedKvLayer {
  DType dtype = DType::kF32;
  int64_t block_size = 16;
  int64_t num_kv_heads = 0;
  int64_t head_dim = 0;
  std::byte* k = nullptr;
  std::byte* v = nullptr;
  float k_scale = 1.0f;  // extra per-layer factors (checkpoint kv scales); 1 by default
  float v_scale = 1.0f;
  float* k_row_scale = nullptr;  // fp8 only
  float* v_row_scale = nullptr;
  // The aux rows (KvSpec::aux_dim, DeepSeek-V3.2's indexer keys): one row of aux_dim values per
  // slot, [num_blocks][block_size][aux_dim] in `dtype`, with aux_row_scale when fp8. Null: none.
  std::byte* aux = nullptr;
  int64_t aux_dim = 0;
  float* aux_row_scale = nullptr;
  // > 0: k holds fp8_ds_mla rows (core/fp8_ds_mla.h; MLA, one head, dtype F8E4M3): row `slot`
  // is the ds_mla_row_bytes(head_dim, ds_mla_latent) bytes at k + slot * those bytes, and
  // k_row_scale is unused. Only the MLA kernels (kernels/mla.h) read and write such a layer.
  int64_t ds_mla_latent = 0;
  // Hybrid layouts (KvSpec::layer_block_bytes, DeepSeek-V4): the layer's paged storage as raw
  // bytes, raw_block_bytes per block (block b at raw + b * raw_block_bytes), laid out by the
  // model; the fields above are unused. Null: not hybrid (or nothing paged in this layer).
  std::byte* raw = nullptr;
  int64_t raw_block_bytes = 0;

  // The aux rows as a one-head cache layer of head_dim aux_dim (k = aux), for the row
  // read/write helpers.
  PagedKvLayer aux_layer() const {
    PagedKvLayer a;
    a.dtype = dtype;
    a.block_size = block_size;
    a.num_kv_heads = 1;
    a.head_dim = aux_dim;
    a.k = aux;
    a.k_row_scale = aux_row_scale;
    return a;
  }

  int64_t elem_bytes() const { return dtype_block_bytes(dtype); }
  // Index of (slot, kv_head) among rows (for the row scales).
  int64_t row_index(int64_t slot, int64_t kv_head) const {
    int64_t block = slot / block_size, i = slot % block_size;
    return (block * num_kv_heads + kv_head) * block_size + i;
  }
  // Byte offset of (slot, kv_head) in k or v.
  int64_t offset(int64_t slot, int64_t kv_head) const {
    int64_t block = slot / block_size, i = slot % block_size;
    return (((block * num_kv_heads + kv_head) * block_size + i) * head_dim) * elem_bytes();
  }
};

// Causal attention of each query token over its sequence's cached keys/values (the current
// step's keys must already be written). Tokens are flattened sequence by sequence; sequence s
// owns query rows [query_start[s], query_start[s+1]), and its last query is at position
// seq_lens[s] - 1. Each query attends to positions 0..its own position.
struct AttentionArgs {
  const float* q = nullptr;  // [num_tokens, num_heads * head_dim]
  int64_t ldq = 0;
  float* out = nullptr;  // [num_tokens, num_heads * head_dim]
  int64_t ldo = 0;
  int num_heads = 0;
  float scale = 1.0f;  // usually 1/sqrt(head_dim)
  const PagedKvLayer* kv = nullptr;
  int num_seqs = 0;
  const int32_t* query_start = nullptr;   // [num_seqs + 1]
  const int32_t* seq_lens = nullptr;      // [num_seqs]
  const int32_t* block_tables = nullptr;  // [num_seqs, max_blocks_per_seq]
  int64_t max_blocks_per_seq = 0;
  // Per-thread scratch: pool.size() slices of scratch_floats_per_thread floats, each at least
  // attention_scratch_floats(...).
  float* scratch = nullptr;
  int64_t scratch_floats_per_thread = 0;
};

// Scratch floats per thread the attention kernels need.
int64_t attention_scratch_floats(int num_heads, int num_kv_heads, int head_dim,
                                 int64_t max_seq_len);

struct KernelOps {
  const char* name;

  // y[m, n] = sum_k x[m, k] * W[n, k].
  void (*matmul)(const float* x, int64_t m, int64_t ldx, const PackedWeight& w, float* y,
                 int64_t ldy, ThreadPool& pool);

  // y = x / sqrt(mean(x^2) + eps) * weight, per row; x and y may alias. weight: [n].
  void (*rms_norm)(const float* x, int64_t ldx, const float* weight, float eps, int64_t m,
                   int64_t n, float* y, int64_t ldy, ThreadPool& pool);

  // out[m, f] = silu(gu[m, f]) * gu[m, f + f_dim]; gu: [m, 2 * f_dim].
  void (*silu_mul)(const float* gu, int64_t ldgu, int64_t m, int64_t f_dim, float* out, int64_t ldo,
                   ThreadPool& pool);

  // Rotary embedding in place on x: [m, num_heads * head_dim] (row stride ld). The first
  // rot_dim dims of each head rotate; cos/sin: [m, rot_dim / 2]. neox: pairs (i, i + rot_dim/2)
  // (HF layout); otherwise adjacent pairs (2i, 2i + 1) (GGUF llama layout).
  void (*rope)(float* x, int64_t m, int64_t ld, int num_heads, int head_dim, int rot_dim,
               const float* cos, const float* sin, bool neox);

  // Stores k and v rows ([m, num_kv_heads * head_dim]) at their slots.
  void (*kv_write)(const float* k, int64_t ldk, const float* v, int64_t ldv, int64_t m,
                   const int64_t* slots, const PagedKvLayer& kv);

  void (*attention)(const AttentionArgs& args, ThreadPool& pool);

  // Multi-head latent attention (DeepSeek), absorbed form, over a latent cache: see
  // kernels/mla.h (mla_attention() checks the arguments and calls this). Query rows
  // [row_begin, row_end) run; args.q and args.out point at row row_begin.
  void (*mla_attention)(const AttentionArgs& args, int64_t kv_lora_rank, ThreadPool& pool,
                        int64_t row_begin, int64_t row_end);

  // DeepSeek Sparse Attention (V3.2): the lightning indexer's top-k selection and the absorbed
  // MLA over the selected rows; see dsa_select() and mla_sparse_attention() in kernels/mla.h,
  // which check the arguments and call these. Null (a table registered without them): the
  // plain versions run.
  void (*dsa_select)(const AttentionArgs& args, const float* weights, int64_t ldw, int64_t topk,
                     int32_t* selected, int32_t* counts, ThreadPool& pool, int64_t row_begin,
                     int64_t row_end);
  void (*mla_sparse_attention)(const AttentionArgs& args, int64_t kv_lora_rank,
                               const int32_t* selected, int64_t topk, const int32_t* counts,
                               ThreadPool& pool, int64_t row_begin, int64_t row_end);

  // DeepSeek-V4 (kernels/dsv4.h describes them; model/deepseek_v4_ops.h has the plain versions,
  // which run when these are null): the MXFP4 expert matmul, the lightning indexer's scores over
  // fp8 keys, the sparse attention of one token over its gathered K=V rows and the decode of one
  // fp8 K=V row.
  void (*mxfp4_matmul)(const float* x, const uint8_t* packed, const uint8_t* scales, int64_t m,
                       int64_t n, int64_t k, float* y, ThreadPool* pool);
  void (*dsv4_indexer_scores)(const float* q, const float* w, int heads, int64_t dim, float scale,
                              const uint8_t* const* rows, int64_t n, float* scores);
  void (*dsv4_attention)(const float* q, int heads, int64_t dim, const float* kv, int64_t n,
                         const float* sinks, float scale, float* out);
  void (*dsv4_unpack_fp8_row)(const uint8_t* data, const uint8_t* scales, int64_t nope,
                              int64_t rope, float* out);
};

}  // namespace strata
