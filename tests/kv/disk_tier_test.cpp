#include "kv/disk_tier.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <thread>
#include <vector>

#include "core/rng.h"

namespace strata::kv {
namespace {

namespace fs = std::filesystem;
using Bytes = std::vector<std::byte>;

constexpr int64_t kBlock = 512;

BlockHash key(int i) {
  const int32_t t[1] = {i};
  return hash_block(root_block_hash(), t, "");
}

// The payload of a key: content-addressed, so every writer of a key writes the same bytes.
Bytes payload_of(const BlockHash& k, int64_t n = kBlock) {
  Rng rng(k.lo ^ k.hi);
  Bytes b(n);
  for (auto& x : b) x = static_cast<std::byte>(rng.next_u64());
  return b;
}

Bytes random_bytes(uint64_t seed, int64_t n = kBlock) {
  Rng rng(seed);
  Bytes b(n);
  for (auto& x : b) x = static_cast<std::byte>(rng.next_u64());
  return b;
}

void set_mtime(const std::string& path, int64_t sec) {
  struct timespec ts[2] = {{sec, 0}, {sec, 0}};
  ASSERT_EQ(::utimensat(AT_FDCWD, path.c_str(), ts, 0), 0) << path;
}

int64_t mtime_of(const std::string& path) {
  struct stat st;
  EXPECT_EQ(::stat(path.c_str(), &st), 0) << path;
  return st.st_mtim.tv_sec;
}

Bytes read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::vector<char> c((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  Bytes b(c.size());
  std::memcpy(b.data(), c.data(), c.size());
  return b;
}

void write_all(const std::string& path, const Bytes& b) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
  ASSERT_TRUE(out.good()) << path;
}

// Every regular file under `root`, as paths relative to it.
std::set<std::string> files_under(const std::string& root) {
  std::set<std::string> out;
  for (const auto& e : fs::recursive_directory_iterator(root))
    if (e.is_regular_file()) out.insert(fs::relative(e.path(), root).string());
  return out;
}

class DiskTierTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = ::testing::TempDir() + "/disk_tier_XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { fs::remove_all(dir_); }

  DiskTierConfig config(int64_t capacity_files = 1000, const std::string& fp = "model-a") const {
    DiskTierConfig c;
    c.dir = dir_ + "/cache";
    c.fingerprint = fp;
    c.block_bytes = kBlock;
    c.capacity_bytes = capacity_files * (kBlock + 64);
    return c;
  }
  std::unique_ptr<DiskTier> open_tier(const DiskTierConfig& c) {
    auto r = DiskTier::open(c);
    EXPECT_TRUE(r.ok()) << r.status().to_string();
    return r.ok() ? std::move(r).value() : nullptr;
  }
  // get() that returns the status and, when ok, checks the bytes against payload_of(k).
  static Status get_checked(DiskTier& t, const BlockHash& k) {
    Bytes out(kBlock);
    Status st = t.get(k, out);
    if (st.ok()) {
      EXPECT_EQ(out, payload_of(k)) << to_string(k);
    }
    return st;
  }

  std::string dir_;
};

TEST_F(DiskTierTest, PutGetRoundTripAndFileLayout) {
  auto t = open_tier(config());
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->file_bytes(), kBlock + 64);
  std::vector<Bytes> payloads;
  for (int i = 0; i < 20; ++i) {
    payloads.push_back(random_bytes(1000 + i));
    ASSERT_TRUE(t->put(key(i), payloads.back()).ok());
  }
  for (int i = 0; i < 20; ++i) {
    EXPECT_TRUE(t->contains(key(i)));
    Bytes out(kBlock);
    ASSERT_TRUE(t->get(key(i), out).ok());
    EXPECT_EQ(out, payloads[i]);
  }
  const std::string hex = to_string(key(3));
  EXPECT_EQ(t->path_of(key(3)), dir_ + "/cache/model-a/" + hex.substr(0, 2) + "/" + hex + ".kvb");
  EXPECT_EQ(static_cast<int64_t>(fs::file_size(t->path_of(key(3)))), t->file_bytes());
  EXPECT_EQ(files_under(dir_ + "/cache").size(), 20u);  // no temporary or probe file left

