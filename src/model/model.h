// The model interface the engine drives, and load_model(): config + weights -> a ready model.
// One file per architecture family (llama.cpp for Llama/Mistral/Qwen2/Qwen3 and their MoE
// variants, deepseek.cpp for DeepSeek-V2/V3) on the shared skeleton of model/decoder.h, registered
// by the Hugging Face `architectures` name in loader.cpp.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/device_memory.h"
#include "core/fp8_ds_mla.h"
#include "core/status.h"
#include "core/thread_pool.h"
#include "kernels/ops.h"
#include "model/forward_batch.h"
#include "model/model_config.h"
#include "model/parallel.h"

namespace strata {

// What the KV cache must hold per token and layer: K entries of num_kv_heads x head_dim values and,
// when has_v, V entries of the same shape. MLA (DeepSeek) caches one entry per token and layer, the
// normalised latent and the rotated shared key (kv_lora_rank + qk_rope_head_dim values), and no V.
struct KvSpec {
  int64_t num_layers = 0;
  int64_t num_kv_heads = 0;
  int64_t head_dim = 0;
  bool has_v = true;
  // Per token and layer, one more row of aux_dim values beside K (and V), in the cache dtype
  // with its own row scale when fp8: DeepSeek-V3.2's lightning-indexer key. 0: none.
  int64_t aux_dim = 0;
  // MLA models: the latent values at the start of each K row (kv_lora_rank), the part the
  // fp8_ds_mla layout quantises in groups of 128 (core/fp8_ds_mla.h); 0 for other models.
  int64_t latent_dim = 0;
  // Bytes per token for all layers (K, V and the aux row) at `dtype`, with the f32 row scale of
  // each fp8 row (as KvStorageSpec allocates them); fp8_ds_mla (dtype fp8, MLA only): each K row
  // packed as core/fp8_ds_mla.h says (656 bytes for V3.2), the aux row fp8 with its scale.
  int64_t bytes_per_token(DType dtype, bool fp8_ds_mla = false) const {
    const int64_t scale = dtype == DType::kF8E4M3 ? 4 : 0;
    const int64_t k_row = fp8_ds_mla ? ds_mla_row_bytes(head_dim, latent_dim)
                                     : head_dim * dtype_block_bytes(dtype) + scale;
    return num_layers * ((has_v ? 2 : 1) * num_kv_heads * k_row +
                         (aux_dim > 0 ? aux_dim * dtype_block_bytes(dtype) + scale : 0));
  }
  // The KvStorageSpec fields of the fp8_ds_mla layout: ds_mla_latent (0 when not fp8_ds_mla).
  int64_t ds_mla_latent(bool fp8_ds_mla) const { return fp8_ds_mla ? latent_dim : 0; }

  // Hybrid layouts (DeepSeek-V4). When set, the model lays out each layer's paged block itself:
  // layer_block_bytes(layer, block_size, dtype) bytes per block of `block_size` tokens in
  // `layer` (0: the layer keeps nothing in paged blocks), and the row fields above do not size
  // the paged storage (PagedKvLayer::raw). Block sizes must be multiples of block_size_multiple.
  std::function<int64_t(int64_t layer, int64_t block_size, DType dtype)> layer_block_bytes;
  int64_t block_size_multiple = 1;
  bool hybrid() const { return static_cast<bool>(layer_block_bytes); }
  // Per-sequence state kept outside the paged blocks, in state slots (Model::allocate_state): V4's
  // sliding-window ring and the compressors' pending rows. Bytes of one slot at the KV dtype;
  // unset: no state.
  std::function<int64_t(DType dtype)> state_bytes_per_slot;
  bool has_state() const { return static_cast<bool>(state_bytes_per_slot); }
  // Hybrid layouts: a start-up log line of the KV bytes per token of each kind at `dtype`
  // (e.g. V4's window / compressed / indexer rows and the compressor state), with the totals of
  // one sequence of `context_len` tokens. Unset: the engine describes the rows itself.
  std::function<std::string(DType dtype, int64_t block_size, int64_t context_len)> describe;
  // KV bytes one decode token of one sequence reads at `context_len` tokens of context, over every
  // layer (sparse layouts read less than they hold: V4's window, the top-k compressed rows of its
  // CSA layers, every HCA row and every indexer key). Unset: every row held,
  // context_len * bytes_per_token() (hybrid layouts: the blocks held, an upper bound).
  std::function<int64_t(DType dtype, int64_t context_len)> decode_read_bytes;
};

// The role of a linear layer under tensor parallelism, named as vLLM's linear classes are:
// column-parallel (QKV, gate/up), row-parallel (O, down), vocab-parallel (embedding, LM head),
// replicated (small projections, the MoE router), expert-parallel (whole experts on ranks).
// Strata's split is exact (model/parallel.h): every sharded weight, row-parallel ones included, is
// cut by output rows, and a row-parallel layer all-gathers its input first instead of all-reducing
// partial sums afterwards, so no float sum crosses ranks.
enum class Sharding { kReplicated, kColumn, kRow, kVocab, kExpert };
const char* sharding_name(Sharding s);

// One matmul weight of a model, as linear_layers() reports it.
struct LinearInfo {
  std::string name;  // our name, e.g. "layers.3.attn.qkv" or "layers.1.moe.experts.7.down"
  int64_t rows = 0, cols = 0;
  DType dtype = DType::kF32;
  Sharding sharding = Sharding::kReplicated;
  int64_t bytes = 0;  // as packed in memory
};

// Called with (name, data, rows, cols, row stride) for intermediate activations when set.
using ActivationDump = std::function<void(const std::string& name, const float* data, int64_t rows,
                                          int64_t cols, int64_t ld)>;

// Limits that size the model's workspaces once, at load (no allocation in a forward pass).
struct WorkspaceLimits {
  int64_t max_num_tokens = 2048;  // most tokens in one forward (max_num_batched_tokens)
  int64_t max_seq_len = 2048;     // longest context (max_model_len)
  int64_t max_logit_rows = 256;   // most logits rows one forward returns
};

class Model {
 public:
  virtual ~Model() = default;
  const ModelConfig& config() const { return config_; }
  virtual KvSpec kv_spec() const = 0;

