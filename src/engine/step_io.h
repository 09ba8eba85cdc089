// What the engine sends its workers for one step (StepInput: the scheduler's plan plus the data of
// requests the workers have not seen yet) and what comes back (StepOutput: the sampled tokens and
// logprobs). Plain data with a binary encoding, so an executor can ship them to other processes.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "kv/kv_tiers.h"
#include "sampling/logprobs.h"
#include "sampling/sampling_params.h"
#include "sched/step_plan.h"

namespace strata::grammar {
class CompiledGrammar;
}

namespace strata::engine {

// A request's first appearance in a plan: what a worker needs to sample for it until it finishes
// (its prompt for penalties, its parameters and seed). Sent once; workers keep it across
// preemptions and drop it when the request is in a plan's finished_ids.
struct NewRequestData {
  std::string request_id;  // the scheduler's id
  std::vector<int32_t> prompt_token_ids;
  sampling::SamplingParams params;
  bool wants_prompt_logprobs = false;  // compute params.prompt_logprobs for this one
  bool speculate = false;              // may get drafts (workers that propose them: MTP)
  // The output grammar (structured outputs), shared; null: unconstrained. Not part of the binary
  // encoding yet: a multi-process executor must refuse constrained requests until it is.
  std::shared_ptr<const grammar::CompiledGrammar> constraint;
  friend bool operator==(const NewRequestData&, const NewRequestData&) = default;
};

struct StepInput {
  sched::StepPlan plan;
  std::vector<NewRequestData> new_requests;
  friend bool operator==(const StepInput&, const StepInput&) = default;
};

// One per plan entry.
struct SampledEntry {
  int32_t token_id = -1;  // sched::kNoToken unless the entry samples
  // An entry with draft tokens: the tokens after token_id that verification also produced
  // (token_id and the first drafts matched up to there; the last one is the model's own).
  std::vector<int32_t> accepted_token_ids;
  // Drafts the worker proposes for the entry's next step (MTP), for Scheduler::update().
  std::vector<int32_t> draft_token_ids;
  bool has_logprobs = false;
  sampling::TokenLogprobs logprobs;
  // Prompt logprobs of the prompt positions this step computed (requests that asked for them).
  std::vector<sampling::TokenLogprobs> prompt_logprobs;
};

struct StepOutput {
  std::vector<SampledEntry> entries;  // [plan.scheduled.size()]
  // Seconds the worker (rank 0's) spent in the model's forward pass, and in sampling and prompt
  // logprobs, this step: the engine's step trace (engine/step_trace.h) splits the executor's
  // time with them.
  double forward_seconds = 0;
  double sample_seconds = 0;
  // Of those, the seconds the worker spent in its tensor/pipeline-parallel groups' calls
  // (Comm::busy_seconds(): transfers and waits for the other ranks); 0 on one process.
  double comm_seconds = 0;
  // KV tier loads that finished (plan.kv_loads of this or earlier steps), for
  // Scheduler::finish_kv_loads().
  std::vector<kv::KvLoadResult> kv_loads_done;
};

std::string encode_step_input(const StepInput& input);
Result<StepInput> decode_step_input(std::string_view bytes);
std::string encode_step_output(const StepOutput& output);
Result<StepOutput> decode_step_output(std::string_view bytes);

}  // namespace strata::engine
