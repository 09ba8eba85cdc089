// The scheduler with a model that keeps per-sequence state (Scheduler::enable_state_slots,
// kv/state_slots.h): slots given at admission and freed at the end or on preemption, snapshots at
// the block boundaries an entry crosses, prefix-cache hits cut back to a ready snapshot and
// resumed with a restore. The randomized version is in scheduler_property_test.cpp.
#include <gtest/gtest.h>

#include "sched/scheduler.h"
#include "sched_test_util.h"

namespace strata::sched {
namespace {

using testing::Driver;
using testing::prompt;

SchedulerConfig config(int64_t budget, int64_t max_num_seqs = 4) {
  SchedulerConfig c;
  c.max_model_len = 64;
  c.max_num_batched_tokens = budget;
  c.max_num_seqs = max_num_seqs;
  return c;
}

kv::CacheConfig cache(bool prefix_caching = true) {
  return {.block_size = 4, .enable_prefix_caching = prefix_caching};
}

const ScheduledRequest* entry(const StepPlan& p, const std::string& id) {
  for (const auto& s : p.scheduled)
    if (s.request_id == id) return &s;
  return nullptr;
}

TEST(SchedulerStateTest, EachRunningRequestHoldsItsOwnSlotUntilItEnds) {
  Driver d(config(64, 2), cache(false), 32);
  ASSERT_TRUE(d.sched->enable_state_slots(2, 0).ok());
  ASSERT_TRUE(d.add("a", prompt(5), 2).ok());
  ASSERT_TRUE(d.add("b", prompt(6, 50), 4).ok());
  ASSERT_TRUE(d.add("c", prompt(3, 90), 1).ok());
  auto s1 = d.step();  // a and b admitted (max_num_seqs 2)
  ASSERT_NE(entry(s1.plan, "a"), nullptr);
  ASSERT_NE(entry(s1.plan, "b"), nullptr);
  EXPECT_EQ(entry(s1.plan, "c"), nullptr);
  EXPECT_EQ(entry(s1.plan, "a")->state_slot, 0);
  EXPECT_EQ(entry(s1.plan, "b")->state_slot, 1);
  EXPECT_TRUE(s1.plan.state_restores.empty());
  EXPECT_TRUE(s1.plan.state_snapshots.empty()) << "no snapshot slots without prefix caching";
  auto s2 = d.step();  // a's second token finishes it
  EXPECT_EQ(entry(s2.plan, "a")->state_slot, 0);
  EXPECT_EQ(entry(s2.plan, "b")->state_slot, 1);
  EXPECT_EQ(d.sched->state_slots().num_free_running(), 1);
  auto s3 = d.step();  // c takes a's slot
  EXPECT_EQ(entry(s3.plan, "c")->state_slot, 0);
  EXPECT_EQ(entry(s3.plan, "b")->state_slot, 1);
  d.run();
  EXPECT_EQ(d.sched->state_slots().num_free_running(), 2);
}

TEST(SchedulerStateTest, EntriesAskForSnapshotsAtTheBoundariesTheyCross) {
  Driver d(config(6), cache(), 32);
  ASSERT_TRUE(d.sched->enable_state_slots(4, 8).ok());
  ASSERT_TRUE(d.add("a", prompt(13), 1).ok());
  auto s1 = d.step();  // tokens 0..5: boundary 4
  ASSERT_EQ(s1.plan.state_snapshots.size(), 1u);
  EXPECT_EQ(s1.plan.state_snapshots[0].entry, 0u);
  EXPECT_EQ(s1.plan.state_snapshots[0].boundary, 4);
  EXPECT_GE(s1.plan.state_snapshots[0].dst_slot, 4);
  auto s2 = d.step();  // tokens 6..11: boundaries 8 and 12 (token 11 ends block 2)
  ASSERT_EQ(s2.plan.state_snapshots.size(), 2u);
  EXPECT_EQ(s2.plan.state_snapshots[0].boundary, 8);
  EXPECT_EQ(s2.plan.state_snapshots[1].boundary, 12);
  EXPECT_NE(s2.plan.state_snapshots[0].dst_slot, s1.plan.state_snapshots[0].dst_slot);
  EXPECT_NE(s2.plan.state_snapshots[0].dst_slot, s2.plan.state_snapshots[1].dst_slot);
  auto s3 = d.step();  // token 12: no boundary
  EXPECT_TRUE(s3.plan.state_snapshots.empty());
  EXPECT_EQ(d.sched->state_slots().stats().snapshots_ready, 3);
}

TEST(SchedulerStateTest, HitResumesFromTheSnapshotAtItsEnd) {
  Driver d(config(64), cache(), 32);
  ASSERT_TRUE(d.sched->enable_state_slots(4, 8).ok());
  // a: 10 prompt tokens in one step: snapshots at 4 and 8.
  ASSERT_TRUE(d.add("a", prompt(10), 1).ok());
  auto s1 = d.step();
  ASSERT_EQ(s1.plan.state_snapshots.size(), 2u);
  const int32_t snap8 = s1.plan.state_snapshots[1].dst_slot;
  EXPECT_EQ(s1.plan.state_snapshots[1].boundary, 8);
  // b shares a's first 9 tokens: the hit is two blocks (8 tokens), resumed from the snapshot.
  auto p = prompt(9);
  p.push_back(7);
  p.push_back(8);
  ASSERT_TRUE(d.add("b", p, 1).ok());
  auto s2 = d.step();
  const ScheduledRequest* b = entry(s2.plan, "b");
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(b->num_computed_tokens, 8);
  ASSERT_EQ(s2.plan.state_restores.size(), 1u);
  EXPECT_EQ(s2.plan.state_restores[0].src_slot, snap8);
  EXPECT_EQ(s2.plan.state_restores[0].dst_slot, b->state_slot);
  EXPECT_EQ(d.sched->stats().state.restores, 1);
}

TEST(SchedulerStateTest, HitIsCutBackToTheLastSnapshotKept) {
  // One snapshot slot: a's chunks overwrite it, so only the latest boundary can be resumed.
  Driver d(config(4), cache(), 32);
  ASSERT_TRUE(d.sched->enable_state_slots(4, 1).ok());
  ASSERT_TRUE(d.add("a", prompt(13), 1).ok());
  for (int i = 0; i < 4; ++i) d.step();  // boundaries 4, 8, 12: 12 is kept
  EXPECT_EQ(d.sched->state_slots().stats().evictions, 2);
  // b shares the first 10 tokens: two cached blocks, but no snapshot at 8 (nor 4): from scratch.
  auto p = prompt(10);
  p.push_back(3);
  ASSERT_TRUE(d.add("b", p, 1).ok());
  auto s = d.step();
  const ScheduledRequest* b = entry(s.plan, "b");
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(b->num_computed_tokens, 0);
  EXPECT_TRUE(s.plan.state_restores.empty());
  EXPECT_EQ(d.sched->stats().state.hits_cut, 2);
  d.run();  // b's chunks take snapshots at 4 (evicting 12), then 8 (evicting 4)
  // c shares all 13: three cached blocks, but the one snapshot is at 8: c resumes there.
  auto q = prompt(13);
  q.push_back(1);
  ASSERT_TRUE(d.add("c", q, 1).ok());
  auto sc = d.step();
  const ScheduledRequest* c = entry(sc.plan, "c");
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->num_computed_tokens, 8);
  ASSERT_EQ(sc.plan.state_restores.size(), 1u);
  EXPECT_EQ(sc.plan.state_restores[0].dst_slot, c->state_slot);
  EXPECT_EQ(d.sched->stats().state.hits_cut, 3);
  EXPECT_EQ(d.sched->stats().state.restores, 1);
  d.run();
}

TEST(SchedulerStateTest, PreemptionFreesTheSlotAndTheRequestStartsOver) {
  // 6 usable blocks of 4: a and b (4 blocks each in the end) grow until the younger is
  // preempted.
  Driver d(config(64, 2), cache(false), 7);
  ASSERT_TRUE(d.sched->enable_state_slots(2, 0).ok());
  ASSERT_TRUE(d.add("a", prompt(6), 8).ok());
  ASSERT_TRUE(d.add("b", prompt(6, 40), 8).ok());
  bool preempted = false;
  for (int i = 0; i < 40 && d.sched->has_unfinished_requests(); ++i) {
    auto s = d.step();
    if (!s.plan.preempted_ids.empty()) {
      preempted = true;
      // The victim's slot is back: slots in use are the running requests'.
      EXPECT_EQ(d.sched->state_slots().num_running() - d.sched->state_slots().num_free_running(),
                d.sched->num_running());
      for (const Request* w : d.sched->waiting_requests())
        EXPECT_EQ(w->state_slot(), -1) << w->request_id() << " waits holding a slot";
    }
    if (const ScheduledRequest* b = entry(s.plan, "b"); b != nullptr && b->new_block_table)
      EXPECT_EQ(b->num_computed_tokens, 0) << "resumed without a snapshot";
  }
  EXPECT_TRUE(preempted);
  EXPECT_FALSE(d.sched->has_unfinished_requests());
  EXPECT_EQ(d.sched->state_slots().num_free_running(), 2);
}

TEST(SchedulerStateTest, RefusesSpeculationAndLateOrTooFewSlots) {
  SchedulerConfig c = config(64);
  c.speculative = {.method = "ngram",
                   .num_speculative_tokens = 2,
                   .prompt_lookup_min = 1,
                   .prompt_lookup_max = 2};
  Driver spec(c, cache(), 32);
  EXPECT_EQ(spec.sched->enable_state_slots(4, 4).code(), StatusCode::kUnimplemented);
  Driver d(config(64), cache(), 32);
  EXPECT_FALSE(d.sched->enable_state_slots(3, 4).ok()) << "fewer slots than max_num_seqs";
  ASSERT_TRUE(d.add("a", prompt(3), 1).ok());
  EXPECT_FALSE(d.sched->enable_state_slots(4, 4).ok()) << "after a request";
}

}  // namespace
}  // namespace strata::sched
