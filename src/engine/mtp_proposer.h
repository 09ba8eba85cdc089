// Speculative decoding with the target checkpoint's multi-token-prediction layer
// (`--speculative-config '{"method": "deepseek_mtp", "num_speculative_tokens": k}'`; DeepSeek-V3's
// model.layers.<num_hidden_layers>, loaded as a one-layer model by LoadOptions::mtp_module).
//
// The MTP layer at position i combines the target's final hidden state h_i with the embedding of
// token i + 1 and predicts token i + 2, so it runs after the target's forward pass, and its drafts
// are for the request's next step (returned in SampledEntry::draft_token_ids; the scheduler puts
// them in the next plan). Each step, propose() runs it over the positions of the step whose
// tokens stand (prompt chunks; the last known token and the accepted drafts), writing its KV at
// those positions in its own storage, which has the target pool's block ids; the last row gives
// the first draft. Further drafts reuse the layer on its own output hidden state and the previous
// draft, one batched pass each, at the following positions; where those run past the request's
// blocks they go to scratch blocks of this step (the next step rewrites the positions anyway).
//
// Drafts are a deterministic function of the sequence, so verification keeps the output that of
// plain decoding whatever the layer proposes; only the number of accepted drafts depends on it.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "engine/model_runner.h"
#include "kernels/backend.h"
#include "kv/kv_storage.h"
#include "model/model.h"
#include "sched/step_plan.h"

namespace strata::engine {

class MtpProposer {
 public:
  // Loads the MTP layer of the checkpoint `target_options` loads; `k` drafts per step.
  static Result<std::unique_ptr<MtpProposer>> load(const LoadOptions& target_options, int64_t k);
  // What load() loads the layer with, and the buffers it adds (logits, the target's hidden rows,
  // its own last hidden rows): the memory plan estimates them before loading.
  static LoadOptions model_options(const LoadOptions& target_options, int64_t k);
  static int64_t buffer_bytes(const WorkspaceLimits& limits, const ModelConfig& layer);

  Model& model() { return *model_; }
  // fp8_ds_mla: the target's cache takes that layout; so does this model's when it is MLA.
  int64_t kv_bytes_per_token(DType kv_dtype, bool fp8_ds_mla = false) const {
    const KvSpec ks = model_->kv_spec();
    return ks.bytes_per_token(kv_dtype, fp8_ds_mla && ks.latent_dim > 0);
  }
  // Activations, logits and hidden-state buffers, for the memory plan.
  int64_t workspace_bytes() const;
  // Allocates the layer's KV storage: the target pool's blocks, and scratch blocks after them.
  Status allocate_kv(int64_t num_blocks, int64_t block_size, DType kv_dtype, Backend& backend,
                     bool fp8_ds_mla = false);

  // Per plan entry: how many of the step's positions, from its first, hold tokens that stand
  // (0: leave the request out), and whether to propose drafts after them.
  struct Entry {
    int64_t positions = 0;
    bool propose = false;
  };
  // After the target's forward pass of `plan` (`target`, `target_runner`) and the verification:
  // `histories[i]` are the request's tokens including this step's. Writes each proposing entry's
  // drafts into (*drafts)[i] (others cleared).
  Status propose(const sched::StepPlan& plan, Model& target, const ModelRunner& target_runner,
                 std::span<const Entry> entries,
                 std::span<const std::span<const int32_t>> histories,
                 std::vector<std::vector<int32_t>>* drafts);
  double forward_seconds() const { return forward_seconds_; }

 private:
  MtpProposer() = default;
  int32_t argmax_row(int64_t row) const;

  std::unique_ptr<Model> model_;
  int64_t k_ = 1;
  int64_t block_size_ = 0;
  int64_t first_scratch_ = 0, num_scratch_ = 0;  // scratch block ids
  KvStorage storage_;
  std::unique_ptr<ModelRunner> runner_;
  WorkspaceLimits limits_;
  // Per request: its block table, from the plans.
  std::unordered_map<std::string, std::vector<kv::BlockId>> tables_;
  // Per-step buffers.
  sched::StepPlan step_;
  std::vector<float> logits_, hidden_, prev_hidden_;
  std::vector<int32_t> rows_;
  struct Proposal {
    size_t entry;                    // in the target plan
    int64_t last;                    // the last standing position
    std::vector<kv::BlockId> table;  // its table, with scratch blocks when the drafts need them
  };
  std::vector<Proposal> proposals_;
  double forward_seconds_ = 0;
};

}  // namespace strata::engine
