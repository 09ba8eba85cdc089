// For every architecture: fast kernels match the reference over multi-token prompts, and greedy
// output is identical alone, in a batch, chunked, and with any block size (batch invariance).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "kernels/backend.h"
#include "kernels/ops.h"
#include "model_test_util.h"
#include "tiny_models.h"

namespace strata {
namespace {

using testing::ModelHarness;
using testing::tiny_archs;

std::vector<int32_t> prompt_for(int64_t vocab, int n, int seed) {
  std::vector<int32_t> p;
  for (int i = 0; i < n; ++i) p.push_back(static_cast<int32_t>((i * 37 + seed * 11 + 5) % vocab));
  return p;
}

TEST(ModelParity, FastLogitsMatchReferenceForEveryArchitecture) {
  ThreadPool pool(2);
  for (const auto& arch : tiny_archs()) {
    for (const char* dtype : {"float32", "bfloat16"}) {
      auto m = testing::load_tiny(arch, pool, dtype);
      ASSERT_TRUE(m.model) << arch.name;
      const int64_t V = m.model->config().vocab_size;
      auto prompt = prompt_for(V, 23, 1);
      for (const KernelVariantInfo* info : supported_kernel_variants()) {
        const std::string& v = info->name;
        ModelHarness ref(*m.model, 1, 64, 16, DType::kF32), fast(*m.model, 1, 64, 16, DType::kF32);
        // Prompt, then three decode steps: compare every step's logits.
        std::vector<std::vector<int32_t>> steps = {prompt, {3}, {7}, {11}};
        for (const auto& s : steps) {
          auto a = ref.step1(0, s, reference_kernel_ops());
          auto b = fast.step1(0, s, kernel_ops(v));
          double max_abs = 0;
          for (float x : a) max_abs = std::max(max_abs, static_cast<double>(std::fabs(x)));
          ASSERT_GT(max_abs, 1e-3) << "degenerate logits";
          for (int64_t i = 0; i < V; ++i)
            ASSERT_NEAR(b[i], a[i], 1e-4 * max_abs + 1e-5)
                << arch.name << " " << dtype << " " << v << " logit " << i;
        }
      }
    }
  }
}

TEST(ModelInvariance, GreedyIdenticalAloneBatchedChunkedAnyBlockSize) {
  ThreadPool pool(2);
  const KernelOps& ops = kernel_ops(default_kernel_variant());
  for (const auto& arch : tiny_archs()) {
    auto m = testing::load_tiny(arch, pool, "bfloat16");
    const int64_t V = m.model->config().vocab_size;
    auto prompt = prompt_for(V, 29, 2);
    auto base = testing::greedy(*m.model, prompt, 12, ops, 1 << 30, 16, DType::kBF16);
    for (int64_t bs : {8, 32}) {
      for (int64_t chunk : {1, 5, 16}) {
        auto got = testing::greedy(*m.model, prompt, 12, ops, chunk, bs, DType::kBF16);
        EXPECT_EQ(got, base) << arch.name << " block " << bs << " chunk " << chunk;
      }
    }
    // In one batch with two other sequences (one prefilling, one decoding): bit-identical logits.
    ModelHarness alone(*m.model, 1, 64, 16, DType::kBF16);
    ModelHarness batch(*m.model, 3, 64, 8, DType::kBF16);
    auto other1 = prompt_for(V, 9, 3), other2 = prompt_for(V, 17, 4);
    batch.step({1}, {other1}, ops);
    auto a = alone.step1(0, prompt, ops);
    auto b = batch.step({2, 0, 1}, {other2, prompt, {5}}, ops);
    ASSERT_EQ(std::memcmp(a.data(), b.data() + V, V * sizeof(float)), 0) << arch.name;
    a = alone.step1(0, {7}, ops);
    b = batch.step({1, 0}, {{9}, {7}}, ops);
    ASSERT_EQ(std::memcmp(a.data(), b.data() + V, V * sizeof(float)), 0) << arch.name;
  }
}

}  // namespace
}  // namespace strata
