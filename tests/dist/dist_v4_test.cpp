// DeepSeek-V4 under exact tensor parallelism (model/deepseek_v4.cpp's Split), with and without
// expert parallelism, over ranks that are threads of this process (core/comm.h's local group):
// the real Flash and Pro configs scaled down with hf_overrides and dummy weights, greedy ids over
// prompts past the 128-token window and a 256-token block, several requests at once with chunked
// prefills beside decodes, then a prefix-cache hit (a state snapshot restored on every rank),
// all identical to one process; each rank's weight bytes about 1/TP of the split classes. And a
// tiny checkpoint in the Hugging Face V4 layout (FP8 + ue8m0 128 x 128 blocks, MXFP4 experts;
// tests/model/deepseek_v4_checkpoint_writer.h) through the loader at TP 2 and TP 2 + EP: the
// same, with the split FP8 matmuls FP8 on every rank and each rank's bytes its estimate.
#include <gtest/gtest.h>

#include <thread>

#include "../engine/engine_test_util.h"
#include "dist/dist_executor.h"
#include "engine/engine.h"
#include "model/deepseek_v4_checkpoint_writer.h"
#include "model/memory_estimate.h"
#include "model/parallel.h"
#include "test_util.h"

namespace strata {
namespace {

using dist::DistExecutor;
using dist::RankReport;

// The layer kinds of the real configs (Flash: window, window, CSA, HCA; Pro: HCA, HCA, CSA, HCA)
// with their hash-routed first layers, window 128, compression ratios 4 and 128; hidden 256,
// 16 experts, 8 heads of 128 values in 4 groups (TP 4 gives each rank one group).
const char* kScale =
    R"({"num_hidden_layers": 4, "hidden_size": 256, "n_routed_experts": 16,
        "num_attention_heads": 8, "head_dim": 128, "q_lora_rank": 128, "o_groups": 4,
        "o_lora_rank": 64, "moe_intermediate_size": 128, "vocab_size": 2048,
        "index_n_heads": 4, "index_head_dim": 64, "index_topk": 16})";

engine::EngineConfig v4_config(const std::string& which) {
  auto c = testing::engine_config(testing::shared_data_path("configs/" + which), "dummy", 64 << 20);
  c.model.hf_overrides = kScale;
  c.scheduler.max_model_len = 1024;
  c.scheduler.max_num_batched_tokens = 96;  // prefills in chunks beside other decodes
  c.scheduler.max_num_seqs = 4;
  c.threads = 1;
  c.seed = 5;
  return c;
}

std::vector<int32_t> prompt(int n, int seed) {
  std::vector<int32_t> p;
  for (int i = 0; i < n; ++i) p.push_back(1 + (seed * 131 + i * 37) % 2000);
  return p;
}

// Three at once: 300 tokens (past the window, two HCA rows, 75 CSA rows, a full 256-token block),
// 140 and 20.
std::vector<engine::EngineRequest> together() {
  std::vector<engine::EngineRequest> out;
  out.push_back(testing::greedy_request("long", prompt(300, 1), 8));
  out.push_back(testing::greedy_request("mid", prompt(140, 2), 6));
  out.push_back(testing::greedy_request("short", prompt(20, 3), 10));
  return out;
}

// Each request's greedy ids and the logprob of each (float values: a difference in the last bit
// of the logits shows).
struct Run {
  std::vector<std::vector<int32_t>> ids;
  std::vector<std::vector<float>> logprobs;
};
Run run(engine::EngineClient& client, std::vector<engine::EngineRequest> requests) {
  for (auto& r : requests) r.params.logprobs = 0;
  Run out;
  for (auto& s : testing::submit_together(client, std::move(requests)))
    for (auto& c : testing::collect(*s)) {
      EXPECT_TRUE(c.error.ok()) << c.error.to_string();
      out.ids.push_back(c.tokens);
      std::vector<float> lp;
      for (const auto& t : c.logprobs) lp.push_back(t.chosen.logprob);
      out.logprobs.push_back(lp);
    }
  EXPECT_TRUE(testing::wait_idle(client));
  return out;
}

// The workload: the three together, then the long prompt again with another continuation (its
// first 256 tokens from the prefix cache, the state restored from a snapshot).
struct Outputs {
  Run together, again;
  engine::EngineStats stats;
};
Outputs workload(engine::EngineClient& client) {
  Outputs o;
  o.together = run(client, together());
  std::vector<int32_t> p = prompt(300, 1);
  p.push_back(7);
  std::vector<engine::EngineRequest> again;
  again.push_back(testing::greedy_request("again", p, 6));
  o.again = run(client, std::move(again));
  o.stats = client.stats();
  return o;
}

