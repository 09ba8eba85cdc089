#include "kv/disk_tier.h"

#define XXH_STATIC_LINKING_ONLY
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <list>
#include <mutex>
#include <random>
#include <unordered_map>

#include "core/check.h"
#include "core/file_util.h"

namespace strata::kv {

// No fsync anywhere: the disk tier is a cache of values the engine can always recompute. A power
// loss may leave a renamed file whose data never reached the disk (zeros or a torn tail); its
// payload or header checksum then fails at get(), the file is removed and the block recomputed.
// Syncing every block would cost far more than the rare recompute.

namespace {

// File header, 64 bytes, every field little-endian:
//   0 magic "STRKVBLK"          8 version (u32)       12 header size (u32)
//  16 key.lo (u64)             24 key.hi (u64)       32 payload size (u64)
//  40 payload xxh3-128 low     48 payload xxh3-128 high
//  56 xxh3-64 of bytes 0..55
constexpr uint64_t kMagic = 0x4b4c42564b525453ull;  // "STRKVBLK" read little-endian
constexpr uint32_t kVersion = 1;
constexpr size_t kHeaderBytes = 64;
constexpr size_t kHeaderChecked = 56;  // bytes covered by the header checksum
constexpr int64_t kStaleTempSeconds = 60;
constexpr const char* kTempPrefix = "tmp-";
constexpr const char* kSuffix = ".kvb";

void store_le32(unsigned char* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<unsigned char>(v >> (8 * i));
}
void store_le64(unsigned char* p, uint64_t v) {
  for (int i = 0; i < 8; ++i) p[i] = static_cast<unsigned char>(v >> (8 * i));
}
uint32_t load_le32(const unsigned char* p) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v |= static_cast<uint32_t>(p[i]) << (8 * i);
  return v;
}
uint64_t load_le64(const unsigned char* p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= static_cast<uint64_t>(p[i]) << (8 * i);
  return v;
}

void encode_header(const BlockHash& key, std::span<const std::byte> payload, unsigned char* out) {
  const XXH128_hash_t sum = XXH3_128bits(payload.data(), payload.size());
  store_le64(out + 0, kMagic);
  store_le32(out + 8, kVersion);
  store_le32(out + 12, static_cast<uint32_t>(kHeaderBytes));
  store_le64(out + 16, key.lo);
  store_le64(out + 24, key.hi);
  store_le64(out + 32, payload.size());
  store_le64(out + 40, sum.low64);
  store_le64(out + 48, sum.high64);
  store_le64(out + 56, XXH3_64bits(out, kHeaderChecked));
}

std::string errno_message(int err) {
  return std::strerror(err);
}

// kResourceExhausted for a full disk or quota, kInternal for any other I/O error.
Status io_error(const std::string& what, const std::string& path, int err) {
  const std::string m = "disk tier: cannot " + what + " '" + path + "': " + errno_message(err);
  if (err == ENOSPC || err == EDQUOT) return resource_exhausted(m);
  return internal_error(m);
}

bool is_lower_hex(char c) {
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
}

uint64_t parse_hex64(const char* p) {
  uint64_t v = 0;
  for (int i = 0; i < 16; ++i) v = (v << 4) | (p[i] <= '9' ? p[i] - '0' : p[i] - 'a' + 10);
  return v;
}

// "<32 lowercase hex>.kvb" -> key.
bool parse_block_name(const char* name, BlockHash* key) {
  const size_t n = std::strlen(name);
  if (n != 32 + std::strlen(kSuffix) || std::strcmp(name + 32, kSuffix) != 0) return false;
  for (int i = 0; i < 32; ++i)
    if (!is_lower_hex(name[i])) return false;
  key->hi = parse_hex64(name);
  key->lo = parse_hex64(name + 16);
  return true;
}

bool is_temp_name(const char* name) {
  return std::strncmp(name, kTempPrefix, std::strlen(kTempPrefix)) == 0;
}

// Writes all of `data` at `offset`, retrying short writes and EINTR. Returns 0 or an errno.
int pwrite_all(int fd, const void* data, size_t size, off_t offset) {
  const char* p = static_cast<const char*>(data);
  while (size > 0) {
    const ssize_t n = ::pwrite(fd, p, size, offset);
    if (n < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    if (n == 0) return EIO;
    p += n;
    size -= static_cast<size_t>(n);
    offset += n;
  }
  return 0;
}

// Reads up to `size` bytes at `offset`, retrying short reads and EINTR; *got is the number read
// (less than size only at end of file). Returns 0 or an errno.
int pread_all(int fd, void* data, size_t size, off_t offset, size_t* got) {
  char* p = static_cast<char*>(data);
  *got = 0;
  while (*got < size) {
    const ssize_t n = ::pread(fd, p + *got, size - *got, offset + static_cast<off_t>(*got));
    if (n < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    if (n == 0) break;
    *got += static_cast<size_t>(n);
  }
  return 0;
}

// Closes `fd` on scope exit.
class FdCloser {
 public:
  explicit FdCloser(int fd) : fd_(fd) {}
  ~FdCloser() {
    if (fd_ >= 0) ::close(fd_);
  }
  FdCloser(const FdCloser&) = delete;
  FdCloser& operator=(const FdCloser&) = delete;
  // Closes now and returns 0 or the errno of close().
  int close_now() {
    const int fd = fd_;
    fd_ = -1;
    return ::close(fd) == 0 ? 0 : errno;
  }

 private:
  int fd_;
};

// A per-process counter shared by every instance, so two DiskTiers in one process never pick
// the same temporary name.
std::atomic<uint64_t> g_temp_counter{0};

Status mkdir_p(const std::string& path) {
  std::string prefix;
  size_t pos = 0;
  while (pos <= path.size()) {
    size_t next = path.find('/', pos);
    if (next == std::string::npos) next = path.size();
    prefix = path.substr(0, next);
    pos = next + 1;
    if (prefix.empty()) continue;  // leading '/'
    if (::mkdir(prefix.c_str(), 0755) != 0 && errno != EEXIST) {
      const int err = errno;
      return invalid_argument("disk tier: cannot create directory '" + prefix +
                              "': " + errno_message(err));
    }
    struct stat st;
    if (::stat(prefix.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
      return invalid_argument("disk tier: cannot create directory '" + path + "': '" + prefix +
                              "' exists and is not a directory");
  }
  return ok_status();
}

struct DirCloser {
  DIR* d;
  ~DirCloser() {
    if (d != nullptr) ::closedir(d);
  }
};

}  // namespace

struct DiskTier::Impl {
  std::string root;  // <dir>/<fingerprint>
  int64_t file_bytes = 0;
  uint64_t nonce = 0;  // random per instance, part of temporary names

  mutable std::mutex mu;
  // LRU order, least recently used first, and key -> position in it.
  std::list<BlockHash> lru;
  std::unordered_map<BlockHash, std::list<BlockHash>::iterator, BlockHashHasher> index;
  int64_t pending_bytes = 0;  // files being written by put() calls in flight
  DiskTierStats stats;
  std::shared_ptr<const FaultHook> hook;

  int64_t indexed_bytes_locked() const { return static_cast<int64_t>(index.size()) * file_bytes; }

  // Drops LRU keys (never `keep`) into `victims` until the indexed bytes, the bytes in flight and
  // `incoming` fit in `capacity`.
  void evict_locked(int64_t capacity, int64_t incoming, const BlockHash* keep,
                    std::vector<BlockHash>* victims) {
    auto it = lru.begin();
    while (indexed_bytes_locked() + pending_bytes + incoming > capacity && it != lru.end()) {
      if (keep != nullptr && *it == *keep) {
        ++it;
        continue;
      }
      victims->push_back(*it);
      index.erase(*it);
      it = lru.erase(it);
      ++stats.evictions;
    }
  }

  // Makes `key` the most recently used entry, inserting it when absent.
  void touch_locked(const BlockHash& key) {
    auto found = index.find(key);
    if (found != index.end()) {
      lru.splice(lru.end(), lru, found->second);
    } else {
      index.emplace(key, lru.insert(lru.end(), key));
    }
  }

  void erase_locked(const BlockHash& key) {
    auto found = index.find(key);
    if (found == index.end()) return;
    lru.erase(found->second);
    index.erase(found);
  }

  Status fault(const char* op, const std::string& path) const {
    std::shared_ptr<const FaultHook> h;
    {
      std::lock_guard<std::mutex> lock(mu);
      h = hook;
    }
    if (h == nullptr || !*h) return ok_status();
    Status st = (*h)(op, path);
    if (st.ok()) return st;
    return st.with_context(std::string("disk tier: cannot ") + op + " '" + path + "'");
  }

  std::string temp_name() const {
    const uint64_t n = g_temp_counter.fetch_add(1, std::memory_order_relaxed);
    char buf[96];
    std::snprintf(buf, sizeof(buf), "%s%ld-%llu-%016llx", kTempPrefix,
                  static_cast<long>(::getpid()), static_cast<unsigned long long>(n),
                  static_cast<unsigned long long>(nonce ^ (n * 0x9e3779b97f4a7c15ull)));
    return buf;
  }
};

DiskTier::DiskTier(const DiskTierConfig& config) : config_(config), impl_(new Impl) {}

DiskTier::~DiskTier() = default;

int64_t DiskTier::file_bytes() const {
  return file_bytes_for(config_.block_bytes);
}

int64_t DiskTier::file_bytes_for(int64_t block_bytes) {
  return static_cast<int64_t>(kHeaderBytes) + block_bytes;
}

std::string DiskTier::path_of(const BlockHash& key) const {
  const std::string hex = to_string(key);
  return impl_->root + "/" + hex.substr(0, 2) + "/" + hex + kSuffix;
}

Result<std::unique_ptr<DiskTier>> DiskTier::open(const DiskTierConfig& config) {
  if (config.dir.empty())
    return invalid_argument("disk tier: the cache directory is empty; give a directory path");
  if (config.fingerprint.empty() || config.fingerprint.size() > 64)
    return invalid_argument("disk tier: the fingerprint '" + config.fingerprint +
                            "' must be 1 to " + "64 characters long (it has " +
                            std::to_string(config.fingerprint.size()) + ")");
  for (char c : config.fingerprint) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || c == '_' || c == '-'))
      return invalid_argument("disk tier: the fingerprint '" + config.fingerprint +
                              "' may contain only lowercase letters, digits, '_' and '-'");
  }
  if (config.block_bytes <= 0)
    return invalid_argument("disk tier: the block size must be positive (got " +
                            std::to_string(config.block_bytes) + " bytes)");
  if (config.capacity_bytes <= 0)
    return invalid_argument("disk tier: the capacity must be positive (got " +
                            std::to_string(config.capacity_bytes) + " bytes)");

  std::unique_ptr<DiskTier> tier(new DiskTier(config));
  Impl& impl = *tier->impl_;
  impl.root = path_join(config.dir, config.fingerprint);
  impl.file_bytes = tier->file_bytes();
  impl.stats.capacity_bytes = config.capacity_bytes;
  impl.nonce = (static_cast<uint64_t>(std::random_device{}()) << 32) ^ std::random_device{}();

  STRATA_RETURN_IF_ERROR(mkdir_p(impl.root));

  // Writability probe: a directory we can list but not write would fail every put().
  {
    const std::string probe = impl.root + "/" + impl.temp_name() + ".probe";
    const int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0) {
      const int err = errno;
      return invalid_argument("disk tier: the directory '" + impl.root +
                              "' is not writable: " + errno_message(err));
    }
    ::close(fd);
    ::unlink(probe.c_str());
  }

