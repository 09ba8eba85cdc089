// Speculative decoding with a draft model on dummy weights: the dummy llama-134m with its first
// four layers as the draft (dummy weights are a function of the seed and the tensor name, so a
// config with fewer layers is exactly the target's first layers). Greedy output token for token
// that of plain decoding, alone, batched with prefix-cache hits, and under preemption; the memory
// plan gives each block both models' KV; a draft that cannot load is a clear start-up error.
#include <gtest/gtest.h>

#include "core/rng.h"
#include "engine_test_util.h"

namespace strata {
namespace {

constexpr int64_t kBlock = 16;
constexpr int64_t kTargetBytesPerToken = 12 * 2 * 12 * 64 * 2;  // layers x K+V x heads x dim x bf16
constexpr int64_t kDraftBytesPerToken = 4 * 2 * 12 * 64 * 2;

engine::EngineConfig config(bool draft, int64_t pool_tokens) {
  const std::string model = testing::repo_path("models/llama-134m");
  auto c = testing::engine_config(model, "dummy", 0);
  c.cache.block_size = kBlock;
  c.scheduler.max_model_len = 128;
  c.scheduler.max_num_batched_tokens = 64;
  int64_t per_token = kTargetBytesPerToken;
  if (draft) {
    c.scheduler.speculative = {.method = "draft_model", .num_speculative_tokens = 3};
    c.scheduler.speculative.draft_model = model;
    c.scheduler.speculative.draft_hf_overrides = R"({"num_hidden_layers": 4})";
    per_token += kDraftBytesPerToken;
  }
  c.cache.kv_cache_memory_bytes = per_token * pool_tokens;
  return c;
}

// Prompts of random ids, each twice (the second copy hits the prefix cache when batched).
std::vector<std::vector<int32_t>> prompts() {
  Rng rng(5);
  std::vector<std::vector<int32_t>> out;
  for (int i = 0; i < 3; ++i) {
    std::vector<int32_t> p{1};
    for (int k = 0; k < 20 + 7 * i; ++k) p.push_back(static_cast<int32_t>(3 + rng.below(31990)));
    out.push_back(p);
    out.push_back(p);
  }
  return out;
}

// Every other prompt alone (no copies), or all of them together (each copy hits the prefix cache).
std::vector<std::vector<int32_t>> run(const engine::EngineConfig& cfg, bool together,
                                      engine::EngineStats* stats) {
  std::vector<std::vector<int32_t>> ps;
  const auto all = prompts();
  for (size_t i = 0; i < all.size(); i += together ? 1 : 2) ps.push_back(all[i]);
  return testing::run_greedy(cfg, ps, 24, together, stats);
}

TEST(EngineDraftModel, GreedyOutputIsPlainDecodingOnTheDummyLlama134m) {
  struct Case {
    const char* name;
    bool together;
    int64_t pool_tokens;
  } cases[] = {{"alone", false, 1024}, {"batched", true, 1024}, {"preempted", true, 160}};
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    engine::EngineStats plain_stats, spec_stats;
    const auto plain = run(config(false, 1024), c.together, &plain_stats);
    const auto spec = run(config(true, c.pool_tokens), c.together, &spec_stats);
    ASSERT_EQ(plain.size(), spec.size());
    for (size_t i = 0; i < plain.size(); ++i) EXPECT_EQ(spec[i], plain[i]) << "request " << i;
    EXPECT_GT(spec_stats.spec_num_draft_tokens, 0);
    EXPECT_EQ(spec_stats.generation_tokens, plain_stats.generation_tokens);
    if (c.pool_tokens < 1024) EXPECT_GT(spec_stats.num_preemptions, 0);
  }
}

TEST(EngineDraftModel, EachBlockHoldsBothModelsKv) {
  auto e = engine::Engine::create(config(true, 1024));
  ASSERT_TRUE(e.ok()) << e.status().to_string();
  EXPECT_EQ((*e)->info().kv_cache_tokens, 1024);
  auto plain = engine::Engine::create(config(false, 1024));
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ((*plain)->info().kv_cache_tokens, 1024);
}

TEST(EngineDraftModel, ADraftThatCannotLoadIsAStartUpError) {
  auto c = config(true, 1024);
  c.scheduler.speculative.draft_model = "/nonexistent/draft";
  auto e = engine::Engine::create(c);
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.status().message().find("--speculative-config draft model /nonexistent/draft"),
            std::string::npos)
      << e.status().message();
}

}  // namespace
}  // namespace strata
