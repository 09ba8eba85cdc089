// The memory plan: how the engine divides a device's memory between the weights, the activation
// workspace and the KV cache, and the refusals when they do not fit. One pure function, used by
// the worker at start (from the loaded model's figures) and by `strata plan` (from estimates of
// the same figures, model/memory_estimate.h), so a plan refuses exactly what the engine would.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "core/dtype.h"
#include "core/status.h"

namespace strata::engine {

// What the worker decided at start (logged, and reported by /v1/models and benchmarks).
struct MemoryPlan {
  int64_t memory_budget = 0;  // bytes the engine may use
  int64_t weight_bytes = 0;
  int64_t workspace_bytes = 0;
  int64_t kv_bytes = 0;
  int64_t kv_bytes_per_token = 0;        // the target's and the draft model's
  int64_t draft_kv_bytes_per_token = 0;  // the draft model's share (speculative decoding)
  int64_t num_blocks = 0;                // usable KV blocks (the null block excluded)
  int64_t block_size = 0;
  // Bytes of one KV block over every layer (and the draft's): kv_bytes_per_token * block_size,
  // or for hybrid layouts (KvSpec::hybrid()) the sum of the layers' block bytes, which need not
  // be a whole number of bytes per token (kv_bytes_per_token is then rounded up, for logs).
  int64_t block_bytes = 0;
  // Models with per-sequence state (KvSpec::has_state()): the state slots, out of the KV memory
  // (kv_bytes is the paged blocks only): one per running sequence, then the prefix-cache
  // snapshots. 0 slots: no state.
  int64_t state_bytes_per_slot = 0;
  int64_t num_state_slots = 0;     // running + snapshot
  int64_t num_snapshot_slots = 0;  // of which prefix-cache snapshots
  // The sequences that can run at once: --max-num-seqs, or fewer when their state slots do not
  // fit (at most half the KV memory beyond one max_model_len sequence's blocks and slot; the
  // scheduler is given this); 0: no state, --max-num-seqs.
  int64_t max_running_seqs = 0;
  int64_t state_bytes() const { return state_bytes_per_slot * num_state_slots; }
  int64_t num_tokens() const { return num_blocks * block_size; }
};

struct MemoryPlanInputs {
  int64_t device_memory_bytes = 0;  // what the device has (RAM here)
  double gpu_memory_utilization = 0.9;
  int64_t weight_bytes = 0;
  int64_t workspace_bytes = 0;  // activations and logits for max_num_batched_tokens
  int64_t kv_bytes_per_token = 0;
  int64_t draft_kv_bytes_per_token = 0;
  int64_t block_size = 16;
  int64_t kv_cache_memory_bytes = 0;  // --kv-cache-memory; 0: what the budget leaves
  int64_t max_model_len = 0;
  int64_t max_num_batched_tokens = 0;
  // Hybrid layouts: bytes of one block over every layer (then kv_bytes_per_token is ignored for
  // the block count); 0: kv_bytes_per_token * block_size.
  int64_t kv_block_bytes = 0;
  // Per-sequence state (see MemoryPlan): bytes of one slot, running slots (max_num_seqs) and
  // snapshot slots. The state comes out of the KV memory (--kv-cache-memory included).
  int64_t state_bytes_per_slot = 0;
  int64_t num_running_state_slots = 0;
  int64_t num_snapshot_state_slots = 0;
  // The workspace for another token budget (same other limits), to say how many tokens fit when
  // the activations do not; empty: the refusal says less.
  std::function<int64_t(int64_t max_num_batched_tokens)> workspace_for_tokens;
};

// The KV cache dtype when --kv-cache-dtype is auto: the weights' float type, else bf16 (FP8 and
// integer-quantized checkpoints).
inline DType default_kv_dtype(DType weights) {
  return (weights == DType::kF32 || weights == DType::kF16 || weights == DType::kBF16)
             ? weights
             : DType::kBF16;
}

// The worker's logits buffers: two [max_logit_rows, vocab] f32 arrays (sampling and prompt
// logprobs).
inline int64_t logits_workspace_bytes(int64_t vocab_size, int64_t max_logit_rows) {
  return vocab_size * 4 * 2 * max_logit_rows;
}

// The state slots a model with per-sequence state asks for: one per running sequence
// (max_num_seqs) and, with prefix caching, as many prefix-cache snapshots (the window state at
// a cached block boundary: a hit can only resume where a snapshot is kept). plan_memory() gives
// fewer when they do not fit (MemoryPlan::max_running_seqs).
inline int64_t num_snapshot_state_slots(int64_t max_num_seqs, bool prefix_caching) {
  return prefix_caching ? max_num_seqs : 0;
}

// The block size in effect: --block-size when given (it must be a multiple of the layout's
// block_size_multiple: an invalid-argument error naming both otherwise), else the layout's own
// (256 for a hybrid DeepSeek-V4 cache, as vLLM's; 64 for DeepSeek-V3.2's fp8_ds_mla, as vLLM
// forces for its FlashMLA sparse kernels), else the default. `fp8_ds_mla_sparse`: the cache is
// fp8_ds_mla with an indexer (V3.2). A V3.2 fp8_ds_mla cache with another --block-size is
// refused, as vLLM's kernels support only 64.
Result<int64_t> resolve_block_size(int64_t block_size, bool block_size_given,
                                   int64_t block_size_multiple, bool hybrid,
                                   bool fp8_ds_mla_sparse);

// The plan, or a kResourceExhausted refusal that names the flag to change and by how much:
// the weights alone over the budget; the activations for --max-num-batched-tokens over what the
// weights leave (with the largest token budget that fits); no room for one max_model_len request
// in the KV cache (with the largest max_model_len that fits); the state slots over the KV memory
// or leaving no room for one max_model_len request (with the --max-num-seqs that fits).
Result<MemoryPlan> plan_memory(const MemoryPlanInputs& in);

}  // namespace strata::engine
