// A Llama GGUF whose tensors mix block-quantized types the way llama-quantize's Q4_K_M mix does
// (Q4_K, Q6_K for attn_v and ffn_down, Q5_K, Q8_0 output, Q4_K embeddings): it loads, each
// matmul keeps its file type (fused parts of different types become Q8_0), the integer kernels'
// logits stay within a stated tolerance of the reference variant's exact dequantized F32
// arithmetic, and a sequence's logits do not depend on its batch or the thread count.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <map>

#include <stdlib.h>

#include "core/file_util.h"
#include "core/rng.h"
#include "io/writers.h"
#include "kernels/fp8.h"
#include "model_test_util.h"
#include "test_util.h"

namespace strata {
namespace {

constexpr int64_t kHidden = 256, kLayers = 2, kHeads = 4, kKvHeads = 2, kFfn = 512, kVocab = 320;

// Random blocks of `t` for an [n, k] tensor: random bytes, with the f16 scale fields set so that
// weights are of order 0.05 (as a quantizer of a trained model writes them).
std::string random_tensor(DType t, int64_t n, int64_t k, uint64_t seed) {
  Rng rng(seed);
  const int64_t bytes = dtype_bytes(t, n * k), bb = dtype_block_bytes(t);
  std::string out(bytes, '\0');
  for (auto& b : out) b = static_cast<char>(rng.next_u64() & 0xFF);
  std::vector<int> fields;
  float scale = 0;
  switch (t) {
    case DType::kQ4_K:
    case DType::kQ5_K:
      fields = {0, 2};
      scale = t == DType::kQ4_K ? 4e-4f : 2e-4f;
      break;
    case DType::kQ6_K:
      fields = {208};
      scale = 5e-5f;
      break;
    case DType::kQ8_0:
      fields = {0};
      scale = 8e-4f;
      break;
    default:
      ADD_FAILURE() << "no scale for " << dtype_name(t);
  }
  for (int64_t b = 0; b < bytes / bb; ++b)
    for (int off : fields) {
      const uint16_t h = f32_to_f16(static_cast<float>(0.5 + rng.uniform()) * scale);
      std::memcpy(&out[b * bb + off], &h, 2);
    }
  return out;
}

std::string write_model(const std::string& dir) {
  std::vector<io::TensorToWrite> t;
  uint64_t seed = 1;
  auto add = [&](const std::string& name, DType d, int64_t n, int64_t k) {
    t.push_back({name, d, {n, k}, random_tensor(d, n, k, seed++)});
  };
  auto ones = [&](const std::string& name, int64_t n) {
    std::vector<float> v(n, 1.0f);
    t.push_back({name, DType::kF32, {n}, std::string(reinterpret_cast<char*>(v.data()), n * 4)});
  };
  const int64_t hd = kHidden / kHeads;
  add("token_embd.weight", DType::kQ4_K, kVocab, kHidden);
  for (int64_t l = 0; l < kLayers; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    ones(p + "attn_norm.weight", kHidden);
    add(p + "attn_q.weight", DType::kQ4_K, kHeads * hd, kHidden);
    add(p + "attn_k.weight", DType::kQ4_K, kKvHeads * hd, kHidden);
    add(p + "attn_v.weight", DType::kQ6_K, kKvHeads * hd, kHidden);
    add(p + "attn_output.weight", DType::kQ5_K, kHidden, kHeads * hd);
    ones(p + "ffn_norm.weight", kHidden);
    add(p + "ffn_gate.weight", DType::kQ4_K, kFfn, kHidden);
    add(p + "ffn_up.weight", DType::kQ4_K, kFfn, kHidden);
    add(p + "ffn_down.weight", DType::kQ6_K, kHidden, kFfn);
  }
  ones("output_norm.weight", kHidden);
  add("output.weight", DType::kQ8_0, kVocab, kHidden);
  const std::vector<io::GgufMeta> meta = {
      {"general.architecture", std::string("llama")},
      {"llama.context_length", uint32_t{512}},
      {"llama.embedding_length", uint32_t{kHidden}},
      {"llama.block_count", uint32_t{kLayers}},
      {"llama.feed_forward_length", uint32_t{kFfn}},
      {"llama.attention.head_count", uint32_t{kHeads}},
      {"llama.attention.head_count_kv", uint32_t{kKvHeads}},
      {"llama.attention.layer_norm_rms_epsilon", 1e-5f},
      {"llama.rope.freq_base", 10000.0f},
      {"llama.rope.dimension_count", uint32_t{hd}},
      {"llama.vocab_size", uint32_t{kVocab}},
  };
  const std::string path = dir + "/mixed-q4_k_m.gguf";
  Status st = io::write_gguf(path, meta, t);
  EXPECT_TRUE(st.ok()) << st.to_string();
  return path;
}

class QuantizedGguf : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    char tmpl[] = "/tmp/strata_quant_gguf_XXXXXX";
    path_ = new std::string(write_model(::mkdtemp(tmpl)));
  }
  static void TearDownTestSuite() { delete path_; }
  LoadedModel load(ThreadPool& pool, const std::string& quantization = "") {
    LoadOptions o;
    o.model = *path_;
    o.quantization = quantization;
    o.pool = &pool;
    o.limits = {256, 256, 8};
    auto m = load_model(o);
    EXPECT_TRUE(m.ok()) << m.status().to_string();
    return std::move(m).value();
  }
  static std::string* path_;
};
std::string* QuantizedGguf::path_ = nullptr;

