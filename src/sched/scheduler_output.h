// What update() returns per request (RequestOutput) and the scheduler's counters. The step plan
// that schedule() returns is in sched/step_plan.h.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "kv/kv_cache_manager.h"
#include "kv/state_slots.h"
#include "sched/request.h"
#include "sched/step_plan.h"

namespace strata::sched {

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
  int64_t num_paused = 0;  // running or waiting, paused by pause_request()
  kv::KvUsage kv;
  kv::StateSlotStats state;                // models with per-sequence state (num_running 0: none)
  kv::PrefixCacheStats prefix_cache;       // cumulative
  kv::TierHitStats external_prefix_cache;  // cumulative: lookups in the KV tiers
  int64_t num_preemptions = 0;             // cumulative
  int64_t prompt_tokens = 0;               // cumulative: prompts of requests that got a first token
  int64_t generation_tokens = 0;           // cumulative: sampled tokens
  int64_t num_steps = 0;
  int64_t num_finished = 0;
  // Speculative decoding (vLLM's spec_decode counters), cumulative.
  int64_t spec_num_drafts = 0;                 // entries that carried drafts
  int64_t spec_num_draft_tokens = 0;           // draft tokens proposed
  int64_t spec_num_accepted_tokens = 0;        // of which accepted
  std::vector<int64_t> spec_accepted_per_pos;  // [k]: drafts accepted at position 0, 1, ...
};

}  // namespace strata::sched