  Bytes out(kBlock);
  EXPECT_EQ(t->get(key(99), out).code(), StatusCode::kNotFound);
  const DiskTierStats s = t->stats();
  EXPECT_EQ(s.blocks, 20);
  EXPECT_EQ(s.bytes, 20 * t->file_bytes());
  EXPECT_EQ(s.puts, 20);
  EXPECT_EQ(s.gets, 20);
  EXPECT_EQ(s.bytes_written, 20 * kBlock);
  EXPECT_EQ(s.bytes_read, 20 * kBlock);
  EXPECT_EQ(s.put_failures + s.get_missing + s.get_corrupt + s.get_io_errors + s.evictions, 0);
}

TEST_F(DiskTierTest, RejectsBadConfigWithClearMessages) {
  auto expect_invalid = [&](DiskTierConfig c, const std::string& needle) {
    auto r = DiskTier::open(c);
    ASSERT_FALSE(r.ok()) << needle;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(r.status().message().find(needle), std::string::npos) << r.status().message();
  };
  DiskTierConfig c = config();
  c.dir = "";
  expect_invalid(c, "directory");
  c = config(1000, "");
  expect_invalid(c, "fingerprint");
  c = config(1000, "Model");
  expect_invalid(c, "'Model'");
  c = config(1000, "a/b");
  expect_invalid(c, "'a/b'");
  c = config(1000, std::string(65, 'a'));
  expect_invalid(c, "64");
  c = config();
  c.block_bytes = 0;
  expect_invalid(c, "block size");
  c = config();
  c.capacity_bytes = -1;
  expect_invalid(c, "capacity");

  // The directory path runs through a regular file.
  write_all(dir_ + "/plain", Bytes(3));
  c = config();
  c.dir = dir_ + "/plain/sub";
  expect_invalid(c, dir_ + "/plain");
  c.dir = dir_ + "/plain";
  expect_invalid(c, dir_ + "/plain");

  EXPECT_TRUE(DiskTier::open(config(1000, std::string(64, 'z'))).ok());
  EXPECT_TRUE(DiskTier::open(config(1000, "q8_0-kv-f16_bs16")).ok());
}

TEST_F(DiskTierTest, RestartFindsEveryBlockInModificationTimeOrder) {
  auto t = open_tier(config());
  ASSERT_NE(t, nullptr);
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(t->put(key(i), payload_of(key(i))).ok());
  // Least recently used first after the restart: 3, 0, 4, 1, 2.
  const int order[5] = {3, 0, 4, 1, 2};
  for (int r = 0; r < 5; ++r) set_mtime(t->path_of(key(order[r])), 1'000'000 + 10 * r);
  t.reset();

  t = open_tier(config());
  ASSERT_NE(t, nullptr);
  std::vector<BlockHash> want;
  for (int i : order) want.push_back(key(i));
  EXPECT_EQ(t->keys(), want);
  EXPECT_EQ(t->stats().blocks, 5);
  EXPECT_EQ(t->stats().bytes, 5 * t->file_bytes());

  // get() refreshes the order in memory and in the file's time, so it survives the next restart.
  ASSERT_TRUE(get_checked(*t, key(3)).ok());
  EXPECT_GT(mtime_of(t->path_of(key(3))), 1'000'040);
  want = {key(0), key(4), key(1), key(2), key(3)};
  EXPECT_EQ(t->keys(), want);
  t.reset();
  t = open_tier(config());
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->keys(), want);
  for (int i = 0; i < 5; ++i) EXPECT_TRUE(get_checked(*t, key(i)).ok());
}

TEST_F(DiskTierTest, AnotherFingerprintDoesNotSeeTheFiles) {
  auto a = open_tier(config(1000, "model-a"));
  ASSERT_NE(a, nullptr);
  ASSERT_TRUE(a->put(key(1), payload_of(key(1))).ok());
  auto b = open_tier(config(1000, "model-b"));
  ASSERT_NE(b, nullptr);
  EXPECT_FALSE(b->contains(key(1)));
  EXPECT_TRUE(b->keys().empty());
  Bytes out(kBlock);
  EXPECT_EQ(b->get(key(1), out).code(), StatusCode::kNotFound);
  EXPECT_NE(a->path_of(key(1)), b->path_of(key(1)));
  EXPECT_TRUE(get_checked(*a, key(1)).ok());
}