  struct timespec now_ts;
  ::clock_gettime(CLOCK_REALTIME, &now_ts);
  const int64_t now = now_ts.tv_sec;
  auto remove_if_stale_temp = [&](const std::string& path, const struct stat& st) {
    if (now - static_cast<int64_t>(st.st_mtim.tv_sec) > kStaleTempSeconds) ::unlink(path.c_str());
  };

  struct Found {
    struct timespec mtime;
    BlockHash key;
  };
  std::vector<Found> found;

  DirCloser top{::opendir(impl.root.c_str())};
  if (top.d == nullptr) {
    const int err = errno;
    return invalid_argument("disk tier: cannot read directory '" + impl.root +
                            "': " + errno_message(err));
  }
  while (const struct dirent* e = ::readdir(top.d)) {
    const std::string name = e->d_name;
    const std::string path = impl.root + "/" + name;
    struct stat st;
    if (::lstat(path.c_str(), &st) != 0) continue;  // removed meanwhile
    if (S_ISREG(st.st_mode) && is_temp_name(name.c_str())) {
      remove_if_stale_temp(path, st);
      continue;
    }
    if (!S_ISDIR(st.st_mode) || name.size() != 2 || !is_lower_hex(name[0]) ||
        !is_lower_hex(name[1]))
      continue;
    DirCloser sub{::opendir(path.c_str())};
    if (sub.d == nullptr) {
      const int err = errno;
      return invalid_argument("disk tier: cannot read directory '" + path +
                              "': " + errno_message(err));
    }
    while (const struct dirent* f = ::readdir(sub.d)) {
      const std::string file = path + "/" + f->d_name;
      struct stat fst;
      if (::lstat(file.c_str(), &fst) != 0 || !S_ISREG(fst.st_mode)) continue;
      if (is_temp_name(f->d_name)) {
        remove_if_stale_temp(file, fst);
        continue;
      }
      BlockHash key;
      // A block file in the wrong subdirectory is not ours to manage: path_of() never names it.
      if (!parse_block_name(f->d_name, &key) || std::strncmp(f->d_name, name.c_str(), 2) != 0)
        continue;
      if (fst.st_size != impl.file_bytes) {
        ::unlink(file.c_str());  // another block size, or a file torn before it was renamed
        continue;
      }
      found.push_back(Found{fst.st_mtim, key});
    }
  }

