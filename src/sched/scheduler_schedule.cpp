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
  // Blocks published by the last update(): copied down before this step's forward pass can
  // reuse them.
  plan.kv_stores = std::move(pending_stores_);
  pending_stores_.clear();
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
  step_draft_tokens_ = 0;
  waiting_for_flight_ = false;
  plan_seq_cap_ = INT64_MAX;
  if (depth_ > 1) {  // balanced micro-batches
    const int64_t runnable = num_running() + num_waiting() - num_paused_;
    plan_seq_cap_ = std::max<int64_t>(1, (runnable + depth_ - 1) / depth_);
  }
  schedule_running(&plan, &budget, &slots);
  if (!waiting_for_flight_) schedule_waiting(&plan, &budget, &slots);
  plan.total_num_scheduled_tokens = config_.max_num_batched_tokens - budget;
  if (depth_ > 1 && !plan.scheduled.empty()) {
    for (const ScheduledRequest& e : plan.scheduled) get_mutable(e.handle)->in_flight_ = true;
    outstanding_.push_back(plan.step);
  }
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
                          std::span<const kv::BlockId> blocks, bool new_table,
                          std::span<const int32_t> drafts) {
  ScheduledRequest s;
  s.request_id = r->id_;
  s.handle = r->handle_;
  s.num_computed_tokens = r->num_computed_tokens_;
  s.num_scheduled_tokens = n;
  r->num_scheduled_tokens_ = n;
  const int64_t known = n - static_cast<int64_t>(drafts.size());  // tokens the request has
  r->num_draft_tokens_ = static_cast<int64_t>(drafts.size());
  s.token_ids_offset = static_cast<uint32_t>(plan->token_ids.size());
  const auto first = r->token_ids_.begin() + r->num_computed_tokens_;
  plan->token_ids.insert(plan->token_ids.end(), first, first + known);
  plan->token_ids.insert(plan->token_ids.end(), drafts.begin(), drafts.end());
  s.spec_token_ids_offset = static_cast<uint32_t>(plan->spec_token_ids.size());
  s.spec_token_ids_count = static_cast<uint32_t>(drafts.size());
  plan->spec_token_ids.insert(plan->spec_token_ids.end(), drafts.begin(), drafts.end());
  s.new_block_table = new_table;
  s.will_sample = r->num_computed_tokens_ + known == r->num_tokens();
  s.block_ids_offset = static_cast<uint32_t>(plan->block_ids.size());
  s.block_ids_count = static_cast<uint32_t>(blocks.size());
  plan->block_ids.insert(plan->block_ids.end(), blocks.begin(), blocks.end());
  if (state_.enabled()) {
    s.state_slot = r->state_slot_;
    if (r->restore_from_ >= 0) {  // its first entry after admission resumes from a snapshot
      STRATA_CHECK(new_table) << r->id_ << ": a state restore without a new block table";
      plan->state_restores.push_back({r->restore_from_, r->state_slot_});
      state_.unpin(r->restore_from_);
      r->restore_from_ = -1;
    }
    if (r->tier_fallback_ >= 0) {
      state_.unpin(r->tier_fallback_);
      r->tier_fallback_ = -1;
    }
    // Snapshots at the block boundaries this entry crosses (those not kept yet), for later
    // prefix-cache hits: its full blocks get cached after the step.
    const int64_t bs = kv_.block_size();
    const int64_t end = r->num_computed_tokens_ + known;
    const int64_t hashes = static_cast<int64_t>(r->block_hashes_.size());
    if (state_.num_snapshots() > 0)
      for (int64_t b = r->num_computed_tokens_ / bs + 1; b * bs <= end && b <= hashes; ++b)
        if (auto slot = state_.reserve(r->block_hashes_[static_cast<size_t>(b - 1)], plan->step))
          plan->state_snapshots.push_back(
              {static_cast<uint32_t>(plan->scheduled.size()), b * bs, *slot});
  }
  plan->scheduled.push_back(s);
}

bool Scheduler::snapshot_ready(const Request& r, int64_t block_index) const {
  return block_index >= 0 && block_index < static_cast<int64_t>(r.block_hashes_.size()) &&
         state_.is_ready(r.block_hashes_[static_cast<size_t>(block_index)]);
}

