// Hand-written scheduling scenarios with exact traces: which request runs in which step, with
// how many tokens, which blocks, and who is preempted (see sched_test_util.h for the format).
#include <gtest/gtest.h>

#include "sched/scheduler.h"
#include "sched_test_util.h"

namespace strata::sched {
namespace {

using testing::Driver;
using testing::join_lines;
using testing::prompt;

TEST(SchedulerTest, ChunkedPrefillThenDecodeWithBlocksOnDemand) {
  Driver d({.max_num_batched_tokens = 8, .max_model_len = 64}, {.block_size = 4}, 17);
  ASSERT_TRUE(d.add("A", prompt(10), /*max_tokens=*/5).ok());
  // The prompt's 3 blocks are reserved at admission; decode adds block 4 at position 12.
  EXPECT_EQ(join_lines(d.run()),
            "A0+8[1,2,3]\n"
            "A8+2+[]*\n"
            "A10+1+[]*\n"
            "A11+1+[]*\n"
            "A12+1+[4]*\n"
            "A13+1+[]* A=length\n");
  EXPECT_EQ(d.sched->kv().usage().referenced, 0);
}

TEST(SchedulerTest, ShortPromptsOvertakeALongPrefillUnderThePartialPrefillCap) {
  Driver d({.max_num_batched_tokens = 12,
            .max_model_len = 128,
            .long_prefill_token_threshold = 8,
            .max_num_partial_prefills = 1,
            .max_long_partial_prefills = 1},
           {.block_size = 4}, 65);
  ASSERT_TRUE(d.add("A", prompt(20, 1), 1).ok());
  ASSERT_TRUE(d.add("B", prompt(20, 100), 1).ok());
  ASSERT_TRUE(d.add("C", prompt(3, 200), 1).ok());
  // A takes the only partial-prefill slot; B (also partial) is passed over; C fits whole.
  EXPECT_EQ(join_lines(d.run()),
            "A0+8[1,2,3,4,5] C0+3[6]* C=length\n"
            "A8+8+[]\n"
            "A16+4+[]* B0+8[7,8,9,10,11] A=length\n"
            "B8+8+[]\n"
            "B16+4+[]* B=length\n");
}

TEST(SchedulerTest, TwoPartialSlotsLetTwoPromptsPrefillTogether) {
  Driver d({.max_num_batched_tokens = 12,
            .max_model_len = 128,
            .long_prefill_token_threshold = 8,
            .max_num_partial_prefills = 2,
            .max_long_partial_prefills = 2},
           {.block_size = 4}, 65);
  ASSERT_TRUE(d.add("A", prompt(20, 1), 1).ok());
  ASSERT_TRUE(d.add("B", prompt(20, 100), 1).ok());
  ASSERT_TRUE(d.add("C", prompt(3, 200), 1).ok());
  auto traces = d.run();
  ASSERT_GE(traces.size(), 1u);
  EXPECT_EQ(traces[0], "A0+8[1,2,3,4,5] B0+4[6,7,8,9,10]");
}

TEST(SchedulerTest, PromptTokensAreCappedWhileRequestsDecode) {
  Driver d(
      {.max_num_batched_tokens = 32, .max_model_len = 128, .max_prefill_tokens_with_decode = 6},
      {.block_size = 4}, 65);
  // Alone, a prompt takes the whole step budget.
  ASSERT_TRUE(d.add("A", prompt(20, 1), 4).ok());
  EXPECT_EQ(d.step().trace, "A0+20[1,2,3,4,5]*");
  // A decodes: prompts that arrive now share 6 prompt tokens per step. B (4 tokens) gets its
  // first token from the first step, C the rest of the 6 and its first token one step later,
  // rather than both waiting for one step of 9 prompt tokens.
  ASSERT_TRUE(d.add("B", prompt(4, 100), 2).ok());
  ASSERT_TRUE(d.add("C", prompt(5, 200), 2).ok());
  EXPECT_EQ(d.step().trace, "A20+1+[6]* B0+4[7]* C0+2[8,9]");
  EXPECT_EQ(d.step().trace, "A21+1+[]* B4+1+[10]* C2+3+[]* B=length");
}

TEST(SchedulerTest, PreemptsTheYoungestAndResumesFromThePrefixCache) {
  // 5 usable blocks of 2 tokens; admission keeps a 1-block watermark while others run.
  Driver d({.max_num_batched_tokens = 16, .max_model_len = 64}, {.block_size = 2}, 6);
  EXPECT_EQ(d.sched->admission_watermark_blocks(), 1);
  ASSERT_TRUE(d.add("A", prompt(3, 10), 4).ok());
  ASSERT_TRUE(d.add("B", prompt(3, 20), 4).ok());
  ASSERT_TRUE(d.add("C", prompt(3, 30), 4).ok());
  EXPECT_EQ(join_lines(d.run()),
            // C does not fit beside A and B (2 blocks + watermark > 1 free).
            "A0+3[1,2]* B0+3[3,4]*\n"
            "A3+1+[]* B3+1+[]*\n"
            // A needs a block, takes the last one; B needs one too and is the youngest: it
            // preempts itself. Its blocks 3,4 stay cached.
            "A4+1+[5]* ^B\n"
            "A5+1+[]* A=length\n"
            // B resumes with 4 of its 5 tokens found in the cache: it recomputes only one.
            "B4+1[3,4,5]*\n"
            "B5+1+[]* B=length\n"
            // C reuses the least recently freed blocks (A's 2 and 1, then B's tail block 5).
            "C0+3[2,1]*\n"
            "C3+1+[]*\n"
            "C4+1+[5]*\n"
            "C5+1+[]* C=length\n");
  SchedulerStats st = d.sched->stats();
  EXPECT_EQ(st.num_preemptions, 1);
  EXPECT_EQ(st.prefix_cache.queries, 3 + 3 + 5 + 3);
  EXPECT_EQ(st.prefix_cache.hits, 4);
  EXPECT_EQ(st.generation_tokens, 12);
  EXPECT_EQ(st.prompt_tokens, 9);
}

TEST(SchedulerTest, PriorityPolicyRunsLowerValuesFirst) {
  Driver d({.max_num_seqs = 1, .max_model_len = 64, .policy = SchedulingPolicy::kPriority},
           {.block_size = 4}, 9);
  auto prio = [](int64_t p) { return [p](RequestSpec& s) { s.priority = p; }; };
  ASSERT_TRUE(d.add("A", prompt(3, 10), 2, prio(5)).ok());
  ASSERT_TRUE(d.add("B", prompt(3, 20), 2, prio(1)).ok());
  ASSERT_TRUE(d.add("C", prompt(3, 30), 2, prio(0)).ok());
  ASSERT_TRUE(d.add("D", prompt(3, 40), 2, prio(1)).ok());  // ties go by arrival: after B
  EXPECT_EQ(join_lines(d.run()),
            "C0+3[1]*\n"
            "C3+1+[]* C=length\n"
            "B0+3[2]*\n"
            "B3+1+[]* B=length\n"
            "D0+3[3]*\n"
            "D3+1+[]* D=length\n"
            "A0+3[4]*\n"
            "A3+1+[]* A=length\n");
}

TEST(SchedulerTest, FcfsIgnoresPriority) {
  Driver d({.max_num_seqs = 1, .max_model_len = 64}, {.block_size = 4}, 9);
  ASSERT_TRUE(d.add("A", prompt(3, 10), 1, [](RequestSpec& s) { s.priority = 5; }).ok());
  ASSERT_TRUE(d.add("B", prompt(3, 20), 1, [](RequestSpec& s) { s.priority = 0; }).ok());
  EXPECT_EQ(join_lines(d.run()), "A0+3[1]* A=length\nB0+3[2]* B=length\n");
}

TEST(SchedulerTest, PriorityPreemptsTheLowestPriorityFirst) {
  // 6 usable blocks of 2; each request holds 1 block after its 2-token prompt, then grows.
  Driver d({.max_model_len = 64, .policy = SchedulingPolicy::kPriority}, {.block_size = 2}, 7);
  auto prio = [](int64_t p) { return [p](RequestSpec& s) { s.priority = p; }; };
  ASSERT_TRUE(d.add("A", prompt(2, 10), 4, prio(0)).ok());
  ASSERT_TRUE(d.add("B", prompt(2, 20), 4, prio(9)).ok());  // arrives before C, lower priority
  ASSERT_TRUE(d.add("C", prompt(2, 30), 4, prio(1)).ok());
  auto traces = d.run();
  ASSERT_GE(traces.size(), 4u);
  EXPECT_EQ(traces[0], "A0+2[1]* C0+2[2]* B0+2[3]*");
  EXPECT_EQ(traces[1], "A2+1+[4]* C2+1+[5]* B2+1+[6]*");
  EXPECT_EQ(traces[2], "A3+1+[]* C3+1+[]* B3+1+[]*");
  // A needs a block: B (priority 9) is the victim although it arrived before C.
  EXPECT_EQ(traces[3], "A4+1+[6]* C4+1+[3]* ^B A=length C=length");
}

TEST(SchedulerTest, BudgetAndMaxNumSeqsLimitEachStep) {
  Driver d({.max_num_seqs = 2, .max_num_batched_tokens = 5, .max_model_len = 64}, {.block_size = 4},
           33);
  ASSERT_TRUE(d.add("A", prompt(2, 10), 3).ok());
  ASSERT_TRUE(d.add("B", prompt(2, 20), 3).ok());
  ASSERT_TRUE(d.add("C", prompt(2, 30), 3).ok());
  auto traces = d.run();
  // Two sequences at most; C starts when A and B are done.
  EXPECT_EQ(join_lines(traces),
            "A0+2[1]* B0+2[2]*\n"
            "A2+1+[]* B2+1+[]*\n"
            "A3+1+[]* B3+1+[]* A=length B=length\n"
            "C0+2[3]*\n"
            "C2+1+[]*\n"
            "C3+1+[]* C=length\n");
}

TEST(SchedulerTest, TokenBudgetAsSmallAsOneBlockStillProgresses) {
  Driver d({.max_num_batched_tokens = 4, .max_model_len = 64}, {.block_size = 4}, 9);
  ASSERT_TRUE(d.add("A", prompt(6, 10), 2).ok());
  ASSERT_TRUE(d.add("B", prompt(1, 20), 2).ok());
  EXPECT_EQ(join_lines(d.run()),
            // A's partial prefill holds the only slot and the whole budget first.
            "A0+4[1,2]\n"
            "A4+2+[]* B0+1[3]*\n"
            "A6+1+[]* B1+1+[]* A=length B=length\n");
}

}  // namespace
}  // namespace strata::sched
