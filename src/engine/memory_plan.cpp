#include "engine/memory_plan.h"

#include <algorithm>
#include <cstdio>

#include "core/strings.h"

namespace strata::engine {
namespace {

std::string gib(int64_t bytes) {
  return format_bytes(static_cast<double>(bytes));
}

std::string number(double x) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", x);
  return buf;
}

}  // namespace

Result<MemoryPlan> plan_memory(const MemoryPlanInputs& in) {
  MemoryPlan plan;
  plan.block_size = in.block_size;
  plan.memory_budget =
      static_cast<int64_t>(static_cast<double>(in.device_memory_bytes) * in.gpu_memory_utilization);
  plan.weight_bytes = in.weight_bytes;
  plan.workspace_bytes = in.workspace_bytes;
  plan.kv_bytes_per_token = in.kv_bytes_per_token;
  plan.draft_kv_bytes_per_token = in.draft_kv_bytes_per_token;
  const int64_t block_bytes =
      in.kv_block_bytes > 0 ? in.kv_block_bytes : plan.kv_bytes_per_token * plan.block_size;
  plan.block_bytes = block_bytes;
  if (in.kv_block_bytes > 0)  // for logs: the average, rounded up
    plan.kv_bytes_per_token = (in.kv_block_bytes + plan.block_size - 1) / plan.block_size;
  if (in.state_bytes_per_slot > 0) plan.state_bytes_per_slot = in.state_bytes_per_slot;
  const std::string util = "--gpu-memory-utilization " + number(in.gpu_memory_utilization);
  if (in.kv_cache_memory_bytes > 0) {
    plan.kv_bytes = in.kv_cache_memory_bytes;
  } else {
    if (plan.weight_bytes >= plan.memory_budget)
      return resource_exhausted("the weights need " + gib(plan.weight_bytes) +
                                ", more than the budget of " + gib(plan.memory_budget) + " (" +
                                util + " of " + gib(in.device_memory_bytes) +
                                "); use more devices, a smaller dtype or a quantized checkpoint");
    const int64_t left = plan.memory_budget - plan.weight_bytes;
    if (plan.workspace_bytes >= left) {
      std::string most;
      if (in.workspace_for_tokens) {  // the largest token budget whose activations fit
        int64_t lo = 0, hi = in.max_num_batched_tokens;
        while (lo < hi) {
          const int64_t mid = (lo + hi + 1) / 2;
          if (in.workspace_for_tokens(mid) < left)
            lo = mid;
          else
            hi = mid - 1;
        }
        most = lo > 0 ? "; at most " + std::to_string(lo) +
                            " fit (and leave no room for the KV "
                            "cache: ask for fewer)"
                      : "; not even one token fits";
      }
      return resource_exhausted(
          "--max-num-batched-tokens " + std::to_string(in.max_num_batched_tokens) + " needs " +
          gib(plan.workspace_bytes) + " of activations; " + gib(left) + " are left after " +
          gib(plan.weight_bytes) + " of weights (" + util + ")" + most);
    }
    plan.kv_bytes = left - plan.workspace_bytes;
  }
  const int64_t needed = (in.max_model_len + plan.block_size - 1) / plan.block_size;
  if (plan.state_bytes_per_slot > 0) {
    // One sequence needs its blocks and one slot. Beyond that (`room`), the running slots take at
    // most half: max_num_seqs sequences, or as many as fit there (the scheduler then runs fewer
    // at once: their state is what limits concurrency), and the prefix-cache snapshots at most a
    // quarter; the blocks get the rest.
    const int64_t slot = plan.state_bytes_per_slot;
    const int64_t room = plan.kv_bytes - needed * block_bytes - slot;
    if (room < 0) {
      const int64_t most =
          std::max<int64_t>(0, (plan.kv_bytes - slot) / block_bytes) * plan.block_size;
      return resource_exhausted(
          "max_model_len " + std::to_string(in.max_model_len) + " needs " + std::to_string(needed) +
          " KV blocks (" + gib(needed * block_bytes) + ") and one per-sequence state slot (" +
          gib(slot) + ") but the KV memory is " + gib(plan.kv_bytes) +
          "; lower --max-model-len (at most " + std::to_string(most) +
          " with one sequence), or raise --kv-cache-memory / --gpu-memory-utilization");
    }
    const int64_t running =
        std::max<int64_t>(1, std::min(in.num_running_state_slots, 1 + room / 2 / slot));
    const int64_t snapshots =
        std::max<int64_t>(0, std::min(in.num_snapshot_state_slots, room / 4 / slot));
    plan.num_state_slots = running + snapshots;
    plan.num_snapshot_slots = snapshots;
    plan.max_running_seqs = running;
  }
  const int64_t state = plan.state_bytes();
  plan.num_blocks = block_bytes > 0 ? (plan.kv_bytes - state) / block_bytes : 0;
  if (plan.num_blocks < needed)
    return resource_exhausted("max_model_len " + std::to_string(in.max_model_len) + " needs " +
                              std::to_string(needed) + " KV blocks (" + gib(needed * block_bytes) +
                              ") but only " + std::to_string(plan.num_blocks) + " fit in " +
                              gib(plan.kv_bytes) +
                              " of KV memory; lower --max-model-len (at most " +
                              std::to_string(plan.num_blocks * plan.block_size) +
                              "), or raise --kv-cache-memory / --gpu-memory-utilization");
  plan.kv_bytes = plan.num_blocks * block_bytes;
  return plan;
}

Result<int64_t> resolve_block_size(int64_t block_size, bool block_size_given,
                                   int64_t block_size_multiple, bool hybrid,
                                   bool fp8_ds_mla_sparse) {
  if (fp8_ds_mla_sparse) {
    if (block_size_given && block_size != 64)
      return invalid_argument("--block-size " + std::to_string(block_size) +
                              ": DeepSeek-V3.2's fp8_ds_mla KV cache takes blocks of 64 tokens "
                              "(as vLLM's FlashMLA sparse kernels); use --block-size 64 or leave "
                              "it out, or another --kv-cache-dtype");
    return int64_t{64};
  }
  if (!block_size_given && hybrid) block_size = std::max<int64_t>(256, block_size_multiple);
  if (block_size_multiple > 1 && block_size % block_size_multiple != 0)
    return invalid_argument("--block-size " + std::to_string(block_size) +
                            ": this model's hybrid KV layout needs a multiple of " +
                            std::to_string(block_size_multiple) + " tokens per block (e.g. " +
                            std::to_string(std::max<int64_t>(256, block_size_multiple)) +
                            ", vLLM's for DeepSeek-V4)");
  return block_size;
}

}  // namespace strata::engine
