// Mixture-of-experts feed-forward blocks for DeepSeek-V2/V3 (DeepSeekMoE: fine-grained routed
// experts plus shared experts), Mixtral, Qwen2-MoE (one gated shared expert) and Qwen3-MoE, built
// from config.json, and the dense SwiGLU MLP they share.
//
// Fast path: tokens are grouped by expert (kernels/moe_routing.h) so each expert's weights are
// read once per step, as one batched matmul over its tokens; each token's output is the sum of
// its experts' outputs in increasing expert id, then the shared expert, so it never depends on
// which other tokens share the step. forward_reference() computes the same block token by token,
// expert by expert in routing order with double sums, written for clarity (tests compare the two).
//
// Tensor and expert parallelism (model/parallel.h, exact: no float sum crosses ranks): whole
// routed experts are split over the ranks of the tensor-parallel group (rank r holds experts
// shard_range(num_experts, size, r)), with or without --enable-expert-parallel; splitting each
// expert's rows instead would give the same values at the cost of an all-gather per expert. The
// router is replicated, so every rank routes every token alike. Each rank runs its experts over
// the tokens routed to them, the ranks all-gather those outputs, and every rank adds them to each
// token in increasing expert id with the same arithmetic as one process (bit-identical). The
// shared expert(s) are split by rows (model/exact_split.h's SplitSwiGlu: at TP 8 a decode step's
// replicated shared expert would read as many bytes per rank as its share of the routed ones).
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <optional>
#include <vector>

#include "core/aligned_buffer.h"
#include "core/status.h"
#include "core/thread_pool.h"
#include "kernels/moe_routing.h"
#include "kernels/ops.h"
#include "model/exact_split.h"
#include "model/layers.h"
#include "model/memory_estimate.h"
#include "model/model.h"
#include "model/model_config.h"
#include "model/parallel.h"
#include "model/weight_source.h"

namespace strata {

enum class MoeFamily { kDeepseek, kMixtral, kQwen2Moe, kQwen3Moe };

// The MoE layout of a model, from config.json.
struct MoeSpec {
  MoeFamily family = MoeFamily::kMixtral;
  MoeRoutingConfig routing;
  int64_t expert_ffn = 0;          // intermediate size of each routed expert
  int64_t shared_ffn = 0;          // intermediate size of the shared expert(s); 0: none
  bool shared_gate = false;        // Qwen2-MoE: shared output * sigmoid(shared_expert_gate . x)
  bool correction_bias = false;    // DeepSeek-V3 noaux_tc: e_score_correction_bias
  std::vector<bool> sparse_layer;  // per layer: MoE, else the dense MLP

  bool is_moe(int64_t layer) const {
    return layer >= 0 && layer < static_cast<int64_t>(sparse_layer.size()) && sparse_layer[layer];
  }
};

// Matmul weights one token reads in an MoE block: the gate, its top_k experts and the shared
// expert(s) (for FLOP counts).
inline int64_t moe_active_parameters(const MoeSpec& spec, int64_t hidden) {
  return hidden * spec.routing.num_experts +
         3 * hidden * (spec.routing.top_k * spec.expert_ffn + spec.shared_ffn);
}

// The MoE spec of an MoE architecture (DeepseekV2/V3, Mixtral, Qwen2Moe, Qwen3Moe); nullopt for a
// dense model (including DeepSeek configs without routed experts). Errors name the bad field.
Result<std::optional<MoeSpec>> parse_moe_spec(const ModelConfig& config);

// Storage for weights that FP8 checkpoints quantise: F8E4M3 for FP8 models (their tensors are
// FP8 already, and dummy weights are quantised into fp8 blocks), else `storage`.
std::optional<DType> linear_storage(const ModelConfig& config, std::optional<DType> storage);

// Scratch for MLPs and MoE blocks of up to `max_tokens` tokens; sized once at load.
class MoeWorkspace {
 public:
  void allocate(const std::optional<MoeSpec>& spec, int64_t hidden, int64_t dense_ffn,
                int64_t max_tokens);
  int64_t bytes() const { return static_cast<int64_t>(buf_.size() + tp_buf_.size()); }
  int64_t max_tokens() const { return max_tokens_; }
  // The 4-byte slots allocate() lays out (logits ... gate1, each rounded up to 16), and their
  // total bytes: what bytes() is after allocate() with the same arguments.
  static std::array<int64_t, 11> slot_sizes(const std::optional<MoeSpec>& spec, int64_t hidden,
                                            int64_t dense_ffn, int64_t max_tokens);
  static int64_t bytes_for(const std::optional<MoeSpec>& spec, int64_t hidden, int64_t dense_ffn,
                           int64_t max_tokens);