TEST_F(DiskTierTest, PayloadBitFlipIsDataLossAndRemovesTheFile) {
  auto t = open_tier(config());
  ASSERT_NE(t, nullptr);
  ASSERT_TRUE(t->put(key(1), payload_of(key(1))).ok());
  const std::string path = t->path_of(key(1));
  Bytes b = read_all(path);
  b[64 + 100] ^= std::byte{0x10};
  write_all(path, b);

  Bytes out(kBlock);
  const Status st = t->get(key(1), out);
  EXPECT_EQ(st.code(), StatusCode::kDataLoss);
  EXPECT_NE(st.message().find(path), std::string::npos) << st.message();
  EXPECT_FALSE(fs::exists(path));
  EXPECT_FALSE(t->contains(key(1)));
  EXPECT_EQ(t->stats().get_corrupt, 1);
  EXPECT_EQ(t->stats().blocks, 0);
  EXPECT_EQ(t->get(key(1), out).code(), StatusCode::kNotFound);

  // The block can be written again.
  ASSERT_TRUE(t->put(key(1), payload_of(key(1))).ok());
  EXPECT_TRUE(get_checked(*t, key(1)).ok());
}

TEST_F(DiskTierTest, EveryHeaderByteIsVerified) {
  auto t = open_tier(config());
  ASSERT_NE(t, nullptr);
  for (int byte = 0; byte < 64; ++byte) {
    SCOPED_TRACE(byte);
    ASSERT_TRUE(t->put(key(7), payload_of(key(7))).ok());
    const std::string path = t->path_of(key(7));
    Bytes b = read_all(path);
    b[byte] ^= std::byte{0x01};
    write_all(path, b);
    Bytes out(kBlock);
    EXPECT_EQ(t->get(key(7), out).code(), StatusCode::kDataLoss);
    EXPECT_FALSE(fs::exists(path));
    EXPECT_FALSE(t->contains(key(7)));
  }
  EXPECT_EQ(t->stats().get_corrupt, 64);
}

TEST_F(DiskTierTest, AFileOfAnotherKeyIsDataLoss) {
  auto t = open_tier(config());
  ASSERT_NE(t, nullptr);
  ASSERT_TRUE(t->put(key(1), payload_of(key(1))).ok());
  ASSERT_TRUE(t->put(key(2), payload_of(key(2))).ok());
  fs::copy_file(t->path_of(key(1)), t->path_of(key(2)), fs::copy_options::overwrite_existing);
  Bytes out(kBlock);
  EXPECT_EQ(t->get(key(2), out).code(), StatusCode::kDataLoss);
  EXPECT_TRUE(get_checked(*t, key(1)).ok());
}

TEST_F(DiskTierTest, TruncatedOrExtendedFileIsDataLoss) {
  auto t = open_tier(config());
  ASSERT_NE(t, nullptr);
  const int64_t sizes[] = {0, 10, 64, t->file_bytes() - 1, t->file_bytes() + 1};
  for (int64_t size : sizes) {
    SCOPED_TRACE(size);
    ASSERT_TRUE(t->put(key(5), payload_of(key(5))).ok());
    const std::string path = t->path_of(key(5));
    ASSERT_EQ(::truncate(path.c_str(), size), 0);
    Bytes out(kBlock);
    EXPECT_EQ(t->get(key(5), out).code(), StatusCode::kDataLoss);
    EXPECT_FALSE(fs::exists(path));
    EXPECT_FALSE(t->contains(key(5)));
  }
}

TEST_F(DiskTierTest, DeletedFileIsNotFound) {
  auto t = open_tier(config());
  ASSERT_NE(t, nullptr);
  ASSERT_TRUE(t->put(key(1), payload_of(key(1))).ok());
  ASSERT_TRUE(fs::remove(t->path_of(key(1))));
  EXPECT_TRUE(t->contains(key(1)));  // the index does not look at the disk
  Bytes out(kBlock);
  EXPECT_EQ(t->get(key(1), out).code(), StatusCode::kNotFound);
  EXPECT_FALSE(t->contains(key(1)));
  EXPECT_EQ(t->stats().get_missing, 1);
  EXPECT_EQ(t->stats().blocks, 0);
}

