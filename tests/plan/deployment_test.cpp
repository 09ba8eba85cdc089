// The plan's memory for one local device is the engine's own (same figures, same function): for
// every tiny architecture and the repo's models, the weights, activation workspace, KV bytes per
// token and KV blocks `strata plan` reports equal the memory plan of an engine started with the
// same flags. Parallel plans divide the classes as documented.
#include "plan/deployment.h"

#include <gtest/gtest.h>

#include "core/comm.h"
#include "core/thread_pool.h"
#include "engine/engine.h"
#include "engine/engine_test_util.h"
#include "engine/executor.h"
#include "model/int_quant_writer.h"
#include "model/parallel.h"
#include "model/tiny_models.h"

namespace strata {
namespace {

plan::Deployment local(engine::EngineConfig c) {
  plan::Deployment d;
  auto mc = load_model_config(c.model);
  EXPECT_TRUE(mc.ok()) << mc.status().to_string();
  d.model = *mc;
  EXPECT_TRUE(engine::resolve_engine_config(d.model, &c).ok());
  d.engine = c;
  auto hw = plan::load_hardware("cpu-xeon-avx512-2core");
  EXPECT_TRUE(hw.ok());
  d.hardware = *hw;
  d.device_memory_bytes = engine::available_memory_bytes();
  d.threads = c.threads;
  return d;
}

void expect_engine_figures(const engine::EngineConfig& c, const std::string& name) {
  SCOPED_TRACE(name);
  auto e = engine::Engine::create(c);
  ASSERT_TRUE(e.ok()) << e.status().to_string();
  const engine::MemoryPlan& want = (*e)->memory_plan();
  auto m = plan::plan_device_memory(local(c));
  ASSERT_TRUE(m.ok()) << m.status().to_string();
  ASSERT_TRUE(m->plan.ok()) << m->plan.status().to_string();
  EXPECT_EQ(m->plan->weight_bytes, want.weight_bytes);
  EXPECT_EQ(m->plan->workspace_bytes, want.workspace_bytes);
  EXPECT_EQ(m->plan->kv_bytes_per_token, want.kv_bytes_per_token);
  EXPECT_EQ(m->plan->num_blocks, want.num_blocks);
  EXPECT_EQ(m->plan->memory_budget, want.memory_budget);
  // And what the worker actually loaded and allocated (the engine plans from the estimate too).
  auto* uniproc = dynamic_cast<engine::UniprocExecutor*>(&(*e)->executor());
  ASSERT_NE(uniproc, nullptr);
  engine::Worker& w = uniproc->worker();
  int64_t weights = w.model().weight_bytes_total();
  int64_t workspace = w.model().workspace_bytes() +
                      engine::logits_workspace_bytes(w.model().config().vocab_size,
                                                     (*e)->config().model.limits.max_logit_rows);
  if (w.draft() != nullptr) {
    weights += w.draft()->model().weight_bytes_total();
    workspace += w.draft()->workspace_bytes();
  }
  if (w.mtp() != nullptr) {
    weights += w.mtp()->model().weight_bytes_total();
    workspace += w.mtp()->workspace_bytes();
  }
  EXPECT_EQ(m->plan->weight_bytes, weights);
  EXPECT_EQ(m->plan->workspace_bytes, workspace);
}

TEST(PlanMemory, OneLocalDeviceIsTheEnginesOwnPlan) {
  for (const auto& a : testing::tiny_archs()) {
    for (const char* dtype : {"auto", "float32"}) {
      auto c = testing::engine_config(testing::write_tiny_config(a.config_json), "dummy", 0);
      c.model.dtype = dtype;
      c.scheduler.max_model_len = 256;
      c.scheduler.max_num_batched_tokens = 512;
      c.cache.gpu_memory_utilization = 0.05;  // a budget, not --kv-cache-memory
      c.commit_kv_cache = false;
      expect_engine_figures(c, std::string(a.name) + " " + dtype);
    }
  }
  auto c = testing::engine_config(testing::repo_path("models/llama-134m"), "dummy", 64 << 20);
  c.scheduler.max_model_len = 512;
  c.scheduler.max_num_seqs = 32;
  expect_engine_figures(c, "llama-134m, --kv-cache-memory 64 MiB");
  c.model.quantization = "q8_0";
  expect_engine_figures(c, "llama-134m, --quantization q8_0");
  c.cache.kv_cache_dtype = DType::kF8E4M3;
  expect_engine_figures(c, "llama-134m, --kv-cache-dtype fp8");
  c.model.quantization.clear();
  c.cache.kv_cache_dtype.reset();
  c.scheduler.speculative = {.method = "draft_model", .num_speculative_tokens = 3};
  c.scheduler.speculative.draft_model = c.model.model;
  c.scheduler.speculative.draft_hf_overrides = R"({"num_hidden_layers": 4})";
  expect_engine_figures(c, "llama-134m with a 4-layer draft model");
  for (const auto& a : testing::tiny_archs())
    if (std::string(a.name) == "deepseek_v3_fp8") {
      std::string j = a.config_json;
      j.insert(j.find('{') + 1, R"("num_nextn_predict_layers":1,)");
      auto d = testing::engine_config(testing::write_tiny_config(j), "dummy", 4 << 20);
      d.scheduler.max_model_len = 256;
      d.scheduler.speculative = {.method = "deepseek_mtp", .num_speculative_tokens = 2};
      expect_engine_figures(d, "DeepSeek-V3 (scaled) with its MTP layer");
      d.cache.kv_cache_dtype = DType::kF8E4M3;
      d.cache.kv_fp8_ds_mla = true;
      expect_engine_figures(d, "DeepSeek-V3 (scaled) with its MTP layer, fp8_ds_mla");
    }
}

// --kv-cache-dtype fp8_ds_mla (and fp8, its alias for DeepSeek-V3.2): the engine, its worker and
// `strata plan` all count vLLM's published layout, 656 bytes of latent row (fp8 latent, 4 f32
// scales, bf16 rotary key) + 132 bytes of indexer key (fp8 and its scale) per token and layer.
TEST(PlanMemory, Fp8DsMlaCountsThePublishedLayout) {
  for (const auto& a : testing::tiny_archs()) {
    if (std::string(a.name) != "deepseek_v32") continue;
    for (bool named : {true, false}) {
      auto c = testing::engine_config(testing::write_tiny_config(a.config_json), "dummy", 4 << 20);
      c.scheduler.max_model_len = 256;
      c.commit_kv_cache = false;
      c.cache.kv_cache_dtype = DType::kF8E4M3;
      c.cache.kv_fp8_ds_mla = named;
      expect_engine_figures(c, named ? "tiny V3.2 fp8_ds_mla" : "tiny V3.2 fp8");
      auto e = engine::Engine::create(c);
      ASSERT_TRUE(e.ok()) << e.status().to_string();
      auto* uniproc = dynamic_cast<engine::UniprocExecutor*>(&(*e)->executor());
      ASSERT_NE(uniproc, nullptr);
      EXPECT_TRUE(uniproc->worker().info().kv_fp8_ds_mla);
      const KvSpec ks = uniproc->worker().model().kv_spec();
      // Tiny: a 32-value latent (one partial group of 128) + 8 rotary values; a 16-value key.
      EXPECT_EQ((*e)->memory_plan().kv_bytes_per_token,
                ks.num_layers * ((32 + 4 + 2 * 8) + (16 + 4)));
    }
  }
  STRATA_REQUIRE_SHARED("configs/deepseek-v3.2/config.json");
  auto c = testing::engine_config(testing::shared_data_path("configs/deepseek-v3.2"), "dummy", 0);
  for (const char* dtype : {"fp8_ds_mla", "fp8", "bf16"}) {
    SCOPED_TRACE(dtype);
    c.cache.kv_fp8_ds_mla = std::string(dtype) == "fp8_ds_mla";
    c.cache.kv_cache_dtype = std::string(dtype) == "bf16" ? DType::kBF16 : DType::kF8E4M3;
    auto m = plan::plan_device_memory(local(c));
    ASSERT_TRUE(m.ok()) << m.status().to_string();
    if (std::string(dtype) == "bf16") {
      EXPECT_EQ(m->kv_bytes_per_token, 61 * (576 + 128) * 2);
      continue;
    }
    EXPECT_EQ(m->kv_bytes_per_token, 61 * (656 + 132));
    const std::string report = plan::format_memory_report(local(c), *m);
    EXPECT_NE(report.find("fp8_ds_mla: 656 bytes latent + 132 bytes indexer key per layer"),
              std::string::npos)
        << report;
  }
}

// fp8_ds_mla is an MLA layout: asked of another model, the engine refuses, naming the flag.
TEST(PlanMemory, Fp8DsMlaRefusedForNonMlaModels) {
  auto c = testing::engine_config(testing::repo_path("models/llama-134m"), "dummy", 64 << 20);
  c.scheduler.max_model_len = 512;
  c.commit_kv_cache = false;
  c.cache.kv_cache_dtype = DType::kF8E4M3;
  c.cache.kv_fp8_ds_mla = true;
  auto e = engine::Engine::create(c);
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(e.status().message().find("--kv-cache-dtype fp8_ds_mla"), std::string::npos)
      << e.status().message();
  auto m = plan::plan_device_memory(local(c));
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.status().message().find("--kv-cache-dtype fp8_ds_mla"), std::string::npos);
  // Plain fp8 stays plain for it (one f32 scale per row).
  c.cache.kv_fp8_ds_mla = false;
  auto ok = engine::Engine::create(c);
  ASSERT_TRUE(ok.ok()) << ok.status().to_string();
}

// `strata plan` of an AWQ / GPTQ config alone (the folder holds only config.json: dummy weights)
// is the plan of its checkpoint, and both are what engines on them load and allocate.
TEST(PlanMemory, IntQuantConfigAloneIsItsCheckpoint) {
  ThreadPool pool(2);
  Json deepseek;
  for (const auto& a : testing::tiny_archs()) {
    if (std::string(a.name) != "deepseek_v3_fp8") continue;
    deepseek = *parse_json(a.config_json, "c");
    deepseek.erase("quantization_config");
    deepseek["num_attention_heads"] = 4;  // every projection's inputs whole 32-column groups
    deepseek["num_key_value_heads"] = 4;
    deepseek["q_lora_rank"] = 64;
  }
  Json llama = *parse_json(testing::tiny_archs()[0].config_json, "c");
  const std::pair<Json*, const char*> cases[] = {
      {&llama, R"({"quant_method":"gptq","bits":4,"group_size":32,"desc_act":false,"sym":true})"},
      {&deepseek,
       R"({"quant_method":"awq","bits":4,"group_size":32,"zero_point":true,"version":"gemm"})"},
  };
  for (const auto& [config, quant] : cases) {
    Json j = *config;
    j["torch_dtype"] = "float16";
    j["quantization_config"] = *parse_json(quant, "q");
    const std::string what = j["architectures"][0].get<std::string>() + " " + quant;
    auto alone = testing::engine_config(testing::write_tiny_config(j.dump()), "dummy", 4 << 20);
    auto ckpt = alone;
    ckpt.model.model = testing::write_int_quant_checkpoint(j, pool);
    ckpt.model.load_format = "auto";
    for (auto* c : {&alone, &ckpt}) {
      c->scheduler.max_model_len = 256;
      c->scheduler.max_num_batched_tokens = 256;
    }
    expect_engine_figures(alone, what + ", config alone");
    expect_engine_figures(ckpt, what + ", checkpoint");
    auto a = plan::plan_device_memory(local(alone)), b = plan::plan_device_memory(local(ckpt));
    ASSERT_TRUE(a.ok() && b.ok());
    ASSERT_TRUE(a->plan.ok() && b->plan.ok());
    EXPECT_EQ(a->plan->weight_bytes, b->plan->weight_bytes) << what;
    EXPECT_EQ(a->plan->workspace_bytes, b->plan->workspace_bytes) << what;
    EXPECT_EQ(a->plan->num_blocks, b->plan->num_blocks) << what;
    EXPECT_EQ(a->model_weights.by_dtype, b->model_weights.by_dtype) << what;
    EXPECT_GT(b->model_weights.by_dtype[dtype_name(DType::kW4G)], 0) << what;
  }
}

TEST(PlanMemory, TheEnginesRefusalsWithWhatFits) {
  auto c = testing::engine_config(testing::repo_path("models/llama-134m"), "dummy", 0);
  c.scheduler.max_model_len = 2048;
  c.scheduler.max_num_batched_tokens = 1 << 20;  // far more activations than RAM
  auto m = plan::plan_device_memory(local(c));
  ASSERT_TRUE(m.ok()) << m.status().to_string();
  ASSERT_FALSE(m->plan.ok());
  const std::string msg = m->plan.status().message();
  EXPECT_NE(msg.find("--max-num-batched-tokens 1048576 needs"), std::string::npos) << msg;
  EXPECT_NE(msg.find("at most "), std::string::npos) << msg;
  // The engine refuses the same flags with the same message.
  c.commit_kv_cache = false;
  auto e = engine::Engine::create(c);
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.status().message().substr(0, msg.find(';')), msg.substr(0, msg.find(';')));
}

