// Loading a checkpoint that does not match its config fails with an error naming the file and
// the tensor, never a crash.
#include <gtest/gtest.h>

#include "core/dtype.h"
#include "core/file_util.h"
#include "io/writers.h"
#include "model/model.h"
#include "tiny_models.h"

namespace strata {
namespace {

// The tiny Llama's tensors with real shapes, as f32 zeros.
std::vector<io::TensorToWrite> llama_tensors(int64_t H, int64_t F, int64_t V, int64_t layers,
                                             int64_t q, int64_t kv) {
  auto t = [](std::string name, std::vector<int64_t> shape) {
    int64_t n = 1;
    for (auto d : shape) n *= d;
    return io::TensorToWrite{std::move(name), DType::kF32, shape, std::string(n * 4, '\0')};
  };
  std::vector<io::TensorToWrite> out = {t("model.embed_tokens.weight", {V, H}),
                                        t("model.norm.weight", {H}), t("lm_head.weight", {V, H})};
  for (int64_t l = 0; l < layers; ++l) {
    std::string p = "model.layers." + std::to_string(l) + ".";
    out.push_back(t(p + "input_layernorm.weight", {H}));
    out.push_back(t(p + "post_attention_layernorm.weight", {H}));
    out.push_back(t(p + "self_attn.q_proj.weight", {q, H}));
    out.push_back(t(p + "self_attn.k_proj.weight", {kv, H}));
    out.push_back(t(p + "self_attn.v_proj.weight", {kv, H}));
    out.push_back(t(p + "self_attn.o_proj.weight", {H, q}));
    out.push_back(t(p + "mlp.gate_proj.weight", {F, H}));
    out.push_back(t(p + "mlp.up_proj.weight", {F, H}));
    out.push_back(t(p + "mlp.down_proj.weight", {H, F}));
  }
  return out;
}

Status load_dir(const std::string& dir) {
  ThreadPool pool(1);
  LoadOptions o;
  o.model = dir;
  o.pool = &pool;
  o.limits = {16, 64, 4};
  auto m = load_model(o);
  return m.ok() ? ok_status() : m.status();
}

TEST(LoadErrorsTest, MissingWrongShapeAndUnsupportedTensorsAreNamed) {
  const auto& arch = testing::tiny_archs()[0];  // llama3_untied: H 64, F 96, V 300, 2 layers
  std::string dir = testing::write_tiny_config(arch.config_json);
  auto tensors = llama_tensors(64, 96, 300, 2, 64, 32);
  ASSERT_TRUE(io::write_safetensors(dir + "/model.safetensors", tensors).ok());
  EXPECT_TRUE(load_dir(dir).ok()) << load_dir(dir).to_string();

  auto missing = tensors;
  missing.erase(missing.begin() + 5);  // layer 0's q_proj
  ASSERT_TRUE(io::write_safetensors(dir + "/model.safetensors", missing).ok());
  Status s = load_dir(dir);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("model.layers.0.self_attn.q_proj.weight"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find(dir), std::string::npos) << s.message();

  auto wrong = tensors;
  wrong[6].shape = {16, 64};  // k_proj should be [32, 64]
  wrong[6].bytes.resize(16 * 64 * 4);
  ASSERT_TRUE(io::write_safetensors(dir + "/model.safetensors", wrong).ok());
  s = load_dir(dir);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("model.layers.0.self_attn.k_proj.weight"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("[16, 64]"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("[32, 64]"), std::string::npos) << s.message();

  auto ints = tensors;
  ints[1].dtype = DType::kI32;  // model.norm.weight as int32
  ASSERT_TRUE(io::write_safetensors(dir + "/model.safetensors", ints).ok());
  s = load_dir(dir);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("model.norm.weight"), std::string::npos) << s.message();

  // Truncated file.
  ASSERT_TRUE(io::write_safetensors(dir + "/model.safetensors", tensors).ok());
  auto full = read_file(dir + "/model.safetensors");
  ASSERT_TRUE(write_file(dir + "/model.safetensors", full->substr(0, full->size() / 2)).ok());
  s = load_dir(dir);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kDataLoss);
  EXPECT_NE(s.message().find("truncated"), std::string::npos) << s.message();

  // No weights at all: a clear hint to use dummy weights.
  ASSERT_EQ(::unlink((dir + "/model.safetensors").c_str()), 0);
  s = load_dir(dir);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("--load-format dummy"), std::string::npos) << s.message();
}

}  // namespace
}  // namespace strata
