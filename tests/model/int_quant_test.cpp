// AWQ, GPTQ and compressed-tensors checkpoints (model/int_quant.h). int_quant_checkpoints.py
// (beside this file; an independent numpy quantizer and packer written for these tests) writes
// tiny Llama checkpoints quantized the AWQ way, the GPTQ way (4-bit asymmetric, symmetric,
// whole-row groups, 8-bit, gptq_v2 zeros, act-order with a permuted g_idx) and the
// compressed-tensors pack-quantized way (4/8-bit, symmetric and asymmetric with packed zero
// points, group and channel strategies, bf16/f16/f32 scales, actorder, a W4A8 scheme run
// weight-only) plus, for each, the same model unquantized holding the script's own dequantized
// float32 values. The tests require:
//   - every loaded matmul weight to equal the script's dequantized values bit for bit (integer
//     W4G/W8G storage; F32 for act-order);
//   - the model to run: greedy tokens of the fast kernels equal the reference variant's, and the
//     logits are within a stated tolerance of the dequantized model computed in F32;
//   - --quantization to be inferred and checked (awq_marlin / gptq_marlin accepted).
// Runs with $STRATA_PYTHON (default /usr/bin/python3, with numpy); skips, saying so, without.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <array>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <map>

#include "core/file_util.h"
#include "core/json.h"
#include "io/safetensors.h"
#include "io/writers.h"
#include "kernels/backend.h"
#include "model/layers.h"
#include "model/memory_estimate.h"
#include "model_test_util.h"
#include "test_util.h"

