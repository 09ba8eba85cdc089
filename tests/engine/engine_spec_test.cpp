// Speculative decoding on real weights (stories260K), with n-gram prompt lookup and with draft
// models (the model itself, and its first four layers): greedy output token for token that of plain
// decoding, alone, batched, with prefix hits and under preemption, while drafts are actually
// proposed and accepted.
#include <gtest/gtest.h>

#include <cmath>
#include <map>

#include "engine_test_util.h"

namespace strata {
namespace {

// Prompts that repeat themselves (a story's own greedy continuation appended twice) and plain
// golden prompts.
std::vector<std::vector<int32_t>> prompts() {
  std::vector<std::vector<int32_t>> out;
  for (const auto& c : testing::cases()) {
    out.push_back(c.prompt_ids);
    const size_t n = std::min<size_t>(c.generated.size(), 40);
    std::vector<int32_t> rep = c.prompt_ids;
    for (int k = 0; k < 2; ++k) rep.insert(rep.end(), c.generated.begin(), c.generated.begin() + n);
    out.push_back(rep);
  }
  return out;
}

enum class Method { kPlain, kNgram, kDraftSelf, kDraftFourLayers };

const char* method_name(Method m) {
  switch (m) {
    case Method::kPlain:
      return "plain";
    case Method::kNgram:
      return "ngram";
    case Method::kDraftSelf:
      return "draft model: the target itself";
    case Method::kDraftFourLayers:
      return "draft model: the target's first four layers";
  }
  return "";
}

// A pool of `pool_tokens` tokens whatever the method (a draft model's KV shares the blocks).
engine::EngineConfig config(Method method, int64_t pool_tokens) {
  const std::string model = testing::shared_data_path("models/stories260K-hf");
  auto c = testing::engine_config(model, "auto", 0);
  c.cache.block_size = 16;
  int64_t bytes_per_token = 1280;  // 5 layers x K+V x 4 heads x 8 values x f32
  c.scheduler.max_model_len = 256;
  c.scheduler.max_num_batched_tokens = 48;
  if (method == Method::kNgram)
    c.scheduler.speculative = {.method = "ngram",
                               .num_speculative_tokens = 4,
                               .prompt_lookup_min = 2,
                               .prompt_lookup_max = 3};
  if (method == Method::kDraftSelf || method == Method::kDraftFourLayers) {
    c.scheduler.speculative = {.method = "draft_model", .num_speculative_tokens = 4};
    c.scheduler.speculative.draft_model = model;
    if (method == Method::kDraftFourLayers)
      c.scheduler.speculative.draft_hf_overrides = R"({"num_hidden_layers": 4})";
    bytes_per_token += method == Method::kDraftSelf ? 1280 : 1024;
  }
  c.cache.kv_cache_memory_bytes = bytes_per_token * pool_tokens;
  return c;
}

// Each prompt alone, or three copies of every prompt submitted together (prefix-cache hits).
std::vector<std::vector<int32_t>> run(const engine::EngineConfig& cfg, bool together,
                                      engine::EngineStats* stats) {
  std::vector<std::vector<int32_t>> ps;
  for (int rep = 0; rep < (together ? 3 : 1); ++rep)
    for (const auto& p : prompts()) ps.push_back(p);
  return testing::run_greedy(cfg, ps, 120, together, stats);
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
    engine::EngineStats plain_stats;
    const auto plain = run(config(Method::kPlain, 4096), together, &plain_stats);
    EXPECT_EQ(plain_stats.spec_num_drafts, 0);
    for (Method m : {Method::kNgram, Method::kDraftSelf, Method::kDraftFourLayers}) {
      SCOPED_TRACE(method_name(m));
      engine::EngineStats spec_stats;
      const auto spec = run(config(m, 4096), together, &spec_stats);
      ASSERT_EQ(plain.size(), spec.size());
      for (size_t i = 0; i < plain.size(); ++i) EXPECT_EQ(spec[i], plain[i]) << "request " << i;
      EXPECT_GT(spec_stats.spec_num_drafts, 10);
      EXPECT_GT(spec_stats.spec_num_accepted_tokens, spec_stats.spec_num_draft_tokens / 10)
          << "repetitive stories should accept drafts";
      EXPECT_LE(spec_stats.spec_num_accepted_tokens, spec_stats.spec_num_draft_tokens);
      EXPECT_EQ(spec_stats.generation_tokens, plain_stats.generation_tokens);
      // Alone, accepted drafts save steps (batched, drafts also share the 48-token budget).
      if (!together) {
        EXPECT_LT(spec_stats.num_steps, plain_stats.num_steps);
      }
      ASSERT_EQ(spec_stats.spec_accepted_per_pos.size(), 4u);
      EXPECT_GE(spec_stats.spec_accepted_per_pos[0], spec_stats.spec_accepted_per_pos[3]);
      if (m == Method::kDraftSelf) {
        // The target as its own draft proposes what greedy decoding gives (the kernels are batch
        // invariant, and its KV mirrors the target's): every draft is accepted. A draft KV at a
        // wrong position or of a wrong token would show here.
        EXPECT_EQ(spec_stats.spec_num_accepted_tokens, spec_stats.spec_num_draft_tokens);
      }
    }
  }
}

// Steps without drafts (here: while 12 or more requests run) leave the draft model out; when a
// request proposes again the draft catches up on the tokens it missed in one pass. The target as
// its own draft still has every draft accepted.
TEST_F(EngineSpeculative, DraftModelCatchesUpAfterStepsWithoutDrafts) {
  engine::EngineStats plain_stats, always_stats, spec_stats;
  const auto plain = run(config(Method::kPlain, 4096), true, &plain_stats);
  run(config(Method::kDraftSelf, 4096), true, &always_stats);
  auto cfg = config(Method::kDraftSelf, 4096);
  cfg.scheduler.speculative.disable_by_batch_size = 12;
  const auto spec = run(cfg, true, &spec_stats);
  ASSERT_EQ(plain.size(), spec.size());
  ASSERT_GT(plain.size(), 12u);
  for (size_t i = 0; i < plain.size(); ++i) EXPECT_EQ(spec[i], plain[i]) << "request " << i;
  EXPECT_GT(spec_stats.spec_num_drafts, 10);
  // Tokens of entries without drafts: every entry gives one token, plus its accepted drafts.
  auto undrafted = [](const engine::EngineStats& st) {
    return st.generation_tokens - st.spec_num_accepted_tokens - st.spec_num_drafts;
  };
  EXPECT_GT(undrafted(spec_stats), undrafted(always_stats) + static_cast<int64_t>(plain.size()))
      << "the busy steps should have had no drafts";
  EXPECT_EQ(spec_stats.spec_num_accepted_tokens, spec_stats.spec_num_draft_tokens);
}

TEST_F(EngineSpeculative, GreedyOutputIsPlainDecodingUnderPreemption) {
  engine::EngineStats plain_stats;
  const auto plain = run(config(Method::kPlain, 4096), true, &plain_stats);
  for (Method m : {Method::kNgram, Method::kDraftSelf, Method::kDraftFourLayers}) {
    SCOPED_TRACE(method_name(m));
    engine::EngineStats spec_stats;
    const auto spec = run(config(m, 272), true, &spec_stats);  // 17 blocks: preemption
    ASSERT_EQ(plain.size(), spec.size());
    for (size_t i = 0; i < plain.size(); ++i) EXPECT_EQ(spec[i], plain[i]) << "request " << i;
    EXPECT_GT(spec_stats.num_preemptions, 0);
    EXPECT_GT(spec_stats.spec_num_accepted_tokens, 0);
    if (m == Method::kDraftSelf) {
      EXPECT_EQ(spec_stats.spec_num_accepted_tokens, spec_stats.spec_num_draft_tokens);
    }
  }
}

TEST_F(EngineSpeculative, SeededSamplingRequestsDecodePlainly) {
  auto client = engine::EngineClient::create(config(Method::kNgram, 4096));
  ASSERT_TRUE(client.ok());
  auto r = testing::greedy_request("s", prompts()[1], 40);
  r.params.temperature = 0.8f;
  r.params.seed = 7;
  auto a = testing::collect(**(*client)->submit(r))[0].tokens;
  ASSERT_TRUE(testing::wait_idle(**client));
  EXPECT_EQ((*client)->stats().spec_num_drafts, 0)
      << "a seed must give the same tokens in any batch: no drafts";
  EXPECT_EQ(a.size(), 40u);
}

// Unseeded sampling with speculation (rejection sampling): the distribution of the tokens is that
// of plain sampling. Many requests on one repetitive prompt, temperature 1; the tokens at a few
// output positions are compared between plain and each speculative engine with a chi-square
// homogeneity test (fixed engine seeds: the test is deterministic).
TEST_F(EngineSpeculative, SampledOutputHasThePlainDistribution) {
  constexpr int kRequests = 1200;
  constexpr int kPositions[] = {2, 5, 9};
  constexpr Method kMethods[] = {Method::kPlain, Method::kNgram, Method::kDraftFourLayers};
  std::vector<std::map<int32_t, int64_t>> counts[std::size(kMethods)];
  engine::EngineStats stats[std::size(kMethods)];
  for (size_t m = 0; m < std::size(kMethods); ++m) {
    auto cfg = config(kMethods[m], 4096);
    cfg.seed = 11 + m;
    auto client = engine::EngineClient::create(cfg);
    ASSERT_TRUE(client.ok()) << client.status().to_string();
    counts[m].resize(std::size(kPositions));
    for (int i = 0; i < kRequests; ++i) {
      auto r = testing::greedy_request("r" + std::to_string(i), prompts()[1], 12);
      r.params.temperature = 1.0f;
      const auto out = testing::collect(**(*client)->submit(r))[0].tokens;
      ASSERT_EQ(out.size(), 12u);
      for (size_t k = 0; k < std::size(kPositions); ++k) ++counts[m][k][out[kPositions[k]]];
    }
    ASSERT_TRUE(testing::wait_idle(**client));
    stats[m] = (*client)->stats();
  }
  EXPECT_EQ(stats[0].spec_num_drafts, 0);
  for (size_t m = 1; m < std::size(kMethods); ++m) {
    SCOPED_TRACE(method_name(kMethods[m]));
    EXPECT_GT(stats[m].spec_num_draft_tokens, 500) << "sampled requests should get drafts";
    EXPECT_GT(stats[m].spec_num_accepted_tokens, 100);
    for (size_t k = 0; k < std::size(kPositions); ++k) {
      const auto chi = testing::two_sample_chi_square(counts[0][k], counts[m][k]);
      ASSERT_GT(chi.dof, 0);
      EXPECT_LT(chi.statistic, chi.critical)
          << "output position " << kPositions[k] << ": chi-square " << chi.statistic << " with "
          << chi.dof << " dof";
    }
  }
}

}  // namespace
}  // namespace strata
