// DeepseekV4ForCausalLM from a checkpoint in the Hugging Face V4 layout (model/deepseek_v4.h
// CheckpointFeed): a tiny config's float64 reference weights (dsv4::random_model_weights) are
// written as the published format stores them - every tensor of dsv4::checkpoint_tensors, FP8
// e4m3 linears with ue8m0 (F8_E8M0) 32 x 32 block scales, MXFP4 routed experts with e8m0 group
// scales, BF16 norms / compressors / router / embedding / head, F32 hc_* / sinks / ape / bias,
// I64 tid2eid - into model.safetensors (or two shards with model.safetensors.index.json) beside
// config.json (tests/model/deepseek_v4_checkpoint_writer.h, shared with dist_v4_tests), and
// loaded through load_model():
//   - logits match dsv4::model_forward_ref on the weights dsv4::load_model_weights (the float64
//     reference loader) reads back from the same bytes;
//   - the FP8 linears stay FP8 in memory (linear_layers(), weight_bytes_total()) and the memory
//     estimate counts them at 1 byte + scales, equal to the loaded model's bytes;
//   - F32 block scales load exactly as the equal e8m0 ones; sharded = one file;
//   - `strata generate DIR --prompt-ids ... --temperature 0 --json` gives the in-process ids;
//   - a missing tensor, a wrong shape and an unsupported dtype fail with errors naming them;
//   - the published Flash config.json, scaled down, as a checkpoint (128 x 128 blocks).
#include <gtest/gtest.h>
#include <stdlib.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>

#include "cli_util.h"
#include "core/dtype.h"
#include "core/json.h"
#include "core/thread_pool.h"
#include "io/writers.h"
#include "kernels/backend.h"
#include "model/deepseek_v4.h"
#include "model/deepseek_v4_checkpoint_writer.h"
#include "model/memory_estimate.h"
#include "test_util.h"

namespace strata {
namespace {

using dsv4::DeepseekV4Config;
using dsv4::TensorSpec;
using v4ckpt::checkpoint;
using v4ckpt::put;
using v4ckpt::reference_weights;
using v4ckpt::Stored;

// The tiny config of deepseek_v4_model_test (window-only + hash-routed, CSA, HCA layers) with
// the published quantization_config (blocks of 32 here so that tensors span several blocks and
// partial ones).
const char* kConfig = R"({
    "architectures": ["DeepseekV4ForCausalLM"], "model_type": "deepseek_v4",
    "torch_dtype": "bfloat16", "vocab_size": 100, "hidden_size": 64,
    "num_hidden_layers": 3, "num_attention_heads": 4, "num_key_value_heads": 1, "head_dim": 32,
    "qk_rope_head_dim": 8, "q_lora_rank": 24, "o_lora_rank": 16, "o_groups": 2,
    "sliding_window": 8, "compress_ratios": [0, 4, 128, 0], "index_n_heads": 2,
    "index_head_dim": 16, "index_topk": 3, "n_routed_experts": 8, "num_experts_per_tok": 2,
    "n_shared_experts": 1, "num_hash_layers": 1, "swiglu_limit": 1.5,
    "routed_scaling_factor": 1.5, "expert_dtype": "fp4", "scoring_func": "sqrtsoftplus",
    "topk_method": "noaux_tc", "norm_topk_prob": true,
    "moe_intermediate_size": 32, "compress_rope_theta": 160000, "rope_theta": 10000,
    "rope_scaling": {"type": "yarn", "factor": 4, "beta_fast": 32, "beta_slow": 1,
                     "original_max_position_embeddings": 64},
    "max_position_embeddings": 4096, "num_nextn_predict_layers": 1,
    "hc_mult": 4, "hc_sinkhorn_iters": 20, "hc_eps": 1e-6, "rms_norm_eps": 1e-6,
    "bos_token_id": 0, "eos_token_id": 1,
    "quantization_config": {"quant_method": "fp8", "fmt": "e4m3", "activation_scheme": "dynamic",
                            "scale_fmt": "ue8m0", "weight_block_size": [32, 32]}})";

DeepseekV4Config config() {
  auto c = dsv4::parse_deepseek_v4_config(Json::parse(kConfig), nullptr);
  EXPECT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_TRUE(c->fp8_weights);
  EXPECT_EQ(c->weight_block_n, 32);
  return *c;
}

