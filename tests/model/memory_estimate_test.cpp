// model/memory_estimate.h: the weight and workspace bytes estimated from a config and the load
// options equal what load_model() builds, exactly, for every registered architecture and storage
// option (dummy weights of the tiny configs, an FP8 checkpoint, an MTP module, real safetensors
// and GGUF checkpoints, the quantized GGUFs in /work/models when present), the split by class
// matches the model's linear layers, errors are the loader's, and a DeepSeek-V3 671B config is
// estimated without allocating its weights.
#include "model/memory_estimate.h"

#include <gtest/gtest.h>

#include <map>
#include <set>

#include "core/json.h"
#include "int_quant_writer.h"
#include "io/writers.h"
#include "model/deepseek.h"
#include "model_test_util.h"
#include "recording_source.h"
#include "test_util.h"
#include "tiny_models.h"

namespace strata {
namespace {

const testing::TinyArch& arch(const std::string& name) {
  for (const auto& a : testing::tiny_archs())
    if (name == a.name) return a;
  ADD_FAILURE() << "no tiny arch " << name;
  return testing::tiny_archs()[0];
}

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

// Loads the model and checks every estimate against it; returns whether it loaded. When loading
// fails, the estimate must fail with the same error.
bool check_estimate(const LoadOptions& o, const std::string& what) {
  SCOPED_TRACE(what);
  auto est = estimate_model_memory(o, o.pool->size());
  auto loaded = load_model(o);
  if (!loaded.ok()) {
    EXPECT_FALSE(est.ok()) << "the loader refuses: " << loaded.status().to_string();
    if (!est.ok()) EXPECT_EQ(est.status().to_string(), loaded.status().to_string());
    return false;
  }
  EXPECT_TRUE(est.ok()) << est.status().to_string();
  if (!est.ok()) return true;
  const Model& m = *loaded->model;
  const WeightBytesByClass& w = est->weights;
  EXPECT_EQ(w.total(), m.weight_bytes_total());
  EXPECT_EQ(w.weight_dtype, m.weight_dtype());
  EXPECT_EQ(est->workspace_bytes, m.workspace_bytes());
  EXPECT_EQ(est->kv_spec.num_layers, m.kv_spec().num_layers);
  EXPECT_EQ(est->kv_spec.num_kv_heads, m.kv_spec().num_kv_heads);
  EXPECT_EQ(est->kv_spec.head_dim, m.kv_spec().head_dim);
  EXPECT_EQ(est->kv_spec.has_v, m.kv_spec().has_v);
  // The split by dtype and by class against the model's own matmul weights.
  std::map<std::string, int64_t> by_dtype;
  int64_t attention = 0, dense = 0, routed = 0, shared = 0, router = 0, head = 0, mtp = 0;
  for (const LinearInfo& l : m.linear_layers()) {
    by_dtype[dtype_name(l.dtype)] += l.bytes;
    const std::string& n = l.name;
    if (contains(n, ".attn."))
      attention += l.bytes;
    else if (contains(n, ".mlp."))
      dense += l.bytes;
    else if (contains(n, ".moe.experts."))
      routed += l.bytes;
    else if (contains(n, ".moe.shared"))
      shared += l.bytes;
    else if (contains(n, ".moe.router"))
      router += l.bytes;
    else if (n == "lm_head")
      head += l.bytes;
    else if (n == "mtp.eh_proj")
      mtp += l.bytes;
    else
      ADD_FAILURE() << "unclassified linear " << n;
  }
  EXPECT_EQ(w.by_dtype, by_dtype);
  EXPECT_EQ(w.attention, attention);
  EXPECT_EQ(w.dense_mlp, dense);
  EXPECT_EQ(w.routed_experts, routed);
  EXPECT_EQ(w.shared_experts, shared);
  EXPECT_EQ(w.router, router);
  EXPECT_EQ(w.lm_head, head);
  EXPECT_GT(w.embedding, 0);
  // What is left is the embedding, the norms/biases and the MTP input projection.
  EXPECT_GE(w.other, mtp);
  EXPECT_EQ(w.total() - w.embedding - w.other + mtp,
            attention + dense + routed + shared + router + head + mtp);
  // The functions of the header give the same figures.
  auto weights_only = estimate_weight_bytes(o);
  auto ws_only = estimate_workspace_bytes(o, o.pool->size());
  EXPECT_TRUE(weights_only.ok() && ws_only.ok());
  if (weights_only.ok()) EXPECT_EQ(weights_only->total(), w.total());
  if (ws_only.ok()) EXPECT_EQ(*ws_only, est->workspace_bytes);
  return true;
}

LoadOptions tiny_options(const testing::TinyArch& a, ThreadPool& pool) {
  LoadOptions o;
  o.model = testing::write_tiny_config(a.config_json);
  o.load_format = "dummy";
  o.seed = 3;
  o.pool = &pool;
  o.limits = {96, 200, 12};
  return o;
}

TEST(MemoryEstimate, EveryTinyArchitectureDtypeAndQuantization) {
  ThreadPool pool(3);
  std::set<std::string> covered;
  for (const auto& a : testing::tiny_archs()) {
    LoadOptions o = tiny_options(a, pool);
    for (const char* dtype : {"auto", "bfloat16", "float32", "float16"}) {
      for (const char* quant : {"", "fp8", "q8_0"}) {
        o.dtype = dtype;
        o.quantization = quant;
        const bool ok = check_estimate(o, std::string(a.name) + " --dtype " + dtype +
                                              " --quantization " + (*quant ? quant : "(none)"));
        if (ok) covered.insert(parse_json(a.config_json, "c")->at("architectures")[0]);
      }
    }
  }
  // DeepSeek-V4 (hybrid KV, MXFP4 experts): not among the shared tiny archs, which other tests
  // run through the engine's standard KV cache; window + hash, CSA and HCA layers.
  {
    LoadOptions o;
    o.model = testing::write_tiny_config(R"({
      "architectures": ["DeepseekV4ForCausalLM"], "model_type": "deepseek_v4",
      "vocab_size": 100, "hidden_size": 64, "num_hidden_layers": 3, "num_attention_heads": 4,
      "num_key_value_heads": 1, "head_dim": 32, "qk_rope_head_dim": 8, "q_lora_rank": 24,
      "o_lora_rank": 16, "o_groups": 2, "sliding_window": 8, "compress_ratios": [0, 4, 128],
      "index_n_heads": 2, "index_head_dim": 16, "index_topk": 3, "n_routed_experts": 8,
      "num_experts_per_tok": 2, "n_shared_experts": 1, "num_hash_layers": 1,
      "moe_intermediate_size": 32, "expert_dtype": "fp4", "hc_mult": 4,
      "hc_sinkhorn_iters": 20, "max_position_embeddings": 4096})");
    o.load_format = "dummy";
    o.seed = 3;
    o.pool = &pool;
    o.limits = {96, 200, 12};
    for (const char* dtype : {"auto", "bfloat16", "float32", "float16"}) {
      for (const char* quant : {"", "fp8", "q8_0"}) {
        o.dtype = dtype;
        o.quantization = quant;
        if (check_estimate(o, std::string("deepseek_v4 --dtype ") + dtype + " --quantization " +
                                  (*quant ? quant : "(none)")))
          covered.insert("DeepseekV4ForCausalLM");
      }
    }
  }
  // Every architecture the loader registers was built and estimated.
  for (const std::string& name : supported_architectures())
    EXPECT_TRUE(covered.count(name)) << name << " has no tiny config here";
}

TEST(MemoryEstimate, WorkspaceFollowsLimitsAndThreads) {
  for (int threads : {1, 4}) {
    ThreadPool pool(threads);
    for (const char* name :
         {"llama3_untied", "deepseek_v3_fp8", "deepseek_v32", "qwen2_moe_shared_gate"}) {
      LoadOptions o = tiny_options(arch(name), pool);
      o.limits = {300, 700, 40};  // more tokens than MLA's 128-token chunk
      check_estimate(o, std::string(name) + " threads " + std::to_string(threads));
      o.limits = {1, 1, 1};
      check_estimate(o, std::string(name) + " one token");
    }
  }
}

TEST(MemoryEstimate, MtpModule) {
  ThreadPool pool(2);
  Json j = *parse_json(arch("deepseek_v3_fp8").config_json, "c");
  j["num_nextn_predict_layers"] = 1;
  LoadOptions o;
  o.model = testing::write_tiny_config(j.dump());
  o.load_format = "dummy";
  o.pool = &pool;
  o.mtp_module = true;
  ASSERT_TRUE(check_estimate(o, "mtp module"));
  auto w = estimate_weight_bytes(o);
  ASSERT_TRUE(w.ok());
  EXPECT_GT(w->other, 0);  // eh_proj and the enorm/hnorm vectors
  // Without the layer in the config: the loader's error.
  o.model = testing::write_tiny_config(arch("deepseek_v3_fp8").config_json);
  EXPECT_FALSE(check_estimate(o, "no mtp layer"));
}

// A DeepSeek FP8 checkpoint (e4m3 layers with 32 x 32 block scales, the rest F32) written from
// the tensors the model asks for; the values do not matter here, only dtypes and shapes.
TEST(MemoryEstimate, Fp8Checkpoint) {
  ThreadPool pool(2);
  const std::string json = arch("deepseek_v3_fp8").config_json;
  auto cfg = parse_hf_config(*parse_json(json, "config"), nullptr);
  ASSERT_TRUE(cfg.ok());
  auto rec = std::make_unique<testing::RecordingSource>(make_dummy_source(1, DType::kF32, 0.05));
  testing::RecordingSource* recorder = rec.get();
  ModelBuildOptions build;
  build.storage = DType::kF32;
  build.keep_in_place = false;
  build.limits = {8, 8, 1};
  build.pool = &pool;
  auto recorded = create_deepseek_model(*cfg, std::move(rec), build);
  ASSERT_TRUE(recorded.ok()) << recorded.status().to_string();
  std::vector<io::TensorToWrite> tensors;
  int num_fp8 = 0;
  for (const auto& [name, t] : recorder->tensors) {
    const bool linear = t.shape.size() == 2 && name.rfind("model.layers.", 0) == 0 &&
                        !contains(name, "mlp.gate.weight");
    const int64_t numel = t.shape.empty() ? 1 : t.shape[0] * (t.shape.size() > 1 ? t.shape[1] : 1);
    if (!linear) {
      tensors.push_back({name, DType::kF32, t.shape, std::string(numel * 4, '\0')});
      continue;
    }
    const int64_t sn = (t.shape[0] + 31) / 32, sk = (t.shape[1] + 31) / 32;
    tensors.push_back({name, DType::kF8E4M3, t.shape, std::string(numel, '\0')});
    std::vector<float> ones(sn * sk, 1.0f);
    tensors.push_back({name + "_scale_inv",
                       DType::kF32,
                       {sn, sk},
                       std::string(reinterpret_cast<const char*>(ones.data()), ones.size() * 4)});
    ++num_fp8;
  }
  EXPECT_GT(num_fp8, 30);
  LoadOptions o;
  o.model = testing::write_tiny_config(json);
  ASSERT_TRUE(io::write_safetensors(o.model + "/model.safetensors", tensors).ok());
  o.pool = &pool;
  for (const char* dtype : {"auto", "float32", "bfloat16"}) {
    o.dtype = dtype;
    ASSERT_TRUE(check_estimate(o, std::string("fp8 checkpoint --dtype ") + dtype));
  }
  auto w = estimate_weight_bytes(o);
  ASSERT_TRUE(w.ok());
  EXPECT_GT(w->by_dtype[dtype_name(DType::kF8E4M3)], 0);
}

// A config alone of an AWQ / GPTQ checkpoint is estimated (and loaded, with dummy weights) as the
// checkpoint itself: the same integer layers, F32 fallbacks and float layers, byte for byte.
TEST(MemoryEstimate, IntQuantConfigAloneIsItsCheckpoint) {
  ThreadPool pool(2);
  Json llama = *parse_json(arch("llama3_untied").config_json, "c");
  // DeepSeek-V3 with every projection's inputs a whole number of 32-column groups.
  Json deepseek = *parse_json(arch("deepseek_v3_fp8").config_json, "c");
  deepseek.erase("quantization_config");
  deepseek["num_attention_heads"] = 4;
  deepseek["num_key_value_heads"] = 4;
  deepseek["q_lora_rank"] = 64;
  struct Case {
    const char* what;
    Json* config;
    const char* quantization_config;
    DType int_dtype;  // the storage of the quantized layers
  };
  const Case cases[] = {
      {"llama awq g32", &llama,
       R"({"quant_method":"awq","bits":4,"group_size":32,"zero_point":true,"version":"gemm"})",
       DType::kW4G},
      {"llama awq g32, down_proj not converted", &llama,
       R"({"quant_method":"awq","bits":4,"group_size":32,"zero_point":true,"version":"gemm",
           "modules_to_not_convert":["down_proj"]})",
       DType::kW4G},
      {"llama gptq 4-bit g32", &llama,
       R"({"quant_method":"gptq","bits":4,"group_size":32,"desc_act":false,"sym":true})",
       DType::kW4G},
      {"llama gptq 8-bit rows", &llama,
       R"({"quant_method":"gptq","bits":8,"group_size":-1,"desc_act":false,"sym":false})",
       DType::kW8G},
      {"llama gptq 8-bit g32, lm_head quantized", &llama,
       R"({"quant_method":"gptq","bits":8,"group_size":32,"desc_act":false,"sym":true,
           "lm_head":true})",
       DType::kW8G},
      {"llama gptq act-order", &llama,
       R"({"quant_method":"gptq","bits":4,"group_size":32,"desc_act":true,"sym":true})",
       DType::kF32},
      {"deepseek-v3 awq g32", &deepseek,
       R"({"quant_method":"awq","bits":4,"group_size":32,"zero_point":true,"version":"gemm"})",
       DType::kW4G},
      {"deepseek-v3 gptq 4-bit g32", &deepseek,
       R"({"quant_method":"gptq","bits":4,"group_size":32,"desc_act":false,"sym":true})",
       DType::kW4G},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    Json j = *c.config;
    j["torch_dtype"] = "float16";
    j["quantization_config"] = *parse_json(c.quantization_config, "q");
    LoadOptions ckpt;
    ckpt.model = testing::write_int_quant_checkpoint(j, pool);
    ckpt.pool = &pool;
    ckpt.limits = {64, 128, 8};
    LoadOptions alone = ckpt;
    alone.model = testing::write_tiny_config(j.dump());
    alone.load_format = "dummy";
    ASSERT_TRUE(check_estimate(ckpt, std::string(c.what) + ": checkpoint"));
    ASSERT_TRUE(check_estimate(alone, std::string(c.what) + ": config alone"));
    auto a = estimate_model_memory(ckpt, 2), b = estimate_model_memory(alone, 2);
    ASSERT_TRUE(a.ok() && b.ok());
    const WeightBytesByClass &x = a->weights, &y = b->weights;
    EXPECT_EQ(y.by_dtype, x.by_dtype);
    EXPECT_EQ(y.embedding, x.embedding);
    EXPECT_EQ(y.attention, x.attention);
    EXPECT_EQ(y.dense_mlp, x.dense_mlp);
    EXPECT_EQ(y.routed_experts, x.routed_experts);
    EXPECT_EQ(y.shared_experts, x.shared_experts);
    EXPECT_EQ(y.router, x.router);
    EXPECT_EQ(y.lm_head, x.lm_head);
    EXPECT_EQ(y.other, x.other);
    EXPECT_EQ(y.weight_dtype, x.weight_dtype);
    EXPECT_EQ(b->workspace_bytes, a->workspace_bytes);
    // The quantized layers hold the integer layout (or its F32 fallback), the head stays float.
    EXPECT_GT(
        x.by_dtype.count(dtype_name(c.int_dtype)) ? x.by_dtype.at(dtype_name(c.int_dtype)) : 0, 0);
    // down_proj stays float: f16 matmul bytes beyond the head's.
    if (contains(c.what, "not converted"))
      EXPECT_GT(x.by_dtype.at(dtype_name(DType::kF16)), x.lm_head);
    if (contains(c.what, "deepseek")) EXPECT_GT(x.routed_experts, 0);
    if (contains(c.what, "lm_head quantized"))
      EXPECT_EQ(x.lm_head, x.by_dtype.at(dtype_name(DType::kW8G)) - x.attention - x.dense_mlp);
  }
}