TEST_F(DiskTierTest, RemoveDropsKeyAndFile) {
  auto t = open_tier(config());
  ASSERT_NE(t, nullptr);
  ASSERT_TRUE(t->put(key(1), payload_of(key(1))).ok());
  t->remove(key(1));
  t->remove(key(2));  // absent: no error
  EXPECT_FALSE(t->contains(key(1)));
  EXPECT_FALSE(fs::exists(t->path_of(key(1))));
  EXPECT_EQ(t->stats().blocks, 0);
}

TEST_F(DiskTierTest, OpenRemovesWrongSizeFilesAndLeavesForeignNamesAlone) {
  auto t = open_tier(config());
  ASSERT_NE(t, nullptr);
  ASSERT_TRUE(t->put(key(1), payload_of(key(1))).ok());
  ASSERT_TRUE(t->put(key(2), payload_of(key(2))).ok());
  const std::string short_path = t->path_of(key(2));
  ASSERT_EQ(::truncate(short_path.c_str(), 100), 0);
  const std::string hex = to_string(key(3));
  const std::string sub = dir_ + "/cache/model-a/" + hex.substr(0, 2);
  fs::create_directories(sub);
  const std::string long_path = sub + "/" + hex + ".kvb";
  write_all(long_path, Bytes(t->file_bytes() + 7));
  const std::string readme = dir_ + "/cache/model-a/README";
  write_all(readme, Bytes(t->file_bytes()));
  const std::string bad_name = sub + "/" + hex.substr(0, 31) + "G.kvb";
  write_all(bad_name, Bytes(t->file_bytes()));
  t.reset();

  t = open_tier(config());
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->keys(), std::vector<BlockHash>{key(1)});
  EXPECT_FALSE(fs::exists(short_path));
  EXPECT_FALSE(fs::exists(long_path));
  EXPECT_TRUE(fs::exists(readme));
  EXPECT_TRUE(fs::exists(bad_name));
  EXPECT_TRUE(get_checked(*t, key(1)).ok());
}

TEST_F(DiskTierTest, CapacityEvictsLeastRecentlyUsedAndGetRefreshes) {
  auto t = open_tier(config(/*capacity_files=*/3));
  ASSERT_NE(t, nullptr);
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(t->put(key(i), payload_of(key(i))).ok());
  ASSERT_TRUE(get_checked(*t, key(0)).ok());  // 1 is now the least recently used
  ASSERT_TRUE(t->put(key(3), payload_of(key(3))).ok());
  EXPECT_EQ(t->keys(), (std::vector<BlockHash>{key(2), key(0), key(3)}));
  EXPECT_FALSE(fs::exists(t->path_of(key(1))));
  EXPECT_EQ(t->stats().evictions, 1);
  EXPECT_EQ(t->stats().bytes, 3 * t->file_bytes());
  ASSERT_TRUE(t->put(key(4), payload_of(key(4))).ok());
  EXPECT_EQ(t->keys(), (std::vector<BlockHash>{key(0), key(3), key(4)}));
  EXPECT_FALSE(fs::exists(t->path_of(key(2))));
  EXPECT_EQ(files_under(dir_ + "/cache").size(), 3u);
  t.reset();

  // A smaller capacity at the next start evicts the oldest files.
  set_mtime(
      dir_ + "/cache/model-a/" + to_string(key(0)).substr(0, 2) + "/" + to_string(key(0)) + ".kvb",
      1'000'000);
  t = open_tier(config(/*capacity_files=*/2));
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->stats().blocks, 2);
  EXPECT_FALSE(t->contains(key(0)));
  EXPECT_FALSE(fs::exists(t->path_of(key(0))));
  EXPECT_EQ(files_under(dir_ + "/cache").size(), 2u);
}

