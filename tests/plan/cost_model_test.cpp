// The step cost model against figures computed by hand from the configs (the arithmetic is
// written out in each test), for a dense Llama, Mixtral and DeepSeek-V3 (MLA + MoE), with tensor,
// pipeline and expert parallelism on a made-up device whose rates make the times easy to check.
#include "plan/cost_model.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "model/deepseek_v4_ops.h"
#include "model/model_config.h"
#include "test_util.h"

namespace strata::plan {
namespace {

ModelShape shape_of(const std::string& dir) {
  auto config = read_hf_config(dir, "");
  EXPECT_TRUE(config.ok()) << config.status().to_string();
  if (!config.ok()) return {};
  auto shape = model_shape(*config);
  EXPECT_TRUE(shape.ok()) << shape.status().to_string();
  return shape.ok() ? *shape : ModelShape{};
}

// 1 TFLOP/s bf16, 2 TFLOP/s fp8, 100 GB/s, half of each achievable; 1 ms per step.
HardwareSpec toy_device(int64_t devices_per_node = 8) {
  HardwareSpec hw;
  hw.name = "toy";
  hw.memory_bytes = int64_t{1} << 40;
  hw.memory_bandwidth_bytes_per_s = 100e9;
  hw.peak_flops = {{ComputeType::kBF16, 1e12}, {ComputeType::kFP8, 2e12}};
  hw.devices_per_node = devices_per_node;
  hw.intra_node_link = {"fast", 10e9, 1e-6};
  hw.inter_node_link = {"slow", 1e9, 1e-5};
  hw.step_overhead_s = 1e-3;
  hw.efficiency = {.flops = 0.5, .memory_bandwidth = 0.5, .link_bandwidth = 0.5};
  return hw;
}

CostModel make(const ModelShape& m, ParallelConfig p = {}, PrecisionConfig c = {},
               HardwareSpec hw = toy_device()) {
  auto cm = CostModel::create(m, hw, p, c);
  EXPECT_TRUE(cm.ok()) << cm.status().to_string();
  return std::move(cm).value();
}

// llama-134m: H 768, F 2048, 12 layers, 12 heads of 64 (no GQA), vocab 32000.
constexpr double kLlamaAttn = 4.0 * 768 * 768;                  // q, k, v, o: 2,359,296
constexpr double kLlamaMlp = 3.0 * 768 * 2048;                  // 4,718,592
constexpr double kLlamaLayers = 12 * (kLlamaAttn + kLlamaMlp);  // 84,934,656
constexpr double kLlamaLmHead = 32000.0 * 768;                  // 24,576,000
constexpr double kLlamaKvPerToken = 2.0 * 12 * 64 * 2 * 12;     // k and v, bf16, 12 layers: 36,864

TEST(CostModelTest, LlamaDecodeStepIsTwiceTheWeightsPlusAttention) {
  const ModelShape m = shape_of(testing::repo_path("models/llama-134m"));
  EXPECT_EQ(m.attention_sharded_params(), 2359296);
  EXPECT_EQ(m.dense_mlp_params(), 4718592);
  EXPECT_EQ(m.kv_elems_per_token(), 1536);
  const CostModel cm = make(m);
  const std::vector<SequenceWork> batch = {{.num_new_tokens = 1, .context_len = 100}};
  const StepCost c = cm.step_cost(batch);
  EXPECT_EQ(c.num_tokens, 1);
  EXPECT_EQ(c.num_logits_rows, 1);
  EXPECT_DOUBLE_EQ(c.matmul_flops, 2 * (kLlamaLayers + kLlamaLmHead));  // 219,021,312
  // The new token attends to 101 positions: 4 * heads * head_dim FLOPs each, 12 layers.
  EXPECT_DOUBLE_EQ(c.attention_flops, 4.0 * 12 * 64 * 101 * 12);
  EXPECT_DOUBLE_EQ(c.weight_bytes, 2 * (kLlamaLayers + kLlamaLmHead));  // bf16
  EXPECT_DOUBLE_EQ(c.kv_read_bytes, 101 * kLlamaKvPerToken);
  EXPECT_DOUBLE_EQ(c.kv_write_bytes, kLlamaKvPerToken);
  EXPECT_DOUBLE_EQ(c.activation_bytes, 8.0 * 768 * 2 * 12);
  // Memory-bound: 219.2 MB at 50 GB/s = 4.39 ms against 0.45 ms of compute, plus 1 ms.
  const double bytes = 2 * (kLlamaLayers + kLlamaLmHead) + 102 * kLlamaKvPerToken + 8.0 * 768 * 24;
  EXPECT_DOUBLE_EQ(c.memory_s, bytes / 50e9);
  EXPECT_DOUBLE_EQ(c.compute_s,
                   (2 * (kLlamaLayers + kLlamaLmHead) + 4.0 * 12 * 64 * 101 * 12) / 0.5e12);
  EXPECT_DOUBLE_EQ(c.step_time_s, bytes / 50e9 + 1e-3);
  EXPECT_DOUBLE_EQ(cm.step_time(batch), c.step_time_s);
  EXPECT_EQ(c.tp_comm_s + c.ep_comm_s + c.pp_comm_s, 0);
}

TEST(CostModelTest, CalibratedStepModelAddsComputeAndMemoryAndCountsSequences) {
  // The "sum" roofline, a separate attention rate and a per-sequence time (what --calibrate
  // writes): the same work, timed as compute + memory + overheads.
  const ModelShape m = shape_of(testing::repo_path("models/llama-134m"));
  const std::vector<SequenceWork> batch = {{1, 500, true}, {1, 100, true}, {64, 0, false}};
  HardwareSpec hw = toy_device();
  auto base = CostModel::create(m, hw, {}, {});
  ASSERT_TRUE(base.ok());
  const StepCost b = base->step_cost(batch);
  hw.roofline = Roofline::kSum;
  hw.per_sequence_s = 2e-3;
  hw.attention_flops_per_s = 1e11;  // a tenth of bf16's 1e12, half achievable as the rest
  auto cm = CostModel::create(m, hw, {}, {});
  ASSERT_TRUE(cm.ok());
  const StepCost c = cm->step_cost(batch);
  EXPECT_EQ(c.num_logits_rows, 2);
  EXPECT_DOUBLE_EQ(c.overhead_s, 1e-3 + 2 * 2e-3);
  EXPECT_DOUBLE_EQ(c.attention_flops, b.attention_flops);
  EXPECT_NEAR(c.compute_s,
              b.compute_s + b.attention_flops / (1e11 * 0.5) - b.attention_flops / (1e12 * 0.5),
              1e-12);
  EXPECT_DOUBLE_EQ(c.memory_s, b.memory_s);
  EXPECT_NEAR(c.step_time_s, c.compute_s + c.memory_s + c.overhead_s, 1e-12);
  EXPECT_NEAR(b.step_time_s, std::max(b.compute_s, b.memory_s) + 1e-3, 1e-12);
}

TEST(CostModelTest, DeepSeekV32ReadsItsTopKRowsAndScoresEveryKey) {
  STRATA_REQUIRE_SHARED("configs/deepseek-v3.2/config.json");
  const ModelShape m = shape_of(testing::shared_data_path("configs/deepseek-v3.2"));
  ASSERT_TRUE(m.has_indexer());
  EXPECT_EQ(m.index_heads, 64);
  EXPECT_EQ(m.index_dim, 128);
  EXPECT_EQ(m.index_topk, 2048);
  EXPECT_EQ(m.kv_elems_per_token(), 512 + 64 + 128);  // latent, rope key, indexer key
  ModelShape v3 = m;                                  // the same model without the indexer
  v3.index_heads = v3.index_dim = v3.index_topk = 0;
  const double L = static_cast<double>(m.num_layers);
  const double mla_pair = 128.0 * (2 * (512 + 64) + 2 * 512);  // heads (scores + values)
  const double index_pair = 2.0 * 64 * (128 + 1);
  // Decode at a 10000-token context: MLA over the 2048 selected rows, the indexer over all 10001.
  const std::vector<SequenceWork> decode = {{1, 10000, true}};
  const StepCost c = make(m).step_cost(decode);
  EXPECT_DOUBLE_EQ(c.attention_flops, L * (2048 * mla_pair + 10001 * index_pair));
  EXPECT_DOUBLE_EQ(c.kv_read_bytes, L * (2048 * 576 + 10001 * 128) * 2);  // bf16
  EXPECT_DOUBLE_EQ(c.kv_write_bytes, L * 704 * 2);
  const StepCost dense = make(v3).step_cost(decode);
  EXPECT_DOUBLE_EQ(dense.attention_flops, L * 10001 * mla_pair);
  // (2048 x 576 + 10001 x 128) / (10001 x 576): the keys are a fifth of a row, read for all.
  EXPECT_NEAR(c.kv_read_bytes / dense.kv_read_bytes, 0.427, 0.001);
  // A chunk crossing the top-k: positions 2047..2050 see 2047, 2048, 2048, 2048 rows.
  const StepCost chunk = make(m).step_cost(std::vector<SequenceWork>{{4, 2046, true}});
  const double all_pairs = 4 * 2046 + 10;
  EXPECT_DOUBLE_EQ(chunk.attention_flops,
                   L * ((2047 + 3 * 2048) * mla_pair + all_pairs * index_pair));
  // Short contexts: every position is selected; only the indexer's scoring is added.
  const std::vector<SequenceWork> short_ctx = {{16, 100, true}};
  EXPECT_DOUBLE_EQ(
      make(m).step_cost(short_ctx).attention_flops,
      make(v3).step_cost(short_ctx).attention_flops + L * (16 * 100 + 16 * 17 / 2) * index_pair);
  // The fp8_ds_mla layout: 656-byte latent rows (fp8 latent, f32 scale per 128, bf16 rope) and
  // 132-byte keys (fp8 and an f32 scale).
  PrecisionConfig ds{.kv_dtype = DType::kF8E4M3, .kv_fp8_ds_mla = true};
  const StepCost packed = make(m, {}, ds).step_cost(decode);
  EXPECT_DOUBLE_EQ(packed.kv_read_bytes, L * (2048 * 656.0 + 10001 * 132.0));
  EXPECT_DOUBLE_EQ(packed.kv_write_bytes, L * (656.0 + 132.0));
  // The indexer's projections: wq_b from the q latent, wk and weights_proj from the hidden state,
  // replicated on every tensor-parallel rank as the engine loads them; so is its scoring.
  EXPECT_EQ(m.attention_sharded_params(), v3.attention_sharded_params());
  EXPECT_EQ(m.attention_replicated_params() - v3.attention_replicated_params(),
            1536 * 64 * 128 + 7168 * (128 + 64));
  const StepCost tp8 = make(m, {.tp = 8}).step_cost(decode);
  EXPECT_DOUBLE_EQ(tp8.attention_flops, L * (2048 * mla_pair / 8 + 10001 * index_pair));
}

TEST(CostModelTest, DeepSeekV4ReadsItsWindowAndCompressedRowsAsTheKvLayoutSays) {
  STRATA_REQUIRE_SHARED("configs/deepseek-v4-pro/config.json");
  const std::string dir = testing::shared_data_path("configs/deepseek-v4-pro");
  const ModelShape m = shape_of(dir);
  ASSERT_TRUE(m.v4);
  EXPECT_EQ(m.num_layers, 61);
  EXPECT_EQ(m.head_dim, 512);
  EXPECT_EQ(m.window, 128);
  EXPECT_TRUE(m.expert_fp4);
  EXPECT_EQ(m.attention_output_width(), 16 * 1024);  // what wo_b gathers: o_groups x o_lora
  int64_t csa = 0, hca = 0, win = 0;
  for (int r : m.compress_ratio) (r == 4 ? csa : r == 128 ? hca : win) += 1;
  EXPECT_EQ(csa + hca + win, 61);
  // fp8 KV: one decode step at a 65535-token context reads exactly what the published layout
  // holds for it (dsv4::kv_bytes at 65536 tokens: 128 window rows per layer, 1024 picked rows and
  // 16384 indexer keys per CSA layer, 512 rows per HCA layer).
  auto config = read_hf_config(dir, "");
  ASSERT_TRUE(config.ok());
  auto v4c = dsv4::parse_deepseek_v4_config(*config->raw);
  ASSERT_TRUE(v4c.ok()) << v4c.status().to_string();
  auto kb = dsv4::kv_bytes(*v4c, 65536);
  ASSERT_TRUE(kb.ok());
  PrecisionConfig fp8{.weight_dtype = DType::kF8E4M3, .kv_dtype = DType::kF8E4M3};
  const std::vector<SequenceWork> decode = {{1, 65535, true}};
  const StepCost c = make(m, {}, fp8).step_cost(decode);
  EXPECT_DOUBLE_EQ(c.kv_read_bytes, static_cast<double>(kb->decode_read));
  EXPECT_DOUBLE_EQ(
      c.kv_read_bytes,
      win * 128 * 584.0 + csa * ((128 + 1024) * 584.0 + 16384 * 132.0) + hca * (128 + 512) * 584.0);
  // Attention: 4 x 128 heads x 512 per (token, row) pair; the indexer 2 x 64 x (128 + 1) per key.
  const double pair = 4.0 * 128 * 512, index_pair = 2.0 * 64 * 129;
  EXPECT_DOUBLE_EQ(c.attention_flops, win * 128 * pair +
                                          csa * ((128 + 1024) * pair + 16384 * index_pair) +
                                          hca * (128 + 512) * pair);
  // A chunk crossing an HCA boundary: positions 254..257 see floor(v / 128) = 1, 2, 2, 2 rows
  // (v = 255..258), and 63, 64, 64, 64 CSA rows (under the top-k) scored and picked.
  const StepCost chunk = make(m, {}, fp8).step_cost(std::vector<SequenceWork>{{4, 254, true}});
  EXPECT_DOUBLE_EQ(chunk.attention_flops,
                   win * 4 * 128 * pair + csa * (4 * 128 * pair + 255 * pair + 255 * index_pair) +
                       hca * (4 * 128 * pair + 7 * pair));
  // DeepSeek-V3 at the same context reads every 656-byte fp8_ds_mla row of every layer.
  STRATA_REQUIRE_SHARED("configs/deepseek-v3/config.json");
  const ModelShape v3 = shape_of(testing::shared_data_path("configs/deepseek-v3"));
  PrecisionConfig ds{
      .weight_dtype = DType::kF8E4M3, .kv_dtype = DType::kF8E4M3, .kv_fp8_ds_mla = true};
  const StepCost full = make(v3, {}, ds).step_cost(decode);
  EXPECT_DOUBLE_EQ(full.kv_read_bytes, 61 * 65536 * 656.0);
  EXPECT_GT(full.kv_read_bytes / c.kv_read_bytes, 5.0);
  // Tensor parallel: the heads split, the indexer (replicated) does not.
  const StepCost tp8 = make(m, {.tp = 8}, fp8).step_cost(decode);
  EXPECT_DOUBLE_EQ(tp8.attention_flops, win * 128 * pair / 8 +
                                            csa * ((128 + 1024) * pair / 8 + 16384 * index_pair) +
                                            hca * (128 + 512) * pair / 8);
}

TEST(CostModelTest, LlamaPrefillIsComputeBoundAndChunksCountTheirContext) {
  const CostModel cm = make(shape_of(testing::repo_path("models/llama-134m")));
  const std::vector<SequenceWork> prefill = {{.num_new_tokens = 512, .context_len = 0}};
  const StepCost c = cm.step_cost(prefill);
  // One logits row: the lm_head runs for the last token only.
  const double mm = 2 * 512 * kLlamaLayers + 2 * kLlamaLmHead;
  const double attn = 4.0 * 12 * 64 * (512.0 * 513 / 2) * 12;  // causal pairs
  EXPECT_DOUBLE_EQ(c.matmul_flops, mm);
  EXPECT_DOUBLE_EQ(c.attention_flops, attn);
  EXPECT_DOUBLE_EQ(c.compute_s, (mm + attn) / 0.5e12);
  EXPECT_GT(c.compute_s, c.memory_s);
  EXPECT_DOUBLE_EQ(c.step_time_s, (mm + attn) / 0.5e12 + 1e-3);
  // The second half of the prompt as a chunk: 256 tokens after 256 cached, no sampling.
  const std::vector<SequenceWork> chunk = {
      {.num_new_tokens = 256, .context_len = 256, .sample = false}};
  const StepCost k = cm.step_cost(chunk);
  EXPECT_EQ(k.num_logits_rows, 0);
  EXPECT_DOUBLE_EQ(k.matmul_flops, 2 * 256 * kLlamaLayers);
  EXPECT_DOUBLE_EQ(k.attention_flops, 4.0 * 12 * 64 * (256.0 * 256 + 256.0 * 257 / 2) * 12);
  EXPECT_DOUBLE_EQ(k.weight_bytes, 2 * kLlamaLayers) << "no lm_head without logits rows";
  EXPECT_DOUBLE_EQ(k.kv_read_bytes, 512 * kLlamaKvPerToken);
  EXPECT_DOUBLE_EQ(k.kv_write_bytes, 256 * kLlamaKvPerToken);
}

TEST(CostModelTest, ABatchReadsTheWeightsOnceAndEachContext) {
  const CostModel cm = make(shape_of(testing::repo_path("models/llama-134m")));
  const std::vector<SequenceWork> batch = {{.num_new_tokens = 1, .context_len = 10},
                                           {.num_new_tokens = 1, .context_len = 30},
                                           {.num_new_tokens = 1, .context_len = 50}};
  const StepCost c = cm.step_cost(batch);
  EXPECT_DOUBLE_EQ(c.weight_bytes, 2 * (kLlamaLayers + kLlamaLmHead));
  EXPECT_DOUBLE_EQ(c.matmul_flops, 3 * 2 * (kLlamaLayers + kLlamaLmHead));
  EXPECT_DOUBLE_EQ(c.kv_read_bytes, (11 + 31 + 51) * kLlamaKvPerToken);
  EXPECT_DOUBLE_EQ(c.attention_flops, 4.0 * 12 * 64 * (11 + 31 + 51) * 12);
  // An empty step costs the overhead alone.
  EXPECT_DOUBLE_EQ(cm.step_cost({}).step_time_s, 1e-3);
}

TEST(CostModelTest, QuantizedWeightsAndFp8KvReadFewerBytes) {
  const ModelShape m = shape_of(testing::repo_path("models/llama-134m"));
  EXPECT_DOUBLE_EQ(bytes_per_element(DType::kBF16), 2);
  EXPECT_DOUBLE_EQ(bytes_per_element(DType::kF8E4M3), 1);
  EXPECT_DOUBLE_EQ(bytes_per_element(DType::kQ8_0), 34.0 / 32);
  EXPECT_DOUBLE_EQ(bytes_per_element(DType::kQ4_K), 144.0 / 256);  // 4.5 bits
  EXPECT_DOUBLE_EQ(bytes_per_element(DType::kW4G, 128), 0.5 + 4.0 / 128);
  const CostModel cm = make(m, {}, {.weight_dtype = DType::kQ4_K, .kv_dtype = DType::kF8E4M3});
  const std::vector<SequenceWork> batch = {{.num_new_tokens = 1, .context_len = 100}};
  const StepCost c = cm.step_cost(batch);
  EXPECT_DOUBLE_EQ(c.weight_bytes, kLlamaLayers * 144.0 / 256 + 2 * kLlamaLmHead);
  EXPECT_DOUBLE_EQ(c.kv_read_bytes, 101 * kLlamaKvPerToken / 2);
  EXPECT_EQ(matmul_compute_type(DType::kQ4_K, DType::kBF16), ComputeType::kBF16);
  EXPECT_EQ(matmul_compute_type(DType::kF8E4M3, DType::kBF16), ComputeType::kFP8);
}

TEST(CostModelTest, TensorParallelSplitsTheWorkAndAllGathersAsTheEngine) {
  const ModelShape m = shape_of(testing::repo_path("models/llama-134m"));
  const CostModel cm = make(m, {.tp = 2});
  const std::vector<SequenceWork> batch = {{.num_new_tokens = 4, .context_len = 0}};
  const StepCost c = cm.step_cost(batch);
  EXPECT_DOUBLE_EQ(c.matmul_flops, (2 * 4 * kLlamaLayers + 2 * kLlamaLmHead) / 2);
  EXPECT_DOUBLE_EQ(c.weight_bytes, 2 * (kLlamaLayers + kLlamaLmHead) / 2);
  EXPECT_DOUBLE_EQ(c.kv_write_bytes, 4 * kLlamaKvPerToken / 2);
  // Ring all-gather of B bytes in all over 2 ranks on the 10 GB/s link at 50%:
  // 1/2 * B / 5e9 + 1 us.
  EXPECT_DOUBLE_EQ(CostModel::all_gather_s(6144, 2, toy_device().intra_node_link, 0.5),
                   3072.0 / 5e9 + 1e-6);
  // The gathers, bf16, 4 tokens: the embedding [2 ranks, 4, 768] (12,288 bytes); per layer the
  // heads' outputs 4 x 768 (6,144), o_proj's rows 4 x 768 (6,144), [gate | up] 4 x 4096
  // (32,768), down's rows 4 x 768 (6,144); the logits 1 x 32000 f32 (128,000). 50 gathers.
  const double bytes = 12288 + 12 * (6144 + 6144 + 32768 + 6144) + 128000;
  EXPECT_NEAR(c.tp_comm_s, 0.5 * bytes / 5e9 + 50 * 1e-6, 1e-15);
  EXPECT_EQ(c.ep_comm_s, 0);
  EXPECT_NEAR(c.step_time_s, std::max(c.compute_s, c.memory_s) + c.tp_comm_s + 1e-3, 1e-15);
  // Beyond one node the group runs at the inter-node link (1 GB/s, 10 us): over 4 ranks the
  // embedding gathers [4, 4, 768], the rest the same rows (768, 2048 and 32000 divide by 4).
  const CostModel wide = make(m, {.tp = 4}, {}, toy_device(/*devices_per_node=*/2));
  const double wide_bytes = 24576 + 12 * (6144 + 6144 + 32768 + 6144) + 128000;
  EXPECT_NEAR(wide.step_cost(batch).tp_comm_s, 0.75 * wide_bytes / 0.5e9 + 50 * 3e-5, 1e-15);
}

TEST(CostModelTest, PipelineStagesRunOneAfterTheOtherWithASendBetween) {
  const ModelShape m = shape_of(testing::repo_path("models/llama-134m"));
  const CostModel one = make(m);
  const CostModel two = make(m, {.pp = 2}, {}, toy_device(/*devices_per_node=*/1));
  EXPECT_EQ(two.stage_layers(0), std::make_pair(int64_t{0}, int64_t{6}));
  EXPECT_EQ(two.stage_layers(1), std::make_pair(int64_t{6}, int64_t{12}));
  // The engine's split (pipeline_layer_ranges): 12 = 2+2+3+3+2, the remainder to the stages
  // before the last, counting back from it.
  const CostModel five = make(m, {.pp = 5});
  EXPECT_EQ(five.stage_layers(0), std::make_pair(int64_t{0}, int64_t{2}));
  EXPECT_EQ(five.stage_layers(2), std::make_pair(int64_t{4}, int64_t{7}));
  EXPECT_EQ(five.stage_layers(3), std::make_pair(int64_t{7}, int64_t{10}));
  EXPECT_EQ(five.stage_layers(4), std::make_pair(int64_t{10}, int64_t{12}));
  // STRATA_PP_LAYER_PARTITION's value, and the engine's refusal of a bad one.
  const CostModel custom = make(m, {.pp = 2, .layer_partition = "5,7"});
  EXPECT_EQ(custom.stage_layers(1), std::make_pair(int64_t{5}, int64_t{12}));
  auto bad = CostModel::create(m, toy_device(), {.pp = 2, .layer_partition = "5,6"}, {});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("STRATA_PP_LAYER_PARTITION"), std::string::npos)
      << bad.status().message();
  const std::vector<SequenceWork> batch = {{.num_new_tokens = 8, .context_len = 0}};
  const StepCost a = one.step_cost(batch), b = two.step_cost(batch);
  // Same total work; the hidden states (8 x 768 x 2 bytes) cross nodes once at 1 GB/s at 50%,
  // then the last stage broadcasts the logits row (32000 f32) to the first: a scatter and a
  // ring all-gather, 2 * (1/2 * 128000 / 0.5e9 + 10 us).
  EXPECT_DOUBLE_EQ(b.matmul_flops, a.matmul_flops);
  EXPECT_DOUBLE_EQ(b.weight_bytes, a.weight_bytes);
  EXPECT_DOUBLE_EQ(CostModel::broadcast_s(128000, 2, toy_device().inter_node_link, 0.5),
                   128000.0 / 0.5e9 + 2e-5);
  EXPECT_NEAR(b.pp_comm_s, 12288.0 / 0.5e9 + 1e-5 + 128000.0 / 0.5e9 + 2e-5, 1e-15);
  // Both stages are memory-bound (a decode-sized batch): stage times add up to the same.
  EXPECT_NEAR(b.step_time_s, a.step_time_s + b.pp_comm_s, 1e-12);
  // Per stage (what overlapping micro-batches run): the stage times, the first with its send,
  // the last with the broadcast, add up to the step without the overhead.
  ASSERT_EQ(b.stage_s.size(), 2u);
  EXPECT_NEAR(b.stage_s[0] + b.stage_s[1] + b.overhead_s, b.step_time_s, 1e-12);
  EXPECT_GT(b.stage_s[1], 128000.0 / 0.5e9);
  ASSERT_EQ(a.stage_s.size(), 1u);
  // Without logits rows there is nothing to broadcast.
  const std::vector<SequenceWork> chunk = {
      {.num_new_tokens = 8, .context_len = 0, .sample = false}};
  EXPECT_NEAR(two.step_cost(chunk).pp_comm_s, 12288.0 / 0.5e9 + 1e-5, 1e-15);
}

// Mixtral-8x7B: H 4096, 32 layers, 32 heads / 8 KV heads of 128, 8 experts of F 14336, top 2.
constexpr double kMixAttn = 4096.0 * (4096 + 2 * 1024) + 4096.0 * 4096;  // 41,943,040
constexpr double kMixExpert = 3.0 * 4096 * 14336;                        // 176,160,768
constexpr double kMixRouter = 8.0 * 4096;
constexpr double kMixLmHead = 32000.0 * 4096;

TEST(CostModelTest, MixtralReadsOnlyTheExpertsTheBatchTouches) {
  STRATA_REQUIRE_SHARED("configs/mixtral-8x7b/config.json");
  const ModelShape m = shape_of(testing::shared_data_path("configs/mixtral-8x7b"));
  EXPECT_EQ(m.num_experts, 8);
  EXPECT_EQ(m.top_k, 2);
  EXPECT_EQ(m.attention_sharded_params(), 41943040);
  EXPECT_EQ(m.expert_params(), 176160768);
  const CostModel cm = make(m);
  const std::vector<SequenceWork> one = {{.num_new_tokens = 1, .context_len = 0}};
  StepCost c = cm.step_cost(one);
  // Per token: attention, the router and 2 experts, in each of 32 layers; plus the lm_head.
  EXPECT_DOUBLE_EQ(c.matmul_flops,
                   2 * 32 * (kMixAttn + kMixRouter + 2 * kMixExpert) + 2 * kMixLmHead);
  // One token touches exactly 2 experts: 8 (1 - (1 - 2/8)^1). The router is f32.
  EXPECT_DOUBLE_EQ(c.weight_bytes,
                   32 * (2 * kMixAttn + 4 * kMixRouter + 2 * 2 * kMixExpert) + 2 * kMixLmHead);
  // 64 tokens touch nearly all 8: 8 (1 - 0.75^64).
  std::vector<SequenceWork> many(64, SequenceWork{.num_new_tokens = 1, .context_len = 10});
  c = cm.step_cost(many);
  const double distinct = 8 * (1 - std::pow(0.75, 64));
  EXPECT_DOUBLE_EQ(expected_distinct_experts(8, 2, 64), distinct);
  EXPECT_DOUBLE_EQ(
      c.weight_bytes,
      32 * (2 * kMixAttn + 4 * kMixRouter + distinct * 2 * kMixExpert) + 2 * kMixLmHead);
  EXPECT_DOUBLE_EQ(c.kv_read_bytes, 64 * 11 * (2.0 * 8 * 128 * 2 * 32));  // GQA: 8 KV heads
}

TEST(CostModelTest, ExpertsAreWholeOnEveryRankWithOrWithoutTheExpertParallelFlag) {
  STRATA_REQUIRE_SHARED("configs/mixtral-8x7b/config.json");
  const ModelShape m = shape_of(testing::shared_data_path("configs/mixtral-8x7b"));
  const CostModel tp_only = make(m, {.tp = 8});
  const CostModel ep = make(m, {.tp = 8, .ep = 8});
  std::vector<SequenceWork> batch(16, SequenceWork{.num_new_tokens = 1, .context_len = 0});
  const StepCost a = tp_only.step_cost(batch), b = ep.step_cost(batch);
  // The engine places whole experts on the ranks either way: the same figures.
  EXPECT_EQ(a.matmul_flops, b.matmul_flops);
  EXPECT_EQ(a.weight_bytes, b.weight_bytes);
  EXPECT_EQ(a.tp_comm_s, b.tp_comm_s);
  EXPECT_EQ(a.step_time_s, b.step_time_s);
  EXPECT_EQ(b.ep_comm_s, 0);
  // Each rank holds one whole expert and runs 1/8 of the 16 x 2 (token, expert) pairs; it reads
  // its expert when a token touches it: 1/8 of the expected distinct 8 (1 - 0.75^16).
  const double distinct = 8 * (1 - std::pow(0.75, 16));
  EXPECT_DOUBLE_EQ(a.matmul_flops, 2 * 16 * 32 * (kMixAttn / 8 + kMixRouter + 2 * kMixExpert / 8) +
                                       2 * 16 * kMixLmHead / 8);
  EXPECT_DOUBLE_EQ(a.weight_bytes,
                   32 * (2 * kMixAttn / 8 + 4 * kMixRouter + distinct / 8 * 2 * kMixExpert) +
                       2 * kMixLmHead / 8);
  // Gathers over 8 ranks (7/8 B / 5e9 + 7 us each), bf16: the embedding [8, 16, 4096]; per layer
  // the heads' outputs and o_proj's rows (16 x 4096 each) and the experts' outputs of the 16 x 2
  // (token, slot) pairs (32 x 4096); the 16 logits rows (16 x 32000 f32). 98 gathers.
  const double bytes = 8.0 * 16 * 4096 * 2 + 32 * (16 + 16 + 32) * 4096.0 * 2 + 16 * 32000.0 * 4;
  EXPECT_NEAR(a.tp_comm_s, 7.0 / 8 * bytes / 5e9 + 98 * 7e-6, 1e-15);
  // 16 ranks for 8 experts: the first 8 hold one each, the others none; the critical path is a
  // rank with one (ceil(8 / 16) of 8). The 8 KV heads are fewer than the ranks: each rank holds
  // one KV head's K and V rows (4096 x 128 each) instead of half of one.
  const StepCost wide = make(m, {.tp = 16}, {}, toy_device(16)).step_cost(batch);
  const double wide_attn = kMixAttn / 16 + 2 * 4096.0 * 128 * (1 - 8.0 / 16);
  EXPECT_DOUBLE_EQ(
      wide.weight_bytes,
      32 * (2 * wide_attn + 4 * kMixRouter + distinct / 8 * 2 * kMixExpert) + 2 * kMixLmHead / 16);
  // Sizes that do not fit are refused with the reason.
  auto bad = CostModel::create(m, toy_device(), {.tp = 3}, {});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("does not divide the model's 32 attention heads"),
            std::string::npos)
      << bad.status().message();
  bad = CostModel::create(m, toy_device(), {.tp = 4, .ep = 2}, {});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("must be 1 or --tensor-parallel-size 4"), std::string::npos)
      << bad.status().message();
  bad = CostModel::create(shape_of(testing::repo_path("models/llama-134m")), toy_device(),
                          {.tp = 2, .ep = 2}, {});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("MoE model"), std::string::npos);
}

