#include "bench/dataset.h"

#include <gtest/gtest.h>

#include <map>
#include <set>

#include "core/file_util.h"
#include "test_util.h"
#include "toy_tokenizer.h"

namespace strata::bench {
namespace {

using testing::ToyTokenizer;

class RandomDataset : public ::testing::TestWithParam<bool> {};

TEST_P(RandomDataset, PromptsHaveExactTokenCounts) {
  ToyTokenizer tok(/*known_vocab=*/GetParam());
  RandomDatasetOptions o{.num_prompts = 30, .input_len = 50, .output_len = 10, .seed = 7};
  auto ds = sample_random(tok, o);
  ASSERT_TRUE(ds.ok()) << ds.status().to_string();
  ASSERT_EQ(ds->requests.size(), 30u);
  std::set<std::string> distinct;
  for (const auto& r : ds->requests) {
    // One special token (BOS) is added by the server, so the prompt itself has 49.
    EXPECT_EQ(ToyTokenizer::encode_one(r.prompt).size(), 49u) << r.prompt;
    EXPECT_EQ(r.prompt_len, 49);
    EXPECT_EQ(r.expected_output_len, 10);
    distinct.insert(r.prompt);
  }
  EXPECT_GT(distinct.size(), 15u);  // the toy vocabulary allows only 28 start offsets
  EXPECT_TRUE(ds->notes.empty());
  // Same seed, same prompts.
  auto again = sample_random(tok, o);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->requests[3].prompt, ds->requests[3].prompt);
  o.seed = 8;
  auto other = sample_random(tok, o);
  EXPECT_NE(other->requests[3].prompt, ds->requests[3].prompt);
}

TEST_P(RandomDataset, RangeRatioAndPrefix) {
  ToyTokenizer tok(GetParam());
  RandomDatasetOptions o{.num_prompts = 40,
                         .input_len = 41,
                         .output_len = 20,
                         .range_ratio = 0.5,
                         .prefix_len = 12,
                         .seed = 3};
  auto ds = sample_random(tok, o);
  ASSERT_TRUE(ds.ok()) << ds.status().to_string();
  std::set<int64_t> in_lens, out_lens;
  std::map<std::string, int> heads;
  for (const auto& r : ds->requests) {
    int64_t body = r.prompt_len - 12;
    EXPECT_GE(body, 20);  // floor(40 * 0.5)
    EXPECT_LE(body, 60);  // ceil(40 * 1.5)
    EXPECT_GE(r.expected_output_len, 10);
    EXPECT_LE(r.expected_output_len, 30);
    EXPECT_EQ(static_cast<int64_t>(ToyTokenizer::encode_one(r.prompt).size()), r.prompt_len);
    in_lens.insert(body);
    out_lens.insert(r.expected_output_len);
    heads[r.prompt.substr(0, 6)]++;
  }
  EXPECT_GT(in_lens.size(), 10u);
  EXPECT_GT(out_lens.size(), 5u);
  // Every prompt starts with the same shared prefix.
  EXPECT_EQ(heads.size(), 1u);
}

INSTANTIATE_TEST_SUITE_P(KnownAndUnknownVocab, RandomDataset, ::testing::Bool());

TEST(RandomDatasetErrors, AreClear) {
  ToyTokenizer tok(true);
  auto bad_ratio = sample_random(tok, {.num_prompts = 2, .input_len = 10, .range_ratio = 1.0});
  ASSERT_FALSE(bad_ratio.ok());
  EXPECT_NE(bad_ratio.status().message().find("--random-range-ratio"), std::string::npos);
  auto too_short = sample_random(tok, {.num_prompts = 2, .input_len = 1});
  ASSERT_FALSE(too_short.ok());
  EXPECT_NE(too_short.status().message().find("--random-input-len"), std::string::npos);
}

TEST(FitToTokenCounts, ConvergesThroughMergesAndReportsMismatch) {
  ToyTokenizer tok(true);
  Rng rng(1);
  // "t h t h ..." as ids decodes to "thth..." which re-encodes to half as many tokens.
  std::vector<FitCandidate> c(1);
  c[0].target = 20;
  for (int i = 0; i < 20; ++i) c[0].ids.push_back(i % 2 == 0 ? 19 : 7);
  auto allowed = allowed_prompt_ids(tok);
  ASSERT_TRUE(allowed.ok());
  EXPECT_EQ(allowed->size(), 28u);  // all but the BOS special
  auto mm = fit_to_token_counts(tok, &c, *allowed, &rng);
  ASSERT_TRUE(mm.ok());
  EXPECT_EQ(*mm, 0);
  EXPECT_EQ(c[0].ids.size(), 20u);
  EXPECT_EQ(ToyTokenizer::encode_one(c[0].text).size(), 20u);
}

TEST(ShareGpt, RealFileWithoutReplies) {
  STRATA_REQUIRE_SHARED("datasets/ShareGPT_V3_filtered_500.json");
  ToyTokenizer tok(true);
  ShareGptOptions o{
      .path = strata::testing::shared_data_path("datasets/ShareGPT_V3_filtered_500.json"),
      .num_prompts = 50,
      .seed = 0};
  auto ds = sample_sharegpt(tok, o);
  ASSERT_TRUE(ds.ok()) << ds.status().to_string();
  ASSERT_EQ(ds->requests.size(), 50u);
  for (const auto& r : ds->requests) {
    EXPECT_EQ(r.prompt_len, static_cast<int64_t>(ToyTokenizer::encode_one(r.prompt).size()) + 1);
    EXPECT_GE(r.prompt_len, 4);
    EXPECT_LE(r.prompt_len, 1024);
    EXPECT_EQ(r.expected_output_len, kShareGptDefaultOutputLen);
  }
  ASSERT_FALSE(ds->notes.empty());
  EXPECT_NE(ds->notes[0].find("--sharegpt-output-len"), std::string::npos);
  o.output_len = 32;
  auto fixed = sample_sharegpt(tok, o);
  ASSERT_TRUE(fixed.ok());
  EXPECT_EQ(fixed->requests[0].expected_output_len, 32);
  EXPECT_TRUE(fixed->notes.empty());
  // More prompts than usable entries: oversampled unless --no-oversample.
  o.num_prompts = 2000;
  auto over = sample_sharegpt(tok, o);
  ASSERT_TRUE(over.ok());
  EXPECT_EQ(over->requests.size(), 2000u);
  EXPECT_NE(over->notes.back().find("Oversampled"), std::string::npos);
  o.no_oversample = true;
  auto exact = sample_sharegpt(tok, o);
  ASSERT_TRUE(exact.ok());
  EXPECT_LT(exact->requests.size(), 501u);
  EXPECT_GT(exact->requests.size(), 400u);
}

TEST(ShareGpt, RepliesSizeTheOutputAndBadFilesAreRejected) {
  std::string dir = ::testing::TempDir();
  std::string path = dir + "/sharegpt_small.json";
  ASSERT_TRUE(write_file(path, R"([
    {"id": "a", "conversations": [{"from": "human", "value": "tell me about the sea"},
                                  {"from": "gpt", "value": "the sea is big and blue"}]},
    {"id": "b", "conversations": []},
    {"id": "c"},
    {"id": "d", "conversations": [{"from": "human", "value": "hi"},
                                  {"from": "gpt", "value": "hello there friend"}]}
  ])")
                  .ok());
  ToyTokenizer tok(true);
  auto ds = sample_sharegpt(tok, {.path = path, .num_prompts = 1, .no_oversample = true});
  ASSERT_TRUE(ds.ok()) << ds.status().to_string();
  ASSERT_EQ(ds->requests.size(), 1u);  // "hi" (2 tokens + BOS) is too short
  EXPECT_EQ(ds->requests[0].prompt, "tell me about the sea");
  EXPECT_EQ(ds->requests[0].expected_output_len,
            static_cast<int64_t>(ToyTokenizer::encode_one("the sea is big and blue").size()));