TEST_F(DiskTierTest, CapacitySmallerThanOneFileRefusesEveryPut) {
  DiskTierConfig c = config();
  c.capacity_bytes = kBlock + 63;
  auto t = open_tier(c);
  ASSERT_NE(t, nullptr);
  const Status st = t->put(key(1), payload_of(key(1)));
  EXPECT_EQ(st.code(), StatusCode::kResourceExhausted);
  EXPECT_NE(st.message().find("capacity"), std::string::npos) << st.message();
  EXPECT_FALSE(t->contains(key(1)));
  EXPECT_TRUE(files_under(dir_ + "/cache").empty());
  EXPECT_EQ(t->stats().put_failures, 1);
}

TEST_F(DiskTierTest, RewriteReplacesWithoutDoubleCounting) {
  auto t = open_tier(config(/*capacity_files=*/1));
  ASSERT_NE(t, nullptr);
  const Bytes first = random_bytes(1), second = random_bytes(2);
  ASSERT_TRUE(t->put(key(1), first).ok());
  ASSERT_TRUE(t->put(key(1), second).ok());
  EXPECT_EQ(t->stats().blocks, 1);
  EXPECT_EQ(t->stats().bytes, t->file_bytes());
  EXPECT_EQ(t->stats().evictions, 0);
  Bytes out(kBlock);
  ASSERT_TRUE(t->get(key(1), out).ok());
  EXPECT_EQ(out, second);
  EXPECT_EQ(files_under(dir_ + "/cache").size(), 1u);
}

TEST_F(DiskTierTest, RewriteOfAPresentKeyEvictsNothingElse) {
  auto t = open_tier(config(/*capacity_files=*/2));
  ASSERT_NE(t, nullptr);
  ASSERT_TRUE(t->put(key(0), payload_of(key(0))).ok());
  ASSERT_TRUE(t->put(key(1), payload_of(key(1))).ok());
  ASSERT_TRUE(t->put(key(1), payload_of(key(1))).ok());
  ASSERT_TRUE(t->put(key(0), payload_of(key(0))).ok());
  EXPECT_EQ(t->keys(), (std::vector<BlockHash>{key(1), key(0)}));
  EXPECT_EQ(t->stats().evictions, 0);
  EXPECT_EQ(t->stats().bytes, 2 * t->file_bytes());
}

// A header whose checksum matches but whose fields do not (a future format, or a writer bug) is
// refused field by field.
TEST_F(DiskTierTest, HeaderFieldsAreCheckedBeyondTheChecksum) {
  auto t = open_tier(config());
  ASSERT_NE(t, nullptr);
  struct Case {
    int offset;
    uint8_t value;
    const char* needle;
  };
  const Case cases[] = {{8, 2, "version"},
                        {12, 65, "header size"},
                        {32, 1, "payload size"},
                        {16, 0xff, "another block"},
                        {0, 'X', "not a Strata"}};
  for (const Case& c : cases) {
    SCOPED_TRACE(c.needle);
    ASSERT_TRUE(t->put(key(9), payload_of(key(9))).ok());
    const std::string path = t->path_of(key(9));
    Bytes b = read_all(path);
    b[c.offset] = static_cast<std::byte>(c.value);
    const uint64_t sum = XXH3_64bits(b.data(), 56);
    for (int i = 0; i < 8; ++i) b[56 + i] = static_cast<std::byte>(sum >> (8 * i));
    write_all(path, b);
    Bytes out(kBlock);
    const Status st = t->get(key(9), out);
    EXPECT_EQ(st.code(), StatusCode::kDataLoss);
    EXPECT_NE(st.message().find(c.needle), std::string::npos) << st.message();
    EXPECT_FALSE(fs::exists(path));
  }
}