  // Oldest first; ties (coarse mtime granularity) broken by key so the order is deterministic.
  std::sort(found.begin(), found.end(), [](const Found& a, const Found& b) {
    if (a.mtime.tv_sec != b.mtime.tv_sec) return a.mtime.tv_sec < b.mtime.tv_sec;
    if (a.mtime.tv_nsec != b.mtime.tv_nsec) return a.mtime.tv_nsec < b.mtime.tv_nsec;
    if (a.key.hi != b.key.hi) return a.key.hi < b.key.hi;
    return a.key.lo < b.key.lo;
  });
  std::vector<BlockHash> victims;
  for (const Found& f : found) impl.touch_locked(f.key);  // no other thread sees `impl` yet
  impl.evict_locked(config.capacity_bytes, 0, nullptr, &victims);
  for (const BlockHash& v : victims) ::unlink(tier->path_of(v).c_str());
  return tier;
}

bool DiskTier::contains(const BlockHash& key) const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->index.count(key) > 0;
}

Status DiskTier::put(const BlockHash& key, std::span<const std::byte> payload) {
  STRATA_CHECK_EQ(static_cast<int64_t>(payload.size()), config_.block_bytes);
  Impl& impl = *impl_;
  const int64_t fb = impl.file_bytes;
  const std::string path = path_of(key);
  if (fb > config_.capacity_bytes) {
    std::lock_guard<std::mutex> lock(impl.mu);
    ++impl.stats.put_failures;
    return resource_exhausted("disk tier: a block file (" + std::to_string(fb) +
                              " bytes) is larger than the disk tier capacity (" +
                              std::to_string(config_.capacity_bytes) + " bytes)");
  }

  // Make room first (a rewrite of a present key needs none for itself), and reserve the new
  // file's bytes so that concurrent put() calls do not overshoot together.
  std::vector<BlockHash> victims;
  {
    std::lock_guard<std::mutex> lock(impl.mu);
    const int64_t credit = impl.index.count(key) > 0 ? fb : 0;
    impl.evict_locked(config_.capacity_bytes, fb - credit, &key, &victims);
    impl.pending_bytes += fb;
  }
  for (const BlockHash& v : victims) ::unlink(path_of(v).c_str());
  victims.clear();

  const std::string dir = path.substr(0, path.rfind('/'));
  const std::string temp = dir + "/" + impl.temp_name();
  Status st = [&]() -> Status {
    STRATA_RETURN_IF_ERROR(impl.fault("open", temp));
    int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0 && errno == ENOENT) {
      // First block of this subdirectory (or the directory was removed under us).
      if (::mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) {
        const int err = errno;
        return io_error("create", dir, err);
      }
      fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    }
    if (fd < 0) {
      const int err = errno;
      return io_error("create", temp, err);
    }
    FdCloser closer(fd);
    STRATA_RETURN_IF_ERROR(impl.fault("write", temp));
    unsigned char header[kHeaderBytes];
    encode_header(key, payload, header);
    if (int err = pwrite_all(fd, header, sizeof(header), 0)) return io_error("write", temp, err);
    if (int err = pwrite_all(fd, payload.data(), payload.size(), kHeaderBytes))
      return io_error("write", temp, err);
    if (int err = closer.close_now()) return io_error("write", temp, err);
    STRATA_RETURN_IF_ERROR(impl.fault("rename", path));
    if (::rename(temp.c_str(), path.c_str()) != 0) {
      const int err = errno;
      return io_error("rename to", path, err);
    }
    return ok_status();
  }();
  if (!st.ok()) {
    ::unlink(temp.c_str());
    ::unlink(path.c_str());  // an older version of the block must not outlive its index entry
  }

  {
    std::lock_guard<std::mutex> lock(impl.mu);
    impl.pending_bytes -= fb;
    if (st.ok()) {
      impl.touch_locked(key);
      ++impl.stats.puts;
      impl.stats.bytes_written += static_cast<int64_t>(payload.size());
      // Concurrent put() calls may have reserved past the capacity when nothing was left to evict.
      impl.evict_locked(config_.capacity_bytes, 0, &key, &victims);
    } else {
      impl.erase_locked(key);
      ++impl.stats.put_failures;
    }
  }
  for (const BlockHash& v : victims) ::unlink(path_of(v).c_str());
  return st;
}

