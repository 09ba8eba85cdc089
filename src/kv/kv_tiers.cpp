#include "kv/kv_tiers.h"

#include <algorithm>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <mutex>
#include <thread>
#include <unordered_map>

#include "core/check.h"
#include "core/logging.h"
#include "kv/disk_tier.h"

namespace strata::kv {

const char* tier_name(Tier t) {
  switch (t) {
    case Tier::kRam:
      return "cpu";
    case Tier::kDisk:
      return "disk";
    case Tier::kNone:
      break;
  }
  return "none";
}

namespace {

// Staging slots carrying blocks to the disk writer when there is no RAM tier: enough to keep the
// writer busy, at most 64 MiB.
int64_t num_staging_slots(int64_t block_bytes) {
  return std::clamp<int64_t>((int64_t{64} << 20) / block_bytes, 4, 256);
}

}  // namespace

struct KvTiers::Impl {
  struct Slot {
    BlockHash key;
    bool in_map = false;           // findable under `key`
    bool staging = false;          // a staging slot (no RAM tier): freed once written and idle
    int32_t busy = 0;              // jobs reading it (loads, the disk write) or the copy filling it
    int32_t prev = -1, next = -1;  // LRU links of RAM entries
    bool in_lru = false;
  };
  enum class JobKind { kLoadSlot, kLoadDisk, kWrite };
  struct Job {
    JobKind kind;
    BlockId block = 0;
    BlockHash key;
    int32_t slot = -1;
  };

  KvStorage* pool = nullptr;
  int64_t block_bytes = 0;
  int64_t num_ram_slots = 0;
  std::unique_ptr<std::byte[]> arena;  // RAM slots, then staging slots
  std::unique_ptr<DiskTier> disk;

  mutable std::mutex mu;
  std::condition_variable work_cv;  // jobs queued or stop
  std::condition_variable done_cv;  // a job finished
  std::vector<Slot> slots;
  std::unordered_map<BlockHash, int32_t, BlockHashHasher> map;
  std::vector<int32_t> free_ram, free_staging;
  int32_t lru_head = -1, lru_tail = -1;
  std::deque<Job> loads, writes;
  int64_t loads_pending = 0;  // queued or running
  int64_t jobs_running = 0;
  std::vector<KvLoadResult> finished;
  KvTierStats stats;
  bool stop = false;
  std::thread thread;
  std::vector<std::byte> scratch;  // the transfer thread's disk read buffer

  std::byte* slot_data(int32_t s) { return arena.get() + static_cast<int64_t>(s) * block_bytes; }

  void lru_unlink(int32_t s) {
    Slot& x = slots[s];
    if (!x.in_lru) return;
    (x.prev >= 0 ? slots[x.prev].next : lru_head) = x.next;
    (x.next >= 0 ? slots[x.next].prev : lru_tail) = x.prev;
    x.prev = x.next = -1;
    x.in_lru = false;
  }
  void lru_push_back(int32_t s) {
    Slot& x = slots[s];
    x.prev = lru_tail;
    x.next = -1;
    (lru_tail >= 0 ? slots[lru_tail].next : lru_head) = s;
    lru_tail = s;
    x.in_lru = true;
  }

  // A free slot for a new entry (mu held): a never-used or released one, else the least recently
  // used RAM entry nobody is reading. -1 when every slot is busy.
  int32_t acquire(bool staging) {
    std::vector<int32_t>& free_list = staging ? free_staging : free_ram;
    if (!free_list.empty()) {
      int32_t s = free_list.back();
      free_list.pop_back();
      return s;
    }
    if (staging) return -1;
    for (int32_t s = lru_head; s >= 0; s = slots[s].next) {
      if (slots[s].busy > 0) continue;
      lru_unlink(s);
      map.erase(slots[s].key);
      slots[s].in_map = false;
      --stats.ram.blocks;
      return s;
    }
    return -1;
  }

