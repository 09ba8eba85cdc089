// DeepSeek-V3.2 (DeepseekV32ForCausalLM): DeepSeek-V3 with the sparse-attention "lightning
// indexer". One attention layer against a plain float64 forward written from the published
// description (DeepSeek-V3.2-Exp inference/model.py, class Indexer and MLA; no Hadamard transform
// and no FP8, which leave the exact scores unchanged), the config keys, the indexer-key cache in
// the KV layout, equality with V3 while the context fits index_topk, and greedy invariance.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>

#include "core/json.h"
#include "kernels/backend.h"
#include "kv/kv_storage.h"
#include "model/deepseek_mla.h"
#include "model/memory_estimate.h"
#include "model/model.h"
#include "model/model_config.h"
#include "model_test_util.h"
#include "tiny_models.h"

namespace strata {
namespace {

using testing::ModelHarness;

const testing::TinyArch& v32() {
  for (const auto& a : testing::tiny_archs())
    if (std::string(a.name) == "deepseek_v32") return a;
  ADD_FAILURE() << "no tiny deepseek_v32";
  return testing::tiny_archs()[0];
}

std::vector<int32_t> prompt_for(int64_t vocab, int n, int seed) {
  std::vector<int32_t> p;
  for (int i = 0; i < n; ++i) p.push_back(static_cast<int32_t>((i * 41 + seed * 13 + 7) % vocab));
  return p;
}

// The tiny V3.2 config with some keys replaced (a null value removes the key).
std::string config_with(const std::string& patch_json) {
  Json c = Json::parse(v32().config_json);
  const Json patch = Json::parse(patch_json);
  for (auto& [k, v] : patch.items()) {
    if (v.is_null())
      c.erase(k);
    else
      c[k] = v;
  }
  return c.dump();
}

LoadedModel load_json(const std::string& json, ThreadPool& pool, const std::string& dtype) {
  LoadOptions o;
  o.model = testing::write_tiny_config(json);
  o.load_format = "dummy";
  o.dtype = dtype;
  o.seed = 42;
  o.pool = &pool;
  o.limits = {256, 256, 16};
  auto m = load_model(o);
  EXPECT_TRUE(m.ok()) << m.status().to_string();
  return m.ok() ? std::move(m).value() : LoadedModel{};
}

TEST(DeepseekV32Config, IndexerKeysParsedAndOverridable) {
  LoadOptions o;
  o.model = testing::write_tiny_config(v32().config_json);
  o.load_format = "dummy";
  auto c = load_model_config(o);
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  auto s = parse_mla_spec(*c);
  ASSERT_TRUE(s.ok()) << s.status().to_string();
  EXPECT_EQ(s->index_heads, 4);
  EXPECT_EQ(s->index_dim, 16);
  EXPECT_EQ(s->index_topk, 8);
  EXPECT_TRUE(s->has_indexer());
  EXPECT_EQ(c->head_dim, 24);  // MLA's qk dims, as for V3

  o.hf_overrides = R"({"index_topk": 3, "index_n_heads": 2})";
  c = load_model_config(o);
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  s = parse_mla_spec(*c);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->index_topk, 3);
  EXPECT_EQ(s->index_heads, 2);