TEST_F(DiskTierTest, WriteFaultLeavesNoFileAndTheKeyAbsent) {
  for (const char* failing : {"open", "write", "rename"}) {
    SCOPED_TRACE(failing);
    auto t = open_tier(config());
    ASSERT_NE(t, nullptr);
    ASSERT_TRUE(t->put(key(1), payload_of(key(1))).ok());  // an older version of the block
    std::vector<std::string> ops;
    t->set_fault_hook([&](const char* op, const std::string& path) {
      ops.push_back(op);
      if (std::string(op) == failing) return internal_error("injected failure at " + path);
      return ok_status();
    });
    Status st = t->put(key(1), payload_of(key(1)));
    EXPECT_EQ(st.code(), StatusCode::kInternal);
    EXPECT_NE(st.message().find("injected"), std::string::npos) << st.message();
    EXPECT_FALSE(t->contains(key(1)));
    EXPECT_TRUE(files_under(dir_ + "/cache").empty());
    EXPECT_EQ(ops.back(), failing);

    // A full disk is kResourceExhausted.
    t->set_fault_hook([&](const char* op, const std::string&) {
      if (std::string(op) == failing) return resource_exhausted("no space left on device");
      return ok_status();
    });
    EXPECT_EQ(t->put(key(2), payload_of(key(2))).code(), StatusCode::kResourceExhausted);
    EXPECT_FALSE(t->contains(key(2)));
    EXPECT_TRUE(files_under(dir_ + "/cache").empty());
    EXPECT_EQ(t->stats().put_failures, 2);
    EXPECT_EQ(t->stats().blocks, 0);

    t->set_fault_hook(nullptr);
    ASSERT_TRUE(t->put(key(2), payload_of(key(2))).ok());
    EXPECT_TRUE(get_checked(*t, key(2)).ok());
    t.reset();
    fs::remove_all(dir_ + "/cache");
  }
}

TEST_F(DiskTierTest, ReadFaultIsInternalAndDropsTheKey) {
  for (const char* failing : {"open", "read"}) {
    SCOPED_TRACE(failing);
    auto t = open_tier(config());
    ASSERT_NE(t, nullptr);
    ASSERT_TRUE(t->put(key(1), payload_of(key(1))).ok());
    t->set_fault_hook([&](const char* op, const std::string& path) {
      if (std::string(op) == failing) return internal_error("injected failure at " + path);
      return ok_status();
    });
    Bytes out(kBlock);
    EXPECT_EQ(t->get(key(1), out).code(), StatusCode::kInternal);
    EXPECT_FALSE(t->contains(key(1)));
    EXPECT_EQ(t->stats().get_io_errors, 1);
    EXPECT_EQ(t->stats().blocks, 0);
    EXPECT_TRUE(fs::exists(t->path_of(key(1))));  // not corrupt: kept for the next start
    t.reset();
    t = open_tier(config());
    ASSERT_NE(t, nullptr);
    EXPECT_TRUE(get_checked(*t, key(1)).ok());
    t.reset();
    fs::remove_all(dir_ + "/cache");
  }
}

TEST_F(DiskTierTest, TwoInstancesOnOneDirectory) {
  auto a = open_tier(config(/*capacity_files=*/10));
  auto b = open_tier(config(/*capacity_files=*/2));
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  ASSERT_TRUE(a->put(key(1), payload_of(key(1))).ok());
  ASSERT_TRUE(b->put(key(1), payload_of(key(1))).ok());  // rewrites a's file with the same block
  ASSERT_TRUE(a->put(key(2), payload_of(key(2))).ok());
  ASSERT_TRUE(b->put(key(3), payload_of(key(3))).ok());
  EXPECT_TRUE(get_checked(*a, key(1)).ok());
  EXPECT_TRUE(get_checked(*b, key(1)).ok());
  EXPECT_TRUE(get_checked(*b, key(3)).ok());
  EXPECT_TRUE(get_checked(*a, key(2)).ok());
  // Each keeps its own index: b does not know a's block 2.
  EXPECT_FALSE(b->contains(key(2)));

  // b is full (1, 3); writing 4 evicts its least recently used block, 1, which a also indexed.
  ASSERT_TRUE(b->put(key(4), payload_of(key(4))).ok());
  EXPECT_EQ(b->keys(), (std::vector<BlockHash>{key(3), key(4)}));
  EXPECT_TRUE(a->contains(key(1)));
  Bytes out(kBlock);
  EXPECT_EQ(a->get(key(1), out).code(), StatusCode::kNotFound);
  EXPECT_FALSE(a->contains(key(1)));
  EXPECT_TRUE(get_checked(*a, key(2)).ok());
  ASSERT_TRUE(a->put(key(1), payload_of(key(1))).ok());
  EXPECT_TRUE(get_checked(*a, key(1)).ok());

  // A third instance started now sees every file left on disk.
  auto c = open_tier(config(/*capacity_files=*/10));
  ASSERT_NE(c, nullptr);
  for (int i : {1, 2, 3, 4}) EXPECT_TRUE(get_checked(*c, key(i)).ok()) << i;
}

