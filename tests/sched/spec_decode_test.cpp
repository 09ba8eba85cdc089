#include "sched/spec_decode.h"

#include <gtest/gtest.h>

namespace strata::sched {
namespace {

std::vector<int32_t> propose(std::vector<int32_t> tokens, int64_t min_n, int64_t max_n, int64_t k) {
  std::vector<int32_t> out;
  const int64_t n = propose_ngram(tokens, min_n, max_n, k, &out);
  EXPECT_EQ(n, static_cast<int64_t>(out.size()));
  return out;
}

TEST(NgramProposer, ContinuesTheMostRecentEarlierMatchOfTheLongestWindow) {
  // "1 2 3" occurred at 0 (followed by 4 5) and at 5 (followed by 9 9): the most recent wins.
  EXPECT_EQ(propose({1, 2, 3, 4, 5, 1, 2, 3, 9, 9, 1, 2, 3}, 1, 3, 2),
            (std::vector<int32_t>{9, 9}));
  // The longest window first: "7 2 3" matches at 0 even though "2 3" matches later.
  EXPECT_EQ(propose({7, 2, 3, 6, 8, 2, 3, 5, 7, 2, 3}, 1, 3, 3), (std::vector<int32_t>{6, 8, 2}));
  // Fewer than k tokens follow the match: they repeat with the match's period (here 3).
  EXPECT_EQ(propose({4, 5, 6, 4, 5}, 2, 2, 5), (std::vector<int32_t>{6, 4, 5, 6, 4}));
  // No match, a window shorter than min, k = 0, too short a sequence: nothing.
  EXPECT_TRUE(propose({1, 2, 3, 4}, 1, 3, 4).empty());
  EXPECT_TRUE(propose({1, 2, 9, 2}, 2, 3, 4).empty());
  EXPECT_TRUE(propose({1, 1, 1}, 1, 2, 0).empty());
  EXPECT_TRUE(propose({1}, 1, 2, 4).empty());
  // A run of one token proposes more of it.
  EXPECT_EQ(propose({3, 3, 3, 3}, 1, 2, 3), (std::vector<int32_t>{3, 3, 3}));
}

TEST(SpeculativeConfig, ParsesVllmKeysAndRefusesWhatIsNotBuilt) {
  auto off = parse_speculative_config("");
  ASSERT_TRUE(off.ok());
  EXPECT_FALSE(off->enabled());
  auto c = parse_speculative_config(
      R"({"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_max": 3})");
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_TRUE(c->enabled());
  EXPECT_EQ(c->num_speculative_tokens, 4);
  EXPECT_EQ(c->prompt_lookup_max, 3);
  EXPECT_EQ(c->prompt_lookup_min, 3);
  auto d = parse_speculative_config(R"({"model": "[ngram]", "num_speculative_tokens": 2})");
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->prompt_lookup_max, 5);
  EXPECT_EQ(d->prompt_lookup_min, 2);
  EXPECT_FALSE(d->uses_draft_model());
  // A draft model: "method" given, or inferred from "model" as vLLM does.
  auto m = parse_speculative_config(
      R"({"method": "draft_model", "model": "/m/small", "num_speculative_tokens": 3,
          "quantization": "q8_0", "hf_overrides": {"num_hidden_layers": 4},
          "draft_tensor_parallel_size": 1, "disable_by_batch_size": 8})");
  ASSERT_TRUE(m.ok()) << m.status().message();
  EXPECT_TRUE(m->uses_draft_model());
  EXPECT_EQ(m->draft_model, "/m/small");
  EXPECT_EQ(m->num_speculative_tokens, 3);
  EXPECT_EQ(m->draft_quantization, "q8_0");
  EXPECT_EQ(m->draft_hf_overrides, R"({"num_hidden_layers":4})");
  EXPECT_EQ(m->disable_by_batch_size, 8);
  auto inferred = parse_speculative_config(R"({"model": "/m/small", "num_speculative_tokens": 2})");
  ASSERT_TRUE(inferred.ok());
  EXPECT_EQ(inferred->method, "draft_model");
  struct Bad {
    const char* json;
    StatusCode code;
    const char* says;
  } bad[] = {
      {"{", StatusCode::kInvalidArgument, "JSON object"},
      {R"({"num_speculative_tokens": 2})", StatusCode::kInvalidArgument, "method"},
      {R"({"method": "draft_model", "num_speculative_tokens": 2})", StatusCode::kInvalidArgument,
       "needs \"model\""},
      {R"({"model": "x", "num_speculative_tokens": 2, "draft_tensor_parallel_size": 2})",
       StatusCode::kUnimplemented, "draft_tensor_parallel_size 2"},
      {R"({"model": "x", "num_speculative_tokens": 2, "prompt_lookup_max": 2})",
       StatusCode::kInvalidArgument, "unknown key \"prompt_lookup_max\" for method draft_model"},
      {R"({"model": "x", "num_speculative_tokens": 2, "hf_overrides": 4})",
       StatusCode::kInvalidArgument, "hf_overrides"},
      {R"({"method": "mtp", "num_speculative_tokens": 1})", StatusCode::kUnimplemented,
       "not built yet"},
      {R"({"method": "deepseek_mtp", "num_speculative_tokens": 1})", StatusCode::kUnimplemented,
       "not built yet"},
      {R"({"method": "ngram"})", StatusCode::kInvalidArgument, "num_speculative_tokens"},
      {R"({"method": "ngram", "num_speculative_tokens": 0})", StatusCode::kInvalidArgument,
       "from 1 to 16"},
      {R"({"method": "ngram", "num_speculative_tokens": 2, "prompt_lookup_min": 4,
           "prompt_lookup_max": 2})",
       StatusCode::kInvalidArgument, "larger than"},
      {R"({"method": "ngram", "num_speculative_tokens": 2, "lookup": 2})",
       StatusCode::kInvalidArgument, "unknown key \"lookup\""},
  };
  for (const Bad& b : bad) {
    auto r = parse_speculative_config(b.json);
    ASSERT_FALSE(r.ok()) << b.json;
    EXPECT_EQ(r.status().code(), b.code) << b.json;
    EXPECT_NE(r.status().message().find(b.says), std::string::npos) << r.status().message();
  }
}

}  // namespace
}  // namespace strata::sched
