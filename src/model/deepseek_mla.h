// Multi-head latent attention as a model layer (DeepSeek-V2/V3): projections, norms, YaRN RoPE on
// the rotary dims, the latent cache write and the attention (kernels/mla.h).
//
// DeepSeek-V3.2 (DeepseekV32ForCausalLM) adds DeepSeek Sparse Attention: a "lightning indexer"
// per layer (checkpoint self_attn.indexer.{wq_b, wk, k_norm, weights_proj}) picks, per query, the
// index_topk cached positions the MLA attention then reads. Per token t at position p:
//   q_I[h] = wq_b(q_a_layernorm(q_a_proj(x)))[h]           (index_n_heads heads of index_head_dim)
//   k_I    = LayerNorm(wk(x)) (weight and bias, eps 1e-6), cached per token beside the latent
//   RoPE (non-interleaved pairs (i, i + rope/2), the MLA's YaRN table) on the first
//   qk_rope_head_dim dims of each q_I head and of k_I
//   w[h]   = weights_proj(x)[h] * index_n_heads^-0.5 * index_head_dim^-0.5
//   score_j = sum_h w[h] * relu(q_I[h] . k_I,j), j <= p; the top index_topk positions
// and the MLA attention of t reads only those (all of them while p < index_topk).
// Deviation from DeepSeek's reference: it rotates q_I and k_I by a Hadamard transform and scores
// in FP8; the transform is orthonormal (it leaves every q . k unchanged), so Strata computes in
// f32 without it and caches k_I in the KV cache dtype (KvSpec::aux_dim).
//
// Tensor parallelism (model/parallel.h, exact: no float sum crosses ranks): the heads are split
// over the ranks of the tensor-parallel group (num_attention_heads must divide by its size). Every
// rank computes the replicated q_a/kv_a projection and norms, writes the FULL latent and rotary key
// of each token into its own cache (the KV spec per rank is one process's, as vLLM does MLA), and
// runs q_b, W_UK/W_UV and the attention for its heads only; o_proj all-gathers the heads' outputs
// and each rank computes its panels of output rows over all of them (model/exact_split.h), then
// all-gathers those rows. V3.2's indexer is small and stays replicated (every rank selects the
// same positions).
//
// The absorbed form for every token, prefill and decode alike, so a token's result never depends on
// how its prompt was chunked or batched; the kernel table's mla_attention does the attention (the
// reference table's in double precision). The expanded form (keys and values rebuilt per head from
// the cached latents, kernels/mla.h) is the plain reference the kernel tests hold it to.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "core/aligned_buffer.h"
#include "core/status.h"
#include "core/thread_pool.h"
#include "kernels/ops.h"
#include "model/exact_split.h"
#include "model/forward_batch.h"
#include "model/layers.h"
#include "model/memory_estimate.h"
#include "model/model.h"
#include "model/model_config.h"
#include "model/parallel.h"
#include "model/rope.h"
#include "model/weight_source.h"

namespace strata {

// MLA dimensions from config.json.
struct MlaSpec {
  int64_t num_heads = 0;
  int64_t q_lora_rank = 0;  // 0: one q_proj (V2-Lite)
  int64_t kv_lora_rank = 0;
  int64_t nope = 0;   // qk_nope_head_dim
  int64_t rope = 0;   // qk_rope_head_dim
  int64_t v_dim = 0;  // v_head_dim
  // DeepSeek-V3.2's indexer (DeepseekV32ForCausalLM); index_topk 0: none (V2/V3).
  int64_t index_heads = 0;  // index_n_heads
  int64_t index_dim = 0;    // index_head_dim (its first `rope` dims rotate)
  int64_t index_topk = 0;
  // (nope + rope)^-0.5, times mscale^2 with YaRN: mscale = 0.1 * mscale_all_dim * ln(factor) + 1.
  float softmax_scale = 1.0f;
  // YaRN: cos/sin are scaled by mscale(mscale) / mscale(mscale_all_dim) (1 for DeepSeek's configs).
  double rope_magnitude = 1.0;