// What tensor-parallel rank 0 of pipeline stage `stage` loads: the engine's model for that place
// (local groups stand in for the ranks; loading exchanges nothing).
struct LoadedRank {
  explicit LoadedRank(int threads) : pool(threads) {}
  std::vector<std::unique_ptr<Comm>> tp, pp;
  ThreadPool pool;  // the plan's threads: attention scratch is per thread
  Result<LoadedModel> model = invalid_argument("not loaded");
};
std::unique_ptr<LoadedRank> load_rank(const plan::Deployment& d, int stage) {
  auto r = std::make_unique<LoadedRank>(d.threads);
  auto ranges = pipeline_layer_ranges(d.model.num_hidden_layers, static_cast<int>(d.parallel.pp),
                                      d.parallel.layer_partition);
  EXPECT_TRUE(ranges.ok()) << ranges.status().to_string();
  LoadOptions o = d.engine.model;
  o.pool = &r->pool;
  ModelParallel& p = o.parallel;
  p.tp_size = static_cast<int>(d.parallel.tp);
  p.pp_size = static_cast<int>(d.parallel.pp);
  p.pp_rank = stage;
  p.first_layer = (*ranges)[stage].begin;
  p.end_layer = (*ranges)[stage].end;
  if (p.tp_size > 1) {
    r->tp = make_local_group(p.tp_size);
    p.tp = r->tp[0].get();
  }
  if (p.pp_size > 1) {
    r->pp = make_local_group(p.pp_size);
    p.pp = r->pp[stage].get();
  }
  r->model = load_model(o);
  return r;
}

