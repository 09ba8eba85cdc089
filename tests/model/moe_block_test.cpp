// MoeBlock::forward (tokens grouped by expert, batched matmuls) against forward_reference (token
// by token, expert by expert, double sums), for every MoE family in tiny_models.h and every kernel
// variant this CPU runs; and the fast path's batch invariance (a token's output never depends on
// which other tokens share the step).
#include <gtest/gtest.h>

#include <cmath>

#include "core/rng.h"
#include "kernels/backend.h"
#include "model/model_config.h"
#include "model/moe.h"
#include "model/weight_source.h"
#include "tiny_models.h"

namespace strata {
namespace {

std::vector<float> random_rows(int64_t T, int64_t H, uint64_t seed) {
  Rng rng(seed);
  std::vector<float> x(static_cast<size_t>(T * H));
  for (auto& v : x) v = static_cast<float>(rng.normal());
  return x;
}

TEST(MoeBlock, FastForwardMatchesTheReferenceForEveryFamilyAndVariant) {
  ThreadPool pool(2);
  int families = 0;
  for (const auto& arch : testing::tiny_archs()) {
    auto config = read_hf_config(testing::write_tiny_config(arch.config_json), "");
    ASSERT_TRUE(config.ok()) << arch.name << ": " << config.status().to_string();
    auto spec = parse_moe_spec(*config);
    ASSERT_TRUE(spec.ok()) << arch.name;
    if (!spec->has_value()) continue;
    int64_t layer = 0;
    while (!(*spec)->is_moe(layer)) ++layer;
    ++families;
    auto src = make_dummy_source(7, DType::kF32, 0.05);
    auto block = MoeBlock::load(*src, **spec, *config, layer, DType::kF32);
    ASSERT_TRUE(block.ok()) << arch.name << ": " << block.status().to_string();
    const int64_t H = config->hidden_size, T = 11;
    MoeWorkspace ws;
    ws.allocate(*spec, H, config->intermediate_size, T);
    auto x = random_rows(T, H, 3);
    std::vector<float> want(static_cast<size_t>(T * H)), got(want.size());
    block->forward_reference(x.data(), H, T, want.data(), H, reference_kernel_ops(), pool, ws);
    double scale = 0;
    for (float v : want) scale = std::max(scale, static_cast<double>(std::fabs(v)));
    ASSERT_GT(scale, 1e-4) << arch.name << ": degenerate output";
    for (const KernelVariantInfo* v : supported_kernel_variants(/*with_reference=*/true)) {
      ASSERT_TRUE(block->forward(x.data(), H, T, got.data(), H, v->ops(), pool, ws).ok());
      for (size_t i = 0; i < want.size(); ++i)
        ASSERT_NEAR(got[i], want[i], 1e-4 * scale) << arch.name << " " << v->name << " " << i;
      // Batch invariance: token 5 alone gives bit-identical output to token 5 in the batch.
      std::vector<float> one(static_cast<size_t>(H));
      ASSERT_TRUE(block->forward(x.data() + 5 * H, H, 1, one.data(), H, v->ops(), pool, ws).ok());
      for (int64_t h = 0; h < H; ++h)
        ASSERT_EQ(one[h], got[5 * H + h]) << arch.name << " " << v->name << " " << h;
    }
  }
  EXPECT_GE(families, 4) << "Mixtral, Qwen2-MoE, Qwen3-MoE and DeepSeek configs are MoE";
}

}  // namespace
}  // namespace strata