  // V3 has no indexer even with the keys present.
  o.model =
      testing::write_tiny_config(config_with(R"({"architectures":["DeepseekV3ForCausalLM"]})"));
  o.hf_overrides = "";
  c = load_model_config(o);
  ASSERT_TRUE(c.ok());
  EXPECT_FALSE(parse_mla_spec(*c)->has_indexer());
}

TEST(DeepseekV32Config, ErrorsNameTheKey) {
  ThreadPool pool(1);
  struct Case {
    const char* patch;
    const char* needle;
  } cases[] = {{R"({"index_topk": null})", "index_topk"},
               {R"({"index_n_heads": 0})", "index_n_heads"},
               {R"({"index_head_dim": 4})", "index_head_dim"},  // below qk_rope_head_dim 8
               {R"({"q_lora_rank": null})", "q_lora_rank"}};
  for (const Case& k : cases) {
    LoadOptions o;
    o.model = testing::write_tiny_config(config_with(k.patch));
    o.load_format = "dummy";
    o.pool = &pool;
    auto m = load_model(o);
    ASSERT_FALSE(m.ok()) << k.patch;
    EXPECT_NE(m.status().message().find(k.needle), std::string::npos)
        << k.patch << ": " << m.status().message();
  }
}

TEST(DeepseekV32Model, KvCacheAddsTheIndexerKeyPerTokenAndLayer) {
  ThreadPool pool(1);
  auto m = testing::load_tiny(v32(), pool, "bfloat16");
  ASSERT_TRUE(m.model);
  const KvSpec kv = m.model->kv_spec();
  EXPECT_EQ(kv.num_layers, 2);
  EXPECT_EQ(kv.head_dim, 32 + 8);
  EXPECT_FALSE(kv.has_v);
  EXPECT_EQ(kv.aux_dim, 16);
  EXPECT_EQ(kv.bytes_per_token(DType::kBF16), 2 * (40 + 16) * 2);
  EXPECT_EQ(kv.bytes_per_token(DType::kF8E4M3), 2 * ((40 + 4) + (16 + 4)));
  // The storage allocates exactly that, and a block's bytes (the KV tiers' unit) include the keys.
  for (DType dt : {DType::kBF16, DType::kF8E4M3}) {
    auto st = KvStorage::allocate({kv.num_layers, 5, 4, 1, kv.head_dim, dt, false, kv.aux_dim});
    ASSERT_TRUE(st.ok());
    EXPECT_EQ(st->bytes(), 5 * 4 * kv.bytes_per_token(dt));
    EXPECT_EQ(st->block_bytes(), 4 * kv.bytes_per_token(dt));
    ASSERT_NE(st->aux(1), nullptr);
    EXPECT_EQ(st->aux_scales(1) != nullptr, dt == DType::kF8E4M3);
  }
}

TEST(DeepseekV32Model, KvBlockCopyRoundTripsTheIndexerKeys) {
  for (DType dt : {DType::kBF16, DType::kF8E4M3}) {
    auto a = KvStorage::allocate({2, 3, 4, 1, 6, dt, false, 5});
    auto b = KvStorage::allocate({2, 3, 4, 1, 6, dt, false, 5});
    ASSERT_TRUE(a.ok() && b.ok());
    // Mark every byte of block 1 in a (values, keys and scales) and nothing else.
    for (int64_t l = 0; l < 2; ++l) {
      const int64_t elem = dtype_block_bytes(dt);
      std::memset(a->k(l) + 1 * 4 * 6 * elem, 0x11 + l, 4 * 6 * elem);
      std::memset(a->aux(l) + 1 * 4 * 5 * elem, 0x22 + l, 4 * 5 * elem);
      if (dt == DType::kF8E4M3) {
        std::fill(a->k_scales(l) + 4, a->k_scales(l) + 8, 3.0f + l);
        std::fill(a->aux_scales(l) + 4, a->aux_scales(l) + 8, 5.0f + l);
      }
    }
    std::vector<std::byte> buf(static_cast<size_t>(a->block_bytes()));
    a->copy_block_out(1, buf.data());
    b->copy_block_in(2, buf.data());
    for (int64_t l = 0; l < 2; ++l) {
      const int64_t elem = dtype_block_bytes(dt);
      EXPECT_EQ(std::memcmp(a->aux(l) + 4 * 5 * elem, b->aux(l) + 2 * 4 * 5 * elem, 4 * 5 * elem),
                0);
      EXPECT_EQ(std::memcmp(a->k(l) + 4 * 6 * elem, b->k(l) + 2 * 4 * 6 * elem, 4 * 6 * elem), 0);
      EXPECT_EQ(static_cast<int>(b->aux(l)[2 * 4 * 5 * elem]), 0x22 + l);
      if (dt == DType::kF8E4M3) {
        EXPECT_EQ(b->aux_scales(l)[8], 5.0f + l);
        EXPECT_EQ(b->k_scales(l)[8], 3.0f + l);
        EXPECT_EQ(b->aux_scales(l)[4], 0.0f);  // block 1 of b untouched
      }
    }
  }
}

// fp8_ds_mla (core/fp8_ds_mla.h): per token and layer the packed latent row (fp8 latent, one f32
// scale per 128 values, bf16 rotary key) and the fp8 indexer key with its f32 scale.
TEST(DeepseekV32Model, Fp8DsMlaBytesPerTokenAreThePublishedLayout) {
  ThreadPool pool(1);
  auto m = testing::load_tiny(v32(), pool, "bfloat16");
  ASSERT_TRUE(m.model);
  const KvSpec kv = m.model->kv_spec();
  EXPECT_EQ(kv.latent_dim, 32);
  EXPECT_EQ(kv.bytes_per_token(DType::kF8E4M3, true), 2 * ((32 + 4 + 2 * 8) + (16 + 4)));
  // The real V3.2 shape: 656 + 132 bytes per layer.
  KvSpec real{61, 1, 512 + 64, false, 128, 512};
  EXPECT_EQ(real.bytes_per_token(DType::kF8E4M3, true), 61 * (656 + 132));
  EXPECT_EQ(real.bytes_per_token(DType::kF8E4M3), 61 * ((576 + 4) + (128 + 4)));
  for (const KvSpec& k : {kv, real}) {
    auto st = KvStorage::allocate({k.num_layers, 5, 4, 1, k.head_dim, DType::kF8E4M3, false,
                                   k.aux_dim, k.ds_mla_latent(true)});
    ASSERT_TRUE(st.ok()) << st.status().to_string();
    EXPECT_EQ(st->bytes(), 5 * 4 * k.bytes_per_token(DType::kF8E4M3, true));
    EXPECT_EQ(st->block_bytes(), 4 * k.bytes_per_token(DType::kF8E4M3, true));
    EXPECT_EQ(st->k_scales(0), nullptr);  // the scales are inside the row
    EXPECT_NE(st->aux_scales(k.num_layers - 1), nullptr);
    // The last layer's aux scales end the allocation.
    EXPECT_EQ(reinterpret_cast<std::byte*>(st->aux_scales(k.num_layers - 1) + 5 * 4),
              st->k(0) + st->bytes());
  }
  // Only for an fp8 MLA cache.
  EXPECT_FALSE(KvStorage::allocate({2, 5, 4, 1, 40, DType::kBF16, false, 16, 32}).ok());
  EXPECT_FALSE(KvStorage::allocate({2, 5, 4, 2, 40, DType::kF8E4M3, false, 16, 32}).ok());
  EXPECT_FALSE(KvStorage::allocate({2, 5, 4, 1, 40, DType::kF8E4M3, true, 0, 32}).ok());
}

TEST(DeepseekV32Model, KvBlockCopyCarriesTheFp8DsMlaLayout) {
  const int64_t D = 136, r = 130, rb = ds_mla_row_bytes(D, r);  // 130 + 8 + 12 bytes
  auto a = KvStorage::allocate({2, 3, 4, 1, D, DType::kF8E4M3, false, 5, r});
  auto b = KvStorage::allocate({2, 3, 4, 1, D, DType::kF8E4M3, false, 5, r});
  ASSERT_TRUE(a.ok() && b.ok());
  for (int64_t l = 0; l < 2; ++l) {
    for (int64_t i = 0; i < 4 * rb; ++i) a->k(l)[4 * rb + i] = static_cast<std::byte>(i * 7 + l);
    std::memset(a->aux(l) + 4 * 5, 0x22 + l, 4 * 5);
    std::fill(a->aux_scales(l) + 4, a->aux_scales(l) + 8, 5.0f + l);
  }
  std::vector<std::byte> buf(static_cast<size_t>(a->block_bytes()));
  EXPECT_EQ(a->block_bytes(), 2 * 4 * (rb + 5 + 4));
  a->copy_block_out(1, buf.data());
  b->copy_block_in(2, buf.data());
  for (int64_t l = 0; l < 2; ++l) {
    EXPECT_EQ(std::memcmp(a->k(l) + 4 * rb, b->k(l) + 2 * 4 * rb, 4 * rb), 0);
    EXPECT_EQ(std::memcmp(a->aux(l) + 4 * 5, b->aux(l) + 2 * 4 * 5, 4 * 5), 0);
    EXPECT_EQ(b->aux_scales(l)[8], 5.0f + l);
    EXPECT_EQ(b->aux_scales(l)[4], 0.0f);  // block 1 of b untouched
    EXPECT_EQ(b->k(l)[4 * rb + 1], std::byte{0});
  }
}

// The tiny V3.2 with an fp8_ds_mla cache against a bf16 cache. The tiny model's logits are flat
// (near-ties among 300 tokens), so greedy ids part after a few tokens under any rounding of the
// cache (plain fp8 as well); the check is on logits instead. Its layers are made dense
// (first_k_dense_replace 2): MoE routing would turn a small difference into a jump. Along the bf16
// cache's greedy path (prompt, then 12 generated tokens fed to both caches), at every step: logits
// within 2% of the largest bf16 logit, not equal to them (the layout was used), and the same argmax
// wherever the bf16 top-1 margin exceeds twice the difference. With index_topk 64 (>= every context
// here) only the latent layout differs; with the tiny config's index_topk 8 the fp8 indexer keys
// (the same in both fp8 layouts) may select other positions than bf16 keys would, so there
// fp8_ds_mla is compared with the plain fp8 cache, within 0.1% of the largest logit.
TEST(DeepseekV32Model, Fp8DsMlaLogitsFollowTheBf16Cache) {
  ThreadPool pool(2);
  const KernelOps& ops = kernel_ops(default_kernel_variant());
  for (int topk : {64, 8}) {
    SCOPED_TRACE("index_topk " + std::to_string(topk));
    LoadOptions o;
    o.model = testing::write_tiny_config(
        config_with(R"({"first_k_dense_replace": 2, "index_topk": )" + std::to_string(topk) + "}"));
    o.load_format = "dummy";
    o.dtype = "bfloat16";
    o.seed = 42;
    o.pool = &pool;
    o.limits = {256, 256, 16};
    auto m = load_model(o);
    ASSERT_TRUE(m.ok()) << m.status().to_string();
    Model& model = *m->model;
    const int64_t V = model.config().vocab_size;
    auto prompt = prompt_for(V, 27, 3);
    // Chunked prefill and smaller blocks give the same ids (the layout is per token).
    EXPECT_EQ(testing::greedy(model, prompt, 12, ops, 4, 8, DType::kF8E4M3, true),
              testing::greedy(model, prompt, 12, ops, 1 << 30, 16, DType::kF8E4M3, true));
    ModelHarness hd(model, 1, 64, 16, DType::kF8E4M3, true), hb(model, 1, 64, 16, DType::kBF16),
        hf(model, 1, 64, 16, DType::kF8E4M3);
    auto a = hd.step1(0, prompt, ops), b = hb.step1(0, prompt, ops), f = hf.step1(0, prompt, ops);
    int compared_argmax = 0;
    for (int step = 0; step <= 12; ++step) {
      double scale = 0, diff_bf16 = 0, diff_fp8 = 0;
      for (int64_t i = 0; i < V; ++i) {
        scale = std::max(scale, double{std::fabs(b[i])});
        diff_bf16 = std::max(diff_bf16, double{std::fabs(a[i] - b[i])});
        diff_fp8 = std::max(diff_fp8, double{std::fabs(a[i] - f[i])});
      }
      EXPECT_GT(diff_bf16, 0.0) << "step " << step << ": the fp8_ds_mla cache was not used";
      EXPECT_GT(diff_fp8, 0.0) << "step " << step << ": the same as the plain fp8 layout";
      const int32_t next = testing::argmax(b.data(), V);
      if (topk == 64) {
        EXPECT_LT(diff_bf16, 0.02 * scale) << "step " << step;
        std::vector<float> sorted(b);
        std::partial_sort(sorted.begin(), sorted.begin() + 2, sorted.end(), std::greater<>());
        if (sorted[0] - sorted[1] > 2 * diff_bf16) {
          EXPECT_EQ(testing::argmax(a.data(), V), next) << "step " << step;
          ++compared_argmax;
        }
      } else {
        EXPECT_LT(diff_fp8, 0.01 * scale) << "step " << step;
      }
      if (step == 12) break;
      a = hd.step1(0, {next}, ops);
      b = hb.step1(0, {next}, ops);
      f = hf.step1(0, {next}, ops);
    }
    if (topk == 64) EXPECT_GT(compared_argmax, 0) << "no step with a clear bf16 argmax";
  }
}

// ---- One layer against the float64 reference. ----

// Dummy weights whose k_norm weight and bias are random too (not ones and zeros), so the
// reference checks both.
class NormsRandom final : public WeightSource {
 public:
  explicit NormsRandom(std::unique_ptr<WeightSource> in) : in_(std::move(in)) {}
  TensorNaming naming() const override { return in_->naming(); }
  std::string describe() const override { return in_->describe(); }
  bool has(const std::string& n) const override { return in_->has(n); }
  void release(const io::TensorRef& t) override { in_->release(t); }
  Result<io::TensorRef> get(const std::string& n, const std::vector<int64_t>& shape,
                            DummyInit init) override {
    if (n.find("indexer.k_norm") != std::string::npos) init = DummyInit::kNormal;
    return in_->get(n, shape, init);
  }