TEST(MemoryEstimate, RealCheckpoints) {
  ThreadPool pool(2);
  STRATA_REQUIRE_SHARED("models/stories260K-hf");
  STRATA_REQUIRE_SHARED("models/stories260K.gguf");
  STRATA_REQUIRE_SHARED("models/tinyllama-v0/TinyLLama-v0.Q4_0.gguf");
  for (const char* rel : {"models/stories260K-hf", "models/stories260K.gguf",
                          "models/tinyllama-v0/TinyLLama-v0.Q4_0.gguf"}) {
    for (const char* dtype : {"auto", "float32", "bfloat16"}) {
      LoadOptions o;
      o.model = testing::shared_data_path(rel);
      o.dtype = dtype;
      o.pool = &pool;
      o.limits = {64, 128, 8};
      EXPECT_TRUE(check_estimate(o, std::string(rel) + " --dtype " + dtype));
    }
  }
  // The repository's config-only models, with dummy weights.
  for (const char* rel : {"models/strata-tiny", "models/llama-134m"}) {
    LoadOptions o;
    o.model = testing::repo_path(rel);
    o.load_format = "dummy";
    o.dtype = "bfloat16";
    o.pool = &pool;
    o.limits = {64, 128, 8};
    EXPECT_TRUE(check_estimate(o, rel));
  }
}