  int64_t qk_dim() const { return nope + rope; }
  int64_t cache_row() const { return kv_lora_rank + rope; }  // cached values per token and layer
  bool has_indexer() const { return index_topk > 0; }
};

Result<MlaSpec> parse_mla_spec(const ModelConfig& config);
// The rotary table of the rope dims (YaRN from rope_scaling, interleaved pairs).
Result<RopeTable> mla_rope_table(const ModelConfig& config, const MlaSpec& spec);

// Activation buffers of the MLA layers, sized once (shared by all layers).
class MlaWorkspace {
 public:
  void allocate(const MlaSpec& s, int64_t max_tokens, int64_t max_seq_len, int threads);
  int64_t bytes() const { return static_cast<int64_t>(buf_.size() + tp_buf_.size()); }
  // Tensor parallelism: `floats` of scratch for the all-gathers (MlaAttention::
  // parallel_scratch_floats of the largest layer); none for one process.
  void allocate_parallel(int64_t floats);
  // The float slots allocate() lays out (a ... scratch) and their total bytes: bytes() after
  // allocate() with the same arguments.
  static std::array<int64_t, 12> slot_sizes(const MlaSpec& s, int64_t max_tokens,
                                            int64_t max_seq_len, int threads);
  static int64_t bytes_for(const MlaSpec& s, int64_t max_tokens, int64_t max_seq_len, int threads);

  static constexpr int64_t kChunk = 128;  // tokens per absorbed-attention chunk
  int64_t max_tokens = 0;
  float* a = nullptr;       // [T, q_in + kv_lora_rank + rope]: q (or q_a) | latent | k_pe
  float* qn = nullptr;      // [T, q_lora_rank] normalised q_a
  float* q = nullptr;       // [T, heads * qk_dim] (q_lora models)
  float* latent = nullptr;  // [T, kv_lora_rank] normalised latent
  float* q_abs = nullptr;   // [kChunk, heads * cache_row] per head [q_nope W_UK | q_pe]
  float* o_lat = nullptr;   // [kChunk, heads * kv_lora_rank]
  float* o = nullptr;       // [T, heads * v_dim]
  float* scratch = nullptr;
  int64_t scratch_per_thread = 0;
  // The indexer's (V3.2 only): queries [T, index_heads * index_dim], keys [T, index_dim], head
  // weights [T, index_heads], and per chunk token the selected positions [kChunk, topk_cap] and
  // their count [kChunk] (int32 in float slots).
  float* iq = nullptr;
  float* ik = nullptr;
  float* iw = nullptr;
  int32_t* selected = nullptr;
  int32_t* counts = nullptr;
  int64_t topk_cap = 0;  // min(index_topk, max_seq_len): no row selects more
  float* tp = nullptr;   // allocate_parallel()'s scratch
  int64_t tp_floats = 0;

 private:
  AlignedBuffer buf_, tp_buf_;
};

class MlaAttention {
 public:
  static Result<MlaAttention> load(WeightSource& src, const ModelConfig& config,
                                   const MlaSpec& spec, int64_t layer, std::optional<DType> storage,
                                   const ModelParallel& parallel = {});

  // out[T, H] = o_proj(attention) for the normalised hidden states x[T, H]; writes this step's
  // cache rows into `kv` first. cos/sin: [T, rope / 2]. Errors only from the tensor-parallel
  // group (a rank gone or silent). With a group, ws needs allocate_parallel(
  // parallel_scratch_floats(T)).
  Status forward(const float* x, int64_t ldx, const ForwardBatch& batch, const PagedKvLayer& kv,
                 const float* cos, const float* sin, float* out, int64_t ldo, const KernelOps& ops,
                 ThreadPool& pool, MlaWorkspace& ws) const;

