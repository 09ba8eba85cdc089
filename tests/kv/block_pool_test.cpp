#include "kv/block_pool.h"

#include <gtest/gtest.h>

#include <vector>

namespace strata::kv {
namespace {

using Ids = std::vector<BlockId>;

BlockHash h(uint64_t v) {
  return BlockHash{v, ~v};
}

TEST(BlockPoolTest, NullBlockIsReservedAndFreeListStartsInOrder) {
  BlockPool pool(6, true);
  EXPECT_EQ(pool.num_usable_blocks(), 5);
  EXPECT_EQ(pool.num_free_blocks(), 5);
  EXPECT_EQ(pool.free_list(), (Ids{1, 2, 3, 4, 5}));
  EXPECT_FALSE(pool.is_free(kNullBlockId));
  Ids got;
  ASSERT_TRUE(pool.allocate(5, &got));
  EXPECT_EQ(got, (Ids{1, 2, 3, 4, 5}));  // block 0 is never handed out
  EXPECT_EQ(pool.num_free_blocks(), 0);
  EXPECT_FALSE(pool.allocate(1, &got));
  pool.check_invariants();
}

TEST(BlockPoolTest, AllocateFailsWithoutSideEffects) {
  BlockPool pool(4, true);
  Ids got;
  ASSERT_TRUE(pool.allocate(2, &got));
  EXPECT_FALSE(pool.allocate(2, &got));
  EXPECT_EQ(got, (Ids{1, 2}));
  EXPECT_EQ(pool.free_list(), (Ids{3}));
  pool.check_invariants();
}

TEST(BlockPoolTest, RefCountsAndLruOrder) {
  BlockPool pool(6, true);
  Ids a, b;
  ASSERT_TRUE(pool.allocate(2, &a));  // 1 2
  ASSERT_TRUE(pool.allocate(2, &b));  // 3 4
  pool.touch(Ids{1});                 // shared
  EXPECT_EQ(pool.ref_cnt(1), 2);
  pool.free(Ids{2, 1});  // 2 -> free list; 1 still referenced once
  EXPECT_EQ(pool.ref_cnt(1), 1);
  EXPECT_EQ(pool.free_list(), (Ids{5, 2}));
  pool.free(Ids{4, 3});
  EXPECT_EQ(pool.free_list(), (Ids{5, 2, 4, 3}));
  pool.free(Ids{1});
  EXPECT_EQ(pool.free_list(), (Ids{5, 2, 4, 3, 1}));
  Ids c;
  ASSERT_TRUE(pool.allocate(3, &c));
  EXPECT_EQ(c, (Ids{5, 2, 4}));  // least recently freed first
  pool.check_invariants();
}

TEST(BlockPoolTest, CachedBlocksStayFindableUntilReusedAndTouchRevivesThem) {
  BlockPool pool(5, true);
  Ids a;
  ASSERT_TRUE(pool.allocate(3, &a));  // 1 2 3
  EXPECT_TRUE(pool.cache_block(1, h(10)));
  EXPECT_TRUE(pool.cache_block(2, h(20)));
  EXPECT_FALSE(pool.cache_block(2, h(21)));  // already has a hash
  EXPECT_FALSE(pool.cache_block(3, h(10)));  // hash held by block 1
  pool.free(Ids{3, 2, 1});
  EXPECT_EQ(pool.free_list(), (Ids{4, 3, 2, 1}));
  EXPECT_EQ(pool.num_cached_free_blocks(), 2);
  EXPECT_EQ(pool.lookup(h(20)), std::optional<BlockId>(2));

  // A hit takes block 2 out of the middle of the free list.
  pool.touch(Ids{2});
  EXPECT_EQ(pool.ref_cnt(2), 1);
  EXPECT_EQ(pool.free_list(), (Ids{4, 3, 1}));
  EXPECT_EQ(pool.num_cached_free_blocks(), 1);
  pool.check_invariants();

  // Reuse evicts: 4 and 3 carry no hash, block 1 does.
  Ids b;
  ASSERT_TRUE(pool.allocate(3, &b));
  EXPECT_EQ(b, (Ids{4, 3, 1}));
  EXPECT_FALSE(pool.lookup(h(10)).has_value());
  EXPECT_FALSE(pool.block_hash(1).has_value());
  EXPECT_EQ(pool.num_evictions(), 1);
  EXPECT_EQ(pool.lookup(h(20)), std::optional<BlockId>(2));  // still referenced and cached
  pool.check_invariants();
}

TEST(BlockPoolTest, CachingOffNeverHits) {
  BlockPool pool(3, false);
  Ids a;
  ASSERT_TRUE(pool.allocate(1, &a));
  EXPECT_FALSE(pool.cache_block(1, h(1)));
  EXPECT_FALSE(pool.lookup(h(1)).has_value());
  pool.free(a);
  EXPECT_EQ(pool.num_cached_free_blocks(), 0);
  pool.check_invariants();
}

TEST(BlockPoolDeathTest, DoubleFreeAborts) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  BlockPool pool(3, true);
  Ids a;
  ASSERT_TRUE(pool.allocate(1, &a));
  pool.free(a);
  EXPECT_DEATH(pool.free(a), "double free of block 1");
  EXPECT_DEATH(pool.touch(Ids{0}), "invalid block 0");
}

}  // namespace
}  // namespace strata::kv
