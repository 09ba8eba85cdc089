// The step plan: what schedule() decided for one step, as plain data. It holds ids, counts, token
// ids and block ids (no views into the scheduler, no pointers), so it can be copied, serialized
// and sent to workers in other processes (DESIGN.md section 8).
//
// How a worker runs a plan (one step):
//   drop state of plan.finished_ids; drop the block tables of plan.preempted_ids
//   copy plan.kv_stores out of the pool, then start plan.kv_loads (KV tiers, kv/kv_tiers.h)
//   for each s in plan.scheduled:        // in the order the batch is laid out
//     tokens    plan.token_ids_of(s)     // [s.num_scheduled_tokens], drafts last
//     positions s.num_computed_tokens + 0 .. s.num_scheduled_tokens - 1
//     blocks    the worker's own table for s.request_id: replaced by plan.block_ids_of(s) when
//               s.new_block_table, else extended by plan.block_ids_of(s); the token at position
//               p goes to table[p / block_size], offset p % block_size
//     logits    of the last known token when s.will_sample, and of each draft token
//               (plan.spec_token_ids_of(s), speculative decoding: sched/spec_decode.h)
//     state     models with per-sequence state (KvSpec::has_state()): s.state_slot is the
//               sequence's slot (ForwardBatch::state_slots; -1 for other models); before the
//               pass, plan.state_restores copy prefix-cache snapshots into slots; during it,
//               plan.state_snapshots save states at block boundaries (kv/state_slots.h)
// and returns one sampled token per entry (kNoToken when !will_sample), the tokens verification
// accepted after it, and the KV tier loads that finished, for Scheduler::update() and
// Scheduler::finish_kv_loads().
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "kv/block_pool.h"
#include "sched/request.h"

namespace strata::sched {

struct ScheduledRequest {
  std::string request_id;
  RequestHandle handle;              // the scheduler's handle (meaningful to the scheduler only)
  int64_t num_computed_tokens = 0;   // position of this step's first token
  int64_t num_scheduled_tokens = 0;  // tokens to run this step (>= 1)
  // True for a request admitted this step (new, or resumed after preemption): block_ids_of()
  // is its whole block table. False: block_ids_of() are blocks appended to it this step.
  bool new_block_table = false;
  // The last scheduled token is the request's last known token: sample from its logits.
  bool will_sample = false;
  uint32_t token_ids_offset = 0;  // into StepPlan::token_ids, num_scheduled_tokens of them
  uint32_t block_ids_offset = 0;  // into StepPlan::block_ids
  uint32_t block_ids_count = 0;
  uint32_t spec_token_ids_offset = 0;  // into StepPlan::spec_token_ids (speculative decoding)
  uint32_t spec_token_ids_count = 0;
  // The sequence's state slot (models with per-sequence state), else -1.
  int32_t state_slot = -1;

  friend bool operator==(const ScheduledRequest&, const ScheduledRequest&) = default;
};

// A prefix-cache snapshot copied into a sequence's slot before the step (the sequence resumes
// after its cached prefix): ForwardBatch::StateCopy.
struct StateRestore {
  int32_t src_slot = 0, dst_slot = 0;
  friend bool operator==(const StateRestore&, const StateRestore&) = default;
};

// The state of plan.scheduled[entry] after its first `boundary` tokens (a block boundary inside
// the entry's tokens) saved into dst_slot: ForwardBatch::StateSnapshot.
struct StateSnapshot {
  uint32_t entry = 0;
  int64_t boundary = 0;
  int32_t dst_slot = 0;
  friend bool operator==(const StateSnapshot&, const StateSnapshot&) = default;
};

// A KV block moved between the pool and a lower tier: `block` in the pool, `key` the block's
// content hash in the tier.
struct KvTransfer {
  kv::BlockId block = 0;
  uint32_t tier = 0;
  uint64_t key_lo = 0, key_hi = 0;
  friend bool operator==(const KvTransfer&, const KvTransfer&) = default;
};

struct StepPlan {
  uint64_t step = 0;
  std::vector<ScheduledRequest> scheduled;     // requests running this step, policy order
  std::vector<int32_t> token_ids;              // every scheduled token, entry by entry
  std::vector<kv::BlockId> block_ids;          // storage for ScheduledRequest::block_ids_*
  std::vector<int32_t> spec_token_ids;         // storage for ScheduledRequest::spec_token_ids_*
  std::vector<std::string> preempted_ids;      // moved back to the waiting queue this step
  std::vector<std::string> finished_ids;       // finished or aborted since the previous plan
  std::vector<KvTransfer> kv_loads;            // into the pool before the step
  std::vector<KvTransfer> kv_stores;           // out of the pool after the step
  std::vector<StateRestore> state_restores;    // before the step
  std::vector<StateSnapshot> state_snapshots;  // during the step
  int64_t total_num_scheduled_tokens = 0;      // <= max_num_batched_tokens

  std::span<const int32_t> token_ids_of(const ScheduledRequest& s) const {
    return std::span<const int32_t>(token_ids).subspan(s.token_ids_offset,
                                                       static_cast<size_t>(s.num_scheduled_tokens));
  }
  std::span<const kv::BlockId> block_ids_of(const ScheduledRequest& s) const {
    return std::span<const kv::BlockId>(block_ids).subspan(s.block_ids_offset, s.block_ids_count);
  }
  std::span<const int32_t> spec_token_ids_of(const ScheduledRequest& s) const {
    return std::span<const int32_t>(spec_token_ids)
        .subspan(s.spec_token_ids_offset, s.spec_token_ids_count);
  }
  bool empty() const { return scheduled.empty(); }

  friend bool operator==(const StepPlan&, const StepPlan&) = default;
};

// The plan as bytes (a versioned binary encoding), and back. decode_step_plan() checks the
// encoding and every offset and count against the plan's own arrays: a corrupt or truncated
// message is a kDataLoss error, never a plan that reads out of bounds.
std::string encode_step_plan(const StepPlan& plan);
Result<StepPlan> decode_step_plan(std::string_view bytes);

}  // namespace strata::sched
