// The skeleton every architecture here shares: token embedding -> layers -> final norm -> logits,
// where each layer is
//   x = rms_norm(h); h += attention(x);  x = rms_norm(h); h += feed_forward(x)
// and the feed-forward is a dense SwiGLU MLP or a mixture-of-experts block (model/moe.h). The
// skeleton owns the checkpoint names of the shared tensors, the batch validation, the logits path,
// the shared workspace, the weight accounting and the placement of the weights in forward order.
// An architecture file supplies only its attention (a Llama-family GQA layer, DeepSeek's MLA)
// through the hooks below.
//
// Tensor and pipeline parallelism (ModelBuildOptions::parallel, model/parallel.h), exact by
// construction: no float sum crosses ranks, so every rank's logits equal one process's bit for
// bit. A pipeline stage holds and runs the layers [first_layer, end_layer) only (kv_spec() and
// forward()'s `kv` are this stage's layers); the first stage embeds, the others receive the hidden
// states [T, H] from the previous stage and send theirs to the next; the last stage computes the
// logits and broadcasts them to every stage, so every rank's forward() returns the full logits.
// Across the tensor-parallel ranks of a stage: the embedding and the output head are split by
// vocabulary rows (each rank embeds the tokens it holds and the rows are gathered; each computes
// its vocabulary slice of the logits and the slices are gathered); a dense MLP loads its slice of
// the gate/up rows and of the down rows (by output row), gathers the gate/up outputs, applies the
// activation to the whole row as one process does and gathers the down outputs. An attention hook
// returns the whole [T, H] output on every rank (the Llama family splits heads, see llama.cpp;
// an attention that ignores `parallel` runs replicated; MoE blocks split their routed experts,
// model/moe.h). Every gather copies values; none adds them.
#pragma once

#include <array>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/aligned_buffer.h"
#include "core/device_memory.h"
#include "model/layers.h"
#include "model/memory_estimate.h"
#include "model/model.h"
#include "model/moe.h"
#include "model/rope.h"
#include "model/weight_source.h"

namespace strata {

struct ModelBuildOptions {
  std::optional<DType> storage;  // matmul weight dtype; nullopt keeps each tensor's own
  // The decoder layers' matmuls when set (online quantization, --quantization fp8|q8_0): the
  // embedding and the output head keep `storage`, as vLLM leaves them unquantized.
  std::optional<DType> layer_storage;
  std::optional<DType> layers() const { return layer_storage ? layer_storage : storage; }
  // A multi-token-prediction module (LoadOptions::mtp_module): the input stage that combines each
  // token's embedding with the main model's hidden state (enorm, hnorm, eh_proj) is loaded, and
  // forward() needs ForwardBatch::input_hidden.
  bool mtp_module = false;
  bool keep_in_place = true;  // use checkpoint tensors from the mapping when possible
  WorkspaceLimits limits;
  ThreadPool* pool = nullptr;            // compute threads (required)
  DeviceAllocator* allocator = nullptr;  // weight memory; null: host memory
  ModelParallel parallel;                // this rank's shard and stage (model/parallel.h)
  uint64_t seed = 0;                     // LoadOptions::seed (models that make dummy weights)
};

// Checkpoint names of the tensors every architecture has.
struct DecoderNames {
  TensorName embed, final_norm, lm_head, attn_norm, ffn_norm;
};

class DecoderModel : public Model {
 public:
  Status forward(const ForwardBatch& batch, std::span<const PagedKvLayer> kv, const KernelOps& ops,
                 float* logits) final;
  Status compute_logits(std::span<const int32_t> rows, const KernelOps& ops, float* logits) final;
  Status hidden_states(std::span<const int32_t> rows, bool final_norm, const KernelOps& ops,
                       float* out) final;
  bool takes_input_hidden() const final { return mtp_.has_value(); }
  int64_t weight_bytes_per_token() const final { return active_bytes_; }
  int64_t weight_bytes_total() const final { return total_bytes_; }
  int64_t parameter_count() const final { return params_; }
  int64_t workspace_bytes() const final {
    return static_cast<int64_t>(ws_.size() + mtp_ws_.size() + tp_ws_.size()) + ffn_ws_.bytes() +
           attention_workspace_bytes();
  }
  // FP8 checkpoints report FP8 (their output head stays float); else the head's storage (the
  // same on every rank of a parallel deployment, stages without the head included).
  DType weight_dtype() const override { return config().fp8 ? DType::kF8E4M3 : head_dtype_; }
  std::vector<LinearInfo> linear_layers() const final { return linears_; }

