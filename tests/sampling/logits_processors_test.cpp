#include "sampling/logits_processors.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "core/rng.h"
#include "sampling/reference_sampler.h"

namespace strata::sampling {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

TEST(LogitsProcessorsTest, LogitBiasAddsPerToken) {
  std::vector<float> x = {1.0f, 2.0f, 3.0f, 4.0f};
  apply_logit_bias(x, {{0, 0.5f}, {3, -100.0f}});
  EXPECT_EQ(x, (std::vector<float>{1.5f, 2.0f, 3.0f, -96.0f}));
}

TEST(LogitsProcessorsTest, MinTokensMasksEosAndStopIdsUntilReached) {
  SamplingParams p;
  p.min_tokens = 2;
  p.stop_token_ids = {1};
  const std::vector<int32_t> eos = {3};
  std::vector<float> x = {0.0f, 5.0f, 1.0f, 9.0f};
  EXPECT_TRUE(min_tokens_active(p, eos, 1));
  apply_min_tokens(x, p, eos, 1);
  EXPECT_EQ(x, (std::vector<float>{0.0f, kNegInf, 1.0f, kNegInf}));

  std::vector<float> y = {0.0f, 5.0f, 1.0f, 9.0f};
  EXPECT_FALSE(min_tokens_active(p, eos, 2));
  apply_min_tokens(y, p, eos, 2);
  EXPECT_EQ(y, (std::vector<float>{0.0f, 5.0f, 1.0f, 9.0f}));

  // ignore_eos leaves EOS alone (vLLM does not count it as a stop id then).
  p.ignore_eos = true;
  std::vector<float> z = {0.0f, 5.0f, 1.0f, 9.0f};
  apply_min_tokens(z, p, eos, 0);
  EXPECT_EQ(z, (std::vector<float>{0.0f, kNegInf, 1.0f, 9.0f}));
  p.stop_token_ids.clear();
  EXPECT_FALSE(min_tokens_active(p, eos, 0));  // nothing left to mask
}

TEST(LogitsProcessorsTest, PenaltiesOnHandComputedExample) {
  SamplingParams p;
  p.repetition_penalty = 2.0f;
  p.frequency_penalty = 0.5f;
  p.presence_penalty = 0.25f;
  std::vector<float> x = {2.0f, -1.0f, 0.5f, 3.0f, -2.0f};
  const std::vector<int32_t> prompt = {0, 1};
  const std::vector<int32_t> output = {3, 3, 2};
  PenaltyScratch scratch;
  apply_penalties(x, p, prompt, output, scratch);
  // 0: prompt, positive -> 2/2 = 1.        1: prompt, negative -> -1*2 = -2.
  // 2: once in output: 0.5/2 - 0.5*1 - 0.25 = -0.5.
  // 3: twice in output: 3/2 - 0.5*2 - 0.25 = 0.25.   4: untouched.
  EXPECT_EQ(x, (std::vector<float>{1.0f, -2.0f, -0.5f, 0.25f, -2.0f}));

  // Presence and frequency see only the output; the prompt alone changes nothing.
  SamplingParams q;
  q.presence_penalty = 1.0f;
  q.frequency_penalty = 1.0f;
  std::vector<float> y = {1.0f, 1.0f, 1.0f};
  apply_penalties(y, q, std::vector<int32_t>{0, 1}, std::vector<int32_t>{1}, scratch);
  EXPECT_EQ(y, (std::vector<float>{1.0f, -1.0f, 1.0f}));
}

TEST(LogitsProcessorsTest, ScratchReuseKeepsNoStaleCounts) {
  SamplingParams p;
  p.frequency_penalty = 1.0f;
  PenaltyScratch scratch;
  std::vector<float> a = {0.0f, 0.0f, 0.0f};
  apply_penalties(a, p, {}, std::vector<int32_t>{1, 1, 1}, scratch);
  EXPECT_EQ(a, (std::vector<float>{0.0f, -3.0f, 0.0f}));
  std::vector<float> b = {0.0f, 0.0f, 0.0f};
  apply_penalties(b, p, {}, std::vector<int32_t>{2}, scratch);
  EXPECT_EQ(b, (std::vector<float>{0.0f, 0.0f, -1.0f}));
}

TEST(LogitsProcessorsTest, MatchesReferenceOnRandomRows) {
  Rng rng(7);
  PenaltyScratch scratch;
  const std::vector<int32_t> eos = {2, 17};
  for (int trial = 0; trial < 50; ++trial) {
    const int vocab = 50 + static_cast<int>(rng.below(500));
    std::vector<float> x(vocab);
    for (auto& v : x) v = static_cast<float>(rng.normal() * 4.0);
    SamplingParams p;
    p.repetition_penalty = rng.uniform(0.5f, 2.0f);
    p.frequency_penalty = rng.uniform(-2.0f, 2.0f);
    p.presence_penalty = rng.uniform(-2.0f, 2.0f);
    p.min_tokens = static_cast<int>(rng.below(4));
    p.stop_token_ids = {static_cast<int32_t>(rng.below(vocab))};
    p.ignore_eos = rng.below(2) == 0;
    for (int b = 0; b < 3; ++b)
      p.logit_bias[static_cast<int32_t>(rng.below(vocab))] = rng.uniform(-5, 5);
    std::vector<int32_t> prompt(rng.below(40)), output(rng.below(8));
    for (auto& t : prompt) t = static_cast<int32_t>(rng.below(vocab));
    for (auto& t : output) t = static_cast<int32_t>(rng.below(vocab));

    std::vector<float> fast = x;
    apply_logit_bias(fast, p.logit_bias);
    apply_min_tokens(fast, p, eos, static_cast<int64_t>(output.size()));
    apply_penalties(fast, p, prompt, output, scratch);
    const std::vector<float> ref = reference::process_logits(x, p, eos, prompt, output);
    ASSERT_EQ(fast, ref) << "trial " << trial;
  }
}

}  // namespace
}  // namespace strata::sampling
