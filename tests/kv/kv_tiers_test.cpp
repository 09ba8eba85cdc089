// KvStorage's block copies and the KV tiers (kv/kv_tiers.h) on a small real pool, for every cache
// dtype with and without V.
#include "kv/kv_tiers.h"

#include <gtest/gtest.h>

#include <stdlib.h>

#include <cctype>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <ostream>
#include <string>
#include <vector>

#include "core/rng.h"
#include "kv/kv_storage.h"

namespace strata::kv {

// Readable failures (found by argument-dependent lookup, hence outside the unnamed namespace).
void PrintTo(Tier t, std::ostream* os) {
  *os << tier_name(t);
}
void PrintTo(const KvLoadResult& r, std::ostream* os) {
  *os << "{block " << r.block << ", " << (r.ok ? "ok" : "failed") << ", " << tier_name(r.tier)
      << "}";
}

namespace {

namespace fs = std::filesystem;
using Bytes = std::vector<std::byte>;

constexpr int64_t kHeaderBytes = 64;  // disk_tier.h: the block file's fixed header

struct StorageParam {
  DType dtype;
  bool has_v;
};

std::string param_name(const ::testing::TestParamInfo<StorageParam>& info) {
  std::string n = dtype_name(info.param.dtype);
  for (char& c : n)
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  return n + (info.param.has_v ? "_kv" : "_k_only");
}

const std::vector<StorageParam> kAllParams = {
    {DType::kF32, true}, {DType::kF32, false}, {DType::kBF16, true},   {DType::kBF16, false},
    {DType::kF16, true}, {DType::kF16, false}, {DType::kF8E4M3, true}, {DType::kF8E4M3, false},
};

KvStorageSpec small_spec(const StorageParam& p) {
  KvStorageSpec s;
  s.num_layers = 2;
  s.num_blocks = 8;
  s.block_size = 4;
  s.num_kv_heads = 2;
  s.head_dim = 8;
  s.dtype = p.dtype;
  s.has_v = p.has_v;
  return s;
}

Bytes random_bytes(uint64_t seed, int64_t n) {
  Rng rng(seed * 0x9e3779b97f4a7c15ull + 1);
  Bytes b(static_cast<size_t>(n));
  for (auto& x : b) x = static_cast<std::byte>(rng.next_u64());
  return b;
}

BlockHash key(int i) {
  const int32_t t[2] = {i, 7};
  return hash_block(root_block_hash(), t, "tiers");
}

// The reference gather, written from the layout kv_storage.h documents: per layer K values
// [num_blocks][heads][block_size][head_dim], then V values, then (fp8) K and V row scales
// [num_blocks][heads][block_size] f32. Returns the (offset, length) pieces of `block` in the
// storage's one allocation, in the packed order.
std::vector<std::pair<int64_t, int64_t>> block_pieces(KvStorage& s, int64_t block) {
  const KvStorageSpec& sp = s.spec();
  const int64_t rows = sp.num_kv_heads * sp.block_size;
  const int64_t row_bytes = sp.head_dim * dtype_block_bytes(sp.dtype);
  std::byte* base = s.k(0);
  std::vector<std::pair<int64_t, int64_t>> out;
  for (int64_t l = 0; l < sp.num_layers; ++l) {
    out.push_back({s.k(l) + block * rows * row_bytes - base, rows * row_bytes});
    if (sp.has_v) out.push_back({s.v(l) + block * rows * row_bytes - base, rows * row_bytes});
    if (sp.has_row_scales()) {
      auto at = [&](float* f) { return reinterpret_cast<std::byte*>(f + block * rows) - base; };
      out.push_back({at(s.k_scales(l)), rows * 4});
      if (sp.has_v) out.push_back({at(s.v_scales(l)), rows * 4});
    }
  }
  return out;
}

Bytes reference_gather(KvStorage& s, int64_t block) {
  Bytes out;
  for (auto [off, len] : block_pieces(s, block))
    out.insert(out.end(), s.k(0) + off, s.k(0) + off + len);
  return out;
}

Bytes whole(KvStorage& s) {
  return Bytes(s.k(0), s.k(0) + s.bytes());
}

class KvStorageCopyTest : public ::testing::TestWithParam<StorageParam> {};

TEST_P(KvStorageCopyTest, LayoutPiecesTileTheWholeAllocation) {
  auto s = KvStorage::allocate(small_spec(GetParam()));
  ASSERT_TRUE(s.ok()) << s.status().to_string();
  // Every byte of the pool belongs to exactly one block's packed copy.
  std::vector<int> owner(static_cast<size_t>(s->bytes()), -1);
  int64_t total = 0;
  for (int64_t b = 0; b < s->spec().num_blocks; ++b) {
    for (auto [off, len] : block_pieces(*s, b)) {
      ASSERT_GE(off, 0);
      ASSERT_LE(off + len, s->bytes());
      for (int64_t i = off; i < off + len; ++i) {
        ASSERT_EQ(owner[static_cast<size_t>(i)], -1) << "byte " << i << " of two blocks";
        owner[static_cast<size_t>(i)] = static_cast<int>(b);
      }
      total += len;
    }
  }
  EXPECT_EQ(total, s->bytes());
  EXPECT_EQ(s->block_bytes() * s->spec().num_blocks, s->bytes());
}

TEST_P(KvStorageCopyTest, CopyOutAndInRoundTripAndTouchOnlyTheirBlock) {
  auto s = KvStorage::allocate(small_spec(GetParam()));
  ASSERT_TRUE(s.ok()) << s.status().to_string();
  const int64_t n = s->block_bytes();
  const int64_t blocks = s->spec().num_blocks;
  for (int64_t b = 0; b < blocks; ++b) s->copy_block_in(b, random_bytes(100 + b, n).data());
  for (int64_t b = 0; b < blocks; ++b) {
    EXPECT_EQ(reference_gather(*s, b), random_bytes(100 + b, n)) << "block " << b;
    Bytes out(static_cast<size_t>(n));
    s->copy_block_out(b, out.data());
    EXPECT_EQ(out, random_bytes(100 + b, n)) << "block " << b;
  }

  // copy_block_out leaves the pool alone; copy_block_in of block b changes block b only.
  const Bytes before = whole(*s);
  Bytes out(static_cast<size_t>(n));
  s->copy_block_out(3, out.data());
  EXPECT_EQ(whole(*s), before);
  const Bytes fresh = random_bytes(999, n);
  s->copy_block_in(3, fresh.data());
  const Bytes after = whole(*s);
  std::vector<bool> in_block(after.size(), false);
  for (auto [off, len] : block_pieces(*s, 3))
    for (int64_t i = off; i < off + len; ++i) in_block[static_cast<size_t>(i)] = true;
  for (size_t i = 0; i < after.size(); ++i) {
    if (!in_block[i]) {
      ASSERT_EQ(after[i], before[i]) << "byte " << i << " outside block 3";
    }
  }
  EXPECT_EQ(reference_gather(*s, 3), fresh);
  for (int64_t b = 0; b < blocks; ++b) {
    if (b != 3) {
      EXPECT_EQ(reference_gather(*s, b), random_bytes(100 + b, n)) << "block " << b;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(AllDtypes, KvStorageCopyTest, ::testing::ValuesIn(kAllParams), param_name);

class KvTiersTest : public ::testing::TestWithParam<StorageParam> {
 protected:
  void SetUp() override {
    auto s = KvStorage::allocate(small_spec(GetParam()));
    ASSERT_TRUE(s.ok()) << s.status().to_string();
    pool_ = std::move(s).value();
    std::string tmpl = ::testing::TempDir() + "/kv_tiers_XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { fs::remove_all(dir_); }

  int64_t block_bytes() const { return pool_.block_bytes(); }
  int64_t file_bytes() const { return kHeaderBytes + block_bytes(); }
  // Content-addressed: key i always stands for the same bytes.
  Bytes content(int i) const { return random_bytes(5000 + i, block_bytes()); }
  void fill(BlockId block, int i) { pool_.copy_block_in(block, content(i).data()); }
  void scribble(BlockId block) {
    pool_.copy_block_in(block, random_bytes(1, block_bytes()).data());
  }
  Bytes block_of(BlockId block) {
    Bytes b(static_cast<size_t>(block_bytes()));
    pool_.copy_block_out(block, b.data());
    return b;
  }

  KvTierConfig ram_config(int64_t blocks) const {
    KvTierConfig c;
    c.ram_bytes = blocks * block_bytes();
    return c;
  }
  KvTierConfig disk_config(int64_t files) const {
    KvTierConfig c;
    c.disk_path = dir_ + "/disk";
    c.disk_bytes = files * file_bytes();
    c.fingerprint = "test";
    return c;
  }
  std::unique_ptr<KvTiers> make(const KvTierConfig& c) {
    auto t = KvTiers::create(c, &pool_);
    EXPECT_TRUE(t.ok()) << t.status().to_string();
    return t.ok() ? std::move(t).value() : nullptr;
  }
  std::string file_of(int i) const {
    const std::string hex = to_string(key(i));
    return dir_ + "/disk/test/" + hex.substr(0, 2) + "/" + hex + ".kvb";
  }
  // Loads key i into `block` and waits; returns the one result.
  KvLoadResult load_now(KvTiers& t, BlockId block, int i) {
    t.load(block, key(i));
    t.wait_for_loads();
    std::vector<KvLoadResult> r = t.take_finished_loads();
    EXPECT_EQ(r.size(), 1u);
    return r.empty() ? KvLoadResult{} : r[0];
  }

  KvStorage pool_;
  std::string dir_;
};

// A disk fault hook failing every `op` ("write", "read") as an I/O error would.
std::function<Status(const char*, const std::string&)> fail_on(std::string op) {
  return [op](const char* o, const std::string&) {
    return op == o ? internal_error("injected " + op + " failure") : ok_status();
  };
}

TEST_P(KvTiersTest, RamTierKeepsACopyMadeAtStore) {
  auto t = make(ram_config(4));
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->block_bytes(), block_bytes());
  EXPECT_EQ(t->find(key(1)), Tier::kNone);
  fill(1, 1);
  t->store(1, key(1));
  scribble(1);  // the step may overwrite the pool block right after the store
  EXPECT_EQ(t->find(key(1)), Tier::kRam);
  EXPECT_EQ(load_now(*t, 2, 1), (KvLoadResult{2, true, Tier::kRam}));
  EXPECT_EQ(block_of(2), content(1));
  EXPECT_EQ(load_now(*t, 1, 1), (KvLoadResult{1, true, Tier::kRam}));
  EXPECT_EQ(block_of(1), content(1));
  EXPECT_TRUE(t->take_finished_loads().empty());
  const KvTierStats st = t->stats();
  EXPECT_TRUE(st.has_ram);
  EXPECT_FALSE(st.has_disk);
  EXPECT_EQ(st.block_bytes, block_bytes());
  EXPECT_EQ(st.ram.blocks, 1);
  EXPECT_EQ(st.ram.capacity_blocks, 4);
  EXPECT_EQ(st.ram.stores, 1);
  EXPECT_EQ(st.ram.hits, 2);
  EXPECT_EQ(st.ram.bytes_in, block_bytes());
  EXPECT_EQ(st.ram.bytes_out, 2 * block_bytes());
  EXPECT_EQ(st.loads, 2);
  EXPECT_EQ(st.load_failures, 0);
}

TEST_P(KvTiersTest, RamTierEvictsTheLeastRecentlyUsedAndALoadRefreshes) {
  auto t = make(ram_config(3));
  ASSERT_NE(t, nullptr);
  for (int i = 0; i < 3; ++i) {
    fill(1 + i, i);
    t->store(1 + i, key(i));
  }
  // Key 0 is the oldest; loading it makes key 1 the least recently used.
  EXPECT_TRUE(load_now(*t, 5, 0).ok);
  fill(4, 3);
  t->store(4, key(3));
  EXPECT_EQ(t->find(key(1)), Tier::kNone);
  for (int i : {0, 2, 3}) EXPECT_EQ(t->find(key(i)), Tier::kRam) << i;
  EXPECT_EQ(t->stats().ram.blocks, 3);

  // Next victim: key 2.
  fill(4, 4);
  t->store(4, key(4));
  EXPECT_EQ(t->find(key(2)), Tier::kNone);
  for (int i : {0, 3, 4}) EXPECT_EQ(t->find(key(i)), Tier::kRam) << i;

  // An evicted and an unknown key fail; the others still load their bytes.
  EXPECT_EQ(load_now(*t, 6, 1), (KvLoadResult{6, false, Tier::kNone}));
  EXPECT_EQ(load_now(*t, 6, 77), (KvLoadResult{6, false, Tier::kNone}));
  for (int i : {0, 3, 4}) {
    ASSERT_TRUE(load_now(*t, 7, i).ok) << i;
    EXPECT_EQ(block_of(7), content(i)) << i;
  }
  const KvTierStats st = t->stats();
  EXPECT_EQ(st.load_failures, 2);
  EXPECT_EQ(st.load_missing, 2);
  EXPECT_EQ(st.loads, 6);
  EXPECT_EQ(st.ram.stores, 5);
}

TEST_P(KvTiersTest, StoringAHeldKeyAgainChangesNothing) {
  auto t = make(ram_config(2));
  ASSERT_NE(t, nullptr);
  fill(1, 1);
  t->store(1, key(1));
  t->store(1, key(1));
  EXPECT_EQ(t->stats().ram.blocks, 1);
  EXPECT_EQ(t->stats().ram.stores, 1);
}

TEST_P(KvTiersTest, DiskTierServesBlocksAndSurvivesARestart) {
  {
    auto t = make(disk_config(16));
    ASSERT_NE(t, nullptr);
    EXPECT_FALSE(t->stats().has_ram);
    EXPECT_TRUE(t->stats().has_disk);
    for (int i = 0; i < 3; ++i) {
      fill(1 + i, i);
      t->store(1 + i, key(i));
      scribble(1 + i);
    }
    t->flush();
    for (int i = 0; i < 3; ++i) {
      EXPECT_EQ(t->find(key(i)), Tier::kDisk) << i;
      EXPECT_TRUE(fs::exists(file_of(i))) << file_of(i);
      EXPECT_EQ(static_cast<int64_t>(fs::file_size(file_of(i))), file_bytes());
    }
    EXPECT_EQ(load_now(*t, 5, 1), (KvLoadResult{5, true, Tier::kDisk}));
    EXPECT_EQ(block_of(5), content(1));
    const KvTierStats st = t->stats();
    EXPECT_EQ(st.disk.stores, 3);
    EXPECT_EQ(st.disk.blocks, 3);
    EXPECT_EQ(st.disk.capacity_blocks, 16);
    EXPECT_EQ(st.disk.hits, 1);
  }
  // A new process on the same directory finds every block.
  scribble(5);
  auto t = make(disk_config(16));
  ASSERT_NE(t, nullptr);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(t->find(key(i)), Tier::kDisk) << i;
    EXPECT_EQ(load_now(*t, 5, i), (KvLoadResult{5, true, Tier::kDisk})) << i;
    EXPECT_EQ(block_of(5), content(i)) << i;
  }
  // Another fingerprint on the same directory sees none of them.
  KvTierConfig other = disk_config(16);
  other.fingerprint = "other";
  auto o = make(other);
  ASSERT_NE(o, nullptr);
  EXPECT_EQ(o->find(key(0)), Tier::kNone);
}

TEST_P(KvTiersTest, DiskOnlyBlockIsFindableWhileItWaitsForTheWriter) {
  auto t = make(disk_config(16));
  ASSERT_NE(t, nullptr);
  fill(1, 1);
  t->store(1, key(1));
  scribble(1);
  // Staged or written: either way it is found and loads its bytes.
  EXPECT_EQ(t->find(key(1)), Tier::kDisk);
  EXPECT_EQ(load_now(*t, 2, 1), (KvLoadResult{2, true, Tier::kDisk}));
  EXPECT_EQ(block_of(2), content(1));
  t->flush();
  EXPECT_EQ(t->find(key(1)), Tier::kDisk);
  EXPECT_TRUE(fs::exists(file_of(1)));
}

TEST_P(KvTiersTest, CorruptMissingOrTruncatedBlockFilesFailTheirLoad) {
  auto t = make(disk_config(16));
  ASSERT_NE(t, nullptr);
  for (int i = 0; i < 3; ++i) {
    fill(1, i);
    t->store(1, key(i));
  }
  t->flush();
  scribble(4);
  const Bytes untouched = block_of(4);

  {  // A flipped payload byte.
    std::fstream f(file_of(0), std::ios::in | std::ios::out | std::ios::binary);
    ASSERT_TRUE(f.good());
    f.seekg(kHeaderBytes + block_bytes() / 2);
    char c;
    f.read(&c, 1);
    c ^= 0x10;
    f.seekp(kHeaderBytes + block_bytes() / 2);
    f.write(&c, 1);
    ASSERT_TRUE(f.good());
  }
  EXPECT_EQ(load_now(*t, 4, 0), (KvLoadResult{4, false, Tier::kNone}));
  KvTierStats st = t->stats();
  EXPECT_EQ(st.load_corrupt, 1);
  EXPECT_EQ(st.load_failures, 1);
  EXPECT_EQ(t->find(key(0)), Tier::kNone);
  EXPECT_FALSE(fs::exists(file_of(0)));

  ASSERT_TRUE(fs::remove(file_of(1)));
  EXPECT_EQ(load_now(*t, 4, 1), (KvLoadResult{4, false, Tier::kNone}));
  st = t->stats();
  EXPECT_EQ(st.load_missing, 1);
  EXPECT_EQ(t->find(key(1)), Tier::kNone);

  fs::resize_file(file_of(2), static_cast<uintmax_t>(file_bytes() - 1));
  EXPECT_EQ(load_now(*t, 4, 2), (KvLoadResult{4, false, Tier::kNone}));
  st = t->stats();
  EXPECT_EQ(st.load_corrupt, 2);
  EXPECT_EQ(st.load_failures, 3);
  EXPECT_EQ(st.loads, 3);
  EXPECT_EQ(t->find(key(2)), Tier::kNone);
  // A failed load hands out nothing: the target block is only written by a verified read.
  EXPECT_EQ(block_of(4), untouched);
}

TEST_P(KvTiersTest, DiskWriteFailureKeepsTheRamCopy) {
  KvTierConfig c = disk_config(16);
  c.ram_bytes = 4 * block_bytes();
  auto t = make(c);
  ASSERT_NE(t, nullptr);
  t->set_disk_fault_hook(fail_on("write"));
  fill(1, 1);
  t->store(1, key(1));
  t->flush();
  const KvTierStats st = t->stats();
  EXPECT_EQ(st.disk_write_failures, 1);
  EXPECT_EQ(st.disk.stores, 0);
  EXPECT_FALSE(fs::exists(file_of(1)));
  EXPECT_EQ(t->find(key(1)), Tier::kRam);
  EXPECT_EQ(load_now(*t, 2, 1), (KvLoadResult{2, true, Tier::kRam}));
  EXPECT_EQ(block_of(2), content(1));
}

TEST_P(KvTiersTest, DiskOnlyWriteFailureLeavesNothing) {
  auto t = make(disk_config(16));
  ASSERT_NE(t, nullptr);
  t->set_disk_fault_hook(fail_on("write"));
  fill(1, 1);
  t->store(1, key(1));
  t->flush();
  EXPECT_EQ(t->stats().disk_write_failures, 1);
  EXPECT_FALSE(fs::exists(file_of(1)));
  EXPECT_EQ(t->find(key(1)), Tier::kNone);
  EXPECT_FALSE(load_now(*t, 2, 1).ok);
  // The staging slot came back: later stores still reach the disk.
  t->set_disk_fault_hook(nullptr);
  fill(1, 2);
  t->store(1, key(2));
  t->flush();
  EXPECT_TRUE(fs::exists(file_of(2)));
}

TEST_P(KvTiersTest, DiskReadFailureIsAnIoError) {
  auto t = make(disk_config(16));
  ASSERT_NE(t, nullptr);
  fill(1, 1);
  t->store(1, key(1));
  t->flush();
  t->set_disk_fault_hook(fail_on("read"));
  EXPECT_EQ(load_now(*t, 2, 1), (KvLoadResult{2, false, Tier::kNone}));
  const KvTierStats st = t->stats();
  EXPECT_EQ(st.load_io_errors, 1);
  EXPECT_EQ(st.load_failures, 1);
  EXPECT_EQ(st.load_corrupt, 0);
  EXPECT_EQ(st.load_missing, 0);
}

TEST_P(KvTiersTest, BlockEvictedFromRamLoadsFromDiskAndIsPromoted) {
  KvTierConfig c = disk_config(16);
  c.ram_bytes = 2 * block_bytes();
  auto t = make(c);
  ASSERT_NE(t, nullptr);
  for (int i = 0; i < 3; ++i) {
    fill(1, i);
    t->store(1, key(i));
    t->flush();  // written before the next store may evict it from RAM
  }
  EXPECT_EQ(t->find(key(0)), Tier::kDisk);
  EXPECT_EQ(t->find(key(1)), Tier::kRam);
  EXPECT_EQ(t->find(key(2)), Tier::kRam);
  EXPECT_EQ(t->stats().disk.blocks, 3);

  EXPECT_EQ(load_now(*t, 3, 0), (KvLoadResult{3, true, Tier::kDisk}));
  EXPECT_EQ(block_of(3), content(0));
  EXPECT_EQ(t->find(key(0)), Tier::kRam);
  EXPECT_EQ(t->find(key(1)), Tier::kDisk);  // made room for it
  EXPECT_EQ(t->stats().ram.blocks, 2);
  // The promoted copy serves the next hit.
  EXPECT_EQ(load_now(*t, 4, 0), (KvLoadResult{4, true, Tier::kRam}));
  EXPECT_EQ(block_of(4), content(0));
}

TEST_P(KvTiersTest, ConcurrentStoresAndLoadsMoveTheRightBytes) {
  KvTierConfig c = disk_config(12);
  c.ram_bytes = 3 * block_bytes();
  auto t = make(c);
  ASSERT_NE(t, nullptr);
  constexpr int kKeys = 20;
  Rng rng(42);
  int64_t ok_loads = 0, failed_loads = 0;
  for (int round = 0; round < 60; ++round) {
    // Loads into blocks 4..7 run on the transfer thread while this thread stores from 1..3.
    std::vector<int> loading(8, -1);
    for (BlockId b = 4; b < 8; ++b) {
      loading[b] = static_cast<int>(rng.next_u64() % kKeys);
      t->load(b, key(loading[b]));
    }
    for (BlockId b = 1; b < 4; ++b) {
      const int k = static_cast<int>(rng.next_u64() % kKeys);
      fill(b, k);
      t->store(b, key(k));
      (void)t->find(key(static_cast<int>(rng.next_u64() % kKeys)));
    }
    t->wait_for_loads();
    std::vector<KvLoadResult> done = t->take_finished_loads();
    ASSERT_EQ(done.size(), 4u);
    std::vector<bool> seen(8, false);
    for (const KvLoadResult& r : done) {
      ASSERT_GE(r.block, 4);
      ASSERT_LT(r.block, 8);
      EXPECT_FALSE(seen[r.block]);
      seen[r.block] = true;
      if (!r.ok) {
        ++failed_loads;
        continue;
      }
      ++ok_loads;
      EXPECT_NE(r.tier, Tier::kNone);
      EXPECT_EQ(block_of(r.block), content(loading[r.block]))
          << "round " << round << " block " << r.block << " key " << loading[r.block];
    }
    if (round % 10 == 9) t->flush();
  }
  t->flush();
  const KvTierStats st = t->stats();
  EXPECT_EQ(st.loads, ok_loads + failed_loads);
  EXPECT_EQ(st.load_failures, failed_loads);
  EXPECT_EQ(st.load_corrupt, 0);
  EXPECT_EQ(st.load_io_errors, 0);
  EXPECT_GT(ok_loads, 0);
  EXPECT_LE(st.ram.blocks, 3);
  EXPECT_LE(st.disk.blocks, 12);
  // Every RAM entry is findable under its own key: no slot is held twice or left unmapped.
  int64_t in_ram = 0;
  for (int i = 0; i < kKeys; ++i) in_ram += t->find(key(i)) == Tier::kRam;
  EXPECT_EQ(in_ram, st.ram.blocks);
}

TEST_P(KvTiersTest, CreateRefusesUnusableConfigurations) {
  auto expect_invalid = [&](const KvTierConfig& c, const std::string& what) {
    auto t = KvTiers::create(c, &pool_);
    ASSERT_FALSE(t.ok()) << what;
    EXPECT_EQ(t.status().code(), StatusCode::kInvalidArgument) << t.status().to_string();
    EXPECT_NE(t.status().message().find(what), std::string::npos) << t.status().message();
  };
  expect_invalid(KvTierConfig{}, "no KV tier");
  KvTierConfig c;
  c.ram_bytes = block_bytes() - 1;
  expect_invalid(c, "--kv-offloading-size");
  c = disk_config(1);
  c.disk_bytes = file_bytes() - 1;
  expect_invalid(c, "--kv-disk-size");
  // The directory path runs through a regular file.
  { std::ofstream(dir_ + "/plain") << "x"; }
  c = disk_config(16);
  c.disk_path = dir_ + "/plain/sub";
  expect_invalid(c, dir_ + "/plain");
  // The smallest sizes that hold one block work.
  EXPECT_NE(make(ram_config(1)), nullptr);
  EXPECT_NE(make(disk_config(1)), nullptr);
}

TEST_P(KvTiersTest, RefusedDiskSizeLeavesTheExistingCacheAlone) {
  {
    auto t = make(disk_config(16));
    ASSERT_NE(t, nullptr);
    for (int i = 0; i < 3; ++i) {
      fill(1, i);
      t->store(1, key(i));
    }
  }  // the destructor finishes the writes
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(fs::exists(file_of(i))) << i;
  // A mistyped size is refused before the directory is opened: opening it would evict every
  // block file down to a capacity that holds none.
  KvTierConfig small = disk_config(1);
  small.disk_bytes = file_bytes() - 1;
  auto refused = KvTiers::create(small, &pool_);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kInvalidArgument);
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(fs::exists(file_of(i))) << i;
  auto t = make(disk_config(16));
  ASSERT_NE(t, nullptr);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(t->find(key(i)), Tier::kDisk) << i;
    EXPECT_EQ(load_now(*t, 5, i), (KvLoadResult{5, true, Tier::kDisk})) << i;
    EXPECT_EQ(block_of(5), content(i)) << i;
  }
}

INSTANTIATE_TEST_SUITE_P(AllDtypes, KvTiersTest, ::testing::ValuesIn(kAllParams), param_name);

}  // namespace
}  // namespace strata::kv
