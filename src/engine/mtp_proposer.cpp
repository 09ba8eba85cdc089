#include "engine/mtp_proposer.h"

#include <algorithm>

#include "core/check.h"
#include "core/logging.h"
#include "sampling/token_selector.h"

namespace strata::engine {

Result<std::unique_ptr<MtpProposer>> MtpProposer::load(const LoadOptions& target_options,
                                                       int64_t k) {
  std::unique_ptr<MtpProposer> p(new MtpProposer());
  const LoadOptions o = model_options(target_options, k);
  STRATA_ASSIGN_OR_RETURN(LoadedModel loaded, load_model(o));
  p->model_ = std::move(loaded.model);
  p->k_ = k;
  p->limits_ = o.limits;
  const int64_t V = p->model_->config().vocab_size, H = p->model_->config().hidden_size;
  p->logits_.resize(static_cast<size_t>(o.limits.max_logit_rows * V));
  p->hidden_.resize(static_cast<size_t>(o.limits.max_num_tokens * H));
  p->prev_hidden_.resize(static_cast<size_t>(o.limits.max_logit_rows * H));
  STRATA_LOG(INFO) << "MTP layer: " << p->model_->config().summary() << " ("
                   << p->model_->parameter_count() / 1e6 << "M parameters) in "
                   << loaded.load_seconds << " s";
  return p;
}

LoadOptions MtpProposer::model_options(const LoadOptions& target_options, int64_t k) {
  LoadOptions o = target_options;
  o.mtp_module = true;
  o.limits.max_seq_len += k;  // drafts run past the target's last position
  return o;
}

int64_t MtpProposer::buffer_bytes(const WorkspaceLimits& limits, const ModelConfig& layer) {
  const int64_t V = layer.vocab_size, H = layer.hidden_size;
  return (limits.max_logit_rows * V + limits.max_num_tokens * H + limits.max_logit_rows * H) *
         static_cast<int64_t>(sizeof(float));
}

int64_t MtpProposer::workspace_bytes() const {
  return model_->workspace_bytes() +
         static_cast<int64_t>((logits_.size() + hidden_.size() + prev_hidden_.size()) *
                              sizeof(float));
}

Status MtpProposer::allocate_kv(int64_t num_blocks, int64_t block_size, DType kv_dtype,
                                Backend& backend, bool fp8_ds_mla) {
  block_size_ = block_size;
  first_scratch_ = num_blocks;
  // Every proposing entry may need blocks for k - 1 positions past its table.
  num_scratch_ = k_ > 1 ? limits_.max_logit_rows * ((k_ - 2) / block_size + 2) : 0;
  const KvSpec ks = model_->kv_spec();
  STRATA_ASSIGN_OR_RETURN(
      storage_, KvStorage::allocate(
                    {ks.num_layers, num_blocks + num_scratch_, block_size, ks.num_kv_heads,
                     ks.head_dim, kv_dtype, ks.has_v, ks.aux_dim, ks.ds_mla_latent(fp8_ds_mla)},
                    backend.allocator()));
  runner_ = std::make_unique<ModelRunner>(*model_, storage_, backend.ops());
  return ok_status();
}

int32_t MtpProposer::argmax_row(int64_t row) const {
  const int64_t V = model_->config().vocab_size;
  const float* x = logits_.data() + row * V;
  return sampling::argmax(x, V);
}

Status MtpProposer::propose(const sched::StepPlan& plan, Model& target,
                            const ModelRunner& target_runner, std::span<const Entry> entries,
                            std::span<const std::span<const int32_t>> histories,
                            std::vector<std::vector<int32_t>>* drafts) {
  STRATA_CHECK(runner_ != nullptr) << "MtpProposer::allocate_kv() was not called";
  forward_seconds_ = 0;
  drafts->resize(plan.scheduled.size());
  for (auto& d : *drafts) d.clear();
  for (const auto* ids : {&plan.finished_ids, &plan.preempted_ids})
    for (const auto& id : *ids) tables_.erase(id);
  for (const sched::ScheduledRequest& s : plan.scheduled) {
    auto& table = tables_[s.request_id];
    const auto blocks = plan.block_ids_of(s);
    if (s.new_block_table) table.clear();
    table.insert(table.end(), blocks.begin(), blocks.end());
  }
  const int64_t H = model_->config().hidden_size;

  // Pass 1: the step's standing positions p, each with the target's hidden state h_p and token
  // p + 1; the last row of a proposing entry gives its first draft. Tables are sent whole.
  step_ = sched::StepPlan();
  step_.step = plan.step;
  step_.finished_ids = plan.finished_ids;
  step_.preempted_ids = plan.preempted_ids;
  rows_.clear();
  proposals_.clear();
  for (size_t i = 0; i < plan.scheduled.size(); ++i) {
    const sched::ScheduledRequest& s = plan.scheduled[i];
    const int64_t v = entries[i].positions;
    if (v <= 0) continue;
    const int64_t c = s.num_computed_tokens;
    const std::span<const int32_t> history = histories[i];
    if (v > s.num_scheduled_tokens || c + v + 1 > static_cast<int64_t>(history.size()))
      return internal_error("MTP: request '" + s.request_id + "' has " +
                            std::to_string(history.size()) + " tokens, too few for positions " +
                            std::to_string(c) + ".." + std::to_string(c + v - 1));
    const auto& table = tables_[s.request_id];
    sched::ScheduledRequest e;
    e.request_id = s.request_id;
    e.handle = s.handle;
    e.num_computed_tokens = c;
    e.num_scheduled_tokens = v;
    e.new_block_table = true;
    e.will_sample = entries[i].propose;
    e.token_ids_offset = static_cast<uint32_t>(step_.token_ids.size());
    e.block_ids_offset = static_cast<uint32_t>(step_.block_ids.size());
    e.block_ids_count = static_cast<uint32_t>(table.size());
    step_.token_ids.insert(step_.token_ids.end(), history.begin() + c + 1,
                           history.begin() + c + v + 1);
    step_.block_ids.insert(step_.block_ids.end(), table.begin(), table.end());
    step_.total_num_scheduled_tokens += v;
    step_.scheduled.push_back(std::move(e));
    for (int64_t t = 0; t < v; ++t)
      rows_.push_back(target_runner.row_start(static_cast<int>(i)) + static_cast<int32_t>(t));
    if (entries[i].propose) proposals_.push_back({i, c + v - 1, table});
  }
  if (step_.scheduled.empty() && step_.finished_ids.empty() && step_.preempted_ids.empty())
    return ok_status();
  const int64_t T = static_cast<int64_t>(rows_.size());
  if (T > 0)
    STRATA_RETURN_IF_ERROR(
        target.hidden_states(rows_, /*final_norm=*/true, target_runner.ops(), hidden_.data()));
  STRATA_RETURN_IF_ERROR(runner_->execute(
      step_, logits_.data(), std::span<const float>(hidden_).first(static_cast<size_t>(T * H))));
  forward_seconds_ += runner_->forward_seconds();
  for (size_t p = 0; p < proposals_.size(); ++p)
    (*drafts)[proposals_[p].entry].push_back(argmax_row(static_cast<int64_t>(p)));
  if (k_ == 1 || proposals_.empty()) return ok_status();

  // Passes 2..k: the layer again on its own output hidden state and the last draft, one position
  // further; positions past a request's blocks go to scratch blocks of this step.
  int64_t next_scratch = first_scratch_;
  for (Proposal& p : proposals_) {
    const int64_t need = (p.last + k_ - 1) / block_size_ + 1;  // blocks for the last draft run
    while (static_cast<int64_t>(p.table.size()) < need) {
      if (next_scratch >= first_scratch_ + num_scratch_)
        return internal_error("MTP: out of scratch blocks");
      p.table.push_back(static_cast<kv::BlockId>(next_scratch++));
    }
  }
  auto last_rows_hidden = [&](const sched::StepPlan& pass) -> Status {
    rows_.clear();
    for (size_t e = 0; e < pass.scheduled.size(); ++e)
      if (pass.scheduled[e].will_sample)
        rows_.push_back(runner_->row_start(static_cast<int>(e)) +
                        static_cast<int32_t>(pass.scheduled[e].num_scheduled_tokens) - 1);
    return model_->hidden_states(rows_, /*final_norm=*/false, runner_->ops(), prev_hidden_.data());
  };
  STRATA_RETURN_IF_ERROR(last_rows_hidden(step_));
  for (int64_t j = 1; j < k_; ++j) {
    step_ = sched::StepPlan();
    step_.step = plan.step;
    for (const Proposal& p : proposals_) {
      const sched::ScheduledRequest& s = plan.scheduled[p.entry];
      sched::ScheduledRequest e;
      e.request_id = s.request_id;
      e.handle = s.handle;
      e.num_computed_tokens = p.last + j;
      e.num_scheduled_tokens = 1;
      e.new_block_table = true;
      e.will_sample = true;
      e.token_ids_offset = static_cast<uint32_t>(step_.token_ids.size());
      e.block_ids_offset = static_cast<uint32_t>(step_.block_ids.size());
      e.block_ids_count = static_cast<uint32_t>(p.table.size());
      step_.token_ids.push_back((*drafts)[p.entry].back());
      step_.block_ids.insert(step_.block_ids.end(), p.table.begin(), p.table.end());
      step_.total_num_scheduled_tokens += 1;
      step_.scheduled.push_back(std::move(e));
    }
    const size_t P = proposals_.size();
    STRATA_RETURN_IF_ERROR(
        runner_->execute(step_, logits_.data(), std::span<const float>(prev_hidden_).first(P * H)));
    forward_seconds_ += runner_->forward_seconds();
    for (size_t p = 0; p < P; ++p)
      (*drafts)[proposals_[p].entry].push_back(argmax_row(static_cast<int64_t>(p)));
    if (j + 1 < k_) STRATA_RETURN_IF_ERROR(last_rows_hidden(step_));
  }
  return ok_status();
}

}  // namespace strata::engine