Status DiskTier::get(const BlockHash& key, std::span<std::byte> out) {
  STRATA_CHECK_EQ(static_cast<int64_t>(out.size()), config_.block_bytes);
  Impl& impl = *impl_;
  {
    std::lock_guard<std::mutex> lock(impl.mu);
    if (impl.index.count(key) == 0)
      return not_found("disk tier: block " + to_string(key) + " is not cached");
  }
  const std::string path = path_of(key);

  enum class Outcome { kOk, kMissing, kCorrupt, kIoError };
  Outcome outcome = Outcome::kOk;
  struct stat opened {};  // the inode read, so a corrupt file is removed only if still in place
  Status st = [&]() -> Status {
    if (Status f = impl.fault("open", path); !f.ok()) {
      outcome = Outcome::kIoError;
      return f;
    }
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
      const int err = errno;
      if (err == ENOENT) {
        outcome = Outcome::kMissing;
        return not_found("disk tier: block file '" + path + "' is gone");
      }
      outcome = Outcome::kIoError;
      return io_error("open", path, err);
    }
    FdCloser closer(fd);
    auto corrupt = [&](const std::string& why) {
      outcome = Outcome::kCorrupt;
      return data_loss("disk tier: block file '" + path + "' is corrupt (" + why +
                       "); it was removed");
    };
    if (::fstat(fd, &opened) != 0) {
      const int err = errno;
      outcome = Outcome::kIoError;
      return io_error("stat", path, err);
    }
    if (opened.st_size != impl.file_bytes)
      return corrupt("size " + std::to_string(opened.st_size) + " bytes, expected " +
                     std::to_string(impl.file_bytes));
    if (Status f = impl.fault("read", path); !f.ok()) {
      outcome = Outcome::kIoError;
      return f;
    }
    unsigned char h[kHeaderBytes];
    size_t got = 0;
    if (int err = pread_all(fd, h, sizeof(h), 0, &got)) {
      outcome = Outcome::kIoError;
      return io_error("read", path, err);
    }
    if (got < sizeof(h)) return corrupt("truncated header");
    if (load_le64(h) != kMagic) return corrupt("not a Strata KV block file");
    if (load_le64(h + 56) != XXH3_64bits(h, kHeaderChecked))
      return corrupt("header checksum mismatch");
    if (load_le32(h + 8) != kVersion)
      return corrupt("format version " + std::to_string(load_le32(h + 8)) + ", expected " +
                     std::to_string(kVersion));
    if (load_le32(h + 12) != kHeaderBytes) return corrupt("unexpected header size");
    if (load_le64(h + 16) != key.lo || load_le64(h + 24) != key.hi)
      return corrupt("it holds another block");
    if (load_le64(h + 32) != static_cast<uint64_t>(config_.block_bytes))
      return corrupt("payload size " + std::to_string(load_le64(h + 32)) + ", expected " +
                     std::to_string(config_.block_bytes));
    if (int err = pread_all(fd, out.data(), out.size(), kHeaderBytes, &got)) {
      outcome = Outcome::kIoError;
      return io_error("read", path, err);
    }
    if (got < out.size()) return corrupt("truncated payload");
    const XXH128_hash_t sum = XXH3_128bits(out.data(), out.size());
    if (sum.low64 != load_le64(h + 40) || sum.high64 != load_le64(h + 48))
      return corrupt("payload checksum mismatch");
    // Record the use in the file, so the LRU order survives a restart. Failing to (a read-only
    // directory) only costs that order, not the block.
    ::futimens(fd, nullptr);
    return ok_status();
  }();

  if (outcome == Outcome::kCorrupt) {
    // Another server may have replaced the file with a good one since it was opened.
    struct stat now;
    if (::stat(path.c_str(), &now) == 0 && now.st_ino == opened.st_ino &&
        now.st_dev == opened.st_dev)
      ::unlink(path.c_str());
  }
  std::lock_guard<std::mutex> lock(impl.mu);
  switch (outcome) {
    case Outcome::kOk:
      ++impl.stats.gets;
      impl.stats.bytes_read += static_cast<int64_t>(out.size());
      // A concurrent remove() or eviction wins: the key is not put back.
      if (auto it = impl.index.find(key); it != impl.index.end())
        impl.lru.splice(impl.lru.end(), impl.lru, it->second);
      return st;
    case Outcome::kMissing:
      ++impl.stats.get_missing;
      break;
    case Outcome::kCorrupt:
      ++impl.stats.get_corrupt;
      break;
    case Outcome::kIoError:
      ++impl.stats.get_io_errors;
      break;
  }
  impl.erase_locked(key);
  return st;
}

void DiskTier::remove(const BlockHash& key) {
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    impl_->erase_locked(key);
  }
  ::unlink(path_of(key).c_str());
}

DiskTierStats DiskTier::stats() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  DiskTierStats s = impl_->stats;
  s.blocks = static_cast<int64_t>(impl_->index.size());
  s.bytes = impl_->indexed_bytes_locked();
  return s;
}

std::vector<BlockHash> DiskTier::keys() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return std::vector<BlockHash>(impl_->lru.begin(), impl_->lru.end());
}

void DiskTier::set_fault_hook(FaultHook hook) {
  auto h = hook ? std::make_shared<const FaultHook>(std::move(hook)) : nullptr;
  std::lock_guard<std::mutex> lock(impl_->mu);
  impl_->hook = std::move(h);
}

}  // namespace strata::kv
