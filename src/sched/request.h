// A request as the scheduler sees it: token ids, progress, status, stop rules, timestamps.
//
// Tokens: token_ids() is the prompt followed by the generated tokens (num_tokens() in all).
// num_computed_tokens() of them have their KV in the cache. A running request always has at least
// one token left to compute: its prompt (or the rest of it), or in decode exactly one, the last
// sampled token, whose forward pass yields the logits for the next one.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "kv/block_hash.h"

namespace strata::sched {

enum class RequestStatus : uint8_t {
  kWaiting,          // queued, never admitted
  kRunning,          // admitted: holds KV blocks and is scheduled each step the budget allows
  kPreempted,        // was running, blocks were taken back; queued again to recompute
  kFinishedStopped,  // EOS or a stop token (or a stop string, via finish_request)
  kFinishedLength,   // max_tokens or the model length reached
  kFinishedAborted,  // aborted by the client or the engine
};
const char* request_status_name(RequestStatus s);
inline bool is_finished(RequestStatus s) {
  return s >= RequestStatus::kFinishedStopped;
}

// OpenAI's finish_reason values ("stop", "length", "abort").
enum class FinishReason : uint8_t { kNone, kStop, kLength, kAbort };
const char* finish_reason_name(FinishReason r);

enum class SchedulingPolicy : uint8_t { kFcfs, kPriority };
const char* scheduling_policy_name(SchedulingPolicy p);

constexpr int32_t kNoToken = -1;

struct StopConfig {
  int64_t max_tokens = 0;              // generated tokens at most; 0 = until the model length
  int64_t min_tokens = 0;              // EOS and stop tokens do not stop a request before this many
  std::vector<int32_t> eos_token_ids;  // ignored with ignore_eos
  std::vector<int32_t> stop_token_ids;  // always honoured (after min_tokens)
  bool ignore_eos = false;
};

// What add_request() takes.
struct RequestSpec {
  std::string request_id;  // unique among unfinished requests
  std::vector<int32_t> prompt_token_ids;
  StopConfig stop;
  int64_t priority = 0;      // priority policy: lower runs first; ignored under fcfs
  double arrival_time = -1;  // on the scheduler's clock; < 0 means "now"
  std::string cache_salt;    // requests with different salts never share cached KV
  // n > 1: the id of the first sibling (the leader). The prompt and salt must equal the
  // leader's; the sibling takes the leader's priority and arrival time, waits until the leader
  // has computed the prompt's full blocks, then shares them (see docs/scheduler.md).
  std::string sibling_of;
  uintptr_t user_data = 0;  // opaque to the scheduler; echoed in plans and outputs
  // Speculative decoding may propose draft tokens for it (the engine allows it for greedy
  // requests whose next-token choice depends on nothing but the logits).
  bool speculate = false;
};

// Timestamps on the scheduler's clock; -1 = not yet.
struct RequestTimes {
  double arrival = 0;
  double first_scheduled = -1;
  double first_token = -1;
  double last_token = -1;
  double finished = -1;
  double queue_time() const { return first_scheduled < 0 ? -1 : first_scheduled - arrival; }
  double prefill_time() const { return first_token < 0 ? -1 : first_token - first_scheduled; }
  double decode_time() const { return last_token < 0 ? -1 : last_token - first_token; }
  double e2e_time() const { return finished < 0 ? -1 : finished - arrival; }
};

// Identifies a request slot; a handle goes stale once its request is released.
struct RequestHandle {
  uint32_t slot = 0;
  uint32_t generation = 0;
  friend bool operator==(const RequestHandle&, const RequestHandle&) = default;
};

class Request {
 public:
  const std::string& request_id() const { return id_; }
  RequestHandle handle() const { return handle_; }
  uintptr_t user_data() const { return user_data_; }
  RequestStatus status() const { return status_; }
  FinishReason finish_reason() const { return finish_reason_; }
  // The stop token that ended the request (kNoToken for EOS, length, abort).
  int32_t stop_token_id() const { return stop_token_id_; }
  // It may get draft tokens (RequestSpec::speculate, with speculative decoding on).
  bool speculate() const { return speculate_; }

  std::span<const int32_t> token_ids() const { return token_ids_; }
  std::span<const int32_t> prompt_token_ids() const {
    return std::span<const int32_t>(token_ids_).first(static_cast<size_t>(num_prompt_tokens_));
  }
  std::span<const int32_t> output_token_ids() const {
    return std::span<const int32_t>(token_ids_).subspan(static_cast<size_t>(num_prompt_tokens_));
  }
  int64_t num_tokens() const { return static_cast<int64_t>(token_ids_.size()); }
  int64_t num_prompt_tokens() const { return num_prompt_tokens_; }
  int64_t num_output_tokens() const { return num_tokens() - num_prompt_tokens_; }
  int64_t num_computed_tokens() const { return num_computed_tokens_; }

