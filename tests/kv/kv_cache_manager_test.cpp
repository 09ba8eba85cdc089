#include "kv/kv_cache_manager.h"

#include <gtest/gtest.h>

#include <vector>

namespace strata::kv {
namespace {

using Ids = std::vector<BlockId>;

Ids ids(std::span<const BlockId> s) {
  return Ids(s.begin(), s.end());
}

std::vector<int32_t> tokens(int n, int32_t start = 100) {
  std::vector<int32_t> t(n);
  for (int i = 0; i < n; ++i) t[i] = start + i;
  return t;
}

std::vector<BlockHash> hashes(const std::vector<int32_t>& t, int64_t bs) {
  std::vector<BlockHash> h;
  append_block_hashes(t, bs, "", &h);
  return h;
}

TEST(KvCacheManagerTest, AllocatesWholeBlocksAndRefusesWhatDoesNotFit) {
  KvCacheManager kv(/*num_blocks=*/6, /*block_size=*/4, true);
  auto a = kv.allocate_slots(/*seq=*/0, 0, /*num_new_tokens=*/5);
  ASSERT_TRUE(a);
  EXPECT_EQ(ids(*a), (Ids{1, 2}));
  auto more = kv.allocate_slots(0, 5, 3);  // tokens 5..7 fit in block 2
  ASSERT_TRUE(more);
  EXPECT_TRUE(more->empty());
  more = kv.allocate_slots(0, 8, 1);
  ASSERT_TRUE(more);
  EXPECT_EQ(ids(*more), (Ids{3}));
  EXPECT_EQ(ids(kv.block_table(0)), (Ids{1, 2, 3}));
  // 9 computed + 3 new + 9 lookahead = 21 tokens = 6 blocks: 3 more, but only 2 are free.
  EXPECT_FALSE(kv.allocate_slots(0, 9, 3, nullptr, /*lookahead=*/9));
  EXPECT_EQ(ids(kv.block_table(0)), (Ids{1, 2, 3}));
  auto b = kv.allocate_slots(1, 0, 8);
  ASSERT_TRUE(b);
  EXPECT_EQ(ids(*b), (Ids{4, 5}));
  EXPECT_FALSE(kv.allocate_slots(2, 0, 1));
  KvUsage u = kv.usage();
  EXPECT_EQ(u.num_blocks, 5);
  EXPECT_EQ(u.referenced, 5);
  EXPECT_EQ(u.free, 0);
  EXPECT_DOUBLE_EQ(u.usage(), 1.0);
  kv.check_invariants();
}

TEST(KvCacheManagerTest, FreeReturnsTailFirstAndCachedBlocksAreFoundAgain) {
  const int64_t bs = 4;
  KvCacheManager kv(8, bs, true);
  auto t = tokens(10);  // blocks: [0,4) [4,8) [8,10)
  auto h = hashes(t, bs);
  ASSERT_EQ(h.size(), 2u);
  ASSERT_TRUE(kv.allocate_slots(0, 0, 10));
  EXPECT_EQ(ids(kv.block_table(0)), (Ids{1, 2, 3}));
  // Nothing is published before it is computed.
  EXPECT_EQ(kv.get_computed_blocks(h, 10).num_tokens, 0);
  kv.cache_blocks(0, h, 6);  // only block 0 is full and computed
  EXPECT_EQ(ids(kv.get_computed_blocks(h, 10).blocks), (Ids{1}));
  kv.cache_blocks(0, h, 10);
  EXPECT_EQ(ids(kv.get_computed_blocks(h, 10).blocks), (Ids{1, 2}));
  kv.free(0);
  EXPECT_EQ(kv.pool().free_list(), (Ids{4, 5, 6, 7, 3, 2, 1}));
  KvUsage u = kv.usage();
  EXPECT_EQ(u.referenced, 0);
  EXPECT_EQ(u.cached_free, 2);
  EXPECT_EQ(u.free, 5);

  // A second request with the same prompt hits both blocks.
  ComputedBlocks hit = kv.get_computed_blocks(h, 10);
  EXPECT_EQ(ids(hit.blocks), (Ids{1, 2}));
  EXPECT_EQ(hit.num_tokens, 8);
  EXPECT_EQ(kv.prefix_cache_stats().queries, 0);  // counted only when accepted
  auto fresh = kv.allocate_slots(1, 0, 2, &hit);
  ASSERT_TRUE(fresh);
  EXPECT_EQ(ids(*fresh), (Ids{4}));
  EXPECT_EQ(ids(kv.block_table(1)), (Ids{1, 2, 4}));
  EXPECT_EQ(kv.pool().ref_cnt(1), 1);
  EXPECT_EQ(kv.prefix_cache_stats().queries, 10);
  EXPECT_EQ(kv.prefix_cache_stats().hits, 8);
  kv.check_invariants();
}

TEST(KvCacheManagerTest, HitLeavesAtLeastOneTokenToCompute) {
  const int64_t bs = 4;
  KvCacheManager kv(8, bs, true);
  auto t = tokens(8);  // exactly two full blocks
  auto h = hashes(t, bs);
  ASSERT_TRUE(kv.allocate_slots(0, 0, 8));
  kv.cache_blocks(0, h, 8);
  // All 8 tokens are cached, but the last must be recomputed for its logits: 1 block hits.
  EXPECT_EQ(kv.get_computed_blocks(h, 8).num_tokens, 4);
  EXPECT_EQ(kv.get_computed_blocks(h, 9).num_tokens, 8);
  EXPECT_EQ(kv.get_computed_blocks(h, 1).num_tokens, 0);
}

TEST(KvCacheManagerTest, EvictionDropsTheChainFromTheEvictedBlockOn) {
  const int64_t bs = 2;
  KvCacheManager kv(5, bs, true);  // 4 usable
  auto t = tokens(7);
  auto h = hashes(t, bs);                   // 3 hashes
  ASSERT_TRUE(kv.allocate_slots(0, 0, 7));  // blocks 1 2 3 4
  kv.cache_blocks(0, h, 7);
  kv.free(0);                               // free list 4 3 2 1: tail blocks evicted first
  ASSERT_TRUE(kv.allocate_slots(1, 0, 2));  // takes 4 (no hash)
  EXPECT_EQ(kv.get_computed_blocks(h, 7).num_tokens, 6);
  ASSERT_TRUE(kv.allocate_slots(2, 0, 2));  // takes 3, the third block of the chain
  EXPECT_EQ(ids(kv.get_computed_blocks(h, 7).blocks), (Ids{1, 2}));
  EXPECT_EQ(kv.prefix_cache_stats().evictions, 1);
  kv.check_invariants();
}

TEST(KvCacheManagerTest, CachedFreeBlocksInAHitAreNotCountedTwice) {
  const int64_t bs = 4;
  KvCacheManager kv(4, bs, true);  // 3 usable
  auto t = tokens(9);
  auto h = hashes(t, bs);
  ASSERT_TRUE(kv.allocate_slots(0, 0, 8));
  kv.cache_blocks(0, h, 8);
  kv.free(0);  // free: 3 2 1, with 1 and 2 cached
  ComputedBlocks hit = kv.get_computed_blocks(h, 9);
  ASSERT_EQ(hit.num_tokens, 8);
  // Three blocks are free, but two of them are the hit itself: one is left to allocate.
  EXPECT_EQ(kv.num_allocatable_blocks(&hit), 1);
  EXPECT_EQ(kv.num_blocks_to_allocate(1, 9, &hit), 1);
  EXPECT_FALSE(kv.allocate_slots(1, 0, 1, &hit, /*lookahead=*/4));
  EXPECT_EQ(kv.pool().num_free_blocks(), 3);
  ASSERT_TRUE(kv.allocate_slots(1, 0, 1, &hit));
  EXPECT_EQ(ids(kv.block_table(1)), (Ids{1, 2, 3}));
  kv.check_invariants();
}

TEST(KvCacheManagerTest, ForkSharesFullBlocksAndKeepsTheLastBlockPrivate) {
  const int64_t bs = 4;
  KvCacheManager kv(10, bs, /*enable_prefix_caching=*/false);
  // Leader: 10-token prompt in blocks 1 2 3 (block 3 is partial and will be written by decode).
  ASSERT_TRUE(kv.allocate_slots(0, 0, 10));
  const int64_t share = (10 - 1) / bs * bs;  // 8: two full blocks
  ComputedBlocks f = kv.fork(0, share);
  EXPECT_EQ(ids(f.blocks), (Ids{1, 2}));
  auto mine = kv.allocate_slots(1, 0, 10 - share, &f);
  ASSERT_TRUE(mine);
  EXPECT_EQ(ids(*mine), (Ids{4}));  // its own copy of the partial block
  EXPECT_EQ(ids(kv.block_table(1)), (Ids{1, 2, 4}));
  EXPECT_EQ(kv.pool().ref_cnt(1), 2);
  EXPECT_EQ(kv.pool().ref_cnt(2), 2);
  EXPECT_EQ(kv.pool().ref_cnt(3), 1);
  EXPECT_EQ(kv.prefix_cache_stats().forked_tokens, 8);
  EXPECT_EQ(kv.prefix_cache_stats().queries, 0);
  kv.free(0);
  EXPECT_EQ(kv.pool().ref_cnt(1), 1);
  EXPECT_EQ(kv.usage().referenced, 3);
  kv.free(1);
  EXPECT_EQ(kv.usage().referenced, 0);
  kv.check_invariants();
}

TEST(KvCacheManagerTest, CachingOffFindsNothing) {
  KvCacheManager kv(6, 4, false);
  auto t = tokens(9);
  auto h = hashes(t, 4);
  ASSERT_TRUE(kv.allocate_slots(0, 0, 9));
  kv.cache_blocks(0, h, 9);
  kv.free(0);
  ComputedBlocks hit = kv.get_computed_blocks(h, 9);
  EXPECT_EQ(hit.num_tokens, 0);
  EXPECT_EQ(hit.num_queried_tokens, 0);
  EXPECT_EQ(kv.usage().cached_free, 0);
}

class KvBlockSizeTest : public ::testing::TestWithParam<int64_t> {};

TEST_P(KvBlockSizeTest, PrefixHitsAtEveryBlockSize) {
  const int64_t bs = GetParam();
  KvCacheManager kv(16, bs, true);
  auto t = tokens(static_cast<int>(3 * bs + bs / 2 + 1));  // 3 full blocks and a partial one
  auto h = hashes(t, bs);
  ASSERT_TRUE(kv.allocate_slots(0, 0, static_cast<int64_t>(t.size())));
  EXPECT_EQ(kv.num_blocks_held(0), 4);
  kv.cache_blocks(0, h, static_cast<int64_t>(t.size()));
  auto t2 = t;
  t2[2 * bs + 1] += 1;  // diverges inside block 2
  auto h2 = hashes(t2, bs);
  ComputedBlocks hit = kv.get_computed_blocks(h2, static_cast<int64_t>(t2.size()));
  EXPECT_EQ(hit.num_tokens, 2 * bs);
  EXPECT_EQ(ids(hit.blocks), (Ids{1, 2}));
  ASSERT_TRUE(kv.allocate_slots(1, 0, static_cast<int64_t>(t2.size()) - hit.num_tokens, &hit));
  EXPECT_EQ(ids(kv.block_table(1)), (Ids{1, 2, 5, 6}));
  kv.check_invariants();
}

INSTANTIATE_TEST_SUITE_P(BlockSizes, KvBlockSizeTest, ::testing::Values(8, 16, 32, 64, 128, 256));

}  // namespace
}  // namespace strata::kv