TEST_F(QuantizedGguf, EachMatmulKeepsItsFileType) {
  ThreadPool pool(2);
  LoadedModel m = load(pool);
  std::map<std::string, std::string> types;
  for (const LinearInfo& l : m.model->linear_layers()) {
    const std::string kind = l.name.substr(l.name.rfind('.') + 1);
    types[kind] = dtype_name(l.dtype);
    EXPECT_GT(l.bytes, 0) << l.name;
  }
  // Q (Q4_K), K (Q4_K) and V (Q6_K) are fused: different types, so Q8_0.
  EXPECT_EQ(types["qkv"], "q8_0");
  EXPECT_EQ(types["o"], "q5_k");
  EXPECT_EQ(types["gate_up"], "q4_k");
  EXPECT_EQ(types["down"], "q6_k");
}

TEST_F(QuantizedGguf, LogitsWithinToleranceOfDequantizedReferenceAndBatchInvariant) {
  ThreadPool pool(2);
  LoadedModel m = load(pool);
  const std::vector<int32_t> prompt = {5, 17, 99, 3, 250, 8, 42, 7, 300, 1, 64, 128};
  const std::string fast = default_kernel_variant();
  std::vector<float> ref, got;
  {
    testing::ModelHarness h(*m.model, 1, 64, 16, DType::kF32);
    ref = h.step1(0, prompt, reference_kernel_ops());
  }
  {
    testing::ModelHarness h(*m.model, 1, 64, 16, DType::kF32);
    got = h.step1(0, prompt, kernel_ops(fast));
  }
  double max_ref = 0, max_diff = 0;
  for (int64_t v = 0; v < kVocab; ++v) {
    max_ref = std::max(max_ref, std::fabs(static_cast<double>(ref[v])));
    max_diff = std::max(max_diff, std::fabs(static_cast<double>(got[v]) - ref[v]));
  }
  ASSERT_GT(max_ref, 0.1) << "logits of a random model should not vanish";
  std::printf("%s: max |logit - reference| = %.3g, %.3g%% of max |logit| %.3g\n", fast.c_str(),
              max_diff, 100 * max_diff / max_ref, max_ref);
  // int8 activations (per super-block max / 127) through two layers: stated tolerance 3% of the
  // largest logit (measured: under 1%).
  EXPECT_LE(max_diff, 0.03 * max_ref)
      << fast << ": max |logit - reference| " << max_diff << " with max |logit| " << max_ref;
  // The same sequence inside a batch of two, with one thread: bit-identical logits.
  ThreadPool one(1);
  LoadedModel m1 = load(one);
  testing::ModelHarness h(*m1.model, 2, 64, 16, DType::kF32);
  auto both = h.step({0, 1}, {prompt, {9, 8, 7, 6, 5}}, kernel_ops(fast));
  ASSERT_EQ(both.size(), static_cast<size_t>(2 * kVocab));
  EXPECT_EQ(std::memcmp(both.data(), got.data(), kVocab * 4), 0) << fast;
}

