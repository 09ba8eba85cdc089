#include "engine/model_runner.h"

#include <algorithm>

#include "core/clock.h"

namespace strata::engine {

ModelRunner::ModelRunner(Model& model, KvStorage& storage, const KernelOps& ops)
    : model_(model), storage_(storage), ops_(&ops), block_size_(storage.spec().block_size) {
  const KvStorageSpec& s = storage.spec();
  for (int64_t l = 0; l < s.num_layers; ++l)
    layers_.push_back({s.dtype, s.block_size, s.num_kv_heads, s.head_dim, storage.k(l),
                       storage.v(l), 1.0f, 1.0f, storage.k_scales(l), storage.v_scales(l),
                       storage.aux(l), s.aux_dim, storage.aux_scales(l), s.ds_mla_latent});
  if (s.hybrid())  // the model lays out its blocks itself (KvSpec::layer_block_bytes)
    for (int64_t l = 0; l < s.num_layers; ++l) {
      layers_[static_cast<size_t>(l)].raw = storage.raw(l);
      layers_[static_cast<size_t>(l)].raw_block_bytes = s.layer_block_bytes[static_cast<size_t>(l)];
    }
}

std::span<const kv::BlockId> ModelRunner::block_table(const std::string& request_id) const {
  auto it = tables_.find(request_id);
  return it == tables_.end() ? std::span<const kv::BlockId>() : std::span(it->second);
}

Status ModelRunner::update_tables(const sched::StepPlan& plan) {
  for (const auto& id : plan.finished_ids) tables_.erase(id);
  for (const auto& id : plan.preempted_ids) tables_.erase(id);
  const int64_t num_blocks = storage_.spec().num_blocks;
  step_tables_.clear();
  for (const auto& s : plan.scheduled) {
    auto blocks = plan.block_ids_of(s);
    for (kv::BlockId b : blocks)
      if (b < 0 || b >= num_blocks)
        return internal_error("plan gives request '" + s.request_id + "' block " +
                              std::to_string(b) + ", outside the KV cache of " +
                              std::to_string(num_blocks) + " blocks");
    std::vector<kv::BlockId>* table;
    if (s.new_block_table) {
      table = &tables_[s.request_id];
      table->assign(blocks.begin(), blocks.end());
    } else {
      auto it = tables_.find(s.request_id);
      if (it == tables_.end())
        return internal_error("plan extends the block table of request '" + s.request_id +
                              "', which this runner has never been given");
      table = &it->second;
      table->insert(table->end(), blocks.begin(), blocks.end());
    }
    const int64_t end = s.num_computed_tokens + s.num_scheduled_tokens;
    if (end > static_cast<int64_t>(table->size()) * block_size_)
      return internal_error("request '" + s.request_id + "' runs to position " +
                            std::to_string(end) + " but its block table holds " +
                            std::to_string(table->size()) + " blocks of " +
                            std::to_string(block_size_));
    step_tables_.push_back(table);
  }
  return ok_status();
}

Status ModelRunner::execute(const sched::StepPlan& plan, float* logits,
                            std::span<const float> input_hidden) {
  forward_seconds_ = 0;
  STRATA_RETURN_IF_ERROR(update_tables(plan));
  positions_.clear();
  slots_.clear();
  query_start_.assign(1, 0);
  seq_lens_.clear();
  rows_.clear();
  sample_plan_index_.clear();
  // A plan with nothing to run (a worker given none of this step's requests) only updates the
  // tables.
  if (plan.scheduled.empty()) return ok_status();
  int64_t max_blocks = 1;
  for (const auto* t : step_tables_) max_blocks = std::max<int64_t>(max_blocks, t->size());
  block_tables_.assign(plan.scheduled.size() * max_blocks, 0);
  int32_t row = 0;
  for (size_t i = 0; i < plan.scheduled.size(); ++i) {
    const sched::ScheduledRequest& s = plan.scheduled[i];
    if (s.token_ids_offset != static_cast<uint32_t>(row))
      return internal_error("plan entry '" + s.request_id +
                            "' does not follow the previous entry's tokens");
    const std::vector<kv::BlockId>& table = *step_tables_[i];
    std::copy(table.begin(), table.end(), block_tables_.begin() + i * max_blocks);
    for (int64_t t = 0; t < s.num_scheduled_tokens; ++t) {
      const int64_t pos = s.num_computed_tokens + t;
      positions_.push_back(static_cast<int32_t>(pos));
      slots_.push_back(static_cast<int64_t>(table[pos / block_size_]) * block_size_ +
                       pos % block_size_);
    }
    row += static_cast<int32_t>(s.num_scheduled_tokens);
    query_start_.push_back(row);
    seq_lens_.push_back(static_cast<int32_t>(s.num_computed_tokens + s.num_scheduled_tokens));
    if (s.will_sample) {  // the last known token's row, then one per draft (verification)
      const int32_t end = query_start_.back();
      for (int32_t r = end - 1 - static_cast<int32_t>(s.spec_token_ids_count); r < end; ++r) {
        rows_.push_back(r);
        sample_plan_index_.push_back(static_cast<int>(i));
      }
    }
  }
  // The plan's tokens are laid out entry by entry, as the batch is.
  ForwardBatch b{std::span<const int32_t>(plan.token_ids).first(static_cast<size_t>(row)),
                 positions_,
                 slots_,
                 query_start_,
                 seq_lens_,
                 block_tables_,
                 max_blocks,
                 defer_logits_ ? std::span<const int32_t>() : std::span<const int32_t>(rows_),
                 input_hidden};
  // Per-sequence state (KvSpec::has_state()): the entries' slots, the restores and snapshots.
  state_slots_.clear();
  state_restores_.clear();
  state_snapshots_.clear();
  if (model_.kv_spec().has_state()) {
    for (const sched::ScheduledRequest& s : plan.scheduled) {
      if (s.state_slot < 0)
        return internal_error("plan entry '" + s.request_id +
                              "' has no state slot, and this model keeps per-sequence state");
      state_slots_.push_back(s.state_slot);
    }
    for (const sched::StateRestore& c : plan.state_restores)
      state_restores_.push_back({c.src_slot, c.dst_slot});
    for (const sched::StateSnapshot& c : plan.state_snapshots)
      state_snapshots_.push_back({static_cast<int32_t>(c.entry), c.boundary, c.dst_slot});
    b.state_slots = state_slots_;
    b.state_restores = state_restores_;
    b.state_snapshots = state_snapshots_;
  } else if (!plan.state_restores.empty() || !plan.state_snapshots.empty()) {
    return internal_error("plan restores or snapshots state, and this model keeps none");
  }
  const double t0 = now_seconds();
  Status s = model_.forward(b, layers_, *ops_, logits);
  forward_seconds_ = now_seconds() - t0;
  return s;
}

Status ModelRunner::logits_for_rows(std::span<const int32_t> rows, float* logits) {
  return model_.compute_logits(rows, *ops_, logits);
}

}  // namespace strata::engine