// The checkpoint (v4ckpt::write_checkpoint) with kConfig unless given.
std::string write_checkpoint(const std::map<std::string, Stored>& ckpt, const std::string& tag,
                             int shards = 1, const std::string& config_json = kConfig) {
  return v4ckpt::write_checkpoint(ckpt, tag, config_json, shards);
}

LoadOptions options(const std::string& dir, ThreadPool& pool) {
  LoadOptions o;
  o.model = dir;
  o.pool = &pool;
  o.limits.max_num_tokens = 256;
  o.limits.max_seq_len = 512;
  o.limits.max_logit_rows = 256;
  return o;
}

// One sequence over raw paged blocks (F32 KV): logits of every token of `tokens` (one step),
// then greedy continuation.
class Runner {
 public:
  static constexpr int64_t kBlockSize = 128, kBlocks = 4;
  explicit Runner(Model& m) : m_(m), ops_(kernel_ops(default_kernel_variant())) {
    const KvSpec spec = m.kv_spec();
    for (int64_t l = 0; l < spec.num_layers; ++l) {
      const int64_t bytes = spec.layer_block_bytes(l, kBlockSize, DType::kF32);
      storage_.emplace_back(bytes * kBlocks, std::byte{0});
      PagedKvLayer k;
      k.dtype = DType::kF32;
      k.block_size = kBlockSize;
      k.num_kv_heads = 1;
      k.head_dim = spec.head_dim;
      k.raw = bytes > 0 ? storage_.back().data() : nullptr;
      k.raw_block_bytes = bytes;
      kv_.push_back(k);
    }
    EXPECT_TRUE(m.allocate_state(1, DType::kF32, nullptr).ok());
  }
  std::vector<float> step(const std::vector<int32_t>& tokens, int64_t start, bool all_rows) {
    std::vector<int32_t> pos, rows, tables;
    std::vector<int64_t> slot_map(tokens.size(), -1);
    for (size_t i = 0; i < tokens.size(); ++i) {
      pos.push_back(static_cast<int32_t>(start + i));
      if (all_rows || i + 1 == tokens.size()) rows.push_back(static_cast<int32_t>(i));
    }
    for (int64_t b = 0; b < kBlocks; ++b) tables.push_back(static_cast<int32_t>(b));
    const std::vector<int32_t> qs = {0, static_cast<int32_t>(tokens.size())};
    const std::vector<int32_t> lens = {static_cast<int32_t>(start + tokens.size())};
    const std::vector<int32_t> slots = {0};
    ForwardBatch fb;
    fb.token_ids = tokens;
    fb.positions = pos;
    fb.slot_mapping = slot_map;
    fb.query_start = qs;
    fb.seq_lens = lens;
    fb.block_tables = tables;
    fb.max_blocks_per_seq = kBlocks;
    fb.logits_rows = rows;
    fb.state_slots = slots;
    std::vector<float> logits(rows.size() * m_.config().vocab_size);
    Status s = m_.forward(fb, kv_, ops_, logits.data());
    EXPECT_TRUE(s.ok()) << s.to_string();
    return logits;
  }
  std::vector<int32_t> greedy(const std::vector<int32_t>& prompt, int n) {
    const int64_t v = m_.config().vocab_size;
    std::vector<float> last = step(prompt, 0, false);
    std::vector<int32_t> out;
    for (int i = 0; i < n; ++i) {
      out.push_back(
          static_cast<int32_t>(std::max_element(last.begin(), last.end()) - last.begin()));
      if (i + 1 < n) last = step({out.back()}, static_cast<int64_t>(prompt.size()) + i, false);
      EXPECT_EQ(static_cast<int64_t>(last.size()), v);
    }
    return out;
  }

 private:
  Model& m_;
  const KernelOps& ops_;
  std::vector<std::vector<std::byte>> storage_;
  std::vector<PagedKvLayer> kv_;
};

std::vector<int32_t> prompt(int64_t n) {
  std::vector<int32_t> t(n);
  for (int64_t i = 0; i < n; ++i) t[i] = static_cast<int32_t>((i * 37 + 16) % 100);
  return t;
}

