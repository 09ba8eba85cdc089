// The whole engine path (tokenizer, scheduler, paged KV, sampler, detokenizer) reproduces the
// golden greedy tokens of stories260K, alone and in every batching situation.
#include <gtest/gtest.h>

#include "core/json.h"
#include "engine_test_util.h"
#include "kernels/backend.h"

namespace strata {
namespace {

using testing::Case;
using testing::cases;

class EngineGolden : public ::testing::TestWithParam<const char*> {};

TEST_P(EngineGolden, TextAndIdPromptsMatchGoldenAloneAndTogether) {
  STRATA_REQUIRE_SHARED("golden/stories260K.json");
  STRATA_REQUIRE_SHARED(GetParam());
  auto cfg = testing::engine_config(testing::shared_data_path(GetParam()), "auto", 32 << 20);
  auto client = engine::EngineClient::create(cfg);
  ASSERT_TRUE(client.ok()) << client.status().to_string();
  const auto& tok = (*client)->info().tokenizer;
  ASSERT_TRUE(tok) << "stories260K has a tokenizer";
  auto all = cases();
  ASSERT_FALSE(all.empty());
  // Text prompts tokenize to the golden prompt ids.
  for (const auto& c : all) {
    if (!c.has_prompt) continue;
    auto ids = tok->encode(c.prompt);
    ASSERT_TRUE(ids.ok());
    EXPECT_EQ(*ids, c.prompt_ids) << c.prompt;
  }
  // Alone, one at a time.
  for (size_t i = 0; i < all.size(); ++i) {
    auto s = (*client)->submit(testing::greedy_request(
        "alone" + std::to_string(i), all[i].prompt_ids, static_cast<int>(all[i].generated.size())));
    ASSERT_TRUE(s.ok()) << s.status().to_string();
    auto out = testing::collect(**s);
    EXPECT_EQ(out[0].tokens, all[i].generated) << "case " << i;
    EXPECT_EQ(out[0].finish_reason, "length");
    // The streamed text continues the prompt: prompt text + stream == decode(prompt + output).
    std::vector<int32_t> full = all[i].prompt_ids;
    full.insert(full.end(), out[0].tokens.begin(), out[0].tokens.end());
    EXPECT_EQ(tok->decode(all[i].prompt_ids) + out[0].text, tok->decode(full)) << "case " << i;
  }
  // All together, twice each (the second copy hits the prefix cache).
  std::vector<engine::EngineRequest> batch;
  for (int rep = 0; rep < 2; ++rep)
    for (size_t i = 0; i < all.size(); ++i)
      batch.push_back(
          testing::greedy_request("batch" + std::to_string(rep) + "-" + std::to_string(i),
                                  all[i].prompt_ids, static_cast<int>(all[i].generated.size())));
  auto streams = testing::submit_together(**client, std::move(batch));
  ASSERT_EQ(streams.size(), 2 * all.size());
  for (size_t k = 0; k < streams.size(); ++k)
    EXPECT_EQ(testing::collect(*streams[k])[0].tokens, all[k % all.size()].generated) << k;
  // A long prompt (a golden prompt and its continuation) run twice: the second run takes its
  // prefix from the cache and continues identically.
  std::vector<int32_t> long_prompt = all[0].prompt_ids;
  long_prompt.insert(long_prompt.end(), all[0].generated.begin(), all[0].generated.begin() + 100);
  auto first =
      testing::collect(**(*client)->submit(testing::greedy_request("long1", long_prompt, 60)));
  ASSERT_TRUE(testing::wait_idle(**client));
  const int64_t hits = (*client)->stats().prefix_cache_hits;
  auto second =
      testing::collect(**(*client)->submit(testing::greedy_request("long2", long_prompt, 60)));
  ASSERT_TRUE(testing::wait_idle(**client));
  EXPECT_GE((*client)->stats().prefix_cache_hits - hits, 96) << "six full blocks of 16 hit";
  EXPECT_EQ(first[0].tokens, second[0].tokens);
  EXPECT_EQ(std::vector<int32_t>(first[0].tokens.begin(), first[0].tokens.end()),
            std::vector<int32_t>(all[0].generated.begin() + 100, all[0].generated.begin() + 160));
}

INSTANTIATE_TEST_SUITE_P(HfAndGguf, EngineGolden,
                         ::testing::Values("models/stories260K-hf", "models/stories260K.gguf"));

// Chunked prefill with a tiny token budget, small blocks and a pool so small that requests are
// preempted and recomputed: still the golden tokens.
TEST(EngineGoldenStress, ChunkedTinyBudgetPreemptionKeepsGreedyOutput) {
  STRATA_REQUIRE_SHARED("models/stories260K-hf");
  auto all = cases();
  for (int64_t block : {8, 32}) {
    auto cfg =
        testing::engine_config(testing::shared_data_path("models/stories260K-hf"), "auto", 0);
    cfg.cache.block_size = block;
    cfg.cache.kv_cache_memory_bytes = 1280 * 272;  // 272 tokens of KV in all
    cfg.scheduler.max_num_batched_tokens = 16;
    cfg.scheduler.max_model_len = 256;
    auto client = engine::EngineClient::create(cfg);
    ASSERT_TRUE(client.ok()) << client.status().to_string();
    std::vector<engine::EngineRequest> batch;
    for (int rep = 0; rep < 4; ++rep)
      for (size_t i = 0; i < all.size(); ++i)
        batch.push_back(testing::greedy_request(std::to_string(rep) + "-" + std::to_string(i),
                                                all[i].prompt_ids,
                                                static_cast<int>(all[i].generated.size())));
    auto streams = testing::submit_together(**client, std::move(batch));
    ASSERT_EQ(streams.size(), 4 * all.size());
    for (size_t k = 0; k < streams.size(); ++k)
      EXPECT_EQ(testing::collect(*streams[k])[0].tokens, all[k % all.size()].generated)
          << "block " << block << " request " << k;
    ASSERT_TRUE(testing::wait_idle(**client));
    EXPECT_GT((*client)->stats().num_preemptions, 0) << "the pool was meant to force preemption";
  }
}

// TinyLLama-v0, a real trained model in Q4_0: the golden greedy ids (cut before near-ties of an
// exact F32-dequantized reference, where llama.cpp agrees) with every kernel variant this CPU
// runs, from the reference (dequantized floats) to the integer kernels, alone and batched.
TEST(EngineGoldenQuantized, TinyLlamaQ4_0MatchesGoldenWithEveryVariant) {
  STRATA_REQUIRE_SHARED("golden/tinyllama-v0.json");
  STRATA_REQUIRE_SHARED("models/tinyllama-v0/TinyLLama-v0.Q4_0.gguf");
  auto all = cases("golden/tinyllama-v0.json");
  ASSERT_FALSE(all.empty());
  for (const KernelVariantInfo* v : supported_kernel_variants(/*with_reference=*/true)) {
    auto cfg = testing::engine_config(
        testing::shared_data_path("models/tinyllama-v0/TinyLLama-v0.Q4_0.gguf"), "auto", 16 << 20);
    cfg.kernels = v->name;
    auto client = engine::EngineClient::create(cfg);
    ASSERT_TRUE(client.ok()) << v->name << ": " << client.status().to_string();
    const auto& tok = (*client)->info().tokenizer;
    ASSERT_TRUE(tok);
    for (const auto& c : all) {
      auto ids = tok->encode(c.prompt);
      ASSERT_TRUE(ids.ok());
      EXPECT_EQ(*ids, c.prompt_ids) << c.prompt;
    }
    std::vector<engine::EngineRequest> batch;
    for (size_t i = 0; i < all.size(); ++i)
      batch.push_back(testing::greedy_request("b" + std::to_string(i), all[i].prompt_ids,
                                              static_cast<int>(all[i].generated.size())));
    auto streams = testing::submit_together(**client, std::move(batch));
    for (size_t i = 0; i < all.size(); ++i)
      EXPECT_EQ(testing::collect(*streams[i])[0].tokens, all[i].generated)
          << v->name << " case " << i << " (batched)";
    for (size_t i = 0; i < all.size(); ++i) {
      auto s = (*client)->submit(testing::greedy_request(
          "a" + std::to_string(i), all[i].prompt_ids, static_cast<int>(all[i].generated.size())));
      ASSERT_TRUE(s.ok());
      EXPECT_EQ(testing::collect(**s)[0].tokens, all[i].generated)
          << v->name << " case " << i << " (alone)";
    }
  }
}

}  // namespace
}  // namespace strata
