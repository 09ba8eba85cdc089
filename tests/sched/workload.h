// Runs a scripted workload through the real scheduler with a stub model, checking after every
// step what the forward-progress design promises (docs/scheduler.md):
//  - pool, queue and request invariants (Scheduler::check_invariants),
//  - no empty step while a request is unfinished,
//  - the oldest running request is scheduled first (it always progresses),
//  - the oldest unfinished request is never preempted,
//  - every admitted request finishes, by its own stop rules unless the script aborts it.
// With a TierSim, a simulated set of KV tiers stands under the pool, and the worker's side is
// modelled block by block: the content of every pool block (the prefix hash of what was computed
// or loaded into it) is tracked, so that a request's computed prefix must always be the right
// content, stores must copy blocks holding what their key says, and no step computes into a
// block a load is still writing. Loads finish after a random delay (at once in a step with
// nothing to compute, as the Worker waits then), fail at random, or fail because the tier
// evicted the block meanwhile.
// With state_snapshots >= 0, the model keeps per-sequence state (kv/state_slots.h) and the
// worker's state slots are simulated: each slot holds (tokens seen, hash of those tokens), an
// entry must find its slot holding exactly its computed prefix (or start at position 0), restores
// copy before the step, snapshots save the state at their boundary; so a hit that resumes without
// the right snapshot, a slot shared by two requests or a snapshot of the wrong prefix fails.
// Paused requests (P1-P2) are left out of the checks while paused: no empty step while an
// unpaused request is unfinished; the oldest unpaused requests run first and are never preempted.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/rng.h"
#include "sched/scheduler.h"

namespace strata::sched::testing {

struct ScriptedRequest {
  int64_t arrival_step = 0;
  RequestSpec spec;
  int64_t abort_at_step = -1;  // abort (or finish with stop, when finish_instead) at this step
  bool finish_instead = false;
  int64_t pause_at_step = -1;  // paused from this step until resume_at_step (when >= 0)
  int64_t resume_at_step = -1;
  bool expect_rejected = false;
  StatusCode expected_code = StatusCode::kOk;
};

struct TierSim {
  int64_t capacity_blocks = 0;  // LRU over stored blocks; 0: no tiers
  double fail_rate = 0;         // loads failing as a corrupt or missing block would
  int max_delay_steps = 3;      // a load finishes 0..max_delay_steps steps after its plan
};

class FakeTiers final : public kv::KvTierDirectory {
 public:
  explicit FakeTiers(int64_t capacity) : capacity_(capacity) {}
  kv::Tier find(const kv::BlockHash& key) const override {
    return std::find(lru_.begin(), lru_.end(), key) != lru_.end() ? kv::Tier::kRam
                                                                  : kv::Tier::kNone;
  }
  void insert(const kv::BlockHash& key) {
    lru_.erase(std::remove(lru_.begin(), lru_.end(), key), lru_.end());
    lru_.push_back(key);
    if (static_cast<int64_t>(lru_.size()) > capacity_) lru_.erase(lru_.begin());
  }