// max |a - b| / max |b|
double rel_err(const float* a, const double* b, int64_t n) {
  double num = 0, den = 0;
  for (int64_t i = 0; i < n; ++i) {
    num = std::max(num, std::abs(a[i] - b[i]));
    den = std::max(den, std::abs(b[i]));
  }
  return num / den;
}

struct Fixture {
  DeepseekV4Config c = config();
  dsv4::ModelWeights w = dsv4::random_model_weights(c, 7);
  std::map<std::string, Stored> ckpt = checkpoint(c, w);
};

TEST(DeepseekV4Checkpoint, LogitsMatchTheReferenceOnTheDequantizedWeights) {
  Fixture f;
  const DeepseekV4Config& c = f.c;
  const std::string dir = write_checkpoint(f.ckpt, "logits");
  ThreadPool pool(2);
  auto loaded = load_model(options(dir, pool));
  ASSERT_TRUE(loaded.ok()) << loaded.status().to_string();
  EXPECT_EQ(loaded->format, "safetensors");
  Model& m = *loaded->model;
  // The FP8 linears stay FP8; the BF16 ones (compressors, weights_proj, head) at --dtype auto
  // (bf16); the router f32; experts MXFP4.
  std::map<std::string, DType> dt;
  for (const LinearInfo& li : m.linear_layers()) dt[li.name] = li.dtype;
  EXPECT_EQ(dt["layers.1.attn.wq_a"], DType::kF8E4M3);
  EXPECT_EQ(dt["layers.1.attn.wo_a.1"], DType::kF8E4M3);
  EXPECT_EQ(dt["layers.2.moe.shared.w1_w3"], DType::kF8E4M3);
  EXPECT_EQ(dt["layers.1.attn.indexer.wq_b"], DType::kF8E4M3);
  EXPECT_EQ(dt["layers.1.attn.compressor.wkv_wgate"], DType::kBF16);
  EXPECT_EQ(dt["layers.1.attn.indexer.weights_proj"], DType::kBF16);
  EXPECT_EQ(dt["layers.0.moe.router"], DType::kF32);
  EXPECT_EQ(dt["lm_head"], DType::kBF16);
  // The estimate (tensor dtypes, no values read) is the loaded model's bytes.
  auto est = estimate_model_memory(options(dir, pool), pool.size());
  ASSERT_TRUE(est.ok()) << est.status().to_string();
  EXPECT_EQ(est->weights.total(), m.weight_bytes_total());
  // FP8 at 1 byte per weight + one f32 scale per 16-row panel lane and 32-column block
  // (PackedWeight's F8E4M3 layout): wq_a [24, 64] is two panels of 16 x (2 x 64 + 64 B).
  for (const LinearInfo& li : m.linear_layers())
    if (li.name == "layers.1.attn.wq_a") {
      EXPECT_EQ(li.bytes, 2 * (2 * 64 + 64 * 16));
    }

  const dsv4::ModelWeights ref = reference_weights(c, f.ckpt);
  const int64_t t = 140, v = c.vocab_size;
  const std::vector<int32_t> tokens = prompt(t);
  std::vector<double> want(t * v);
  dsv4::model_forward_ref(c, ref, tokens.data(), t, want.data());
  Runner r(m);
  const std::vector<float> got = r.step(tokens, 0, true);
  double worst = 0;
  int same = 0;
  for (int64_t p = 0; p < t; ++p) {
    worst = std::max(worst, rel_err(&got[p * v], &want[p * v], v));
    same += std::max_element(&got[p * v], &got[(p + 1) * v]) - &got[p * v] ==
            std::max_element(&want[p * v], &want[(p + 1) * v]) - &want[p * v];
  }
  std::printf(
      "max relative logit error vs float64 on the dequantized weights: %.3g; argmax "
      "equal at %d of %lld positions\n",
      worst, same, static_cast<long long>(t));
  // Measured 1.2e-6: the FP8 and BF16 weights are held exactly, so only float32 arithmetic
  // differs from float64 (the float-weight model test allows 1e-4).
  EXPECT_LT(worst, 1e-5);
  EXPECT_EQ(same, t);
}

