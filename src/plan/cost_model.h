// The cost of one engine step: FLOPs and bytes moved for a batch (each sequence's new tokens and
// the context before them), from the model's shapes, and a step time on a device with tensor,
// pipeline and expert parallelism. A pure function of its inputs; docs/plan.md derives every
// formula and states the assumptions.
//
// Time of one step (a roofline per pipeline stage, the stages run one after the other):
//   stage_s = max(matmul_flops / (peak(weights) * eff) + attention_flops / (peak(attn) * eff),
//                 bytes / (memory_bw * eff))          (roofline "sum": the two added)
//             + the TP all-gathers of the stage (the engine's exact tensor parallelism,
//               model/parallel.h: no all-reduce, no all-to-all)
//   step_s  = sum of stage_s + (pp - 1) point-to-point sends of the hidden states
//             + the last stage's broadcast of the logits to the other stages
//             + step_overhead_s + per_sequence_s * sampled sequences
// where peak(attn) is the hardware's attention_flops_per_s, or else the activations' type's peak.
// where every figure is per device (one tensor-parallel rank).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "core/dtype.h"
#include "core/status.h"
#include "model/model_config.h"
#include "plan/hardware.h"

namespace strata::plan {

// The shapes of an architecture that the cost model needs (model_shape() reads them from a
// config the engine can run: Llama-family dense models, Mixtral / Qwen MoE, DeepSeek MLA + MoE).
struct ModelShape {
  int64_t hidden = 0;
  int64_t vocab = 0;
  int64_t num_layers = 0;
  int64_t num_heads = 0;
  // Grouped-query attention (every model but DeepSeek's).
  int64_t num_kv_heads = 0;
  int64_t head_dim = 0;
  // Multi-head latent attention (DeepSeek-V2/V3), computed in the absorbed form the engine uses
  // for every token (model/deepseek_mla.h); 0 q_lora_rank: one q_proj.
  bool mla = false;
  int64_t q_lora_rank = 0;
  int64_t kv_lora_rank = 0;
  int64_t qk_nope_dim = 0;
  int64_t qk_rope_dim = 0;
  int64_t v_head_dim = 0;
  // DeepSeek-V3.2's lightning indexer (0 index_topk: none): per token a key of index_dim values
  // cached beside the latent row, index_heads query heads from the q latent, and the MLA
  // attention of each token reads only its index_topk best positions.
  int64_t index_heads = 0;
  int64_t index_dim = 0;
  int64_t index_topk = 0;
  // DeepSeek-V4's compressed sparse attention (model/deepseek_v4_ops.h): one shared K=V head of
  // head_dim values (num_heads query heads), per layer a sliding window of `window` raw rows plus
  // compressed rows every compress_ratio[l] tokens (0: window only; 4: the indexer picks
  // index_topk of them; 128: every complete row), the grouped low-rank output projection
  // (o_groups x o_lora_rank) and hc_mult residual streams mixed before each sublayer. Every layer
  // is MoE; expert_fp4: routed experts in MXFP4 (17/32 bytes per weight).
  bool v4 = false;
  std::vector<int> compress_ratio;
  int64_t window = 0;
  int64_t o_groups = 0;
  int64_t o_lora_rank = 0;
  int64_t hc_mult = 1;
  bool expert_fp4 = false;
  // The published fp8 row (dsv4::kv_token_bytes_fp8: 584 for 512 / 64); 0 when the head has no
  // fp8 layout (the engine then refuses an fp8 cache).
  int64_t v4_fp8_row_bytes = 0;
  // Feed-forward: dense SwiGLU layers, and MoE layers where moe_layer[l].
  int64_t dense_ffn = 0;
  std::vector<bool> moe_layer;
  int64_t num_experts = 0;
  int64_t top_k = 0;
  int64_t expert_ffn = 0;
  int64_t shared_ffn = 0;  // all shared experts together; 0: none

