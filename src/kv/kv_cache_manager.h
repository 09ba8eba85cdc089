// The KV cache manager: per-sequence block tables over one BlockPool, in the shape of vLLM v1's
// KVCacheManager, with no tensors (the model runner turns block ids into slot addresses).
//
// A sequence (request) is named by a SeqId, a small dense integer chosen by the caller (the
// scheduler uses its request slot index); per-sequence state lives in a vector indexed by it.
// A sequence's block table holds, in order, the blocks for its tokens 0..: token t lives in
// block_table[t / block_size] at offset t % block_size.
//
// Typical use for one request (see sched/scheduler.h for the real caller):
//   auto hit = kv.get_computed_blocks(hashes, num_tokens);   // longest cached prefix
//   auto new_blocks = kv.allocate_slots(seq, 0, n, &hit);    // nullopt: does not fit now
//   ... model computes tokens [hit.num_tokens, hit.num_tokens + n) ...
//   kv.cache_blocks(seq, hashes, num_computed_tokens);       // publish full computed blocks
//   kv.free(seq);                                            // blocks go to the LRU free list
//
// Sharing rules. Only full blocks whose KV has been computed are ever shared: prefix-cache hits
// come from blocks published by cache_blocks() after their tokens were computed, and fork() hands
// out whole blocks below a block boundary. A block that a sequence will still write (its last,
// partial block) is private to it, so no block is written by two sequences.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <utility>
#include <vector>

#include "kv/block_hash.h"
#include "kv/block_pool.h"

namespace strata::kv {

using SeqId = int64_t;

// Blocks whose KV a new sequence can reuse instead of computing: a prefix-cache hit or a fork.
struct ComputedBlocks {
  std::vector<BlockId> blocks;  // for tokens [0, num_tokens)
  int64_t num_tokens = 0;       // blocks.size() * block_size
  // Tokens looked up in the prefix cache (0 for forks and when caching is off); counted in the
  // prefix-cache statistics when allocate_slots() accepts these blocks.
  int64_t num_queried_tokens = 0;
  bool from_fork = false;
};

// Pool occupancy in blocks (null block excluded): referenced + cached_free + free == total.
struct KvUsage {
  int64_t num_blocks = 0;   // usable blocks
  int64_t referenced = 0;   // held by at least one sequence
  int64_t cached_free = 0;  // unreferenced but findable by a prefix lookup until reused
  int64_t free = 0;         // unreferenced, no cached content
  // Fraction of blocks referenced (vLLM's kv_cache_usage_perc / 100).
  double usage() const { return num_blocks ? static_cast<double>(referenced) / num_blocks : 0; }
};

struct PrefixCacheStats {
  int64_t queries = 0;        // prompt tokens looked up (at admission)
  int64_t hits = 0;           // of which found in the cache
  int64_t forked_tokens = 0;  // tokens shared by fork() (n > 1 siblings)
  int64_t evictions = 0;      // cached blocks reused for new data
};

class KvCacheManager {
 public:
  // `num_blocks` includes the null block. Requires block_size >= 1 and num_blocks >= 2.
  KvCacheManager(int64_t num_blocks, int64_t block_size, bool enable_prefix_caching);

  int64_t block_size() const { return block_size_; }
  int64_t num_usable_blocks() const { return pool_.num_usable_blocks(); }
  bool prefix_caching_enabled() const { return pool_.caching_enabled(); }
  const BlockPool& pool() const { return pool_; }

  // Blocks needed to hold `num_tokens` tokens.
  int64_t blocks_for(int64_t num_tokens) const {
    return (num_tokens + block_size_ - 1) / block_size_;
  }

  // The longest run of cached blocks matching `block_hashes` from the start, limited so at least
  // one of the sequence's `num_tokens` tokens is left to compute (its logits are needed). Empty
  // when caching is off. No side effects (statistics are counted when allocate_slots() accepts).
  ComputedBlocks get_computed_blocks(std::span<const BlockHash> block_hashes,
                                     int64_t num_tokens) const;