RankReport report_of(engine::Worker& w) {
  RankReport r;
  r.num_blocks = w.info().memory.num_blocks;
  r.weight_bytes = w.model().weight_bytes_total();
  r.threads = w.info().threads;
  r.state_slots = static_cast<int32_t>(w.info().memory.num_state_slots);
  r.snapshot_slots = static_cast<int32_t>(w.info().memory.num_snapshot_slots);
  return r;
}

ModelParallel place(int tp, int rank, bool ep, std::vector<std::unique_ptr<Comm>>& group) {
  ModelParallel p;
  p.tp_size = tp;
  p.tp_rank = rank;
  p.expert_parallel = ep;
  p.tp = tp > 1 ? group[rank].get() : nullptr;
  return p;
}

// tp ranks as threads (one stage): rank 0 behind an engine, the others in their worker loops.
class TpRanks {
 public:
  TpRanks(engine::EngineConfig config, int tp, bool ep) {
    world_ = make_local_group(tp);
    group_ = make_local_group(tp);
    linears_.resize(tp);  // each rank writes its own before the report exchange
    for (int w = 1; w < tp; ++w) {
      ranks_.emplace_back([this, config, w, tp, ep] {
        Comm& world = *world_[w];
        auto wc = engine::resolve_worker_config(config);
        if (!wc.ok()) {
          (void)dist::exchange_reports(world, RankReport{});
          return;
        }
        wc->parallel = place(tp, w, ep, group_);
        auto worker = engine::Worker::create(*wc);
        if (!worker.ok()) {
          ADD_FAILURE() << worker.status().to_string();
          (void)dist::exchange_reports(world, RankReport{});
          return;
        }
        linears_[w] = (*worker)->model().linear_layers();
        if (!dist::exchange_reports(world, report_of(**worker)).ok()) return;
        Status s = dist::run_worker_loop(world, **worker);
        EXPECT_TRUE(s.ok()) << "rank " << w << ": " << s.to_string();
      });
    }
    auto engine = engine::Engine::create(
        config,
        [this, tp,
         ep](const engine::WorkerConfig& wc_in) -> Result<std::unique_ptr<engine::Executor>> {
          engine::WorkerConfig wc = wc_in;
          wc.parallel = place(tp, 0, ep, group_);
          STRATA_ASSIGN_OR_RETURN(auto w, engine::Worker::create(wc));
          linears_[0] = w->model().linear_layers();
          STRATA_ASSIGN_OR_RETURN(auto reports, dist::exchange_reports(*world_[0], report_of(*w)));
          reports_ = reports;
          STRATA_ASSIGN_OR_RETURN(
              auto e, DistExecutor::create(world_[0].get(), std::move(w), std::move(reports)));
          return std::unique_ptr<engine::Executor>(std::move(e));
        });
    EXPECT_TRUE(engine.ok()) << engine.status().to_string();
    if (engine.ok()) client_ = engine::EngineClient::start(std::move(engine).value());
  }
  ~TpRanks() {
    client_.reset();
    for (auto& t : ranks_) t.join();
  }

  std::vector<std::unique_ptr<Comm>> world_, group_;
  std::vector<std::vector<LinearInfo>> linears_;  // each rank's model's linear_layers()
  std::vector<std::thread> ranks_;
  std::unique_ptr<engine::EngineClient> client_;
  std::vector<RankReport> reports_;
};

Outputs one_process(const engine::EngineConfig& c) {
  auto client = engine::EngineClient::create(c);
  EXPECT_TRUE(client.ok()) << client.status().to_string();
  return client.ok() ? workload(**client) : Outputs{};
}

void expect_same(const Outputs& one, const Outputs& tp, const std::string& what) {
  ASSERT_EQ(one.together.ids.size(), 3u);
  EXPECT_EQ(one.together.ids[0].size(), 8u);
  EXPECT_EQ(one.together.logprobs[0].size(), 8u);
  EXPECT_EQ(tp.together.ids, one.together.ids) << what;
  EXPECT_EQ(tp.together.logprobs, one.together.logprobs) << what;
  EXPECT_EQ(tp.again.ids, one.again.ids) << what;
  EXPECT_EQ(tp.again.logprobs, one.again.logprobs) << what;
  // The second run of the long prompt hit the prefix cache (on every rank alike).
  EXPECT_GE(one.stats.prefix_cache_hits, 256) << what;
  EXPECT_EQ(tp.stats.prefix_cache_hits, one.stats.prefix_cache_hits) << what;
}

TEST(DistV4, FlashTensorParallelTwoAndFourWithAndWithoutExpertParallelAreOneProcess) {
  STRATA_REQUIRE_SHARED("configs/deepseek-v4-flash/config.json");
  const engine::EngineConfig c = v4_config("deepseek-v4-flash");
  const Outputs one = one_process(c);
  for (auto [tp, ep] : {std::pair{2, false}, std::pair{2, true}, std::pair{4, true}}) {
    const std::string what = "TP " + std::to_string(tp) + (ep ? " + EP" : "");
    SCOPED_TRACE(what);
    TpRanks ranks(c, tp, ep);
    ASSERT_NE(ranks.client_, nullptr);
    expect_same(one, workload(*ranks.client_), what);
    ASSERT_EQ(static_cast<int>(ranks.reports_.size()), tp);
  }
}

