// The memory plan (engine/memory_plan.h): the division of a device's memory, and each refusal
// naming the flag to change and by how much.
#include "engine/memory_plan.h"

#include <gtest/gtest.h>

namespace strata {
namespace {

constexpr int64_t kMiB = int64_t{1} << 20;

engine::MemoryPlanInputs inputs() {
  engine::MemoryPlanInputs in;
  in.device_memory_bytes = 1000 * kMiB;
  in.gpu_memory_utilization = 0.9;  // 900 MiB
  in.weight_bytes = 500 * kMiB;
  in.workspace_bytes = 100 * kMiB;  // 1 MiB per token of the budget below
  in.max_num_batched_tokens = 100;
  in.workspace_for_tokens = [](int64_t t) { return t * kMiB; };
  in.kv_bytes_per_token = 1024;
  in.block_size = 16;
  in.max_model_len = 4096;
  return in;
}

TEST(MemoryPlan, DividesTheBudget) {
  auto p = engine::plan_memory(inputs());
  ASSERT_TRUE(p.ok()) << p.status().to_string();
  EXPECT_EQ(p->memory_budget, 900 * kMiB);
  EXPECT_EQ(p->num_blocks, 300 * kMiB / (1024 * 16));  // what the weights and activations leave
  EXPECT_EQ(p->kv_bytes, p->num_blocks * 1024 * 16);
  EXPECT_EQ(p->num_tokens(), p->num_blocks * 16);
  auto in = inputs();
  in.kv_cache_memory_bytes = 64 * kMiB;  // --kv-cache-memory overrides the budget
  p = engine::plan_memory(in);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->kv_bytes, 64 * kMiB);
}

TEST(MemoryPlan, RefusalsSayWhatToChange) {
  auto in = inputs();
  in.weight_bytes = 950 * kMiB;
  auto p = engine::plan_memory(in);
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), StatusCode::kResourceExhausted);
  EXPECT_NE(p.status().message().find("the weights need 950"), std::string::npos)
      << p.status().message();

  in = inputs();
  in.max_num_batched_tokens = 1000;
  in.workspace_bytes = 1000 * kMiB;
  p = engine::plan_memory(in);
  ASSERT_FALSE(p.ok());
  // 400 MiB are left after the weights: 399 tokens' activations fit, 400 do not.
  EXPECT_NE(p.status().message().find("--max-num-batched-tokens 1000 needs"), std::string::npos)
      << p.status().message();
  EXPECT_NE(p.status().message().find("at most 399 fit"), std::string::npos)
      << p.status().message();

  in = inputs();
  in.max_model_len = 1 << 20;
  p = engine::plan_memory(in);
  ASSERT_FALSE(p.ok());
  const int64_t blocks = 300 * kMiB / (1024 * 16);
  EXPECT_NE(p.status().message().find("lower --max-model-len (at most " +
                                      std::to_string(blocks * 16) + ")"),
            std::string::npos)
      << p.status().message();
}

}  // namespace
}  // namespace strata

