// Scheduler::schedule() and its policy helpers. The rules R1-R5 are stated in scheduler.h.
#include <algorithm>

#include "core/check.h"
#include "sched/scheduler.h"

namespace strata::sched {

StepPlan Scheduler::schedule() {
  StepPlan plan;
  plan.step = ++step_;
  plan.scheduled.reserve(running_.size() + 8);
  plan.token_ids.reserve(static_cast<size_t>(config_.max_num_batched_tokens));
  release_finished(&plan);
  int64_t budget = config_.max_num_batched_tokens;
  PrefillSlots slots;
  schedule_running(&plan, &budget, &slots);
  schedule_waiting(&plan, &budget, &slots);
  plan.total_num_scheduled_tokens = config_.max_num_batched_tokens - budget;
  return plan;
}

void Scheduler::release_finished(StepPlan* plan) {
  for (Request* r : finished_) {
    plan->finished_ids.push_back(r->id_);
    const uint32_t slot = r->handle_.slot;
    // Keep the object (its generation makes old handles stale) but drop its buffers.
    r->token_ids_ = {};
    r->block_hashes_ = {};
    r->id_.clear();
    ++r->handle_.generation;  // old handles go stale
    free_slots_.push_back(slot);
  }
  finished_.clear();
}

int64_t Scheduler::chunk_size(int64_t remaining, int64_t budget) const {
  int64_t n = std::min(remaining, budget);
  if (long_threshold_ > 0) n = std::min(n, long_threshold_);
  return n;
}

void Scheduler::insert_running(Request* r) {
  running_.insert(std::upper_bound(running_.begin(), running_.end(), r, KeyLess()), r);
}

void Scheduler::erase_running(Request* r) {
  auto it = std::lower_bound(running_.begin(), running_.end(), r, KeyLess());
  STRATA_CHECK(it != running_.end() && *it == r) << "request " << r->id_ << " is not running";
  running_.erase(it);
}

void Scheduler::add_entry(StepPlan* plan, Request* r, int64_t n,
                          std::span<const kv::BlockId> blocks, bool new_table) {
  ScheduledRequest s;
  s.request_id = r->id_;
  s.handle = r->handle_;
  s.num_computed_tokens = r->num_computed_tokens_;
  s.num_scheduled_tokens = n;
  r->num_scheduled_tokens_ = n;
  s.token_ids_offset = static_cast<uint32_t>(plan->token_ids.size());
  const auto first = r->token_ids_.begin() + r->num_computed_tokens_;
  plan->token_ids.insert(plan->token_ids.end(), first, first + n);
  s.new_block_table = new_table;
  s.will_sample = r->num_computed_tokens_ + n == r->num_tokens();
  s.block_ids_offset = static_cast<uint32_t>(plan->block_ids.size());
  s.block_ids_count = static_cast<uint32_t>(blocks.size());
  plan->block_ids.insert(plan->block_ids.end(), blocks.begin(), blocks.end());
  plan->scheduled.push_back(s);
}

// Recompute preemption: the victim's blocks go back to the pool (its full computed blocks stay
// findable in the prefix cache until reused), and it waits to be admitted again, in key order.
void Scheduler::preempt(Request* victim, StepPlan* plan) {
  STRATA_CHECK(!running_.empty() && running_.back() == victim) << "only the youngest is preempted";
  running_.pop_back();
  kv_.free(seq(*victim));
  victim->num_computed_tokens_ = 0;
  victim->status_ = RequestStatus::kPreempted;
  ++victim->num_preemptions_;
  ++num_preemptions_;
  waiting_.insert(victim);
  plan->preempted_ids.push_back(victim->id_);
}

// R2, R3: running requests in key order; one needing a block preempts the youngest running
// request (never an older one, never one already scheduled this step, since those are older).
void Scheduler::schedule_running(StepPlan* plan, int64_t* budget, PrefillSlots* slots) {
  for (size_t i = 0; i < running_.size(); ++i) {
    Request* r = running_[i];
    r->num_scheduled_tokens_ = 0;  // a plan never given to update() is simply replaced
    const int64_t remaining = r->num_tokens() - r->num_computed_tokens_;
    const int64_t n = chunk_size(remaining, *budget);
    if (n < remaining && remaining > 1) {  // still prefilling after this step: keeps its slot
      ++slots->partial;
      if (is_long(remaining)) ++slots->long_partial;
    }
    if (n == 0) continue;
    const int64_t total = r->num_computed_tokens_ + n;
    if (kv_.num_blocks_to_allocate(seq(*r), total) == 0) {  // the common case: no new block
      add_entry(plan, r, n, {}, /*new_table=*/false);
      *budget -= n;
      continue;
    }
    bool self_preempted = false;
    while (kv_.num_blocks_to_allocate(seq(*r), total) > kv_.num_allocatable_blocks()) {
      Request* victim = running_.back();
      self_preempted = victim == r;
      preempt(victim, plan);
      if (self_preempted) break;
    }
    if (self_preempted) {
      if (n < remaining && remaining > 1) {
        --slots->partial;
        if (is_long(remaining)) --slots->long_partial;
      }
      break;  // r was the youngest: nothing after it
    }
    auto new_blocks = kv_.allocate_slots(seq(*r), r->num_computed_tokens_, n);
    STRATA_CHECK(new_blocks.has_value()) << "allocation failed after the fit check";
    add_entry(plan, r, n, *new_blocks, /*new_table=*/false);
    *budget -= n;
  }
}

// An n > 1 sibling waits until its leader has computed the prompt blocks it will share. Once the
// leader is gone (finished or aborted), the sibling runs on its own.
bool Scheduler::sibling_gated(Request* r) const {
  if (!r->has_leader_) return false;
  const Request* leader = get_mutable(r->leader_);
  if (leader == nullptr || is_finished(leader->status_)) {
    r->has_leader_ = false;
    return false;
  }
  return !(leader->status_ == RequestStatus::kRunning &&
           leader->num_computed_tokens_ >= r->share_tokens_);
}

// R4, R5: admission in key order, reserving blocks for all known tokens.
void Scheduler::schedule_waiting(StepPlan* plan, int64_t* budget, PrefillSlots* slots) {
  const double now = clock_->now();
  for (auto it = waiting_.begin(); it != waiting_.end();) {
    if (*budget <= 0 || num_running() >= config_.max_num_seqs) return;
    Request* w = *it;
    // The oldest unfinished request of all: only it may not be passed over.
    const bool oldest = it == waiting_.begin() && (running_.empty() || key_less(*w, *running_[0]));
    if (sibling_gated(w)) {
      STRATA_CHECK(!oldest) << "the oldest request waits on a younger leader";
      ++it;
      continue;
    }
    kv::ComputedBlocks hit;
    if (w->has_leader_) {
      hit = kv_.fork(seq(*get_mutable(w->leader_)), w->share_tokens_);
    } else {
      hit = kv_.get_computed_blocks(w->block_hashes_, w->num_tokens());
    }
    const int64_t remaining = w->num_tokens() - hit.num_tokens;
    const int64_t n = chunk_size(remaining, *budget);
    const bool partial = n < remaining && remaining > 1;
    if (partial &&
        (slots->partial >= config_.max_num_partial_prefills ||
         (is_long(remaining) && slots->long_partial >= config_.max_long_partial_prefills))) {
      if (oldest) return;
      ++it;
      continue;
    }
    const int64_t watermark = running_.empty() ? 0 : watermark_blocks_;
    const int64_t need = kv_.num_blocks_to_allocate(seq(*w), w->num_tokens(), &hit);
    if (need + watermark > kv_.num_allocatable_blocks(&hit)) return;  // nobody jumps it
    auto blocks = kv_.allocate_slots(seq(*w), 0, n, &hit, remaining - n);
    STRATA_CHECK(blocks.has_value()) << "allocation failed after the fit check";
    it = waiting_.erase(it);
    w->has_leader_ = false;  // shared once; a resumed sibling uses the prefix cache
    w->num_computed_tokens_ = hit.num_tokens;
    w->status_ = RequestStatus::kRunning;
    if (w->times_.first_scheduled < 0) w->times_.first_scheduled = now;
    insert_running(w);
    add_entry(plan, w, n, kv_.block_table(seq(*w)), /*new_table=*/true);
    *budget -= n;
    if (partial) {
      ++slots->partial;
      if (is_long(remaining)) ++slots->long_partial;
    }
  }
}

}  // namespace strata::sched
