// Pipeline overlap (Scheduler::set_pipeline_depth): plans kept in flight before update(), their
// requests skipped by the next plans, balanced micro-batches, updates in plan order, and
// preemption that never takes a request in flight.
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "sched/scheduler.h"
#include "sched_test_util.h"

namespace strata::sched {
namespace {

using testing::prompt;

std::unique_ptr<Scheduler> make(SchedulerConfig c, int64_t blocks, int depth) {
  auto s = Scheduler::create(c, {.block_size = 4}, blocks);
  EXPECT_TRUE(s.ok()) << s.status().to_string();
  (*s)->set_pipeline_depth(depth);
  return std::move(s).value();
}

std::set<std::string> ids(const StepPlan& p) {
  std::set<std::string> out;
  for (const auto& s : p.scheduled) out.insert(s.request_id);
  return out;
}

// Applies `plan` with token 7 for every entry that samples.
std::vector<RequestOutput> apply(Scheduler& s, const StepPlan& plan) {
  std::vector<int32_t> tokens;
  for (const auto& e : plan.scheduled) tokens.push_back(e.will_sample ? 7 : kNoToken);
  auto out = s.update(plan, tokens);
  s.check_invariants();
  return out;
}

TEST(SchedulerPipelineTest, PlansInFlightHoldDisjointBalancedRequests) {
  auto s = make({.max_num_batched_tokens = 64, .max_model_len = 64}, 65, 2);
  for (int i = 0; i < 4; ++i)
    ASSERT_TRUE(s->add_request({.request_id = "r" + std::to_string(i),
                                .prompt_token_ids = prompt(5, 100 * i),
                                .stop = {.max_tokens = 3}})
                    .ok());
  const StepPlan p1 = s->schedule();
  s->check_invariants();
  const StepPlan p2 = s->schedule();
  s->check_invariants();
  // Four runnable requests over a depth of two: two per micro-batch, none in both.
  EXPECT_EQ(ids(p1), (std::set<std::string>{"r0", "r1"}));
  EXPECT_EQ(ids(p2), (std::set<std::string>{"r2", "r3"}));
  EXPECT_EQ(s->num_plans_in_flight(), 2);
  for (const Request* r : s->running_requests()) EXPECT_TRUE(r->in_flight()) << r->request_id();
  // Everything is in flight: the next plan is empty.
  EXPECT_TRUE(s->schedule().scheduled.empty());
  // The first plan applied: its requests (now decoding) are planned again while p2 flies.
  EXPECT_EQ(apply(*s, p1).size(), 2u);
  const StepPlan p3 = s->schedule();
  EXPECT_EQ(ids(p3), (std::set<std::string>{"r0", "r1"}));
  for (const auto& e : p3.scheduled) EXPECT_EQ(e.num_computed_tokens, 5);
  EXPECT_EQ(apply(*s, p2).size(), 2u);
  EXPECT_EQ(apply(*s, p3).size(), 2u);
  EXPECT_EQ(s->num_plans_in_flight(), 0);
  // Run to the end, always two plans out: every request gets its 3 tokens.
  std::vector<StepPlan> flying;
  int outputs = 0;
  for (int guard = 0; guard < 100 && s->has_unfinished_requests(); ++guard) {
    while (flying.size() < 2) {
      StepPlan p = s->schedule();
      s->check_invariants();
      if (p.scheduled.empty()) break;
      flying.push_back(std::move(p));
    }
    ASSERT_FALSE(flying.empty());
    outputs += static_cast<int>(apply(*s, flying.front()).size());
    flying.erase(flying.begin());
  }
  EXPECT_FALSE(s->has_unfinished_requests());
  EXPECT_EQ(outputs, 4 * 3 - 6);  // p1, p2 and p3 gave six of the twelve tokens
}

TEST(SchedulerPipelineTest, UpdatesMustComeInPlanOrder) {
  auto s = make({.max_num_batched_tokens = 64, .max_model_len = 64}, 65, 2);
  ASSERT_TRUE(s->add_request({.request_id = "a", .prompt_token_ids = prompt(3)}).ok());
  ASSERT_TRUE(s->add_request({.request_id = "b", .prompt_token_ids = prompt(3, 50)}).ok());
  const StepPlan p1 = s->schedule();
  const StepPlan p2 = s->schedule();
  ASSERT_EQ(p1.scheduled.size(), 1u);
  ASSERT_EQ(p2.scheduled.size(), 1u);
  EXPECT_DEATH(apply(*s, p2), "in the order planned");
}

TEST(SchedulerPipelineTest, AnAbandonedPlanIsPlannedAgain) {
  auto s = make({.max_num_batched_tokens = 64, .max_model_len = 64}, 65, 2);
  ASSERT_TRUE(s->add_request({.request_id = "a", .prompt_token_ids = prompt(3)}).ok());
  const StepPlan p1 = s->schedule();
  ASSERT_EQ(ids(p1), std::set<std::string>{"a"});
  EXPECT_TRUE(s->schedule().scheduled.empty());
  s->abandon_plan(p1);
  s->check_invariants();
  EXPECT_EQ(s->num_plans_in_flight(), 0);
  const StepPlan p2 = s->schedule();
  ASSERT_EQ(ids(p2), std::set<std::string>{"a"});
  EXPECT_EQ(p2.scheduled[0].num_computed_tokens, 0);
}

TEST(SchedulerPipelineTest, ARequestInFlightIsNeverPreempted) {
  // 4-token blocks and a pool of 6 usable blocks. Two requests of 7 prompt tokens (2 blocks each)
  // decode; the older one's growth needs blocks that only the younger one (in flight) holds.
  auto s = make({.max_num_batched_tokens = 64, .max_model_len = 64}, 7, 2);
  ASSERT_TRUE(s->add_request({.request_id = "old", .prompt_token_ids = prompt(7)}).ok());
  ASSERT_TRUE(s->add_request({.request_id = "young", .prompt_token_ids = prompt(7, 50)}).ok());
  std::vector<StepPlan> flying;
  bool waited = false;
  int64_t preemptions = 0;
  for (int step = 0; step < 200 && s->has_unfinished_requests(); ++step) {
    while (flying.size() < 2) {
      StepPlan p = s->schedule();
      s->check_invariants();
      // Never a request of a plan in flight among the preempted.
      for (const auto& id : p.preempted_ids)
        for (const StepPlan& f : flying)
          for (const auto& e : f.scheduled) EXPECT_NE(e.request_id, id) << "step " << step;
      preemptions += static_cast<int64_t>(p.preempted_ids.size());
      if (p.scheduled.empty()) break;
      flying.push_back(std::move(p));
    }
    if (flying.size() == 1 && s->num_running() == 2) waited = true;  // one waits for the other
    ASSERT_FALSE(flying.empty()) << "nothing planned at step " << step;
    const auto outs = apply(*s, flying.front());
    flying.erase(flying.begin());
    // Generation stops at the pool's tokens (24): a request finishes by length.
    for (const auto& o : outs)
      if (o.finished()) EXPECT_EQ(o.finish_reason, FinishReason::kLength);
  }
  EXPECT_FALSE(s->has_unfinished_requests());
  EXPECT_TRUE(waited || preemptions > 0);
}

}  // namespace
}  // namespace strata::sched
