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