  // The first num_tokens / block_size blocks of `src`, for a sibling sequence with the same
  // prefix. Preconditions: num_tokens is a multiple of block_size, `src` holds that many blocks
  // and their KV is computed. No side effects until allocate_slots() takes them.
  ComputedBlocks fork(SeqId src, int64_t num_tokens) const;

  // Makes sure `seq` has slots for num_computed_tokens + new_computed->num_tokens +
  // num_new_tokens + num_lookahead_tokens tokens, where num_computed_tokens is what `seq` has
  // already computed. `new_computed` (a hit or a fork) may only be given while `seq` holds no
  // blocks. Returns the newly allocated blocks (a view valid until the next call for `seq`), or
  // nullopt when the free list cannot supply them; nothing changes then.
  std::optional<std::span<const BlockId>> allocate_slots(
      SeqId seq, int64_t num_computed_tokens, int64_t num_new_tokens,
      const ComputedBlocks* new_computed = nullptr, int64_t num_lookahead_tokens = 0);

  // Fresh blocks allocate_slots() would need for the same arguments, and how many it can get
  // (free-list blocks minus those among `new_computed` that would leave the free list).
  int64_t num_blocks_to_allocate(SeqId seq, int64_t num_total_tokens,
                                 const ComputedBlocks* new_computed = nullptr) const;
  int64_t num_allocatable_blocks(const ComputedBlocks* new_computed = nullptr) const;

  // Publishes the sequence's full blocks below `num_computed_tokens` in the prefix cache.
  // `block_hashes` are the sequence's block hashes (at least num_computed_tokens / block_size of
  // them). No-op when caching is off. `newly_cached`, when given, gets the blocks this call made
  // findable (the KV tiers copy them down).
  void cache_blocks(SeqId seq, std::span<const BlockHash> block_hashes, int64_t num_computed_tokens,
                    std::vector<std::pair<BlockId, BlockHash>>* newly_cached = nullptr);

  // Pins: a reference held by something other than a sequence (a KV tier load writing into the
  // block), so that the block is not handed out again while it is in use, even if its sequence
  // is freed. unpin() drops one; a block reaching no reference goes to the free list.
  void pin(BlockId id);
  void unpin(BlockId id);
  int64_t num_pinned() const { return num_pinned_; }
  // Makes a referenced block findable under `hash` (a block loaded from a lower tier); false when
  // caching is off, it already has a hash or another block holds this one.
  bool publish_block(BlockId id, const BlockHash& hash) { return pool_.cache_block(id, hash); }

  // Releases every block of `seq`, last block first, so that a request's tail is evicted before
  // its (more shareable) head. No-op for a sequence holding nothing.
  void free(SeqId seq);

  // The block table of `seq` (empty when it holds nothing). Valid until the next call for `seq`.
  std::span<const BlockId> block_table(SeqId seq) const;
  int64_t num_blocks_held(SeqId seq) const { return static_cast<int64_t>(block_table(seq).size()); }

  KvUsage usage() const;
  PrefixCacheStats prefix_cache_stats() const;

  // Checks the pool, and that every block's ref count equals the number of block tables holding
  // it. Aborts with a message on failure. O(pool + tables): for tests.
  void check_invariants() const;

 private:
  struct SeqBlocks {
    std::vector<BlockId> blocks;
    int64_t num_cached_blocks = 0;  // blocks [0, n) already published (or found in the cache)
  };
  SeqBlocks& seq_state(SeqId seq);

  int64_t block_size_;
  BlockPool pool_;
  std::vector<SeqBlocks> seqs_;
  std::vector<BlockId> scratch_;
  std::vector<int32_t> pins_;  // per block, grown on demand
  int64_t num_pinned_ = 0;
  PrefixCacheStats stats_;
};

}  // namespace strata::kv