// The llama-134m GGUFs of every quantization (outside the repository; skipped when absent): each
// matmul keeps its file type or becomes Q8_0 where fused parts differ, as loading decides.
TEST(MemoryEstimate, QuantizedGgufFiles) {
  const std::string dir = "/work/models";
  std::vector<std::string> found;
  for (const char* f : {"llama-134m-Q4_0.gguf", "llama-134m-Q4_K_M.gguf", "llama-134m-Q5_K_M.gguf",
                        "llama-134m-Q6_K.gguf", "llama-134m-Q8_0.gguf", "llama-134m-bf16.gguf"})
    if (testing::path_exists(dir + "/" + f)) found.push_back(dir + "/" + f);
  if (found.empty()) GTEST_SKIP() << "no llama-134m GGUFs in " << dir;
  ThreadPool pool(2);
  for (const std::string& path : found) {
    LoadOptions o;
    o.model = path;
    o.pool = &pool;
    o.limits = {32, 64, 4};
    EXPECT_TRUE(check_estimate(o, path));
  }
}

TEST(MemoryEstimate, ErrorsAreTheLoaders) {
  ThreadPool pool(1);
  LoadOptions o = tiny_options(arch("llama3_untied"), pool);
  o.dtype = "int3";
  EXPECT_FALSE(check_estimate(o, "bad dtype"));
  o.dtype = "auto";
  o.quantization = "awq";
  EXPECT_FALSE(check_estimate(o, "awq on an unquantized checkpoint"));
  o.quantization = "";
  o.model = "/nonexistent/model";
  EXPECT_FALSE(check_estimate(o, "missing model"));
  Json j = *parse_json(arch("llama3_untied").config_json, "c");
  j["architectures"] = Json::array({"GPT2LMHeadModel"});
  o.model = testing::write_tiny_config(j.dump());
  EXPECT_FALSE(check_estimate(o, "unknown architecture"));
  auto e = estimate_weight_bytes(o);
  ASSERT_FALSE(e.ok());
  EXPECT_TRUE(contains(e.status().message(), "GPT2LMHeadModel")) << e.status().to_string();
  // A checkpoint without the tensors the config needs: the loader's missing-tensor error.
  o.model = testing::write_tiny_config(arch("llama3_untied").config_json);
  o.load_format = "safetensors";
  ASSERT_TRUE(
      io::write_safetensors(o.model + "/model.safetensors",
                            {{"model.norm.weight", DType::kF32, {64}, std::string(64 * 4, '\0')}})
          .ok());
  EXPECT_FALSE(check_estimate(o, "missing tensors"));
}