TEST(DeepseekV4Checkpoint, ShardsAndF32ScalesLoadTheSameModel) {
  Fixture f;
  const std::vector<int32_t> tokens = prompt(40);
  ThreadPool pool(2);
  auto run = [&](const std::string& dir) {
    auto loaded = load_model(options(dir, pool));
    EXPECT_TRUE(loaded.ok()) << loaded.status().to_string();
    if (!loaded.ok()) return std::vector<float>();
    Runner r(*loaded->model);
    return r.step(tokens, 0, true);
  };
  const std::vector<float> one = run(write_checkpoint(f.ckpt, "one"));
  const std::vector<float> sharded = run(write_checkpoint(f.ckpt, "sharded", 2));
  ASSERT_FALSE(one.empty());
  EXPECT_EQ(one, sharded);
  // The same block scales as F32 (FP8-expert checkpoints store them so).
  std::map<std::string, Stored> f32 = f.ckpt;
  int changed = 0;
  for (auto& [name, s] : f32)
    if (s.dtype == "F8_E8M0" && name.find("experts") == std::string::npos) {
      std::string b;
      for (char e : s.bytes) put<float>(b, std::ldexp(1.0f, static_cast<uint8_t>(e) - 127));
      s = Stored{"F32", s.shape, b};
      ++changed;
    }
  EXPECT_GT(changed, 10);
  EXPECT_EQ(run(write_checkpoint(f32, "f32scales")), one);
}

TEST(DeepseekV4Checkpoint, ClearErrors) {
  Fixture f;
  ThreadPool pool(2);
  std::string dir;
  auto error = [&](std::map<std::string, Stored> ckpt, const std::string& tag) {
    dir = write_checkpoint(ckpt, tag);
    auto loaded = load_model(options(dir, pool));
    EXPECT_FALSE(loaded.ok()) << tag;
    const std::string e = loaded.ok() ? std::string() : loaded.status().message();
    std::printf("%s: %s\n", tag.c_str(), e.c_str());
    return e;
  };
  {  // a missing tensor: named, with the file set
    auto ckpt = f.ckpt;
    ckpt.erase("layers.1.attn.wkv.weight");
    ckpt.erase("layers.1.attn.wkv.scale");
    const std::string e = error(ckpt, "missing");
    EXPECT_NE(e.find("layers.1.attn.wkv.weight"), std::string::npos) << e;
    EXPECT_NE(e.find(dir), std::string::npos) << e;
  }
  {  // a missing block scale
    auto ckpt = f.ckpt;
    ckpt.erase("layers.2.attn.wo_b.scale");
    const std::string e = error(ckpt, "noscale");
    EXPECT_NE(e.find("layers.2.attn.wo_b.scale"), std::string::npos) << e;
  }
  {  // a missing expert
    auto ckpt = f.ckpt;
    ckpt.erase("layers.2.ffn.experts.5.w2.scale");
    const std::string e = error(ckpt, "noexpert");
    EXPECT_NE(e.find("layers.2.ffn.experts.5.w2.scale"), std::string::npos) << e;
  }
  {  // a wrong shape: both shapes named
    auto ckpt = f.ckpt;
    Stored& s = ckpt["layers.0.attn.attn_sink"];
    s.shape = {5};
    s.bytes.resize(20);
    const std::string e = error(ckpt, "shape");
    EXPECT_NE(e.find("layers.0.attn.attn_sink"), std::string::npos) << e;
    EXPECT_NE(e.find("[4]"), std::string::npos) << e;
    EXPECT_NE(e.find("[5]"), std::string::npos) << e;
  }
  {  // an unsupported dtype: named
    auto ckpt = f.ckpt;
    Stored& g = ckpt["layers.0.ffn.gate.tid2eid"];
    std::string b;
    for (size_t i = 0; i < g.bytes.size() / 8; ++i) put<double>(b, 1.0);
    g = Stored{"F64", g.shape, b};
    const std::string e = error(ckpt, "dtype");
    EXPECT_NE(e.find("layers.0.ffn.gate.tid2eid"), std::string::npos) << e;
    EXPECT_NE(e.find("f64"), std::string::npos) << e;
  }
  {  // an e8m0 NaN scale
    auto ckpt = f.ckpt;
    ckpt["layers.1.attn.wq_b.scale"].bytes[0] = static_cast<char>(0xff);
    const std::string e = error(ckpt, "nan");
    EXPECT_NE(e.find("layers.1.attn.wq_b.scale"), std::string::npos) << e;
  }
}

