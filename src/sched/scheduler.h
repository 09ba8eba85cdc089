// The scheduler: continuous batching with chunked prefill over a paged KV cache, with forward
// progress guaranteed by construction. Bookkeeping only; one engine thread owns it.
//
// Each step, schedule() gives requests tokens within max_num_batched_tokens and max_num_seqs;
// there are no prefill or decode phases (a prompt chunk and a decode token are both "tokens to
// run"), so chunked prefill, prefix-cache hits, recompute after preemption and decode all fall
// out of num_computed_tokens vs num_tokens. update() then advances the requests, appends sampled
// tokens, applies the stop rules and frees finished requests' blocks.
//
// FORWARD PROGRESS (docs/scheduler.md has the full argument)
// Every request has a fixed key: (arrival time, submission number) under fcfs, (priority,
// arrival time, submission number) under priority. Lower keys are "older".
//  R1 Admission control at submit: a request is rejected with a clear error when its prompt is
//     >= max_model_len, or when prompt + 1 token needs more blocks than the whole pool. So every
//     admitted request fits in the pool on its own. Generation stops ("length") at
//     min(max_model_len, pool tokens), so it keeps fitting while it grows.
//  R2 Running requests are scheduled in key order, the oldest first, each getting at least one
//     token when the budget allows; the oldest running request always gets >= 1 token.
//  R3 Preemption (by recompute) only ever takes the youngest running request, and only on
//     behalf of an older one that needs a block; if the requester is itself the youngest, it
//     preempts itself. So the oldest running request is never preempted, and a request can be
//     preempted only by strictly older ones: there is no cycle in "who preempts whom".
//  R4 Admission is in key order and reserves: a waiting request is admitted only when blocks for
//     ALL its known tokens (prompt, plus generated tokens when resuming) are free beyond a small
//     watermark, and they are allocated at once; its prefill can then never cause a preemption,
//     and a preempted request is not re-admitted until its whole recompute fits.
//  R5 A waiting request that does not fit stops admission for this step: nobody younger jumps
//     it for memory. (Only two kinds of waiting request are passed over: an n > 1 sibling waiting
//     for its leader's prompt, and a prefill that would exceed the partial-prefill caps, unless
//     it is the oldest request of all, which then also stops admission.)
// Hence: the oldest running request finishes (R1-R3); when the oldest request of all is
// waiting, nothing is admitted ahead of it, the running set drains, and then it fits (R1, R4,
// R5). By induction on the key order every admitted request finishes, and a step is never empty
// while a request is unfinished.
//
// PAUSED REQUESTS (pause_request; the server pauses a stream whose client stops reading) are
// outside the argument above, and never hold back the others: a paused request is neither
// scheduled nor admitted; a running one keeps its KV blocks only while nobody else needs them.
//  P1 A request that needs blocks (R3) or admission that needs blocks or a sequence slot (R4)
//     preempts paused running requests first, the youngest first, whatever their age.
//  P2 A paused request still prefilling is preempted at the next schedule(), so paused running
//     requests hold no partial-prefill slot; an n > 1 sibling whose leader is paused runs alone.
// So the argument holds over the unpaused requests as if the paused ones did not exist, and a
// step is never empty while an unpaused request is unfinished.
#pragma once

#include <deque>
#include <memory>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/status.h"
#include "kv/cache_config.h"
#include "kv/kv_cache_manager.h"
#include "kv/kv_tiers.h"
#include "kv/state_slots.h"
#include "sched/clock.h"
#include "sched/request.h"
#include "sched/scheduler_config.h"
#include "sched/scheduler_output.h"

namespace strata::sched {

class Scheduler {
 public:
  // Validates both configs. `num_kv_blocks` is the pool size including the null block (>= 2).
  // `clock` (not owned, must outlive the scheduler) defaults to the steady clock.
  static Result<std::unique_ptr<Scheduler>> create(const SchedulerConfig& config,
                                                   const kv::CacheConfig& cache_config,
                                                   int64_t num_kv_blocks,
                                                   const Clock* clock = nullptr);