  // Runs the batch: writes this step's K/V into `kv` (one entry per layer) at the slots, and
  // returns logits [batch.logits_rows.size(), vocab_size] in `logits`. Errors for batches over
  // the workspace limits. Not thread-safe: one engine thread calls it.
  virtual Status forward(const ForwardBatch& batch, std::span<const PagedKvLayer> kv,
                         const KernelOps& ops, float* logits) = 0;

  // After forward(): logits [rows.size(), vocab_size] of more token rows of the same batch (for
  // prompt logprobs), at most WorkspaceLimits::max_logit_rows at a time.
  virtual Status compute_logits(std::span<const int32_t> rows, const KernelOps& ops,
                                float* logits) = 0;

  // Bytes of weights one decode step streams (all matmul weights incl. the LM head).
  virtual int64_t weight_bytes_per_token() const = 0;
  // Floating-point operations of one forward pass over `num_tokens` tokens whose attention spans
  // `sum_context` keys in all, returning `num_logit_rows` logits rows (2 per multiply-add).
  virtual double forward_flops(int64_t num_tokens, int64_t sum_context,
                               int64_t num_logit_rows) const = 0;
  // Bytes of all weights held in memory.
  virtual int64_t weight_bytes_total() const = 0;
  virtual int64_t parameter_count() const = 0;
  virtual int64_t workspace_bytes() const = 0;
  // Storage dtype of the matmul weights (for logs).
  virtual DType weight_dtype() const = 0;
  // Every matmul weight in forward order, with how it would be sharded.
  virtual std::vector<LinearInfo> linear_layers() const = 0;

  // After forward(): the hidden states [rows.size(), hidden] of token rows of the same batch,
  // after the final norm or before it (the residual stream). Speculative decoding feeds them to a
  // multi-token-prediction module.
  virtual Status hidden_states(std::span<const int32_t> rows, bool final_norm, const KernelOps& ops,
                               float* out) {
    return unimplemented("this model does not return hidden states");
  }
  // A multi-token-prediction module (DeepSeek's MTP layer): forward() needs
  // ForwardBatch::input_hidden.
  virtual bool takes_input_hidden() const { return false; }

  // Models with per-sequence state (kv_spec().has_state()): the worker calls this once before the
  // first forward with the slot count (running sequences plus prefix-cache snapshots), the memory
  // coming from `allocator` (null: host). forward() then reads and writes the slots
  // ForwardBatch::state_slots names, applies ForwardBatch::state_restores first and takes
  // ForwardBatch::state_snapshots during the pass.
  virtual Status allocate_state(int64_t num_slots, DType kv_dtype, DeviceAllocator* allocator) {
    return unimplemented("this model keeps no per-sequence state");
  }

  void set_activation_dump(ActivationDump dump) { dump_ = std::move(dump); }

 protected:
  explicit Model(ModelConfig config) : config_(std::move(config)) {}
  void dump(const std::string& name, const float* data, int64_t rows, int64_t cols,
            int64_t ld) const {
    if (dump_) dump_(name, data, rows, cols, ld);
  }

  ModelConfig config_;
  ActivationDump dump_;
};

struct LoadOptions {
  std::string model;                 // HF directory or .gguf file
  std::string load_format = "auto";  // auto | safetensors | gguf | dummy
  std::string dtype = "auto";        // auto | float32 | bfloat16 | float16 (| q8_0)
  // --quantization: empty infers it from the checkpoint (gguf, fp8 or none); a method the
  // checkpoint has is checked against it; fp8 or q8_0 on an unquantized checkpoint quantizes the
  // decoder layers' matmuls at load (block FP8, or Q8_0 run by the int8 kernels).
  std::string quantization;
  std::string hf_overrides;  // JSON merged into config.json
  // Load the checkpoint's multi-token-prediction layer (DeepSeek-V3's model.layers.<N> for N =
  // num_hidden_layers, num_nextn_predict_layers >= 1) as a one-layer model that takes the main
  // model's hidden states (ForwardBatch::input_hidden): the draft of `--speculative-config
  // '{"method": "deepseek_mtp"}'`.
  bool mtp_module = false;
  uint64_t seed = 0;  // dummy weights
  WorkspaceLimits limits;
  ThreadPool* pool = nullptr;  // compute threads (required)
  // Where the weights live (the backend's allocator); null: host memory.
  DeviceAllocator* allocator = nullptr;
  // This rank's place in a tensor/pipeline parallel deployment (model/parallel.h): the model loads
  // only its shard and runs only its stage's layers. Default: the whole model.
  ModelParallel parallel;
};

struct LoadedModel {
  std::unique_ptr<Model> model;
  std::string format;  // "safetensors", "gguf" or "dummy"
  double load_seconds = 0;
};

// Reads the config (config.json or GGUF metadata) without loading weights.
Result<ModelConfig> load_model_config(const LoadOptions& options);
Result<LoadedModel> load_model(const LoadOptions& options);

// Architectures Strata can build (HF names).
std::vector<std::string> supported_architectures();

}  // namespace strata
