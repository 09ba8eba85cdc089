// The disk tier of the KV cache: content-addressed block files under one directory, kept across
// restarts.
//
// Layout: <dir>/<fingerprint>/<2 hex digits>/<32 hex digits>.kvb, where the 32 hex digits are the
// block's chained prefix hash (kv/block_hash.h, the same to_string()) and <fingerprint> names
// everything else that decides a block's bytes (model weights, dtype, KV dtype, block size,
// tokenizer, KV layout: see engine code that builds it). Files of another fingerprint are never
// read, so a different model or configuration on the same directory cannot be served stale KV.
//
// A block file is a fixed header followed by the payload (one block's KV, `block_bytes` bytes):
// magic, format version, header size, key, payload size, a checksum of the payload and a
// checksum of the header. get() verifies all of it: a missing, truncated, bit-flipped or foreign
// file is an error for that block (the caller recomputes it), never data handed out.
//
// Writes are atomic: the payload goes to a temporary file with a name unique to this process and
// call, which is renamed over the final name once complete, so a reader (this process or another
// server on the same directory) sees a whole old file, a whole new file or none. Two servers on
// one directory therefore never corrupt each other; each keeps its own index and size count (a
// block the other one evicted is a miss here, which the checksum and existence checks turn into
// a recompute).
//
// The index (key -> file size, LRU order) is rebuilt at open() by scanning the fingerprint's
// directory, oldest modification time first, so a restarted server finds every block written
// before. get() of a present block refreshes its place in the LRU order (and its file's
// modification time, so the order survives restarts). put() evicts least-recently-used files
// until the new one fits in `capacity_bytes`.
//
// Thread-safe: the index is guarded by a mutex that is never held during file I/O, so the
// engine thread's contains() never waits on the disk.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/status.h"
#include "kv/block_hash.h"

namespace strata::kv {

struct DiskTierConfig {
  std::string dir;             // created (with parents) when missing
  std::string fingerprint;     // [0-9a-z_-]{1,64}: the subdirectory of this configuration
  int64_t block_bytes = 0;     // payload size of every block (> 0)
  int64_t capacity_bytes = 0;  // file bytes (headers included) kept at most (> 0)
};

struct DiskTierStats {
  int64_t blocks = 0;          // files in the index
  int64_t bytes = 0;           // their size (headers included)
  int64_t capacity_bytes = 0;  // the configured limit
  int64_t puts = 0;            // blocks written
  int64_t put_failures = 0;    // writes that failed (disk full, I/O error): the block is absent
  int64_t gets = 0;            // blocks read and verified
  int64_t get_missing = 0;     // get() of a key whose file was gone
  int64_t get_corrupt = 0;     // get() whose file failed verification (removed)
  int64_t get_io_errors = 0;   // get() failed by an I/O error
  int64_t evictions = 0;       // files removed to make room
  int64_t bytes_written = 0;   // payload bytes
  int64_t bytes_read = 0;      // payload bytes
};

class DiskTier {
 public:
  // Creates the directories, removes temporary files left by dead writers (older than a minute),
  // scans the fingerprint's block files into the index and evicts down to the capacity. Errors:
  // a directory that cannot be created or read (kInvalidArgument naming the path and the reason).
  static Result<std::unique_ptr<DiskTier>> open(const DiskTierConfig& config);
  ~DiskTier();

  const DiskTierConfig& config() const { return config_; }
  // The size of a block file (header + payload).
  int64_t file_bytes() const;
  // The same for a payload of `block_bytes`, before any tier is opened (size checks of callers).
  static int64_t file_bytes_for(int64_t block_bytes);

  bool contains(const BlockHash& key) const;
  // Writes (or rewrites) the block atomically, then evicts LRU files past the capacity. An error
  // (kResourceExhausted for a full disk, kInternal for other I/O errors) leaves no partial file and
  // the key absent. Requires payload.size() == block_bytes.
  Status put(const BlockHash& key, std::span<const std::byte> payload);
  // Reads and verifies the block into `out` (block_bytes). kNotFound: not in the index or the file
  // is gone; kDataLoss: the file failed verification (it is removed); kInternal: an I/O error.
  // On any error the key leaves the index and `out` holds unspecified bytes.
  Status get(const BlockHash& key, std::span<std::byte> out);
  // Drops the key and its file (no error when absent).
  void remove(const BlockHash& key);

  DiskTierStats stats() const;
  // Every key in the index, least recently used first (for tests).
  std::vector<BlockHash> keys() const;
  // The path of a key's file (whether or not it exists), for tests and logs.
  std::string path_of(const BlockHash& key) const;

  // Test hook: called before each file operation ("open", "write", "rename", "read") with the
  // path; a non-OK status makes that operation fail with it, as a real I/O error would.
  using FaultHook = std::function<Status(const char* op, const std::string& path)>;
  void set_fault_hook(FaultHook hook);

 private:
  struct Impl;
  explicit DiskTier(const DiskTierConfig& config);
  DiskTierConfig config_;
  std::unique_ptr<Impl> impl_;
};

}  // namespace strata::kv