// The published Flash config.json (its quantization_config: 128 x 128 ue8m0 blocks; its layer
// kinds: window, window, CSA, HCA; three hash-routed layers; head_dim 512, window 128) scaled
// down: the checkpoint of that config loads and matches the reference past the window and the
// first 128-token compressed row.
TEST(DeepseekV4Checkpoint, ScaledFlashConfigCheckpoint) {
  STRATA_REQUIRE_SHARED("configs/deepseek-v4-flash/config.json");
  auto j = read_json_file(testing::shared_data_path("configs/deepseek-v4-flash/config.json"));
  ASSERT_TRUE(j.ok()) << j.status().to_string();
  const Json over = Json::parse(
      R"({"num_hidden_layers": 4, "hidden_size": 256, "num_attention_heads": 4,
          "q_lora_rank": 128, "o_lora_rank": 64, "o_groups": 2, "n_routed_experts": 8,
          "moe_intermediate_size": 128, "vocab_size": 512, "index_n_heads": 4,
          "index_topk": 16})");
  Json cfg = *j;
  for (auto it = over.begin(); it != over.end(); ++it) cfg[it.key()] = it.value();
  auto c = dsv4::parse_deepseek_v4_config(cfg, nullptr);
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  ASSERT_EQ(c->weight_block_k, 128);
  const dsv4::ModelWeights w = dsv4::random_model_weights(*c, 11);
  const auto ckpt = checkpoint(*c, w);
  const std::string dir = write_checkpoint(ckpt, "flash", 1, cfg.dump());
  ThreadPool pool(2);
  auto loaded = load_model(options(dir, pool));
  ASSERT_TRUE(loaded.ok()) << loaded.status().to_string();
  auto est = estimate_model_memory(options(dir, pool), pool.size());
  ASSERT_TRUE(est.ok()) << est.status().to_string();
  EXPECT_EQ(est->weights.total(), loaded->model->weight_bytes_total());
  const dsv4::ModelWeights ref = reference_weights(*c, ckpt);
  const int64_t t = 160, v = c->vocab_size;
  std::vector<int32_t> tokens(t);
  for (int64_t i = 0; i < t; ++i) tokens[i] = static_cast<int32_t>((i * 211 + 5) % v);
  std::vector<double> want(t * v);
  dsv4::model_forward_ref(*c, ref, tokens.data(), t, want.data());
  Runner r(*loaded->model);
  const std::vector<float> got = r.step(tokens, 0, true);
  double worst = 0;
  for (int64_t p = 0; p < t; ++p) worst = std::max(worst, rel_err(&got[p * v], &want[p * v], v));
  std::printf("scaled Flash: max relative logit error %.3g\n", worst);  // measured 2.5e-6
  EXPECT_LT(worst, 1e-5);
}

TEST(DeepseekV4Checkpoint, GenerateCliMatchesTheInProcessModel) {
  Fixture f;
  const std::string dir = write_checkpoint(f.ckpt, "cli");
  const std::vector<int32_t> p = prompt(30);
  std::string ids;
  for (int32_t id : p) ids += (ids.empty() ? "" : ",") + std::to_string(id);
  testing::CliRun r = testing::run_strata(
      "generate " + dir + " --prompt-ids " + ids +
          " --max-tokens 8 --temperature 0 --ignore-eos --json --kv-cache-dtype f32 "
          "--max-model-len 512 --kv-cache-memory 64MiB",
      true);
  ASSERT_EQ(r.code, 0) << r.err;
  auto j = parse_json(r.out, "generate's output");
  ASSERT_TRUE(j.ok()) << r.out;
  const auto cli = (*j)["generated_ids"].get<std::vector<int32_t>>();
  ThreadPool pool(2);
  auto loaded = load_model(options(dir, pool));
  ASSERT_TRUE(loaded.ok()) << loaded.status().to_string();
  Runner run(*loaded->model);
  EXPECT_EQ(cli, run.greedy(p, 8));
}

}  // namespace
}  // namespace strata
