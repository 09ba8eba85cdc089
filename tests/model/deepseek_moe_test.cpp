// DeepSeek (MLA + DeepSeekMoE) and MoE models beyond the shared parity/invariance tests: the latent
// KV layout, FP8 checkpoints (safetensors with weight_scale_inv) against their dequantised F32
// twin, fp8 KV caches, and config errors.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <map>

#include "core/json.h"
#include "io/writers.h"
#include "kernels/fp8.h"
#include "model/deepseek.h"
#include "model/deepseek_mla.h"
#include "model/moe.h"
#include "model_test_util.h"
#include "recording_source.h"
#include "tiny_models.h"

namespace strata {
namespace {

using testing::ModelHarness;
using testing::RecordingSource;

const testing::TinyArch& arch(const std::string& name) {
  for (const auto& a : testing::tiny_archs())
    if (a.name == name) return a;
  ADD_FAILURE() << "no tiny arch " << name;
  return testing::tiny_archs()[0];
}

std::vector<int32_t> prompt_for(int64_t vocab, int n, int seed) {
  std::vector<int32_t> p;
  for (int i = 0; i < n; ++i) p.push_back(static_cast<int32_t>((i * 53 + seed * 17 + 3) % vocab));
  return p;
}

double max_abs(const std::vector<float>& v) {
  double m = 0;
  for (float x : v) m = std::max(m, static_cast<double>(std::fabs(x)));
  return m;
}

TEST(DeepseekModel, KvCacheHoldsOnlyTheLatentAndRotaryKey) {
  ThreadPool pool(2);
  auto m = testing::load_tiny(arch("deepseek_v3_fp8"), pool, "bfloat16");
  ASSERT_TRUE(m.model);
  const KvSpec kv = m.model->kv_spec();
  EXPECT_EQ(kv.num_layers, 3);
  EXPECT_EQ(kv.num_kv_heads, 1);
  EXPECT_EQ(kv.head_dim, 32 + 8);  // kv_lora_rank + qk_rope_head_dim
  EXPECT_FALSE(kv.has_v);
  EXPECT_EQ(kv.bytes_per_token(DType::kBF16), 3 * 40 * 2);
  EXPECT_EQ(kv.bytes_per_token(DType::kF8E4M3), 3 * (40 + 4));  // + an f32 scale per row
  // Per-head K and V of the same attention would be 2 x 5 heads x (16 + 8 | 16) values.
  EXPECT_EQ(m.model->weight_dtype(), DType::kF8E4M3);
}

TEST(DeepseekModel, MlaSpecFollowsYarnMscale) {
  ThreadPool pool(1);
  auto cfg =
      load_model_config({.model = testing::write_tiny_config(arch("deepseek_v2_lite").config_json),
                         .load_format = "dummy"});
  ASSERT_TRUE(cfg.ok()) << cfg.status().to_string();
  auto s = parse_mla_spec(*cfg);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->q_lora_rank, 0);
  const double m = 0.1 * 0.707 * std::log(40.0) + 1;  // mscale_all_dim 0.707, factor 40
  EXPECT_NEAR(s->softmax_scale, m * m / std::sqrt(24.0), 1e-6);
  EXPECT_NEAR(s->rope_magnitude, 1.0, 1e-12);  // mscale == mscale_all_dim
  EXPECT_EQ(cfg->head_dim, 24);
  EXPECT_EQ(cfg->rotary_dim, 8);
}

TEST(DeepseekModel, GreedyWithFp8KvCacheIsChunkAndBatchInvariant) {
  ThreadPool pool(2);
  const KernelOps& ops = kernel_ops(default_kernel_variant());
  for (const char* name : {"deepseek_v3_fp8", "deepseek_v2_lite", "deepseek_v32"}) {
    auto m = testing::load_tiny(arch(name), pool, "bfloat16");
    const int64_t V = m.model->config().vocab_size;
    auto prompt = prompt_for(V, 21, 5);
    auto base = testing::greedy(*m.model, prompt, 10, ops, 1 << 30, 16, DType::kF8E4M3);
    for (int64_t chunk : {1, 7})
      EXPECT_EQ(testing::greedy(*m.model, prompt, 10, ops, chunk, 8, DType::kF8E4M3), base)
          << name << " chunk " << chunk;
    // fp8 latents stay close to a bf16 cache.
    ModelHarness f8(*m.model, 1, 64, 16, DType::kF8E4M3), bf(*m.model, 1, 64, 16, DType::kBF16);
    auto a = f8.step1(0, prompt, ops), b = bf.step1(0, prompt, ops);
    const double scale = max_abs(b);
    double diff = 0;
    for (int64_t i = 0; i < V; ++i) diff = std::max(diff, double{std::fabs(a[i] - b[i])});
    EXPECT_LT(diff, 0.1 * scale) << name;
    EXPECT_GT(diff, 0.0) << name << ": the fp8 cache was not used";
  }
}

bool is_fp8_linear(const std::string& name, const std::vector<int64_t>& shape) {
  auto ends = [&](const std::string& s) {
    return name.size() >= s.size() && name.compare(name.size() - s.size(), s.size(), s) == 0;
  };
  return shape.size() == 2 && name.rfind("model.layers.", 0) == 0 && ends(".weight") &&
         !ends("mlp.gate.weight");
}

std::string bytes_of(const void* p, size_t n) {
  return std::string(static_cast<const char*>(p), n);
}

// The weights a dummy DeepSeek-V3 asks for, written as a checkpoint in DeepSeek's FP8 format
// (the layers' linear weights as e4m3 + weight_scale_inv per 32x32 block; the router gate, norms,
// embedding and head in F32) and as its dequantised F32 twin.
struct Fp8Checkpoints {
  std::vector<io::TensorToWrite> fp8, f32;
  int num_fp8 = 0;
};

Fp8Checkpoints make_fp8_checkpoints(const std::string& json, ThreadPool& pool) {
  Fp8Checkpoints out;
  auto cfg = parse_hf_config(*parse_json(json, "config"), nullptr);
  EXPECT_TRUE(cfg.ok()) << cfg.status().to_string();
  auto rec = std::make_unique<RecordingSource>(make_dummy_source(7, DType::kF32, 0.05));
  RecordingSource* recorder = rec.get();
  ModelBuildOptions build;
  build.storage = DType::kF32;
  build.keep_in_place = false;
  build.limits = {64, 64, 4};
  build.pool = &pool;
  auto model = create_deepseek_model(*cfg, std::move(rec), build);  // owns the recorder
  EXPECT_TRUE(model.ok()) << model.status().to_string();
  if (!model.ok()) return out;
  for (const auto& [name, t] : recorder->tensors) {
    if (!is_fp8_linear(name, t.shape)) {
      out.fp8.push_back(
          {name, DType::kF32, t.shape, bytes_of(t.values.data(), t.values.size() * 4)});
      out.f32.push_back(out.fp8.back());
      continue;
    }
    const int64_t n = t.shape[0], k = t.shape[1];
    std::vector<uint8_t> q(n * k);
    std::vector<float> s(fp8_block_count(n, 32) * fp8_block_count(k, 32)), deq(n * k);
    quantize_fp8_blocks(t.values.data(), n, k, 32, 32, q.data(), s.data());
    dequantize_fp8_blocks(q.data(), s.data(), n, k, 32, 32, deq.data());
    out.fp8.push_back({name, DType::kF8E4M3, t.shape, bytes_of(q.data(), q.size())});
    out.fp8.push_back({name + "_scale_inv",
                       DType::kF32,
                       {fp8_block_count(n, 32), fp8_block_count(k, 32)},
                       bytes_of(s.data(), s.size() * 4)});
    out.f32.push_back({name, DType::kF32, t.shape, bytes_of(deq.data(), deq.size() * 4)});
    ++out.num_fp8;
  }
  return out;
}

Result<LoadedModel> load_dir(const std::string& dir, ThreadPool& pool) {
  LoadOptions o;
  o.model = dir;
  o.dtype = "float32";
  o.pool = &pool;
  o.limits = {64, 64, 4};
  return load_model(o);
}

// The FP8 model and the F32 twin hold the same weight values, so their logits agree; the FP8 one
// keeps about a byte per quantised weight.
TEST(DeepseekModel, Fp8CheckpointMatchesItsDequantisedTwin) {
  ThreadPool pool(2);
  const std::string json = arch("deepseek_v3_fp8").config_json;
  Fp8Checkpoints ck = make_fp8_checkpoints(json, pool);
  EXPECT_GT(ck.num_fp8, 30);
  const std::string fp8_dir = testing::write_tiny_config(json);
  Json plain = *parse_json(json, "config");
  plain.erase("quantization_config");
  const std::string f32_dir = testing::write_tiny_config(plain.dump());
  ASSERT_TRUE(io::write_safetensors(fp8_dir + "/model.safetensors", ck.fp8).ok());
  ASSERT_TRUE(io::write_safetensors(f32_dir + "/model.safetensors", ck.f32).ok());
  auto fp8 = load_dir(fp8_dir, pool);
  auto f32 = load_dir(f32_dir, pool);
  ASSERT_TRUE(fp8.ok()) << fp8.status().to_string();
  ASSERT_TRUE(f32.ok()) << f32.status().to_string();
  EXPECT_EQ(fp8->format, "safetensors");
  EXPECT_EQ(fp8->model->weight_dtype(), DType::kF8E4M3);
  EXPECT_EQ(f32->model->weight_dtype(), DType::kF32);
  EXPECT_LT(fp8->model->weight_bytes_total(), f32->model->weight_bytes_total() * 0.6);
  const int64_t V = 300;
  auto prompt = prompt_for(V, 19, 2);
  for (const std::string& v : std::vector<std::string>{"reference", default_kernel_variant()}) {
    const KernelOps& ops = kernel_ops(v);
    ModelHarness a(*fp8->model, 1, 64, 16, DType::kF32), b(*f32->model, 1, 64, 16, DType::kF32);
    for (const auto& step : std::vector<std::vector<int32_t>>{prompt, {5}, {77}}) {
      auto la = a.step1(0, step, ops), lb = b.step1(0, step, ops);
      const double scale = max_abs(lb);
      ASSERT_GT(scale, 1e-3);
      for (int64_t i = 0; i < V; ++i)
        ASSERT_NEAR(la[i], lb[i], 1e-5 * scale) << v << " logit " << i;
    }
  }
}

TEST(DeepseekModel, Fp8CheckpointWithoutScalesIsAClearError) {
  ThreadPool pool(1);
  const std::string json = arch("deepseek_v3_fp8").config_json;
  Fp8Checkpoints ck = make_fp8_checkpoints(json, pool);
  const std::string missing = "model.layers.1.mlp.experts.3.down_proj.weight_scale_inv";
  std::vector<io::TensorToWrite> tensors;
  for (auto& t : ck.fp8)
    if (t.name != missing) tensors.push_back(t);
  ASSERT_EQ(tensors.size() + 1, ck.fp8.size());
  const std::string dir = testing::write_tiny_config(json);
  ASSERT_TRUE(io::write_safetensors(dir + "/model.safetensors", tensors).ok());
  auto m = load_dir(dir, pool);
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.status().message().find(missing), std::string::npos) << m.status().message();
}