  bool is_moe(int64_t layer) const {
    return layer < static_cast<int64_t>(moe_layer.size()) && moe_layer[layer];
  }
  // Matmul weights (elements) of one attention layer that every tensor-parallel rank splits,
  // and those it replicates (MLA's q_a (with a q latent) and kv_a projections, and V3.2's
  // indexer), as the engine splits them.
  int64_t attention_sharded_params() const;
  int64_t attention_replicated_params() const;
  int64_t dense_mlp_params() const { return 3 * hidden * dense_ffn; }
  int64_t expert_params() const { return 3 * hidden * expert_ffn; }
  int64_t shared_expert_params() const { return 3 * hidden * shared_ffn; }
  int64_t router_params() const { return num_experts * hidden; }
  int64_t lm_head_params() const { return vocab * hidden; }
  // KV cache elements per token and layer (all heads): 2 * kv_heads * head_dim, or the MLA
  // latent row kv_lora_rank + qk_rope_dim (+ index_dim for the indexer's key).
  int64_t kv_elems_per_token() const;
  // Attention FLOPs per (query token, context token) pair and layer, all heads:
  // 4 * heads * head_dim (QK^T and PV), MLA: heads * (2 (kv_lora + rope) + 2 kv_lora). With the
  // indexer these pairs are the selected ones only; indexer_flops_per_pair() is per pair of the
  // whole causal context: 2 index_heads index_dim (the ReLU'd dot products) + 2 index_heads.
  double attention_flops_per_pair() const;
  double indexer_flops_per_pair() const;
  bool has_indexer() const { return index_topk > 0; }
  // Width of one token's attention output before o_proj (what TP all-gathers): heads * head_dim,
  // MLA heads * v_head_dim.
  int64_t attention_output_width() const {
    return v4 ? o_groups * o_lora_rank : num_heads * (mla ? v_head_dim : head_dim);
  }
  // V4: bytes of one cached row (window or compressed) and of one indexer key at `kv_b` bytes per
  // value; fp8: the published layouts (584 and index_dim + 4 bytes).
  double v4_row_bytes(double kv_b, bool fp8) const;
  double v4_key_bytes(double kv_b, bool fp8) const;
};

Result<ModelShape> model_shape(const ModelConfig& config);

// Tensor, pipeline and expert parallel sizes. The engine places whole routed experts on the
// tensor-parallel ranks (shard_range(num_experts, tp, rank)) with or without
// --enable-expert-parallel, so `ep` (tp with the flag, else 1) is checked and reported but changes
// no figure. layer_partition: the STRATA_PP_LAYER_PARTITION value (empty: the engine's even split,
// model/parallel.h pipeline_layer_ranges()).
struct ParallelConfig {
  int64_t tp = 1;
  int64_t pp = 1;
  int64_t ep = 1;
  std::string layer_partition;
  int64_t num_devices() const { return tp * pp; }
};

// Number formats. weight_dtype is the storage of the attention and FFN matmul weights (any
// core/dtype.h type, quantized ones included: Q4_K reads 4.5 bits per weight); the embedding and
// lm_head stay unquantized (lm_head_dtype), the MoE router is f32, as the engine loads them.
struct PrecisionConfig {
  DType weight_dtype = DType::kBF16;
  int64_t weight_group_size = 128;  // kW4G / kW8G: one f16 scale and zero per group
  DType lm_head_dtype = DType::kBF16;
  DType kv_dtype = DType::kBF16;
  // --kv-cache-dtype fp8_ds_mla (core/fp8_ds_mla.h): MLA rows of fp8 latent values with an f32
  // scale per 128 and bf16 rotary values, the indexer key fp8 with one f32 scale.
  bool kv_fp8_ds_mla = false;
  DType activation_dtype = DType::kBF16;  // hidden states in memory and on the links
};

// Bytes per element of `t` including block scales: f32 4, bf16 2, fp8 1, Q8_0 34/32, Q4_K
// 144/256, W4G 0.5 + 4/group_size.
double bytes_per_element(DType t, int64_t group_size = 128);
// The matmul rate a weight type runs at: FP8 weights on fp8 tensor cores, otherwise (weight-only
// quantization widens to the activations) the activation type.
ComputeType matmul_compute_type(DType weight, DType activation);

// Expected number of distinct experts that `tokens` tokens touch when each picks top_k of
// num_experts uniformly: E (1 - (1 - k/E)^T).
double expected_distinct_experts(int64_t num_experts, int64_t top_k, double tokens);

// One sequence of a step's batch.
struct SequenceWork {
  int64_t num_new_tokens = 0;  // tokens computed this step (a prompt chunk, or 1 to decode)
  int64_t context_len = 0;     // tokens already in the KV cache before them
  bool sample = true;          // produces logits (the lm_head runs for it)
};

// What one step costs. Work figures are per device on the critical path: one tensor-parallel
// rank, summed over the pipeline stages it passes through (with tp = pp = 1: the whole model).
struct StepCost {
  int64_t num_tokens = 0;
  int64_t num_logits_rows = 0;
  double matmul_flops = 0;     // 2 * tokens * active weights (+ lm_head rows)
  double attention_flops = 0;  // scores and weighted values over each token's context
  double weight_bytes = 0;     // weights read once per step (MoE: the experts the batch touches)
  double kv_read_bytes = 0;    // every sequence's context and new tokens, once
  double kv_write_bytes = 0;   // the new tokens' KV
  double activation_bytes = 0;
  double compute_s = 0;  // sums over stages of the two sides of the roofline
  double memory_s = 0;
  double tp_comm_s = 0;  // the TP all-gathers (embedding, attention, MLP / MoE, logits)
  double ep_comm_s = 0;  // always 0: the experts' outputs are gathered with the TP group
  double pp_comm_s = 0;  // stage-to-stage sends and the logits broadcast
  double overhead_s = 0;
  double step_time_s = 0;
  // Each pipeline stage's time (its roofline, its TP all-gathers and its send of the hidden
  // states to the next stage; the last stage's includes the logits broadcast), without the
  // overhead: step_time_s = sum of stage_s + overhead_s. With micro-batches in flight the stages
  // of different batches overlap (plan/simulator.h).
  std::vector<double> stage_s;