// --quantization is checked against the checkpoint (a GGUF file is "gguf"), and on an unquantized
// checkpoint fp8 and q8_0 quantize the decoder layers at load (the embedding and the output head
// keep the checkpoint's type, as vLLM leaves them).
TEST_F(QuantizedGguf, QuantizationFlagIsCheckedAgainstTheCheckpoint) {
  ThreadPool pool(2);
  EXPECT_EQ(load(pool, "gguf").model->config().hidden_size, kHidden);
  for (const char* wrong : {"fp8", "awq", "q8_0"}) {
    LoadOptions o;
    o.model = *path_;
    o.pool = &pool;
    o.quantization = wrong;
    auto m = load_model(o);
    ASSERT_FALSE(m.ok()) << wrong;
    EXPECT_NE(m.status().message().find("GGUF file"), std::string::npos) << m.status().message();
  }
  // An unquantized (dummy BF16) Llama.
  char tmpl[] = "/tmp/strata_quant_cfg_XXXXXX";
  const std::string dir = ::mkdtemp(tmpl);
  ASSERT_TRUE(write_file(dir + "/config.json",
                         R"({"architectures": ["LlamaForCausalLM"], "model_type": "llama",
                             "hidden_size": 256, "intermediate_size": 512,
                             "num_hidden_layers": 2, "num_attention_heads": 4,
                             "num_key_value_heads": 2, "vocab_size": 320,
                             "max_position_embeddings": 512, "torch_dtype": "bfloat16"})")
                  .ok());
  auto load_dummy = [&](const std::string& q) {
    LoadOptions o;
    o.model = dir;
    o.load_format = "dummy";
    o.pool = &pool;
    o.quantization = q;
    return load_model(o);
  };
  for (const auto& [q, want] : std::vector<std::pair<std::string, std::string>>{
           {"fp8", "f8_e4m3"}, {"q8_0", "q8_0"}, {"", "bf16"}}) {
    auto m = load_dummy(q);
    ASSERT_TRUE(m.ok()) << q << ": " << m.status().to_string();
    for (const LinearInfo& l : m->model->linear_layers())
      EXPECT_EQ(dtype_name(l.dtype), l.name == "lm_head" ? "bf16" : want) << q << " " << l.name;
    // The model runs: greedy tokens are in the vocabulary.
    for (int32_t id :
         testing::greedy(*m->model, {1, 2, 3}, 4, kernel_ops(default_kernel_variant())))
      EXPECT_LT(id, 320);
  }
  auto awq = load_dummy("awq");
  ASSERT_FALSE(awq.ok());
  EXPECT_NE(awq.status().message().find("needs a checkpoint quantized with awq"), std::string::npos)
      << awq.status().message();
  auto bad = load_dummy("int3");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("not a method Strata knows"), std::string::npos);
}