 private:
  int64_t capacity_;
  std::vector<kv::BlockHash> lru_;  // least recently stored first
};

struct RequestResult {
  bool accepted = false;
  FinishReason reason = FinishReason::kNone;
  int64_t num_output_tokens = 0;
  int64_t num_preemptions = 0;
  int64_t finish_step = -1;
  int32_t last_token = kNoToken;
  std::vector<int32_t> tokens;  // every output token, in order
};

struct WorkloadResult {
  int64_t steps = 0;
  int64_t steps_with_paused = 0;        // steps planned while some request was paused
  int64_t paused_preemptions = 0;       // preemptions of paused requests (P1, P2)
  int64_t steps_waiting_for_loads = 0;  // steps that only waited for KV tier loads
  int64_t state_restores = 0;           // state restores planned (state_snapshots >= 0)
  int64_t resumed_tokens = 0;           // tokens the restored entries did not compute
  int64_t drafted_entries = 0;
  std::map<std::string, RequestResult> requests;
  SchedulerStats stats;
};

inline int32_t stub_token(uint64_t seed, std::string_view id, int64_t position, int32_t vocab) {
  uint64_t h =
      seed * 0x9e3779b97f4a7c15ull + static_cast<uint64_t>(position) * 0xbf58476d1ce4e5b9ull;
  for (char c : id) h = (h ^ static_cast<unsigned char>(c)) * 0x100000001b3ull;
  uint64_t s = h;
  return static_cast<int32_t>(splitmix64(s) % static_cast<uint64_t>(vocab));
}

// Returns false (with gtest failures recorded) when a promise is broken.
inline WorkloadResult run_workload(const SchedulerConfig& config, const kv::CacheConfig& cache,
                                   int64_t num_blocks, std::vector<ScriptedRequest> script,
                                   uint64_t seed, int64_t max_steps, int32_t vocab = 31,
                                   TierSim tier_sim = {}, int64_t stub_period = 0,
                                   int64_t state_snapshots = -1) {
  WorkloadResult result;
  ManualClock clock(0.0);
  auto created = Scheduler::create(config, cache, num_blocks, &clock);
  EXPECT_TRUE(created.ok()) << created.status().to_string();
  if (!created.ok()) return result;
  Scheduler& s = **created;
  // The simulated state slots: (tokens seen, their hash); len -1: never written.
  struct SlotState {
    int64_t len = -1;
    uint64_t hash = 0;
  };
  std::vector<SlotState> slots;
  auto prefix_hash = [](std::span<const int32_t> t, int64_t n) {
    uint64_t h = 0x6a09e667f3bcc909ull;
    for (int64_t i = 0; i < n; ++i)
      h = (h ^ static_cast<uint64_t>(static_cast<uint32_t>(t[static_cast<size_t>(i)]))) *
          0x100000001b3ull;
    return h;
  };
  if (state_snapshots >= 0) {
    const Status st = s.enable_state_slots(config.max_num_seqs, state_snapshots);
    EXPECT_TRUE(st.ok()) << st.to_string();
    slots.resize(static_cast<size_t>(config.max_num_seqs + state_snapshots));
  }
  // The simulated worker side of the KV tiers.
  const bool tiers = tier_sim.capacity_blocks > 0;
  FakeTiers fake(tier_sim.capacity_blocks);
  if (tiers) s.set_kv_tiers(&fake);
  const bool track = tiers && cache.enable_prefix_caching;
  const int64_t bs = cache.block_size;
  std::vector<std::optional<kv::BlockHash>> content(static_cast<size_t>(num_blocks));
  struct Load {
    kv::BlockId block;
    kv::BlockHash key;
    int64_t due;
  };
  std::vector<Load> loads;
  Rng tier_rng(seed ^ 0x7469657273ull);
  std::map<std::string, std::vector<kv::BlockId>> worker_tables;
  auto finish_loads = [&](int64_t step, bool all) {
    std::vector<kv::KvLoadResult> done;
    for (auto it = loads.begin(); it != loads.end();) {
      if (!all && it->due > step) {
        ++it;
        continue;
      }
      const bool failed = tier_rng.uniform() < tier_sim.fail_rate;
      const bool ok = !failed && fake.find(it->key) != kv::Tier::kNone;
      if (ok) content[static_cast<size_t>(it->block)] = it->key;
      done.push_back({it->block, ok, ok ? kv::Tier::kRam : kv::Tier::kNone});
      it = loads.erase(it);
    }
    s.finish_kv_loads(done);
    s.check_invariants();
  };
  std::sort(script.begin(), script.end(),
            [](const auto& a, const auto& b) { return a.arrival_step < b.arrival_step; });
  std::map<std::string, const ScriptedRequest*> by_id;
  for (const auto& r : script) by_id[r.spec.request_id] = &r;
  size_t next = 0;
  for (int64_t step = 0; step < max_steps; ++step) {
    while (next < script.size() && script[next].arrival_step <= step) {
      const ScriptedRequest& r = script[next++];
      Status st = s.add_request(r.spec);
      RequestResult& res = result.requests[r.spec.request_id];
      res.accepted = st.ok();
      if (r.expect_rejected) {
        EXPECT_FALSE(st.ok()) << r.spec.request_id << " should be rejected at submit";
        EXPECT_EQ(st.code(), r.expected_code) << st.to_string();
      } else {
        EXPECT_TRUE(st.ok()) << r.spec.request_id << ": " << st.to_string();
      }
    }
    for (const auto& r : script) {
      if (r.abort_at_step != step) continue;
      if (const Request* q = s.find_request(r.spec.request_id)) {
        int64_t outputs = q->num_output_tokens();
        int64_t preemptions = q->num_preemptions();
        Status st = r.finish_instead ? s.finish_request(r.spec.request_id, FinishReason::kStop)
                                     : s.abort_request(r.spec.request_id);
        EXPECT_TRUE(st.ok()) << st.to_string();
        RequestResult& res = result.requests[r.spec.request_id];
        res.reason = r.finish_instead ? FinishReason::kStop : FinishReason::kAbort;
        res.num_output_tokens = outputs;
        res.num_preemptions = preemptions;
        res.finish_step = step;
        EXPECT_EQ(s.kv().num_blocks_held(q->handle().slot), 0) << "abort must free blocks at once";
      }
    }
    for (const auto& r : script) {
      if (r.pause_at_step == step) (void)s.pause_request(r.spec.request_id);
      if (r.resume_at_step == step) (void)s.resume_request(r.spec.request_id);
    }
    s.check_invariants();
    if (!s.has_unfinished_requests()) {
      if (next == script.size()) break;
      continue;
    }
    if (!s.has_runnable_requests()) {  // everything paused: the step must plan nothing
      StepPlan idle = s.schedule();
      EXPECT_TRUE(idle.empty()) << "a paused request was scheduled at step " << step;
      s.check_invariants();
      continue;
    }
    // The oldest unfinished unpaused request, and the oldest unpaused running one.
    const Request* oldest = nullptr;
    for (const auto* q : s.running_requests())
      if (!q->paused() && (!oldest || Scheduler::runs_before(*q, *oldest))) oldest = q;
    for (const auto* q : s.waiting_requests())
      if (!q->paused() && (!oldest || Scheduler::runs_before(*q, *oldest))) oldest = q;
    std::string head_id;
    for (const auto* q : s.running_requests()) {
      if (!q->paused() && !q->loading()) {
        head_id = q->request_id();
        break;
      }
    }
    const std::string oldest_id = oldest->request_id();
    std::vector<std::string> paused_ids;
    for (const auto* q : s.running_requests())
      if (q->paused()) paused_ids.push_back(q->request_id());
    for (const auto* q : s.waiting_requests())
      if (q->paused()) paused_ids.push_back(q->request_id());

    StepPlan plan;
    {
      // The rest of the step runs from a deserialized copy of the plan, as a worker in another
      // process would: the plan must be plain data the scheduler accepts back.
      StepPlan scheduled = s.schedule();
      auto copy = decode_step_plan(encode_step_plan(scheduled));
      EXPECT_TRUE(copy.ok()) << copy.status().to_string();
      if (!copy.ok()) break;
      EXPECT_TRUE(*copy == scheduled) << "the plan of step " << step << " changed in a round trip";
      plan = std::move(copy).value();
    }
    s.check_invariants();
    ++result.steps;
    // The workers' block tables, built from the plans alone, must be the scheduler's.
    for (const auto& id : plan.finished_ids) worker_tables.erase(id);
    for (const auto& id : plan.preempted_ids) worker_tables.erase(id);
    for (const auto& e : plan.scheduled) {
      auto& t = worker_tables[e.request_id];
      const auto ids = plan.block_ids_of(e);
      if (e.new_block_table) t.clear();
      t.insert(t.end(), ids.begin(), ids.end());
      const auto sched_table = s.block_table(e);
      EXPECT_TRUE(std::equal(t.begin(), t.end(), sched_table.begin(), sched_table.end()))
          << e.request_id << ": the worker's block table differs at step " << step;
    }
    if (tiers) {
      // The worker's start of step: stores copy blocks out, then the loads begin.
      for (const KvTransfer& t : plan.kv_stores) {
        const kv::BlockHash key{t.key_lo, t.key_hi};
        EXPECT_TRUE(content[static_cast<size_t>(t.block)] == key)
            << "step " << step << " stores block " << t.block << " whose content is not its key";
        fake.insert(key);
      }
      for (const KvTransfer& t : plan.kv_loads) {
        const auto delay = tier_rng.below(static_cast<uint64_t>(tier_sim.max_delay_steps) + 1);
        loads.push_back({t.block, {t.key_lo, t.key_hi}, step + static_cast<int64_t>(delay)});
        content[static_cast<size_t>(t.block)].reset();  // being written
      }
      if (plan.empty()) {
        EXPECT_TRUE(s.has_kv_loads_in_flight()) << "empty step " << step << " with no loads";
        result.steps_waiting_for_loads += 1;
        finish_loads(step, /*all=*/true);  // the worker waits: nothing else to do
        continue;
      }
      for (const auto& e : plan.scheduled) {
        const Request* q = s.get(e.handle);
        const auto table = s.block_table(e);
        if (track && q != nullptr) {
          const auto hashes = q->block_hashes();
          for (int64_t i = 0; i < e.num_computed_tokens / bs; ++i)
            EXPECT_TRUE(content[static_cast<size_t>(table[i])] == hashes[i])
                << e.request_id << " at step " << step << " has the wrong KV in block " << i;
        }
        const int64_t end = e.num_computed_tokens + e.num_scheduled_tokens;
        for (int64_t i = e.num_computed_tokens / bs; i < (end + bs - 1) / bs; ++i) {
          const kv::BlockId b = table[static_cast<size_t>(i)];
          for (const Load& l : loads)
            EXPECT_NE(l.block, b) << e.request_id << " computes into block " << b
                                  << " while a load writes it (step " << step << ")";
          if (track && q != nullptr && (i + 1) * bs <= end)
            content[static_cast<size_t>(b)] = q->block_hashes()[static_cast<size_t>(i)];
          else
            content[static_cast<size_t>(b)].reset();  // partly written
        }
      }
    }
    EXPECT_FALSE(plan.empty()) << "empty step " << step << " with unfinished requests";
    if (plan.empty()) break;
    if (state_snapshots >= 0) {  // the worker's state slots
      for (const StateRestore& c : plan.state_restores) {
        EXPECT_GE(c.src_slot, config.max_num_seqs) << "a restore from a running slot";
        EXPECT_LT(c.dst_slot, config.max_num_seqs) << "a restore into a snapshot slot";
        slots.at(static_cast<size_t>(c.dst_slot)) = slots.at(static_cast<size_t>(c.src_slot));
        ++result.state_restores;
      }
      for (size_t i = 0; i < plan.scheduled.size(); ++i) {
        const auto& e = plan.scheduled[i];
        const Request* q = s.get(e.handle);
        EXPECT_TRUE(q != nullptr && e.state_slot >= 0 && e.state_slot < config.max_num_seqs)
            << e.request_id << " has no running state slot at step " << step;
        if (q == nullptr || e.state_slot < 0) continue;
        const auto tokens = q->token_ids();
        SlotState& st = slots.at(static_cast<size_t>(e.state_slot));
        if (e.num_computed_tokens == 0) {
          st = {0, prefix_hash(tokens, 0)};  // the model clears the slot
        } else {
          EXPECT_EQ(st.len, e.num_computed_tokens)
              << e.request_id << " resumes from a state of the wrong length at step " << step;
          EXPECT_EQ(st.hash, prefix_hash(tokens, e.num_computed_tokens))
              << e.request_id << " resumes from the state of another prefix at step " << step;
        }
        for (const StateSnapshot& sn : plan.state_snapshots) {
          if (sn.entry != i) continue;
          EXPECT_GE(sn.dst_slot, config.max_num_seqs) << "a snapshot into a running slot";
          EXPECT_EQ(sn.boundary % bs, 0) << "a snapshot off a block boundary";
          slots.at(static_cast<size_t>(sn.dst_slot)) = {sn.boundary,
                                                        prefix_hash(tokens, sn.boundary)};
        }
        const int64_t end = e.num_computed_tokens + e.num_scheduled_tokens;
        st = {end, prefix_hash(tokens, end)};
      }
      for (const StateRestore& c : plan.state_restores)
        for (const auto& e : plan.scheduled)
          if (e.state_slot == c.dst_slot) result.resumed_tokens += e.num_computed_tokens;
    }
    EXPECT_LE(plan.total_num_scheduled_tokens, config.max_num_batched_tokens);
    for (const auto& id : plan.preempted_ids) {
      EXPECT_NE(id, oldest_id) << "the oldest request was preempted at step " << step;
    }
    if (!head_id.empty()) {
      EXPECT_EQ(plan.scheduled.front().request_id, head_id)
          << "the oldest running request did not run first at step " << step;
    }
    result.steps_with_paused += !paused_ids.empty();
    for (const auto& id : plan.preempted_ids)
      result.paused_preemptions += std::count(paused_ids.begin(), paused_ids.end(), id);
    for (const auto& e : plan.scheduled) {
      EXPECT_EQ(std::count(paused_ids.begin(), paused_ids.end(), e.request_id), 0)
          << "paused request " << e.request_id << " was scheduled at step " << step;
    }
    // The stub model's token at a position (periodic, so n-gram drafts can be right); an entry
    // with drafts is verified as the worker does: draft j stands while it equals the model's
    // token at its position, and each standing draft adds the model's next token.
    auto model_token = [&](const std::string& id, int64_t position) {
      return stub_token(seed, id, stub_period > 0 ? position % stub_period : position, vocab);
    };
    std::vector<int32_t> sampled;
    std::vector<std::vector<int32_t>> accepted(plan.scheduled.size());
    for (size_t i = 0; i < plan.scheduled.size(); ++i) {
      const auto& e = plan.scheduled[i];
      const auto drafts = plan.spec_token_ids_of(e);
      const int64_t next = e.num_computed_tokens + e.num_scheduled_tokens -
                           static_cast<int64_t>(drafts.size());  // position of the new token
      sampled.push_back(e.will_sample ? model_token(e.request_id, next) : kNoToken);
      for (size_t j = 0; j < drafts.size(); ++j) {
        const int32_t want = model_token(e.request_id, next + static_cast<int64_t>(j));
        // A draft-model place (kNoToken): the stub draft model proposes the right token, except
        // at one position in four (of a hash of the request and the position).
        int32_t draft = drafts[j];
        EXPECT_EQ(draft == kNoToken, config.speculative.uses_draft_model())
            << "draft places are kNoToken exactly with a draft model";
        if (draft == kNoToken)
          draft = stub_token(seed + 7, e.request_id, next + static_cast<int64_t>(j), 4) == 0
                      ? (want + 1) % static_cast<int32_t>(vocab)
                      : want;
        if (draft != want) break;
        accepted[i].push_back(model_token(e.request_id, next + static_cast<int64_t>(j) + 1));
      }
      result.drafted_entries += drafts.empty() ? 0 : 1;
    }
    if (tiers) finish_loads(step, /*all=*/false);
    auto outputs = s.update(plan, sampled, accepted);
    s.check_invariants();
    for (const auto& o : outputs) {
      RequestResult& res = result.requests[std::string(o.request_id)];
      res.num_output_tokens = o.num_output_tokens;
      res.last_token = o.new_token_id;
      res.tokens.push_back(o.new_token_id);
      if (o.finished()) {
        res.reason = o.finish_reason;
        res.finish_step = step;
        if (const Request* q = s.get(o.handle)) res.num_preemptions = q->num_preemptions();
      }
    }
  }
  if (tiers) finish_loads(max_steps, /*all=*/true);  // pins of dropped loads go
  result.stats = s.stats();
  EXPECT_FALSE(s.has_unfinished_requests())
      << "requests still unfinished after " << max_steps << " steps (seed " << seed << ")";
  // Every accepted request ended, and by a rule that holds.
  for (const auto& [id, res] : result.requests) {
    if (!res.accepted) continue;
    const ScriptedRequest& r = *by_id.at(id);
    EXPECT_NE(res.reason, FinishReason::kNone) << id << " never finished (seed " << seed << ")";
    if (res.reason == FinishReason::kLength) {
      const int64_t total =
          static_cast<int64_t>(r.spec.prompt_token_ids.size()) + res.num_output_tokens;
      EXPECT_TRUE(res.num_output_tokens == r.spec.stop.max_tokens || total == s.max_request_len())
          << id << " stopped for length at " << res.num_output_tokens << " outputs";
    } else if (res.reason == FinishReason::kStop && r.abort_at_step < 0) {
      const auto& st = r.spec.stop;
      bool eos = !st.ignore_eos &&
                 std::count(st.eos_token_ids.begin(), st.eos_token_ids.end(), res.last_token);
      bool stop = std::count(st.stop_token_ids.begin(), st.stop_token_ids.end(), res.last_token);
      EXPECT_TRUE(eos || stop) << id << " stopped on token " << res.last_token;
      EXPECT_GE(res.num_output_tokens, st.min_tokens) << id;
    } else if (res.reason == FinishReason::kAbort) {
      EXPECT_EQ(r.abort_at_step, res.finish_step) << id << " aborted by nobody";
    }
  }
  EXPECT_EQ(s.kv().usage().referenced, 0) << "blocks leaked";
  return result;
}

}  // namespace strata::sched::testing