// The plan's device is a rank the engine would start: its weights, workspace and KV bytes per
// token are what that rank loads and allocates (mirrors tests/model/tensor_parallel_test.cpp's
// estimate-vs-loaded checks, through `strata plan`).
void expect_loaded_rank(const plan::Deployment& d, const std::string& what) {
  SCOPED_TRACE(what + " TP " + std::to_string(d.parallel.tp) + " x PP " +
               std::to_string(d.parallel.pp));
  auto m = plan::plan_device_memory(d);
  ASSERT_TRUE(m.ok()) << m.status().to_string();
  ASSERT_TRUE(m->plan.ok()) << m->plan.status().to_string();
  EXPECT_EQ(m->communication_bytes, 0) << "counted in the model's workspace";
  auto r = load_rank(d, m->stage);
  ASSERT_TRUE(r->model.ok()) << r->model.status().to_string();
  const Model& model = *r->model->model;
  EXPECT_EQ(m->weights.total(), model.weight_bytes_total());
  EXPECT_EQ(m->plan->weight_bytes, model.weight_bytes_total());
  EXPECT_EQ(m->activation_bytes,
            model.workspace_bytes() +
                engine::logits_workspace_bytes(model.config().vocab_size,
                                               d.engine.model.limits.max_logit_rows));
  EXPECT_EQ(m->kv_bytes_per_token, model.kv_spec().bytes_per_token(m->kv_dtype, m->kv_fp8_ds_mla));
  EXPECT_EQ(m->stage_layers, model.kv_spec().num_layers);
  // Every other stage's rank 0 has at least as many KV tokens: the reported one is the tightest.
  for (int s = 0; s < d.parallel.pp; ++s) {
    if (s == m->stage) continue;
    auto other = load_rank(d, s);
    ASSERT_TRUE(other->model.ok()) << other->model.status().to_string();
    const int64_t other_fixed =
        other->model->model->weight_bytes_total() + other->model->model->workspace_bytes();
    const int64_t other_kv =
        other->model->model->kv_spec().bytes_per_token(m->kv_dtype, m->kv_fp8_ds_mla);
    const int64_t fixed = model.weight_bytes_total() + model.workspace_bytes();
    EXPECT_FALSE(other_fixed > fixed && other_kv >= m->kv_bytes_per_token)
        << "stage " << s << " holds more than the reported stage " << m->stage;
  }
}