  // Frees a staging slot once it is written and nobody reads it (mu held).
  void release_if_idle(int32_t s) {
    Slot& x = slots[s];
    if (!x.staging || x.busy > 0) return;
    if (x.in_map) map.erase(x.key);
    x.in_map = false;
    x.staging = false;
    free_staging.push_back(s);
  }

  // Puts bytes already in slot `s` (busy, filled) into the RAM tier (mu held).
  void publish_ram(int32_t s, const BlockHash& key) {
    Slot& x = slots[s];
    x.key = key;
    x.in_map = true;
    map[key] = s;
    lru_push_back(s);
    ++stats.ram.blocks;
  }

  void run();
  void run_load(const Job& job);
  void run_write(const Job& job);
};

Result<std::unique_ptr<KvTiers>> KvTiers::create(const KvTierConfig& config, KvStorage* pool) {
  STRATA_CHECK(pool != nullptr);
  if (!config.enabled()) return invalid_argument("no KV tier is configured");
  std::unique_ptr<KvTiers> t(new KvTiers());
  t->impl_ = std::make_unique<Impl>();
  Impl& m = *t->impl_;
  m.pool = pool;
  m.block_bytes = pool->block_bytes();
  m.num_ram_slots = config.ram_bytes / m.block_bytes;
  if (config.ram_bytes > 0 && m.num_ram_slots == 0)
    return invalid_argument("--kv-offloading-size " + std::to_string(config.ram_bytes) +
                            " bytes is smaller than one KV block (" +
                            std::to_string(m.block_bytes) + " bytes)");
  if (!config.disk_path.empty()) {
    // Checked before opening: open() evicts the directory's files down to the capacity, so a
    // size too small for one file would delete the whole cache on the way to this error.
    const int64_t file_bytes = DiskTier::file_bytes_for(m.block_bytes);
    if (config.disk_bytes < file_bytes)
      return invalid_argument("--kv-disk-size " + std::to_string(config.disk_bytes) +
                              " bytes is smaller than one KV block file (" +
                              std::to_string(file_bytes) + " bytes)");
    DiskTierConfig dc;
    dc.dir = config.disk_path;
    dc.fingerprint = config.fingerprint;
    dc.block_bytes = m.block_bytes;
    dc.capacity_bytes = config.disk_bytes;
    STRATA_ASSIGN_OR_RETURN(m.disk, DiskTier::open(dc));
  }
  const int64_t staging =
      m.disk != nullptr && m.num_ram_slots == 0 ? num_staging_slots(m.block_bytes) : 0;
  const int64_t total = m.num_ram_slots + staging;
  // Plain host memory, untouched until used; a GPU backend would pin it for its copy engine.
  m.arena.reset(new (std::nothrow) std::byte[static_cast<size_t>(total * m.block_bytes)]);
  if (m.arena == nullptr)
    return resource_exhausted("cannot allocate " + std::to_string(total * m.block_bytes) +
                              " bytes for the KV RAM tier");
  m.slots.resize(static_cast<size_t>(total));
  for (int64_t s = m.num_ram_slots - 1; s >= 0; --s) m.free_ram.push_back(static_cast<int32_t>(s));
  for (int64_t s = total - 1; s >= m.num_ram_slots; --s)
    m.free_staging.push_back(static_cast<int32_t>(s));
  m.stats.has_ram = m.num_ram_slots > 0;
  m.stats.has_disk = m.disk != nullptr;
  m.stats.block_bytes = m.block_bytes;
  m.stats.ram.capacity_blocks = m.num_ram_slots;
  m.scratch.resize(static_cast<size_t>(m.block_bytes));
  m.thread = std::thread([&m] { m.run(); });
  return t;
}

KvTiers::~KvTiers() {
  if (impl_ == nullptr) return;
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    impl_->stop = true;
  }
  impl_->work_cv.notify_all();
  if (impl_->thread.joinable()) impl_->thread.join();
}

int64_t KvTiers::block_bytes() const {
  return impl_->block_bytes;
}

