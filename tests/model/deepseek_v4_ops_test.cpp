// DeepSeek-V4 building blocks (model/deepseek_v4_ops.h): the config keys of the real Pro and Flash
// configs and of scaled --hf-overrides variants, with errors that name the key; RoPE with YaRN
// against the engine's RopeTable; hyper-connection mixing (Sinkhorn doubly stochastic, float32 =
// float64); sqrt-softplus / hash routing and the SwiGLU clamp; MXFP4 and ue8m0 FP8 weights; the
// FP8 KV bytes per token; one attention layer of each kind (window, CSA, HCA) on a tiny config:
// the engine-shaped float32 decoder (one token at a time) against the float64 whole-sequence
// reference, causality, the window, the sinks and the compressor's pooling.
#include "model/deepseek_v4_ops.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <map>
#include <numeric>

#include "core/dtype.h"
#include "core/json.h"
#include "core/rng.h"
#include "core/thread_pool.h"
#include "model/rope.h"
#include "test_util.h"

namespace strata::dsv4 {
namespace {

Json read_config(const std::string& name) {
  auto j = read_json_file(testing::shared_data_path("configs/" + name + "/config.json"));
  EXPECT_TRUE(j.ok()) << j.status().to_string();
  return j.ok() ? *j : Json::object();
}

// ------------------------------------------------------------------------------- config

TEST(DeepseekV4Config, ReadsTheRealProConfig) {
  STRATA_REQUIRE_SHARED("configs/deepseek-v4-pro/config.json");
  auto c = parse_deepseek_v4_config(read_config("deepseek-v4-pro"));
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_EQ(c->architecture, "DeepseekV4ForCausalLM");
  EXPECT_EQ(c->hidden_size, 7168);
  EXPECT_EQ(c->num_hidden_layers, 61);
  ASSERT_EQ(c->compress_ratios.size(), 61u);  // the file's 62nd entry is the MTP layer's
  EXPECT_EQ(c->compress_ratio(0), 128);
  EXPECT_EQ(c->compress_ratio(2), 4);
  int csa = 0, hca = 0, window = 0;
  for (int64_t l = 0; l < c->num_hidden_layers; ++l) {
    csa += c->attn_kind(l) == AttnKind::kCsa;
    hca += c->attn_kind(l) == AttnKind::kHca;
    window += c->attn_kind(l) == AttnKind::kWindow;
  }
  EXPECT_EQ(csa, 30);
  EXPECT_EQ(hca, 31);
  EXPECT_EQ(window, 0);
  EXPECT_EQ(c->head_dim, 512);
  EXPECT_EQ(c->nope_head_dim(), 448);
  EXPECT_EQ(c->o_groups, 16);
  EXPECT_EQ(c->o_lora_rank, 1024);
  EXPECT_EQ(c->q_lora_rank, 1536);
  EXPECT_EQ(c->sliding_window, 128);
  EXPECT_EQ(c->index_n_heads, 64);
  EXPECT_EQ(c->index_head_dim, 128);
  EXPECT_EQ(c->index_topk, 1024);
  EXPECT_EQ(c->hc_mult, 4);
  EXPECT_EQ(c->hc_mix_dim(), 24);
  EXPECT_EQ(c->hc_sinkhorn_iters, 20);
  EXPECT_DOUBLE_EQ(c->hc_eps, 1e-6);
  EXPECT_EQ(c->num_hash_layers, 3);
  EXPECT_TRUE(c->hash_routed(2));
  EXPECT_FALSE(c->hash_routed(3));
  EXPECT_EQ(c->scoring, Scoring::kSqrtSoftplus);
  EXPECT_TRUE(c->noaux_tc);
  EXPECT_TRUE(c->norm_topk_prob);
  EXPECT_DOUBLE_EQ(c->routed_scaling_factor, 2.5);
  EXPECT_DOUBLE_EQ(c->swiglu_limit, 10.0);
  EXPECT_DOUBLE_EQ(c->compress_rope_theta, 160000.0);
  EXPECT_DOUBLE_EQ(c->rope_theta, 10000.0);
  EXPECT_DOUBLE_EQ(c->yarn.factor, 16.0);
  EXPECT_EQ(c->yarn.original_max_position_embeddings, 65536);
  EXPECT_EQ(c->expert_dtype, ExpertDtype::kFp4);
  EXPECT_TRUE(c->fp8_weights);
  EXPECT_TRUE(c->ue8m0_scales);
  EXPECT_EQ(c->weight_block_n, 128);
  EXPECT_EQ(c->n_routed_experts, 384);
  EXPECT_EQ(c->num_experts_per_tok, 6);
}

TEST(DeepseekV4Config, ReadsTheRealFlashConfig) {
  STRATA_REQUIRE_SHARED("configs/deepseek-v4-flash/config.json");
  auto c = parse_deepseek_v4_config(read_config("deepseek-v4-flash"));
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_EQ(c->num_hidden_layers, 43);
  ASSERT_EQ(c->compress_ratios.size(), 43u);
  EXPECT_EQ(c->attn_kind(0), AttnKind::kWindow);
  EXPECT_EQ(c->attn_kind(1), AttnKind::kWindow);
  EXPECT_EQ(c->attn_kind(2), AttnKind::kCsa);
  EXPECT_EQ(c->attn_kind(3), AttnKind::kHca);
  EXPECT_EQ(c->index_topk, 512);
  EXPECT_EQ(c->o_groups, 8);
  EXPECT_DOUBLE_EQ(c->routed_scaling_factor, 1.5);
  const KvCounts k = kv_counts(*c, 65536);
  EXPECT_EQ(k.window_layers, 2);
  EXPECT_EQ(k.csa_layers, 21);
  EXPECT_EQ(k.hca_layers, 20);
  EXPECT_EQ(k.window_rows, 43 * 128);
  EXPECT_EQ(k.c4_rows, 21 * 65536 / 4);
  EXPECT_EQ(k.indexer_rows, 21 * 65536 / 4);
  EXPECT_EQ(k.c128_rows, 20 * 65536 / 128);
  // Shorter than the window: every raw token, no complete 128-row yet.
  const KvCounts s = kv_counts(*c, 100);
  EXPECT_EQ(s.window_rows, 43 * 100);
  EXPECT_EQ(s.c128_rows, 0);
  EXPECT_EQ(s.c4_rows, 21 * 25);
}

TEST(DeepseekV4Config, ScaledByOverrides) {
  STRATA_REQUIRE_SHARED("configs/deepseek-v4-pro/config.json");
  const Json overrides = Json::parse(R"({"num_hidden_layers": 4, "hidden_size": 1024,
      "n_routed_experts": 16, "num_attention_heads": 16, "o_groups": 4, "index_topk": 8,
      "rope_scaling": {"factor": 4}})");
  auto c = parse_deepseek_v4_config(read_config("deepseek-v4-pro"), &overrides);
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_EQ(c->num_hidden_layers, 4);
  EXPECT_EQ(c->compress_ratios, (std::vector<int>{128, 128, 4, 128}));
  EXPECT_EQ(c->hidden_size, 1024);
  EXPECT_EQ(c->n_routed_experts, 16);
  EXPECT_EQ(c->o_groups, 4);
  EXPECT_EQ(c->index_topk, 8);
  EXPECT_DOUBLE_EQ(c->yarn.factor, 4.0);  // merged into rope_scaling, the rest kept
  EXPECT_EQ(c->yarn.original_max_position_embeddings, 65536);
  // The compressed layers' RoPE uses compress_rope_theta with YaRN; window-only layers don't.
  const Json window_first =
      Json::parse(R"({"num_hidden_layers": 4, "compress_ratios": [1, 4, 128, 0]})");
  auto w = parse_deepseek_v4_config(read_config("deepseek-v4-pro"), &window_first);
  ASSERT_TRUE(w.ok()) << w.status().to_string();
  EXPECT_EQ(w->attn_kind(0), AttnKind::kWindow);  // ratio 1 is window-only
  EXPECT_EQ(layer_rope_inv_freq(*w, 0), rope_inv_freq(64, 10000.0, nullptr));
  EXPECT_EQ(layer_rope_inv_freq(*w, 1), rope_inv_freq(64, 160000.0, &w->yarn));
}

TEST(DeepseekV4Config, ErrorsNameTheKey) {
  STRATA_REQUIRE_SHARED("configs/deepseek-v4-flash/config.json");
  const Json base = read_config("deepseek-v4-flash");
  struct Case {
    const char* patch;
    const char* key;
  };
  const Case cases[] = {
      {R"({"o_groups": 7})", "'o_groups'"},
      {R"({"num_hidden_layers": 3, "compress_ratios": [0, 0, 3]})", "'compress_ratios[2]'"},
      {R"({"compress_ratios": [0, 4]})", "'compress_ratios' has 2 entries"},
      {R"({"compress_ratios": null})", "'compress_ratios' is missing"},
      {R"({"num_key_value_heads": 8})", "'num_key_value_heads'"},
      {R"({"scoring_func": "relu"})", "'scoring_func'"},
      {R"({"expert_dtype": "int4"})", "'expert_dtype'"},
      {R"({"index_topk": null})", "'index_topk' is missing"},
      {R"({"num_hash_layers": 99})", "'num_hash_layers'"},
      {R"({"qk_rope_head_dim": 63})", "'qk_rope_head_dim'"},
      {R"({"hidden_size": "big"})", "'hidden_size' must be an integer"},
      {R"({"hc_sinkhorn_iters": 0})", "'hc_sinkhorn_iters' must be >= 1"},
      {R"({"hc_eps": -1})", "'hc_eps'"},
      {R"({"swiglu_limit": -2})", "'swiglu_limit'"},
      {R"({"rope_scaling": {"type": "linear"}})", "'rope_scaling.type'"},
      {R"({"quantization_config": {"scale_fmt": "e4m3"}})", "'quantization_config.scale_fmt'"},
      {R"({"num_experts_per_tok": 300})", "'num_experts_per_tok'"},
      {R"({"architectures": ["DeepseekV3ForCausalLM"]})", "'architectures'"},
  };
  for (const Case& k : cases) {
    const Json patch = Json::parse(k.patch);
    auto c = parse_deepseek_v4_config(base, &patch);
    ASSERT_FALSE(c.ok()) << k.patch;
    EXPECT_NE(c.status().message().find(k.key), std::string::npos)
        << k.patch << " -> " << c.status().message();
  }
  // Without any ratio-4 layer the indexer keys are not needed.
  const Json no_csa =
      Json::parse(R"({"num_hidden_layers": 2, "index_topk": null, "num_hash_layers": 0,
      "index_n_heads": null, "compress_ratios": [0, 128]})");
  auto n = parse_deepseek_v4_config(base, &no_csa);
  EXPECT_TRUE(n.ok()) << n.status().to_string();
}