TEST(PlanMemory, ParallelPlansAreWhatTheRankLoads) {
  auto c = testing::engine_config(testing::repo_path("models/llama-134m"), "dummy", 0);
  c.scheduler.max_model_len = 2048;
  auto d = local(c);
  auto one = plan::plan_device_memory(d);
  ASSERT_TRUE(one.ok());
  auto hw = plan::load_hardware("h200");
  ASSERT_TRUE(hw.ok());
  d.hardware = *hw;
  d.device_memory_bytes = hw->memory_bytes;
  d.num_devices = 4;
  d.parallel = {.tp = 4, .pp = 1, .ep = 1};
  expect_loaded_rank(d, "llama-134m");
  auto tp4 = plan::plan_device_memory(d);
  ASSERT_TRUE(tp4.ok()) << tp4.status().to_string();
  // Every matmul is split by rows (12 heads, 2048, 768 and 32000 divide by 4); the norms whole.
  EXPECT_EQ(tp4->weights.attention, one->weights.attention / 4);
  EXPECT_EQ(tp4->weights.dense_mlp, one->weights.dense_mlp / 4);
  EXPECT_EQ(tp4->weights.other, one->weights.other);
  EXPECT_EQ(tp4->kv_bytes_per_token, one->kv_bytes_per_token / 4);  // 12 KV heads over 4 ranks
  EXPECT_GT(tp4->activation_bytes, one->activation_bytes) << "the all-gather scratch";
  EXPECT_NE(plan::format_memory_report(d, *tp4).find("all-gather scratch"), std::string::npos);
  d.num_devices = 8;
  d.parallel = {.tp = 4, .pp = 2, .ep = 1};
  expect_loaded_rank(d, "llama-134m");
  auto pp2 = plan::plan_device_memory(d);
  ASSERT_TRUE(pp2.ok());
  EXPECT_EQ(pp2->kv_bytes_per_token, one->kv_bytes_per_token / 8);  // half the layers too
  d.num_devices = 3;
  d.parallel = {.tp = 1, .pp = 3, .ep = 1, .layer_partition = "2,3,7"};
  expect_loaded_rank(d, "llama-134m, STRATA_PP_LAYER_PARTITION 2,3,7");
  auto uneven = plan::plan_device_memory(d);
  ASSERT_TRUE(uneven.ok());
  EXPECT_EQ(uneven->stage, 2);  // 7 layers and the output head
  EXPECT_NE(plan::format_memory_report(d, *uneven).find("pipeline stage 2, layers 7"),
            std::string::npos)
      << plan::format_memory_report(d, *uneven);
  d.parallel = {.tp = 5, .pp = 1, .ep = 1};
  d.num_devices = 5;
  auto bad = plan::plan_device_memory(d);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("must divide the 12 attention heads"), std::string::npos);
}

