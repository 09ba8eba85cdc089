#include "engine/model_runner.h"

#include <algorithm>

namespace strata::engine {

ModelRunner::ModelRunner(Model& model, KvStorage& storage, const KernelOps& ops)
    : model_(model), storage_(storage), ops_(ops), block_size_(storage.spec().block_size) {
  const KvStorageSpec& s = storage.spec();
  for (int64_t l = 0; l < s.num_layers; ++l)
    layers_.push_back({s.dtype, s.block_size, s.num_kv_heads, s.head_dim, storage.k(l),
                       storage.v(l), 1.0f, 1.0f, storage.k_scales(l), storage.v_scales(l)});
}

Status ModelRunner::execute(const sched::SchedulerOutput& plan, const sched::Scheduler& scheduler,
                            float* logits) {
  token_ids_.clear();
  positions_.clear();
  slots_.clear();
  query_start_.assign(1, 0);
  seq_lens_.clear();
  rows_.clear();
  sample_plan_index_.clear();
  int64_t max_blocks = 1;
  for (const auto& s : plan.scheduled)
    max_blocks = std::max<int64_t>(max_blocks, scheduler.block_table(s).size());
  block_tables_.assign(plan.scheduled.size() * max_blocks, 0);
  for (size_t i = 0; i < plan.scheduled.size(); ++i) {
    const sched::ScheduledRequest& s = plan.scheduled[i];
    auto table = scheduler.block_table(s);
    std::copy(table.begin(), table.end(), block_tables_.begin() + i * max_blocks);
    for (int64_t t = 0; t < s.num_scheduled_tokens; ++t) {
      const int64_t pos = s.num_computed_tokens + t;
      token_ids_.push_back(s.token_ids[t]);
      positions_.push_back(static_cast<int32_t>(pos));
      slots_.push_back(static_cast<int64_t>(table[pos / block_size_]) * block_size_ +
                       pos % block_size_);
    }
    query_start_.push_back(static_cast<int32_t>(token_ids_.size()));
    seq_lens_.push_back(static_cast<int32_t>(s.num_computed_tokens + s.num_scheduled_tokens));
    if (s.will_sample) {
      rows_.push_back(query_start_.back() - 1);
      sample_plan_index_.push_back(static_cast<int>(i));
    }
  }
  ForwardBatch b{token_ids_, positions_,    slots_,     query_start_,
                 seq_lens_,  block_tables_, max_blocks, rows_};
  return model_.forward(b, layers_, ops_, logits);
}

Status ModelRunner::logits_for_rows(std::span<const int32_t> rows, float* logits) {
  return model_.compute_logits(rows, ops_, logits);
}

}  // namespace strata::engine
