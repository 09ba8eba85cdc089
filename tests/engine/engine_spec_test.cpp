// Speculative decoding (n-gram prompt lookup) on real weights (stories260K): greedy output token
// for token that of plain decoding, alone, batched, with prefix hits and under preemption, while
// drafts are actually proposed and accepted.
#include <gtest/gtest.h>

#include "core/json.h"
#include "engine_test_util.h"

namespace strata {
namespace {

// Prompts that repeat themselves (a story's own greedy continuation appended twice) and plain
// golden prompts.
std::vector<std::vector<int32_t>> prompts() {
  auto j = read_json_file(testing::shared_data_path("golden/stories260K.json"));
  EXPECT_TRUE(j.ok());
  std::vector<std::vector<int32_t>> out;
  for (const auto& c : (*j)["cases"]) {
    std::vector<int32_t> ids = c["prompt_ids"].get<std::vector<int32_t>>();
    out.push_back(ids);
    const auto gen = c["generated_ids"].get<std::vector<int32_t>>();
    const size_t n = std::min<size_t>(gen.size(), 40);
    std::vector<int32_t> rep = ids;
    for (int k = 0; k < 2; ++k) rep.insert(rep.end(), gen.begin(), gen.begin() + n);
    out.push_back(rep);
  }
  return out;
}

engine::EngineConfig config(bool speculative, int64_t pool_tokens) {
  auto c = testing::engine_config(testing::shared_data_path("models/stories260K-hf"), "auto", 0);
  c.cache.block_size = 16;
  c.cache.kv_cache_memory_bytes = 1280 * pool_tokens;
  c.scheduler.max_model_len = 256;
  c.scheduler.max_num_batched_tokens = 48;
  if (speculative)
    c.scheduler.speculative = {.method = "ngram",
                               .num_speculative_tokens = 4,
                               .prompt_lookup_min = 2,
                               .prompt_lookup_max = 3};
  return c;
}

std::vector<std::vector<int32_t>> run(const engine::EngineConfig& cfg, bool together,
                                      engine::EngineStats* stats) {
  auto client = engine::EngineClient::create(cfg);
  EXPECT_TRUE(client.ok()) << client.status().to_string();
  if (!client.ok()) return {};
  const auto ps = prompts();
  std::vector<std::vector<int32_t>> out;
  if (together) {
    std::vector<engine::EngineRequest> batch;
    for (int rep = 0; rep < 3; ++rep)
      for (size_t i = 0; i < ps.size(); ++i)
        batch.push_back(
            testing::greedy_request(std::to_string(rep) + "-" + std::to_string(i), ps[i], 120));
    for (auto& s : testing::submit_together(**client, std::move(batch)))
      out.push_back(testing::collect(*s)[0].tokens);
  } else {
    for (size_t i = 0; i < ps.size(); ++i)
      out.push_back(testing::collect(**(*client)->submit(
          testing::greedy_request(std::to_string(i), ps[i], 120)))[0]
                        .tokens);
  }
  EXPECT_TRUE(testing::wait_idle(**client));
  *stats = (*client)->stats();
  return out;
}

class EngineSpeculative : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!file_exists(testing::shared_data_path("models/stories260K-hf/config.json")))
      GTEST_SKIP() << "needs ../shared/data/models/stories260K-hf";
  }
};

TEST_F(EngineSpeculative, GreedyOutputIsPlainDecodingAloneAndBatched) {
  for (bool together : {false, true}) {
    SCOPED_TRACE(together ? "batched" : "alone");
    engine::EngineStats plain_stats, spec_stats;
    const auto plain = run(config(false, 4096), together, &plain_stats);
    const auto spec = run(config(true, 4096), together, &spec_stats);
    ASSERT_EQ(plain.size(), spec.size());
    for (size_t i = 0; i < plain.size(); ++i) EXPECT_EQ(spec[i], plain[i]) << "request " << i;
    EXPECT_EQ(plain_stats.spec_num_drafts, 0);
    EXPECT_GT(spec_stats.spec_num_drafts, 10);
    EXPECT_GT(spec_stats.spec_num_accepted_tokens, spec_stats.spec_num_draft_tokens / 10)
        << "repetitive stories should accept drafts";
    EXPECT_LE(spec_stats.spec_num_accepted_tokens, spec_stats.spec_num_draft_tokens);
    EXPECT_EQ(spec_stats.generation_tokens, plain_stats.generation_tokens);
    // Alone, accepted drafts save steps (batched, drafts also share the 48-token budget).
    if (!together) EXPECT_LT(spec_stats.num_steps, plain_stats.num_steps);
    ASSERT_EQ(spec_stats.spec_accepted_per_pos.size(), 4u);
    EXPECT_GE(spec_stats.spec_accepted_per_pos[0], spec_stats.spec_accepted_per_pos[3]);
  }
}

TEST_F(EngineSpeculative, GreedyOutputIsPlainDecodingUnderPreemption) {
  engine::EngineStats plain_stats, spec_stats;
  const auto plain = run(config(false, 4096), true, &plain_stats);
  const auto spec = run(config(true, 272), true, &spec_stats);  // 17 blocks: preemption
  ASSERT_EQ(plain.size(), spec.size());
  for (size_t i = 0; i < plain.size(); ++i) EXPECT_EQ(spec[i], plain[i]) << "request " << i;
  EXPECT_GT(spec_stats.num_preemptions, 0);
  EXPECT_GT(spec_stats.spec_num_accepted_tokens, 0);
}

TEST_F(EngineSpeculative, SamplingRequestsDecodePlainly) {
  auto client = engine::EngineClient::create(config(true, 4096));
  ASSERT_TRUE(client.ok());
  auto r = testing::greedy_request("s", prompts()[1], 40);
  r.params.temperature = 0.8f;
  r.params.seed = 7;
  auto a = testing::collect(**(*client)->submit(r))[0].tokens;
  ASSERT_TRUE(testing::wait_idle(**client));
  EXPECT_EQ((*client)->stats().spec_num_drafts, 0) << "drafts are for greedy requests only";
  EXPECT_EQ(a.size(), 40u);
}

}  // namespace
}  // namespace strata