  // Queues a request. Errors (nothing queued): empty or duplicate id, empty prompt, negative
  // token ids, bad stop config, prompt >= max_model_len (kOutOfRange), prompt + 1 token larger
  // than the whole KV pool (kResourceExhausted), sibling prompt/salt different from its leader.
  Status add_request(RequestSpec spec);
  // Aborts an unfinished request; its blocks are freed at once. kNotFound when unknown/finished.
  Status abort_request(std::string_view request_id);
  // Finishes an unfinished request with `reason` (the engine uses kStop when a stop string
  // matched); frees its blocks at once. kNotFound when unknown or already finished.
  Status finish_request(std::string_view request_id, FinishReason reason);
  // Pauses an unfinished request (P1, P2): it is not scheduled until resume_request(). A running
  // one keeps its blocks until an unpaused request needs them. kNotFound when unknown or
  // finished; pausing a paused request (or resuming a running one) changes nothing.
  Status pause_request(std::string_view request_id);
  Status resume_request(std::string_view request_id);

  // Plans one step. Never empty while a request is unfinished, except while requests wait for KV
  // tier loads (has_kv_loads_in_flight()): the executor then runs the plan anyway (it waits for
  // the loads) and the next plan schedules them.
  StepPlan schedule();
  // Applies a step: `sampled_token_ids[i]` is the token sampled for plan.scheduled[i]
  // (required when will_sample, ignored otherwise). Returns one output per sampled token.
  // Requests aborted or finished since schedule() are skipped.
  // With speculative decoding, `accepted[i]` (when given) are the tokens after
  // sampled_token_ids[i] that the step also produced for an entry with drafts (the accepted
  // drafts' successors: plan.scheduled[i]'s drafts matched up to there); one output per token.
  // With drafts the workers propose (MTP), `proposals[i]` (when given) are the drafts for
  // plan.scheduled[i]'s next entry.
  std::vector<RequestOutput> update(const StepPlan& plan,
                                    std::span<const int32_t> sampled_token_ids,
                                    std::span<const std::vector<int32_t>> accepted = {},
                                    std::span<const std::vector<int32_t>> proposals = {});

  // PIPELINE OVERLAP. With depth > 1 the engine keeps up to `depth` plans outstanding (submitted
  // to the pipeline, not yet given to update()), and gives every plan that scheduled requests to
  // update(), in the order planned. The requests of an outstanding plan are "in flight":
  // schedule() skips them (their next tokens are planned once their plan is applied), a partial
  // prefill in flight keeps its prefill slot, and preemption never takes one: a request that
  // needs a block preempts the youngest request not in flight (R3 over the requests not in
  // flight); when that is itself and younger requests are in flight, it waits for their plans
  // (not scheduled, and nothing admitted, this step) and preempts them once they are back. Each
  // plan takes at most ceil(unpaused unfinished requests / depth) requests, so the micro-batches
  // are balanced. Requests may still be aborted or finished while in flight (their blocks go back
  // at once; the stages run the plans in order, so a later plan's writes to those blocks come
  // after). Depth 1 (the default): plans are not tracked, and a plan never given to update() is
  // simply replaced by the next.
  void set_pipeline_depth(int depth) { depth_ = depth < 1 ? 1 : depth; }
  int pipeline_depth() const { return depth_; }
  int64_t num_plans_in_flight() const { return static_cast<int64_t>(outstanding_.size()); }
  // A plan in flight that will never be applied (its step failed): its requests are no longer in
  // flight and are planned again from where they were.
  void abandon_plan(const StepPlan& plan);

  // KV TIERS. With `tiers` set (and prefix caching on), admission continues a prefix lookup that
  // misses the pool in the tiers: a request whose next blocks are there is admitted holding
  // blocks for all its tokens, the tier blocks go in plan.kv_loads (pinned until they finish),
  // and it is not scheduled until finish_kv_loads() has seen them all; then its computed prefix
  // extends over the loaded blocks up to the first failed one, and the rest is recomputed.
  // Blocks a step makes findable in the pool go in the next plan's kv_stores unless the tiers
  // hold them already, so a preempted or finished request's work survives pool eviction.
  // `tiers` (not owned) must outlive the scheduler; nullptr turns them off.
  void set_kv_tiers(const kv::KvTierDirectory* tiers) { tiers_ = tiers; }

