// KV tiers on real weights (stories260K): prefixes evicted from a tiny pool come back from the
// RAM and disk tiers, across a restart, and through corrupt, truncated and deleted block files,
// and every output is token for token the output of a cold run without tiers.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>

#include "engine_test_util.h"

namespace strata {
namespace {

namespace fs = std::filesystem;

// Long prompts that share prefixes: each golden case continued by its own greedy tokens, cut at
// several lengths (the golden prompts themselves are a few tokens).
std::vector<std::vector<int32_t>> long_prompts() {
  std::vector<std::vector<int32_t>> out;
  for (const auto& c : testing::cases()) {
    std::vector<int32_t> ids = c.prompt_ids;
    ids.insert(ids.end(), c.generated.begin(), c.generated.end());
    for (size_t len : {180, 150, 120, 90, 60, 45, 33})
      if (len <= ids.size()) out.emplace_back(ids.begin(), ids.begin() + len);
  }
  return out;
}

engine::EngineConfig config(int64_t pool_tokens, int64_t ram_bytes, const std::string& disk) {
  auto c = testing::engine_config(testing::shared_data_path("models/stories260K-hf"), "auto", 0);
  c.cache.block_size = 16;
  c.cache.kv_cache_memory_bytes = 1280 * pool_tokens;  // 1280 bytes of f32 KV per token
  c.scheduler.max_model_len = 256;
  c.scheduler.max_num_batched_tokens = 64;
  c.cache.kv_offloading_bytes = ram_bytes;
  c.cache.kv_disk_path = disk;
  c.cache.kv_disk_bytes = disk.empty() ? 0 : int64_t{64} << 20;
  return c;
}

std::unique_ptr<engine::EngineClient> make_client(const engine::EngineConfig& c) {
  auto client = engine::EngineClient::create(c);
  EXPECT_TRUE(client.ok()) << client.status().to_string();
  return client.ok() ? std::move(client).value() : nullptr;
}

// Each prompt alone, in order: the pool is too small to keep them all.
std::vector<std::vector<int32_t>> run_each(engine::EngineClient& client,
                                           const std::vector<std::vector<int32_t>>& prompts,
                                           const std::string& tag) {
  std::vector<std::vector<int32_t>> out;
  for (size_t i = 0; i < prompts.size(); ++i) {
    auto s = client.submit(testing::greedy_request(tag + std::to_string(i), prompts[i], 24));
    EXPECT_TRUE(s.ok()) << s.status().to_string();
    if (!s.ok()) return out;
    out.push_back(testing::collect(**s)[0].tokens);
  }
  EXPECT_TRUE(testing::wait_idle(client));
  return out;
}

std::vector<fs::path> block_files(const std::string& dir) {
  std::vector<fs::path> out;
  for (const auto& e : fs::recursive_directory_iterator(dir))
    if (e.is_regular_file() && e.path().extension() == ".kvb") out.push_back(e.path());
  std::sort(out.begin(), out.end());
  return out;
}

class TempDir {
 public:
  TempDir() {
    char tmpl[] = "/tmp/strata_tiers_XXXXXX";
    path_ = ::mkdtemp(tmpl);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

class EngineTiers : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!file_exists(testing::shared_data_path("models/stories260K-hf/config.json")))
      GTEST_SKIP() << "needs ../shared/data/models/stories260K-hf";
    prompts_ = long_prompts();
    ASSERT_GE(prompts_.size(), 8u);
    auto cold = make_client(config(4096, 0, ""));  // roomy pool, no tiers: the reference
    ASSERT_TRUE(cold);
    expected_ = run_each(*cold, prompts_, "cold");
  }
  std::vector<std::vector<int32_t>> prompts_, expected_;
};

TEST_F(EngineTiers, RamTierServesEvictedPrefixesWithColdOutput) {
  auto client = make_client(config(272, 4 << 20, ""));
  ASSERT_TRUE(client);
  EXPECT_EQ(run_each(*client, prompts_, "a"), expected_);
  EXPECT_EQ(run_each(*client, prompts_, "b"), expected_);
  const auto s = client->stats();
  EXPECT_TRUE(s.has_kv_tiers && s.cpu_tier.present && !s.disk_tier.present);
  EXPECT_GT(s.cpu_tier.hits, 10) << "the second round should load its prefixes from RAM";
  EXPECT_GT(s.external_prefix_cache_hits, 160);
  EXPECT_LE(s.external_prefix_cache_hits, s.external_prefix_cache_queries);
  EXPECT_GT(s.cpu_tier.stores, 0);
  EXPECT_EQ(s.kv_tier_loads, s.cpu_tier.hits);  // nothing failed
}

TEST_F(EngineTiers, DiskTierSurvivesRestartAndCorruptionWithColdOutput) {
  TempDir dir;
  {
    auto client = make_client(config(272, 0, dir.path()));
    ASSERT_TRUE(client);
    EXPECT_EQ(run_each(*client, prompts_, "a"), expected_);
  }  // stopped: the queued writes finish first
  const auto files = block_files(dir.path());
  ASSERT_GT(files.size(), 12u);
  {
    // Restarted on the same directory, RAM tier on: the prefixes come from disk at once.
    auto client = make_client(config(272, 4 << 20, dir.path()));
    ASSERT_TRUE(client);
    EXPECT_EQ(run_each(*client, prompts_, "b"), expected_);
    const auto s = client->stats();
    EXPECT_GT(s.disk_tier.hits, 10);
    EXPECT_EQ(s.kv_tier_loads, s.disk_tier.hits + s.cpu_tier.hits);
    EXPECT_GT(s.external_prefix_cache_hits, 160);
  }
  // Between runs: a byte flipped in a third of the files, a third truncated, a third deleted.
  int flipped = 0, truncated = 0, deleted = 0;
  for (size_t i = 0; i < files.size(); ++i) {
    if (!fs::exists(files[i])) continue;
    if (i % 3 == 0) {
      std::fstream f(files[i], std::ios::in | std::ios::out | std::ios::binary);
      f.seekg(100 + static_cast<std::streamoff>(i));
      char c = 0;
      f.read(&c, 1);
      c ^= 0x10;
      f.seekp(100 + static_cast<std::streamoff>(i));
      f.write(&c, 1);
      ++flipped;
    } else if (i % 3 == 1) {
      fs::resize_file(files[i], fs::file_size(files[i]) / 2);
      ++truncated;
    } else {
      fs::remove(files[i]);
      ++deleted;
    }
  }
  ASSERT_GT(flipped + truncated + deleted, 12);
  auto client = make_client(config(272, 0, dir.path()));
  ASSERT_TRUE(client);
  EXPECT_EQ(run_each(*client, prompts_, "c"), expected_);
  const auto s = client->stats();
  // Truncated files are dropped at start (wrong size); flipped ones fail their checksum.
  EXPECT_GT(s.kv_tier_load_corrupt, 0);
  EXPECT_EQ(s.kv_tier_load_io_errors, 0);
  // During a run: damage what this run stored again, then run once more.
  const auto again = block_files(dir.path());
  for (size_t i = 0; i < again.size(); i += 2) fs::remove(again[i]);
  for (size_t i = 1; i < again.size(); i += 4) {
    std::fstream f(again[i], std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(80);
    f.write("\xff\xff\xff\xff", 4);
  }
  EXPECT_EQ(run_each(*client, prompts_, "d"), expected_);
  const auto t = client->stats();
  EXPECT_GT(t.kv_tier_load_missing + t.kv_tier_load_corrupt,
            s.kv_tier_load_missing + s.kv_tier_load_corrupt);
  EXPECT_GT(t.disk_tier.hits, s.disk_tier.hits) << "the files left intact still load";
}

// Preemption keeps work: requests preempted in a pool too small for all of them resume from the
// tiers, and their outputs are those of a cold run.
TEST_F(EngineTiers, PreemptedRequestsResumeFromTheTiers) {
  auto client = make_client(config(272, 4 << 20, ""));
  ASSERT_TRUE(client);
  std::vector<engine::EngineRequest> batch;
  for (size_t i = 0; i < prompts_.size(); ++i) {
    batch.push_back(testing::greedy_request("p" + std::to_string(i), prompts_[i], 24));
    // Nothing shared between requests: a resumed request finds its own work, nobody else's.
    batch.back().cache_salt = "salt" + std::to_string(i);
  }
  auto streams = testing::submit_together(*client, std::move(batch));
  ASSERT_EQ(streams.size(), prompts_.size());
  for (size_t i = 0; i < prompts_.size(); ++i)
    EXPECT_EQ(testing::collect(*streams[i])[0].tokens, expected_[i]) << "prompt " << i;
  ASSERT_TRUE(testing::wait_idle(*client));
  const auto s = client->stats();
  EXPECT_GT(s.num_preemptions, 0) << "the pool was meant to force preemption";
  // Every request has its own salt, so a tier hit is a preempted request finding its own blocks.
  EXPECT_GT(s.cpu_tier.hits, 0) << "a preempted request should resume from the RAM tier";
  EXPECT_GT(s.external_prefix_cache_hits, 0);
}

}  // namespace
}  // namespace strata
