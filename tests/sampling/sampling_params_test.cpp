#include "sampling/sampling_params.h"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>

namespace strata::sampling {
namespace {

constexpr int64_t kVocab = 1000;

TEST(SamplingParamsTest, DefaultsAreVllms) {
  SamplingParams p;
  EXPECT_EQ(p.n, 1);
  EXPECT_EQ(p.temperature, 1.0f);
  EXPECT_EQ(p.top_p, 1.0f);
  EXPECT_EQ(p.top_k, 0);
  EXPECT_EQ(p.min_p, 0.0f);
  EXPECT_EQ(p.presence_penalty, 0.0f);
  EXPECT_EQ(p.frequency_penalty, 0.0f);
  EXPECT_EQ(p.repetition_penalty, 1.0f);
  EXPECT_FALSE(p.seed.has_value());
  EXPECT_TRUE(p.stop.empty());
  EXPECT_TRUE(p.stop_token_ids.empty());
  EXPECT_FALSE(p.include_stop_str_in_output);
  EXPECT_FALSE(p.ignore_eos);
  ASSERT_TRUE(p.max_tokens.has_value());
  EXPECT_EQ(*p.max_tokens, 16);
  EXPECT_EQ(p.min_tokens, 0);
  EXPECT_FALSE(p.logprobs.has_value());
  EXPECT_FALSE(p.prompt_logprobs.has_value());
  EXPECT_TRUE(p.skip_special_tokens);
  EXPECT_TRUE(p.logit_bias.empty());
  EXPECT_FALSE(p.is_greedy());
  EXPECT_FALSE(p.uses_penalties());
  EXPECT_FALSE(p.uses_top_k(kVocab));
  EXPECT_TRUE(p.validate(kVocab).ok());
}

TEST(SamplingParamsTest, GreedyBelowEpsilon) {
  SamplingParams p;
  p.temperature = 0.0f;
  EXPECT_TRUE(p.is_greedy());
  p.temperature = 0.9e-5f;
  EXPECT_TRUE(p.is_greedy());
  p.temperature = 1e-4f;
  EXPECT_FALSE(p.is_greedy());
}

struct BadCase {
  const char* field;
  std::function<void(SamplingParams&)> set;
  const char* expected_text;  // part of the message: the range or the value
};

TEST(SamplingParamsTest, EachBadFieldIsNamedWithItsRange) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const std::vector<BadCase> cases = {
      {"n", [](SamplingParams& p) { p.n = 0; }, "at least 1, got 0"},
      {"presence_penalty", [](SamplingParams& p) { p.presence_penalty = 2.5f; },
       "[-2, 2], got 2.5"},
      {"frequency_penalty", [](SamplingParams& p) { p.frequency_penalty = -3; }, "[-2, 2], got -3"},
      {"repetition_penalty", [](SamplingParams& p) { p.repetition_penalty = 0; },
       "greater than zero"},
      {"temperature", [](SamplingParams& p) { p.temperature = -0.5f; },
       "non-negative number, got -0.5"},
      {"temperature", [nan](SamplingParams& p) { p.temperature = nan; }, "got nan"},
      {"top_p", [](SamplingParams& p) { p.top_p = 0.0f; }, "(0, 1], got 0"},
      {"top_p", [](SamplingParams& p) { p.top_p = 1.5f; }, "(0, 1], got 1.5"},
      {"top_k", [](SamplingParams& p) { p.top_k = -2; }, "0 (disable), or at least 1, got -2"},
      {"min_p", [](SamplingParams& p) { p.min_p = 1.25f; }, "[0, 1], got 1.25"},
      {"max_tokens", [](SamplingParams& p) { p.max_tokens = 0; }, "at least 1, got 0"},
      {"min_tokens", [](SamplingParams& p) { p.min_tokens = -1; },
       "greater than or equal to 0, got -1"},
      {"min_tokens", [](SamplingParams& p) { p.min_tokens = 20; }, "max_tokens=16, got 20"},
      {"logprobs", [](SamplingParams& p) { p.logprobs = 21; }, "[0, 20], got 21"},
      {"logprobs", [](SamplingParams& p) { p.logprobs = -1; }, "[0, 20], got -1"},
      {"prompt_logprobs", [](SamplingParams& p) { p.prompt_logprobs = 50; }, "[0, 20], got 50"},
      {"stop",
       [](SamplingParams& p) {
         p.stop = {"ok", ""};
       },
       "empty string"},
      {"stop_token_ids",
       [](SamplingParams& p) {
         p.stop_token_ids = {5, 1000};
       },
       "[0, 1000), got 1000"},
      {"stop_token_ids", [](SamplingParams& p) { p.stop_token_ids = {-1}; }, "got -1"},
      {"logit_bias",
       [](SamplingParams& p) {
         p.logit_bias = {{1000, 1.0f}};
       },
       "id 1000"},
      {"logit_bias",
       [](SamplingParams& p) {
         p.logit_bias = {{3, 100.5f}};
       },
       "[-100, 100], got 100.5"},
      {"logit_bias",
       [nan](SamplingParams& p) {
         p.logit_bias = {{3, nan}};
       },
       "got nan"},
  };
  for (const auto& c : cases) {
    SamplingParams p;
    c.set(p);
    std::string field;
    Status s = p.validate(kVocab, kDefaultMaxLogprobs, &field);
    ASSERT_FALSE(s.ok()) << c.field << " " << c.expected_text;
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(field, c.field) << s.message();
    EXPECT_NE(s.message().find(c.expected_text), std::string::npos)
        << "message '" << s.message() << "' lacks '" << c.expected_text << "'";
  }
}

TEST(SamplingParamsTest, BoundaryValuesAreAccepted) {
  SamplingParams p;
  p.top_k = -1;  // vLLM quietly accepts -1 as "disabled"
  p.top_p = 1.0f;
  p.min_p = 1.0f;
  p.presence_penalty = -2.0f;
  p.frequency_penalty = 2.0f;
  p.temperature = 0.0f;
  p.max_tokens = std::nullopt;  // until max_model_len
  p.min_tokens = 1000;
  p.logprobs = 20;
  p.prompt_logprobs = 0;
  p.stop_token_ids = {0, 999};
  p.logit_bias = {{0, -100.0f}, {999, 100.0f}};
  p.seed = std::numeric_limits<int64_t>::min();
  EXPECT_TRUE(p.validate(kVocab).ok()) << p.validate(kVocab).message();
  EXPECT_FALSE(p.uses_top_k(kVocab));
  // A server configured with --max-logprobs 5 refuses 6.
  p.logprobs = 6;
  EXPECT_FALSE(p.validate(kVocab, 5).ok());
}

TEST(SamplingParamsTest, ChildrenOfSeededRequestsGetDistinctSeeds) {
  SamplingParams p;
  p.n = 3;
  p.seed = 42;
  SamplingParams c0 = p.child(0), c2 = p.child(2);
  EXPECT_EQ(c0.n, 1);
  EXPECT_EQ(*c0.seed, 42);
  EXPECT_EQ(*c2.seed, 44);
  p.seed = std::numeric_limits<int64_t>::max();
  EXPECT_EQ(*p.child(1).seed, std::numeric_limits<int64_t>::min());  // wraps, no overflow
  p.seed.reset();
  EXPECT_FALSE(p.child(1).seed.has_value());
}

}  // namespace
}  // namespace strata::sampling
