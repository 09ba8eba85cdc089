// The real DeepSeek-V3 and Mixtral-8x7B configs from ../shared/data: DeepSeek-V3 scaled down by
// --hf-overrides (MLA dims and FP8 format as shipped) runs with dummy weights, fast against
// reference; its full-size KV layout is the 576-value latent; Mixtral's tensor names are exactly
// those of its real checkpoint index.
#include <gtest/gtest.h>

#include <cmath>
#include <set>

#include "core/json.h"
#include "model/deepseek_mla.h"
#include "model/llama.h"
#include "model/moe.h"
#include "model_test_util.h"
#include "recording_source.h"
#include "test_util.h"

namespace strata {
namespace {

using testing::ModelHarness;

// The real config with every size that sets the model's cost scaled down, except the MLA dims.
constexpr const char* kV3Small = R"({"num_hidden_layers": 2, "first_k_dense_replace": 1,
    "hidden_size": 256, "intermediate_size": 512, "moe_intermediate_size": 64,
    "n_routed_experts": 16, "num_experts_per_tok": 4, "n_group": 4, "topk_group": 2,
    "num_attention_heads": 4, "num_key_value_heads": 4, "vocab_size": 1024})";

TEST(DeepseekV3RealConfig, FullSizeLatentCacheIs576ValuesPerLayer) {
  STRATA_REQUIRE_SHARED("configs/deepseek-v3/config.json");
  LoadOptions o;
  o.model = testing::shared_data_path("configs/deepseek-v3");
  o.load_format = "dummy";
  auto c = load_model_config(o);
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  auto s = parse_mla_spec(*c);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->cache_row(), 576);
  EXPECT_EQ(s->q_lora_rank, 1536);
  // Softmax scale with YaRN (factor 40, mscale_all_dim 1): 192^-0.5 * (0.1 ln 40 + 1)^2.
  EXPECT_NEAR(s->softmax_scale, 0.135234, 1e-5);
  ASSERT_TRUE(c->fp8.has_value());
  EXPECT_EQ(c->fp8->block_n, 128);
  EXPECT_EQ(c->fp8->block_k, 128);
  auto moe = parse_moe_spec(*c);
  ASSERT_TRUE(moe.ok());
  ASSERT_TRUE(moe->has_value());
  EXPECT_EQ((*moe)->routing.num_experts, 256);
  EXPECT_EQ((*moe)->routing.num_groups, 8);
  EXPECT_EQ((*moe)->routing.group_score, MoeGroupScore::kTopTwoSum);
  EXPECT_TRUE((*moe)->correction_bias);
  EXPECT_FALSE((*moe)->is_moe(2));
  EXPECT_TRUE((*moe)->is_moe(3));
  // 61 layers x 576 bf16 values: 70,272 bytes per token, against 61 x 128 heads x (192 + 128)
  // x 2 bytes = 4,997,120 for per-head K and V.
  EXPECT_EQ(c->num_hidden_layers * s->cache_row() * 2, 70272);
}

// MLA has no KV heads: overriding num_attention_heads alone (the config keeps
// num_key_value_heads 128, which 16 does not divide into) must load, as it does in vLLM.
TEST(DeepseekV3RealConfig, HeadCountOverrideIgnoresTheMeaninglessKvHeadCount) {
  STRATA_REQUIRE_SHARED("configs/deepseek-v3/config.json");
  auto c = read_hf_config(testing::shared_data_path("configs/deepseek-v3"),
                          R"({"num_attention_heads": 16})");
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_EQ(c->num_attention_heads, 16);
  ThreadPool pool(2);
  LoadOptions o;
  o.model = testing::shared_data_path("configs/deepseek-v3");
  o.load_format = "dummy";
  o.hf_overrides = R"({"num_hidden_layers": 2, "first_k_dense_replace": 1, "hidden_size": 256,
      "intermediate_size": 512, "moe_intermediate_size": 64, "n_routed_experts": 16,
      "num_experts_per_tok": 4, "n_group": 4, "topk_group": 2, "num_attention_heads": 6,
      "vocab_size": 1024})";
  o.pool = &pool;
  o.limits = {64, 64, 4};
  auto m = load_model(o);
  ASSERT_TRUE(m.ok()) << m.status().to_string();
  std::vector<int32_t> prompt = {5, 77, 300, 9};
  EXPECT_EQ(testing::greedy(*m->model, prompt, 4, kernel_ops(default_kernel_variant())).size(), 4u);
}

