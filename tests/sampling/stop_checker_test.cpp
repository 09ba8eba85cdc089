#include <gtest/gtest.h>

#include "sampling/stop_checker.h"

namespace strata::sampling {
namespace {

const std::vector<int32_t> kEos = {2, 7};

TEST(StopCheckerTest, EosStopsUnlessIgnored) {
  SamplingParams p;
  StopDecision d = check_stop(p, kEos, 7, 3, 10, 0);
  EXPECT_EQ(d.reason, FinishReason::kStop);
  EXPECT_TRUE(d.stopped_by_token);
  EXPECT_FALSE(d.stop_token_id.has_value());  // EOS has no stop_reason
  EXPECT_STREQ(finish_reason_name(d.reason), "stop");
  p.ignore_eos = true;
  EXPECT_FALSE(check_stop(p, kEos, 7, 3, 10, 0).finished());
  EXPECT_FALSE(check_stop(p, kEos, 5, 3, 10, 0).finished());
}

TEST(StopCheckerTest, StopTokenIdsReportTheirId) {
  SamplingParams p;
  p.stop_token_ids = {11, 12};
  p.ignore_eos = true;  // stop ids still apply
  StopDecision d = check_stop(p, kEos, 12, 1, 10, 0);
  EXPECT_EQ(d.reason, FinishReason::kStop);
  ASSERT_TRUE(d.stop_token_id.has_value());
  EXPECT_EQ(*d.stop_token_id, 12);
  EXPECT_TRUE(d.stopped_by_token);
}

TEST(StopCheckerTest, LengthComesFirstAndMinTokensDefersStops) {
  SamplingParams p;
  p.max_tokens = 4;
  p.min_tokens = 2;
  p.stop_token_ids = {11};
  // EOS at the 4th token: max_tokens wins, as in vLLM.
  StopDecision d = check_stop(p, kEos, 2, 4, 10, 0);
  EXPECT_EQ(d.reason, FinishReason::kLength);
  EXPECT_FALSE(d.stopped_by_token);
  EXPECT_STREQ(finish_reason_name(d.reason), "length");
  // Before min_tokens, EOS and stop ids do not stop.
  EXPECT_FALSE(check_stop(p, kEos, 2, 1, 10, 0).finished());
  EXPECT_FALSE(check_stop(p, kEos, 11, 1, 10, 0).finished());
  EXPECT_EQ(check_stop(p, kEos, 11, 2, 10, 0).reason, FinishReason::kStop);
  // The model length caps prompt + output.
  p.max_tokens.reset();
  EXPECT_FALSE(check_stop(p, kEos, 5, 100, 27, 128).finished());
  EXPECT_EQ(check_stop(p, kEos, 5, 101, 27, 128).reason, FinishReason::kLength);
  EXPECT_FALSE(check_stop(p, kEos, 5, 100000, 27, 0).finished());  // no limit
}

}  // namespace
}  // namespace strata::sampling