TEST(DistV4, ProTensorParallelTwoWithExpertParallelIsOneProcess) {
  STRATA_REQUIRE_SHARED("configs/deepseek-v4-pro/config.json");
  const engine::EngineConfig c = v4_config("deepseek-v4-pro");
  const Outputs one = one_process(c);
  TpRanks ranks(c, 2, true);
  ASSERT_NE(ranks.client_, nullptr);
  expect_same(one, workload(*ranks.client_), "Pro TP 2 + EP");
}

// Each rank's weights by class (the memory estimate, which the loaded model matches: the ranks'
// reports): the split classes about 1/TP of one process's, the replicated ones whole.
TEST(DistV4, EachRankHoldsAboutOneOverTpOfTheSplitWeights) {
  STRATA_REQUIRE_SHARED("configs/deepseek-v4-flash/config.json");
  const engine::EngineConfig c = v4_config("deepseek-v4-flash");
  auto estimate = [&](int tp, int rank) {
    LoadOptions lo = c.model;
    lo.parallel.tp_size = tp;
    lo.parallel.tp_rank = rank;
    auto e = estimate_model_memory(lo, 1);
    EXPECT_TRUE(e.ok()) << e.status().to_string();
    return e.ok() ? e->weights : WeightBytesByClass{};
  };
  const WeightBytesByClass one = estimate(1, 0);
  for (int tp : {2, 4}) {
    SCOPED_TRACE("TP " + std::to_string(tp));
    WeightBytesByClass sum;
    for (int r = 0; r < tp; ++r) {
      const WeightBytesByClass b = estimate(tp, r);
      // Whole experts: exactly 1/TP of 16.
      EXPECT_EQ(b.routed_experts * tp, one.routed_experts);
      EXPECT_NEAR(static_cast<double>(b.embedding) * tp, static_cast<double>(one.embedding),
                  0.01 * one.embedding);
      EXPECT_NEAR(static_cast<double>(b.lm_head) * tp, static_cast<double>(one.lm_head),
                  0.01 * one.lm_head);
      EXPECT_NEAR(static_cast<double>(b.shared_experts) * tp,
                  static_cast<double>(one.shared_experts), 0.1 * one.shared_experts);
      // Attention: wq_b, wo_a and wo_b split; wq_a, wkv, the compressors and indexer replicated.
      EXPECT_LT(b.attention, one.attention);
      EXPECT_EQ(b.router, one.router);
      sum.routed_experts += b.routed_experts;
      sum.embedding += b.embedding;
      sum.lm_head += b.lm_head;
      sum.shared_experts += b.shared_experts;
      sum.attention += b.attention;
    }
    EXPECT_EQ(sum.routed_experts, one.routed_experts);
    EXPECT_EQ(sum.embedding, one.embedding);
    EXPECT_EQ(sum.lm_head, one.lm_head);  // 2048 rows: whole 16-row panels
    EXPECT_EQ(sum.shared_experts, one.shared_experts);
    EXPECT_GT(sum.attention, one.attention);  // the replicated parts counted tp times
  }
  // The loaded ranks report what the estimate says.
  TpRanks ranks(c, 2, true);
  ASSERT_NE(ranks.client_, nullptr);
  ASSERT_EQ(ranks.reports_.size(), 2u);
  for (int r = 0; r < 2; ++r)
    EXPECT_EQ(ranks.reports_[r].weight_bytes, estimate(2, r).total()) << "rank " << r;
  // At most the whole model less half of the classes split by 1/2 (attention drops as well; the
  // replicated hyper-connection weights and hash tables are large at this scale).
  const int64_t halved = one.routed_experts + one.shared_experts + one.embedding + one.lm_head;
  for (int r = 0; r < 2; ++r)
    EXPECT_LE(ranks.reports_[r].weight_bytes, one.total() - halved / 2 + halved / 50)
        << "rank " << r;
}