namespace strata {
namespace {

struct Case {
  const char* name;
  DType storage;  // what the decoder matmuls are stored as
};
const Case kCases[] = {
    {"awq_g32", DType::kW4G},
    {"awq_g64", DType::kW4G},
    {"gptq_4bit_asym_g32", DType::kW4G},
    {"gptq_4bit_sym_g128", DType::kW4G},
    {"gptq_4bit_sym_rowwise", DType::kW4G},
    {"gptq_8bit_sym_g64", DType::kW8G},
    {"gptq_8bit_asym_g32_v2", DType::kW8G},
    {"gptq_4bit_desc_act_g32", DType::kF32},  // act-order groups: dequantized exactly
    {"ct_w4_sym_g32", DType::kW4G},
    {"ct_w4_asym_g64", DType::kW4G},
    {"ct_w8_sym_channel", DType::kW8G},
    {"ct_w8_asym_g64", DType::kW8G},
    {"ct_w4_sym_g128_a8", DType::kW4G},         // activations stay float
    {"ct_w4_sym_g32_f32_scales", DType::kF32},  // scales f16 cannot hold: dequantized exactly
    {"ct_w4_asym_actorder_g32", DType::kF32},   // actorder groups: dequantized exactly
};
constexpr int64_t kHidden = 128, kFfn = 256, kLayers = 2, kKvDim = 64, kVocab = 160;

std::string python() {
  if (const char* env = std::getenv("STRATA_PYTHON"); env != nullptr && *env) return env;
  return "/usr/bin/python3";
}

// Runs a command; its exit status (-1 if it did not exit) and output.
std::pair<int, std::string> run(const std::string& cmd) {
  std::string out;
  FILE* p = ::popen((cmd + " 2>&1").c_str(), "r");
  if (p == nullptr) return {-1, out};
  std::array<char, 4096> buf;
  size_t n;
  while ((n = std::fread(buf.data(), 1, buf.size(), p)) > 0) out.append(buf.data(), n);
  const int status = ::pclose(p);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

class IntQuantCheckpoint : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto [code, out] = run("'" + python() + "' -c 'import numpy'");
    if (code != 0) {
      skip_ =
          new std::string("'" + python() + "' with numpy is needed (set STRATA_PYTHON): " + out);
      return;
    }
    char tmpl[] = "/tmp/strata_int_quant_XXXXXX";
    dir_ = new std::string(::mkdtemp(tmpl));
    auto [c2, out2] =
        run("'" + python() + "' '" + testing::repo_path("tests/model/int_quant_checkpoints.py") +
            "' " + *dir_);
    ASSERT_EQ(c2, 0) << out2;
  }
  static void TearDownTestSuite() {
    if (dir_ != nullptr) run("rm -rf '" + *dir_ + "'");
    delete dir_;
    delete skip_;
    dir_ = skip_ = nullptr;
  }
  void SetUp() override {
    if (skip_ != nullptr) GTEST_SKIP() << *skip_;
  }
  static std::string path(const std::string& c) { return *dir_ + "/" + c; }
  static LoadedModel load(const std::string& model, ThreadPool& pool, const std::string& q = "",
                          const std::string& dtype = "auto") {
    LoadOptions o;
    o.model = model;
    o.quantization = q;
    o.dtype = dtype;
    o.pool = &pool;
    o.limits = {256, 256, 8};
    auto m = load_model(o);
    EXPECT_TRUE(m.ok()) << model << ": " << m.status().to_string();
    // The memory estimate (model/memory_estimate.h) decides the integer layout or the exact F32
    // fallback as loading does, from the g_idx and scale tensors alone.
    auto est = estimate_model_memory(o, pool.size());
    EXPECT_TRUE(est.ok()) << model << ": " << est.status().to_string();
    if (m.ok() && est.ok()) {
      EXPECT_EQ(est->weights.total(), m->model->weight_bytes_total()) << model;
      EXPECT_EQ(est->workspace_bytes, m->model->workspace_bytes()) << model;
      std::map<std::string, int64_t> by_dtype;
      for (const LinearInfo& l : m->model->linear_layers())
        by_dtype[dtype_name(l.dtype)] += l.bytes;
      EXPECT_EQ(est->weights.by_dtype, by_dtype) << model;
    }
    return std::move(m).value();
  }
  static std::string* dir_;
  static std::string* skip_;
};
std::string* IntQuantCheckpoint::dir_ = nullptr;
std::string* IntQuantCheckpoint::skip_ = nullptr;

TEST_F(IntQuantCheckpoint, LoadedWeightsEqualTheScriptsDequantizedValuesBitForBit) {
  struct Linear {
    std::vector<RowPart> parts;
    int64_t k;
  };
  auto n = [](const char* s) { return TensorName{s, ""}; };
  const std::vector<Linear> linears = {
      {{{n("model.layers.{L}.self_attn.q_proj.weight"), kHidden},
        {n("model.layers.{L}.self_attn.k_proj.weight"), kKvDim},
        {n("model.layers.{L}.self_attn.v_proj.weight"), kKvDim}},
       kHidden},
      {{{n("model.layers.{L}.self_attn.o_proj.weight"), kHidden}}, kHidden},
      {{{n("model.layers.{L}.mlp.gate_proj.weight"), kFfn},
        {n("model.layers.{L}.mlp.up_proj.weight"), kFfn}},
       kHidden},
      {{{n("model.layers.{L}.mlp.down_proj.weight"), kHidden}}, kFfn},
  };
  for (const Case& c : kCases) {
    auto config = read_hf_config(path(c.name), "");
    ASSERT_TRUE(config.ok()) << config.status().to_string();
    ASSERT_TRUE(config->int_quant.has_value()) << c.name;
    auto src = open_safetensors_source(path(c.name));
    ASSERT_TRUE(src.ok()) << src.status().to_string();
    (*src)->set_int_quant(config->int_quant);
    auto dense = io::SafetensorsSet::open_dir(path(std::string(c.name) + ".dequant"));
    ASSERT_TRUE(dense.ok()) << dense.status().to_string();
    int64_t compared = 0;
    for (int64_t l = 0; l < kLayers; ++l) {
      for (const Linear& lin : linears) {
        auto w = load_packed(**src, lin.parts, lin.k, l, std::nullopt);
        ASSERT_TRUE(w.ok()) << c.name << ": " << w.status().to_string();
        EXPECT_EQ(w->dtype(), c.storage) << c.name;
        int64_t row0 = 0;
        for (const RowPart& p : lin.parts) {
          const std::string name = tensor_name(p.name, TensorNaming::kHuggingFace, l);
          auto t = (*dense)->get(name);
          ASSERT_TRUE(t.ok()) << t.status().to_string();
          ASSERT_EQ(t->dtype, DType::kF32);
          const auto* want = reinterpret_cast<const float*>(t->data);
          for (int64_t r = 0; r < p.rows; ++r)
            for (int64_t col = 0; col < lin.k; ++col, ++compared)
              ASSERT_EQ(f32_to_bits(w->at(row0 + r, col)), f32_to_bits(want[r * lin.k + col]))
                  << c.name << " " << name << " row " << r << " col " << col << ": "
                  << w->at(row0 + r, col) << " vs " << want[r * lin.k + col];
          row0 += p.rows;
        }
      }
    }
    EXPECT_EQ(compared,
              kLayers * (kHidden * (kHidden + 2 * kKvDim) + kHidden * kHidden + 3 * kFfn * kHidden))
        << c.name;
  }
}

TEST_F(IntQuantCheckpoint, ModelsRunOnTheIntegerKernels) {
  ThreadPool pool(2);
  const std::vector<int32_t> prompt = {1, 17, 99, 3, 150, 8, 42, 7, 120, 64};
  const std::string fast = default_kernel_variant();
  for (const Case& c : kCases) {
    LoadedModel m = load(path(c.name), pool);
    ASSERT_NE(m.model, nullptr);
    std::map<std::string, std::string> types;
    for (const LinearInfo& l : m.model->linear_layers())
      types[l.name == "lm_head" ? "lm_head" : l.name.substr(l.name.rfind('.') + 1)] =
          dtype_name(l.dtype);
    for (const char* kind : {"qkv", "o", "gate_up", "down"})
      EXPECT_EQ(types[kind], dtype_name(c.storage)) << c.name << " " << kind;
    EXPECT_EQ(types["lm_head"], "f16") << c.name << ": lm_head stays float";

    // Greedy tokens: the fast kernels equal the portable variant, whose matmul is the plain
    // integer reference (quant_weight.h), on the same model. (The reference variant computes
    // with the exact dequantized weights in F32: compared below, within a tolerance.)
    const auto got = testing::greedy(*m.model, prompt, 12, kernel_ops(fast));
    EXPECT_EQ(got, testing::greedy(*m.model, prompt, 12, kernel_ops("portable")))
        << c.name << " (" << fast << ")";

    // Logits against the script's dequantized model run in F32 by the reference kernels: the
    // integer kernels' only error is the int8 rounding of activations (per super-block of up to
    // 128 columns). Stated tolerance: 5% of the largest logit of this random two-layer model
    // (measured 2.2-3.3%; the act-order case, in F32, 1e-4%).
    LoadedModel f32 = load(path(std::string(c.name) + ".dequant"), pool, "", "float32");
    std::vector<float> want, have;
    {
      testing::ModelHarness h(*f32.model, 1, 64, 16, DType::kF32);
      want = h.step1(0, prompt, reference_kernel_ops());
    }
    {
      testing::ModelHarness h(*m.model, 1, 64, 16, DType::kF32);
      have = h.step1(0, prompt, kernel_ops(fast));
    }
    double max_ref = 0, max_diff = 0;
    for (int64_t v = 0; v < kVocab; ++v) {
      max_ref = std::max(max_ref, std::fabs(static_cast<double>(want[v])));
      max_diff = std::max(max_diff, std::fabs(static_cast<double>(have[v]) - want[v]));
    }
    ASSERT_GT(max_ref, 0.1) << c.name << ": logits of a random model should not vanish";
    std::printf("%s (%s): max |logit - f32| = %.3g, %.3g%% of max |logit| %.3g\n", c.name,
                fast.c_str(), max_diff, 100 * max_diff / max_ref, max_ref);
    EXPECT_LE(max_diff, 0.05 * max_ref) << c.name;
  }
}

TEST_F(IntQuantCheckpoint, QuantizationFlagIsInferredAndChecked) {
  ThreadPool pool(2);
  EXPECT_NE(load(path("awq_g32"), pool, "awq").model, nullptr);
  EXPECT_NE(load(path("awq_g32"), pool, "awq_marlin").model, nullptr);
  EXPECT_NE(load(path("gptq_4bit_sym_g128"), pool, "gptq_marlin").model, nullptr);
  EXPECT_NE(load(path("ct_w4_sym_g32"), pool, "compressed-tensors").model, nullptr);
  for (const auto& [model, wrong] :
       std::vector<std::pair<std::string, std::string>>{{"awq_g32", "gptq"},
                                                        {"awq_g32", "fp8"},
                                                        {"gptq_4bit_sym_g128", "awq"},
                                                        {"ct_w4_sym_g32", "gptq"},
                                                        {"awq_g32", "compressed-tensors"}}) {
    LoadOptions o;
    o.model = path(model);
    o.quantization = wrong;
    o.pool = &pool;
    auto m = load_model(o);
    ASSERT_FALSE(m.ok()) << model << " " << wrong;
    EXPECT_NE(m.status().message().find("does not match the checkpoint"), std::string::npos)
        << m.status().message();
  }
}

// compressed-tensors schemes Strata cannot run are refused at load with a message naming what is
// unsupported: FP8 weights, other formats, mixed schemes, strategy tensor, a quantized KV cache.
TEST_F(IntQuantCheckpoint, UnsupportedCompressedTensorsSchemesAreClearErrors) {
  ThreadPool pool(2);
  auto config = read_file(path("ct_w4_sym_g32") + "/config.json");
  ASSERT_TRUE(config.ok());
  const Json base = Json::parse(*config);
  const auto group0 = [](Json& c) -> Json& {
    return c["quantization_config"]["config_groups"]["group_0"];
  };
  struct Variant {
    const char* name;
    std::function<void(Json&)> edit;
    const char* message;
  };
  const std::vector<Variant> variants = {
      // FP8 float-quantized checkpoints load (quantized_gguf_test Fp8PerTensor); other float
      // widths do not.
      {"fp4",
       [&](Json& c) {
         c["quantization_config"]["format"] = "float-quantized";
         group0(c)["weights"]["type"] = "float";
         group0(c)["weights"]["num_bits"] = 4;
       },
       "other than 8-bit (FP8)"},
      {"int_quantized", [](Json& c) { c["quantization_config"]["format"] = "int-quantized"; },
       "format 'int-quantized' is not supported"},
      {"mixed",
       [&](Json& c) {
         Json other = group0(c);
         other["weights"]["num_bits"] = 8;
         c["quantization_config"]["config_groups"]["group_1"] = other;
       },
       "different weight schemes"},
      {"tensor_strategy", [&](Json& c) { group0(c)["weights"]["strategy"] = "tensor"; },
       "strategy 'tensor'"},
      {"kv_cache",
       [](Json& c) {
         c["quantization_config"]["kv_cache_scheme"] = {{"num_bits", 8}};
       },
       "kv_cache_scheme"},
  };
  for (const Variant& v : variants) {
    Json c = base;
    v.edit(c);
    const std::string dir = *dir_ + "/ct_refused_" + v.name;
    ASSERT_EQ(::mkdir(dir.c_str(), 0755), 0) << dir;
    ASSERT_TRUE(write_file(dir + "/config.json", c.dump()).ok());
    ASSERT_EQ(::symlink((path("ct_w4_sym_g32") + "/model.safetensors").c_str(),
                        (dir + "/model.safetensors").c_str()),
              0);
    LoadOptions o;
    o.model = dir;
    o.pool = &pool;
    auto m = load_model(o);
    ASSERT_FALSE(m.ok()) << v.name;
    EXPECT_NE(m.status().message().find(v.message), std::string::npos)
        << v.name << ": " << m.status().message();
  }
}

// A checkpoint missing one of a layer's tensors, or with one of the wrong shape, is refused with
// a message naming the tensor (not a crash).
TEST_F(IntQuantCheckpoint, BrokenLayersAreClearErrors) {
  ThreadPool pool(2);
  auto set = io::SafetensorsSet::open_dir(path("gptq_4bit_asym_g32"));
  ASSERT_TRUE(set.ok());
  auto config = read_file(path("gptq_4bit_asym_g32") + "/config.json");
  ASSERT_TRUE(config.ok());
  const std::string victim = "model.layers.1.mlp.down_proj.qzeros";
  for (bool drop : {true, false}) {
    std::vector<io::TensorToWrite> tensors;
    for (const std::string& name : (*set)->names()) {
      auto t = (*set)->get(name);
      ASSERT_TRUE(t.ok());
      io::TensorToWrite w{name, t->dtype, t->shape,
                          std::string(reinterpret_cast<const char*>(t->data), t->nbytes)};
      if (name == victim) {
        if (drop) continue;
        w.shape = {t->shape[1], t->shape[0]};  // transposed: wrong shape
      }
      tensors.push_back(std::move(w));
    }
    const std::string dir = *dir_ + (drop ? "/broken_missing" : "/broken_shape");
    ASSERT_EQ(::mkdir(dir.c_str(), 0755), 0) << dir;
    ASSERT_TRUE(write_file(dir + "/config.json", *config).ok());
    ASSERT_TRUE(io::write_safetensors(dir + "/model.safetensors", tensors).ok());
    LoadOptions o;
    o.model = dir;
    o.pool = &pool;
    auto m = load_model(o);
    ASSERT_FALSE(m.ok()) << dir;
    EXPECT_NE(m.status().message().find(victim), std::string::npos) << m.status().message();
  }
}

}  // namespace
}  // namespace strata
