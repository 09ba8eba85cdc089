// KV tiers below the pool: a host-RAM tier and a disk tier (kv/disk_tier.h), moved by one
// transfer thread. DESIGN.md sections 4 and 8.
//
// Who decides what: the scheduler owns the decisions and puts them in the step plan as data
// (plan.kv_stores: cached pool blocks to copy down; plan.kv_loads: tier blocks to bring into
// freshly allocated pool blocks); it asks find() which blocks the tiers hold. The worker hands
// the plan's lists to store() and load() at the start of the step and reports finished loads
// back with take_finished_loads(). Nothing here knows about requests.
//
// Data path. store() copies the block out of the pool at once (on a CPU a memcpy; a GPU backend
// queues the same copy on its copy stream) into a RAM slot, so the step may then overwrite the
// pool block; the slot joins the RAM tier and, with a disk tier, a write of it to disk is queued.
// load() queues a copy into the pool block: from its RAM slot, or read and verified from disk
// (then promoted into RAM). One transfer thread runs the queues, loads before writes; a step never
// waits for it, except a step with nothing to compute (Worker), which waits for the loads in
// flight since nothing else can progress.
//
// Failure is local: a load that cannot be served (evicted meanwhile, file missing, checksum
// mismatch, I/O error) finishes with ok = false and the scheduler recomputes those tokens; a
// store that cannot be made (every RAM slot busy, disk full) is dropped and counted. find() is a
// hint, never trusted with data: every load is checked again when it runs.
//
// RAM slots: the RAM tier is an arena of `ram_bytes / block_bytes` slots in LRU order; a slot
// being read (a load, a disk write) is busy and not reused. With a disk tier and no RAM tier a
// small staging arena carries blocks to the disk writer.
//
// Thread-safe: find(), stats() and the engine-thread calls may run while the transfer thread works.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/status.h"
#include "kv/block_hash.h"
#include "kv/block_pool.h"
#include "kv/kv_storage.h"

namespace strata::kv {

struct KvTierConfig {
  int64_t ram_bytes = 0;    // RAM tier size; 0: none
  std::string disk_path;    // disk tier directory; empty: none
  int64_t disk_bytes = 0;   // disk tier size (> 0 with a path)
  std::string fingerprint;  // names the configuration's block files (see disk_tier.h)
  bool enabled() const { return ram_bytes > 0 || !disk_path.empty(); }
};

// Where find() saw a block.
enum class Tier : uint32_t { kNone = 0, kRam = 1, kDisk = 2 };
const char* tier_name(Tier t);  // "none", "cpu", "disk"

// What the scheduler needs from the tiers: a lookup.
class KvTierDirectory {
 public:
  virtual ~KvTierDirectory() = default;
  virtual Tier find(const BlockHash& key) const = 0;
};

// The scheduler's side of the tiers (vLLM's external prefix cache), cumulative.
struct TierHitStats {
  int64_t queries = 0;       // prompt tokens looked up in the tiers (those the pool missed)
  int64_t hits = 0;          // of which loaded from them
  int64_t loads = 0;         // blocks asked for
  int64_t failed_loads = 0;  // of which failed and recomputed
  int64_t stores = 0;        // blocks sent down
};

struct KvLoadResult {
  BlockId block = 0;
  bool ok = false;
  Tier tier = Tier::kNone;  // where it came from (kNone when it failed)
  friend bool operator==(const KvLoadResult&, const KvLoadResult&) = default;
};

struct KvTierUsage {
  int64_t blocks = 0;           // blocks held
  int64_t capacity_blocks = 0;  // blocks it can hold
  int64_t hits = 0;             // blocks loaded from this tier
  int64_t stores = 0;           // blocks written into this tier
  int64_t bytes_in = 0;         // bytes written into it
  int64_t bytes_out = 0;        // bytes read from it
  double usage() const {
    return capacity_blocks ? static_cast<double>(blocks) / capacity_blocks : 0;
  }
};

struct KvTierStats {
  KvTierUsage ram, disk;
  bool has_ram = false, has_disk = false;
  int64_t block_bytes = 0;
  int64_t loads = 0;           // loads finished
  int64_t load_failures = 0;   // loads that failed (the tokens were recomputed)
  int64_t load_missing = 0;    //   of which: the block was gone
  int64_t load_corrupt = 0;    //   of which: it failed verification
  int64_t load_io_errors = 0;  //   of which: an I/O error
  int64_t stores_dropped = 0;  // stores not made (no free RAM slot)
  int64_t disk_write_failures = 0;
};

class KvTiers final : public KvTierDirectory {
 public:
  // `pool` (not owned) must outlive the tiers. Opens (and scans) the disk tier.
  static Result<std::unique_ptr<KvTiers>> create(const KvTierConfig& config, KvStorage* pool);
  ~KvTiers() override;  // finishes the queued disk writes, then stops the thread

  Tier find(const BlockHash& key) const override;

  // Engine thread, at the start of a step, stores before loads (the order of the plan).
  void store(BlockId block, const BlockHash& key);
  void load(BlockId block, const BlockHash& key);
  // Loads finished since the last call, in the order they finished.
  std::vector<KvLoadResult> take_finished_loads();
  // Blocks until every load queued so far has finished.
  void wait_for_loads();
  // Blocks until every queued job (loads and disk writes) has finished: for tests and shutdown.
  void flush();

  KvTierStats stats() const;
  int64_t block_bytes() const;

  // Test hook on the disk tier's file operations (see DiskTier::set_fault_hook).
  void set_disk_fault_hook(std::function<Status(const char* op, const std::string& path)> hook);

 private:
  struct Impl;
  KvTiers() = default;
  std::unique_ptr<Impl> impl_;
};

}  // namespace strata::kv