// The scaled Flash config (kScale, vocab 2080) as a checkpoint in the Hugging Face V4 layout,
// written from dsv4::random_model_weights: its quantization_config keeps 128 x 128 ue8m0 blocks,
// so at TP 2 rank 1's rows of the FP8 shared-expert w1 / w3 (128 rows, split at 64) start in the
// middle of a block, as do its vocab rows of the BF16 embedding and head (1040 = 8 x 128 + 16:
// 2080 rows in 16-row panels).
std::string flash_checkpoint() {
  auto j = read_json_file(testing::shared_data_path("configs/deepseek-v4-flash/config.json"));
  EXPECT_TRUE(j.ok()) << j.status().to_string();
  if (!j.ok()) return "";
  Json cfg = *j;
  const Json over = Json::parse(kScale);
  for (auto it = over.begin(); it != over.end(); ++it) cfg[it.key()] = it.value();
  cfg["vocab_size"] = 2080;
  auto c = dsv4::parse_deepseek_v4_config(cfg, nullptr);
  EXPECT_TRUE(c.ok()) << c.status().to_string();
  if (!c.ok()) return "";
  EXPECT_TRUE(c->fp8_weights);
  EXPECT_EQ(c->weight_block_n, 128);
  EXPECT_EQ(c->moe_intermediate_size * c->n_shared_experts, 128);
  const dsv4::ModelWeights w = dsv4::random_model_weights(*c, 13);
  return v4ckpt::write_checkpoint(v4ckpt::checkpoint(*c, w), "dist", cfg.dump());
}

TEST(DistV4, CheckpointUnderTensorParallelTwoWithAndWithoutExpertParallelIsOneProcess) {
  STRATA_REQUIRE_SHARED("configs/deepseek-v4-flash/config.json");
  const std::string dir = flash_checkpoint();
  ASSERT_FALSE(dir.empty());
  engine::EngineConfig c = v4_config("deepseek-v4-flash");
  c.model.model = dir;
  c.model.load_format = "auto";
  c.model.hf_overrides.clear();  // the checkpoint's config.json is the scaled one
  const Outputs one = one_process(c);
  for (bool ep : {false, true}) {
    const std::string what = std::string("checkpoint TP 2") + (ep ? " + EP" : "");
    SCOPED_TRACE(what);
    TpRanks ranks(c, 2, ep);
    ASSERT_NE(ranks.client_, nullptr);
    expect_same(one, workload(*ranks.client_), what);
    ASSERT_EQ(ranks.reports_.size(), 2u);
    for (int r = 0; r < 2; ++r) {
      SCOPED_TRACE("rank " + std::to_string(r));
      // The loaded rank's bytes are its estimate (FP8 at 1 byte + scales, its rows only).
      LoadOptions lo = c.model;
      lo.parallel.tp_size = 2;
      lo.parallel.tp_rank = r;
      lo.parallel.expert_parallel = ep;
      auto e = estimate_model_memory(lo, 1);
      ASSERT_TRUE(e.ok()) << e.status().to_string();
      EXPECT_EQ(ranks.reports_[r].weight_bytes, e->weights.total());
      // The split FP8 matmuls stay FP8 on each rank, with its share of the rows.
      std::map<std::string, LinearInfo> li;
      for (const LinearInfo& l : ranks.linears_[r]) li[l.name] = l;
      for (int l = 0; l < 4; ++l) {
        const std::string L = "layers." + std::to_string(l) + ".";
        EXPECT_EQ(li[L + "attn.wq_b"].dtype, DType::kF8E4M3) << L;
        EXPECT_EQ(li[L + "attn.wq_b"].rows, 4 * 128) << L;  // 4 of 8 heads
        EXPECT_EQ(li[L + "attn.wo_b"].dtype, DType::kF8E4M3) << L;
        EXPECT_EQ(li[L + "attn.wo_b"].rows, 128) << L;
        EXPECT_EQ(li[L + "moe.shared.w1_w3"].dtype, DType::kF8E4M3) << L;
        EXPECT_EQ(li[L + "moe.shared.w1_w3"].rows, 2 * 64) << L;  // 64 rows of w1, 64 of w3
        EXPECT_EQ(li[L + "moe.shared.w2"].dtype, DType::kF8E4M3) << L;
        EXPECT_EQ(li[L + "attn.wo_a." + std::to_string(2 * r)].dtype, DType::kF8E4M3) << L;
        EXPECT_EQ(li.count(L + "attn.wo_a." + std::to_string(2 - 2 * r)), 0u) << L;
      }
      EXPECT_EQ(li["lm_head"].dtype, DType::kBF16);
      EXPECT_EQ(li["lm_head"].rows, 1040);
    }
  }
}

TEST(DistV4, PipelineParallelIsRefusedWithAClearError) {
  STRATA_REQUIRE_SHARED("configs/deepseek-v4-flash/config.json");
  LoadOptions lo = v4_config("deepseek-v4-flash").model;
  lo.parallel.pp_size = 2;
  auto e = estimate_model_memory(lo, 1);
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.status().message().find("--pipeline-parallel-size 1"), std::string::npos)
      << e.status().message();
  lo.parallel.pp_size = 1;
  lo.parallel.tp_size = 8;  // more ranks than the 4 o_groups
  e = estimate_model_memory(lo, 1);
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.status().message().find("--tensor-parallel-size 4 or less"), std::string::npos)
      << e.status().message();
}

}  // namespace
}  // namespace strata
