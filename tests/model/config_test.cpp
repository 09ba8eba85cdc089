#include "model/model_config.h"

#include <gtest/gtest.h>

#include <cmath>

#include "core/json.h"
#include "model/rope.h"
#include "test_util.h"
#include "tiny_models.h"

namespace strata {
namespace {

TEST(ModelConfigTest, RealLlama32Config) {
  STRATA_REQUIRE_SHARED("configs/llama-3.2-1b/config.json");
  auto c = read_hf_config(testing::shared_data_path("configs/llama-3.2-1b"), "");
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_EQ(c->architecture, "LlamaForCausalLM");
  EXPECT_EQ(c->hidden_size, 2048);
  EXPECT_EQ(c->num_key_value_heads, 8);
  EXPECT_EQ(c->head_dim, 64);
  EXPECT_TRUE(c->tie_word_embeddings);
  EXPECT_EQ(c->rope_scaling.type, RopeScalingType::kLlama3);
  EXPECT_EQ(c->rope_scaling.factor, 32.0);
  EXPECT_EQ(c->torch_dtype, DType::kBF16);
}

TEST(ModelConfigTest, RealMistralConfig) {
  STRATA_REQUIRE_SHARED("configs/mistral-7b-instruct-v0.3/config.json");
  auto c = read_hf_config(testing::shared_data_path("configs/mistral-7b-instruct-v0.3"), "");
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_EQ(c->architecture, "MistralForCausalLM");
  EXPECT_EQ(c->vocab_size, 32768);
  EXPECT_FALSE(c->sliding_window.has_value());
}

TEST(ModelConfigTest, OverridesAndErrors) {
  Json c = Json::parse(testing::tiny_archs()[0].config_json);
  Json o = {{"num_hidden_layers", 1}};
  auto r = parse_hf_config(c, &o);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->num_hidden_layers, 1);
  Json bad = c;
  bad["num_key_value_heads"] = 3;
  r = parse_hf_config(bad, nullptr);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("multiple of num_key_value_heads"), std::string::npos);
  bad = c;
  bad.erase("hidden_size");
  EXPECT_NE(parse_hf_config(bad, nullptr).status().message().find("hidden_size"),
            std::string::npos);
  bad = c;
  bad["hidden_size"] = "wide";
  EXPECT_FALSE(parse_hf_config(bad, nullptr).ok());
  bad = c;
  bad["rope_scaling"] = {{"rope_type", "longrope"}};
  EXPECT_EQ(parse_hf_config(bad, nullptr).status().code(), StatusCode::kUnimplemented);
}

TEST(RopeTest, Llama3ScalingKeepsHighFrequenciesAndScalesLowOnes) {
  RopeScaling s;
  s.type = RopeScalingType::kLlama3;
  s.factor = 8;
  s.low_freq_factor = 1;
  s.high_freq_factor = 4;
  s.original_max_position_embeddings = 8192;
  auto t = RopeTable::create(128, 500000.0, s, 131072);
  auto plain = RopeTable::create(128, 500000.0, RopeScaling{}, 131072);
  ASSERT_TRUE(t.ok() && plain.ok());
  EXPECT_DOUBLE_EQ(t->inv_freq()[0], plain->inv_freq()[0]);        // wavelength 2pi < 2048
  EXPECT_DOUBLE_EQ(t->inv_freq()[63], plain->inv_freq()[63] / 8);  // very long wavelength
  // In between: a smooth interpolation.
  for (int i = 0; i < 64; ++i) {
    EXPECT_LE(t->inv_freq()[i], plain->inv_freq()[i]);
    EXPECT_GE(t->inv_freq()[i], plain->inv_freq()[i] / 8 - 1e-18);
  }
  std::vector<int32_t> pos = {0, 5};
  std::vector<float> cos(128), sin(128);
  t->compute(pos, cos.data(), sin.data());
  EXPECT_EQ(cos[0], 1.0f);
  EXPECT_NEAR(sin[64], std::sin(5 * t->inv_freq()[0]), 1e-6);
}

TEST(RopeTest, YarnRampsBetweenInterpolationAndExtrapolation) {
  RopeScaling s;
  s.type = RopeScalingType::kYarn;
  s.factor = 4;
  s.original_max_position_embeddings = 4096;
  auto t = RopeTable::create(64, 10000.0, s, 16384);
  auto plain = RopeTable::create(64, 10000.0, RopeScaling{}, 16384);
  ASSERT_TRUE(t.ok());
  EXPECT_DOUBLE_EQ(t->inv_freq()[0], plain->inv_freq()[0]);
  EXPECT_DOUBLE_EQ(t->inv_freq()[31], plain->inv_freq()[31] / 4);
  EXPECT_NEAR(t->magnitude(), 0.1 * std::log(4.0) + 1, 1e-12);
}

}  // namespace
}  // namespace strata