  double flops() const { return matmul_flops + attention_flops; }
  double bytes() const { return weight_bytes + kv_read_bytes + kv_write_bytes + activation_bytes; }
};

class CostModel {
 public:
  // Errors (kInvalidArgument) when the parallel sizes do not fit the model: tp must divide the
  // attention heads, ep must be 1 or tp, the pipeline split must be one the engine accepts
  // (pp <= layers; a layer_partition of pp counts summing to the layers).
  static Result<CostModel> create(ModelShape model, HardwareSpec hardware, ParallelConfig parallel,
                                  PrecisionConfig precision);

  StepCost step_cost(std::span<const SequenceWork> batch) const;
  double step_time(std::span<const SequenceWork> batch) const {
    return step_cost(batch).step_time_s;
  }

  const ModelShape& model() const { return model_; }
  const HardwareSpec& hardware() const { return hw_; }
  const ParallelConfig& parallel() const { return par_; }
  const PrecisionConfig& precision() const { return prec_; }
  // Layers [first, last) of pipeline stage `s`, as the engine splits them (pipeline_layer_ranges:
  // L / pp each, the remainder one each to the stages before the last, counting back from it;
  // or layer_partition).
  std::pair<int64_t, int64_t> stage_layers(int64_t s) const;

  // Ring all-gather of `bytes` in all (each of the `ranks` devices contributes bytes / ranks):
  // (n-1)/n bytes / (bw eff) + (n-1) latency.
  static double all_gather_s(double bytes, int64_t ranks, const LinkSpec& link, double eff);
  // Broadcast of `bytes` from one device to `ranks` - 1 others, as a scatter then a ring
  // all-gather: 2 (n-1)/n bytes / (bw eff) + 2 (n-1) latency.
  static double broadcast_s(double bytes, int64_t ranks, const LinkSpec& link, double eff);

 private:
  CostModel(ModelShape m, HardwareSpec h, ParallelConfig p, PrecisionConfig c)
      : model_(std::move(m)), hw_(std::move(h)), par_(p), prec_(c) {}
  // The link a group of `ranks` consecutive devices communicates over.
  const LinkSpec& group_link(int64_t ranks) const;
  // The link between rank i of stage a and rank i of stage b: the inter-node one when any such
  // pair of devices (a tp + i, b tp + i) is on different nodes.
  const LinkSpec& pp_link(int64_t a, int64_t b) const;

  ModelShape model_;
  HardwareSpec hw_;
  ParallelConfig par_;
  PrecisionConfig prec_;
  std::vector<std::pair<int64_t, int64_t>> stages_;  // stage_layers()
};

}  // namespace strata::plan
