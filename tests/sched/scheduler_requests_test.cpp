// Request life-cycle: submit-time rejections, abort, finish_request, stop rules, n > 1
// siblings, prefix-cache hits, timestamps and counters.
#include <gtest/gtest.h>

#include "sched/scheduler.h"
#include "sched_test_util.h"

namespace strata::sched {
namespace {

using testing::Driver;
using testing::join_lines;
using testing::prompt;

// (A std::string copy, not a literal: GCC 12 warns falsely on literal assignment here.)
std::function<void(RequestSpec&)> sibling_of(std::string leader) {
  return [leader](RequestSpec& s) { s.sibling_of = leader; };
}

TEST(SchedulerRequestsTest, RejectsWhatCanNeverRunWithClearMessages) {
  // 8 usable blocks of 4 = 32 tokens; max_model_len 64.
  Driver d({.max_model_len = 64}, {.block_size = 4}, 9);
  Status st = d.add("too-long", prompt(64));
  EXPECT_EQ(st.code(), StatusCode::kOutOfRange);
  EXPECT_NE(st.message().find("prompt has 64 tokens but the maximum model length is 64"),
            std::string::npos)
      << st.message();
  st = d.add("too-big", prompt(32));
  EXPECT_EQ(st.code(), StatusCode::kResourceExhausted);
  EXPECT_NE(st.message().find("whole KV cache holds 32 tokens (8 blocks of 4)"), std::string::npos)
      << st.message();
  EXPECT_EQ(d.add("", prompt(3)).code(), StatusCode::kInvalidArgument);
  EXPECT_NE(d.add("empty", {}).message().find("prompt is empty"), std::string::npos);
  EXPECT_EQ(d.add("neg", {1, -2}).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(d.add("m", prompt(3), -1).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(d.add("m", prompt(3), 2, [](RequestSpec& s) { s.stop.min_tokens = 3; }).code(),
            StatusCode::kInvalidArgument);
  EXPECT_FALSE(d.sched->has_unfinished_requests());
  // The largest prompt that fits: it runs alone and stops at the pool's capacity.
  ASSERT_TRUE(d.add("fits", prompt(31)).ok());
  EXPECT_EQ(d.add("fits", prompt(3)).code(), StatusCode::kInvalidArgument);  // duplicate id
  EXPECT_EQ(d.sched->max_request_len(), 32);
  EXPECT_EQ(join_lines(d.run()), "fits0+31[1,2,3,4,5,6,7,8]* fits=length\n");
}

TEST(SchedulerRequestsTest, AbortFreesBlocksAtOnceAndIsReportedInTheNextPlan) {
  Driver d({.max_model_len = 64}, {.block_size = 4}, 9);
  ASSERT_TRUE(d.add("A", prompt(10)).ok());
  ASSERT_TRUE(d.add("B", prompt(3)).ok());
  StepPlan plan = d.sched->schedule();
  ASSERT_EQ(plan.scheduled.size(), 2u);
  EXPECT_EQ(d.sched->kv().usage().referenced, 4);
  ASSERT_TRUE(d.sched->abort_request("A").ok());
  EXPECT_EQ(d.sched->kv().usage().referenced, 1);  // at once, before the step completes
  EXPECT_EQ(d.sched->find_request("A"), nullptr);
  EXPECT_EQ(d.sched->abort_request("A").code(), StatusCode::kNotFound);
  d.sched->check_invariants();
  auto outputs = d.sched->update(plan, std::vector<int32_t>{5, 6});
  ASSERT_EQ(outputs.size(), 1u);  // A's token is dropped
  EXPECT_EQ(outputs[0].request_id, "B");
  StepPlan next = d.sched->schedule();
  EXPECT_EQ(next.finished_ids, std::vector<std::string>{"A"});
  EXPECT_EQ(d.sched->get(plan.scheduled[0].handle), nullptr);  // A's handle is stale now
  // Aborting a waiting request removes it from the queue.
  ASSERT_TRUE(d.add("C", prompt(3)).ok());
  ASSERT_TRUE(d.sched->abort_request("C").ok());
  EXPECT_EQ(d.sched->num_waiting(), 0);
  d.sched->update(next, std::vector<int32_t>(next.scheduled.size(), 1));
  d.sched->check_invariants();
}

TEST(SchedulerRequestsTest, FinishRequestStopsARunningRequest) {
  Driver d({.max_model_len = 64}, {.block_size = 4}, 9);
  ASSERT_TRUE(d.add("A", prompt(5)).ok());
  d.step();
  ASSERT_TRUE(d.sched->finish_request("A", FinishReason::kStop).ok());
  EXPECT_EQ(d.sched->kv().usage().referenced, 0);
  EXPECT_EQ(d.sched->finish_request("A", FinishReason::kStop).code(), StatusCode::kNotFound);
  EXPECT_EQ(d.sched->finish_request("B", FinishReason::kNone).code(), StatusCode::kInvalidArgument);
  EXPECT_FALSE(d.sched->has_unfinished_requests());
  EXPECT_EQ(d.sched->stats().num_finished, 1);
}

TEST(SchedulerRequestsTest, StopRules) {
  auto run = [](StopConfig stop, int32_t token, int64_t max_model_len = 64) {
    Driver d({.max_model_len = max_model_len}, {.block_size = 4}, 33);
    d.sampler = [token](const ScheduledRequest&) { return token; };
    EXPECT_TRUE(d.add("A", prompt(3), 0, [&](RequestSpec& s) { s.stop = stop; }).ok());
    RequestOutput last;
    while (d.sched->has_unfinished_requests()) {
      auto st = d.step();
      if (!st.outputs.empty()) last = st.outputs.back();
    }
    return last;
  };
  // EOS stops after min_tokens.
  RequestOutput o = run({.max_tokens = 10, .min_tokens = 3, .eos_token_ids = {9}}, 9);
  EXPECT_EQ(o.finish_reason, FinishReason::kStop);
  EXPECT_EQ(o.num_output_tokens, 3);
  EXPECT_EQ(o.stop_token_id, kNoToken);
  // ignore_eos runs to max_tokens.
  o = run({.max_tokens = 6, .eos_token_ids = {9}, .ignore_eos = true}, 9);
  EXPECT_EQ(o.finish_reason, FinishReason::kLength);
  EXPECT_EQ(o.num_output_tokens, 6);
  // Stop tokens are honoured even with ignore_eos, and reported.
  o = run({.max_tokens = 6, .stop_token_ids = {4, 8}, .ignore_eos = true}, 8);
  EXPECT_EQ(o.finish_reason, FinishReason::kStop);
  EXPECT_EQ(o.stop_token_id, 8);
  EXPECT_EQ(o.num_output_tokens, 1);
  // No max_tokens: the model length ends it (prompt 3 + 13 outputs = 16).
  o = run({}, 5, 16);
  EXPECT_EQ(o.finish_reason, FinishReason::kLength);
  EXPECT_EQ(o.num_output_tokens, 13);
}

TEST(SchedulerRequestsTest, PrefixCacheHitsSkipTheirPrefillAndSaltsSeparateTenants) {
  Driver d({.max_model_len = 64}, {.block_size = 4}, 17);
  ASSERT_TRUE(d.add("A", prompt(9), 1).ok());
  EXPECT_EQ(d.step().trace, "A0+9[1,2,3]* A=length");
  ASSERT_TRUE(d.add("B", prompt(9), 1).ok());
  const std::string salt = "tenant-2";
  ASSERT_TRUE(d.add("C", prompt(9), 1, [salt](RequestSpec& s) { s.cache_salt = salt; }).ok());
  // B finds A's two full blocks and computes only the last token; C (other salt) finds nothing.
  EXPECT_EQ(d.step().trace, "B8+1[1,2,4]* C0+9[5,6,7]* B=length C=length");
  auto st = d.sched->stats();
  EXPECT_EQ(st.prefix_cache.queries, 27);
  EXPECT_EQ(st.prefix_cache.hits, 8);
  EXPECT_EQ(st.kv.referenced, 0);
  EXPECT_EQ(st.kv.cached_free, 4);  // A/B's two blocks and C's two
}

TEST(SchedulerRequestsTest, PrefixCachingOffRecomputesEverything) {
  Driver d({.max_model_len = 64}, {.block_size = 4, .enable_prefix_caching = false}, 17);
  ASSERT_TRUE(d.add("A", prompt(9), 1).ok());
  d.step();
  ASSERT_TRUE(d.add("B", prompt(9), 1).ok());
  EXPECT_EQ(d.step().trace, "B0+9[4,5,6]* B=length");
  EXPECT_EQ(d.sched->stats().prefix_cache.queries, 0);
}

// n > 1: siblings wait for the leader's prompt, then share its full blocks; each keeps its own
// copy of the last, partial block (which decode will write).
void check_siblings(bool prefix_caching) {
  SCOPED_TRACE(prefix_caching ? "prefix caching on" : "prefix caching off");
  Driver d({.max_model_len = 64}, {.block_size = 4, .enable_prefix_caching = prefix_caching}, 17);
  ASSERT_TRUE(d.add("L", prompt(10), 2).ok());
  auto sibling = sibling_of("L");
  ASSERT_TRUE(d.add("X", prompt(10), 2, sibling).ok());
  ASSERT_TRUE(d.add("Y", prompt(10), 2, sibling).ok());
  EXPECT_EQ(d.add("Z", prompt(11), 2, sibling).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(d.step().trace, "L0+10[1,2,3]*");
  StepPlan plan = d.sched->schedule();
  ASSERT_EQ(plan.scheduled.size(), 3u);
  EXPECT_EQ(d.sched->kv().pool().ref_cnt(1), 3);
  EXPECT_EQ(d.sched->kv().pool().ref_cnt(2), 3);
  EXPECT_EQ(d.sched->kv().pool().ref_cnt(3), 1);
  std::vector<int32_t> sampled = {7, 8, 9};
  auto outputs = d.sched->update(plan, sampled);
  EXPECT_EQ(outputs.size(), 3u);
  d.sched->check_invariants();
  EXPECT_EQ(join_lines(d.run()), "X10+1+[]* Y10+1+[]* X=length Y=length\n");
  auto st = d.sched->stats();
  EXPECT_EQ(st.prefix_cache.forked_tokens, 16);
  EXPECT_EQ(st.prefix_cache.queries, prefix_caching ? 10 : 0);
}

TEST(SchedulerRequestsTest, SiblingsShareThePromptsFullBlocksWithPrefixCaching) {
  check_siblings(true);
}
TEST(SchedulerRequestsTest, SiblingsShareThePromptsFullBlocksWithoutPrefixCaching) {
  check_siblings(false);
}

TEST(SchedulerRequestsTest, SiblingsWaitForAChunkedLeaderAndSurviveItsAbort) {
  Driver d({.max_num_batched_tokens = 4, .max_model_len = 64},
           {.block_size = 4, .enable_prefix_caching = false}, 17);
  ASSERT_TRUE(d.add("L", prompt(10), 3).ok());
  ASSERT_TRUE(d.add("X", prompt(10), 3, sibling_of("L")).ok());
  EXPECT_EQ(d.step().trace, "L0+4[1,2,3]");
  EXPECT_EQ(d.step().trace, "L4+4+[]");
  // The leader has computed 8 tokens (its two full blocks): X forks them in the same step.
  EXPECT_EQ(d.step().trace, "L8+2+[]* X8+2[1,2,4]*");
  ASSERT_TRUE(d.sched->abort_request("L").ok());
  EXPECT_EQ(d.sched->kv().pool().ref_cnt(1), 1);  // X keeps the shared blocks alive
  EXPECT_EQ(join_lines(d.run()), "X10+1+[]*\nX11+1+[]* X=length\n");

  // A sibling whose leader is aborted before sharing runs on its own.
  ASSERT_TRUE(d.add("M", prompt(10, 50), 1).ok());
  ASSERT_TRUE(d.add("N", prompt(10, 50), 1, sibling_of("M")).ok());
  ASSERT_TRUE(d.sched->abort_request("M").ok());
  auto traces = d.run();
  ASSERT_FALSE(traces.empty());
  EXPECT_EQ(traces[0].substr(0, 5), "N0+4[");
}

TEST(SchedulerRequestsTest, TimestampsFollowTheInjectedClock) {
  Driver d({.max_num_batched_tokens = 4, .max_model_len = 64}, {.block_size = 4}, 17);
  ASSERT_TRUE(d.add("A", prompt(6), 3, [](RequestSpec& s) { s.arrival_time = 95.0; }).ok());
  ASSERT_TRUE(d.add("B", prompt(2), 1).ok());  // arrival = now = 100
  RequestOutput last_a;
  while (d.sched->has_unfinished_requests()) {
    for (const auto& o : d.step().outputs)
      if (o.request_id == "A") last_a = o;
  }
  // Steps run at t = 100, 101, 102, 103: A prefills at 100-101, first token at 101.
  EXPECT_DOUBLE_EQ(last_a.times.arrival, 95.0);
  EXPECT_DOUBLE_EQ(last_a.times.first_scheduled, 100.0);
  EXPECT_DOUBLE_EQ(last_a.times.first_token, 101.0);
  EXPECT_DOUBLE_EQ(last_a.times.last_token, 103.0);
  EXPECT_DOUBLE_EQ(last_a.times.finished, 103.0);
  EXPECT_DOUBLE_EQ(last_a.times.queue_time(), 5.0);
  EXPECT_DOUBLE_EQ(last_a.times.prefill_time(), 1.0);
  EXPECT_DOUBLE_EQ(last_a.times.decode_time(), 2.0);
  EXPECT_DOUBLE_EQ(last_a.times.e2e_time(), 8.0);
}

TEST(SchedulerRequestsTest, CountersForMetrics) {
  Driver d({.max_num_seqs = 1, .max_model_len = 64}, {.block_size = 4}, 17);
  ASSERT_TRUE(d.add("A", prompt(5), 2).ok());
  ASSERT_TRUE(d.add("B", prompt(3), 2).ok());
  SchedulerStats st = d.sched->stats();
  EXPECT_EQ(st.num_waiting, 2);
  EXPECT_EQ(st.num_running, 0);
  d.step();
  st = d.sched->stats();
  EXPECT_EQ(st.num_running, 1);
  EXPECT_EQ(st.num_waiting, 1);
  EXPECT_EQ(st.kv.referenced, 2);
  EXPECT_EQ(st.kv.num_blocks, 16);
  EXPECT_EQ(st.prompt_tokens, 5);
  EXPECT_EQ(st.generation_tokens, 1);
  d.run();
  st = d.sched->stats();
  EXPECT_EQ(st.prompt_tokens, 8);
  EXPECT_EQ(st.generation_tokens, 4);
  EXPECT_EQ(st.num_finished, 2);
  EXPECT_EQ(st.num_steps, 4);
  EXPECT_EQ(st.kv.referenced + st.kv.cached_free + st.kv.free, 16);
}

TEST(SchedulerRequestsTest, APlanNotAppliedIsReplacedByTheNextOne) {
  Driver d({.max_num_batched_tokens = 4, .max_model_len = 64}, {.block_size = 4}, 17);
  ASSERT_TRUE(d.add("A", prompt(6), 2).ok());
  StepPlan dropped = d.sched->schedule();
  ASSERT_EQ(dropped.scheduled.size(), 1u);
  StepPlan plan = d.sched->schedule();  // the first plan was never run
  ASSERT_EQ(plan.scheduled.size(), 1u);
  EXPECT_EQ(plan.scheduled[0].num_computed_tokens, 0);
  d.sched->check_invariants();
  d.sched->update(plan, std::vector<int32_t>{kNoToken});
  d.sched->check_invariants();
  EXPECT_EQ(d.sched->find_request("A")->num_computed_tokens(), 4);
}

TEST(SchedulerRequestsDeathTest, UpdateRejectsAStalePlanOrAMissingToken) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  Driver d({.max_model_len = 64}, {.block_size = 4}, 17);
  ASSERT_TRUE(d.add("A", prompt(3), 2).ok());
  StepPlan old_plan = d.sched->schedule();
  StepPlan plan = d.sched->schedule();
  EXPECT_DEATH(d.sched->update(old_plan, std::vector<int32_t>{1}), "latest plan");
  EXPECT_DEATH(d.sched->update(plan, std::vector<int32_t>{kNoToken}), "no token was sampled");
  EXPECT_DEATH(d.sched->update(plan, std::vector<int32_t>{}), "one sampled token");
}

TEST(SchedulerRequestsTest, CreateValidatesItsInputs) {
  kv::CacheConfig cache;
  EXPECT_EQ(Scheduler::create({}, cache, 100).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(Scheduler::create({.max_model_len = 8}, cache, 1).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_FALSE(Scheduler::create({.max_model_len = 8}, {.block_size = 3}, 10).ok());
  EXPECT_FALSE(Scheduler::create({.max_num_seqs = 0, .max_model_len = 8}, cache, 10).ok());
  EXPECT_TRUE(Scheduler::create({.max_model_len = 8}, cache, 2).ok());
}

}  // namespace
}  // namespace strata::sched
