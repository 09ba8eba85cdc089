// Paused requests (Scheduler::pause_request, rules P1-P2 in scheduler.h): not scheduled, their
// KV kept while nobody needs it, and given up first to whoever does. Exact traces, in the format
// of sched_test_util.h.
#include <gtest/gtest.h>

#include "sched/scheduler.h"
#include "sched_test_util.h"

namespace strata::sched {
namespace {

using testing::Driver;
using testing::prompt;

int64_t blocks_held(const Driver& d, const std::string& id) {
  const Request* r = d.sched->find_request(id);
  return r ? static_cast<int64_t>(d.sched->block_table(r->handle()).size()) : -1;
}

TEST(SchedulerPause, APausedRequestIsSkippedAndKeepsItsBlocks) {
  Driver d({.max_model_len = 64}, {.block_size = 4}, 17);
  ASSERT_TRUE(d.add("A", prompt(3, 10), 6).ok());
  ASSERT_TRUE(d.add("B", prompt(3, 20), 6).ok());
  EXPECT_EQ(d.step().trace, "A0+3[1]* B0+3[2]*");
  EXPECT_EQ(d.step().trace, "A3+1+[]* B3+1+[]*");
  ASSERT_TRUE(d.sched->pause_request("B").ok());
  ASSERT_TRUE(d.sched->pause_request("B").ok());  // twice: still one paused request
  EXPECT_EQ(d.sched->num_paused(), 1);
  EXPECT_EQ(d.step().trace, "A4+1+[3]*");
  EXPECT_EQ(d.step().trace, "A5+1+[]*");
  EXPECT_EQ(blocks_held(d, "B"), 1);  // its KV stayed
  EXPECT_EQ(d.sched->find_request("B")->status(), RequestStatus::kRunning);
  EXPECT_EQ(d.sched->stats().num_paused, 1);
  ASSERT_TRUE(d.sched->resume_request("B").ok());
  EXPECT_EQ(d.sched->num_paused(), 0);
  // B goes on from where it stopped: nothing recomputed, no preemption.
  EXPECT_EQ(d.step().trace, "A6+1+[]* B4+1+[4]*");
  EXPECT_EQ(d.step().trace, "A7+1+[]* B5+1+[]* A=length");
  EXPECT_EQ(d.sched->stats().num_preemptions, 0);
  EXPECT_EQ(d.sched->pause_request("A").code(), StatusCode::kNotFound);  // finished
  EXPECT_EQ(d.sched->resume_request("nobody").code(), StatusCode::kNotFound);
}

TEST(SchedulerPause, WithEveryRequestPausedAStepIsEmpty) {
  Driver d({.max_model_len = 64}, {.block_size = 4}, 17);
  ASSERT_TRUE(d.add("A", prompt(3, 10), 6).ok());
  ASSERT_TRUE(d.add("B", prompt(3, 20), 6).ok());
  EXPECT_EQ(d.step().trace, "A0+3[1]* B0+3[2]*");
  ASSERT_TRUE(d.sched->pause_request("A").ok());
  ASSERT_TRUE(d.sched->pause_request("B").ok());
  EXPECT_TRUE(d.sched->has_unfinished_requests());
  EXPECT_FALSE(d.sched->has_runnable_requests());
  EXPECT_EQ(d.step().trace, "");
  ASSERT_TRUE(d.sched->resume_request("A").ok());
  EXPECT_TRUE(d.sched->has_runnable_requests());
  EXPECT_EQ(d.step().trace, "A3+1+[]*");
}

TEST(SchedulerPause, AbortingAPausedRequestFreesItsBlocks) {
  Driver d({.max_model_len = 64}, {.block_size = 4}, 17);
  ASSERT_TRUE(d.add("A", prompt(9, 10), 6).ok());
  EXPECT_EQ(d.step().trace, "A0+9[1,2,3]*");
  ASSERT_TRUE(d.sched->pause_request("A").ok());
  EXPECT_EQ(d.sched->kv().usage().referenced, 3);
  ASSERT_TRUE(d.sched->abort_request("A").ok());
  EXPECT_EQ(d.sched->kv().usage().referenced, 0);
  EXPECT_EQ(d.sched->num_paused(), 0);
  EXPECT_FALSE(d.sched->has_unfinished_requests());
  EXPECT_EQ(d.step().trace, "");  // releases it; check_invariants runs in step()
}

TEST(SchedulerPause, ARequestNeedingABlockTakesAPausedOnesInsteadOfItself) {
  // 3 usable blocks of 2. Without P1, B (the youngest) would preempt itself at position 4 while
  // the paused A sat on its block.
  Driver d({.max_model_len = 64}, {.block_size = 2}, 4);
  ASSERT_TRUE(d.add("A", prompt(2, 10), 8).ok());
  ASSERT_TRUE(d.add("B", prompt(2, 20), 8).ok());
  EXPECT_EQ(d.step().trace, "A0+2[1]* B0+2[2]*");
  ASSERT_TRUE(d.sched->pause_request("A").ok());
  EXPECT_EQ(d.step().trace, "B2+1+[3]*");
  EXPECT_EQ(d.step().trace, "B3+1+[]*");
  // (B then stops at 6 tokens: the whole pool.)
  EXPECT_EQ(d.step().trace, "B4+1+[1]* ^A B=length");
  EXPECT_EQ(d.sched->find_request("A")->status(), RequestStatus::kPreempted);
  EXPECT_TRUE(d.sched->find_request("A")->paused());
  EXPECT_EQ(blocks_held(d, "A"), 0);
}

TEST(SchedulerPause, AdmissionTakesAPausedRequestsBlocks) {
  // 5 usable blocks of 2; admission keeps a 1-block watermark while something runs.
  Driver d({.max_model_len = 64}, {.block_size = 2}, 6);
  ASSERT_TRUE(d.add("A", prompt(3, 10), 4).ok());
  EXPECT_EQ(d.step().trace, "A0+3[1,2]*");
  ASSERT_TRUE(d.sched->pause_request("A").ok());
  // B needs 3 blocks + the watermark; 3 are free. A gives its 2 back (its full block 1 stays in
  // the prefix cache, at the tail of the free list).
  ASSERT_TRUE(d.add("B", prompt(5, 20), 2).ok());
  EXPECT_EQ(d.step().trace, "B0+5[3,4,5]* ^A");
  ASSERT_TRUE(d.sched->resume_request("A").ok());
  // A needs 1 block beside its cached one, + the watermark: not yet (1 allocatable).
  EXPECT_EQ(d.step().trace, "B5+1+[]* B=length");
  // Then it resumes from the prefix cache: only its last prompt token and its sampled token
  // are recomputed.
  EXPECT_EQ(d.step().trace, "A2+2[1,2]*");
}

TEST(SchedulerPause, APausedRequestGivesUpItsSequenceSlot) {
  Driver d({.max_num_seqs = 1, .max_model_len = 64}, {.block_size = 4}, 17);
  ASSERT_TRUE(d.add("A", prompt(3, 10), 4).ok());
  ASSERT_TRUE(d.add("B", prompt(3, 20), 2).ok());
  EXPECT_EQ(d.step().trace, "A0+3[1]*");
  ASSERT_TRUE(d.sched->pause_request("A").ok());
  EXPECT_EQ(d.step().trace, "B0+3[2]* ^A");
  EXPECT_EQ(d.step().trace, "B3+1+[]* B=length");
  EXPECT_EQ(d.step().trace, "");  // A still paused
  ASSERT_TRUE(d.sched->resume_request("A").ok());
  // Recomputed (a partial block is never cached), in the least recently freed block.
  EXPECT_EQ(d.step().trace, "A0+4[3]*");
}

TEST(SchedulerPause, APausedPrefillGoesBackToWaiting) {
  Driver d({.max_num_batched_tokens = 4, .max_model_len = 64}, {.block_size = 4}, 17);
  ASSERT_TRUE(d.add("A", prompt(10, 10), 2).ok());
  ASSERT_TRUE(d.add("B", prompt(3, 20), 2).ok());
  EXPECT_EQ(d.step().trace, "A0+4[1,2,3]");
  ASSERT_TRUE(d.sched->pause_request("A").ok());
  // A would hold the only partial-prefill slot while paused: it is preempted (P2), B runs.
  EXPECT_EQ(d.step().trace, "B0+3[4]* ^A");
  EXPECT_EQ(d.sched->find_request("A")->status(), RequestStatus::kPreempted);
  ASSERT_TRUE(d.sched->resume_request("A").ok());
  // Its computed block 1 comes back from the prefix cache.
  EXPECT_EQ(d.step().trace, "B3+1+[]* A4+3[1,5,6] B=length");
}

TEST(SchedulerPause, ASiblingOfAPausedLeaderRunsAlone) {
  Driver d({.max_model_len = 64}, {.block_size = 4}, 17);
  ASSERT_TRUE(d.add("A", prompt(9, 10), 2).ok());
  ASSERT_TRUE(d.add("A/1", prompt(9, 10), 2, [](RequestSpec& s) { s.sibling_of = "A"; }).ok());
  ASSERT_TRUE(d.sched->pause_request("A").ok());
  EXPECT_EQ(d.step().trace, "A/10+9[1,2,3]*");
  ASSERT_TRUE(d.sched->resume_request("A").ok());
  // The leader then finds the sibling's prompt blocks in the prefix cache.
  EXPECT_EQ(d.step().trace, "A/19+1+[]* A8+1[1,2,4]* A/1=length");
}

}  // namespace
}  // namespace strata::sched
