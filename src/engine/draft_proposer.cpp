#include "engine/draft_proposer.h"

#include <algorithm>

#include "core/check.h"
#include "core/clock.h"
#include "core/logging.h"
#include "sampling/token_selector.h"

namespace strata::engine {

Result<std::unique_ptr<DraftProposer>> DraftProposer::load(const LoadOptions& options,
                                                           int64_t target_vocab_size) {
  std::unique_ptr<DraftProposer> p(new DraftProposer());
  const LoadOptions o = model_options(options);
  STRATA_ASSIGN_OR_RETURN(LoadedModel loaded, load_model(o));
  p->model_ = std::move(loaded.model);
  p->target_vocab_size_ = target_vocab_size;
  p->max_logit_rows_ = o.limits.max_logit_rows;
  p->max_num_tokens_ = o.limits.max_num_tokens;
  const int64_t V = p->model_->config().vocab_size;
  if (V != target_vocab_size)
    STRATA_LOG(WARNING) << "the draft model's vocabulary has " << V << " tokens and the target's "
                        << target_vocab_size
                        << ": drafts are proposed from the ids both have (a draft model needs "
                           "the target's tokenizer)";
  p->logits_.resize(static_cast<size_t>(p->max_logit_rows_ * V));
  STRATA_LOG(INFO) << "Draft model: " << p->model_->config().summary() << " from " << o.model
                   << " (" << loaded.format << ", " << dtype_name(p->model_->weight_dtype()) << ", "
                   << p->model_->parameter_count() / 1e6 << "M parameters) in "
                   << loaded.load_seconds << " s";
  return p;
}

LoadOptions DraftProposer::model_options(const LoadOptions& options) {
  LoadOptions o = options;
  // The catch-up pass runs up to one more token per entry than the target's plan (the last
  // accepted draft, which the draft never ran).
  o.limits.max_num_tokens += o.limits.max_logit_rows;
  return o;
}

int64_t DraftProposer::buffer_bytes(const WorkspaceLimits& limits, const ModelConfig& draft) {
  return limits.max_logit_rows * draft.vocab_size * static_cast<int64_t>(sizeof(float));
}

int64_t DraftProposer::workspace_bytes() const {
  return model_->workspace_bytes() + static_cast<int64_t>(logits_.size() * sizeof(float));
}

Status DraftProposer::allocate_kv(int64_t num_blocks, int64_t block_size, DType kv_dtype,
                                  Backend& backend, bool fp8_ds_mla) {
  const KvSpec ks = model_->kv_spec();
  STRATA_ASSIGN_OR_RETURN(
      storage_,
      KvStorage::allocate({ks.num_layers, num_blocks, block_size, ks.num_kv_heads, ks.head_dim,
                           kv_dtype, ks.has_v, ks.aux_dim, ks.ds_mla_latent(fp8_ds_mla)},
                          backend.allocator()));
  runner_ = std::make_unique<ModelRunner>(*model_, storage_, backend.ops());
  return ok_status();
}

int32_t DraftProposer::argmax_row(int64_t row) const {
  const int64_t V = model_->config().vocab_size;
  const float* x = logits_.data() + row * V;
  return sampling::argmax(x, std::min(V, target_vocab_size_));
}

Status DraftProposer::propose(const sched::StepPlan& plan,
                              std::span<const std::span<const int32_t>> histories,
                              sched::StepPlan* filled) {
  STRATA_CHECK(runner_ != nullptr) << "DraftProposer::allocate_kv() was not called";
  *filled = plan;
  forward_seconds_ = 0;
  for (const auto* ids : {&plan.finished_ids, &plan.preempted_ids})
    for (const auto& id : *ids) {
      kv_end_.erase(id);
      pending_blocks_.erase(id);
    }

  // Pass 1: the plan's known tokens, and what the draft's KV lacks before them, for entries that
  // propose and for prompt chunks; entries with draft places sample their first draft. A decode
  // entry without drafts is left out (its blocks are kept for the request's next entry): the
  // draft catches up when the request proposes again, in one pass.
  step_ = sched::StepPlan();
  step_.step = plan.step;
  step_.finished_ids = plan.finished_ids;
  step_.preempted_ids = plan.preempted_ids;
  proposals_.clear();
  int64_t max_count = 0;
  int64_t catch_up_budget = max_num_tokens_ - plan.total_num_scheduled_tokens;
  for (size_t i = 0; i < plan.scheduled.size(); ++i) {
    const sched::ScheduledRequest& s = plan.scheduled[i];
    const int64_t d = s.spec_token_ids_count;
    const int64_t known_end = s.num_computed_tokens + s.num_scheduled_tokens - d;
    const auto blocks = plan.block_ids_of(s);
    // Positions from the entry's first hold tokens the draft may not have run (its rejected
    // drafts): its KV stands only below them, whether it runs this step or not.
    if (!s.new_block_table)
      if (auto it = kv_end_.find(s.request_id); it != kv_end_.end())
        it->second = std::min(it->second, s.num_computed_tokens);
    if (!s.new_block_table && d == 0 && s.num_scheduled_tokens == 1) {
      auto& pending = pending_blocks_[s.request_id];
      pending.insert(pending.end(), blocks.begin(), blocks.end());
      continue;
    }
    int64_t start = s.num_computed_tokens;
    if (!s.new_block_table)
      if (auto it = kv_end_.find(s.request_id); it != kv_end_.end())
        start = std::min(start, it->second);
    // The pass holds max_num_tokens_: the plan's own tokens, then catch-ups while they fit. A
    // longer catch-up (rare: many requests back from a long back-off together) starts later, and
    // the positions it skips keep stale draft KV (fewer drafts accepted, never a wrong output).
    start = std::max(start, s.num_computed_tokens - catch_up_budget);
    catch_up_budget -= s.num_computed_tokens - start;
    const std::span<const int32_t> history = histories[i];
    if (known_end > static_cast<int64_t>(history.size()))
      return internal_error("draft model: request '" + s.request_id + "' runs to position " +
                            std::to_string(known_end) + " but its history has " +
                            std::to_string(history.size()) + " tokens");
    sched::ScheduledRequest e = s;
    e.num_computed_tokens = start;
    e.num_scheduled_tokens = known_end - start;
    e.will_sample = d > 0;
    e.token_ids_offset = static_cast<uint32_t>(step_.token_ids.size());
    e.block_ids_offset = static_cast<uint32_t>(step_.block_ids.size());
    e.spec_token_ids_offset = e.spec_token_ids_count = 0;
    step_.token_ids.insert(step_.token_ids.end(), history.begin() + start,
                           history.begin() + known_end);
    if (auto it = pending_blocks_.find(s.request_id); it != pending_blocks_.end()) {
      if (!s.new_block_table)
        step_.block_ids.insert(step_.block_ids.end(), it->second.begin(), it->second.end());
      pending_blocks_.erase(it);
    }
    step_.block_ids.insert(step_.block_ids.end(), blocks.begin(), blocks.end());
    e.block_ids_count = static_cast<uint32_t>(step_.block_ids.size() - e.block_ids_offset);
    step_.total_num_scheduled_tokens += e.num_scheduled_tokens;
    step_.scheduled.push_back(std::move(e));
    kv_end_[s.request_id] = known_end;
    if (d > 0) {
      proposals_.push_back({i, known_end, d});
      max_count = std::max(max_count, d);
    }
  }
  // Writes draft j (0-based) of each proposal from logits row r of the last pass.
  auto fill = [&](int64_t j) {
    int64_t row = 0;
    for (const Proposal& p : proposals_) {
      if (p.count <= j) continue;
      const sched::ScheduledRequest& s = plan.scheduled[p.entry];
      const int32_t token = argmax_row(row++);
      filled->token_ids[s.token_ids_offset + (s.num_scheduled_tokens - p.count) + j] = token;
      filled->spec_token_ids[s.spec_token_ids_offset + j] = token;
    }
  };
  STRATA_RETURN_IF_ERROR(runner_->execute(step_, logits_.data()));
  forward_seconds_ += runner_->forward_seconds();
  if (proposals_.empty()) return ok_status();
  fill(0);

  // Passes 2..k: each proposal runs its last draft at the next position (KV the target will
  // overwrite when it verifies) and samples the next one.
  for (int64_t j = 1; j < max_count; ++j) {
    step_ = sched::StepPlan();
    step_.step = plan.step;
    for (const Proposal& p : proposals_) {
      if (p.count <= j) continue;
      const sched::ScheduledRequest& s = plan.scheduled[p.entry];
      sched::ScheduledRequest e;
      e.request_id = s.request_id;
      e.handle = s.handle;
      e.num_computed_tokens = p.position + j - 1;
      e.num_scheduled_tokens = 1;
      e.will_sample = true;
      e.token_ids_offset = static_cast<uint32_t>(step_.token_ids.size());
      e.block_ids_offset = 0;
      step_.token_ids.push_back(filled->spec_token_ids[s.spec_token_ids_offset + j - 1]);
      step_.total_num_scheduled_tokens += 1;
      step_.scheduled.push_back(std::move(e));
      kv_end_[s.request_id] = p.position + j;
    }
    STRATA_RETURN_IF_ERROR(runner_->execute(step_, logits_.data()));
    forward_seconds_ += runner_->forward_seconds();
    fill(j);
  }
  return ok_status();
}

}  // namespace strata::engine