TEST_F(DiskTierTest, ConcurrentPutsAndGetsOnOneInstance) {
  constexpr int kKeys = 24, kCapacity = 8, kThreads = 4, kOps = 300;
  auto t = open_tier(config(kCapacity));
  ASSERT_NE(t, nullptr);
  std::vector<std::thread> threads;
  std::vector<int> hits(kThreads, 0), bad(kThreads, 0);
  for (int w = 0; w < kThreads; ++w) {
    threads.emplace_back([&, w] {
      Rng rng(w + 1);
      Bytes out(kBlock);
      for (int op = 0; op < kOps; ++op) {
        const BlockHash k = key(static_cast<int>(rng.next_u64() % kKeys));
        const uint64_t what = rng.next_u64() % 8;
        if (what < 3) {
          if (!t->put(k, payload_of(k)).ok()) ++bad[w];
        } else if (what == 3) {
          t->remove(k);
        } else if (what == 4) {
          (void)t->contains(k);
          (void)t->stats();
          (void)t->keys();
        } else {
          const Status st = t->get(k, out);
          if (st.ok()) {
            ++hits[w];
            if (out != payload_of(k)) ++bad[w];
          } else if (st.code() != StatusCode::kNotFound) {
            ++bad[w];
          }
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  for (int w = 0; w < kThreads; ++w) EXPECT_EQ(bad[w], 0) << w;

  const DiskTierStats s = t->stats();
  EXPECT_LE(s.blocks, kCapacity);
  EXPECT_LE(s.bytes, s.capacity_bytes);
  EXPECT_EQ(s.put_failures + s.get_corrupt + s.get_io_errors, 0);
  // Every file on disk is indexed (an index entry may lack its file after a race between an
  // eviction and a rewrite; get() then reports kNotFound).
  std::set<std::string> indexed;
  for (const BlockHash& k : t->keys())
    indexed.insert(fs::relative(t->path_of(k), dir_ + "/cache").string());
  for (const std::string& f : files_under(dir_ + "/cache")) EXPECT_EQ(indexed.count(f), 1u) << f;
  for (const BlockHash& k : t->keys()) {
    const Status st = get_checked(*t, k);
    EXPECT_TRUE(st.ok() || st.code() == StatusCode::kNotFound) << st.to_string();
  }
}

TEST_F(DiskTierTest, OpenRemovesStaleTemporaryFilesOnly) {
  auto t = open_tier(config());
  ASSERT_NE(t, nullptr);
  ASSERT_TRUE(t->put(key(1), payload_of(key(1))).ok());
  const std::string fp_dir = dir_ + "/cache/model-a";
  const std::string sub = fp_dir + "/" + to_string(key(1)).substr(0, 2);
  const std::string stale1 = sub + "/tmp-123-4-00000000deadbeef";
  const std::string stale2 = fp_dir + "/tmp-123-5-00000000deadbeef.probe";
  const std::string fresh = sub + "/tmp-456-7-00000000cafef00d";
  for (const auto& p : {stale1, stale2, fresh}) write_all(p, Bytes(40));
  set_mtime(stale1, 1'000'000);
  set_mtime(stale2, 1'000'000);
  t.reset();

  t = open_tier(config());
  ASSERT_NE(t, nullptr);
  EXPECT_FALSE(fs::exists(stale1));
  EXPECT_FALSE(fs::exists(stale2));
  EXPECT_TRUE(fs::exists(fresh));  // maybe another server's write in progress
  EXPECT_EQ(t->keys(), std::vector<BlockHash>{key(1)});
  EXPECT_TRUE(get_checked(*t, key(1)).ok());
}

}  // namespace
}  // namespace strata::kv