  // What load() would build, from the tensors' metadata (memory_estimate.h): the same names,
  // shapes and storage rules walked in load()'s order. An architecture supplies its attention's
  // weights and workspace and its dense feed-forward; MoE layers are MoeBlock::plan().
  struct EstimateHooks {
    std::function<Status(int64_t layer, WeightBytesByClass*)> attention;
    std::function<Status(int64_t layer, WeightBytesByClass*)> dense_mlp;
    int64_t rope_half = 0;                  // as rope_half()
    int64_t attention_workspace_bytes = 0;  // as attention_workspace_bytes()
    int64_t attention_tp_width = 0;         // as attention_tp_width()
  };
  static Result<ModelMemoryEstimate> estimate(const DecoderNames& names, const ModelConfig& config,
                                              WeightSource& weights,
                                              const ModelBuildOptions& options,
                                              const Fp8Quantization& lm_head_fp8,
                                              const EstimateHooks& hooks);
  // What load_dense_mlp() (protected) would hold: gate_up, then down (memory estimates).
  static Result<std::array<WeightPlan, 2>> plan_dense_mlp(
      WeightSource& w, const ModelConfig& c, const TensorName& gate, const TensorName& up,
      const TensorName& down, int64_t ffn, int64_t layer, const ModelBuildOptions& options);

  // The skeleton's own workspace (allocate_workspace() without the attention's): its float slots
  // h, x, tmp, cos, sin, rows, and in all with the feed-forward's and the MTP input's.
  static std::array<int64_t, 6> workspace_slot_sizes(int64_t hidden, int64_t rope_half,
                                                     const WorkspaceLimits& limits);
  static int64_t workspace_bytes_for(const ModelConfig& config, const std::optional<MoeSpec>& moe,
                                     int64_t rope_half, bool mtp_module,
                                     const WorkspaceLimits& limits);
  // The gather buffers of a tensor-parallel rank (0 with tensor parallelism off): a local
  // [T, w] and a stage [tp, T, w] with w the widest gather (the attention's
  // `attention_tp_width` included), rows of logits included.
  static int64_t tp_workspace_floats(const ModelConfig& config, const ModelParallel& parallel,
                                     int64_t attention_tp_width, const WorkspaceLimits& limits);
  // Checks `parallel` against the config (group sizes, the stage's layers) and returns this
  // stage's layers [first, end).
  static Result<ShardRange> stage_layers(const ModelConfig& config, const ModelParallel& parallel);
  // The place a model of these options takes: `parallel`, whose layer range a
  // multi-token-prediction module (one layer, pipeline size 1) ignores, so it may be given the
  // target model's place.
  static ModelParallel module_place(const ModelBuildOptions& options);

 protected:
  DecoderModel(ModelConfig config, std::unique_ptr<WeightSource> weights, ThreadPool& pool)
      : Model(std::move(config)), weights_(std::move(weights)), pool_(pool) {}

  // Loads everything: the shared tensors, then each layer (load_attention, then the layer's
  // feed-forward), the rotary table; places the matmul weights in forward order and sizes the
  // workspaces.
  Status load(const DecoderNames& names, const ModelBuildOptions& options,
              const Fp8Quantization& lm_head_fp8);

  // A layer's feed-forward: a dense SwiGLU MLP or an MoE block.
  struct FeedForward {
    std::optional<DenseMlp> mlp;
    std::optional<MoeBlock> moe;
    // `mlp` holds this tensor-parallel rank's slice (load_dense_mlp()): gate/up rows of its
    // intermediate range, down rows of its hidden range, `ffn` the whole intermediate size.
    bool tp_sharded = false;
  };

  // Hooks of an architecture.
  // Loads layer l's attention weights, adds them to the counters below and declare()s them.
  virtual Status load_attention(int64_t layer, const ModelBuildOptions& options) = 0;
  // Loads layer l's feed-forward (the skeleton counts and declares it).
  virtual Result<FeedForward> load_feed_forward(int64_t layer,
                                                const ModelBuildOptions& options) = 0;
  virtual Result<RopeTable> make_rope() = 0;
  // Values per token of the cos/sin tables (rotary dims / 2).
  virtual int64_t rope_half() const = 0;
  // Appends layer l's attention weights in the order attention() reads them.
  virtual void append_attention_weights(int64_t layer, std::vector<PackedWeight*>* out) = 0;
  // Sizes the attention's own workspace for the limits (called once, after loading).
  virtual void allocate_attention_workspace(const WorkspaceLimits& limits) = 0;
  virtual int64_t attention_workspace_bytes() const = 0;
  // Checks that `kv` (one entry per layer, count already checked) is the cache this attention
  // writes.
  virtual Status validate_kv(std::span<const PagedKvLayer> kv) const { return ok_status(); }
  // out[T, H] = attention of layer l over the normalised hidden states x[T, H] (row stride H);
  // writes this step's rows into kv first. cos/sin: [T, rope_half()].
  virtual void attention(int64_t layer, const float* x, const ForwardBatch& batch,
                         const PagedKvLayer& kv, const float* cos, const float* sin, float* out,
                         const KernelOps& ops) = 0;

