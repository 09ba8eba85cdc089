// The step plan as plain data: a plan from the real scheduler survives encode/decode unchanged,
// every field is carried (tiers and speculative tokens too), and corrupt or truncated bytes are a
// clear error, never a plan that points outside itself.
#include <gtest/gtest.h>

#include "sched/scheduler.h"
#include "sched_test_util.h"

namespace strata::sched {
namespace {

StepPlan full_plan() {
  StepPlan p;
  p.step = 42;
  p.token_ids = {5, 6, 7, 8, 9};
  p.block_ids = {3, 4, 11};
  p.spec_token_ids = {100, 101};
  ScheduledRequest a;
  a.request_id = "req-a";
  a.handle = {7, 3};
  a.num_computed_tokens = 0;
  a.num_scheduled_tokens = 4;
  a.new_block_table = true;
  a.token_ids_offset = 0;
  a.block_ids_offset = 0;
  a.block_ids_count = 2;
  ScheduledRequest b;
  b.request_id = "req-\xe2\x82\xac/1";  // any bytes
  b.handle = {0, 1};
  b.num_computed_tokens = 31;
  b.num_scheduled_tokens = 1;
  b.will_sample = true;
  b.token_ids_offset = 4;
  b.block_ids_offset = 2;
  b.block_ids_count = 1;
  b.spec_token_ids_offset = 0;
  b.spec_token_ids_count = 2;
  p.scheduled = {a, b};
  p.total_num_scheduled_tokens = 5;
  p.preempted_ids = {"old"};
  p.finished_ids = {"x", "y", ""};
  p.kv_loads = {{9, 1, 0x1234, 0xabcdef}};
  p.kv_stores = {{10, 2, 1, 2}, {12, 1, 3, 4}};
  p.scheduled[0].state_slot = 1;
  p.scheduled[1].state_slot = 0;
  p.state_restores = {{5, 1}};
  p.state_snapshots = {{0, 4, 6}, {1, 32, 7}};
  return p;
}

TEST(StepPlanTest, EveryFieldSurvivesARoundTrip) {
  const StepPlan p = full_plan();
  auto back = decode_step_plan(encode_step_plan(p));
  ASSERT_TRUE(back.ok()) << back.status().to_string();
  EXPECT_TRUE(*back == p);
  EXPECT_EQ(back->scheduled[1].request_id, p.scheduled[1].request_id);
  EXPECT_EQ(std::vector<int32_t>(back->token_ids_of(back->scheduled[0]).begin(),
                                 back->token_ids_of(back->scheduled[0]).end()),
            (std::vector<int32_t>{5, 6, 7, 8}));
  EXPECT_EQ(back->spec_token_ids_of(back->scheduled[1])[1], 101);
  EXPECT_EQ(back->kv_stores[1].key_lo, 3u);
  EXPECT_EQ(back->scheduled[0].state_slot, 1);
  EXPECT_EQ(back->state_snapshots[1].boundary, 32);
  // An empty plan too.
  auto empty = decode_step_plan(encode_step_plan(StepPlan{}));
  ASSERT_TRUE(empty.ok());
  EXPECT_TRUE(empty->empty());
}

TEST(StepPlanTest, PlansOfTheRealSchedulerRoundTripAndCarryTheirTokens) {
  SchedulerConfig c{.max_num_seqs = 4, .max_num_batched_tokens = 10, .max_model_len = 64};
  testing::Driver d(c, kv::CacheConfig{.block_size = 4}, 40);
  ASSERT_TRUE(d.add("a", testing::prompt(13, 100), 3).ok());
  ASSERT_TRUE(d.add("b", testing::prompt(5, 200), 4).ok());
  int plans = 0;
  while (d.sched->has_unfinished_requests() && plans < 50) {
    StepPlan plan = d.sched->schedule();
    auto copy = decode_step_plan(encode_step_plan(plan));
    ASSERT_TRUE(copy.ok()) << copy.status().to_string();
    EXPECT_TRUE(*copy == plan);
    std::vector<int32_t> sampled;
    for (const auto& s : copy->scheduled) {
      // The plan's tokens are the request's tokens at the scheduled positions.
      const Request* r = d.sched->get(s.handle);
      ASSERT_NE(r, nullptr);
      auto tokens = copy->token_ids_of(s);
      ASSERT_EQ(static_cast<int64_t>(tokens.size()), s.num_scheduled_tokens);
      for (int64_t t = 0; t < s.num_scheduled_tokens; ++t)
        EXPECT_EQ(tokens[t], r->token_ids()[s.num_computed_tokens + t]);
      sampled.push_back(s.will_sample ? 7 : kNoToken);
    }
    plan = StepPlan{};  // the scheduler keeps nothing that points into its own plan
    d.sched->update(*copy, sampled);
    d.sched->check_invariants();
    ++plans;
  }
  EXPECT_FALSE(d.sched->has_unfinished_requests());
  EXPECT_GE(plans, 4);
}

TEST(StepPlanTest, TruncatedBytesAreAnErrorAtEveryLength) {
  const std::string bytes = encode_step_plan(full_plan());
  for (size_t n = 0; n < bytes.size(); ++n) {
    auto r = decode_step_plan(std::string_view(bytes).substr(0, n));
    ASSERT_FALSE(r.ok()) << "accepted a plan cut at " << n << " of " << bytes.size() << " bytes";
    EXPECT_EQ(r.status().code(), StatusCode::kDataLoss);
  }
  auto extra = decode_step_plan(bytes + "x");
  ASSERT_FALSE(extra.ok());
  EXPECT_NE(extra.status().message().find("left over"), std::string::npos);
}

TEST(StepPlanTest, OffsetsOutsideThePlanAreRefused) {
  StepPlan p = full_plan();
  p.scheduled[1].block_ids_count = 2;  // runs past block_ids
  auto r = decode_step_plan(encode_step_plan(p));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("outside the plan"), std::string::npos)
      << r.status().message();
  p = full_plan();
  p.scheduled[0].num_scheduled_tokens = 6;  // more tokens than the plan holds
  p.total_num_scheduled_tokens = 7;
  EXPECT_FALSE(decode_step_plan(encode_step_plan(p)).ok());
  p = full_plan();
  p.total_num_scheduled_tokens = 9;  // disagrees with the entries
  EXPECT_FALSE(decode_step_plan(encode_step_plan(p)).ok());
  std::string bytes = encode_step_plan(full_plan());
  bytes[0] ^= 0x5a;  // not a plan at all
  auto bad = decode_step_plan(bytes);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("magic"), std::string::npos);
}

