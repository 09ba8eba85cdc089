// A Worker runs steps on one device (one rank): a Backend (kernels, compute threads, memory), the
// model, its KV storage, the model runner with its own block tables, and the sampler with each
// request's sampling state. It takes a StepInput and returns a StepOutput; it never sees the
// scheduler. UniprocExecutor drives one in-process; a multi-process executor drives one per rank.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/rng.h"
#include "engine/draft_proposer.h"
#include "engine/engine_config.h"
#include "engine/memory_plan.h"
#include "engine/model_runner.h"
#include "engine/mtp_proposer.h"
#include "engine/step_io.h"
#include "grammar/grammar.h"
#include "kernels/backend.h"
#include "kv/kv_storage.h"
#include "kv/kv_tiers.h"
#include "model/memory_estimate.h"
#include "model/model.h"
#include "model/parallel.h"
#include "sampling/sampler.h"

namespace strata::engine {

// What an engine with `config` holds on this machine, estimated before anything is loaded
// (model/memory_estimate.h): the target's weights, workspace and KV spec, its draft model's or
// MTP layer's, the logits buffers; the memory plan's inputs from them. Worker::create plans with
// it before loading (a refusal allocates nothing) and checks the loaded models against it.
struct EngineMemoryEstimate {
  ModelMemoryEstimate target;
  int64_t draft_weight_bytes = 0, draft_workspace_bytes = 0;
  DType kv_dtype = DType::kBF16;
  bool kv_fp8_ds_mla = false;  // the target's KV cache in the fp8_ds_mla layout (core/fp8_ds_mla.h)
  MemoryPlanInputs inputs;
};
Result<EngineMemoryEstimate> estimate_engine_memory(const EngineConfig& config, int threads);
// A hybrid KV spec's bytes of one block of `block_size` tokens over every layer.
int64_t hybrid_block_bytes(const KvSpec& ks, int64_t block_size, DType kv_dtype);

struct WorkerConfig {
  EngineConfig engine;                 // resolved (max_model_len set, limits filled in)
  std::vector<int32_t> eos_token_ids;  // masked until min_tokens
  // This worker's rank in a tensor/pipeline parallel deployment (model/parallel.h), passed to the
  // model's LoadOptions. Default: the whole model in one process.
  ModelParallel parallel;
};

// The WorkerConfig that Engine::create(config) gives its executor (the resolved engine config and
// the EOS ids from the model, its generation config and tokenizer): ranks > 0 of a multi-process
// deployment build their workers from it, with parallel left at its default.
Result<WorkerConfig> resolve_worker_config(const EngineConfig& config);

// What a worker reports once it is ready.
struct WorkerInfo {
  MemoryPlan memory;
  std::string backend;  // "cpu:avx2"
  int threads = 0;
  DType kv_dtype = DType::kBF16;
  bool kv_fp8_ds_mla = false;
};

class Worker {
 public:
  static Result<std::unique_ptr<Worker>> create(const WorkerConfig& config);
  ~Worker();

  const WorkerInfo& info() const { return info_; }
  // Runs one step: forgets the plan's finished requests, takes the new ones, runs the model,
  // samples every entry that samples and computes the logprobs asked for.
  Status execute(const StepInput& input, StepOutput* output);

  // Pipeline overlap (several micro-batches in flight, engine/executor.h). A worker of a stage
  // before the last splits a step in two: submit() takes the step's requests and runs this
  // stage's forward pass (its activations go on to the next stage without waiting), and
  // complete() takes the oldest submitted step's logits from the last stage and samples it.
  // Steps complete in the order submitted; the stage can run the next micro-batch's forward pass
  // while later stages still compute the previous one. Workers of the last stage run steps whole
  // (execute()), in the same order. submit() always queues the step: an error it returns is
  // returned again by the matching complete().
  bool can_overlap() const;
  Status submit(const StepInput& input);
  Status complete(StepOutput* output);
  size_t num_in_flight() const { return inflight_.size(); }
  const ModelParallel& parallel() const { return config_.parallel; }

  // For tests and benchmarks.
  Model& model() { return *model_; }
  Backend& backend() { return *backend_; }
  ModelRunner& runner() { return *runner_; }
  // The draft model of speculative decoding; nullptr when none is configured.
  DraftProposer* draft() { return draft_.get(); }
  // The MTP layer of speculative decoding; nullptr when none is configured.
  MtpProposer* mtp() { return mtp_.get(); }
  size_t num_requests() const { return requests_.size(); }
  // The KV tiers under the pool; nullptr when none is configured.
  kv::KvTiers* kv_tiers() { return tiers_.get(); }

 private:
  struct RequestState {
    std::vector<int32_t> token_ids;  // prompt, then every token sampled for it
    int64_t num_prompt_tokens = 0;
    sampling::SamplingParams params;
    std::optional<Rng> generator;
    bool wants_prompt_logprobs = false;
    bool speculate = false;
    std::optional<grammar::GrammarMatcher> matcher;  // structured outputs
    std::vector<uint64_t> mask;                      // its allowed tokens this step
  };
  // A submitted step (submit()): its input, what complete() needs of the forward pass, and the
  // states of requests finished since (kept alive until this step has sampled them).
  struct InFlight {
    StepInput input;
    Status status;
    std::vector<RequestState*> states;
    std::vector<int> index;
    std::vector<int32_t> rows, row_starts;
    double forward_seconds = 0, comm_seconds = 0;
    std::vector<std::unordered_map<std::string, RequestState>::node_type> finished;
  };
  Worker() = default;
  Status compute_prompt_logprobs(const sched::StepPlan& plan, std::span<const int32_t> row_starts,
                                 StepOutput* output);
  Status execute_step(const StepInput& input, StepOutput* output);  // execute() without the timing
  void add_new_requests(const StepInput& input);
  Status run_step(const StepInput& input, StepOutput* output);
  Status sample_step(const sched::StepPlan& plan, std::span<const int> index,
                     std::span<const int32_t> row_starts, StepOutput* output);
  Status submit_forward(InFlight& f);
  double comm_busy_seconds() const;  // Comm::busy_seconds() of this rank's groups

  WorkerConfig config_;
  WorkerInfo info_;
  std::unique_ptr<Backend> backend_;
  std::unique_ptr<Model> model_;
  KvStorage storage_;
  std::unique_ptr<kv::KvTiers> tiers_;  // after storage_: it copies into it until destroyed
  std::unique_ptr<ModelRunner> runner_;
  std::unique_ptr<DraftProposer> draft_;  // speculative decoding with a draft model
  std::unique_ptr<MtpProposer> mtp_;      // speculative decoding with the MTP layer
  std::unique_ptr<sampling::Sampler> sampler_;
  std::unordered_map<std::string, RequestState> requests_;
  // Per-step buffers.
  std::vector<float> logits_, prompt_logits_;
  std::vector<sampling::SamplingRow> rows_;
  std::vector<sampling::SampleOutput> samples_;
  std::vector<RequestState*> entry_states_;
  std::vector<int32_t> verified_;  // speculative decoding of sampled requests
  sched::StepPlan filled_;         // the plan with the draft model's drafts
  std::vector<std::span<const int32_t>> histories_;
  std::vector<MtpProposer::Entry> mtp_entries_;
  std::vector<std::vector<int32_t>> mtp_drafts_;
  std::deque<InFlight> inflight_;  // submitted steps, oldest first
};

}  // namespace strata::engine
