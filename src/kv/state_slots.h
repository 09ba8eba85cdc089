// Per-sequence state slots (KvSpec::has_state(): DeepSeek-V4's sliding-window ring and the
// compressors' pending rows), as ids only: the model holds the memory (Model::allocate_state),
// this decides which slot is whose. Tensor-free, like the rest of kv/ but kv_storage.
//
// Slots [0, num_running) belong to running sequences: one each, from admission until the
// sequence finishes, is aborted or preempted. Slots [num_running, num_running + num_snapshots)
// are prefix-cache snapshots: the state of a sequence as it was after a block boundary, keyed by
// the hash of the block that ends there. A prefix-cache hit of a stateful model can only resume
// where a snapshot is kept (the state cannot be rebuilt from the paged blocks, which hold nothing
// behind the window), so the scheduler cuts a hit back to the longest prefix whose last block has
// a ready snapshot and copies that snapshot into the sequence's slot before the step
// (ForwardBatch::state_restores).
//
// A snapshot is pending from the step that takes it (reserve(), ForwardBatch::state_snapshots)
// until that step is applied (commit()), and only ready ones are found. Eviction is least
// recently used (find_ready() and reserve() count as uses) among unpinned snapshots; a pin keeps
// one for a restore that is not in a plan yet (a request waiting for KV tier loads).
#pragma once

#include <cstdint>
#include <optional>
#include <unordered_map>
#include <vector>

#include "kv/block_hash.h"

namespace strata::kv {

struct StateSlotStats {
  int64_t num_running = 0, running_in_use = 0;
  int64_t num_snapshots = 0, snapshots_ready = 0, snapshots_pending = 0;
  int64_t snapshots_taken = 0;  // reserve()s
  int64_t evictions = 0;        // snapshots overwritten by others
  int64_t restores = 0;         // hits resumed from a snapshot (count_restore())
  int64_t hits_cut = 0;         // prefix-cache hit blocks dropped for want of a snapshot
};

class StateSlots {
 public:
  StateSlots() = default;  // no state: disabled
  StateSlots(int64_t num_running, int64_t num_snapshots);

  bool enabled() const { return num_running_ > 0; }
  int64_t num_running() const { return num_running_; }
  int64_t num_snapshots() const { return static_cast<int64_t>(snaps_.size()); }

  // A free running slot; aborts when none is left (the scheduler runs at most num_running
  // sequences).
  int32_t acquire();
  void release(int32_t slot);
  int64_t num_free_running() const { return static_cast<int64_t>(free_running_.size()); }

  // The ready snapshot of the boundary ending with block `hash` (and counts it as a use).
  std::optional<int32_t> find_ready(const BlockHash& hash);
  bool is_ready(const BlockHash& hash) const;
  // Whether a snapshot (ready or pending) is kept for `hash`.
  bool has(const BlockHash& hash) const { return by_hash_.count(hash) != 0; }
  // A slot for a new snapshot of `hash`, taken in step `step`: a free snapshot slot, else the
  // least recently used one that is neither pinned nor pending in `step` (its old snapshot is
  // forgotten). nullopt when `hash` has one already or no slot can be taken.
  std::optional<int32_t> reserve(const BlockHash& hash, uint64_t step);
  // Step `step` was applied: its pending snapshot in `slot` (if still there) is ready.
  void commit(int32_t slot, uint64_t step);
  void pin(int32_t slot);
  void unpin(int32_t slot);
  void count_restore() { ++stats_.restores; }
  void count_hit_cut(int64_t blocks) { stats_.hits_cut += blocks; }

  StateSlotStats stats() const;
  // Aborts with a message when the free lists, the hash map and the snapshots disagree. Tests.
  void check_invariants() const;

 private:
  struct Snapshot {
    enum class State : uint8_t { kFree, kPending, kReady } state = State::kFree;
    BlockHash hash;
    uint64_t step = 0;       // of a pending one
    uint64_t last_used = 0;  // LRU clock
    int32_t pins = 0;
  };
  Snapshot& snap(int32_t slot);
  const Snapshot& snap(int32_t slot) const;

  int64_t num_running_ = 0;
  std::vector<int32_t> free_running_;
  std::vector<bool> running_used_;
  std::vector<Snapshot> snaps_;
  std::unordered_map<BlockHash, int32_t, BlockHashHasher> by_hash_;  // -> slot
  uint64_t clock_ = 0;
  StateSlotStats stats_;
};

}  // namespace strata::kv