 private:
  std::unique_ptr<WeightSource> in_;
};

using Mat = std::vector<double>;

Mat mat(WeightSource& src, const char* name, int64_t n, int64_t k) {
  auto m = load_matrix_f32(src, {name, ""}, n, k, 0);
  EXPECT_TRUE(m.ok()) << name << ": " << m.status().to_string();
  return m.ok() ? Mat(m->begin(), m->end()) : Mat(n * k);
}
Mat vec(WeightSource& src, const char* name, int64_t n, DummyInit init) {
  auto v = load_vector(src, {name, ""}, n, 0, init);
  EXPECT_TRUE(v.ok()) << name;
  return v.ok() ? Mat(v->begin(), v->end()) : Mat(n);
}
// y = W x, W [n, k] row-major.
Mat matvec(const Mat& w, int64_t n, int64_t k, const double* x) {
  Mat y(n, 0.0);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t e = 0; e < k; ++e) y[i] += w[i * k + e] * x[e];
  return y;
}
void rms(double* x, int64_t n, const Mat& w, double eps) {
  double ss = 0;
  for (int64_t e = 0; e < n; ++e) ss += x[e] * x[e];
  const double inv = 1 / std::sqrt(ss / n + eps);
  for (int64_t e = 0; e < n; ++e) x[e] = x[e] * inv * w[e];
}
// Rotates x[0..rot) at position p: adjacent pairs (2i, 2i+1) (MLA) or halves (i, i+rot/2).
void rotate(double* x, int64_t rot, int32_t p, const RopeTable& t, bool halves) {
  for (int64_t i = 0; i < rot / 2; ++i) {
    const double a = p * t.inv_freq()[i], c = std::cos(a) * t.magnitude(),
                 s = std::sin(a) * t.magnitude();
    const int64_t i0 = halves ? i : 2 * i, i1 = halves ? i + rot / 2 : 2 * i + 1;
    const double x0 = x[i0], x1 = x[i1];
    x[i0] = x0 * c - x1 * s;
    x[i1] = x0 * s + x1 * c;
  }
}