TEST(PlanMemory, ScaledDeepSeekV3PlansAreWhatTheRankLoads) {
  STRATA_REQUIRE_SHARED("configs/deepseek-v3/config.json");
  auto c = testing::engine_config(testing::shared_data_path("configs/deepseek-v3"), "dummy", 0);
  c.model.hf_overrides =
      R"({"num_hidden_layers": 5, "hidden_size": 256, "intermediate_size": 512,)"
      R"( "moe_intermediate_size": 128, "n_routed_experts": 10, "num_experts_per_tok": 4,)"
      R"( "n_shared_experts": 1, "n_group": 2, "topk_group": 1, "first_k_dense_replace": 1,)"
      R"( "num_attention_heads": 8, "q_lora_rank": 128, "kv_lora_rank": 64, "vocab_size": 2000})";
  c.scheduler.max_model_len = 1024;
  c.scheduler.max_num_batched_tokens = 256;
  auto d = local(c);
  auto one = plan::plan_device_memory(d);
  ASSERT_TRUE(one.ok()) << one.status().to_string();
  auto hw = plan::load_hardware("h200");
  ASSERT_TRUE(hw.ok());
  d.hardware = *hw;
  d.device_memory_bytes = hw->memory_bytes;
  for (const plan::ParallelConfig& p : {plan::ParallelConfig{.tp = 4, .pp = 1, .ep = 1},
                                        plan::ParallelConfig{.tp = 4, .pp = 1, .ep = 4},
                                        plan::ParallelConfig{.tp = 2, .pp = 2, .ep = 1}}) {
    d.parallel = p;
    d.num_devices = p.tp * p.pp;
    expect_loaded_rank(d, "DeepSeek-V3 (scaled)");
  }
  d.parallel = {.tp = 4, .pp = 1, .ep = 1};
  d.num_devices = 4;
  auto tp4 = plan::plan_device_memory(d);
  ASSERT_TRUE(tp4.ok());
  // Whole experts: rank 0 holds ceil(10 / 4) = 3 of the 10; the router and the latent cache are
  // whole on every rank; the shared expert is split by rows.
  EXPECT_EQ(tp4->weights.routed_experts, one->weights.routed_experts / 10 * 3);
  EXPECT_EQ(tp4->weights.router, one->weights.router);
  EXPECT_EQ(tp4->weights.shared_experts, one->weights.shared_experts / 4);
  EXPECT_EQ(tp4->kv_bytes_per_token, one->kv_bytes_per_token);
}

}  // namespace
}  // namespace strata