TEST(DeepseekV4Checkpoint, FlashTensorsMatchThePublishedIndex) {
  STRATA_REQUIRE_SHARED("configs/deepseek-v4-flash/config.json");
  auto c = parse_deepseek_v4_config(read_config("deepseek-v4-flash"));
  ASSERT_TRUE(c.ok());
  // deepseek-ai/DeepSeek-V4-Flash model.safetensors.index.json: 69 187 tensors, total_size
  // 159 609 485 896 bytes (as reported from the published index; the MTP block included).
  const auto all = checkpoint_tensors(*c, true);
  int64_t bytes = 0;
  for (const auto& t : all) bytes += t.bytes();
  EXPECT_EQ(all.size(), 69187u);
  EXPECT_EQ(bytes, 159609485896);
  auto find = [&](const std::string& name) -> const TensorSpec* {
    for (const auto& t : all)
      if (t.name == name) return &t;
    return nullptr;
  };
  // Shapes and dtypes of layer 0 as the shard headers give them.
  const TensorSpec* e = find("layers.0.ffn.experts.0.w1.weight");
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->dtype, "I8");
  EXPECT_EQ(e->shape, (std::vector<int64_t>{2048, 2048}));
  const TensorSpec* es = find("layers.0.ffn.experts.0.w1.scale");
  ASSERT_NE(es, nullptr);
  EXPECT_EQ(es->dtype, "F8_E8M0");
  EXPECT_EQ(es->shape, (std::vector<int64_t>{2048, 128}));
  const TensorSpec* wq = find("layers.0.attn.wq_a.scale");
  ASSERT_NE(wq, nullptr);
  EXPECT_EQ(wq->shape, (std::vector<int64_t>{8, 32}));
  ASSERT_NE(find("layers.0.ffn.gate.tid2eid"), nullptr);
  EXPECT_EQ(find("layers.0.ffn.gate.tid2eid")->shape, (std::vector<int64_t>{129280, 6}));
  EXPECT_EQ(find("layers.0.ffn.gate.bias"), nullptr);  // hash layers carry no correction bias
  ASSERT_NE(find("layers.3.ffn.gate.bias"), nullptr);
  EXPECT_EQ(find("layers.1.attn.compressor.ape"), nullptr);       // window-only layer
  EXPECT_EQ(find("layers.3.attn.indexer.wq_b.weight"), nullptr);  // HCA: no indexer
  ASSERT_NE(find("layers.2.attn.indexer.wq_b.weight"), nullptr);
  EXPECT_EQ(find("layers.2.attn.compressor.ape")->shape, (std::vector<int64_t>{4, 1024}));
  EXPECT_EQ(find("layers.3.attn.compressor.ape")->shape, (std::vector<int64_t>{128, 512}));
  EXPECT_EQ(find("layers.0.hc_attn_fn")->shape, (std::vector<int64_t>{24, 16384}));
  ASSERT_NE(find("mtp.0.ffn.gate.bias"), nullptr);
  EXPECT_EQ(find("mtp.0.ffn.gate.tid2eid"), nullptr);
  EXPECT_EQ(checkpoint_tensors(*c, false).size(), 67612u);
  // FP8 experts (the Base checkpoints): e4m3 expert blocks and f32 block scales everywhere.
  const Json base = Json::parse(R"({"expert_dtype": "fp8"})");
  auto b = parse_deepseek_v4_config(read_config("deepseek-v4-flash"), &base);
  ASSERT_TRUE(b.ok());
  for (const auto& t : checkpoint_tensors(*b, false)) {
    if (t.name == "layers.0.ffn.experts.0.w1.weight") {
      EXPECT_EQ(t.dtype, "F8_E4M3");
      EXPECT_EQ(t.shape, (std::vector<int64_t>{2048, 4096}));
    }
    if (t.name == "layers.0.ffn.experts.0.w1.scale" || t.name == "layers.0.attn.wq_a.scale") {
      EXPECT_EQ(t.dtype, "F32") << t.name;
    }
  }
}

// ----------------------------------------------------------------------------------- RoPE

TEST(DeepseekV4Rope, YarnFrequenciesMatchTheEngineTable) {
  // The engine's RopeTable implements YaRN for V3 (model/rope.cpp); V4 uses the same frequency
  // blend without the attention magnitude.
  Yarn y;
  y.factor = 16;
  y.original_max_position_embeddings = 65536;
  RopeScaling s;
  s.type = RopeScalingType::kYarn;
  s.factor = 16;
  s.beta_fast = 32;
  s.beta_slow = 1;
  s.original_max_position_embeddings = 65536;
  auto table = RopeTable::create(64, 160000.0, s, 1048576);
  ASSERT_TRUE(table.ok());
  const std::vector<double> f = rope_inv_freq(64, 160000.0, &y);
  ASSERT_EQ(f.size(), 32u);
  for (int i = 0; i < 32; ++i) EXPECT_NEAR(f[i], table->inv_freq()[i], 1e-15 + 1e-12 * f[i]);
  // Fast dims unchanged, slow dims divided by the factor.
  EXPECT_DOUBLE_EQ(f[0], 1.0);
  EXPECT_NEAR(f[31], std::pow(160000.0, -62.0 / 64) / 16, 1e-18);
}

TEST(DeepseekV4Rope, InterleavedPairsAndInverse) {
  const std::vector<double> inv = rope_inv_freq(8, 10000.0, nullptr);
  double x[8] = {1, 0, 0, 1, 0.5, -0.5, 2, 3};
  double y[8];
  std::memcpy(y, x, sizeof x);
  rope_interleaved_ref(y, 8, 7, inv.data(), false);
  // Pair 0 rotates by 7 rad: (1, 0) -> (cos 7, sin 7).
  EXPECT_NEAR(y[0], std::cos(7.0), 1e-15);
  EXPECT_NEAR(y[1], std::sin(7.0), 1e-15);
  for (int i = 0; i < 4; ++i)
    EXPECT_NEAR(std::hypot(y[2 * i], y[2 * i + 1]), std::hypot(x[2 * i], x[2 * i + 1]), 1e-14);
  rope_interleaved_ref(y, 8, 7, inv.data(), true);
  for (int i = 0; i < 8; ++i) EXPECT_NEAR(y[i], x[i], 1e-14);
  float xf[8];
  for (int i = 0; i < 8; ++i) xf[i] = static_cast<float>(x[i]);
  rope_interleaved(xf, 8, 7, inv.data(), false);
  std::memcpy(y, x, sizeof x);
  rope_interleaved_ref(y, 8, 7, inv.data(), false);
  for (int i = 0; i < 8; ++i) EXPECT_NEAR(xf[i], y[i], 1e-6);
}

// ------------------------------------------------------------------------------------ mHC

std::vector<double> randv(Rng& rng, size_t n, double lo, double hi) {
  std::vector<double> v(n);
  for (auto& x : v) x = lo + (hi - lo) * rng.uniform();
  return v;
}
std::vector<float> tof(const std::vector<double>& v) {
  return {v.begin(), v.end()};
}

