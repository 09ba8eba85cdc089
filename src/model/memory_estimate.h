// What a model would hold in memory, without loading its weights: from the config (config.json,
// or a GGUF file's metadata and tensor table) and the load options (dtype, quantization,
// hf_overrides, mtp_module, limits). For `strata plan` and for the engine's own memory plan.
//
// Contract: for the options load_model() accepts,
//   estimate_weight_bytes(o)->total()       == load_model(o)->model->weight_bytes_total()
//   estimate_workspace_bytes(o, threads)    == load_model(o)->model->workspace_bytes()
// exactly (with o.pool of `threads` threads), and by_dtype equals the model's linear_layers()
// bytes grouped by dtype_name(). Errors are the loader's for the same options (unknown
// architecture, bad --dtype / --quantization, missing tensors, wrong shapes, ...).
//
// Nothing is allocated for weights or workspaces: a DeepSeek-V3 671B config is estimated in
// milliseconds. What is shared with loading, and what mirrors it:
//   shared: the option and format resolution and the weight source (loader.cpp prepare_load(),
//           incl. the MTP renaming), the configs (parse_moe_spec, parse_mla_spec), the checkpoint
//           name tables, every storage decision (packed_storage(), embedding_storage(),
//           matmul_storage(), linear_storage(), the AWQ/GPTQ integer-layout test), every packed
//           size (PackedWeight::bytes_for(), which PackedWeight::bytes() itself uses) and every
//           workspace size (the bytes_for() companions the workspaces' allocate() use);
//   mirrored: the walk over a model's weights (DecoderModel::estimate() beside load(), and each
//           architecture's plan functions beside its load functions: MlaAttention::plan,
//           MoeBlock::plan, DenseMlp::plan, the Llama attention in llama.cpp). A weight added
//           to a load function must be added to its plan function too; the tests in
//           tests/model/memory_estimate_test.cpp compare both for every architecture.
// The functions are defined in loader.cpp, beside load_model(), whose preparation they share.
// Value-dependent choices are decided by reading the few small tensors they depend on (AWQ/GPTQ
// g_idx and compressed-tensors scales), never the weights.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "core/dtype.h"
#include "core/status.h"
#include "model/model.h"

namespace strata {

struct WeightBytesByClass {
  int64_t embedding = 0;       // the token embedding table (also a tied LM head's source)
  int64_t attention = 0;       // QKV/O, MLA projections and per-head W_UK/W_UV
  int64_t dense_mlp = 0;       // dense SwiGLU layers
  int64_t routed_experts = 0;  // MoE routed experts
  int64_t shared_experts = 0;  // MoE shared expert(s) and Qwen2-MoE's shared-expert gate
  int64_t router = 0;          // MoE gates
  int64_t lm_head = 0;         // the output head (a packed copy when tied)
  int64_t other = 0;           // norms, biases, MoE selection biases, the MTP input projection
  // Matmul weight bytes by storage dtype name (dtype_name()), as the worker's "Weights by type"
  // log line groups the model's linear_layers().
  std::map<std::string, int64_t> by_dtype;
  // Model::weight_dtype() (FP8 checkpoints report FP8; else the output head's storage): the KV
  // cache dtype's default follows it.
  DType weight_dtype = DType::kBF16;

  int64_t total() const {
    return embedding + attention + dense_mlp + routed_experts + shared_experts + router + lm_head +
           other;
  }
  // Adds a matmul weight of `bytes` stored as `dtype` to the class `cls`.
  void add_matmul(int64_t WeightBytesByClass::*cls, DType dtype, int64_t bytes) {
    this->*cls += bytes;
    by_dtype[dtype_name(dtype)] += bytes;
  }
};

struct ModelMemoryEstimate {
  WeightBytesByClass weights;
  int64_t workspace_bytes = 0;  // Model::workspace_bytes()
  KvSpec kv_spec;               // Model::kv_spec()
};

// Both at once (one pass over the config and tensor table). `threads`: the compute threads of
// the pool the model would run on (attention scratch is per thread).
Result<ModelMemoryEstimate> estimate_model_memory(const LoadOptions& options, int threads);
Result<WeightBytesByClass> estimate_weight_bytes(const LoadOptions& options);
// Model::workspace_bytes() of the model load_model(options) would build, for options.limits and
// `threads` compute threads.
Result<int64_t> estimate_workspace_bytes(const LoadOptions& options, int threads);

}  // namespace strata