TEST(DeepseekV3RealConfig, ScaledDownByOverridesRunsFastAndReferenceAlike) {
  STRATA_REQUIRE_SHARED("configs/deepseek-v3/config.json");
  ThreadPool pool(2);
  LoadOptions o;
  o.model = testing::shared_data_path("configs/deepseek-v3");
  o.load_format = "dummy";
  o.hf_overrides = kV3Small;
  o.seed = 5;
  o.pool = &pool;
  o.limits = {64, 64, 4};
  auto m = load_model(o);
  ASSERT_TRUE(m.ok()) << m.status().to_string();
  Model& model = *m->model;
  EXPECT_EQ(model.weight_dtype(), DType::kF8E4M3);
  const KvSpec kv = model.kv_spec();
  EXPECT_EQ(kv.head_dim, 576);
  EXPECT_FALSE(kv.has_v);
  EXPECT_EQ(kv.bytes_per_token(DType::kBF16), 2 * 576 * 2);
  std::vector<int32_t> prompt;
  for (int i = 0; i < 9; ++i) prompt.push_back((i * 97 + 13) % 1024);
  ModelHarness ref(model, 1, 32, 16, DType::kF32), fast(model, 1, 32, 16, DType::kF32);
  for (const auto& step : std::vector<std::vector<int32_t>>{prompt, {17}}) {
    auto a = ref.step1(0, step, reference_kernel_ops());
    auto b = fast.step1(0, step, kernel_ops(default_kernel_variant()));
    double mx = 0;
    for (float x : a) mx = std::max(mx, double{std::fabs(x)});
    ASSERT_GT(mx, 1e-3);
    for (size_t i = 0; i < a.size(); ++i) ASSERT_NEAR(b[i], a[i], 1e-4 * mx) << i;
  }
  const KernelOps& ops = kernel_ops(default_kernel_variant());
  EXPECT_EQ(testing::greedy(model, prompt, 6, ops, 4, 8, DType::kBF16),
            testing::greedy(model, prompt, 6, ops, 1 << 30, 16, DType::kBF16));
}

TEST(MixtralRealConfig, TensorNamesAreThoseOfTheRealCheckpoint) {
  STRATA_REQUIRE_SHARED("configs/mixtral-8x7b/model.safetensors.index.json");
  auto index = read_json_file(
      testing::shared_data_path("configs/mixtral-8x7b/model.safetensors.index.json"));
  ASSERT_TRUE(index.ok());
  std::set<std::string> names;
  for (auto it = (*index)["weight_map"].begin(); it != (*index)["weight_map"].end(); ++it)
    names.insert(it.key());
  LoadOptions o;
  o.model = testing::shared_data_path("configs/mixtral-8x7b");
  o.load_format = "dummy";
  o.hf_overrides = R"({"num_hidden_layers": 2, "hidden_size": 64, "intermediate_size": 32,
                       "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 100})";
  auto c = load_model_config(o);
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  ThreadPool pool(1);
  auto rec = std::make_unique<testing::RecordingSource>(make_dummy_source(1, DType::kF32, 0.02));
  auto* recorder = rec.get();
  ModelBuildOptions build;
  build.storage = DType::kF32;
  build.limits = {8, 8, 2};
  build.pool = &pool;
  auto model = create_llama_model(*c, std::move(rec), build);  // owns the recorder
  ASSERT_TRUE(model.ok()) << model.status().to_string();
  // 2 layers x (4 attention + 2 norms + gate + 8 experts x 3) + embedding, norm, head.
  EXPECT_EQ(recorder->tensors.size(), 2u * 31 + 3);
  for (const auto& [name, t] : recorder->tensors)
    EXPECT_TRUE(names.count(name)) << name << " is not in Mixtral's checkpoint";
}

}  // namespace
}  // namespace strata