TEST(DeepseekV4Hc, SinkhornIsDoublyStochastic) {
  Rng rng(1);
  const int hc = 4;
  for (int trial = 0; trial < 20; ++trial) {
    const auto mixes = randv(rng, 24, -3, 3);
    const auto base = randv(rng, 24, -1, 1);
    const double scale[3] = {0.5, 0.7, 0.5};
    double pre[4], post[4], comb[16];
    hc_split_sinkhorn_ref(mixes.data(), scale, base.data(), hc, 20, 1e-6, pre, post, comb);
    for (int j = 0; j < hc; ++j) {
      double row = 0, col = 0;
      for (int k = 0; k < hc; ++k) {
        EXPECT_GT(comb[j * hc + k], 0);
        row += comb[j * hc + k];
        col += comb[k * hc + j];
      }
      EXPECT_NEAR(col, 1.0, 1e-5);  // the last step normalises columns
      EXPECT_NEAR(row, 1.0, 1e-3);
      EXPECT_GT(pre[j], 0);
      EXPECT_LT(pre[j], 1.0 + 1e-6 + 1e-12);
      EXPECT_GT(post[j], 0);
      EXPECT_LT(post[j], 2.0);
    }
    // pre and post from their own slices.
    EXPECT_NEAR(pre[1], 1 / (1 + std::exp(-(mixes[1] * 0.5 + base[1]))) + 1e-6, 1e-15);
    EXPECT_NEAR(post[2], 2 / (1 + std::exp(-(mixes[6] * 0.7 + base[6]))), 1e-15);
    // Sharper logits converge more slowly (20 iterations leave row sums a few % off) but do
    // converge: 400 iterations bring the rows within 1e-3.
    const double sharp[3] = {0.5, 0.7, 2.0};
    double c20[16], c400[16];
    hc_split_sinkhorn_ref(mixes.data(), sharp, base.data(), hc, 20, 1e-6, pre, post, c20);
    hc_split_sinkhorn_ref(mixes.data(), sharp, base.data(), hc, 400, 1e-6, pre, post, c400);
    double err20 = 0, err400 = 0;
    for (int j = 0; j < hc; ++j) {
      double r20 = 0, r400 = 0;
      for (int k = 0; k < hc; ++k) {
        r20 += c20[j * hc + k];
        r400 += c400[j * hc + k];
      }
      err20 = std::max(err20, std::abs(r20 - 1));
      err400 = std::max(err400, std::abs(r400 - 1));
    }
    EXPECT_LT(err400, 1e-3);
    EXPECT_LE(err400, err20);
  }
  // One iteration is the row softmax then one column normalisation.
  double mixes[24] = {0}, base[24] = {0}, scale[3] = {1, 1, 1};
  for (int i = 0; i < 16; ++i) mixes[8 + i] = (i % 5) * 0.3;
  double pre[4], post[4], comb[16];
  hc_split_sinkhorn_ref(mixes, scale, base, 4, 1, 0.0, pre, post, comb);
  double soft[16];
  for (int j = 0; j < 4; ++j) {
    double s = 0;
    for (int k = 0; k < 4; ++k) s += soft[j * 4 + k] = std::exp(mixes[8 + j * 4 + k]);
    for (int k = 0; k < 4; ++k) soft[j * 4 + k] /= s;
  }
  for (int k = 0; k < 4; ++k) {
    double s = 0;
    for (int j = 0; j < 4; ++j) s += soft[j * 4 + k];
    for (int j = 0; j < 4; ++j) EXPECT_NEAR(comb[j * 4 + k], soft[j * 4 + k] / s, 1e-15);
  }
}

struct HcCase {
  int hc = 4;
  int64_t dim = 48;
  std::vector<double> fn, base, scale, head_fn, head_base, head_scale;
  explicit HcCase(Rng& rng) {
    const int mix = (2 + hc) * hc;
    fn = randv(rng, mix * hc * dim, -0.1, 0.1);
    base = randv(rng, mix, -1, 1);
    scale = randv(rng, 3, 0.5, 1.5);
    head_fn = randv(rng, hc * hc * dim, -0.1, 0.1);
    head_base = randv(rng, hc, -1, 1);
    head_scale = randv(rng, 1, 0.5, 1.5);
  }
};

TEST(DeepseekV4Hc, Float32MatchesTheReference) {
  Rng rng(2);
  HcCase k(rng);
  const int hc = k.hc;
  const int64_t dim = k.dim, n = 5;
  const auto x = randv(rng, n * hc * dim, -2, 2);
  const auto f = randv(rng, n * dim, -2, 2);
  const auto fn = tof(k.fn), base = tof(k.base), scale = tof(k.scale);
  const auto hfn = tof(k.head_fn), hbase = tof(k.head_base), hscale = tof(k.head_scale);
  const auto xf = tof(x), ff = tof(f);
  std::vector<float> y(n * dim), post(n * hc), comb(n * hc * hc), out(n * hc * dim), head(n * dim);
  ThreadPool pool(2);
  hc_pre(xf.data(), n, hc, dim, {fn.data(), base.data(), scale.data()}, 20, 1e-6f, 1e-6f, y.data(),
         post.data(), comb.data(), &pool);
  hc_post(ff.data(), xf.data(), post.data(), comb.data(), n, hc, dim, out.data(), &pool);
  hc_head(xf.data(), n, hc, dim, {hfn.data(), hbase.data(), hscale.data()}, 1e-6f, 1e-6f,
          head.data(), nullptr);
  for (int64_t t = 0; t < n; ++t) {
    std::vector<double> yr(dim), pr(hc), cr(hc * hc), outr(hc * dim), hr(dim);
    hc_pre_ref(&x[t * hc * dim], hc, dim, k.fn.data(), k.scale.data(), k.base.data(), 20, 1e-6,
               1e-6, yr.data(), pr.data(), cr.data());
    // The post-mix on the reference's own pre-mix outputs.
    hc_post_ref(&f[t * dim], &x[t * hc * dim], pr.data(), cr.data(), hc, dim, outr.data());
    hc_head_ref(&x[t * hc * dim], hc, dim, k.head_fn.data(), k.head_scale.data(),
                k.head_base.data(), 1e-6, 1e-6, hr.data());
    for (int j = 0; j < hc; ++j) EXPECT_NEAR(post[t * hc + j], pr[j], 1e-5);
    for (int i = 0; i < hc * hc; ++i) EXPECT_NEAR(comb[t * hc * hc + i], cr[i], 1e-5);
    for (int64_t d = 0; d < dim; ++d) {
      EXPECT_NEAR(y[t * dim + d], yr[d], 1e-5 * (1 + std::abs(yr[d])));
      EXPECT_NEAR(head[t * dim + d], hr[d], 1e-5 * (1 + std::abs(hr[d])));
    }
    for (int64_t i = 0; i < hc * dim; ++i)
      EXPECT_NEAR(out[t * hc * dim + i], outr[i], 1e-5 * (1 + std::abs(outr[i])));
  }
}

TEST(DeepseekV4Hc, StreamsInvariants) {
  Rng rng(3);
  HcCase k(rng);
  const int hc = k.hc;
  const int64_t dim = k.dim;
  // Identical streams: the pre-mix is (sum of pre) times the stream, and with a zero sublayer
  // output the doubly stochastic post-mix keeps every stream equal to it.
  const auto v = randv(rng, dim, -1, 1);
  std::vector<double> x(hc * dim);
  for (int j = 0; j < hc; ++j) std::copy(v.begin(), v.end(), x.begin() + j * dim);
  std::vector<double> y(dim), post(hc), comb(hc * hc), out(hc * dim), zero(dim, 0.0);
  hc_pre_ref(x.data(), hc, dim, k.fn.data(), k.scale.data(), k.base.data(), 20, 1e-6, 1e-6,
             y.data(), post.data(), comb.data());
  double mixes[24], pre[4], p2[4], c2[16];
  {
    double ss = 0;
    for (double e : x) ss += e * e;
    const double inv = 1 / std::sqrt(ss / (hc * dim) + 1e-6);
    for (int r = 0; r < 24; ++r) {
      double acc = 0;
      for (int64_t i = 0; i < hc * dim; ++i) acc += k.fn[r * hc * dim + i] * x[i];
      mixes[r] = acc * inv;
    }
    hc_split_sinkhorn_ref(mixes, k.scale.data(), k.base.data(), hc, 20, 1e-6, pre, p2, c2);
  }
  const double pre_sum = pre[0] + pre[1] + pre[2] + pre[3];
  for (int64_t d = 0; d < dim; ++d) EXPECT_NEAR(y[d], pre_sum * v[d], 1e-12);
  hc_post_ref(zero.data(), x.data(), post.data(), comb.data(), hc, dim, out.data());
  for (int j = 0; j < hc; ++j)
    for (int64_t d = 0; d < dim; ++d) EXPECT_NEAR(out[j * dim + d], v[d], 1e-5);
  // The mixes see the streams through their RMS: scaling the streams scales the layer input and
  // leaves post/comb unchanged.
  const auto x2 = randv(rng, hc * dim, -1, 1);
  std::vector<double> x3(x2);
  for (auto& e : x3) e *= 10;
  std::vector<double> ya(dim), yb(dim), pa(hc), pb(hc), ca(hc * hc), cb(hc * hc);
  hc_pre_ref(x2.data(), hc, dim, k.fn.data(), k.scale.data(), k.base.data(), 20, 1e-6, 0.0,
             ya.data(), pa.data(), ca.data());
  hc_pre_ref(x3.data(), hc, dim, k.fn.data(), k.scale.data(), k.base.data(), 20, 1e-6, 0.0,
             yb.data(), pb.data(), cb.data());
  for (int j = 0; j < hc; ++j) EXPECT_NEAR(pa[j], pb[j], 1e-12);
  for (int i = 0; i < hc * hc; ++i) EXPECT_NEAR(ca[i], cb[i], 1e-12);
  for (int64_t d = 0; d < dim; ++d) EXPECT_NEAR(yb[d], 10 * ya[d], 1e-10);
}

// -------------------------------------------------------------------------------- routing

double sqrt_softplus(double x) {
  return std::sqrt(std::log(1 + std::exp(x)));
}

