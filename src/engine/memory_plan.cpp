#include "engine/memory_plan.h"

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
  const int64_t block_bytes = plan.kv_bytes_per_token * plan.block_size;
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
  plan.num_blocks = block_bytes > 0 ? plan.kv_bytes / block_bytes : 0;
  const int64_t needed = (in.max_model_len + plan.block_size - 1) / plan.block_size;
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

}  // namespace strata::engine
