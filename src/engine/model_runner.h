// Turns a scheduler step plan into the model's flattened batch (token ids, positions, slot
// mapping, block tables) and runs the forward pass over the paged KV storage.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/ops.h"
#include "kv/kv_storage.h"
#include "model/model.h"
#include "sched/scheduler.h"

namespace strata::engine {

class ModelRunner {
 public:
  ModelRunner(Model& model, KvStorage& storage, const KernelOps& ops);

  // Runs one step. Logits rows are produced for the scheduled requests that sample, in plan
  // order: after the call, sample_plan_index()[r] is the plan entry of logits row r.
  Status execute(const sched::SchedulerOutput& plan, const sched::Scheduler& scheduler,
                 float* logits);
  const std::vector<int>& sample_plan_index() const { return sample_plan_index_; }
  // First token row of plan entry i in the last batch.
  int32_t row_start(int i) const { return query_start_[i]; }
  // Logits of more rows of the last batch (prompt logprobs), in groups the model allows.
  Status logits_for_rows(std::span<const int32_t> rows, float* logits);

  Model& model() { return model_; }
  const KernelOps& ops() const { return ops_; }

 private:
  Model& model_;
  KvStorage& storage_;
  const KernelOps& ops_;
  std::vector<PagedKvLayer> layers_;
  int64_t block_size_;
  // Per-step buffers, reused.
  std::vector<int32_t> token_ids_, positions_, query_start_, seq_lens_, block_tables_, rows_;
  std::vector<int64_t> slots_;
  std::vector<int> sample_plan_index_;
};

}  // namespace strata::engine