// FP8 checkpoints without block scales (AutoFP8 / llm-compressor "fp8": one `weight_scale` per
// tensor, or per output channel) load as FP8 and compute with exactly e4m3 * scale: their logits
// equal those of an F32 twin holding the dequantized values.
TEST(Fp8PerTensor, CheckpointMatchesItsDequantizedTwin) {
  ThreadPool pool(2);
  const int64_t H = 64, F = 128, V = 96, NH = 4, NKV = 2, hd = H / NH;
  Rng rng(5);
  std::vector<io::TensorToWrite> fp8, f32;
  auto bytes = [](const void* p, size_t n) { return std::string(static_cast<const char*>(p), n); };
  auto plain = [&](const std::string& name, std::vector<int64_t> shape, float scale, bool ones) {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    std::vector<float> v(n);
    for (auto& x : v) x = ones ? 1.0f : static_cast<float>(rng.normal()) * scale;
    fp8.push_back({name, DType::kF32, shape, bytes(v.data(), v.size() * 4)});
    f32.push_back(fp8.back());
  };
  int count = 0;
  auto quantized = [&](const std::string& name, int64_t n, int64_t k) {
    const bool per_channel = (count++ % 2) == 1;
    std::vector<float> w(n * k), scales(per_channel ? n : 1), deq(n * k);
    for (auto& x : w) x = static_cast<float>(rng.normal()) * 0.08f;
    for (int64_t r = 0; r < n; ++r) {
      float amax = 0;
      for (int64_t c = 0; c < k; ++c)
        amax =
            std::max(amax, std::fabs(w[(per_channel ? r : 0) * k + c + (per_channel ? 0 : r * k)]));
      if (per_channel) scales[r] = amax / 448.0f;
    }
    if (!per_channel) {
      float amax = 0;
      for (float x : w) amax = std::max(amax, std::fabs(x));
      scales[0] = amax / 448.0f;
    }
    std::vector<uint8_t> q(n * k);
    for (int64_t r = 0; r < n; ++r)
      for (int64_t c = 0; c < k; ++c) {
        const float sc = scales[per_channel ? r : 0];
        q[r * k + c] = f32_to_fp8_e4m3(w[r * k + c] / sc);
        deq[r * k + c] = fp8_e4m3_to_f32(q[r * k + c]) * sc;
      }
    fp8.push_back({name, DType::kF8E4M3, {n, k}, bytes(q.data(), q.size())});
    if (per_channel)
      fp8.push_back({name + "_scale", DType::kF32, {n, 1}, bytes(scales.data(), n * 4)});
    else
      fp8.push_back({name + "_scale", DType::kF32, {}, bytes(scales.data(), 4)});
    f32.push_back({name, DType::kF32, {n, k}, bytes(deq.data(), deq.size() * 4)});
  };
  plain("model.embed_tokens.weight", {V, H}, 0.5f, false);
  const std::string p = "model.layers.0.";
  plain(p + "input_layernorm.weight", {H}, 0, true);
  plain(p + "post_attention_layernorm.weight", {H}, 0, true);
  quantized(p + "self_attn.q_proj.weight", NH * hd, H);
  quantized(p + "self_attn.k_proj.weight", NKV * hd, H);
  quantized(p + "self_attn.v_proj.weight", NKV * hd, H);
  quantized(p + "self_attn.o_proj.weight", H, NH * hd);
  quantized(p + "mlp.gate_proj.weight", F, H);
  quantized(p + "mlp.up_proj.weight", F, H);
  quantized(p + "mlp.down_proj.weight", H, F);
  plain("model.norm.weight", {H}, 0, true);
  plain("lm_head.weight", {V, H}, 0.2f, false);
  const std::string cfg = R"({"architectures": ["LlamaForCausalLM"], "model_type": "llama",
      "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 1,
      "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 96,
      "max_position_embeddings": 128, "torch_dtype": "float32")";
  char t1[] = "/tmp/strata_fp8pt_XXXXXX", t2[] = "/tmp/strata_fp8pt_XXXXXX";
  const std::string d8 = ::mkdtemp(t1), d32 = ::mkdtemp(t2);
  ASSERT_TRUE(write_file(d8 + "/config.json", cfg + R"(, "quantization_config":
      {"quant_method": "fp8", "activation_scheme": "dynamic"}})")
                  .ok());
  ASSERT_TRUE(write_file(d32 + "/config.json", cfg + "}").ok());
  ASSERT_TRUE(io::write_safetensors(d8 + "/model.safetensors", fp8).ok());
  ASSERT_TRUE(io::write_safetensors(d32 + "/model.safetensors", f32).ok());
  auto load = [&](const std::string& dir) {
    LoadOptions o;
    o.model = dir;
    o.dtype = "float32";
    o.pool = &pool;
    o.limits = {64, 64, 4};
    return load_model(o);
  };
  auto a = load(d8), b = load(d32);
  ASSERT_TRUE(a.ok()) << a.status().to_string();
  ASSERT_TRUE(b.ok()) << b.status().to_string();
  EXPECT_EQ(a->model->weight_dtype(), DType::kF8E4M3);
  for (const std::string& v : {std::string("reference"), default_kernel_variant()}) {
    testing::ModelHarness ha(*a->model, 1, 64, 16, DType::kF32),
        hb(*b->model, 1, 64, 16, DType::kF32);
    auto la = ha.step1(0, {3, 17, 40, 5, 88}, kernel_ops(v));
    auto lb = hb.step1(0, {3, 17, 40, 5, 88}, kernel_ops(v));
    double scale = 0;
    for (float x : lb) scale = std::max(scale, std::fabs(static_cast<double>(x)));
    ASSERT_GT(scale, 1e-3);
    for (int64_t i = 0; i < V; ++i) ASSERT_NEAR(la[i], lb[i], 1e-5 * scale) << v << " logit " << i;
  }
  // The same tensors as a compressed-tensors "float-quantized" checkpoint (llm-compressor's FP8
  // schemes store `weight` and `weight_scale` alike): the same logits.
  ASSERT_TRUE(write_file(d8 + "/config.json", cfg + R"(, "quantization_config":
      {"quant_method": "compressed-tensors", "format": "float-quantized",
       "config_groups": {"group_0": {"targets": ["Linear"], "weights": {"num_bits": 8,
       "type": "float", "strategy": "channel", "symmetric": true, "dynamic": false},
       "input_activations": {"num_bits": 8, "type": "float", "strategy": "token",
       "dynamic": true}}}, "ignore": ["lm_head"]}})")
                  .ok());
  {
    auto ct = load(d8);
    ASSERT_TRUE(ct.ok()) << ct.status().to_string();
    testing::ModelHarness hc(*ct->model, 1, 64, 16, DType::kF32),
        hb(*b->model, 1, 64, 16, DType::kF32);
    const std::string v = default_kernel_variant();
    auto lc = hc.step1(0, {3, 17, 40, 5, 88}, kernel_ops(v));
    auto lb = hb.step1(0, {3, 17, 40, 5, 88}, kernel_ops(v));
    for (int64_t i = 0; i < V; ++i) ASSERT_NEAR(lc[i], lb[i], 1e-4 * (1 + std::fabs(lb[i])));
    LoadOptions o;
    o.model = d8;
    o.pool = &pool;
    o.quantization = "compressed-tensors";
    EXPECT_TRUE(load_model(o).ok());
    o.quantization = "fp8";
    EXPECT_FALSE(load_model(o).ok());
  }
  // A tensor without its scale is a clear error.
  std::vector<io::TensorToWrite> missing;
  for (const auto& t : fp8)
    if (t.name != p + "mlp.up_proj.weight_scale") missing.push_back(t);
  ASSERT_TRUE(io::write_safetensors(d8 + "/model.safetensors", missing).ok());
  auto c = load(d8);
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("up_proj.weight_scale"), std::string::npos)
      << c.status().message();
}

}  // namespace
}  // namespace strata