TEST(DeepseekV4Routing, SqrtSoftplusWithCorrectionBias) {
  RoutingConfig rc;
  rc.num_experts = 6;
  rc.top_k = 2;
  rc.scaling = 2.5;
  ASSERT_TRUE(rc.validate().ok());
  const double logits[6] = {0.0, 3.0, -1.0, 2.0, -4.0, 1.0};
  int32_t ids[2];
  double w[2];
  route_token_ref(rc, logits, nullptr, nullptr, ids, w);
  EXPECT_EQ(ids[0], 1);
  EXPECT_EQ(ids[1], 3);
  const double s1 = sqrt_softplus(3.0), s3 = sqrt_softplus(2.0);
  EXPECT_NEAR(w[0], s1 / (s1 + s3) * 2.5, 1e-14);
  EXPECT_NEAR(w[1], s3 / (s1 + s3) * 2.5, 1e-14);
  // The bias changes the choice, not the weights: expert 4 is chosen with its unbiased score.
  const double bias[6] = {0, 0, 0, -5, 10, 0};
  route_token_ref(rc, logits, bias, nullptr, ids, w);
  EXPECT_EQ(ids[0], 4);
  EXPECT_EQ(ids[1], 1);
  const double s4 = sqrt_softplus(-4.0);
  EXPECT_NEAR(w[0], s4 / (s4 + s1) * 2.5, 1e-14);
  // Without norm_topk_prob: the raw scores times the scaling.
  rc.normalize = false;
  route_token_ref(rc, logits, nullptr, nullptr, ids, w);
  EXPECT_NEAR(w[0], s1 * 2.5, 1e-14);
  // Ties: the lower id first.
  const double flat[6] = {1, 1, 1, 1, 1, 1};
  route_token_ref(rc, flat, nullptr, nullptr, ids, w);
  EXPECT_EQ(ids[0], 0);
  EXPECT_EQ(ids[1], 1);
  // Large logits stay finite (softplus(x) ~ x).
  const double big[6] = {800, -800, 0, 0, 0, 0};
  route_token_ref(rc, big, nullptr, nullptr, ids, w);
  EXPECT_NEAR(w[0], std::sqrt(800.0) * 2.5, 1e-9);
}

TEST(DeepseekV4Routing, HashLayersUseTheTokenTable) {
  RoutingConfig rc;
  rc.num_experts = 8;
  rc.top_k = 3;
  rc.scaling = 1.5;
  const int32_t table[2 * 3] = {7, 0, 3, 1, 2, 5};
  ASSERT_TRUE(check_hash_table(table, 2, 3, 8).ok());
  const double logits[8] = {0.1, 0.2, 0.3, -0.4, 0.5, 0.6, 0.7, -0.8};
  const double bias[8] = {9, 9, 9, 9, 9, 9, 9, 9};  // ignored on hash layers
  int32_t ids[3];
  double w[3];
  route_token_ref(rc, logits, bias, &table[3], ids, w);
  EXPECT_EQ(ids[0], 1);
  EXPECT_EQ(ids[1], 2);
  EXPECT_EQ(ids[2], 5);
  const double a = sqrt_softplus(0.2), b = sqrt_softplus(0.3), c = sqrt_softplus(0.6);
  EXPECT_NEAR(w[0], a / (a + b + c) * 1.5, 1e-14);
  EXPECT_NEAR(w[2], c / (a + b + c) * 1.5, 1e-14);
  const int32_t bad[3] = {0, 8, 1};
  auto s = check_hash_table(bad, 1, 3, 8);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("tid2eid"), std::string::npos);
  const int32_t dup[3] = {2, 2, 1};
  EXPECT_FALSE(check_hash_table(dup, 1, 3, 8).ok());
}

TEST(DeepseekV4Routing, Float32MatchesTheReference) {
  Rng rng(4);
  RoutingConfig rc;
  rc.num_experts = 64;
  rc.top_k = 6;
  rc.scaling = 2.5;
  for (int trial = 0; trial < 50; ++trial) {
    const auto logits = randv(rng, 64, -6, 6);
    const auto bias = randv(rng, 64, -0.5, 0.5);
    int32_t ids[6], idf[6];
    double w[6];
    float wf[6];
    route_token_ref(rc, logits.data(), bias.data(), nullptr, ids, w);
    const auto lf = tof(logits), bf = tof(bias);
    route_token(rc, lf.data(), bf.data(), nullptr, idf, wf);
    double sum = 0;
    for (int i = 0; i < 6; ++i) {
      EXPECT_EQ(idf[i], ids[i]);
      EXPECT_NEAR(wf[i], w[i], 1e-5);
      sum += w[i];
    }
    EXPECT_NEAR(sum, 2.5, 1e-12);
  }
}

TEST(DeepseekV4Routing, SwigluClamp) {
  const double silu10 = 10 / (1 + std::exp(-10.0));
  EXPECT_NEAR(swiglu_clamped_ref(20, 20, 10), silu10 * 10, 1e-12);    // both clamped
  EXPECT_NEAR(swiglu_clamped_ref(20, -30, 10), silu10 * -10, 1e-12);  // up clamped below too
  const double silu_m20 = -20 / (1 + std::exp(20.0));
  EXPECT_NEAR(swiglu_clamped_ref(-20, 3, 10), silu_m20 * 3, 1e-15);  // gate: no lower clamp
  EXPECT_NEAR(swiglu_clamped_ref(20, 20, 0), 20 / (1 + std::exp(-20.0)) * 20, 1e-9);  // off
  const float g[4] = {20, -20, 1, 12}, u[4] = {20, 3, -15, 0.5};
  float o[4];
  swiglu_clamped(g, u, 4, 10, o);
  for (int i = 0; i < 4; ++i) EXPECT_NEAR(o[i], swiglu_clamped_ref(g[i], u[i], 10), 1e-5);
}

// ---------------------------------------------------------------------------------- MXFP4

TEST(DeepseekV4Mxfp4, CodesScalesAndNibbleOrder) {
  const double values[16] = {0, 0.5, 1, 1.5, 2, 3, 4, 6, -0.0, -0.5, -1, -1.5, -2, -3, -4, -6};
  for (int i = 0; i < 16; ++i) EXPECT_EQ(e2m1_value(static_cast<uint8_t>(i)), values[i]) << i;
  EXPECT_EQ(e8m0_value(127), 1.0);
  EXPECT_EQ(e8m0_value(130), 8.0);
  EXPECT_EQ(e8m0_value(0), std::ldexp(1.0, -127));
  EXPECT_TRUE(std::isnan(e8m0_value(255)));
  // One row of 32: byte j holds element 2j (low nibble) and 2j + 1 (high nibble).
  uint8_t packed[16] = {0};
  packed[0] = 0x21;                // elements 0 = code 1 (0.5), 1 = code 2 (1.0)
  packed[1] = 0xf7;                // elements 2 = code 7 (6), 3 = code 15 (-6)
  const uint8_t scale[1] = {126};  // 0.5
  double w[32];
  dequantize_mxfp4_ref(packed, scale, 1, 32, w);
  EXPECT_EQ(w[0], 0.25);
  EXPECT_EQ(w[1], 0.5);
  EXPECT_EQ(w[2], 3.0);
  EXPECT_EQ(w[3], -3.0);
  EXPECT_EQ(w[4], 0.0);
  EXPECT_FALSE(check_mxfp4_shape(4, 48).ok());
  EXPECT_TRUE(check_mxfp4_shape(4, 64).ok());
}

TEST(DeepseekV4Mxfp4, QuantizeRoundTripAndMatmul) {
  Rng rng(5);
  const int64_t n = 24, k = 96, m = 3;
  // Exactly representable values come back exactly.
  std::vector<float> exact(n * k);
  for (int64_t i = 0; i < n * k; ++i)
    exact[i] =
        static_cast<float>(e2m1_value(rng.next_u64() % 16) * std::ldexp(1.0, (i / 32) % 5 - 2));
  for (int64_t i = 0; i < n; ++i)
    exact[i * k] = 6.0f * std::ldexp(1.0f, (i * k / 32) % 5 - 2);  // amax
  std::vector<uint8_t> packed(n * k / 2), scales(n * k / 32);
  quantize_mxfp4(exact.data(), n, k, packed.data(), scales.data());
  std::vector<double> back(n * k);
  dequantize_mxfp4_ref(packed.data(), scales.data(), n, k, back.data());
  for (int64_t i = 0; i < n * k; ++i) ASSERT_EQ(back[i], exact[i]) << i;
  // Random values: error at most half the widest e2m1 step (1.0) times the group scale, and the
  // scale is the smallest power of two that fits the group's amax into 6.
  std::vector<float> w(n * k);
  for (auto& e : w) e = rng.uniform(-3.0f, 3.0f);
  quantize_mxfp4(w.data(), n, k, packed.data(), scales.data());
  dequantize_mxfp4_ref(packed.data(), scales.data(), n, k, back.data());
  for (int64_t i = 0; i < n; ++i)
    for (int64_t g = 0; g < k / 32; ++g) {
      const double s = e8m0_value(scales[i * (k / 32) + g]);
      double amax = 0;
      for (int j = 0; j < 32; ++j) amax = std::max(amax, std::abs(double(w[i * k + g * 32 + j])));
      EXPECT_LE(amax, 6 * s);
      EXPECT_GT(amax, 3 * s);
      for (int j = 0; j < 32; ++j) {
        const int64_t idx = i * k + g * 32 + j;
        EXPECT_LE(std::abs(back[idx] - w[idx]), 1.0 * s + 1e-12);
      }
    }
  // The matmul equals x @ dequant(W)^T.
  std::vector<float> x(m * k), y(m * n);
  for (auto& e : x) e = rng.uniform(-1.0f, 1.0f);
  ThreadPool pool(2);
  mxfp4_matmul(x.data(), packed.data(), scales.data(), m, n, k, y.data(), &pool);
  for (int64_t r = 0; r < m; ++r)
    for (int64_t i = 0; i < n; ++i) {
      double ref = 0;
      for (int64_t j = 0; j < k; ++j) ref += double(x[r * k + j]) * back[i * k + j];
      EXPECT_NEAR(y[r * n + i], ref, 1e-5 * (1 + std::abs(ref)));
    }
}

