// Prompts built with real tokenizers (the local tokenizer module) have exact token counts.
#include <gtest/gtest.h>

#include <set>

#include "bench/dataset.h"
#include "test_util.h"
#include "tokenizer/tokenizer.h"

namespace strata::bench {
namespace {

class LocalTokenizerDatasets : public ::testing::TestWithParam<const char*> {};

TEST_P(LocalTokenizerDatasets, RandomPromptsHaveExactCounts) {
  STRATA_REQUIRE_SHARED(GetParam());
  std::string path = strata::testing::shared_data_path(GetParam());
  auto prompt_tok = make_local_tokenizer(path);
  ASSERT_TRUE(prompt_tok.ok()) << prompt_tok.status().to_string();
  auto tok = Tokenizer::load(path);
  ASSERT_TRUE(tok.ok());
  int special = (*prompt_tok)->num_special_tokens_to_add();
  EXPECT_EQ(special, (*tok)->info().add_bos ? 1 : 0);
  RandomDatasetOptions o{.num_prompts = 24,
                         .input_len = 120,
                         .output_len = 16,
                         .range_ratio = 0.5,
                         .prefix_len = 8,
                         .seed = 11};
  auto ds = sample_random(**prompt_tok, o);
  ASSERT_TRUE(ds.ok()) << ds.status().to_string();
  std::set<std::string> distinct;
  int exact = 0;
  for (const auto& r : ds->requests) {
    auto ids = (*tok)->encode(r.prompt, /*add_special_tokens=*/false);
    ASSERT_TRUE(ids.ok());
    exact += static_cast<int64_t>(ids->size()) == r.prompt_len;
    EXPECT_GE(r.prompt_len, 8 + 56);  // prefix + floor((120 - special) * 0.5), special <= 1
    EXPECT_LE(r.prompt_len, 8 + 180);
    for (int32_t id : *ids) EXPECT_FALSE((*tok)->is_special(id)) << id;
    distinct.insert(r.prompt);
  }
  // vLLM's procedure (decode, re-encode, trim or extend, 10 rounds) converges for real
  // vocabularies; anything left over is reported as a note.
  EXPECT_EQ(exact, 24) << (ds->notes.empty() ? "" : ds->notes[0]);
  EXPECT_EQ(distinct.size(), 24u);
}

TEST_P(LocalTokenizerDatasets, PrefixRepetitionAndShareGpt) {
  STRATA_REQUIRE_SHARED(GetParam());
  STRATA_REQUIRE_SHARED("datasets/ShareGPT_V3_filtered_500.json");
  std::string path = strata::testing::shared_data_path(GetParam());
  auto prompt_tok = make_local_tokenizer(path);
  ASSERT_TRUE(prompt_tok.ok());
  auto tok = Tokenizer::load(path);
  ASSERT_TRUE(tok.ok());
  auto pr = sample_prefix_repetition(
      **prompt_tok, {.num_prompts = 12, .prefix_len = 32, .suffix_len = 16, .num_prefixes = 3});
  ASSERT_TRUE(pr.ok()) << pr.status().to_string();
  ASSERT_EQ(pr->requests.size(), 12u);
  for (const auto& r : pr->requests) EXPECT_EQ(r.prompt_len, 48);
  auto sg = sample_sharegpt(
      **prompt_tok,
      {.path = strata::testing::shared_data_path("datasets/ShareGPT_V3_filtered_500.json"),
       .num_prompts = 20,
       .output_len = 64});
  ASSERT_TRUE(sg.ok()) << sg.status().to_string();
  for (const auto& r : sg->requests) {
    auto ids = (*tok)->encode(r.prompt, /*add_special_tokens=*/true);
    ASSERT_TRUE(ids.ok());
    EXPECT_EQ(static_cast<int64_t>(ids->size()), r.prompt_len);
  }
}

INSTANTIATE_TEST_SUITE_P(RealVocabularies, LocalTokenizerDatasets,
                         ::testing::Values("tokenizers/gpt2", "tokenizers/qwen2.5",
                                           "tokenizers/llama2", "tokenizers/mixtral",
                                           "models/stories260K-hf"));

TEST(LocalTokenizer, MissingPathIsAClearError) {
  auto t = make_local_tokenizer("/nonexistent/tokenizer-dir");
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find("--tokenizer"), std::string::npos);
}

}  // namespace
}  // namespace strata::bench