// DeepSeek-V3 (671B) from its config alone, FP8 as its checkpoint is: nothing is allocated (the
// dummy source only reports dtypes), so this returns at once on a machine with a few GB.
TEST(MemoryEstimate, DeepseekV3FullSizeConfig) {
  STRATA_REQUIRE_SHARED("configs/deepseek-v3/config.json");
  LoadOptions o;
  o.model = testing::shared_data_path("configs/deepseek-v3/config.json");
  o.load_format = "dummy";
  o.limits = {8192, 163840, 256};
  auto e = estimate_model_memory(o, 16);
  ASSERT_TRUE(e.ok()) << e.status().to_string();
  const WeightBytesByClass& w = e->weights;
  // Embedding and output head stay BF16: 129280 x 7168 x 2 bytes each.
  EXPECT_EQ(w.embedding, int64_t{129280} * 7168 * 2);
  EXPECT_EQ(w.lm_head, int64_t{129280} * 7168 * 2);
  // 58 MoE layers of 256 routed experts, each gate_up [4096, 7168] + down [7168, 2048] in FP8:
  // per 16-row panel and 128-column block, 16 f32 scales + 16 x 128 e4m3 bytes (+3.1 %), panels
  // padded to 64 bytes. 58 * 256 * (256 * (56 * 2112) + 448 * (16 * 2112)) bytes.
  const int64_t gate_up = 256 * (56 * 64 + 7168 * 16), down = 448 * (16 * 64 + 2048 * 16);
  EXPECT_EQ(w.routed_experts, int64_t{58} * 256 * (gate_up + down));
  // About 668 billion FP8 parameters in the 61 layers (654 B routed experts, 10.4 B attention,
  // 2.6 B shared experts, 1.2 B dense MLPs; the MTP layer is a separate module) at 1.031 bytes
  // each with the panel layout's per-row block scales: ~689 GB; plus 3.9 GB BF16 (embedding,
  // head and the per-head W_UK/W_UV copies of kv_b: 61 x 128 x 2 x 512 x 128 x 2 bytes) and
  // 0.4 GB of f32 routers: ~695 GB in all (the checkpoint's 128 x 128 block scales take less).
  EXPECT_GT(w.total(), int64_t{685} * 1000 * 1000 * 1000);
  EXPECT_LT(w.total(), int64_t{705} * 1000 * 1000 * 1000);
  EXPECT_GT(w.by_dtype.at(dtype_name(DType::kF8E4M3)), int64_t{680} * 1000 * 1000 * 1000);
  EXPECT_EQ(w.by_dtype.at(dtype_name(DType::kBF16)),
            w.lm_head + int64_t{61} * 128 * 2 * 512 * 128 * 2);  // the embedding is no matmul
  EXPECT_GT(e->workspace_bytes, 0);
  // The MTP layer alone: one MoE layer with its input projection.
  o.mtp_module = true;
  auto mtp = estimate_weight_bytes(o);
  ASSERT_TRUE(mtp.ok()) << mtp.status().to_string();
  EXPECT_EQ(mtp->routed_experts, 256 * (gate_up + down));
  EXPECT_GT(mtp->other, int64_t{7168} * 14336);  // eh_proj [7168, 14336] in FP8
}

