// Speculative decoding with a draft model (`--speculative-config '{"method": "draft_model",
// "model": ...}'`): a smaller model with the target's tokenizer, run by the worker beside the
// target over its own KV storage. The draft's storage has the target pool's block ids, and the
// draft runner gets the target plan's block tables, so a request's draft KV sits in the same
// blocks at the same positions; prefix-cache hits and preemption need nothing more.
//
// Each step, before the target's forward pass, propose() (1) runs the draft over the plan's known
// tokens for prompt chunks and for entries with draft places (the scheduler's kNoToken), starting
// earlier where the draft's KV of the request lags: the last accepted draft, which the draft never
// ran, and the decode steps in which the request proposed nothing (adaptivity backs off after
// rejected drafts, and then the draft costs nothing), caught up in one pass; (2) proposes each
// entry's drafts greedily, one batched forward per token, each writing its KV at the position the
// target will verify. It returns the plan with the places filled. Rejected drafts leave draft KV
// beyond the accepted tokens, which is rewritten as the sequence grows, as the target's is.
//
// Drafts are deterministic given the sequence (greedy), so the target's verification (greedy, or
// rejection sampling for sampled requests) keeps its output exact whatever the draft proposes;
// the draft's KV only decides how many drafts are accepted. Blocks loaded from the KV tiers bring
// the target's KV only: on such a prefix the draft proposes from whatever its blocks hold, and
// fewer drafts are accepted.
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

class DraftProposer {
 public:
  // Loads the draft model (`options` are the target's with the draft's model, quantization and
  // hf_overrides). `target_vocab_size`: proposals are token ids below it.
  static Result<std::unique_ptr<DraftProposer>> load(const LoadOptions& options,
                                                     int64_t target_vocab_size);
  // What load() loads the draft with (its workspace holds one more token per entry), and the
  // buffers it adds (the draft's logits): the memory plan estimates them before loading.
  static LoadOptions model_options(const LoadOptions& options);
  static int64_t buffer_bytes(const WorkspaceLimits& limits, const ModelConfig& draft);

  Model& model() { return *model_; }
  // KV bytes per token of the draft at the target's KV dtype (the draft's KV uses it too).
  // fp8_ds_mla: the target's cache takes that layout; so does this model's when it is MLA.
  int64_t kv_bytes_per_token(DType kv_dtype, bool fp8_ds_mla = false) const {
    const KvSpec ks = model_->kv_spec();
    return ks.bytes_per_token(kv_dtype, fp8_ds_mla && ks.latent_dim > 0);
  }
  // Activations and draft logits, for the memory plan.
  int64_t workspace_bytes() const;
  // Allocates the draft's KV storage: the target pool's block count and size.
  Status allocate_kv(int64_t num_blocks, int64_t block_size, DType kv_dtype, Backend& backend,
                     bool fp8_ds_mla = false);

  // Fills the draft places of `plan` into `*filled` (a copy of `plan`). `histories[i]` is the
  // known tokens of plan.scheduled[i]'s request (prompt, then its outputs), at least up to the
  // entry's last known token.
  Status propose(const sched::StepPlan& plan, std::span<const std::span<const int32_t>> histories,
                 sched::StepPlan* filled);
  // Seconds the last propose() spent in the draft's forward passes.
  double forward_seconds() const { return forward_seconds_; }

 private:
  DraftProposer() = default;
  int32_t argmax_row(int64_t row) const;

  std::unique_ptr<Model> model_;
  int64_t target_vocab_size_ = 0;
  int64_t max_logit_rows_ = 0;
  int64_t max_num_tokens_ = 0;  // of one draft pass
  KvStorage storage_;
  std::unique_ptr<ModelRunner> runner_;
  // Per request: positions below this hold the draft's KV of the request's current tokens.
  std::unordered_map<std::string, int64_t> kv_end_;
  // Per request: blocks of entries left out of the draft's passes, for its next one.
  std::unordered_map<std::string, std::vector<kv::BlockId>> pending_blocks_;
  // Per-step buffers.
  sched::StepPlan step_;
  std::vector<float> logits_;
  struct Proposal {
    size_t entry;      // in the target plan
    int64_t position;  // of the next token the draft runs
    int64_t count;     // draft places of the entry
  };
  std::vector<Proposal> proposals_;
  double forward_seconds_ = 0;
};

}  // namespace strata::engine
