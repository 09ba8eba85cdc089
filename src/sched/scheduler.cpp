#include "sched/scheduler.h"

#include <algorithm>
#include <limits>

#include "core/check.h"

namespace strata::sched {

Result<std::unique_ptr<Scheduler>> Scheduler::create(const SchedulerConfig& config,
                                                     const kv::CacheConfig& cache_config,
                                                     int64_t num_kv_blocks, const Clock* clock) {
  STRATA_RETURN_IF_ERROR(config.validate());
  STRATA_RETURN_IF_ERROR(cache_config.validate());
  if (num_kv_blocks < 2 || num_kv_blocks > INT32_MAX) {
    return invalid_argument(
        "the KV cache needs at least 2 blocks (the null block and one usable "
        "block) and at most 2^31-1, got " +
        std::to_string(num_kv_blocks) +
        "; give it more memory (--kv-cache-memory) or a smaller --block-size");
  }
  return std::unique_ptr<Scheduler>(new Scheduler(config, cache_config, num_kv_blocks, clock));
}

Scheduler::Scheduler(const SchedulerConfig& config, const kv::CacheConfig& cache_config,
                     int64_t num_kv_blocks, const Clock* clock)
    : config_(config),
      cache_config_(cache_config),
      clock_(clock ? clock : &SteadyClock::instance()),
      kv_(num_kv_blocks, cache_config.block_size, cache_config.enable_prefix_caching) {
  max_request_len_ = std::min(config_.max_model_len, kv_.num_usable_blocks() * kv_.block_size());
  long_threshold_ = config_.effective_long_prefill_token_threshold();
  // vLLM v0's watermark: 1% of the pool, at least one block.
  watermark_blocks_ = std::max<int64_t>(1, kv_.num_usable_blocks() / 100);
  running_.reserve(static_cast<size_t>(config_.max_num_seqs));
}

Status Scheduler::enable_state_slots(int64_t num_running, int64_t num_snapshots) {
  if (num_running < config_.max_num_seqs || num_snapshots < 0)
    return invalid_argument("state slots: " + std::to_string(num_running) +
                            " running slots for max_num_seqs " +
                            std::to_string(config_.max_num_seqs));
  if (config_.speculative.enabled())
    return unimplemented(
        "speculative decoding with a model that keeps per-sequence state is not supported (the "
        "state cannot take back rejected drafts): drop --speculative-config");
  if (!by_id_.empty() || step_ > 0)
    return failed_precondition("state slots must be enabled before any request");
  state_ = kv::StateSlots(num_running, kv_.prefix_caching_enabled() ? num_snapshots : 0);
  return ok_status();
}

bool Scheduler::key_less(const Request& a, const Request& b) {
  if (a.priority_ != b.priority_) return a.priority_ < b.priority_;
  if (a.times_.arrival != b.times_.arrival) return a.times_.arrival < b.times_.arrival;
  return a.seq_no_ < b.seq_no_;
}

Request* Scheduler::lookup(std::string_view id) const {
  auto it = by_id_.find(id);
  return it == by_id_.end() ? nullptr : slots_[it->second].get();
}

Request* Scheduler::get_mutable(RequestHandle h) const {
  if (h.slot >= slots_.size()) return nullptr;
  Request* r = slots_[h.slot].get();
  return r && r->handle_ == h ? r : nullptr;
}

const Request* Scheduler::find_request(std::string_view id) const {
  return lookup(id);
}
const Request* Scheduler::get(RequestHandle h) const {
  return get_mutable(h);
}

std::span<const kv::BlockId> Scheduler::block_table(RequestHandle h) const {
  const Request* r = get(h);
  return r ? kv_.block_table(seq(*r)) : std::span<const kv::BlockId>();
}

std::span<const kv::BlockId> Scheduler::block_table(const ScheduledRequest& s) const {
  return block_table(s.handle);
}

Status Scheduler::add_request(RequestSpec spec) {
  const std::string& id = spec.request_id;
  if (id.empty()) return invalid_argument("request id is empty");
  if (by_id_.count(id)) {
    return invalid_argument("request id '" + id + "' is already in use by an unfinished request");
  }
  const int64_t p = static_cast<int64_t>(spec.prompt_token_ids.size());
  if (p == 0)
    return invalid_argument("request '" + id + "': the prompt is empty; give at least one token");
  for (int32_t t : spec.prompt_token_ids) {
    if (t < 0) {
      return invalid_argument("request '" + id + "': the prompt has a negative token id (" +
                              std::to_string(t) + ")");
    }
  }
  if (p >= config_.max_model_len) {
    return out_of_range("request '" + id + "': the prompt has " + std::to_string(p) +
                        " tokens but the maximum model length is " +
                        std::to_string(config_.max_model_len) +
                        " (prompt plus at least one generated token); shorten the prompt or "
                        "raise --max-model-len");
  }
  const int64_t pool_tokens = kv_.num_usable_blocks() * kv_.block_size();
  if (p + 1 > pool_tokens) {
    return resource_exhausted(
        "request '" + id + "': the prompt has " + std::to_string(p) +
        " tokens but the whole KV cache holds " + std::to_string(pool_tokens) + " tokens (" +
        std::to_string(kv_.num_usable_blocks()) + " blocks of " + std::to_string(kv_.block_size()) +
        "), so it could never run; shorten the prompt or give the KV cache more memory "
        "(--kv-cache-memory or --gpu-memory-utilization)");
  }
  const StopConfig& stop = spec.stop;
  if (stop.max_tokens < 0) {
    return invalid_argument("request '" + id +
                            "': max_tokens must be at least 1 (or 0 for no "
                            "limit), got " +
                            std::to_string(stop.max_tokens));
  }
  if (stop.min_tokens < 0 || (stop.max_tokens > 0 && stop.min_tokens > stop.max_tokens)) {
    return invalid_argument("request '" + id +
                            "': min_tokens must be between 0 and max_tokens, got " +
                            std::to_string(stop.min_tokens));
  }

  const Request* leader = nullptr;
  if (!spec.sibling_of.empty()) {
    leader = lookup(spec.sibling_of);
    if (leader) {
      if (!std::equal(spec.prompt_token_ids.begin(), spec.prompt_token_ids.end(),
                      leader->prompt_token_ids().begin(), leader->prompt_token_ids().end()) ||
          spec.cache_salt != leader->cache_salt_) {
        return invalid_argument("request '" + id + "' is a sibling of '" + spec.sibling_of +
                                "' but its prompt or cache salt differs");
      }
    }
  }

  uint32_t slot;
  if (!free_slots_.empty()) {
    slot = free_slots_.back();
    free_slots_.pop_back();
  } else {
    slot = static_cast<uint32_t>(slots_.size());
    slots_.push_back(nullptr);
  }
  const uint32_t generation = slots_[slot] ? slots_[slot]->handle_.generation + 1 : 1;
  auto r = std::make_unique<Request>();
  r->id_ = std::move(spec.request_id);
  r->handle_ = RequestHandle{slot, generation};
  r->user_data_ = spec.user_data;
  r->speculate_ = spec.speculate && config_.speculative.enabled();
  r->token_ids_ = std::move(spec.prompt_token_ids);
  r->num_prompt_tokens_ = p;
  r->stop_ = std::move(spec.stop);
  r->cache_salt_ = std::move(spec.cache_salt);
  r->seq_no_ = next_seq_no_++;
  if (config_.policy == SchedulingPolicy::kPriority) r->priority_ = spec.priority;
  r->times_.arrival = spec.arrival_time >= 0 ? spec.arrival_time : clock_->now();
  if (leader) {
    r->priority_ = leader->priority_;
    r->times_.arrival = leader->times_.arrival;
    r->share_tokens_ = (p - 1) / kv_.block_size() * kv_.block_size();
    if (r->share_tokens_ > 0) {
      r->has_leader_ = true;
      r->leader_ = leader->handle_;
    }
  }
  if (kv_.prefix_caching_enabled()) {
    kv::append_block_hashes(r->token_ids_, kv_.block_size(), r->cache_salt_, &r->block_hashes_);
  }
  by_id_.emplace(r->id_, slot);
  Request* raw = r.get();
  slots_[slot] = std::move(r);
  waiting_.insert(raw);
  return ok_status();
}

Status Scheduler::abort_request(std::string_view request_id) {
  return finish_request(request_id, FinishReason::kAbort);
}

Status Scheduler::finish_request(std::string_view request_id, FinishReason reason) {
  if (reason == FinishReason::kNone) {
    return invalid_argument("finish_request needs a finish reason (stop, length or abort)");
  }
  Request* r = lookup(request_id);
  if (r == nullptr) {
    return not_found("no unfinished request '" + std::string(request_id) + "'");
  }
  finish(r, reason, clock_->now());
  return ok_status();
}

Status Scheduler::pause_request(std::string_view request_id) {
  Request* r = lookup(request_id);
  if (r == nullptr) return not_found("no unfinished request '" + std::string(request_id) + "'");
  if (!r->paused_) {
    r->paused_ = true;
    ++num_paused_;
  }
  return ok_status();
}

Status Scheduler::resume_request(std::string_view request_id) {
  Request* r = lookup(request_id);
  if (r == nullptr) return not_found("no unfinished request '" + std::string(request_id) + "'");
  if (r->paused_) {
    r->paused_ = false;
    --num_paused_;
  }
  return ok_status();
}

void Scheduler::finish(Request* r, FinishReason reason, double now) {
  STRATA_CHECK(!is_finished(r->status_));
  if (r->paused_) {
    r->paused_ = false;
    --num_paused_;
  }
  if (r->status_ == RequestStatus::kRunning) {
    erase_running(r);
    drop_loads(r);
    release_state(r);
    kv_.free(seq(*r));
  } else {
    STRATA_CHECK(waiting_.erase(r) == 1) << "request " << r->id_ << " missing from the queue";
  }
  r->finish_reason_ = reason;
  r->status_ = reason == FinishReason::kStop     ? RequestStatus::kFinishedStopped
               : reason == FinishReason::kLength ? RequestStatus::kFinishedLength
                                                 : RequestStatus::kFinishedAborted;
  r->times_.finished = now;
  by_id_.erase(r->id_);
  finished_.push_back(r);
  ++num_finished_;
}

FinishReason Scheduler::check_stop(Request* r, int32_t token) const {
  const StopConfig& s = r->stop_;
  if (r->num_output_tokens() >= s.min_tokens) {
    if (!s.ignore_eos &&
        std::find(s.eos_token_ids.begin(), s.eos_token_ids.end(), token) != s.eos_token_ids.end()) {
      return FinishReason::kStop;
    }
    if (std::find(s.stop_token_ids.begin(), s.stop_token_ids.end(), token) !=
        s.stop_token_ids.end()) {
      r->stop_token_id_ = token;
      return FinishReason::kStop;
    }
  }
  if (s.max_tokens > 0 && r->num_output_tokens() >= s.max_tokens) return FinishReason::kLength;
  if (r->num_tokens() >= max_request_len_) return FinishReason::kLength;
  return FinishReason::kNone;
}

std::vector<RequestOutput> Scheduler::update(const StepPlan& plan,
                                             std::span<const int32_t> sampled_token_ids,
                                             std::span<const std::vector<int32_t>> accepted,
                                             std::span<const std::vector<int32_t>> proposals) {
  STRATA_CHECK_EQ(sampled_token_ids.size(), plan.scheduled.size())
      << "update() needs one sampled token (or kNoToken) per scheduled request";
  if (depth_ <= 1) {
    STRATA_CHECK_EQ(plan.step, step_) << "update() must get the latest plan, once";
  } else if (!plan.scheduled.empty()) {
    STRATA_CHECK(!outstanding_.empty() && outstanding_.front() == plan.step)
        << "update() must get the plans in flight in the order planned, once";
    outstanding_.pop_front();
  }
  // The step's state snapshots are taken: findable from now on.
  for (const StateSnapshot& sn : plan.state_snapshots) state_.commit(sn.dst_slot, plan.step);
  std::vector<RequestOutput> outputs;
  outputs.reserve(plan.scheduled.size());
  const double now = clock_->now();
  const bool caching = kv_.prefix_caching_enabled();
  for (size_t i = 0; i < plan.scheduled.size(); ++i) {
    const ScheduledRequest& s = plan.scheduled[i];
    Request* r = get_mutable(s.handle);
    if (r != nullptr) r->in_flight_ = false;
    if (r == nullptr || r->status_ != RequestStatus::kRunning) continue;  // aborted meanwhile
    STRATA_CHECK_EQ(r->num_computed_tokens_, s.num_computed_tokens)
        << "request " << r->id_ << ": plan applied twice or out of order";
    const int64_t drafts = s.spec_token_ids_count;
    r->num_computed_tokens_ += s.num_scheduled_tokens - drafts;
    r->num_scheduled_tokens_ = 0;
    r->num_draft_tokens_ = 0;
    if (r->num_computed_tokens_ < r->num_tokens()) {  // a prefill chunk: no token yet
      if (caching) publish_computed(r);
      continue;
    }
    // The step's token t_0 and, after an entry with drafts, the tokens verification accepted
    // t_1 .. t_m, where t_0 .. t_{m-1} equal the first m drafts: positions up to c + j hold the
    // KV plain decoding computes (rejected drafts' KV is overwritten later). They are appended
    // one by one with the stop rules, exactly as m + 1 decode steps would.
    step_tokens_.assign(1, sampled_token_ids[i]);
    if (i < accepted.size())
      step_tokens_.insert(step_tokens_.end(), accepted[i].begin(), accepted[i].end());
    const int64_t m = static_cast<int64_t>(step_tokens_.size()) - 1;
    STRATA_CHECK_LE(m, drafts) << "request " << r->id_ << ": " << m
                               << " accepted tokens for an entry with " << drafts << " drafts";
    if (drafts > 0) count_speculation(r, drafts, m);
    if (i < proposals.size())
      r->proposed_drafts_ = proposals[i];
    else
      r->proposed_drafts_.clear();
    const int64_t c = r->num_computed_tokens_;
    for (int64_t j = 0; j <= m; ++j) {
      const int32_t token = step_tokens_[static_cast<size_t>(j)];
      STRATA_CHECK_GE(token, 0) << "request " << r->id_ << " reached its last token but no token "
                                << "was sampled for it";
      r->num_computed_tokens_ = c + j;
      r->token_ids_.push_back(token);
      ++generation_tokens_;
      if (r->times_.first_token < 0) {
        r->times_.first_token = now;
        prompt_tokens_ += r->num_prompt_tokens_;
      }
      r->times_.last_token = now;
      if (caching)
        kv::append_block_hashes(r->token_ids_, kv_.block_size(), r->cache_salt_, &r->block_hashes_);
      const FinishReason reason = check_stop(r, token);
      if (caching && (reason != FinishReason::kNone || j == m)) publish_computed(r);
      if (reason != FinishReason::kNone) finish(r, reason, now);
      outputs.push_back(output_for(r, token, reason));
      if (reason != FinishReason::kNone) break;
    }
  }
  return outputs;
}

void Scheduler::abandon_plan(const StepPlan& plan) {
  auto it = std::find(outstanding_.begin(), outstanding_.end(), plan.step);
  if (it == outstanding_.end()) return;
  outstanding_.erase(it);
  for (const ScheduledRequest& s : plan.scheduled) {
    Request* r = get_mutable(s.handle);
    if (r == nullptr) continue;
    r->in_flight_ = false;
    r->num_scheduled_tokens_ = 0;
    r->num_draft_tokens_ = 0;
  }
}

// Publishes the request's newly computed full blocks; with KV tiers, those the tiers lack are
// copied down at the next step's start.
void Scheduler::publish_computed(Request* r) {
  newly_cached_.clear();
  kv_.cache_blocks(seq(*r), r->block_hashes_, r->num_computed_tokens_,
                   tiers_ != nullptr ? &newly_cached_ : nullptr);
  for (const auto& [block, hash] : newly_cached_) {
    if (tiers_->find(hash) != kv::Tier::kNone) continue;
    pending_stores_.push_back({block, 0, hash.lo, hash.hi});
    ++tier_stats_.stores;
  }
}

RequestOutput Scheduler::output_for(Request* r, int32_t token, FinishReason reason) const {
  RequestOutput out;
  out.request_id = r->id_;
  out.handle = r->handle_;
  out.user_data = r->user_data_;
  out.new_token_id = token;
  out.num_output_tokens = r->num_output_tokens();
  out.finish_reason = reason;
  out.stop_token_id = reason != FinishReason::kNone ? r->stop_token_id_ : kNoToken;
  out.times = r->times_;
  return out;
}

// Counters of an entry with d drafts of which m were accepted, and the request's back-off.
void Scheduler::count_speculation(Request* r, int64_t d, int64_t m) {
  ++spec_num_drafts_;
  spec_num_draft_tokens_ += d;
  spec_num_accepted_ += m;
  if (static_cast<int64_t>(spec_accepted_per_pos_.size()) < d) spec_accepted_per_pos_.resize(d);
  for (int64_t j = 0; j < m; ++j) ++spec_accepted_per_pos_[static_cast<size_t>(j)];
  if (m == 0) {
    // A draft model (it runs over every token it proposes after) that missed after the longest
    // pause too is given up on for the request.
    if (config_.speculative.uses_draft_model() && r->spec_backoff_ == 32)
      r->spec_skip_ = std::numeric_limits<int32_t>::max();
    else
      r->spec_skip_ = r->spec_backoff_ = std::min(32, std::max(1, 2 * r->spec_backoff_));
  } else {
    r->spec_backoff_ = 0;
  }
  if (config_.speculative.uses_draft_model()) {
    const int64_t len = m == 0 ? 1 : m == d ? 2 * d : m + 1;
    r->spec_len_ = static_cast<int32_t>(std::min(len, config_.speculative.num_speculative_tokens));
  }
}

SchedulerStats Scheduler::stats() const {
  SchedulerStats s;
  s.num_running = num_running();
  s.num_waiting = num_waiting();
  for (const Request* r : waiting_)
    s.num_preempted_waiting += r->status_ == RequestStatus::kPreempted;
  s.num_paused = num_paused_;
  s.kv = kv_.usage();
  s.state = state_.stats();
  s.prefix_cache = kv_.prefix_cache_stats();
  s.external_prefix_cache = tier_stats_;
  s.num_preemptions = num_preemptions_;
  s.prompt_tokens = prompt_tokens_;
  s.generation_tokens = generation_tokens_;
  s.num_steps = static_cast<int64_t>(step_);
  s.num_finished = num_finished_;
  s.spec_num_drafts = spec_num_drafts_;
  s.spec_num_draft_tokens = spec_num_draft_tokens_;
  s.spec_num_accepted_tokens = spec_num_accepted_;
  s.spec_accepted_per_pos = spec_accepted_per_pos_;
  return s;
}

void Scheduler::check_invariants() const {
  kv_.check_invariants();
  STRATA_CHECK_LE(num_running(), config_.max_num_seqs);
  int64_t partial = 0, long_partial = 0;
  for (size_t i = 0; i < running_.size(); ++i) {
    const Request* r = running_[i];
    STRATA_CHECK(r->status_ == RequestStatus::kRunning)
        << r->id_ << " in running is " << request_status_name(r->status_);
    if (i > 0) STRATA_CHECK(key_less(*running_[i - 1], *r)) << "running queue out of order";
    const int64_t remaining = r->num_tokens() - r->num_computed_tokens_;
    STRATA_CHECK_GE(remaining, 1) << r->id_ << " has nothing left to compute";
    STRATA_CHECK_LT(r->num_tokens(), max_request_len_) << r->id_ << " is past its length";
    const int64_t held = kv_.num_blocks_held(seq(*r));
    STRATA_CHECK_GE(held, kv_.blocks_for(r->num_computed_tokens_)) << r->id_ << " lost blocks";
    const int64_t max_drafts = r->speculate_ ? config_.speculative.num_speculative_tokens : 0;
    STRATA_CHECK_LE(held, kv_.blocks_for(r->num_tokens() + max_drafts))
        << r->id_ << " holds extra blocks";
    if (remaining > 1) {
      STRATA_CHECK_EQ(held, kv_.blocks_for(r->num_tokens())) << r->id_ << " prefill not reserved";
      // A partial prefill: more than one token left, and not all of it in the pending plan
      // (a request waiting for its tier loads holds a slot too).
      if (r->num_scheduled_tokens_ < remaining) {
        ++partial;
        if (is_long(remaining)) ++long_partial;
      }
    }
    STRATA_CHECK_LE(r->num_scheduled_tokens_ - r->num_draft_tokens_, remaining);
    STRATA_CHECK(r->num_draft_tokens_ == 0 || remaining == 1) << r->id_ << " drafts in prefill";
    STRATA_CHECK(by_id_.count(r->id_));
  }
  STRATA_CHECK_LE(partial, config_.max_num_partial_prefills) << "too many partial prefills";
  if (long_threshold_ > 0) {
    STRATA_CHECK_LE(long_partial, config_.max_long_partial_prefills) << "too many long prefills";
  }
  if (state_.enabled()) {
    state_.check_invariants();
    STRATA_CHECK_EQ(state_.num_running() - state_.num_free_running(), num_running())
        << "running state slots and running requests disagree";
    std::vector<bool> seen(static_cast<size_t>(state_.num_running()), false);
    for (const Request* r : running_) {
      STRATA_CHECK(r->state_slot_ >= 0 && r->state_slot_ < state_.num_running())
          << r->id_ << " runs without a state slot";
      STRATA_CHECK(!seen[static_cast<size_t>(r->state_slot_)]) << "two requests share a slot";
      seen[static_cast<size_t>(r->state_slot_)] = true;
      STRATA_CHECK(r->restore_from_ < 0 || !r->table_sent_ || r->num_scheduled_tokens_ > 0)
          << r->id_ << " holds a restore it was never sent";
    }
  }
  for (const Request* r : waiting_) {
    STRATA_CHECK_EQ(r->state_slot_, -1) << r->id_ << " waits holding a state slot";
    STRATA_CHECK(r->status_ == RequestStatus::kWaiting || r->status_ == RequestStatus::kPreempted)
        << r->id_ << " in waiting is " << request_status_name(r->status_);
    STRATA_CHECK_EQ(r->num_computed_tokens_, 0) << r->id_ << " waits with computed tokens";
    STRATA_CHECK_EQ(kv_.num_blocks_held(seq(*r)), 0) << r->id_ << " waits holding blocks";
    STRATA_CHECK_LT(r->num_tokens(), max_request_len_);
    STRATA_CHECK(by_id_.count(r->id_));
  }
  STRATA_CHECK_EQ(by_id_.size(), running_.size() + waiting_.size()) << "id map out of sync";
  int64_t loading_blocks = 0;
  for (const Request* r : running_) {
    if (r->num_loading_ == 0) continue;
    STRATA_CHECK(!r->table_sent_) << r->id_ << " has a block table at the workers while loading";
    STRATA_CHECK_EQ(r->num_scheduled_tokens_, 0) << r->id_ << " scheduled while loading";
    int64_t pending = 0;
    for (uint8_t st : r->load_state_) pending += st == 0;
    STRATA_CHECK_EQ(pending, r->num_loading_) << r->id_ << " load count out of sync";
    loading_blocks += pending;
  }
  STRATA_CHECK_LE(loading_blocks, static_cast<int64_t>(loads_in_flight_.size()));
  STRATA_CHECK_EQ(kv_.num_pinned(), static_cast<int64_t>(loads_in_flight_.size()))
      << "pinned blocks and loads in flight disagree";
  int64_t paused = 0;
  for (const Request* r : running_) paused += r->paused_;
  for (const Request* r : waiting_) paused += r->paused_;
  STRATA_CHECK_EQ(paused, num_paused_) << "paused count out of sync";
  for (const Request* r : finished_) {
    STRATA_CHECK(is_finished(r->status_));
    STRATA_CHECK(!r->paused_) << r->id_ << " finished paused";
    STRATA_CHECK_EQ(kv_.num_blocks_held(seq(*r)), 0) << r->id_ << " finished holding blocks";
  }
  if (kv_.prefix_caching_enabled()) {
    for (const Request* r : running_) {
      STRATA_CHECK_EQ(static_cast<int64_t>(r->block_hashes_.size()),
                      r->num_tokens() / kv_.block_size())
          << r->id_ << " block hashes out of date";
    }
  }
}

}  // namespace strata::sched
