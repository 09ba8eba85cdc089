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
  preempt_paused_prefills(&plan);
  int64_t budget = config_.max_num_batched_tokens;
  PrefillSlots slots;
  if (config_.max_prefill_tokens_with_decode > 0) {
    for (const Request* r : running_) {
      if (!r->paused_ && r->num_tokens() - r->num_computed_tokens_ == 1) {  // decoding
        slots.prompt_tokens_left = config_.max_prefill_tokens_with_decode;
        break;
      }
    }
  }
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
// The victim is the youngest running request (R3) or a paused one (P1, P2).
void Scheduler::preempt(Request* victim, StepPlan* plan) {
  STRATA_CHECK(!running_.empty() && (running_.back() == victim || victim->paused_))
      << "only the youngest or a paused request is preempted";
  erase_running(victim);
  kv_.free(seq(*victim));
  victim->num_computed_tokens_ = 0;
  victim->status_ = RequestStatus::kPreempted;
  ++victim->num_preemptions_;
  ++num_preemptions_;
  waiting_.insert(victim);
  plan->preempted_ids.push_back(victim->id_);
}

Request* Scheduler::youngest_paused_running() const {
  for (auto it = running_.rbegin(); it != running_.rend(); ++it)
    if ((*it)->paused_) return *it;
  return nullptr;
}

// P2: paused requests still prefilling go back to waiting, so that running paused requests hold
// no partial-prefill slot (they resume from the prefix cache where it kept their blocks).
void Scheduler::preempt_paused_prefills(StepPlan* plan) {
  if (num_paused_ == 0) return;
  std::vector<Request*> victims;
  for (Request* r : running_)
    if (r->paused_ && r->num_tokens() - r->num_computed_tokens_ > 1) victims.push_back(r);
  for (Request* r : victims) preempt(r, plan);
}

// R2, R3, P1: running requests in key order, paused ones skipped; one needing a block preempts
// paused requests first, then the youngest running request (never an older one, never one
// already scheduled this step, since those are older).
void Scheduler::schedule_running(StepPlan* plan, int64_t* budget, PrefillSlots* slots) {
  for (size_t i = 0; i < running_.size(); ++i) {
    Request* r = running_[i];
    r->num_scheduled_tokens_ = 0;  // a plan never given to update() is simply replaced
    if (r->paused_) continue;      // decoding (P2): needs no prefill slot
    const int64_t remaining = r->num_tokens() - r->num_computed_tokens_;
    int64_t n = chunk_size(remaining, *budget);
    if (remaining > 1) {  // prompt tokens (a prefill, or a recompute after preemption)
      n = std::min(n, slots->prompt_tokens_left);
      slots->prompt_tokens_left -= n;
    }
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
    bool took_paused = false;
    while (kv_.num_blocks_to_allocate(seq(*r), total) > kv_.num_allocatable_blocks()) {
      Request* victim = youngest_paused_running();
      took_paused |= victim != nullptr;
      if (victim == nullptr) victim = running_.back();
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
    if (took_paused)  // paused requests older than r may have left: find r's place again
      i = static_cast<size_t>(std::lower_bound(running_.begin(), running_.end(), r, KeyLess()) -
                              running_.begin());
    auto new_blocks = kv_.allocate_slots(seq(*r), r->num_computed_tokens_, n);
    STRATA_CHECK(new_blocks.has_value()) << "allocation failed after the fit check";
    add_entry(plan, r, n, *new_blocks, /*new_table=*/false);
    *budget -= n;
  }
}

// An n > 1 sibling waits until its leader has computed the prompt blocks it will share. Once the
// leader is gone (finished or aborted) or paused (P2), the sibling runs on its own.
bool Scheduler::sibling_gated(Request* r) const {
  if (!r->has_leader_) return false;
  const Request* leader = get_mutable(r->leader_);
  if (leader == nullptr || is_finished(leader->status_) || leader->paused_) {
    r->has_leader_ = false;
    return false;
  }
  return !(leader->status_ == RequestStatus::kRunning &&
           leader->num_computed_tokens_ >= r->share_tokens_);
}

// R4, R5, P1: admission in key order, reserving blocks for all known tokens; paused requests
// are passed over, and give up their sequence slots and blocks to the requests admitted.
void Scheduler::schedule_waiting(StepPlan* plan, int64_t* budget, PrefillSlots* slots) {
  const double now = clock_->now();
  const Request* oldest_running = nullptr;  // the oldest unpaused running request
  for (const Request* r : running_) {
    if (!r->paused_) {
      oldest_running = r;
      break;
    }
  }
  bool older_seen = false;  // an unpaused waiting request before `it` (passed over or admitted)
  for (auto it = waiting_.begin(); it != waiting_.end();) {
    if (*budget <= 0 || slots->prompt_tokens_left <= 0) return;
    Request* w = *it;
    if (w->paused_) {
      ++it;
      continue;
    }
    if (num_running() >= config_.max_num_seqs) {
      Request* victim = youngest_paused_running();
      if (victim == nullptr) return;
      preempt(victim, plan);  // into waiting_: `it` stays valid; the victim is passed over
      continue;
    }
    // The oldest unfinished unpaused request of all: only it may not be passed over.
    const bool oldest = !older_seen && (oldest_running == nullptr || key_less(*w, *oldest_running));
    if (sibling_gated(w)) {
      STRATA_CHECK(!oldest) << "the oldest request waits on a younger leader";
      older_seen = true;
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
    const int64_t n = std::min(chunk_size(remaining, *budget), slots->prompt_tokens_left);
    const bool partial = n < remaining && remaining > 1;
    if (partial &&
        (slots->partial >= config_.max_num_partial_prefills ||
         (is_long(remaining) && slots->long_partial >= config_.max_long_partial_prefills))) {
      if (oldest) return;
      older_seen = true;
      ++it;
      continue;
    }
    const int64_t watermark = running_.empty() ? 0 : watermark_blocks_;
    const int64_t need = kv_.num_blocks_to_allocate(seq(*w), w->num_tokens(), &hit);
    if (need + watermark > kv_.num_allocatable_blocks(&hit)) {
      // P1: take a paused request's blocks and look again (they may now be a prefix hit).
      Request* victim = youngest_paused_running();
      if (victim == nullptr) return;  // nobody jumps it
      preempt(victim, plan);
      continue;
    }
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
    slots->prompt_tokens_left -= n;
    older_seen = true;
    if (partial) {
      ++slots->partial;
      if (is_long(remaining)) ++slots->long_partial;
    }
  }
}

}  // namespace strata::sched