TEST(DeepseekV4Fp8, Ue8m0BlockScales) {
  // e4m3 0x38 = 1.0, 0x40 = 2.0, 0xb8 = -1.0; a 2 x 3 weight in 1 x 2 blocks.
  const uint8_t q[6] = {0x38, 0x40, 0xb8, 0x38, 0x38, 0x40};
  const uint8_t s[4] = {129, 126, 127, 120};  // [2 rows][2 column blocks]
  double w[6];
  dequantize_fp8_ue8m0_ref(q, s, 2, 3, 1, 2, w);
  EXPECT_EQ(w[0], 4.0);
  EXPECT_EQ(w[1], 8.0);
  EXPECT_EQ(w[2], -0.5);
  EXPECT_EQ(w[3], 1.0);
  EXPECT_EQ(w[4], 1.0);
  EXPECT_EQ(w[5], 2.0 / 128);
  const float ok_scales[3] = {0.25f, 1.0f, 1024.0f};
  uint8_t e[3];
  ASSERT_TRUE(f32_scales_to_e8m0(ok_scales, 3, "wq_a.scale", e).ok());
  EXPECT_EQ(e[0], 125);
  EXPECT_EQ(e[1], 127);
  EXPECT_EQ(e[2], 137);
  const float bad[2] = {1.0f, 3.0f};
  auto st = f32_scales_to_e8m0(bad, 2, "wq_a.scale", e);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("wq_a.scale"), std::string::npos);
  const float zero[1] = {0.0f};
  EXPECT_FALSE(f32_scales_to_e8m0(zero, 1, "x", e).ok());
}

// --------------------------------------------------------------------------------- KV bytes

TEST(DeepseekV4Kv, Fp8BytesPerToken) {
  auto b = kv_token_bytes_fp8(512, 64);
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(*b, 448 + 64 * 2 + 7 + 1);
  EXPECT_EQ(*b, 584);
  auto small = kv_token_bytes_fp8(128, 64);  // 64 + 128 + 1 scale + 1 pad
  ASSERT_TRUE(small.ok());
  EXPECT_EQ(*small, 194);
  EXPECT_FALSE(kv_token_bytes_fp8(100, 64).ok());
  EXPECT_FALSE(kv_token_bytes_fp8(64, 64).ok());
}

TEST(DeepseekV4Kv, BytesByKindAndDecodeRead) {
  STRATA_REQUIRE_SHARED("configs/deepseek-v4-flash/config.json");
  auto c = parse_deepseek_v4_config(read_config("deepseek-v4-flash"));
  ASSERT_TRUE(c.ok());
  const int64_t ctx = 65536;
  auto b = kv_bytes(*c, ctx);
  ASSERT_TRUE(b.ok());
  // Flash: 2 window-only, 21 CSA, 20 HCA layers; 584-byte rows; 132-byte indexer keys.
  EXPECT_EQ(b->window, 43 * 128 * 584);
  EXPECT_EQ(b->c4, 21 * (ctx / 4) * 584);
  EXPECT_EQ(b->c128, 20 * (ctx / 128) * 584);
  EXPECT_EQ(b->indexer, 21 * (ctx / 4) * 132);
  EXPECT_EQ(b->decode_read, 2 * 128 * 584 + 21 * ((128 + 512) * 584 + (ctx / 4) * 132) +
                                20 * (128 + ctx / 128) * 584);
  // Against every layer keeping and reading all 64k tokens of 656-byte MLA rows: several times
  // less stored, and over ten times less read per decode step.
  const int64_t full = full_attention_kv_bytes(43, ctx);
  EXPECT_GT(full, 3 * b->total());
  EXPECT_GT(full, 10 * b->decode_read);
  // Compressor state per sequence: c4 layers 8 rows x (2*2*512) f32 plus the indexer's 8 x
  // (2*2*128); c128 layers 128 rows x (2*512).
  EXPECT_EQ(b->compressor_state, 21 * (8 * 2048 * 4 + 8 * 512 * 4) + 20 * (128 * 1024 * 4));
  // --max-model-len 800000 against a KV budget: it fits exactly when the budget covers
  // kv_bytes at 800000 tokens.
  const int64_t need = kv_bytes(*c, 800000)->total();
  auto fit = max_context_for_kv_budget(*c, need);
  ASSERT_TRUE(fit.ok());
  EXPECT_GE(*fit, 800000);
  EXPECT_GT(kv_bytes(*c, *fit + 1)->total(), need);
  EXPECT_LT(*max_context_for_kv_budget(*c, need - 1), 800000);
  EXPECT_EQ(*max_context_for_kv_budget(*c, 1000), 0);  // not even the compressor state
  const std::string line = kv_summary(*c, ctx);
  EXPECT_NE(line.find("584 B per window/c4/c128 row"), std::string::npos) << line;
  EXPECT_NE(line.find("132 B per indexer key"), std::string::npos) << line;
  EXPECT_NE(line.find("2 window-only, 21 c4+indexer, 20 c128"), std::string::npos) << line;
}

TEST(DeepseekV4Kv, Fp8BlockLayoutRoundTrip) {
  auto l = fp8_kv_block_layout(512, 64, 256);
  ASSERT_TRUE(l.ok());
  EXPECT_EQ(l->data_bytes(), 576);
  EXPECT_EQ(l->scale_bytes(), 8);
  EXPECT_EQ(l->scale_offset(0), 256 * 576);
  EXPECT_EQ(l->block_bytes(), 260 * 576);  // 256 * 584 rounded up to whole 576-byte rows
  EXPECT_EQ(fp8_kv_block_layout(512, 64, 64)->block_bytes(), 65 * 576);
  EXPECT_FALSE(fp8_kv_block_layout(500, 64, 64).ok());
  Rng rng(15);
  std::vector<uint8_t> block(l->block_bytes(), 0xaa);
  std::vector<float> a(512), b(512), back(512);
  for (int i = 0; i < 512; ++i) {
    const float mag = std::ldexp(1.0f, (i / 64) * 3 - 10);  // a different range per group
    a[i] = rng.uniform(-1.0f, 1.0f) * mag;
    b[i] = rng.uniform(-5.0f, 5.0f);
  }
  a[7] = 0;
  pack_kv_token_fp8(*l, a.data(), 0, block.data());
  pack_kv_token_fp8(*l, b.data(), 3, block.data());
  for (int pass = 0; pass < 2; ++pass) {
    const std::vector<float>& x = pass == 0 ? a : b;
    const int64_t slot = pass == 0 ? 0 : 3;
    unpack_kv_token_fp8(*l, block.data(), slot, back.data());
    const uint8_t* scales = block.data() + l->scale_offset(slot);
    EXPECT_EQ(scales[7], 0);  // the pad byte
    for (int g = 0; g < 7; ++g) {
      const double s = e8m0_value(scales[g]);
      double amax = 0;
      for (int i = 0; i < 64; ++i) amax = std::max(amax, std::abs(double(x[g * 64 + i])));
      EXPECT_LE(amax / s, 448.0);
      EXPECT_GT(amax / s, 224.0);
      for (int i = 0; i < 64; ++i) {
        const double v = x[g * 64 + i], got = back[g * 64 + i];
        EXPECT_LE(std::abs(got - v), std::abs(v) / 16 + s / 1024) << g << " " << i;
      }
    }
    for (int i = 448; i < 512; ++i) EXPECT_EQ(back[i], bf16_to_f32(f32_to_bf16(x[i])));
  }
}

// ------------------------------------------------------------------------------ attention

// A tiny V4: three layers, one of each kind.
DeepseekV4Config tiny_config(int64_t window = 8, int64_t topk = 3) {
  const Json j = Json::parse(R"({
    "architectures": ["DeepseekV4ForCausalLM"], "vocab_size": 100, "hidden_size": 64,
    "num_hidden_layers": 3, "num_attention_heads": 4, "num_key_value_heads": 1, "head_dim": 32,
    "qk_rope_head_dim": 8, "q_lora_rank": 24, "o_lora_rank": 16, "o_groups": 2,
    "sliding_window": 8, "compress_ratios": [0, 4, 128, 0], "index_n_heads": 2,
    "index_head_dim": 16, "index_topk": 3, "n_routed_experts": 8, "num_experts_per_tok": 2,
    "moe_intermediate_size": 32, "compress_rope_theta": 160000, "rope_theta": 10000,
    "rope_scaling": {"type": "yarn", "factor": 4, "beta_fast": 32, "beta_slow": 1,
                     "original_max_position_embeddings": 64},
    "hc_mult": 4, "hc_sinkhorn_iters": 20, "hc_eps": 1e-6, "rms_norm_eps": 1e-6})");
  auto c = parse_deepseek_v4_config(j);
  EXPECT_TRUE(c.ok()) << c.status().to_string();
  c->sliding_window = window;
  c->index_topk = topk;
  return *c;
}

std::vector<double> inputs(int64_t t, int64_t dim, uint64_t seed) {
  Rng rng(seed);
  return randv(rng, t * dim, -1.5, 1.5);
}

// max |a - b| / max |b|
double rel_err(const std::vector<float>& a, const std::vector<double>& b) {
  double num = 0, den = 0;
  for (size_t i = 0; i < b.size(); ++i) {
    num = std::max(num, std::abs(a[i] - b[i]));
    den = std::max(den, std::abs(b[i]));
  }
  return num / den;
}