Tier KvTiers::find(const BlockHash& key) const {
  const Impl& m = *impl_;
  {
    std::lock_guard<std::mutex> lock(m.mu);
    auto it = m.map.find(key);
    if (it != m.map.end()) return m.slots[it->second].staging ? Tier::kDisk : Tier::kRam;
  }
  if (m.disk != nullptr && m.disk->contains(key)) return Tier::kDisk;
  return Tier::kNone;
}

void KvTiers::store(BlockId block, const BlockHash& key) {
  Impl& m = *impl_;
  int32_t s;
  const bool to_ram = m.num_ram_slots > 0;
  {
    std::lock_guard<std::mutex> lock(m.mu);
    if (m.map.count(key)) return;  // already held (RAM, or on its way to disk)
    s = m.acquire(/*staging=*/!to_ram);
    if (s < 0) {
      ++m.stats.stores_dropped;
      return;
    }
    m.slots[s].busy = 1;  // being filled
    m.slots[s].key = key;
  }
  m.pool->copy_block_out(block, m.slot_data(s));
  bool queued = false;
  {
    std::lock_guard<std::mutex> lock(m.mu);
    Impl::Slot& x = m.slots[s];
    x.busy = 0;
    if (to_ram && m.map.count(key)) {
      // The transfer thread promoted the same key from disk while this thread copied: keep that
      // entry. Publishing a second one would leave two slots under one key, and evicting the
      // stale one later would unmap the live one.
      m.free_ram.push_back(s);
      return;
    }
    if (to_ram) {
      m.publish_ram(s, key);
      ++m.stats.ram.stores;
      m.stats.ram.bytes_in += m.block_bytes;
    }
    if (m.disk != nullptr && !m.disk->contains(key)) {
      if (!to_ram) {  // findable (as on disk) while it waits for the writer
        x.staging = true;
        x.in_map = true;
        m.map[key] = s;
      }
      ++x.busy;
      m.writes.push_back({Impl::JobKind::kWrite, block, key, s});
      queued = true;
    } else if (!to_ram) {
      m.free_staging.push_back(s);
    }
  }
  if (queued) m.work_cv.notify_one();
}

void KvTiers::load(BlockId block, const BlockHash& key) {
  Impl& m = *impl_;
  {
    std::lock_guard<std::mutex> lock(m.mu);
    ++m.loads_pending;
    auto it = m.map.find(key);
    if (it != m.map.end()) {
      const int32_t s = it->second;
      ++m.slots[s].busy;
      if (m.slots[s].in_lru) {  // a hit refreshes its place
        m.lru_unlink(s);
        m.lru_push_back(s);
      }
      m.loads.push_back({Impl::JobKind::kLoadSlot, block, key, s});
    } else if (m.disk != nullptr) {
      m.loads.push_back({Impl::JobKind::kLoadDisk, block, key, -1});
    } else {  // evicted since the scheduler looked
      --m.loads_pending;
      ++m.stats.loads;
      ++m.stats.load_failures;
      ++m.stats.load_missing;
      m.finished.push_back({block, false, Tier::kNone});
      return;
    }
  }
  m.work_cv.notify_one();
}

void KvTiers::Impl::run() {
  std::unique_lock<std::mutex> lock(mu);
  for (;;) {
    work_cv.wait(lock, [&] { return stop || !loads.empty() || !writes.empty(); });
    if (loads.empty() && writes.empty()) break;  // stopping, nothing left
    const bool is_load = !loads.empty();
    Job job = is_load ? loads.front() : writes.front();
    (is_load ? loads : writes).pop_front();
    ++jobs_running;
    lock.unlock();
    if (is_load)
      run_load(job);
    else
      run_write(job);
    lock.lock();
    --jobs_running;
    done_cv.notify_all();
  }
}