TEST(MoeConfig, ErrorsNameTheField) {
  auto parse = [](const std::string& arch_json, const std::string& overrides) {
    Json c = *parse_json(arch_json, "config");
    Json o = *parse_json(overrides, "overrides");
    return parse_hf_config(c, &o);
  };
  const std::string v3 = arch("deepseek_v3_fp8").config_json;
  auto bad_quant = parse(v3, R"({"quantization_config":{"quant_method":"bitsandbytes"}})");
  ASSERT_FALSE(bad_quant.ok());
  EXPECT_NE(bad_quant.status().message().find("bitsandbytes"), std::string::npos);
  auto bad_awq = parse(v3, R"({"quantization_config":{"quant_method":"awq","bits":3}})");
  ASSERT_FALSE(bad_awq.ok());
  EXPECT_NE(bad_awq.status().message().find("AWQ with 3 bits"), std::string::npos);
  // FP8 without block sizes: per-tensor (or per-channel) weight scales.
  auto per_tensor =
      parse(v3, R"({"quantization_config":{"quant_method":"fp8","weight_block_size":null}})");
  ASSERT_TRUE(per_tensor.ok()) << per_tensor.status().to_string();
  ASSERT_TRUE(per_tensor->fp8.has_value());
  EXPECT_TRUE(per_tensor->fp8->per_tensor);
  auto bad_blocks =
      parse(v3, R"({"quantization_config":{"quant_method":"fp8","weight_block_size":[128]}})");
  ASSERT_FALSE(bad_blocks.ok());
  EXPECT_NE(bad_blocks.status().message().find("weight_block_size"), std::string::npos);

  ThreadPool pool(1);
  auto load_with = [&](const std::string& overrides) {
    LoadOptions o;
    o.model = testing::write_tiny_config(v3);
    o.load_format = "dummy";
    o.hf_overrides = overrides;
    o.pool = &pool;
    o.limits = {16, 16, 4};
    return load_model(o);
  };
  auto groups = load_with(R"({"n_group": 3})");
  ASSERT_FALSE(groups.ok());
  EXPECT_NE(groups.status().message().find("n_group"), std::string::npos)
      << groups.status().message();
  auto method = load_with(R"({"topk_method": "magic"})");
  ASSERT_FALSE(method.ok());
  EXPECT_NE(method.status().message().find("magic"), std::string::npos);
  auto rank = load_with(R"({"kv_lora_rank": null})");
  ASSERT_FALSE(rank.ok());
  EXPECT_NE(rank.status().message().find("kv_lora_rank"), std::string::npos);
  EXPECT_TRUE(load_with(R"({"n_group": 8, "topk_group": 2})").ok());
}

TEST(MoeModel, ParameterAndByteCountsSeparateActiveExperts) {
  ThreadPool pool(1);
  auto m = testing::load_tiny(arch("qwen3_moe"), pool, "float32");
  // 2 layers of 8 experts (3 x 64 x 32 each), top 3: a token reads 3 of the 8.
  const int64_t expert = 3 * 64 * 32 * 4;
  // Norm vectors (f32): per layer two of 64 and the q/k norms of 16, and the final norm.
  const int64_t norms = (2 * (2 * 64 + 2 * 16) + 64) * 4;
  EXPECT_EQ(m.model->weight_bytes_total() - m.model->weight_bytes_per_token(),
            2 * 5 * expert + 300 * 64 * 4 /* embedding */ + norms);
  EXPECT_GT(m.model->parameter_count(), 2 * 8 * 3 * 64 * 32);
}

}  // namespace
}  // namespace strata