// A stateful model resumes a cached prefix only where a snapshot of its state is kept: `hit`
// (and tier_found_, the tier blocks after it) are cut back to the longest prefix whose last
// block has a ready snapshot. Tier loads are kept only when the pool hit's own end has one too
// (or the pool hit is empty): a failed load then resumes there, never rewriting shared blocks.
void Scheduler::cut_hit_for_state(Request* w, kv::ComputedBlocks* hit) {
  const int64_t pool = static_cast<int64_t>(hit->blocks.size());
  const int64_t total = pool + static_cast<int64_t>(tier_found_.size());
  int64_t k = total;
  while (k > 0 && !snapshot_ready(*w, k - 1)) --k;
  if (k > pool && (pool == 0 || snapshot_ready(*w, pool - 1))) {
    state_.count_hit_cut(total - k);
    tier_found_.resize(static_cast<size_t>(k - pool));
    return;
  }
  k = std::min(k, pool);
  while (k > 0 && !snapshot_ready(*w, k - 1)) --k;
  state_.count_hit_cut(total - k);
  tier_found_.clear();
  hit->blocks.resize(static_cast<size_t>(k));
  hit->num_tokens = k * kv_.block_size();
}

// At admission: a running slot, and the snapshot to restore from (pinned until the entry that
// restores it): at the end of the pool hit, or with tier loads at their end, the pool hit's end
// pinned as the fallback.
void Scheduler::admit_state(Request* w, const kv::ComputedBlocks& hit) {
  w->state_slot_ = state_.acquire();
  const int64_t pool = static_cast<int64_t>(hit.blocks.size());
  const int64_t end = pool + static_cast<int64_t>(tier_found_.size());
  auto pin_at = [&](int64_t blocks) -> int32_t {
    if (blocks == 0) return -1;
    auto slot = state_.find_ready(w->block_hashes_[static_cast<size_t>(blocks - 1)]);
    STRATA_CHECK(slot.has_value()) << w->id_ << ": the snapshot of its hit is gone";
    state_.pin(*slot);
    return *slot;
  };
  w->restore_from_ = pin_at(end);
  if (end > 0) state_.count_restore();
  if (end > pool) {
    w->tier_fallback_ = pin_at(pool);
    w->tier_fallback_tokens_ = pool * kv_.block_size();
  }
}

void Scheduler::release_state(Request* r) {
  if (r->restore_from_ >= 0) state_.unpin(r->restore_from_);
  if (r->tier_fallback_ >= 0) state_.unpin(r->tier_fallback_);
  if (r->state_slot_ >= 0) state_.release(r->state_slot_);
  r->restore_from_ = r->tier_fallback_ = r->state_slot_ = -1;
}

// Recompute preemption: the victim's blocks go back to the pool (its full computed blocks stay
// findable in the prefix cache until reused), and it waits to be admitted again, in key order.
// The victim is the youngest running request (R3) or a paused one (P1, P2).
void Scheduler::preempt(Request* victim, StepPlan* plan) {
  bool youngest = true;  // no younger running request is out of flight
  for (auto it = running_.rbegin(); it != running_.rend() && *it != victim; ++it)
    if (!(*it)->in_flight_) youngest = false;
  STRATA_CHECK(!running_.empty() && !victim->in_flight_ && (youngest || victim->paused_))
      << "only the youngest request not in flight or a paused one is preempted";
  erase_running(victim);
  drop_loads(victim);
  release_state(victim);
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
    if ((*it)->paused_ && !(*it)->in_flight_) return *it;
  return nullptr;
}

Request* Scheduler::youngest_preemptable(const Request* requester) const {
  bool younger_in_flight = false;
  for (auto it = running_.rbegin(); it != running_.rend(); ++it) {
    if ((*it)->in_flight_) {
      younger_in_flight = true;
      continue;
    }
    // The requester itself (not in flight) is reached at the latest. Rather than preempt itself
    // while younger requests are in flight, it waits for them: they can be preempted once back.
    if (*it == requester && younger_in_flight) return nullptr;
    return *it;
  }
  return nullptr;
}