struct RefOut {
  std::vector<double> out;                   // [T, H]
  std::vector<std::vector<int32_t>> chosen;  // per token, ascending
  double min_gap = INFINITY;  // smallest relative gap between the k-th and (k+1)-th score
};

// The layer for one sequence of T tokens at positions 0..T-1, written from the description.
RefOut reference_layer(WeightSource& src, const ModelConfig& c, const MlaSpec& s,
                       const RopeTable& rope, const std::vector<float>& x, int64_t T) {
  const int64_t H = c.hidden_size, nh = s.num_heads, r = s.kv_lora_rank, nope = s.nope, pe = s.rope,
                vd = s.v_dim, qk = s.qk_dim(), ql = s.q_lora_rank, ni = s.index_heads,
                d = s.index_dim;
  const double eps = c.rms_norm_eps;
  const char* L = "model.layers.0.";
  auto name = [&](const char* n) { return std::string(L) + n; };
  const Mat q_a = mat(src, name("self_attn.q_a_proj.weight").c_str(), ql, H);
  const Mat q_a_norm =
      vec(src, name("self_attn.q_a_layernorm.weight").c_str(), ql, DummyInit::kOnes);
  const Mat q_b = mat(src, name("self_attn.q_b_proj.weight").c_str(), nh * qk, ql);
  const Mat kv_a = mat(src, name("self_attn.kv_a_proj_with_mqa.weight").c_str(), r + pe, H);
  const Mat kv_a_norm =
      vec(src, name("self_attn.kv_a_layernorm.weight").c_str(), r, DummyInit::kOnes);
  const Mat kv_b = mat(src, name("self_attn.kv_b_proj.weight").c_str(), nh * (nope + vd), r);
  const Mat o_w = mat(src, name("self_attn.o_proj.weight").c_str(), H, nh * vd);
  const Mat wq_b = mat(src, name("self_attn.indexer.wq_b.weight").c_str(), ni * d, ql);
  const Mat wk = mat(src, name("self_attn.indexer.wk.weight").c_str(), d, H);
  const Mat kn_w = vec(src, name("self_attn.indexer.k_norm.weight").c_str(), d, DummyInit::kNormal);
  const Mat kn_b = vec(src, name("self_attn.indexer.k_norm.bias").c_str(), d, DummyInit::kNormal);
  const Mat wp = mat(src, name("self_attn.indexer.weights_proj.weight").c_str(), ni, H);

  std::vector<Mat> q(T), lat(T), kpe(T), iq(T), ik(T), iw(T);
  for (int64_t t = 0; t < T; ++t) {
    const int32_t p = static_cast<int32_t>(t);
    Mat xt(x.begin() + t * H, x.begin() + (t + 1) * H);
    Mat qa = matvec(q_a, ql, H, xt.data());
    rms(qa.data(), ql, q_a_norm, eps);
    q[t] = matvec(q_b, nh * qk, ql, qa.data());
    for (int64_t h = 0; h < nh; ++h) rotate(q[t].data() + h * qk + nope, pe, p, rope, false);
    Mat kv = matvec(kv_a, r + pe, H, xt.data());
    lat[t] = Mat(kv.begin(), kv.begin() + r);
    rms(lat[t].data(), r, kv_a_norm, eps);
    kpe[t] = Mat(kv.begin() + r, kv.end());
    rotate(kpe[t].data(), pe, p, rope, false);
    // Indexer: queries from the normalised q latent, the key from x with a LayerNorm, RoPE on
    // the first qk_rope_head_dim dims in halves, per-head weights with both scales.
    iq[t] = matvec(wq_b, ni * d, ql, qa.data());
    for (int64_t h = 0; h < ni; ++h) rotate(iq[t].data() + h * d, pe, p, rope, true);
    ik[t] = matvec(wk, d, H, xt.data());
    double mean = 0, var = 0;
    for (double v : ik[t]) mean += v;
    mean /= d;
    for (double v : ik[t]) var += (v - mean) * (v - mean);
    var /= d;
    for (int64_t e = 0; e < d; ++e)
      ik[t][e] = (ik[t][e] - mean) / std::sqrt(var + 1e-6) * kn_w[e] + kn_b[e];
    rotate(ik[t].data(), pe, p, rope, true);
    iw[t] = matvec(wp, ni, H, xt.data());
    for (double& w : iw[t])
      w *= 1 / std::sqrt(static_cast<double>(ni)) / std::sqrt(static_cast<double>(d));
  }
  RefOut ref;
  ref.out.assign(T * H, 0.0);
  for (int64_t t = 0; t < T; ++t) {
    // Index scores over positions 0..t, top index_topk.
    std::vector<double> score(t + 1, 0.0);
    for (int64_t j = 0; j <= t; ++j)
      for (int64_t h = 0; h < ni; ++h) {
        double dot = 0;
        for (int64_t e = 0; e < d; ++e) dot += iq[t][h * d + e] * ik[j][e];
        score[j] += iw[t][h] * std::max(dot, 0.0);
      }
    std::vector<int32_t> order(t + 1);
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(),
                     [&](int32_t a, int32_t b) { return score[a] > score[b]; });
    const int64_t k = std::min<int64_t>(s.index_topk, t + 1);
    if (k < t + 1) {
      const double scale = std::max(std::fabs(score[order[0]]), 1e-30);
      ref.min_gap = std::min(ref.min_gap, (score[order[k - 1]] - score[order[k]]) / scale);
    }
    std::vector<int32_t> sel(order.begin(), order.begin() + k);
    std::sort(sel.begin(), sel.end());
    // Expanded MLA attention over the selected positions.
    Mat o(nh * vd, 0.0);
    for (int64_t h = 0; h < nh; ++h) {
      const double* uk = kv_b.data() + h * (nope + vd) * r;  // W_UK [nope, r], then W_UV [vd, r]
      const double* uv = uk + nope * r;
      std::vector<double> sc;
      for (int32_t j : sel) {
        double dot = 0;
        for (int64_t e = 0; e < nope; ++e) {
          double key = 0;
          for (int64_t i = 0; i < r; ++i) key += uk[e * r + i] * lat[j][i];
          dot += q[t][h * qk + e] * key;
        }
        for (int64_t e = 0; e < pe; ++e) dot += q[t][h * qk + nope + e] * kpe[j][e];
        sc.push_back(dot * s.softmax_scale);
      }
      const double mx = *std::max_element(sc.begin(), sc.end());
      double sum = 0;
      for (double& v : sc) sum += (v = std::exp(v - mx));
      for (size_t a = 0; a < sel.size(); ++a)
        for (int64_t e = 0; e < vd; ++e) {
          double val = 0;
          for (int64_t i = 0; i < r; ++i) val += uv[e * r + i] * lat[sel[a]][i];
          o[h * vd + e] += sc[a] / sum * val;
        }
    }
    Mat y = matvec(o_w, H, nh * vd, o.data());
    std::copy(y.begin(), y.end(), ref.out.begin() + t * H);
    ref.chosen.push_back(sel);
  }
  return ref;
}