  float* logits = nullptr;     // [T, E] gate logits
  int32_t* ids = nullptr;      // [T, top_k]
  float* weights = nullptr;    // [T, top_k]
  int32_t* offsets = nullptr;  // [E + 1]
  int32_t* entries = nullptr;  // [T * top_k]
  float* xe = nullptr;         // [T, H] one expert's gathered inputs
  float* gu = nullptr;         // [T, 2 * max ffn]
  float* act = nullptr;        // [T, max ffn]
  float* eo = nullptr;         // [T, H] one expert's outputs
  float* shared = nullptr;     // [T, H]
  float* gate1 = nullptr;      // [T] Qwen2-MoE shared gate
  // Tensor/expert parallelism: scratch for the all-gather of the experts' outputs (grown to the
  // largest request; MoeBlock::parallel_scratch_floats()).
  float* reserve_parallel(int64_t floats);
  int64_t parallel_bytes() const { return static_cast<int64_t>(tp_buf_.size()); }

 private:
  AlignedBuffer buf_, tp_buf_;
  int64_t max_tokens_ = 0;
};

// A SwiGLU MLP: down(silu(gate(x)) * up(x)), gate and up fused in one weight.
struct DenseMlp {
  PackedWeight gate_up;  // [2F, H]
  PackedWeight down;     // [H, F]
  int64_t ffn = 0;

  // Loads <prefix>gate_proj/up_proj/down_proj.weight (or Mixtral's w1/w3/w2 when `mixtral`).
  static Result<DenseMlp> load(WeightSource& src, const std::string& prefix, int64_t hidden,
                               int64_t ffn, int64_t layer, std::optional<DType> storage,
                               const Fp8Quantization& fp8, bool mixtral = false);
  // Loads gate, up and down from a name table (HF and GGUF names).
  static Result<DenseMlp> load(WeightSource& src, const TensorName& gate, const TensorName& up,
                               const TensorName& down, int64_t hidden, int64_t ffn, int64_t layer,
                               std::optional<DType> storage, const Fp8Quantization& fp8 = {});
  // What the two load() overloads would build, from the tensors' metadata (memory_estimate.h):
  // gate_up, then down.
  static Result<std::array<WeightPlan, 2>> plan(WeightSource& src, const std::string& prefix,
                                                int64_t hidden, int64_t ffn, int64_t layer,
                                                std::optional<DType> storage,
                                                const Fp8Quantization& fp8, bool mixtral = false);
  static Result<std::array<WeightPlan, 2>> plan(WeightSource& src, const TensorName& gate,
                                                const TensorName& up, const TensorName& down,
                                                int64_t hidden, int64_t ffn, int64_t layer,
                                                std::optional<DType> storage,
                                                const Fp8Quantization& fp8 = {});
  // y[T, H] = MLP(x[T, H]); uses ws.gu and ws.act.
  void forward(const float* x, int64_t ldx, int64_t T, float* y, int64_t ldy, const KernelOps& ops,
               ThreadPool& pool, MoeWorkspace& ws) const;
  int64_t bytes() const { return gate_up.bytes() + down.bytes(); }
  int64_t parameters() const { return 3 * ffn * down.n(); }
  // Appends gate_up then down, the order forward() reads them (PackedWeight::place_in_order).
  void append_weights_in_order(std::vector<PackedWeight*>* out) {
    out->push_back(&gate_up);
    out->push_back(&down);
  }
  // <prefix>gate_up and <prefix>down, sharded as given (column and row for a dense MLP).
  void describe(const std::string& prefix, Sharding gate_up_sharding, Sharding down_sharding,
                std::vector<LinearInfo>* out) const;
};

class MoeBlock {
 public:
  // With a tensor-parallel group (parallel.tp_size > 1) only this rank's routed experts are read.
  static Result<MoeBlock> load(WeightSource& src, const MoeSpec& spec, const ModelConfig& config,
                               int64_t layer, std::optional<DType> storage,
                               const ModelParallel& parallel = {});

  // Adds what load() would build to `out` (router, routed experts, shared expert(s) and gate,
  // the selection bias), from the tensors' metadata (memory_estimate.h); with a group, this
  // rank's experts.
  static Status plan(WeightSource& src, const MoeSpec& spec, const ModelConfig& config,
                     int64_t layer, std::optional<DType> storage, WeightBytesByClass* out,
                     const ModelParallel& parallel = {});