std::vector<float> run_decoder(const DeepseekV4Config& c, int64_t layer, const AttnWeights& w,
                               const std::vector<double>& x, int64_t t,
                               std::vector<int64_t>* compressed_seen = nullptr) {
  AttentionDecoder dec(c, layer, w);
  std::vector<float> out(t * c.hidden_size);
  for (int64_t p = 0; p < t; ++p) {
    std::vector<float> xp(x.begin() + p * c.hidden_size, x.begin() + (p + 1) * c.hidden_size);
    dec.step(xp.data(), &out[p * c.hidden_size]);
    if (compressed_seen != nullptr) compressed_seen->push_back(dec.last_compressed_rows());
  }
  return out;
}

TEST(DeepseekV4Attention, DecoderMatchesTheFloat64ReferenceForEachKind) {
  const DeepseekV4Config c = tiny_config();
  // (layer, tokens): window-only, CSA (ratio 4 + indexer top-3), HCA (ratio 128; 2 rows by 300).
  const std::pair<int64_t, int64_t> cases[] = {{0, 40}, {1, 45}, {2, 300}};
  for (auto [layer, t] : cases) {
    SCOPED_TRACE("layer " + std::to_string(layer));
    const AttnWeights w = random_attn_weights(c, layer, 7);
    ASSERT_TRUE(check_attn_weights(c, layer, w).ok());
    const auto x = inputs(t, c.hidden_size, 100 + layer);
    std::vector<double> ref(t * c.hidden_size);
    attention_ref(c, layer, w, x.data(), t, ref.data());
    std::vector<int64_t> seen;
    const auto out = run_decoder(c, layer, w, x, t, &seen);
    EXPECT_LT(rel_err(out, ref), 2e-5);
    for (int64_t p = 0; p < t; ++p) {
      const int64_t complete = c.compress_ratio(layer) ? (p + 1) / c.compress_ratio(layer) : 0;
      const int64_t expect =
          c.compress_ratio(layer) == 4 ? std::min<int64_t>(complete, 3) : complete;
      ASSERT_EQ(seen[p], expect) << "token " << p;
    }
  }
}

TEST(DeepseekV4Attention, Fp8KvCacheStaysCloseToTheReference) {
  // head_dim 136 = 128 nope (two ue8m0 groups) + 8 rope, so the FP8 layout applies.
  DeepseekV4Config c = tiny_config();
  c.head_dim = 136;
  for (int64_t layer : {1, 2}) {
    SCOPED_TRACE("layer " + std::to_string(layer));
    const AttnWeights w = random_attn_weights(c, layer, 16);
    const int64_t t = layer == 1 ? 40 : 260;
    const auto x = inputs(t, c.hidden_size, 17);
    std::vector<double> ref(t * c.hidden_size);
    attention_ref(c, layer, w, x.data(), t, ref.data());
    AttentionDecoder dec(c, layer, w, /*fp8_kv=*/true);
    std::vector<float> out(t * c.hidden_size);
    for (int64_t p = 0; p < t; ++p) {
      std::vector<float> xp(x.begin() + p * c.hidden_size, x.begin() + (p + 1) * c.hidden_size);
      dec.step(xp.data(), &out[p * c.hidden_size]);
    }
    const double err = rel_err(out, ref);
    EXPECT_LT(err, 5e-2);  // e4m3 keeps ~2^-4 relative per value
    EXPECT_GT(err, 1e-5);  // and the rows did go through it
  }
}

TEST(DeepseekV4Attention, CausalAndWindowed) {
  const DeepseekV4Config c = tiny_config();
  for (int64_t layer : {0, 1}) {
    SCOPED_TRACE("layer " + std::to_string(layer));
    const AttnWeights w = random_attn_weights(c, layer, 8);
    const int64_t t = 30, dim = c.hidden_size;
    auto x = inputs(t, dim, 9);
    std::vector<double> full(t * dim), prefix(20 * dim);
    attention_ref(c, layer, w, x.data(), t, full.data());
    attention_ref(c, layer, w, x.data(), 20, prefix.data());
    for (int64_t i = 0; i < 20 * dim; ++i) ASSERT_EQ(prefix[i], full[i]);  // no look-ahead
    // Changing token 0: a window-only layer forgets it once it leaves the window; the CSA layer
    // still sees it through the compressed rows (rows 0 and 1 pool it).
    x[0] += 1.0;
    std::vector<double> changed(t * dim);
    attention_ref(c, layer, w, x.data(), t, changed.data());
    double diff_late = 0, diff_early = 0;
    for (int64_t p = 0; p < t; ++p)
      for (int64_t d = 0; d < dim; ++d) {
        const double e = std::abs(changed[p * dim + d] - full[p * dim + d]);
        (p >= c.sliding_window ? diff_late : diff_early) =
            std::max(p >= c.sliding_window ? diff_late : diff_early, e);
      }
    EXPECT_GT(diff_early, 1e-6);
    if (layer == 0)
      EXPECT_EQ(diff_late, 0.0);
    else
      EXPECT_GT(diff_late, 1e-9);
  }
}

TEST(DeepseekV4Attention, TopkCoveringAllRowsAttendsToEveryCompleteRow) {
  const DeepseekV4Config c = tiny_config(8, 1000);
  const AttnWeights w = random_attn_weights(c, 1, 10);
  const int64_t t = 33;
  const auto x = inputs(t, c.hidden_size, 11);
  std::vector<int64_t> seen;
  const auto out = run_decoder(c, 1, w, x, t, &seen);
  for (int64_t p = 0; p < t; ++p) EXPECT_EQ(seen[p], (p + 1) / 4);
  std::vector<double> ref(t * c.hidden_size);
  attention_ref(c, 1, w, x.data(), t, ref.data());
  EXPECT_LT(rel_err(out, ref), 2e-5);
}

TEST(DeepseekV4Attention, SinksAbsorbTheMass) {
  const DeepseekV4Config c = tiny_config();
  AttnWeights w = random_attn_weights(c, 2, 12);
  const int64_t t = 10;
  const auto x = inputs(t, c.hidden_size, 13);
  std::vector<double> base(t * c.hidden_size), sunk(t * c.hidden_size);
  attention_ref(c, 2, w, x.data(), t, base.data());
  for (auto& s : w.attn_sink) s = 60;  // e^60 dwarfs every key's weight
  attention_ref(c, 2, w, x.data(), t, sunk.data());
  double mb = 0, ms = 0;
  for (size_t i = 0; i < base.size(); ++i) {
    mb = std::max(mb, std::abs(base[i]));
    ms = std::max(ms, std::abs(sunk[i]));
  }
  EXPECT_GT(mb, 1e-2);
  EXPECT_LT(ms, 1e-15 * mb + 1e-18);
}

TEST(DeepseekV4Attention, CompressorPoolsOverlappingWindows) {
  // With zero gate weights and positions embeddings the pooling is a plain mean: ratio 128 over
  // its own 128 tokens; ratio 4 over the previous 4 tokens' first-half channels and its own 4
  // tokens' second-half channels (the first row has no previous window).
  Rng rng(14);
  const int64_t dim = 16, d = 8, rd = 4, t = 12;
  const auto x = randv(rng, 256 * dim, -1, 1);
  const std::vector<double> norm(d, 1.0);
  const std::vector<double> inv = rope_inv_freq(rd, 10000.0, nullptr);
  for (int ratio : {4, 128}) {
    const int64_t coff = ratio == 4 ? 2 : 1, len = ratio == 4 ? t : 256;
    const auto wkv = randv(rng, coff * d * dim, -1, 1);
    const std::vector<double> wgate(coff * d * dim, 0.0), ape(ratio * coff * d, 0.0);
    std::vector<double> rows;
    const int64_t n = compress_ref(x.data(), len, dim, ratio, d, rd, wkv.data(), wgate.data(),
                                   ape.data(), norm.data(), 1e-6, inv.data(), &rows);
    ASSERT_EQ(n, len / ratio);
    for (int64_t r = 0; r < n; ++r) {
      std::vector<double> mean(d, 0.0);
      int64_t count = 0;
      auto add = [&](int64_t tok, int64_t off) {
        for (int64_t ch = 0; ch < d; ++ch) {
          double acc = 0;
          for (int64_t i = 0; i < dim; ++i) acc += wkv[(off + ch) * dim + i] * x[tok * dim + i];
          mean[ch] += acc;
        }
      };
      if (ratio == 4 && r > 0) {
        for (int64_t tok = (r - 1) * 4; tok < r * 4; ++tok) add(tok, 0);
        count += 4;
      }
      for (int64_t tok = r * ratio; tok < (r + 1) * ratio; ++tok) add(tok, ratio == 4 ? d : 0);
      count += ratio;
      double ss = 0;
      for (auto& m : mean) {
        m /= static_cast<double>(count);
        ss += m * m;
      }
      for (auto& m : mean) m /= std::sqrt(ss / d + 1e-6);
      rope_interleaved_ref(mean.data() + d - rd, rd, r * ratio, inv.data(), false);
      for (int64_t ch = 0; ch < d; ++ch) EXPECT_NEAR(rows[r * d + ch], mean[ch], 1e-12);
    }
  }
}

// ------------------------------------------------------------------------ MoE and model

// The tiny config as a whole model: layer 0 window-only and hash-routed, 1 CSA, 2 HCA.
DeepseekV4Config tiny_model_config() {
  DeepseekV4Config c = tiny_config();
  c.num_hash_layers = 1;
  c.n_shared_experts = 1;
  c.swiglu_limit = 1.5;  // small enough that the clamp engages on these activations
  c.routed_scaling_factor = 1.5;
  return c;
}