TEST(DeepseekV32Layer, MatchesFloat64ReferenceWithSelection) {
  ThreadPool pool(2);
  auto cfg = read_hf_config(testing::write_tiny_config(config_with(R"({"index_topk": 6})")), "");
  ASSERT_TRUE(cfg.ok()) << cfg.status().to_string();
  auto spec = parse_mla_spec(*cfg);
  ASSERT_TRUE(spec.ok());
  auto rope = mla_rope_table(*cfg, *spec);
  ASSERT_TRUE(rope.ok());
  NormsRandom src(make_dummy_source(11, DType::kF32, 0.2));
  auto layer = MlaAttention::load(src, *cfg, *spec, 0, DType::kF32);
  ASSERT_TRUE(layer.ok()) << layer.status().to_string();

  const int64_t T = 19, H = cfg->hidden_size, bs = 4;
  std::vector<float> x(T * H);
  for (int64_t i = 0; i < T * H; ++i) x[i] = static_cast<float>(std::sin(0.37 * i + 1.1));
  const RefOut ref = reference_layer(src, *cfg, *spec, *rope, x, T);
  // Selection matters (fewer positions than the context) and no near-tie makes f32 pick others.
  ASSERT_GT(ref.chosen.back().size(), 0u);
  ASSERT_LT(static_cast<int64_t>(ref.chosen.back().size()), T);
  ASSERT_GT(ref.min_gap, 1e-4);

  for (const KernelVariantInfo* v : supported_kernel_variants(/*with_reference=*/true)) {
    MlaWorkspace ws;
    ws.allocate(*spec, T, 32, pool.size());
    auto st =
        KvStorage::allocate({1, 8, bs, 1, spec->cache_row(), DType::kF32, false, spec->index_dim});
    ASSERT_TRUE(st.ok());
    PagedKvLayer kv{DType::kF32, bs,   1,       spec->cache_row(), st->k(0),   nullptr,
                    1.0f,        1.0f, nullptr, nullptr,           st->aux(0), spec->index_dim,
                    nullptr};
    const std::vector<int32_t> table = {3, 1, 6, 2, 7, 5, 4, 0};  // scrambled blocks
    std::vector<float> out(T * H);
    // Two steps: 11 tokens, then 8 more over the cached ones.
    for (auto [t0, t1] : {std::pair<int64_t, int64_t>{0, 11}, {11, T}}) {
      std::vector<int32_t> ids(t1 - t0, 0), pos;
      std::vector<int64_t> slots;
      for (int64_t t = t0; t < t1; ++t) {
        pos.push_back(static_cast<int32_t>(t));
        slots.push_back(int64_t{table[t / bs]} * bs + t % bs);
      }
      const std::vector<int32_t> qs = {0, static_cast<int32_t>(t1 - t0)},
                                 lens = {static_cast<int32_t>(t1)}, rows = {};
      ForwardBatch b{ids, pos, slots, qs, lens, table, 8, rows};
      std::vector<float> cos((t1 - t0) * spec->rope / 2), sin(cos.size());
      rope->compute(pos, cos.data(), sin.data());
      ASSERT_TRUE(layer
                      ->forward(x.data() + t0 * H, H, b, kv, cos.data(), sin.data(),
                                out.data() + t0 * H, H, v->ops(), pool, ws)
                      .ok());
    }
    double scale = 0;
    for (double y : ref.out) scale = std::max(scale, std::fabs(y));
    ASSERT_GT(scale, 1e-3) << "degenerate output";
    // Stated tolerance: f32 against f64 over dims of at most 64, 2e-5 of the output's range.
    for (int64_t i = 0; i < T * H; ++i)
      ASSERT_NEAR(out[i], ref.out[i], 2e-5 * scale) << v->name << " token " << i / H;
  }
}