  // A dense SwiGLU MLP [gate, up: (F, H); down: (H, F)] as this rank holds it: whole with
  // tensor parallelism off, else this rank's slice (FeedForward::tp_sharded).
  Result<FeedForward> load_dense_mlp(const TensorName& gate, const TensorName& up,
                                     const TensorName& down, int64_t ffn, int64_t layer,
                                     const ModelBuildOptions& options);

  // Tensor parallelism. Every rank of the stage holds [T, ld] floats at `local` whose row holds
  // `parts` parts side by side, each its shard (shard_range over `units` units of `unit` values)
  // of a [T, parts * units * unit] quantity; out[T, parts * units * unit] (row stride ldo)
  // receives every rank's shard of each part in place. `local` must hold T * ld floats (ld >= the
  // largest shard's parts * size * unit, the same on every rank). A collective: every rank of the
  // stage calls it with the same arguments. Copies only.
  Status gather_columns(const float* local, int64_t ld, int64_t T, int64_t units, int64_t unit,
                        int parts, float* out, int64_t ldo);
  // The attention hook returns nothing: one whose gather fails records it here; forward()
  // returns it after the hook.
  Status tp_status_ = ok_status();
  // The row stride of a gather's local buffer: the largest shard's parts * size * unit.
  int64_t tp_ld(int64_t units, int64_t unit, int parts) const;
  // A local buffer for gathers (at least T * tp_ld() floats for the widths the skeleton and
  // attention_tp_width() need); null with tensor parallelism off.
  float* tp_local() { return tp_local_; }
  // The widest local row (floats) the attention hook gathers per token with gather_columns().
  virtual int64_t attention_tp_width() const { return 0; }
  const ModelParallel& parallel() const { return par_; }
  int64_t first_layer() const { return first_layer_; }
  // The layers this stage holds and runs (kv_spec().num_layers of the model).
  int64_t num_local_layers() const { return num_layers_; }

  // Records how a matmul weight would be sharded (linear_layers()).
  void declare(const std::string& name, const PackedWeight& w, Sharding sharding);
  void declare(std::vector<LinearInfo> linears);
  WeightSource& weights() { return *weights_; }
  const std::optional<MoeSpec>& moe_spec() const { return moe_spec_; }
  MoeWorkspace& ffn_workspace() { return ffn_ws_; }

  std::unique_ptr<WeightSource> weights_;
  ThreadPool& pool_;
  WorkspaceLimits limits_;
  int64_t active_bytes_ = 0;   // matmul weights one token reads, LM head included
  int64_t total_bytes_ = 0;    // every weight held (embedding, inactive experts, norms too)
  int64_t params_ = 0;         // parameters
  int64_t active_params_ = 0;  // matmul parameters one token uses, all layers (no LM head)

 private:
  Status validate(const ForwardBatch& b, std::span<const PagedKvLayer> kv) const;
  void allocate_workspace(const WorkspaceLimits& limits);
  Status embed(const ForwardBatch& b);
  Status dense_mlp_tp(const DenseMlp& m, const float* x, int64_t T, float* y, const KernelOps& ops);

  // DeepSeek's MTP input stage: h = eh_proj([enorm(embedding) | hnorm(input hidden)]), with the
  // embedding of a token at position 0 zeroed (as vLLM's DeepSeek MTP layer does).
  struct MtpInput {
    std::vector<float> enorm, hnorm;
    PackedWeight eh_proj;  // [hidden, 2 * hidden]
  };
  std::optional<MtpInput> mtp_;
  AlignedBuffer mtp_ws_;  // [max_num_tokens, 2 * hidden]
  EmbeddingTable embed_;
  std::vector<float> final_norm_;
  PackedWeight lm_head_;
  DType head_dtype_ = DType::kF32;  // the output head's storage (planned on other stages)
  std::vector<std::vector<float>> attn_norm_, ffn_norm_;
  std::vector<FeedForward> ffn_;
  std::optional<MoeSpec> moe_spec_;  // parsed by load()
  std::optional<RopeTable> rope_;
  std::vector<LinearInfo> linears_;
  int64_t last_num_tokens_ = 0;  // tokens of the last forward (rows compute_logits may read)
  ModelParallel par_;
  int64_t first_layer_ = 0, num_layers_ = 0;  // this stage's layers
  ShardRange vocab_range_;                    // the vocabulary rows this rank holds
  AlignedBuffer tp_ws_;                       // gathers: local [T, w], stage [tp, T, w]
  float *tp_local_ = nullptr, *tp_stage_ = nullptr;
  MoeWorkspace ffn_ws_;
  AlignedBuffer ws_;
  float *h_ = nullptr, *x_ = nullptr, *tmp_ = nullptr, *cos_ = nullptr, *sin_ = nullptr;
  float* rows_ = nullptr;
};

}  // namespace strata
