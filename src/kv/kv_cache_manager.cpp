#include "kv/kv_cache_manager.h"

#include <algorithm>

#include "core/check.h"

namespace strata::kv {

KvCacheManager::KvCacheManager(int64_t num_blocks, int64_t block_size, bool enable_prefix_caching)
    : block_size_(block_size), pool_(num_blocks, enable_prefix_caching) {
  STRATA_CHECK_GE(block_size, 1);
}

KvCacheManager::SeqBlocks& KvCacheManager::seq_state(SeqId seq) {
  STRATA_CHECK_GE(seq, 0);
  if (static_cast<size_t>(seq) >= seqs_.size()) seqs_.resize(static_cast<size_t>(seq) + 1);
  return seqs_[static_cast<size_t>(seq)];
}

std::span<const BlockId> KvCacheManager::block_table(SeqId seq) const {
  if (seq < 0 || static_cast<size_t>(seq) >= seqs_.size()) return {};
  return seqs_[static_cast<size_t>(seq)].blocks;
}

ComputedBlocks KvCacheManager::get_computed_blocks(std::span<const BlockHash> block_hashes,
                                                   int64_t num_tokens) const {
  ComputedBlocks out;
  if (!pool_.caching_enabled() || num_tokens <= 0) return out;
  out.num_queried_tokens = num_tokens;
  const int64_t max_blocks =
      std::min<int64_t>((num_tokens - 1) / block_size_, static_cast<int64_t>(block_hashes.size()));
  for (int64_t i = 0; i < max_blocks; ++i) {
    auto id = pool_.lookup(block_hashes[i]);
    if (!id) break;
    out.blocks.push_back(*id);
  }
  out.num_tokens = static_cast<int64_t>(out.blocks.size()) * block_size_;
  return out;
}

ComputedBlocks KvCacheManager::fork(SeqId src, int64_t num_tokens) const {
  STRATA_CHECK(num_tokens >= 0 && num_tokens % block_size_ == 0)
      << "fork of " << num_tokens << " tokens is not whole blocks of " << block_size_;
  auto table = block_table(src);
  const int64_t n = num_tokens / block_size_;
  STRATA_CHECK_LE(n, static_cast<int64_t>(table.size())) << "fork beyond the source's blocks";
  ComputedBlocks out;
  out.blocks.assign(table.begin(), table.begin() + n);
  out.num_tokens = num_tokens;
  out.from_fork = true;
  return out;
}

int64_t KvCacheManager::num_blocks_to_allocate(SeqId seq, int64_t num_total_tokens,
                                               const ComputedBlocks* new_computed) const {
  const int64_t held =
      num_blocks_held(seq) + (new_computed ? static_cast<int64_t>(new_computed->blocks.size()) : 0);
  return std::max<int64_t>(0, blocks_for(num_total_tokens) - held);
}

int64_t KvCacheManager::num_allocatable_blocks(const ComputedBlocks* new_computed) const {
  int64_t n = pool_.num_free_blocks();
  if (new_computed) {
    for (BlockId id : new_computed->blocks) n -= pool_.ref_cnt(id) == 0 ? 1 : 0;
  }
  return n;
}

std::optional<std::span<const BlockId>> KvCacheManager::allocate_slots(
    SeqId seq, int64_t num_computed_tokens, int64_t num_new_tokens,
    const ComputedBlocks* new_computed, int64_t num_lookahead_tokens) {
  STRATA_CHECK(num_computed_tokens >= 0 && num_new_tokens >= 0 && num_lookahead_tokens >= 0);
  SeqBlocks& s = seq_state(seq);
  if (new_computed && !new_computed->blocks.empty()) {
    STRATA_CHECK(s.blocks.empty()) << "computed blocks given to seq " << seq << " holding blocks";
    STRATA_CHECK_EQ(new_computed->num_tokens,
                    static_cast<int64_t>(new_computed->blocks.size()) * block_size_);
  }
  const int64_t computed_extra = new_computed ? new_computed->num_tokens : 0;
  const int64_t total =
      num_computed_tokens + computed_extra + num_new_tokens + num_lookahead_tokens;
  const int64_t need = num_blocks_to_allocate(seq, total, new_computed);
  if (need > num_allocatable_blocks(new_computed)) return std::nullopt;
  if (new_computed) {
    pool_.touch(new_computed->blocks);
    s.blocks.insert(s.blocks.end(), new_computed->blocks.begin(), new_computed->blocks.end());
    s.num_cached_blocks = static_cast<int64_t>(new_computed->blocks.size());
    if (new_computed->from_fork) {
      stats_.forked_tokens += new_computed->num_tokens;
    } else if (new_computed->num_queried_tokens > 0) {
      stats_.queries += new_computed->num_queried_tokens;
      stats_.hits += new_computed->num_tokens;
    }
  }
  const size_t first_new = s.blocks.size();
  STRATA_CHECK(pool_.allocate(need, &s.blocks));
  return std::span<const BlockId>(s.blocks).subspan(first_new);
}

void KvCacheManager::cache_blocks(SeqId seq, std::span<const BlockHash> block_hashes,
                                  int64_t num_computed_tokens,
                                  std::vector<std::pair<BlockId, BlockHash>>* newly_cached) {
  if (!pool_.caching_enabled()) return;
  SeqBlocks& s = seq_state(seq);
  const int64_t num_full =
      std::min<int64_t>(num_computed_tokens / block_size_, static_cast<int64_t>(s.blocks.size()));
  STRATA_CHECK_LE(num_full, static_cast<int64_t>(block_hashes.size()))
      << "seq " << seq << " has fewer block hashes than computed full blocks";
  for (int64_t i = s.num_cached_blocks; i < num_full; ++i) {
    if (pool_.cache_block(s.blocks[i], block_hashes[i]) && newly_cached != nullptr)
      newly_cached->emplace_back(s.blocks[i], block_hashes[i]);
  }
  s.num_cached_blocks = std::max(s.num_cached_blocks, num_full);
}

void KvCacheManager::free(SeqId seq) {
  if (seq < 0 || static_cast<size_t>(seq) >= seqs_.size()) return;
  SeqBlocks& s = seqs_[static_cast<size_t>(seq)];
  if (s.blocks.empty()) return;
  scratch_.assign(s.blocks.rbegin(), s.blocks.rend());
  pool_.free(scratch_);
  s.blocks.clear();
  s.num_cached_blocks = 0;
}

void KvCacheManager::pin(BlockId id) {
  if (static_cast<size_t>(id) >= pins_.size()) pins_.resize(static_cast<size_t>(id) + 1, 0);
  const BlockId ids[1] = {id};
  pool_.touch(ids);
  ++pins_[static_cast<size_t>(id)];
  ++num_pinned_;
}

void KvCacheManager::unpin(BlockId id) {
  STRATA_CHECK(static_cast<size_t>(id) < pins_.size() && pins_[static_cast<size_t>(id)] > 0)
      << "unpin of block " << id << " that is not pinned";
  --pins_[static_cast<size_t>(id)];
  --num_pinned_;
  const BlockId ids[1] = {id};
  pool_.free(ids);
}

KvUsage KvCacheManager::usage() const {
  KvUsage u;
  u.num_blocks = pool_.num_usable_blocks();
  u.referenced = pool_.num_referenced_blocks();
  u.cached_free = pool_.num_cached_free_blocks();
  u.free = pool_.num_free_blocks() - u.cached_free;
  return u;
}

PrefixCacheStats KvCacheManager::prefix_cache_stats() const {
  PrefixCacheStats s = stats_;
  s.evictions = pool_.num_evictions();
  return s;
}

void KvCacheManager::check_invariants() const {
  pool_.check_invariants();
  std::vector<int32_t> refs(static_cast<size_t>(pool_.num_blocks()), 0);
  for (const SeqBlocks& s : seqs_) {
    STRATA_CHECK_LE(s.num_cached_blocks, static_cast<int64_t>(s.blocks.size()));
    for (BlockId id : s.blocks) {
      STRATA_CHECK(id > kNullBlockId && id < pool_.num_blocks()) << "bad block id " << id;
      ++refs[static_cast<size_t>(id)];
    }
  }
  for (size_t id = 0; id < pins_.size(); ++id) refs[id] += pins_[id];
  for (BlockId id = 1; id < static_cast<BlockId>(pool_.num_blocks()); ++id) {
    STRATA_CHECK_EQ(refs[static_cast<size_t>(id)], pool_.ref_cnt(id))
        << "block " << id << " ref count disagrees with the block tables";
  }
}

}  // namespace strata::kv