  auto missing = sample_sharegpt(tok, {.path = dir + "/nope.json", .num_prompts = 1});
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("nope.json"), std::string::npos);
  ASSERT_TRUE(write_file(dir + "/bad.json", "{\"not\": \"a list\"}").ok());
  auto bad = sample_sharegpt(tok, {.path = dir + "/bad.json", .num_prompts = 1});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("list"), std::string::npos);
  ASSERT_TRUE(write_file(dir + "/broken.json", "[{\"conversations\": [").ok());
  EXPECT_FALSE(sample_sharegpt(tok, {.path = dir + "/broken.json", .num_prompts = 1}).ok());
}

class PrefixRepetition : public ::testing::TestWithParam<bool> {};

TEST_P(PrefixRepetition, GroupsShareExactPrefixes) {
  ToyTokenizer tok(GetParam());
  PrefixRepetitionOptions o{.num_prompts = 22,
                            .prefix_len = 16,
                            .suffix_len = 8,
                            .num_prefixes = 4,
                            .output_len = 5,
                            .seed = 2};
  auto ds = sample_prefix_repetition(tok, o);
  ASSERT_TRUE(ds.ok()) << ds.status().to_string();
  ASSERT_EQ(ds->requests.size(), 20u);  // 4 prefixes x (22 / 4) prompts
  std::map<std::string, int> groups;
  for (const auto& r : ds->requests) {
    EXPECT_EQ(r.prompt_len, 24);
    EXPECT_EQ(r.expected_output_len, 5);
    groups[r.prompt.substr(0, 10)]++;
  }
  ASSERT_EQ(groups.size(), 4u);
  for (const auto& [head, n] : groups) EXPECT_EQ(n, 5) << head;
  auto too_few = sample_prefix_repetition(tok, {.num_prompts = 3, .num_prefixes = 4});
  ASSERT_FALSE(too_few.ok());
  EXPECT_NE(too_few.status().message().find("--prefix-repetition-num-prefixes"), std::string::npos);
}

TEST_P(PrefixRepetition, RoundRobinCyclesThroughThePrefixes) {
  ToyTokenizer tok(GetParam());
  PrefixRepetitionOptions o{.num_prompts = 12,
                            .prefix_len = 16,
                            .suffix_len = 8,
                            .num_prefixes = 4,
                            .output_len = 5,
                            .seed = 3,
                            .round_robin = true};
  auto ds = sample_prefix_repetition(tok, o);
  ASSERT_TRUE(ds.ok()) << ds.status().to_string();
  ASSERT_EQ(ds->requests.size(), 12u);
  // Requests i and i + 4 share a prefix, requests i and i + 1 do not; suffixes all differ.
  std::set<std::string> prompts;
  for (size_t i = 0; i < 12; ++i) {
    const std::string head = ds->requests[i].prompt.substr(0, 10);
    if (i + 4 < 12) EXPECT_EQ(head, ds->requests[i + 4].prompt.substr(0, 10)) << i;
    if (i % 4 != 3) EXPECT_NE(head, ds->requests[i + 1].prompt.substr(0, 10)) << i;
    prompts.insert(ds->requests[i].prompt);
  }
  EXPECT_EQ(prompts.size(), 12u);
}

INSTANTIATE_TEST_SUITE_P(KnownAndUnknownVocab, PrefixRepetition, ::testing::Bool());

}  // namespace
}  // namespace strata::bench