  // y[T, H] = MoE(x[T, H]) for the normalised hidden states x. T <= ws.max_tokens(). Errors only
  // from the tensor-parallel group (a rank gone or silent).
  Status forward(const float* x, int64_t ldx, int64_t T, float* y, int64_t ldy,
                 const KernelOps& ops, ThreadPool& pool, MoeWorkspace& ws) const;

  // The same, token by token and expert by expert in routing order, summed in double: the plain
  // reference the tests hold forward() to.
  void forward_reference(const float* x, int64_t ldx, int64_t T, float* y, int64_t ldy,
                         const KernelOps& ops, ThreadPool& pool, MoeWorkspace& ws) const;

  // Appends this block's matmul weights in the order forward() reads them (router, experts by
  // index, shared expert) for PackedWeight::place_in_order().
  void append_weights_in_order(std::vector<PackedWeight*>* out);

  // The router and shared expert(s) as replicated / column / row, the routed experts as
  // expert-parallel.
  void describe(const std::string& prefix, std::vector<LinearInfo>* out) const;

  // Under tensor parallelism the step's tokens go in chunks of consecutive tokens, each as long
  // as no rank's experts get more than parallel_rows() of its (token, slot) entries: the ranks
  // all-gather parallel_rows() rows of hidden floats at most, and the scratch holds (size + 1) x
  // parallel_rows() of them, within kParallelScratchBytes (at least top_k rows: one token's).
  // Each expert's weights are read once per chunk; with balanced routing a chunk holds about
  // size x parallel_rows() / top_k tokens (~1000 for DeepSeek-V3 at TP 8). A token's result does
  // not depend on its chunk.
  static constexpr int64_t kParallelScratchBytes = int64_t{256} << 20;
  int64_t parallel_rows() const { return parallel_rows_; }
  // Another bound (tests; at least top_k).
  void set_parallel_rows(int64_t rows) { parallel_rows_ = std::max<int64_t>(rows, routing_.top_k); }
  // The scratch floats forward() needs (MoeWorkspace::reserve_parallel; 0 for one process).
  int64_t parallel_scratch_floats(int64_t max_tokens) const;
  static int64_t parallel_rows_for(const MoeSpec& spec, int64_t hidden, int tp_size);
  static int64_t parallel_scratch_floats_for(const MoeSpec& spec, int64_t hidden, int tp_size,
                                             int64_t max_tokens);
  // This rank's routed experts [expert_begin(), expert_begin() + local_experts()).
  int64_t expert_begin() const { return expert_begin_; }
  int64_t local_experts() const { return static_cast<int64_t>(experts_.size()); }

  // Bytes of every weight held (matmuls and the selection bias; this rank's experts).
  int64_t bytes_total() const;
  // Bytes one token reads: the gate, top_k experts and the shared expert (under expert
  // parallelism, this rank's expected share of the top_k experts).
  int64_t bytes_active() const;
  int64_t parameters() const;

 private:
  void run_expert(const DenseMlp& mlp, const float* x, int64_t ldx, int64_t n, float* y,
                  int64_t ldy, const KernelOps& ops, ThreadPool& pool, MoeWorkspace& ws) const;
  Status add_shared(const float* x, int64_t ldx, int64_t T, float* y, int64_t ldy,
                    const KernelOps& ops, ThreadPool& pool, MoeWorkspace& ws) const;
  Status forward_parallel(const float* x, int64_t ldx, int64_t T, float* y, int64_t ldy,
                          const KernelOps& ops, ThreadPool& pool, MoeWorkspace& ws) const;

  MoeRoutingConfig routing_;
  Comm* comm_ = nullptr;  // the tensor-parallel group; null: one process
  int64_t expert_begin_ = 0;
  int64_t parallel_rows_ = 0;
  int64_t hidden_ = 0;
  PackedWeight gate_;              // [E, H] router, f32
  std::vector<float> bias_;        // [E] selection-only correction bias, or empty
  std::vector<DenseMlp> experts_;  // this rank's: expert expert_begin_ + i
  std::optional<DenseMlp> shared_;
  std::optional<SplitSwiGlu> shared_split_;  // tensor parallel: the shared expert(s) split
  PackedWeight shared_gate_;                 // [1, H] f32 (Qwen2-MoE), or empty
};

}  // namespace strata
