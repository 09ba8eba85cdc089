// The KV block pool: block ids, reference counts, an LRU free list and the prefix-cache map.
//
// Block 0 is the reserved null block: never handed out, never freed, never in the free list (a
// model runner may point padding entries of a block table at it). Blocks 1 .. num_blocks-1 are
// usable. A block is either referenced (ref_cnt > 0, owned by one or more sequences) or free
// (ref_cnt == 0, in the free list). A free block that still carries a hash is "cached": a prefix
// lookup can find it and bring it back (touch) until it is reused for new data, at which point
// its hash is dropped (evicted).
//
// Free list order: allocation takes blocks from the front, free() appends to the back, so the
// least recently freed block is reused first (LRU eviction). Initially the list is 1, 2, 3, ...
// The list is doubly linked through per-block indices: touching a cached block in the middle of
// it, popping and appending are all O(1); nothing here scans the pool except check_invariants().
//
// Not thread-safe: the engine thread owns it.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <unordered_map>
#include <vector>

#include "kv/block_hash.h"

namespace strata::kv {

using BlockId = int32_t;
constexpr BlockId kNullBlockId = 0;

class BlockPool {
 public:
  // `num_blocks` counts the null block: num_blocks - 1 blocks are usable. Requires num_blocks >= 2.
  // With `enable_caching` false, cache_block() is a no-op and lookups never hit.
  BlockPool(int64_t num_blocks, bool enable_caching);

  int64_t num_blocks() const { return static_cast<int64_t>(blocks_.size()); }
  int64_t num_usable_blocks() const { return num_blocks() - 1; }
  // Blocks in the free list (cached or not): what allocate() can hand out.
  int64_t num_free_blocks() const { return num_free_; }
  // Free blocks that still carry a hash (findable by lookup()).
  int64_t num_cached_free_blocks() const { return num_cached_free_; }
  int64_t num_referenced_blocks() const { return num_usable_blocks() - num_free_; }
  bool caching_enabled() const { return enable_caching_; }

  // The block holding `hash`, if any (referenced or cached-free). No side effects.
  std::optional<BlockId> lookup(const BlockHash& hash) const;

  // Takes one more reference on each block; a free (cached) block leaves the free list.
  void touch(std::span<const BlockId> block_ids);

  // Pops `n` blocks from the front of the free list into `out` (appended, in order) with
  // ref_cnt 1, evicting their hashes. Returns false and changes nothing when fewer than `n` are
  // free.
  bool allocate(int64_t n, std::vector<BlockId>* out);

  // Drops one reference on each block, in the given order; blocks reaching zero are appended to
  // the back of the free list in that order (so the first one given is evicted first).
  void free(std::span<const BlockId> block_ids);

  // Registers a referenced, full block under `hash`. Returns false (and changes nothing) when
  // caching is off, the block already has a hash, or another block already holds this hash (the
  // content is then already findable).
  bool cache_block(BlockId id, const BlockHash& hash);

  int32_t ref_cnt(BlockId id) const { return blocks_.at(id).ref_cnt; }
  std::optional<BlockHash> block_hash(BlockId id) const;
  bool is_free(BlockId id) const;
  // The free list from front (next to be reused) to back. O(num_free): for tests and debugging.
  std::vector<BlockId> free_list() const;

  // Cached blocks whose hash was dropped because the block was reused.
  int64_t num_evictions() const { return num_evictions_; }

  // Aborts with a message when the free list, counters, ref counts or hash map disagree.
  void check_invariants() const;

 private:
  struct Block {
    int32_t ref_cnt = 0;
    BlockId prev = -1;  // free-list neighbours; -1 = none / not in the list
    BlockId next = -1;
    bool in_free_list = false;
    bool has_hash = false;
    BlockHash hash;
  };
  void push_back(BlockId id);
  void unlink(BlockId id);
  void evict_hash(BlockId id);

  std::vector<Block> blocks_;
  BlockId head_ = -1, tail_ = -1;
  int64_t num_free_ = 0;
  int64_t num_cached_free_ = 0;
  int64_t num_evictions_ = 0;
  bool enable_caching_;
  std::unordered_map<BlockHash, BlockId, BlockHashHasher> cached_;
};

}  // namespace strata::kv