TEST(CostModelTest, DeepSeekV3DecodeCostsTwiceItsActiveParameters) {
  STRATA_REQUIRE_SHARED("configs/deepseek-v3/config.json");
  const ModelShape m = shape_of(testing::shared_data_path("configs/deepseek-v3"));
  EXPECT_TRUE(m.mla);
  EXPECT_EQ(m.kv_elems_per_token(), 512 + 64);
  // MLA per layer, absorbed: q_a|kv_a 7168 x (1536 + 512 + 64), q_b 1536 x 128 x 192,
  // W_UK 128 x 128 x 512, W_UV 128 x 512 x 128, o 128 x 128 x 7168.
  EXPECT_EQ(m.attention_replicated_params(), 15138816);
  EXPECT_EQ(m.attention_sharded_params(), 37748736 + 8388608 + 8388608 + 117440512);
  const double attn = 15138816.0 + 37748736 + 8388608 + 8388608 + 117440512;
  const double dense = 3.0 * 7168 * 18432;                                      // first 3 layers
  const double moe = 256.0 * 7168 + 8 * 3.0 * 7168 * 2048 + 3.0 * 7168 * 2048;  // + 1 shared
  const double lm = 129280.0 * 7168;
  const double active = 61 * attn + 3 * dense + 58 * moe + lm;  // 36,624,596,992
  EXPECT_DOUBLE_EQ(active, 36624596992.0);
  const CostModel cm = make(m, {}, {.weight_dtype = DType::kF8E4M3, .kv_dtype = DType::kF8E4M3});
  const std::vector<SequenceWork> batch = {{.num_new_tokens = 1, .context_len = 999}};
  const StepCost c = cm.step_cost(batch);
  EXPECT_DOUBLE_EQ(c.matmul_flops, 2 * active);
  EXPECT_NEAR(c.matmul_flops / 2, 37e9, 0.03 * 37e9) << "DeepSeek-V3: ~37B active parameters";
  // Latent attention over 1000 positions: 128 heads x (2 x 576 + 2 x 512) per pair, 61 layers.
  EXPECT_DOUBLE_EQ(c.attention_flops, 128.0 * (2 * 576 + 2 * 512) * 1000 * 61);
  EXPECT_DOUBLE_EQ(c.kv_read_bytes, 1000.0 * 576 * 61);  // fp8 latent cache
  // FP8 weights run at the fp8 peak (2 TFLOP/s): compute = 2 * active / 1e12 + attention.
  EXPECT_DOUBLE_EQ(c.compute_s, 2 * active / 1e12 + c.attention_flops / 0.5e12);
  // Under TP the latent cache stays whole on every rank while the heads split.
  const CostModel tp8 =
      make(m, {.tp = 8}, {.weight_dtype = DType::kF8E4M3, .kv_dtype = DType::kF8E4M3});
  const StepCost t = tp8.step_cost(batch);
  EXPECT_DOUBLE_EQ(t.kv_read_bytes, c.kv_read_bytes);
  EXPECT_DOUBLE_EQ(t.attention_flops, c.attention_flops / 8);
}

TEST(CostModelTest, ExpectedDistinctExperts) {
  EXPECT_DOUBLE_EQ(expected_distinct_experts(8, 2, 1), 2);
  EXPECT_DOUBLE_EQ(expected_distinct_experts(256, 8, 1), 8);
  EXPECT_DOUBLE_EQ(expected_distinct_experts(8, 2, 0), 0);
  EXPECT_DOUBLE_EQ(expected_distinct_experts(8, 2, 2), 8 * (1 - 0.75 * 0.75));  // 3.5
  EXPECT_NEAR(expected_distinct_experts(256, 8, 4096), 256, 1e-6);
  EXPECT_DOUBLE_EQ(expected_distinct_experts(0, 0, 10), 0);
}

}  // namespace
}  // namespace strata::plan