void KvTiers::Impl::run_load(const Job& job) {
  KvLoadResult r{job.block, false, Tier::kNone};
  if (job.kind == JobKind::kLoadSlot) {
    pool->copy_block_in(job.block, slot_data(job.slot));
    std::lock_guard<std::mutex> lock(mu);
    Slot& x = slots[job.slot];
    r.ok = true;
    r.tier = x.staging ? Tier::kDisk : Tier::kRam;
    KvTierUsage& u = x.staging ? stats.disk : stats.ram;
    ++u.hits;
    u.bytes_out += block_bytes;
    --x.busy;
    release_if_idle(job.slot);
    ++stats.loads;
    --loads_pending;
    finished.push_back(r);
    return;
  }
  Status st = disk->get(job.key, scratch);
  if (st.ok()) pool->copy_block_in(job.block, scratch.data());
  std::lock_guard<std::mutex> lock(mu);
  ++stats.loads;
  --loads_pending;
  if (!st.ok()) {
    ++stats.load_failures;
    if (st.code() == StatusCode::kNotFound)
      ++stats.load_missing;
    else if (st.code() == StatusCode::kDataLoss)
      ++stats.load_corrupt;
    else
      ++stats.load_io_errors;
    if (st.code() != StatusCode::kNotFound)
      STRATA_LOG(WARNING) << "KV disk tier: block " << to_string(job.key)
                          << " recomputed: " << st.message();
    finished.push_back(r);
    return;
  }
  r.ok = true;
  r.tier = Tier::kDisk;
  ++stats.disk.hits;
  stats.disk.bytes_out += block_bytes;
  // Promote into the RAM tier: the next hit is a memcpy.
  if (num_ram_slots > 0 && !map.count(job.key)) {
    const int32_t s = acquire(/*staging=*/false);
    if (s >= 0) {
      std::memcpy(slot_data(s), scratch.data(), static_cast<size_t>(block_bytes));
      publish_ram(s, job.key);
      stats.ram.bytes_in += block_bytes;
    }
  }
  finished.push_back(r);
}

void KvTiers::Impl::run_write(const Job& job) {
  Status st = disk->put(
      job.key, std::span<const std::byte>(slot_data(job.slot), static_cast<size_t>(block_bytes)));
  std::lock_guard<std::mutex> lock(mu);
  --slots[job.slot].busy;
  release_if_idle(job.slot);
  if (st.ok()) {
    ++stats.disk.stores;
    stats.disk.bytes_in += block_bytes;
    return;
  }
  ++stats.disk_write_failures;
  // One line for the first failure and then every 1000th: a full disk fails every write.
  if (stats.disk_write_failures % 1000 == 1)
    STRATA_LOG(WARNING) << "KV disk tier: cannot write a block (" << st.message()
                        << "); blocks stay in the tiers above, misses are recomputed ("
                        << stats.disk_write_failures << " failed writes so far)";
}

std::vector<KvLoadResult> KvTiers::take_finished_loads() {
  std::lock_guard<std::mutex> lock(impl_->mu);
  std::vector<KvLoadResult> out;
  out.swap(impl_->finished);
  return out;
}

void KvTiers::wait_for_loads() {
  std::unique_lock<std::mutex> lock(impl_->mu);
  impl_->done_cv.wait(lock, [&] { return impl_->loads_pending == 0; });
}

void KvTiers::flush() {
  std::unique_lock<std::mutex> lock(impl_->mu);
  impl_->done_cv.wait(lock, [&] {
    return impl_->loads.empty() && impl_->writes.empty() && impl_->jobs_running == 0;
  });
}

KvTierStats KvTiers::stats() const {
  const Impl& m = *impl_;
  KvTierStats s;
  {
    std::lock_guard<std::mutex> lock(m.mu);
    s = m.stats;
  }
  if (m.disk != nullptr) {
    DiskTierStats d = m.disk->stats();
    s.disk.blocks = d.blocks;
    s.disk.capacity_blocks = d.capacity_bytes / m.disk->file_bytes();
  }
  return s;
}

void KvTiers::set_disk_fault_hook(
    std::function<Status(const char* op, const std::string& path)> hook) {
  if (impl_->disk != nullptr) impl_->disk->set_fault_hook(std::move(hook));
}

}  // namespace strata::kv
