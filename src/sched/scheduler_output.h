// The step plan (what schedule() returns), per-request outputs (what update() returns) and the
// scheduler's counters.
//
// How the engine uses a plan (one step):
//   plan = scheduler.schedule();
//   for each s in plan.scheduled:        // in the order the batch should be laid out
//     tokens    s.token_ids               // [s.num_scheduled_tokens]
//     positions s.num_computed_tokens + 0 .. s.num_scheduled_tokens - 1
//     blocks    scheduler.block_table(s)  // whole table; token at position p goes to
//                                         // block_table[p / block_size], offset p % block_size
//               (or keep a table per request: replace it with plan.block_ids_of(s) when
//                s.new_block_table, else append plan.block_ids_of(s) to it)
//     logits    needed for the last token when s.will_sample
//   drop runner state for plan.preempted_ids and plan.finished_ids
//   sampled[i] = token for plan.scheduled[i] (kNoToken when !will_sample)
//   outputs = scheduler.update(plan, sampled);
//
// Lifetimes: token_ids and request_id views stay valid until update() (token_ids) or the next
// schedule() (request_id); a plan must be given to update() exactly once, before the next
// schedule().
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "kv/block_pool.h"
#include "kv/kv_cache_manager.h"
#include "sched/request.h"

namespace strata::sched {

struct ScheduledRequest {
  std::string_view request_id;
  RequestHandle handle;
  uintptr_t user_data = 0;
  int64_t num_computed_tokens = 0;     // position of this step's first token
  int64_t num_scheduled_tokens = 0;    // tokens to run this step (>= 1)
  std::span<const int32_t> token_ids;  // [num_scheduled_tokens]
  // True for a request admitted this step (new, or resumed after preemption): block_ids_of()
  // is its whole block table. False: block_ids_of() are blocks appended to it this step.
  bool new_block_table = false;
  // The last scheduled token is the request's last known token: sample from its logits.
  bool will_sample = false;
  uint32_t block_ids_offset = 0;
  uint32_t block_ids_count = 0;
};

struct SchedulerOutput {
  uint64_t step = 0;
  std::vector<ScheduledRequest> scheduled;  // requests running this step, policy order
  std::vector<kv::BlockId> block_ids;       // storage for ScheduledRequest::block_ids_*
  std::vector<std::string> preempted_ids;   // moved back to the waiting queue this step
  std::vector<std::string> finished_ids;    // finished or aborted since the previous plan
  int64_t total_num_scheduled_tokens = 0;   // <= max_num_batched_tokens

  std::span<const kv::BlockId> block_ids_of(const ScheduledRequest& s) const {
    return std::span<const kv::BlockId>(block_ids).subspan(s.block_ids_offset, s.block_ids_count);
  }
  bool empty() const { return scheduled.empty(); }
};

// One per request that sampled a token in the step given to update().
struct RequestOutput {
  std::string_view request_id;  // valid until the next schedule()
  RequestHandle handle;
  uintptr_t user_data = 0;
  int32_t new_token_id = kNoToken;
  int64_t num_output_tokens = 0;  // including new_token_id
  FinishReason finish_reason = FinishReason::kNone;
  int32_t stop_token_id = kNoToken;  // the stop token that ended it (kNoToken for EOS)
  RequestTimes times;                // final when finish_reason != kNone
  bool finished() const { return finish_reason != FinishReason::kNone; }
};

struct SchedulerStats {
  int64_t num_running = 0;
  int64_t num_waiting = 0;  // including preempted requests waiting to resume
  int64_t num_preempted_waiting = 0;
  kv::KvUsage kv;
  kv::PrefixCacheStats prefix_cache;  // cumulative
  int64_t num_preemptions = 0;        // cumulative
  int64_t prompt_tokens = 0;          // cumulative: prompts of requests that got a first token
  int64_t generation_tokens = 0;      // cumulative: sampled tokens
  int64_t num_steps = 0;
  int64_t num_finished = 0;
};

}  // namespace strata::sched