  // PER-SEQUENCE STATE (models whose KvSpec::has_state(), kv/state_slots.h). Before any request
  // is added: each running request then holds one of `num_running` (>= max_num_seqs) state
  // slots, given at admission and freed when it finishes or is preempted; plan entries carry it
  // (ScheduledRequest::state_slot). With prefix caching, `num_snapshots` slots keep the state at
  // block boundaries: entries crossing boundaries ask for snapshots (plan.state_snapshots), and
  // a prefix-cache hit (pool, tiers or an n > 1 fork) is cut back to the longest prefix whose
  // last block has a ready snapshot, restored into the request's slot by its first entry
  // (plan.state_restores). Refused with speculative decoding (a state cannot take back rejected
  // drafts).
  Status enable_state_slots(int64_t num_running, int64_t num_snapshots);
  const kv::StateSlots& state_slots() const { return state_; }
  void finish_kv_loads(std::span<const kv::KvLoadResult> results);
  bool has_kv_loads_in_flight() const { return !loads_in_flight_.empty(); }

  // The current block table of a scheduled request (valid until the next schedule()).
  std::span<const kv::BlockId> block_table(const ScheduledRequest& s) const;
  std::span<const kv::BlockId> block_table(RequestHandle h) const;

  // Lookups; nullptr for unknown, finished-and-released or stale handles.
  const Request* find_request(std::string_view request_id) const;
  const Request* get(RequestHandle h) const;

  // Requests in policy order (oldest first), for tests, the simulator and debugging.
  std::vector<const Request*> running_requests() const {
    return std::vector<const Request*>(running_.begin(), running_.end());
  }
  std::vector<const Request*> waiting_requests() const {
    return std::vector<const Request*>(waiting_.begin(), waiting_.end());
  }
  // True when `a` comes before `b` in the policy order (older / higher priority).
  static bool runs_before(const Request& a, const Request& b) { return key_less(a, b); }

  bool has_unfinished_requests() const { return !running_.empty() || !waiting_.empty(); }
  // Unfinished requests that are not paused: schedule() plans work exactly when there are some.
  bool has_runnable_requests() const { return num_running() + num_waiting() > num_paused_; }
  int64_t num_paused() const { return num_paused_; }
  int64_t num_running() const { return static_cast<int64_t>(running_.size()); }
  int64_t num_waiting() const { return static_cast<int64_t>(waiting_.size()); }
  // Generation stops at this many tokens (prompt + output): min(max_model_len, pool tokens).
  int64_t max_request_len() const { return max_request_len_; }
  // Blocks left free (beyond a request's needs) when admitting while others run.
  int64_t admission_watermark_blocks() const { return watermark_blocks_; }
  const SchedulerConfig& config() const { return config_; }
  const kv::CacheConfig& cache_config() const { return cache_config_; }
  const kv::KvCacheManager& kv() const { return kv_; }
  SchedulerStats stats() const;

  // Aborts with a message when the queues, request states, block tables, the pool or the
  // partial-prefill caps disagree. O(requests + pool): for tests.
  void check_invariants() const;