TEST(StepPlanTest, RandomCorruptionNeverCrashes) {
  const std::string good = encode_step_plan(full_plan());
  uint64_t x = 0x9e3779b97f4a7c15ull;
  int accepted = 0;
  for (int i = 0; i < 2000; ++i) {
    std::string b = good;
    for (int k = 0; k < 3; ++k) {
      x ^= x << 13, x ^= x >> 7, x ^= x << 17;
      b[x % b.size()] = static_cast<char>(x >> 32);
    }
    auto r = decode_step_plan(b);
    if (!r.ok()) continue;
    ++accepted;
    // Whatever was accepted is self-consistent: every view lies inside the plan.
    for (const auto& s : r->scheduled) {
      EXPECT_LE(s.token_ids_offset + static_cast<uint64_t>(s.num_scheduled_tokens),
                r->token_ids.size());
      EXPECT_LE(uint64_t{s.block_ids_offset} + s.block_ids_count, r->block_ids.size());
    }
  }
  EXPECT_LT(accepted, 2000);  // most corruptions are caught
}

}  // namespace
}  // namespace strata::sched

namespace strata::sched {
namespace {

// State snapshots must name an entry of the plan and a boundary inside its tokens.
TEST(StepPlanTest, StateSnapshotsOutsideTheirEntryAreRefused) {
  for (const StateSnapshot bad :
       {StateSnapshot{2, 4, 6}, StateSnapshot{0, 0, 6}, StateSnapshot{0, 5, 6},
        StateSnapshot{1, 31, 6}, StateSnapshot{0, 4, -1}}) {
    StepPlan p = full_plan();
    p.state_snapshots = {bad};
    auto back = decode_step_plan(encode_step_plan(p));
    EXPECT_FALSE(back.ok()) << "entry " << bad.entry << " boundary " << bad.boundary;
    if (!back.ok()) {
      EXPECT_EQ(back.status().code(), StatusCode::kDataLoss);
    }
  }
  StepPlan p = full_plan();
  p.state_restores = {{-1, 0}};
  EXPECT_FALSE(decode_step_plan(encode_step_plan(p)).ok());
}

}  // namespace
}  // namespace strata::sched