TEST(DeepseekV4Moe, HashAndScoredLayers) {
  const DeepseekV4Config c = tiny_model_config();
  const ModelWeights w = random_model_weights(c, 21);
  Rng rng(22);
  const auto x = randv(rng, c.hidden_size, -1.5, 1.5);
  std::vector<double> a(c.hidden_size), b(c.hidden_size);
  // Layer 0 routes by the token's tid2eid row: another token id, other experts.
  moe_ref(c, 0, w.layers[0].ffn, x.data(), 5, a.data());
  moe_ref(c, 0, w.layers[0].ffn, x.data(), 6, b.data());
  double diff = 0;
  for (int64_t d = 0; d < c.hidden_size; ++d) diff = std::max(diff, std::abs(a[d] - b[d]));
  EXPECT_GT(diff, 1e-6);
  // Layer 1 routes by score: the token id does not matter.
  moe_ref(c, 1, w.layers[1].ffn, x.data(), 5, a.data());
  moe_ref(c, 1, w.layers[1].ffn, x.data(), 6, b.data());
  for (int64_t d = 0; d < c.hidden_size; ++d) EXPECT_EQ(a[d], b[d]);
  // By hand for the hash layer: shared expert + the table's experts with their renormalised
  // sqrt-softplus weights times routed_scaling_factor, each expert clamped.
  const MoeWeights& f = w.layers[0].ffn;
  const int64_t dim = c.hidden_size, inter = c.moe_intermediate_size;
  auto expert = [&](const double* w1, const double* w3, const double* w2, std::vector<double>* y) {
    std::vector<double> act(inter);
    for (int64_t i = 0; i < inter; ++i) {
      double g = 0, u = 0;
      for (int64_t d = 0; d < dim; ++d) {
        g += w1[i * dim + d] * x[d];
        u += w3[i * dim + d] * x[d];
      }
      g = std::min(g, 1.5);
      u = std::clamp(u, -1.5, 1.5);
      act[i] = g / (1 + std::exp(-g)) * u;
    }
    y->assign(dim, 0.0);
    for (int64_t d = 0; d < dim; ++d)
      for (int64_t i = 0; i < inter; ++i) (*y)[d] += w2[d * inter + i] * act[i];
  };
  std::vector<double> want, e;
  expert(f.shared_w1.data(), f.shared_w3.data(), f.shared_w2.data(), &want);
  const int32_t* row = &f.tid2eid[5 * c.num_experts_per_tok];
  std::vector<double> score(c.num_experts_per_tok);
  double sum = 0;
  for (int64_t i = 0; i < c.num_experts_per_tok; ++i) {
    double logit = 0;
    for (int64_t d = 0; d < dim; ++d) logit += f.gate[row[i] * dim + d] * x[d];
    sum += score[i] = sqrt_softplus(logit);
  }
  std::vector<double> w1(inter * dim), w3(inter * dim), w2(dim * inter);
  for (int64_t i = 0; i < c.num_experts_per_tok; ++i) {
    dequantize_mxfp4_ref(f.w1[row[i]].data(), f.w1_scale[row[i]].data(), inter, dim, w1.data());
    dequantize_mxfp4_ref(f.w3[row[i]].data(), f.w3_scale[row[i]].data(), inter, dim, w3.data());
    dequantize_mxfp4_ref(f.w2[row[i]].data(), f.w2_scale[row[i]].data(), dim, inter, w2.data());
    expert(w1.data(), w3.data(), w2.data(), &e);
    for (int64_t d = 0; d < dim; ++d) want[d] += score[i] / sum * 1.5 * e[d];
  }
  moe_ref(c, 0, f, x.data(), 5, a.data());
  for (int64_t d = 0; d < dim; ++d) EXPECT_NEAR(a[d], want[d], 1e-12 * (1 + std::abs(want[d])));
}

TEST(DeepseekV4Model, Float32DecoderMatchesTheFloat64Forward) {
  // Three layers (window-only + hash routing, CSA with top-3 indexer, HCA) on 140 tokens, so the
  // HCA layer gets a complete 128-token row; decode one token at a time against the
  // whole-sequence float64 forward. Tolerance: max |logit error| <= 1e-4 of the max |logit|.
  const DeepseekV4Config c = tiny_model_config();
  const ModelWeights w = random_model_weights(c, 31);
  const int64_t t = 140, v = c.vocab_size;
  std::vector<int32_t> tokens(t);
  for (int64_t p = 0; p < t; ++p) tokens[p] = static_cast<int32_t>((p * 37 + 11) % v);
  std::vector<double> ref(t * v);
  model_forward_ref(c, w, tokens.data(), t, ref.data());
  ModelDecoder dec(c, w);
  std::vector<float> got(t * v);
  for (int64_t p = 0; p < t; ++p) dec.step(tokens[p], &got[p * v]);
  EXPECT_EQ(dec.tokens_seen(), t);
  EXPECT_LT(rel_err(got, ref), 1e-4);
  int greedy_checked = 0;
  for (int64_t p = 0; p < t; ++p) {
    const double* r = &ref[p * v];
    std::vector<int64_t> order(v);
    std::iota(order.begin(), order.end(), 0);
    std::partial_sort(order.begin(), order.begin() + 2, order.end(),
                      [&](int64_t a, int64_t b) { return r[a] > r[b]; });
    if (r[order[0]] - r[order[1]] < 1e-3) continue;  // a near tie: either is right
    const float* g = &got[p * v];
    EXPECT_EQ(std::max_element(g, g + v) - g, order[0]) << "position " << p;
    ++greedy_checked;
  }
  EXPECT_GT(greedy_checked, t / 2);
  // The logits differ from position to position (the model is not degenerate).
  double spread = 0;
  for (int64_t i = 0; i < v; ++i)
    spread = std::max(spread, std::abs(ref[i] - ref[(t - 1) * v + i]));
  EXPECT_GT(spread, 1e-2);
}

TEST(DeepseekV4Model, MtpBlockFloat32MatchesTheFloat64Forward) {
  // The MTP block on the main model's pre-hc_head streams and the next tokens: float32 (streams
  // from the float32 decoder) against float64 (streams from the float64 forward), 1e-4.
  const DeepseekV4Config c = tiny_model_config();
  const ModelWeights w = random_model_weights(c, 51);
  const MtpWeights m = random_mtp_weights(c, 52);
  ASSERT_TRUE(check_attn_weights(mtp_config(c), c.num_hidden_layers, m.block.attn).ok());
  EXPECT_TRUE(m.block.ffn.tid2eid.empty());  // score-routed, with a correction bias
  EXPECT_FALSE(m.block.ffn.bias.empty());
  const int64_t t = 20, v = c.vocab_size, hc = c.hc_mult, dim = c.hidden_size;
  std::vector<int32_t> tokens(t + 1);
  for (int64_t p = 0; p <= t; ++p) tokens[p] = static_cast<int32_t>((p * 29 + 3) % v);
  std::vector<double> main_logits(t * v), streams(t * hc * dim), ref(t * v);
  model_forward_ref(c, w, tokens.data(), t, main_logits.data(), streams.data());
  mtp_forward_ref(c, w, m, streams.data(), tokens.data() + 1, t, ref.data());
  ModelDecoder dec(c, w);
  MtpDecoder mtp(c, w, m);
  std::vector<float> logits(v), got(t * v);
  for (int64_t p = 0; p < t; ++p) {
    dec.step(tokens[p], logits.data());
    ASSERT_EQ(dec.streams().size(), static_cast<size_t>(hc * dim));
    mtp.step(dec.streams().data(), tokens[p + 1], &got[p * v]);
  }
  EXPECT_LT(rel_err(got, ref), 1e-4);
  // The draft depends on the next token.
  std::vector<int32_t> other(tokens.begin() + 1, tokens.end());
  other[t - 1] = (other[t - 1] + 1) % static_cast<int32_t>(v);
  std::vector<double> ref2(t * v);
  mtp_forward_ref(c, w, m, streams.data(), other.data(), t, ref2.data());
  double d = 0;
  for (int64_t i = 0; i < v; ++i)
    d = std::max(d, std::abs(ref2[(t - 1) * v + i] - ref[(t - 1) * v + i]));
  EXPECT_GT(d, 1e-6);
}

// ------------------------------------------------------------------------------ loading

