// DeepSeek (MLA latent cache) and MoE models through the whole engine: greedy output is the same
// alone, batched with chunked prefill and preemption in a small KV pool, and after a prefix-cache
// hit.
#include <gtest/gtest.h>

#include "engine/engine_test_util.h"
#include "tiny_models.h"

namespace strata {
namespace {

using testing::collect;
using testing::greedy_request;

std::vector<int32_t> prompt(int64_t vocab, int n, int seed) {
  std::vector<int32_t> p;
  for (int i = 0; i < n; ++i) p.push_back(static_cast<int32_t>((i * 41 + seed * 13 + 1) % vocab));
  return p;
}

engine::EngineConfig config_for(const std::string& dir, int64_t kv_bytes, bool prefix_caching) {
  auto c = testing::engine_config(dir, "dummy", kv_bytes);
  c.scheduler.max_model_len = 128;
  c.cache.enable_prefix_caching = prefix_caching;
  c.seed = 11;
  return c;
}

std::vector<int32_t> run_alone(const engine::EngineConfig& cfg, const std::vector<int32_t>& p,
                               int max_tokens) {
  auto client = engine::EngineClient::create(cfg);
  EXPECT_TRUE(client.ok()) << client.status().to_string();
  if (!client.ok()) return {};
  return collect(**(*client)->submit(greedy_request("alone", p, max_tokens)))[0].tokens;
}

TEST(MoeEngine, GreedyAloneEqualsBatchedChunkedPreemptedAndPrefixHit) {
  for (const char* name : {"deepseek_v3_fp8", "deepseek_v2_lite", "qwen3_moe", "mixtral"}) {
    const testing::TinyArch* arch = nullptr;
    for (const auto& a : testing::tiny_archs())
      if (std::string(a.name) == name) arch = &a;
    ASSERT_NE(arch, nullptr);
    const std::string dir = testing::write_tiny_config(arch->config_json);
    const int64_t V = 256;
    std::vector<std::vector<int32_t>> prompts;
    for (int i = 0; i < 5; ++i) prompts.push_back(prompt(V, 20 + 10 * i, i));
    // The last prompt shares its first 40 tokens with the fourth.
    prompts.push_back(prompts[3]);
    prompts.back().resize(40);
    for (int i = 0; i < 9; ++i) prompts.back().push_back(static_cast<int32_t>(200 + i));

    const auto roomy = config_for(dir, 4 << 20, /*prefix_caching=*/false);
    std::vector<std::vector<int32_t>> expected;
    for (const auto& p : prompts) expected.push_back(run_alone(roomy, p, 16));
    ASSERT_EQ(expected[0].size(), 16u) << name;

    // All at once: 24 tokens per step, blocks of 8, a pool of 20 blocks (preemption). The pool is
    // sized from the model's KV spec (bf16 cache: the engine's default for these weights).
    LoadOptions lo;
    lo.model = dir;
    lo.load_format = "dummy";
    ThreadPool pool(1);
    lo.pool = &pool;
    lo.limits = {16, 16, 4};
    auto m = load_model(lo);
    ASSERT_TRUE(m.ok()) << m.status().to_string();
    const int64_t per_token = m->model->kv_spec().bytes_per_token(DType::kBF16);
    auto small = config_for(dir, per_token * 8 * 20, /*prefix_caching=*/true);
    small.cache.block_size = 8;
    small.scheduler.max_num_batched_tokens = 24;
    {
      auto client = engine::EngineClient::create(small);
      ASSERT_TRUE(client.ok()) << name << ": " << client.status().to_string();
      std::vector<engine::EngineRequest> batch;
      for (size_t i = 0; i + 1 < prompts.size(); ++i)
        batch.push_back(greedy_request("b" + std::to_string(i), prompts[i], 16));
      auto streams = testing::submit_together(**client, std::move(batch));
      ASSERT_EQ(streams.size(), prompts.size() - 1);
      for (size_t i = 0; i + 1 < prompts.size(); ++i)
        EXPECT_EQ(collect(*streams[i])[0].tokens, expected[i]) << name << " prompt " << i;
      ASSERT_TRUE(testing::wait_idle(**client));
      EXPECT_GT((*client)->stats().num_preemptions, 0) << name;
    }
    // Prefix hit: the last prompt reuses the cached blocks of the fourth's first 40 tokens.
    auto client = engine::EngineClient::create(small);
    ASSERT_TRUE(client.ok());
    EXPECT_EQ(collect(**(*client)->submit(greedy_request("first", prompts[3], 16)))[0].tokens,
              expected[3]);
    ASSERT_TRUE(testing::wait_idle(**client));
    const int64_t hits_before = (*client)->stats().prefix_cache_hits;
    auto last = collect(**(*client)->submit(greedy_request("hit", prompts.back(), 16)))[0];
    ASSERT_TRUE(testing::wait_idle(**client));
    EXPECT_EQ(last.tokens, expected.back()) << name;
    EXPECT_GE((*client)->stats().prefix_cache_hits - hits_before, 40) << name;
  }
}

}  // namespace
}  // namespace strata