  int64_t priority() const { return priority_; }
  double arrival_time() const { return times_.arrival; }
  uint64_t sequence_number() const { return seq_no_; }  // submission order
  const StopConfig& stop() const { return stop_; }
  const std::string& cache_salt() const { return cache_salt_; }
  const RequestTimes& times() const { return times_; }
  int64_t num_preemptions() const { return num_preemptions_; }
  // In a submitted plan not yet given to update() (pipeline overlap).
  bool in_flight() const { return in_flight_; }
  // Paused by Scheduler::pause_request(): not scheduled until resumed.
  bool paused() const { return paused_; }
  // Admitted with prefix blocks coming from a lower KV tier: not scheduled until they arrive.
  bool loading() const { return num_loading_ > 0; }
  // Hashes of the full blocks of token_ids() (kept only with prefix caching on).
  std::span<const kv::BlockHash> block_hashes() const { return block_hashes_; }
  // Its state slot while running (models with per-sequence state), else -1.
  int32_t state_slot() const { return state_slot_; }

 private:
  friend class Scheduler;

  std::string id_;
  RequestHandle handle_;
  uintptr_t user_data_ = 0;
  RequestStatus status_ = RequestStatus::kWaiting;
  FinishReason finish_reason_ = FinishReason::kNone;
  int32_t stop_token_id_ = kNoToken;
  std::vector<int32_t> token_ids_;
  int64_t num_prompt_tokens_ = 0;
  int64_t num_computed_tokens_ = 0;
  int64_t num_scheduled_tokens_ = 0;  // in the plan not yet given to update()
  int64_t priority_ = 0;              // the policy's key: (priority_, arrival, seq_no_)
  uint64_t seq_no_ = 0;
  StopConfig stop_;
  std::string cache_salt_;
  RequestTimes times_;
  int64_t num_preemptions_ = 0;
  bool paused_ = false;
  std::vector<kv::BlockHash> block_hashes_;
  // n > 1 sharing: the leader to fork from, and how many prompt tokens (whole blocks) to share.
  bool has_leader_ = false;
  RequestHandle leader_;
  int64_t share_tokens_ = 0;
  // KV tier loads (Scheduler::finish_kv_loads): blocks [load_first_block_, + load_state_.size())
  // of its table are being loaded; 0 pending, 1 loaded, 2 failed. load_epoch_ tells this
  // admission's loads from those of an earlier one (preempted or aborted meanwhile).
  int64_t num_loading_ = 0;
  uint64_t load_epoch_ = 0;
  int64_t load_first_block_ = 0;
  std::vector<uint8_t> load_state_;
  bool table_sent_ = true;  // its block table went to the workers with an entry
  // In a plan that the engine has submitted and not yet given to update() (pipeline overlap,
  // Scheduler::set_pipeline_depth): not scheduled, not preempted until then.
  bool in_flight_ = false;
  bool speculate_ = false;
  int64_t num_draft_tokens_ = 0;  // drafts in the pending plan (part of num_scheduled_tokens_)
  // Adaptivity: after drafts that were all rejected, the next spec_skip_ decode steps propose
  // none; the pause doubles with each such miss (up to 32 steps) and resets on an acceptance.
  // With a draft model, a miss after a pause of 32 ends the request's drafting.
  int32_t spec_backoff_ = 0;
  int32_t spec_skip_ = 0;
  // With a draft model (each draft costs a forward pass of it): how many drafts the next entry
  // gets, 1 after a miss, doubled after all were accepted, m + 1 after m of more; 0: the maximum.
  int32_t spec_len_ = 0;
  // MTP: the drafts the worker proposed after the request's last step, for its next entry.
  std::vector<int32_t> proposed_drafts_;
  // Per-sequence state (kv/state_slots.h): its running slot; the snapshot (pinned) to restore
  // into it with its first entry after admission; with KV tier loads, the snapshot (pinned) at
  // the pool hit's end, where it resumes instead when a load fails.
  int32_t state_slot_ = -1;
  int32_t restore_from_ = -1;
  int32_t tier_fallback_ = -1;
  int64_t tier_fallback_tokens_ = 0;
};

}  // namespace strata::sched