// DeepSeek-V4 (model/deepseek_v4.h): the scaled Flash config with dummy weights (MXFP4 experts,
// hybrid KV), at bf16 and f32, and the full-size Pro config estimated without loading.
TEST(MemoryEstimate, DeepseekV4) {
  STRATA_REQUIRE_SHARED("configs/deepseek-v4-flash/config.json");
  ThreadPool pool(2);
  LoadOptions o;
  o.model = testing::shared_data_path("configs/deepseek-v4-flash");
  o.load_format = "dummy";
  o.hf_overrides =
      R"({"num_hidden_layers": 4, "hidden_size": 256, "num_attention_heads": 4,
          "q_lora_rank": 64, "o_lora_rank": 32, "o_groups": 2, "n_routed_experts": 8,
          "moe_intermediate_size": 64, "vocab_size": 512, "index_n_heads": 4})";
  o.seed = 3;
  o.pool = &pool;
  o.limits = {64, 1024, 8};
  EXPECT_TRUE(check_estimate(o, "deepseek-v4-flash scaled, bf16"));
  o.dtype = "float32";
  EXPECT_TRUE(check_estimate(o, "deepseek-v4-flash scaled, f32"));
  auto est = estimate_model_memory(o, 2);
  auto loaded = load_model(o);
  ASSERT_TRUE(est.ok() && loaded.ok());
  const KvSpec a = est->kv_spec, b = loaded->model->kv_spec();
  ASSERT_TRUE(a.hybrid() && b.hybrid());
  EXPECT_EQ(a.block_size_multiple, b.block_size_multiple);
  for (DType d : {DType::kF32, DType::kBF16, DType::kF8E4M3}) {
    for (int64_t l = 0; l < 4; ++l)
      EXPECT_EQ(a.layer_block_bytes(l, 256, d), b.layer_block_bytes(l, 256, d));
    EXPECT_EQ(a.state_bytes_per_slot(d), b.state_bytes_per_slot(d));
  }
  // The full Pro config: estimated, not loaded.
  STRATA_REQUIRE_SHARED("configs/deepseek-v4-pro/config.json");
  LoadOptions pro;
  pro.model = testing::shared_data_path("configs/deepseek-v4-pro");
  pro.load_format = "dummy";
  pro.limits = {8192, 1048576, 256};
  auto e = estimate_model_memory(pro, 16);
  ASSERT_TRUE(e.ok()) << e.status().to_string();
  // Routed experts MXFP4: 4.25 bits per weight; Pro is ~1.6T parameters, nearly all experts.
  EXPECT_GT(e->weights.routed_experts, int64_t{700} * 1000 * 1000 * 1000);
  EXPECT_LT(e->weights.routed_experts, int64_t{900} * 1000 * 1000 * 1000);
}

}  // namespace
}  // namespace strata