// ---- The whole model. ----

TEST(DeepseekV32Model, EqualsDeepseekV3WhileTheContextFitsIndexTopk) {
  ThreadPool pool(2);
  const KernelOps& ops = kernel_ops(default_kernel_variant());
  // Same weights (same seed and names); V3.2 only adds the indexer's.
  auto v3 = load_json(config_with(R"({"architectures":["DeepseekV3ForCausalLM"],
                                      "model_type":"deepseek_v3","index_topk":null,
                                      "index_n_heads":null,"index_head_dim":null})"),
                      pool, "float32");
  auto dense = load_json(config_with(R"({"index_topk": 64})"), pool, "float32");
  auto sparse = load_json(config_with(R"({"index_topk": 4})"), pool, "float32");
  ASSERT_TRUE(v3.model && dense.model && sparse.model);
  const int64_t V = v3.model->config().vocab_size;
  auto prompt = prompt_for(V, 30, 1);
  ModelHarness a(*v3.model, 1, 64, 16, DType::kF32), b(*dense.model, 1, 64, 16, DType::kF32),
      c(*sparse.model, 1, 64, 16, DType::kF32);
  for (const std::vector<int32_t>& step : {prompt, std::vector<int32_t>{5}}) {
    auto la = a.step1(0, step, ops), lb = b.step1(0, step, ops), lc = c.step1(0, step, ops);
    double scale = 0, diff_dense = 0, diff_sparse = 0;
    for (int64_t i = 0; i < V; ++i) {
      scale = std::max(scale, static_cast<double>(std::fabs(la[i])));
      diff_dense = std::max(diff_dense, static_cast<double>(std::fabs(la[i] - lb[i])));
      diff_sparse = std::max(diff_sparse, static_cast<double>(std::fabs(la[i] - lc[i])));
    }
    ASSERT_GT(scale, 1e-3);
    EXPECT_LT(diff_dense, 1e-4 * scale);  // the same attention, other kernels' rounding
    EXPECT_GT(diff_sparse, 1e-3 * scale) << "index_topk 4 of 30 tokens changed nothing";
  }
  EXPECT_EQ(testing::greedy(*dense.model, prompt, 8, ops),
            testing::greedy(*v3.model, prompt, 8, ops));
}