// P2: paused requests still prefilling go back to waiting, so that running paused requests hold
// no partial-prefill slot (they resume from the prefix cache where it kept their blocks).
void Scheduler::preempt_paused_prefills(StepPlan* plan) {
  if (num_paused_ == 0) return;
  std::vector<Request*> victims;
  for (Request* r : running_)
    if (r->paused_ && !r->in_flight_ && r->num_tokens() - r->num_computed_tokens_ > 1)
      victims.push_back(r);
  for (Request* r : victims) preempt(r, plan);
}

// R2, R3, P1: running requests in key order, paused ones skipped; one needing a block preempts
// paused requests first, then the youngest running request (never an older one, never one
// already scheduled this step, since those are older).
void Scheduler::schedule_running(StepPlan* plan, int64_t* budget, PrefillSlots* slots) {
  for (size_t i = 0; i < running_.size(); ++i) {
    Request* r = running_[i];
    if (r->in_flight_) {  // its plan is outstanding: a prefill continuing after it keeps its slot
      const int64_t remaining = r->num_tokens() - r->num_computed_tokens_;
      if (remaining > 1 && r->num_scheduled_tokens_ < remaining) {
        ++slots->partial;
        if (is_long(remaining)) ++slots->long_partial;
      }
      continue;
    }
    r->num_scheduled_tokens_ = 0;  // a plan never given to update() is simply replaced
    r->num_draft_tokens_ = 0;
    if (r->paused_) continue;  // decoding (P2): needs no prefill slot
    if (static_cast<int64_t>(plan->scheduled.size()) >= plan_seq_cap_) continue;
    const int64_t remaining = r->num_tokens() - r->num_computed_tokens_;
    if (r->num_loading_ > 0) {  // waits for its tier blocks; holds a prefill slot meanwhile
      ++slots->partial;
      if (is_long(remaining)) ++slots->long_partial;
      continue;
    }
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
    drafts_.clear();
    if (remaining == 1 && r->speculate_ && r->table_sent_ && r->spec_skip_ > 0) {
      --r->spec_skip_;  // backing off after rejected drafts
    } else if (remaining == 1 && r->speculate_ && r->table_sent_) {
      propose_drafts(*r, *budget - n);
      // Drafts only take blocks that are free: never a preemption for them.
      const int64_t fit =
          (kv_.num_blocks_held(seq(*r)) + kv_.num_allocatable_blocks()) * kv_.block_size() -
          (r->num_computed_tokens_ + n);
      if (fit < static_cast<int64_t>(drafts_.size()))
        drafts_.resize(static_cast<size_t>(std::max<int64_t>(0, fit)));
      step_draft_tokens_ += static_cast<int64_t>(drafts_.size());
    }
    n += static_cast<int64_t>(drafts_.size());
    const int64_t total = r->num_computed_tokens_ + n;
    if (!r->table_sent_) {  // first entry after its tier loads: send the whole table
      r->table_sent_ = true;
      add_entry(plan, r, n, kv_.block_table(seq(*r)), /*new_table=*/true);
      *budget -= n;
      continue;
    }
    if (kv_.num_blocks_to_allocate(seq(*r), total) == 0) {  // the common case: no new block
      add_entry(plan, r, n, {}, /*new_table=*/false, drafts_);
      *budget -= n;
      continue;
    }
    bool self_preempted = false;
    bool took_paused = false;
    while (kv_.num_blocks_to_allocate(seq(*r), total) > kv_.num_allocatable_blocks()) {
      Request* victim = youngest_paused_running();
      took_paused |= victim != nullptr;
      if (victim == nullptr) victim = youngest_preemptable(r);
      if (victim == nullptr) break;  // every younger request is in flight: wait for them
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
    if (kv_.num_blocks_to_allocate(seq(*r), total) > kv_.num_allocatable_blocks()) {
      // Waits for the plans in flight (pipeline overlap): not scheduled, and nobody is admitted
      // ahead of it; its prefill slot (if any) stays counted.
      waiting_for_flight_ = true;
      if (took_paused)
        i = static_cast<size_t>(std::lower_bound(running_.begin(), running_.end(), r, KeyLess()) -
                                running_.begin());
      continue;
    }
    if (took_paused)  // paused requests older than r may have left: find r's place again
      i = static_cast<size_t>(std::lower_bound(running_.begin(), running_.end(), r, KeyLess()) -
                              running_.begin());
    auto new_blocks = kv_.allocate_slots(seq(*r), r->num_computed_tokens_, n);
    STRATA_CHECK(new_blocks.has_value()) << "allocation failed after the fit check";
    add_entry(plan, r, n, *new_blocks, /*new_table=*/false, drafts_);
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
    if (static_cast<int64_t>(plan->scheduled.size()) >= plan_seq_cap_) return;
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
    // The pool's hit continued in the KV tiers: blocks to load rather than compute.
    tier_found_.clear();
    if (tiers_ != nullptr && !hit.from_fork && kv_.prefix_caching_enabled()) {
      const int64_t max_blocks = std::min<int64_t>((w->num_tokens() - 1) / kv_.block_size(),
                                                   static_cast<int64_t>(w->block_hashes_.size()));
      for (int64_t i = static_cast<int64_t>(hit.blocks.size()); i < max_blocks; ++i) {
        const kv::Tier t = tiers_->find(w->block_hashes_[i]);
        if (t == kv::Tier::kNone) break;
        tier_found_.push_back(t);
      }
    }
    if (state_.enabled()) cut_hit_for_state(w, &hit);
    const int64_t tier_blocks = static_cast<int64_t>(tier_found_.size());
    // A request whose next blocks are in the tiers is admitted now, computes nothing until they
    // arrive, and holds a prefill slot meanwhile.
    const bool loading = tier_blocks > 0;
    const int64_t remaining = w->num_tokens() - hit.num_tokens;
    const int64_t n =
        loading ? 0 : std::min(chunk_size(remaining, *budget), slots->prompt_tokens_left);
    const bool partial = loading || (n < remaining && remaining > 1);
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
    if (state_.enabled()) admit_state(w, hit);
    if (loading) {
      it = waiting_.erase(it);
      admit_with_tier_loads(w, hit, tier_blocks, plan, now);
      ++slots->partial;
      if (is_long(remaining)) ++slots->long_partial;
      older_seen = true;
      continue;
    }
    if (tiers_ != nullptr && !hit.from_fork && kv_.prefix_caching_enabled())
      tier_stats_.queries += remaining;
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

// Draft tokens for `r` (decoding, its last token scheduled) into drafts_: at most
// num_speculative_tokens, `budget` and the step's draft cap, and never more than the request may
// still generate (the accepted drafts and the model's own next token all become outputs); none
// when disable_by_batch_size requests or more run. With a draft model they are kNoToken places
// the worker fills, as many as the request's spec_len_ (one after a miss, growing back as drafts
// are accepted: a draft that is never right costs one draft pass per attempt).
void Scheduler::propose_drafts(const Request& r, int64_t budget) {
  const SpeculativeConfig& sc = config_.speculative;
  int64_t k = std::min(sc.num_speculative_tokens, budget);
  k = std::min(k, config_.max_draft_tokens_per_step - step_draft_tokens_);
  int64_t allowance = max_request_len_ - r.num_tokens();  // tokens it may still append
  if (r.stop_.max_tokens > 0)
    allowance = std::min(allowance, r.stop_.max_tokens - r.num_output_tokens());
  k = std::min(k, allowance - 1);
  if (k <= 0) return;
  if (sc.disable_by_batch_size > 0 &&
      static_cast<int64_t>(running_.size()) >= sc.disable_by_batch_size)
    return;
  if (sc.uses_mtp()) {  // what the worker's MTP layer proposed after the request's last step
    const auto& p = r.proposed_drafts_;
    drafts_.assign(p.begin(), p.begin() + std::min<int64_t>(k, static_cast<int64_t>(p.size())));
    return;
  }
  if (sc.uses_draft_model()) {  // the worker's draft model fills these places
    if (r.spec_len_ > 0) k = std::min<int64_t>(k, r.spec_len_);
    drafts_.assign(static_cast<size_t>(k), kNoToken);
    return;
  }
  propose_ngram(r.token_ids_, sc.prompt_lookup_min, sc.prompt_lookup_max, k, &drafts_);
}

// Admits `w` (already out of the waiting queue, its blocks known to fit) with blocks for all its
// tokens: `hit` from the pool, then `num_loads` blocks to load from the tiers (where
// tier_found_ saw them), pinned until finish_kv_loads() has them, then the rest to compute.
void Scheduler::admit_with_tier_loads(Request* w, const kv::ComputedBlocks& hit, int64_t num_loads,
                                      StepPlan* plan, double now) {
  auto blocks = kv_.allocate_slots(seq(*w), 0, 0, &hit, w->num_tokens() - hit.num_tokens);
  STRATA_CHECK(blocks.has_value()) << "allocation failed after the fit check";
  w->has_leader_ = false;
  w->num_computed_tokens_ = hit.num_tokens;
  w->status_ = RequestStatus::kRunning;
  if (w->times_.first_scheduled < 0) w->times_.first_scheduled = now;
  insert_running(w);
  w->table_sent_ = false;
  w->load_epoch_ = ++next_load_epoch_;
  w->load_first_block_ = static_cast<int64_t>(hit.blocks.size());
  w->load_state_.assign(static_cast<size_t>(num_loads), 0);
  w->num_loading_ = num_loads;
  tier_stats_.queries += w->num_tokens() - hit.num_tokens;
  tier_stats_.loads += num_loads;
  const auto table = kv_.block_table(seq(*w));
  for (int64_t j = 0; j < num_loads; ++j) {
    const int64_t index = w->load_first_block_ + j;
    const kv::BlockId b = table[static_cast<size_t>(index)];
    const kv::BlockHash& h = w->block_hashes_[static_cast<size_t>(index)];
    kv_.pin(b);
    loads_in_flight_[b] = PendingLoad{w->handle_, w->load_epoch_, j, h};
    plan->kv_loads.push_back(
        {b, static_cast<uint32_t>(tier_found_[static_cast<size_t>(j)]), h.lo, h.hi});
  }
}

// Forgets the loads of `r` (preempted or finished): their pins keep the blocks out of the free
// list until they finish, and finish_kv_loads() then only publishes what arrived.
void Scheduler::drop_loads(Request* r) {
  r->num_loading_ = 0;
  r->load_state_.clear();
  r->table_sent_ = true;
  ++r->load_epoch_;
}

void Scheduler::finish_kv_loads(std::span<const kv::KvLoadResult> results) {
  for (const kv::KvLoadResult& res : results) {
    auto found = loads_in_flight_.find(res.block);
    STRATA_CHECK(found != loads_in_flight_.end())
        << "KV tier load result for block " << res.block << " that is not loading";
    const PendingLoad p = found->second;
    loads_in_flight_.erase(found);
    if (!res.ok) ++tier_stats_.failed_loads;
    Request* r = get_mutable(p.handle);
    const bool live = r != nullptr && r->num_loading_ > 0 && r->load_epoch_ == p.epoch;
    if (!live) {
      // Its request is gone: the block's data is good and nobody writes it, so keep it findable.
      if (res.ok) kv_.publish_block(res.block, p.hash);
      kv_.unpin(res.block);
      continue;
    }
    kv_.unpin(res.block);
    r->load_state_[static_cast<size_t>(p.index)] = res.ok ? 1 : 2;
    if (--r->num_loading_ > 0) continue;
    // All arrived: the computed prefix runs over the loaded blocks up to the first failure; the
    // blocks after it (even loaded ones) are recomputed by this request, so stay unpublished.
    int64_t loaded = 0;
    while (loaded < static_cast<int64_t>(r->load_state_.size()) &&
           r->load_state_[static_cast<size_t>(loaded)] == 1)
      ++loaded;
    const bool all_loaded = loaded == static_cast<int64_t>(r->load_state_.size());
    r->load_state_.clear();
    r->num_computed_tokens_ = (r->load_first_block_ + loaded) * kv_.block_size();
    if (state_.enabled() && !all_loaded) {
      // The state is kept only at the loads' end and the pool hit's end: resume at the latter.
      if (r->restore_from_ >= 0) state_.unpin(r->restore_from_);
      r->restore_from_ = r->tier_fallback_;
      r->tier_fallback_ = -1;
      r->num_computed_tokens_ = r->tier_fallback_tokens_;
      loaded = 0;
    }
    tier_stats_.hits += loaded * kv_.block_size();
    kv_.cache_blocks(seq(*r), r->block_hashes_, r->num_computed_tokens_);
  }
}

}  // namespace strata::sched
