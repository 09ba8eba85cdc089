#include "kv/block_pool.h"

#include "core/check.h"

namespace strata::kv {

BlockPool::BlockPool(int64_t num_blocks, bool enable_caching)
    : blocks_(static_cast<size_t>(num_blocks)), enable_caching_(enable_caching) {
  STRATA_CHECK_GE(num_blocks, 2) << "a block pool needs the null block and one usable block";
  STRATA_CHECK_LE(num_blocks, int64_t{INT32_MAX});
  for (BlockId id = 1; id < static_cast<BlockId>(num_blocks); ++id) push_back(id);
  if (enable_caching_) cached_.reserve(static_cast<size_t>(num_blocks));
}

void BlockPool::push_back(BlockId id) {
  Block& b = blocks_[id];
  b.prev = tail_;
  b.next = -1;
  b.in_free_list = true;
  if (tail_ >= 0)
    blocks_[tail_].next = id;
  else
    head_ = id;
  tail_ = id;
  ++num_free_;
  if (b.has_hash) ++num_cached_free_;
}

void BlockPool::unlink(BlockId id) {
  Block& b = blocks_[id];
  if (b.prev >= 0)
    blocks_[b.prev].next = b.next;
  else
    head_ = b.next;
  if (b.next >= 0)
    blocks_[b.next].prev = b.prev;
  else
    tail_ = b.prev;
  b.prev = b.next = -1;
  b.in_free_list = false;
  --num_free_;
  if (b.has_hash) --num_cached_free_;
}

void BlockPool::evict_hash(BlockId id) {
  Block& b = blocks_[id];
  if (!b.has_hash) return;
  auto it = cached_.find(b.hash);
  STRATA_CHECK(it != cached_.end() && it->second == id) << "hash map lost block " << id;
  cached_.erase(it);
  b.has_hash = false;
  ++num_evictions_;
}

std::optional<BlockId> BlockPool::lookup(const BlockHash& hash) const {
  if (!enable_caching_) return std::nullopt;
  auto it = cached_.find(hash);
  if (it == cached_.end()) return std::nullopt;
  return it->second;
}

void BlockPool::touch(std::span<const BlockId> block_ids) {
  for (BlockId id : block_ids) {
    STRATA_CHECK(id > kNullBlockId && id < static_cast<BlockId>(blocks_.size()))
        << "touch of invalid block " << id;
    Block& b = blocks_[id];
    if (b.ref_cnt == 0) unlink(id);
    ++b.ref_cnt;
  }
}

bool BlockPool::allocate(int64_t n, std::vector<BlockId>* out) {
  STRATA_CHECK_GE(n, 0);
  if (n > num_free_) return false;
  for (int64_t i = 0; i < n; ++i) {
    BlockId id = head_;
    unlink(id);
    evict_hash(id);
    blocks_[id].ref_cnt = 1;
    out->push_back(id);
  }
  return true;
}

void BlockPool::free(std::span<const BlockId> block_ids) {
  for (BlockId id : block_ids) {
    STRATA_CHECK(id > kNullBlockId && id < static_cast<BlockId>(blocks_.size()))
        << "free of invalid block " << id;
    Block& b = blocks_[id];
    STRATA_CHECK_GT(b.ref_cnt, 0) << "double free of block " << id;
    if (--b.ref_cnt == 0) push_back(id);
  }
}

bool BlockPool::cache_block(BlockId id, const BlockHash& hash) {
  if (!enable_caching_) return false;
  Block& b = blocks_.at(id);
  STRATA_CHECK_GT(b.ref_cnt, 0) << "caching unreferenced block " << id;
  if (b.has_hash) return false;
  if (!cached_.emplace(hash, id).second) return false;
  b.has_hash = true;
  b.hash = hash;
  return true;
}

std::optional<BlockHash> BlockPool::block_hash(BlockId id) const {
  const Block& b = blocks_.at(id);
  if (!b.has_hash) return std::nullopt;
  return b.hash;
}

bool BlockPool::is_free(BlockId id) const {
  return blocks_.at(id).in_free_list;
}

std::vector<BlockId> BlockPool::free_list() const {
  std::vector<BlockId> out;
  out.reserve(static_cast<size_t>(num_free_));
  for (BlockId id = head_; id >= 0; id = blocks_[id].next) out.push_back(id);
  return out;
}

void BlockPool::check_invariants() const {
  const Block& null_block = blocks_[kNullBlockId];
  STRATA_CHECK(!null_block.in_free_list && null_block.ref_cnt == 0 && !null_block.has_hash)
      << "the null block was handed out or cached";
  int64_t walked = 0, walked_cached = 0;
  BlockId prev = -1;
  for (BlockId id = head_; id >= 0; id = blocks_[id].next) {
    const Block& b = blocks_[id];
    STRATA_CHECK(b.in_free_list) << "block " << id << " linked but not marked free";
    STRATA_CHECK_EQ(b.ref_cnt, 0) << "free block " << id << " is referenced";
    STRATA_CHECK_EQ(b.prev, prev) << "free list back link broken at block " << id;
    if (b.has_hash) ++walked_cached;
    prev = id;
    STRATA_CHECK_LE(++walked, num_usable_blocks()) << "free list has a cycle";
  }
  STRATA_CHECK_EQ(tail_, prev) << "free list tail is wrong";
  STRATA_CHECK_EQ(walked, num_free_) << "free block counter is wrong";
  STRATA_CHECK_EQ(walked_cached, num_cached_free_) << "cached-free counter is wrong";
  int64_t hashed = 0;
  for (BlockId id = 1; id < static_cast<BlockId>(blocks_.size()); ++id) {
    const Block& b = blocks_[id];
    STRATA_CHECK_GE(b.ref_cnt, 0);
    STRATA_CHECK_EQ(b.in_free_list, b.ref_cnt == 0) << "block " << id << " ref/free mismatch";
    if (b.has_hash) {
      ++hashed;
      auto it = cached_.find(b.hash);
      STRATA_CHECK(it != cached_.end() && it->second == id) << "block " << id << " hash unmapped";
    }
  }
  STRATA_CHECK_EQ(hashed, static_cast<int64_t>(cached_.size())) << "hash map has stale entries";
  if (!enable_caching_) STRATA_CHECK_EQ(hashed, 0);
}

}  // namespace strata::kv