TEST(DeepseekV32Model, GreedyIdenticalInFourTokenChunksAndInABatchOfEight) {
  ThreadPool pool(2);
  const KernelOps& ops = kernel_ops(default_kernel_variant());
  auto m = testing::load_tiny(v32(), pool, "bfloat16");
  ASSERT_TRUE(m.model);
  const int64_t V = m.model->config().vocab_size;
  auto prompt = prompt_for(V, 27, 3);
  auto base = testing::greedy(*m.model, prompt, 12, ops, 1 << 30, 16, DType::kBF16);
  EXPECT_EQ(testing::greedy(*m.model, prompt, 12, ops, 4, 16, DType::kBF16), base);
  EXPECT_EQ(testing::greedy(*m.model, prompt, 12, ops, 4, 8, DType::kBF16), base);

  // Alone vs. sequence 3 of a batch of 8 (the others with prompts of other lengths): the same
  // logits bit for bit, at prefill and over decode steps.
  ModelHarness alone(*m.model, 1, 64, 16, DType::kBF16), batch(*m.model, 8, 64, 8, DType::kBF16);
  std::vector<int> seqs;
  std::vector<std::vector<int32_t>> prompts;
  for (int s = 0; s < 8; ++s) {
    seqs.push_back(s);
    prompts.push_back(s == 3 ? prompt : prompt_for(V, 5 + 3 * s, 10 + s));
  }
  auto a = alone.step1(0, prompt, ops);
  auto b = batch.step(seqs, prompts, ops);
  ASSERT_EQ(std::memcmp(a.data(), b.data() + 3 * V, V * sizeof(float)), 0);
  for (int i = 0; i < 4; ++i) {
    const int32_t next = testing::argmax(a.data(), V);
    std::vector<std::vector<int32_t>> toks(8, std::vector<int32_t>{static_cast<int32_t>(i + 1)});
    toks[3] = {next};
    a = alone.step1(0, {next}, ops);
    b = batch.step(seqs, toks, ops);
    ASSERT_EQ(std::memcmp(a.data(), b.data() + 3 * V, V * sizeof(float)), 0) << "decode " << i;
  }
}

}  // namespace
}  // namespace strata
