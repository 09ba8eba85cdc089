// kv::StateSlots: running slots handed out and back, snapshots keyed by block hash that are
// found only once committed, least-recently-used eviction that spares pinned snapshots and those
// pending in the same step.
#include "kv/state_slots.h"

#include <gtest/gtest.h>

namespace strata::kv {
namespace {

BlockHash h(int i) {
  const int32_t t[1] = {i};
  return hash_block(root_block_hash(), t, "");
}

TEST(StateSlotsTest, RunningSlotsAreHandedOutOnceAndReused) {
  StateSlots s(3, 2);
  EXPECT_TRUE(s.enabled());
  const int32_t a = s.acquire(), b = s.acquire(), c = s.acquire();
  EXPECT_EQ(a, 0);
  EXPECT_EQ(b, 1);
  EXPECT_EQ(c, 2);
  EXPECT_EQ(s.num_free_running(), 0);
  s.release(b);
  EXPECT_EQ(s.acquire(), 1);
  s.check_invariants();
  EXPECT_DEATH(s.acquire(), "no free state slot");
  EXPECT_DEATH(StateSlots(2, 0).release(1), "not in use");
  EXPECT_FALSE(StateSlots().enabled());
}

TEST(StateSlotsTest, SnapshotsAreFoundOnlyOnceTheirStepIsCommitted) {
  StateSlots s(2, 2);
  auto slot = s.reserve(h(1), /*step=*/5);
  ASSERT_TRUE(slot.has_value());
  EXPECT_GE(*slot, 2);  // after the running slots
  EXPECT_TRUE(s.has(h(1)));
  EXPECT_FALSE(s.is_ready(h(1)));
  EXPECT_FALSE(s.find_ready(h(1)).has_value());
  EXPECT_FALSE(s.reserve(h(1), 5).has_value()) << "one snapshot per hash";
  s.commit(*slot, 4);  // another step's: nothing
  EXPECT_FALSE(s.is_ready(h(1)));
  s.commit(*slot, 5);
  EXPECT_EQ(s.find_ready(h(1)), slot);
  EXPECT_EQ(s.stats().snapshots_ready, 1);
  s.check_invariants();
}

TEST(StateSlotsTest, EvictionIsLeastRecentlyUsedAndSparesPinsAndTheStepsOwn) {
  StateSlots s(1, 2);
  const int32_t a = *s.reserve(h(1), 1);
  s.commit(a, 1);
  const int32_t b = *s.reserve(h(2), 2);
  s.commit(b, 2);
  // h(1) used last: h(2) goes.
  EXPECT_TRUE(s.find_ready(h(1)).has_value());
  const int32_t c = *s.reserve(h(3), 3);
  EXPECT_EQ(c, b);
  EXPECT_FALSE(s.has(h(2)));
  EXPECT_EQ(s.stats().evictions, 1);
  // h(3) is pending in step 3: a second snapshot of step 3 must not take its slot; h(1) goes.
  const int32_t d = *s.reserve(h(4), 3);
  EXPECT_EQ(d, a);
  EXPECT_FALSE(s.reserve(h(5), 3).has_value()) << "both pending in this step";
  s.commit(c, 3);
  s.commit(d, 3);
  // Pinned snapshots stay.
  s.pin(c);
  s.pin(d);
  EXPECT_FALSE(s.reserve(h(6), 4).has_value());
  s.unpin(d);
  EXPECT_EQ(s.reserve(h(6), 4), d);
  EXPECT_TRUE(s.is_ready(h(3)));
  s.unpin(c);
  s.check_invariants();
  EXPECT_DEATH(s.unpin(c), "not pinned");
}

}  // namespace
}  // namespace strata::kv
