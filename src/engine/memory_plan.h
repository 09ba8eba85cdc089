// The memory plan: how the engine divides a device's memory between the weights, the activation
// workspace and the KV cache, and the refusals when they do not fit. One pure function, used by
// the worker at start (from the loaded model's figures) and by `strata plan` (from estimates of
// the same figures, model/memory_estimate.h), so a plan refuses exactly what the engine would.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

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
  // The workspace for another token budget (same other limits), to say how many tokens fit when
  // the activations do not; empty: the refusal says less.
  std::function<int64_t(int64_t max_num_batched_tokens)> workspace_for_tokens;
};

// The worker's logits buffers: two [max_logit_rows, vocab] f32 arrays (sampling and prompt
// logprobs).
inline int64_t logits_workspace_bytes(int64_t vocab_size, int64_t max_logit_rows) {
  return vocab_size * 4 * 2 * max_logit_rows;
}

// The plan, or a kResourceExhausted refusal that names the flag to change and by how much:
// the weights alone over the budget; the activations for --max-num-batched-tokens over what the
// weights leave (with the largest token budget that fits); no room for one max_model_len request
// in the KV cache (with the largest max_model_len that fits).
Result<MemoryPlan> plan_memory(const MemoryPlanInputs& in);

}  // namespace strata::engine