namespace strata {
namespace {

// DeepSeek-V4's hybrid KV: one process, the plan is the engine's (blocks by block bytes, state
// slots out of the KV memory); the real Pro config on 8 H200s (the field report's deployment) is
// planned by the published layout's block bytes, replicated on every tensor-parallel rank.
TEST(PlanMemory, DeepSeekV4HybridKvIsTheEnginesPlan) {
  STRATA_REQUIRE_SHARED("configs/deepseek-v4-flash/config.json");
  auto c = testing::engine_config(testing::shared_data_path("configs/deepseek-v4-flash"), "dummy",
                                  256 << 20);
  c.model.hf_overrides =
      R"({"num_hidden_layers": 4, "hidden_size": 512, "n_routed_experts": 16,
          "num_attention_heads": 8, "q_lora_rank": 128, "o_groups": 4, "o_lora_rank": 64,
          "moe_intermediate_size": 128, "vocab_size": 1024, "index_n_heads": 4})";
  c.scheduler.max_model_len = 4096;
  c.scheduler.max_num_seqs = 8;
  c.commit_kv_cache = false;
  c.cache.kv_cache_dtype = DType::kF8E4M3;
  expect_engine_figures(c, "scaled V4-Flash, fp8");
  auto e = engine::Engine::create(c);
  ASSERT_TRUE(e.ok()) << e.status().to_string();
  auto m = plan::plan_device_memory(local(c));
  ASSERT_TRUE(m.ok() && m->plan.ok());
  const engine::MemoryPlan& want = (*e)->memory_plan();
  EXPECT_EQ(m->plan->block_bytes, want.block_bytes);
  EXPECT_EQ(m->plan->num_state_slots, want.num_state_slots);
  EXPECT_EQ(m->plan->state_bytes_per_slot, want.state_bytes_per_slot);
  EXPECT_GT(want.num_state_slots, 0);

  STRATA_REQUIRE_SHARED("configs/deepseek-v4-pro/config.json");
  auto pro =
      testing::engine_config(testing::shared_data_path("configs/deepseek-v4-pro"), "dummy", 0);
  pro.cache.kv_cache_dtype = DType::kF8E4M3;
  pro.cache.block_size = 256;
  pro.cache.block_size_given = true;
  pro.scheduler.max_model_len = 800000;
  pro.scheduler.max_num_batched_tokens = 512;
  auto d = local(pro);
  auto hw = plan::load_hardware("h200");
  ASSERT_TRUE(hw.ok());
  d.hardware = *hw;
  d.device_memory_bytes = hw->memory_bytes;
  d.num_devices = 8;
  d.parallel = {.tp = 8, .pp = 1, .ep = 8};
  auto tp8 = plan::plan_device_memory(d);
  ASSERT_TRUE(tp8.ok()) << tp8.status().to_string();
  ASSERT_TRUE(tp8->plan.ok()) << tp8->plan.status().to_string();
  // 30 CSA layers: 64 rows (65 x 576 bytes: data then scales, padded) and 64 keys of 132; 31
  // HCA layers: 2 rows (3 x 576).
  EXPECT_EQ(tp8->plan->block_bytes, 30 * (65 * 576 + 64 * 132) + 31 * 3 * 576);
  EXPECT_GE(tp8->plan->num_tokens(), 800000);
  EXPECT_GT(tp8->plan->num_state_slots, 0);
  const std::string report = plan::format_memory_report(d, *tp8);
  EXPECT_NE(report.find("584 B per window/c4/c128 row"), std::string::npos) << report;
  EXPECT_NE(report.find("per-sequence state"), std::string::npos) << report;
}

}  // namespace
}  // namespace strata