// A synthetic FP8 + MXFP4 checkpoint of `c` (every tensor of checkpoint_tensors, random values of
// sensible magnitude), as name -> bytes.
std::map<std::string, std::vector<uint8_t>> synthetic_checkpoint(const DeepseekV4Config& c,
                                                                 uint64_t seed,
                                                                 bool include_mtp = false) {
  Rng rng(seed);
  std::map<std::string, std::vector<uint8_t>> out;
  const auto specs = checkpoint_tensors(c, include_mtp);
  auto put_f32 = [&](const TensorSpec& t, float lo, float hi) {
    std::vector<uint8_t> b(t.bytes());
    for (size_t i = 0; i < b.size() / 4; ++i) {
      const float f = rng.uniform(lo, hi);
      std::memcpy(&b[4 * i], &f, 4);
    }
    out[t.name] = std::move(b);
  };
  for (size_t i = 0; i < specs.size(); ++i) {
    const TensorSpec& t = specs[i];
    const bool norm = t.name.find("norm") != std::string::npos;
    const int64_t k = t.shape.size() == 2 ? t.shape[1] : 1;
    const float a = t.shape.size() == 2 ? std::sqrt(3.0f / k) : 1.0f;
    if (t.dtype == "F32") {
      if (t.name.find("_fn") != std::string::npos)
        put_f32(t, -0.1f, 0.1f);
      else if (t.name.find("_scale") != std::string::npos)
        put_f32(t, 0.5f, 1.5f);
      else if (t.name.find("gate.bias") != std::string::npos)
        put_f32(t, -0.1f, 0.1f);
      else
        put_f32(t, -1.0f, 1.0f);
    } else if (t.dtype == "BF16") {
      std::vector<uint8_t> b(t.bytes());
      for (size_t j = 0; j < b.size() / 2; ++j) {
        const uint16_t h = f32_to_bf16(norm ? rng.uniform(0.8f, 1.2f) : rng.uniform(-a, a));
        std::memcpy(&b[2 * j], &h, 2);
      }
      out[t.name] = std::move(b);
    } else if (t.dtype == "F8_E4M3") {  // values * 2^-6 (the scales below are 121 +- 1)
      std::vector<uint8_t> b(t.bytes());
      for (auto& e : b) e = f32_to_fp8_e4m3(rng.uniform(-a, a) * 64.0f);
      out[t.name] = std::move(b);
    } else if (t.dtype == "F8_E8M0" && specs[i - 1].dtype == "F8_E4M3") {
      std::vector<uint8_t> b(t.bytes());
      for (auto& e : b) e = static_cast<uint8_t>(120 + rng.next_u64() % 3);
      out[t.name] = std::move(b);
    } else if (t.dtype == "I8") {  // MXFP4 weight; its e8m0 scale is the next tensor
      const int64_t n = t.shape[0], kk = t.shape[1] * 2;
      std::vector<float> w(n * kk);
      const float aa = std::sqrt(3.0f / kk);
      for (auto& e : w) e = rng.uniform(-aa, aa);
      std::vector<uint8_t> q(n * kk / 2), sc(n * kk / 32);
      quantize_mxfp4(w.data(), n, kk, q.data(), sc.data());
      out[t.name] = std::move(q);
      out[specs[i + 1].name] = std::move(sc);
      ++i;
    } else if (t.dtype == "I64") {
      const int64_t topk = t.shape[1], e = c.n_routed_experts;
      std::vector<uint8_t> b(t.bytes());
      for (int64_t v = 0; v < t.shape[0]; ++v)
        for (int64_t j = 0; j < topk; ++j) {
          const int64_t id = (v * 3 + j * (e / topk)) % e;
          std::memcpy(&b[8 * (v * topk + j)], &id, 8);
        }
      out[t.name] = std::move(b);
    } else {
      ADD_FAILURE() << "unexpected " << t.name << " " << t.dtype;
    }
  }
  return out;
}

DeepseekV4Config tiny_fp8_config() {
  DeepseekV4Config c = tiny_model_config();
  c.fp8_weights = true;
  c.ue8m0_scales = true;
  c.weight_block_n = 16;
  c.weight_block_k = 16;
  c.expert_dtype = ExpertDtype::kFp4;
  return c;
}

TEST(DeepseekV4Load, FromCheckpointTensors) {
  const DeepseekV4Config c = tiny_fp8_config();
  auto ckpt = synthetic_checkpoint(c, 41);
  std::vector<std::string> asked;
  const TensorReader reader = [&](const TensorSpec& t) -> Result<std::vector<uint8_t>> {
    asked.push_back(t.name);
    auto it = ckpt.find(t.name);
    if (it == ckpt.end()) return not_found("no tensor " + t.name);
    return it->second;
  };
  auto w = load_model_weights(c, reader);
  ASSERT_TRUE(w.ok()) << w.status().to_string();
  EXPECT_EQ(asked.size(), ckpt.size());  // every tensor read once
  ASSERT_EQ(w->layers.size(), 3u);
  for (int64_t l = 0; l < 3; ++l) EXPECT_TRUE(check_attn_weights(c, l, w->layers[l].attn).ok());
  // wq_a[i, j] = e4m3(q[i, j]) * 2^(scale[i / 16, j / 16] - 127), [24, 64] in 16 x 16 blocks.
  const auto& q = ckpt["layers.1.attn.wq_a.weight"];
  const auto& sc = ckpt["layers.1.attn.wq_a.scale"];
  for (int64_t i : {0, 17, 23})
    for (int64_t j : {0, 15, 16, 63})
      EXPECT_EQ(w->layers[1].attn.wq_a[i * 64 + j],
                double(fp8_e4m3_to_f32_reference(q[i * 64 + j])) *
                    std::ldexp(1.0, sc[(i / 16) * 4 + j / 16] - 127));
  EXPECT_EQ(w->layers[0].ffn.tid2eid.size(), static_cast<size_t>(c.vocab_size * 2));
  EXPECT_TRUE(w->layers[0].ffn.bias.empty());
  EXPECT_EQ(w->layers[1].ffn.bias.size(), 8u);
  // The loaded model runs, and the float32 decoder agrees with the float64 forward on it.
  const int64_t t = 24, v = c.vocab_size;
  std::vector<int32_t> tokens(t);
  for (int64_t p = 0; p < t; ++p) tokens[p] = static_cast<int32_t>((p * 13 + 5) % v);
  std::vector<double> ref(t * v);
  model_forward_ref(c, *w, tokens.data(), t, ref.data());
  ModelDecoder dec(c, *w);
  std::vector<float> got(t * v);
  for (int64_t p = 0; p < t; ++p) dec.step(tokens[p], &got[p * v]);
  EXPECT_LT(rel_err(got, ref), 1e-4);
  for (double x : ref) ASSERT_TRUE(std::isfinite(x));
}

TEST(DeepseekV4Load, MtpBlock) {
  DeepseekV4Config c = tiny_fp8_config();
  c.num_nextn_predict_layers = 1;
  auto ckpt = synthetic_checkpoint(c, 43, /*include_mtp=*/true);
  const TensorReader reader = [&](const TensorSpec& t) -> Result<std::vector<uint8_t>> {
    auto it = ckpt.find(t.name);
    if (it == ckpt.end()) return not_found("no tensor " + t.name);
    return it->second;
  };
  MtpWeights m;
  auto w = load_model_weights(c, reader, &m);
  ASSERT_TRUE(w.ok()) << w.status().to_string();
  EXPECT_TRUE(check_attn_weights(mtp_config(c), c.num_hidden_layers, m.block.attn).ok());
  EXPECT_EQ(m.e_proj.size(), static_cast<size_t>(c.hidden_size * c.hidden_size));
  EXPECT_EQ(m.hc_head_fn.size(), static_cast<size_t>(c.hc_mult * c.hc_mult * c.hidden_size));
  const int64_t t = 8, v = c.vocab_size;
  std::vector<int32_t> tokens(t + 1);
  for (int64_t p = 0; p <= t; ++p) tokens[p] = static_cast<int32_t>((p * 7 + 2) % v);
  std::vector<double> logits(t * v), streams(t * c.hc_mult * c.hidden_size), ref(t * v);
  model_forward_ref(c, *w, tokens.data(), t, logits.data(), streams.data());
  mtp_forward_ref(c, *w, m, streams.data(), tokens.data() + 1, t, ref.data());
  ModelDecoder dec(c, *w);
  MtpDecoder mtp(c, *w, m);
  std::vector<float> l(v), got(t * v);
  for (int64_t p = 0; p < t; ++p) {
    dec.step(tokens[p], l.data());
    mtp.step(dec.streams().data(), tokens[p + 1], &got[p * v]);
  }
  EXPECT_LT(rel_err(got, ref), 1e-4);
  c.num_nextn_predict_layers = 0;
  EXPECT_FALSE(load_model_weights(c, reader, &m).ok());
}

TEST(DeepseekV4Load, ErrorsNameTheTensor) {
  const DeepseekV4Config c = tiny_fp8_config();
  auto ckpt = synthetic_checkpoint(c, 42);
  auto load_with = [&](const std::map<std::string, std::vector<uint8_t>>& m) {
    return load_model_weights(c, [&](const TensorSpec& t) -> Result<std::vector<uint8_t>> {
      auto it = m.find(t.name);
      if (it == m.end()) return not_found("checkpoint has no tensor " + t.name);
      return it->second;
    });
  };
  auto bad = ckpt;
  bad["layers.2.attn.compressor.ape"].resize(8);
  auto r = load_with(bad);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kDataLoss);
  EXPECT_NE(r.status().message().find("layers.2.attn.compressor.ape"), std::string::npos);
  bad = ckpt;
  const int64_t big = 99;
  std::memcpy(&bad["layers.0.ffn.gate.tid2eid"][8 * 5], &big, 8);
  r = load_with(bad);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("layers.0.ffn.gate.tid2eid"), std::string::npos)
      << r.status().message();
  bad = ckpt;
  bad.erase("layers.1.attn.indexer.wq_b.scale");
  r = load_with(bad);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("layers.1.attn.indexer.wq_b.scale"), std::string::npos);
  bad = ckpt;
  bad["layers.1.attn.wkv.scale"][0] = 0xff;
  r = load_with(bad);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("NaN"), std::string::npos);
  DeepseekV4Config fp8_experts = c;
  fp8_experts.expert_dtype = ExpertDtype::kFp8;
  r = load_model_weights(fp8_experts, [](const TensorSpec&) -> Result<std::vector<uint8_t>> {
    return std::vector<uint8_t>{};
  });
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kUnimplemented);
}

}  // namespace
}  // namespace strata::dsv4