 private:
  struct KeyLess {
    bool operator()(const Request* a, const Request* b) const { return key_less(*a, *b); }
  };
  struct StringHash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>()(s); }
  };
  struct PrefillSlots {
    int64_t partial = 0;
    int64_t long_partial = 0;
    int64_t prompt_tokens_left = INT64_MAX;  // max_prefill_tokens_with_decode's share left
  };

  Scheduler(const SchedulerConfig& config, const kv::CacheConfig& cache_config,
            int64_t num_kv_blocks, const Clock* clock);
  static bool key_less(const Request& a, const Request& b);
  Request* lookup(std::string_view id) const;
  Request* get_mutable(RequestHandle h) const;
  kv::SeqId seq(const Request& r) const { return r.handle_.slot; }

  // schedule() helpers (scheduler_schedule.cpp).
  void release_finished(StepPlan* plan);
  void schedule_running(StepPlan* plan, int64_t* budget, PrefillSlots* slots);
  void schedule_waiting(StepPlan* plan, int64_t* budget, PrefillSlots* slots);
  bool sibling_gated(Request* r) const;
  int64_t chunk_size(int64_t remaining, int64_t budget) const;
  bool is_long(int64_t remaining) const {
    return long_threshold_ > 0 && remaining > long_threshold_;
  }
  void preempt(Request* victim, StepPlan* plan);
  Request* youngest_paused_running() const;
  // R3 over the requests not in flight: the youngest running request not in flight (it is
  // `requester` or younger); nullptr when that is `requester` while younger requests are in
  // flight (it waits for their plans rather than preempt itself).
  Request* youngest_preemptable(const Request* requester) const;
  void preempt_paused_prefills(StepPlan* plan);
  void add_entry(StepPlan* plan, Request* r, int64_t n, std::span<const kv::BlockId> blocks,
                 bool new_table, std::span<const int32_t> drafts = {});
  // Draft tokens for a decoding request within `budget` (sched/spec_decode.h); empty when off.
  void propose_drafts(const Request& r, int64_t budget);
  void count_speculation(Request* r, int64_t drafts, int64_t accepted);
  RequestOutput output_for(Request* r, int32_t token, FinishReason reason) const;
  void publish_computed(Request* r);
  // Per-sequence state helpers (scheduler_schedule.cpp).
  bool snapshot_ready(const Request& r, int64_t block_index) const;
  void cut_hit_for_state(Request* w, kv::ComputedBlocks* hit);
  void admit_state(Request* w, const kv::ComputedBlocks& hit);
  void release_state(Request* r);
  void insert_running(Request* r);
  void erase_running(Request* r);

  // update() helpers (scheduler.cpp).
  FinishReason check_stop(Request* r, int32_t token) const;
  void finish(Request* r, FinishReason reason, double now);

  SchedulerConfig config_;
  kv::CacheConfig cache_config_;
  const Clock* clock_;
  kv::KvCacheManager kv_;
  kv::StateSlots state_;
  int64_t max_request_len_;
  int64_t long_threshold_;
  int64_t watermark_blocks_;

  std::vector<std::unique_ptr<Request>> slots_;
  std::vector<uint32_t> free_slots_;
  std::unordered_map<std::string, uint32_t, StringHash, std::equal_to<>> by_id_;
  std::vector<Request*> running_;  // sorted by key (oldest first)
  std::set<Request*, KeyLess> waiting_;
  std::vector<Request*> finished_;  // finished since the last schedule(); released there
  uint64_t next_seq_no_ = 0;
  uint64_t step_ = 0;
  int depth_ = 1;                     // set_pipeline_depth()
  std::deque<uint64_t> outstanding_;  // steps of the plans in flight, oldest first
  bool waiting_for_flight_ = false;   // this schedule(): a request waits for a plan in flight
  int64_t plan_seq_cap_ = INT64_MAX;  // this schedule(): requests per plan

  int64_t num_preemptions_ = 0;
  int64_t prompt_tokens_ = 0;
  int64_t generation_tokens_ = 0;
  int64_t num_finished_ = 0;
  int64_t num_paused_ = 0;  // unfinished paused requests

  // KV tiers.
  struct PendingLoad {
    RequestHandle handle;
    uint64_t epoch = 0;
    int64_t index = 0;  // into the request's load_state_
    kv::BlockHash hash;
  };
  void admit_with_tier_loads(Request* w, const kv::ComputedBlocks& hit, int64_t num_loads,
                             StepPlan* plan, double now);
  void drop_loads(Request* r);
  const kv::KvTierDirectory* tiers_ = nullptr;
  std::unordered_map<kv::BlockId, PendingLoad> loads_in_flight_;
  std::vector<kv::Tier> tier_found_;  // scratch of schedule_waiting(): a prefix's tier blocks
  std::vector<std::pair<kv::BlockId, kv::BlockHash>> newly_cached_;
  std::vector<KvTransfer> pending_stores_;
  uint64_t next_load_epoch_ = 0;
  kv::TierHitStats tier_stats_;

  // Speculative decoding.
  std::vector<int32_t> drafts_;       // scratch of propose_drafts()
  std::vector<int32_t> step_tokens_;  // scratch of update(): an entry's new tokens
  int64_t step_draft_tokens_ = 0;
  int64_t spec_num_drafts_ = 0, spec_num_draft_tokens_ = 0, spec_num_accepted_ = 0;
  std::vector<int64_t> spec_accepted_per_pos_;
};

}  // namespace strata::sched