  // Adds what load() would build to `out` (attention matmuls; the norms as other), from the
  // tensors' metadata (memory_estimate.h); with a group, this rank's shard.
  static Status plan(WeightSource& src, const ModelConfig& config, const MlaSpec& spec,
                     int64_t layer, std::optional<DType> storage, WeightBytesByClass* out,
                     const ModelParallel& parallel = {});

  // Scratch floats forward() needs for T tokens under tensor parallelism (0 for one process).
  int64_t parallel_scratch_floats(int64_t T) const;
  static int64_t parallel_scratch_floats_for(const MlaSpec& spec, int64_t hidden, int tp_size,
                                             int64_t T);
  // This rank's heads [head_begin(), head_begin() + local_heads()) of num_heads().
  int64_t num_heads() const { return full_heads_; }
  int64_t head_begin() const { return head_begin_; }
  int64_t local_heads() const { return spec_.num_heads; }

  // Bytes of the matmul weights, and of the norm vectors (this rank's shard).
  int64_t bytes() const;
  int64_t vector_bytes() const {
    return static_cast<int64_t>(
        (q_a_norm_.size() + kv_a_norm_.size() + idx_norm_w_.size() + idx_norm_b_.size()) *
        sizeof(float));
  }
  int64_t parameters() const;
  // The fused q_a|kv_a projection replicated, the indexer's projections replicated, q_b (or q)
  // and the per-head W_UK/W_UV column-parallel (heads split over ranks), o row-parallel (split
  // by output rows here, after an all-gather of its input: see the top of this file).
  void describe(const std::string& prefix, std::vector<LinearInfo>* out) const;
  // Appends the matmul weights in the order forward() reads them, for
  // PackedWeight::place_in_order().
  void append_weights_in_order(std::vector<PackedWeight*>* out);

 private:
  void attend_absorbed(const AttentionArgs& args, int64_t T, const float* q, int64_t ldq,
                       const KernelOps& ops, ThreadPool& pool, MlaWorkspace& ws) const;
  // V3.2: the indexer's queries, keys (written to kv's aux rows) and head weights into ws.
  void index(const float* x, int64_t ldx, const ForwardBatch& b, const PagedKvLayer& kv,
             const float* cos, const float* sin, const KernelOps& ops, ThreadPool& pool,
             MlaWorkspace& ws) const;

  MlaSpec spec_;  // num_heads: this rank's heads
  int64_t full_heads_ = 0, head_begin_ = 0;
  int64_t q_offset_ = 0;  // column of this rank's first head in q_b_'s output
  Comm* comm_ = nullptr;  // the tensor-parallel group; null: one process
  int64_t hidden_ = 0;
  float eps_ = 1e-6f;
  // [q_in + kv_lora_rank + rope, H]: q_a_proj (or q_proj) | kv_a_proj_with_mqa; tensor parallel
  // without q_lora: kv_a_proj_with_mqa alone, and q_ the panels of q_proj covering this rank's
  // heads.
  PackedWeight qkv_a_, q_;
  std::vector<float> q_a_norm_, kv_a_norm_;
  // [heads * qk_dim, q_lora_rank] (q_lora models); with a group the panels covering this rank's
  // heads' rows.
  PackedWeight q_b_;
  std::vector<PackedWeight> uk_t_;  // per local head W_UK^T [kv_lora_rank, nope]
  std::vector<PackedWeight> uv_;    // per local head W_UV [v_dim, kv_lora_rank]
  RowSplitLinear o_;                // [H, heads * v_dim], split by output rows
  // The indexer (V3.2): wq_b [index_heads * index_dim, q_lora_rank], wk [index_dim, H],
  // k_norm (LayerNorm) weight and bias, weights_proj [index_heads, H].
  PackedWeight idx_q_, idx_k_, idx_w_;
  std::vector<float> idx_norm_w_, idx_norm_b_;
};

}  // namespace strata
