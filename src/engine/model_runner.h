// Turns a step plan into the model's flattened batch (token ids, positions, slot mapping, block
// tables) and runs the forward pass over the paged KV storage. The runner keeps its own block
// table per request, built from the plans' new block ids alone (as a worker in another process
// must): a table is replaced when an entry has new_block_table, extended otherwise, and dropped
// for the plan's finished and preempted requests.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "kernels/ops.h"
#include "kv/kv_storage.h"
#include "model/model.h"
#include "sched/step_plan.h"

namespace strata::engine {

class ModelRunner {
 public:
  ModelRunner(Model& model, KvStorage& storage, const KernelOps& ops);

  // Applies the plan's block-table changes and runs the step. Logits rows are produced for the
  // entries that sample, in plan order (an entry with d draft tokens gets d + 1 consecutive rows:
  // its last known token's, then each draft's): after the call, sample_plan_index()[r] is the
  // plan entry of logits row r. Errors for a plan that does not fit the tables (a block beyond a
  // request's table, an unknown request without a whole table) or the model's limits.
  // `input_hidden`: [tokens of the plan, hidden] for a multi-token-prediction module (its
  // ForwardBatch::input_hidden), empty for every other model.
  Status execute(const sched::StepPlan& plan, float* logits,
                 std::span<const float> input_hidden = {});
  const std::vector<int>& sample_plan_index() const { return sample_plan_index_; }
  // Seconds the last execute() spent in the model's forward pass (the rest was the tables and
  // the batch layout).
  double forward_seconds() const { return forward_seconds_; }
  // First token row of plan entry i in the last batch.
  int32_t row_start(int i) const { return query_start_[i]; }
  // Logits of more rows of the last batch (prompt logprobs), in groups the model allows.
  Status logits_for_rows(std::span<const int32_t> rows, float* logits);
  // Pipeline overlap (a stage before the last): execute() runs the stage's forward pass only and
  // leaves the logits to a later logits_for_rows(logits_rows()) (kept by the caller, since the
  // next execute() replaces them), so the stage can start the next micro-batch first.
  void set_defer_logits(bool defer) { defer_logits_ = defer; }
  // The batch rows whose logits the last execute() asked for (sample_plan_index() order), and the
  // first row of each plan entry (size entries + 1).
  const std::vector<int32_t>& logits_rows() const { return rows_; }
  const std::vector<int32_t>& query_starts() const { return query_start_; }
  // The runner's block table of a request (empty when it has none), for tests.
  std::span<const kv::BlockId> block_table(const std::string& request_id) const;
  size_t num_tables() const { return tables_.size(); }

  Model& model() { return model_; }
  const KernelOps& ops() const { return *ops_; }
  // Replaces the op table (benchmarks time every op through a wrapping table).
  void set_ops(const KernelOps& ops) { ops_ = &ops; }

 private:
  Status update_tables(const sched::StepPlan& plan);

  Model& model_;
  KvStorage& storage_;
  const KernelOps* ops_;
  std::vector<PagedKvLayer> layers_;
  int64_t block_size_;
  std::unordered_map<std::string, std::vector<kv::BlockId>> tables_;
  // Per-step buffers, reused.
  std::vector<const std::vector<kv::BlockId>*> step_tables_;
  std::vector<int32_t> positions_, query_start_, seq_lens_, block_tables_, rows_;
  std::vector<int64_t> slots_;
  std::vector<int> sample_plan_index_;
  std::vector<int32_t> state_slots_;
  std::vector<ForwardBatch::StateCopy> state_restores_;
  std::vector<ForwardBatch::StateSnapshot> state_snapshots_;
  double forward_seconds_ = 0;
  bool defer_logits_ = false;
};

}  // namespace strata::engine