namespace strata {
namespace {

// A DeepSeek-V4-Pro-like hybrid layout at fp8 with blocks of 256 tokens: 30 CSA layers (64
// compressed rows of 584 B and 64 indexer keys of 132 B per block), 30 HCA layers (2 rows of
// 584 B), one window-only layer; 5 MiB of window and compressor state per sequence.
constexpr int64_t kV4BlockBytes = 30 * (64 * 584 + 64 * 132) + 30 * (2 * 584);
constexpr int64_t kV4StateBytes = 5 * kMiB;

engine::MemoryPlanInputs v4_inputs(int64_t kv_cache_memory, int64_t max_num_seqs) {
  engine::MemoryPlanInputs in = inputs();
  in.block_size = 256;
  in.kv_block_bytes = kV4BlockBytes;
  in.kv_bytes_per_token = 0;
  in.state_bytes_per_slot = kV4StateBytes;
  in.num_running_state_slots = max_num_seqs;
  in.num_snapshot_state_slots = engine::num_snapshot_state_slots(max_num_seqs, true);
  in.kv_cache_memory_bytes = kv_cache_memory;
  in.max_model_len = 800000;
  return in;
}

TEST(MemoryPlan, HybridBlocksAndStateSlotsComeOutOfTheKvMemory) {
  constexpr int64_t kGiB = int64_t{1} << 30;
  auto p = engine::plan_memory(v4_inputs(8 * kGiB, 64));
  ASSERT_TRUE(p.ok()) << p.status().to_string();
  EXPECT_EQ(p->block_bytes, kV4BlockBytes);
  EXPECT_EQ(p->num_state_slots, 128);
  EXPECT_EQ(p->num_snapshot_slots, 64);
  EXPECT_EQ(p->state_bytes(), 128 * kV4StateBytes);
  EXPECT_EQ(p->num_blocks, (8 * kGiB - 128 * kV4StateBytes) / kV4BlockBytes);
  EXPECT_EQ(p->kv_bytes, p->num_blocks * kV4BlockBytes);  // the paged blocks only
  EXPECT_GE(p->num_tokens(), 800000);
  // Not a whole number of bytes per token: the per-token figure is the average, rounded up.
  EXPECT_EQ(p->kv_bytes_per_token, (kV4BlockBytes + 255) / 256);
}

TEST(MemoryPlan, LongMaxModelLenIsAcceptedWhereTheBudgetAllowsAndRefusedClearlyElsewhere) {
  constexpr int64_t kGiB = int64_t{1} << 30;
  // 800000 tokens need 3125 blocks (4.1 GiB) and one 5 MiB slot.
  const int64_t one_seq = 3125 * kV4BlockBytes + kV4StateBytes;
  auto p = engine::plan_memory(v4_inputs(one_seq + 2 * kV4StateBytes, 1));
  ASSERT_TRUE(p.ok()) << p.status().to_string();
  EXPECT_GE(p->num_blocks, 3125);

  // Room for the blocks and one slot, but not for 256 sequences' slots: the running slots take
  // at most half of what is left beyond one full-length sequence (the scheduler then runs fewer
  // at once), the snapshots at most a quarter, and the full-length sequence still fits.
  p = engine::plan_memory(v4_inputs(5 * kGiB, 256));
  ASSERT_TRUE(p.ok()) << p.status().to_string();
  const int64_t room = 5 * kGiB - 3125 * kV4BlockBytes - kV4StateBytes;
  EXPECT_EQ(p->max_running_seqs, 1 + room / 2 / kV4StateBytes);
  EXPECT_LT(p->max_running_seqs, 256);
  EXPECT_EQ(p->num_snapshot_slots, room / 4 / kV4StateBytes);
  EXPECT_EQ(p->num_state_slots, p->max_running_seqs + p->num_snapshot_slots);
  EXPECT_GE(p->num_blocks, 3125);
  EXPECT_LE(p->state_bytes() + p->kv_bytes, 5 * kGiB);
  // Where they fit, max_num_seqs is kept.
  p = engine::plan_memory(v4_inputs(5 * kGiB, 8));
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->max_running_seqs, 8);
  EXPECT_EQ(p->num_snapshot_slots, 8);

  // Not even one sequence: lower --max-model-len, to what fits with one slot.
  p = engine::plan_memory(v4_inputs(4 * kGiB, 1));
  ASSERT_FALSE(p.ok());
  const std::string m2 = p.status().message();
  EXPECT_NE(m2.find("max_model_len 800000 needs 3125 KV blocks"), std::string::npos) << m2;
  EXPECT_NE(m2.find("lower --max-model-len (at most "), std::string::npos) << m2;
  const int64_t most = std::stoll(m2.substr(m2.find("(at most ") + 9));
  auto in = v4_inputs(4 * kGiB, 1);
  in.num_snapshot_state_slots = 0;
  in.max_model_len = most;
  EXPECT_TRUE(engine::plan_memory(in).ok()) << engine::plan_memory(in).status().to_string();
}

TEST(MemoryPlan, BlockSizeFollowsTheLayout) {
  // No --block-size: 256 for a hybrid layout, 64 for V3.2's fp8_ds_mla, the default otherwise.
  EXPECT_EQ(*engine::resolve_block_size(16, false, 256, true, false), 256);
  EXPECT_EQ(*engine::resolve_block_size(16, false, 1, false, true), 64);
  EXPECT_EQ(*engine::resolve_block_size(16, false, 1, false, false), 16);
  // Given: kept when it is a multiple of the layout's.
  EXPECT_EQ(*engine::resolve_block_size(512, true, 256, true, false), 512);
  EXPECT_EQ(*engine::resolve_block_size(64, true, 1, false, true), 64);
  auto bad = engine::resolve_block_size(128, true, 256, true, false);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("multiple of 256"), std::string::npos)
      << bad.status().message();
  bad = engine::resolve_block_size(16, true, 1, false, true);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("--block-size 64"), std::string::npos)
      << bad.status().message();
}

}  // namespace
}  // namespace strata
