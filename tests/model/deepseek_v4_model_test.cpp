// DeepseekV4ForCausalLM as an engine model (model/deepseek_v4.h), driven directly with
// hand-built ForwardBatches over raw paged KV blocks allocated here, on a tiny config with all
// three layer kinds (0: window-only and hash-routed, 1: CSA ratio 4 + indexer, 2: HCA ratio 128):
//   - logits against the float64 whole-model reference dsv4::model_forward_ref (F32 KV);
//   - greedy ids and logits identical for whole-prompt prefill, 4-token chunks and token by token,
//     and alone vs in a batch of 8 sequences of different lengths;
//   - a state snapshot at a block boundary restored into another slot continues exactly as the
//     uninterrupted sequence;
//   - the FP8 KV cache (published 584-byte layout) stays close to F32 KV;
//   - the KV spec: bytes per block per layer kind, block multiple, state bytes, describe().
#include "model/deepseek_v4.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>

#include "core/json.h"
#include "core/thread_pool.h"
#include "kernels/backend.h"
#include "model/memory_estimate.h"
#include "test_util.h"

namespace strata {
namespace {

using dsv4::DeepseekV4Config;

DeepseekV4Config tiny_config(int64_t head_dim = 32) {
  const Json j = Json::parse(R"({
    "architectures": ["DeepseekV4ForCausalLM"], "vocab_size": 100, "hidden_size": 64,
    "num_hidden_layers": 3, "num_attention_heads": 4, "num_key_value_heads": 1, "head_dim": 32,
    "qk_rope_head_dim": 8, "q_lora_rank": 24, "o_lora_rank": 16, "o_groups": 2,
    "sliding_window": 8, "compress_ratios": [0, 4, 128, 0], "index_n_heads": 2,
    "index_head_dim": 16, "index_topk": 3, "n_routed_experts": 8, "num_experts_per_tok": 2,
    "n_shared_experts": 1, "num_hash_layers": 1, "swiglu_limit": 1.5,
    "routed_scaling_factor": 1.5, "expert_dtype": "fp4",
    "moe_intermediate_size": 32, "compress_rope_theta": 160000, "rope_theta": 10000,
    "rope_scaling": {"type": "yarn", "factor": 4, "beta_fast": 32, "beta_slow": 1,
                     "original_max_position_embeddings": 64},
    "hc_mult": 4, "hc_sinkhorn_iters": 20, "hc_eps": 1e-6, "rms_norm_eps": 1e-6})");
  Json o = Json::object();
  o["head_dim"] = head_dim;
  auto c = dsv4::parse_deepseek_v4_config(j, &o);
  EXPECT_TRUE(c.ok()) << c.status().to_string();
  return *c;
}

std::vector<int32_t> prompt(int64_t n, int64_t salt) {
  std::vector<int32_t> t(n);
  for (int64_t i = 0; i < n; ++i) t[i] = static_cast<int32_t>((i * 37 + salt * 11 + 5) % 100);
  return t;
}

// The raw paged blocks of every layer and the state slots, and a helper that runs steps.
class Harness {
 public:
  static constexpr int64_t kBlockSize = 128;
  static constexpr int64_t kBlocksPerSeq = 4;  // 512 tokens
  static constexpr int kMaxSeqs = 10;

  Harness(Model& m, DType dtype, ThreadPool& pool)
      : m_(m), pool_(pool), ops_(kernel_ops(default_kernel_variant())) {
    const KvSpec spec = m.kv_spec();
    EXPECT_TRUE(spec.hybrid());
    EXPECT_EQ(kBlockSize % spec.block_size_multiple, 0);
    const int64_t blocks = kBlocksPerSeq * (kMaxSeqs + 2);
    for (int64_t l = 0; l < spec.num_layers; ++l) {
      const int64_t bytes = spec.layer_block_bytes(l, kBlockSize, dtype);
      storage_.emplace_back(bytes * blocks, std::byte{0x5a});  // garbage: must be overwritten
      PagedKvLayer k;
      k.dtype = dtype;
      k.block_size = kBlockSize;
      k.num_kv_heads = 1;
      k.head_dim = spec.head_dim;
      k.raw = bytes > 0 ? storage_.back().data() : nullptr;
      k.raw_block_bytes = bytes;
      kv_.push_back(k);
    }
    EXPECT_TRUE(m.allocate_state(kMaxSeqs + 2, dtype, nullptr).ok());
  }

  // Logical block b of sequence `seq` -> a physical block (not the identity).
  static int32_t physical(int seq, int64_t b) {
    return static_cast<int32_t>(seq * kBlocksPerSeq + (kBlocksPerSeq - 1 - b));
  }

  struct Part {
    int seq = 0;  // block-table owner
    int slot = 0;
    std::vector<int32_t> tokens;
    int64_t start = 0;
    std::vector<int32_t> table;  // empty: the seq's own blocks
  };
  // Runs one step; returns the logits of each part's last token (or of every token with
  // `all_rows`, part after part).
  std::vector<float> step(const std::vector<Part>& parts, bool all_rows = false,
                          std::vector<ForwardBatch::StateCopy> restores = {},
                          std::vector<ForwardBatch::StateSnapshot> snaps = {}) {
    std::vector<int32_t> ids, pos, qs{0}, lens, tables, rows, slots;
    std::vector<int64_t> slot_map;
    for (const Part& p : parts) {
      for (size_t i = 0; i < p.tokens.size(); ++i) {
        if (all_rows || i + 1 == p.tokens.size()) rows.push_back(static_cast<int32_t>(ids.size()));
        ids.push_back(p.tokens[i]);
        pos.push_back(static_cast<int32_t>(p.start + i));
        slot_map.push_back(-1);
      }
      qs.push_back(static_cast<int32_t>(ids.size()));
      lens.push_back(static_cast<int32_t>(p.start + p.tokens.size()));
      for (int64_t b = 0; b < kBlocksPerSeq; ++b)
        tables.push_back(p.table.empty() ? physical(p.seq, b) : p.table[b]);
      slots.push_back(p.slot);
    }
    ForwardBatch fb;
    fb.token_ids = ids;
    fb.positions = pos;
    fb.slot_mapping = slot_map;
    fb.query_start = qs;
    fb.seq_lens = lens;
    fb.block_tables = tables;
    fb.max_blocks_per_seq = kBlocksPerSeq;
    fb.logits_rows = rows;
    fb.state_slots = slots;
    fb.state_restores = restores;
    fb.state_snapshots = snaps;
    const int64_t vocab = m_.config().vocab_size;
    std::vector<float> logits(rows.size() * vocab);
    Status s = m_.forward(fb, kv_, ops_, logits.data());
    EXPECT_TRUE(s.ok()) << s.to_string();
    return logits;
  }

  int64_t vocab() const { return m_.config().vocab_size; }
  static int32_t argmax(const float* x, int64_t n) {
    return static_cast<int32_t>(std::max_element(x, x + n) - x);
  }

  // Prefill `tokens` in chunks of `chunk` (0: whole) then `gen` greedy decode steps; returns the
  // generated ids and appends every step's last-token logits to `all`.
  std::vector<int32_t> generate(int seq, int slot, const std::vector<int32_t>& tokens,
                                int64_t chunk, int gen, std::vector<float>* all = nullptr) {
    const int64_t n = static_cast<int64_t>(tokens.size());
    if (chunk == 0) chunk = n;
    std::vector<float> last;
    for (int64_t b = 0; b < n; b += chunk) {
      Part p{seq, slot, {tokens.begin() + b, tokens.begin() + std::min(n, b + chunk)}, b};
      last = step({p});
    }
    std::vector<int32_t> out;
    int64_t pos = n;
    for (int g = 0; g < gen; ++g) {
      if (all != nullptr) all->insert(all->end(), last.begin(), last.end());
      const int32_t next = argmax(last.data(), vocab());
      out.push_back(next);
      last = step({Part{seq, slot, {next}, pos++}});
    }
    return out;
  }

 private:
  Model& m_;
  ThreadPool& pool_;
  const KernelOps& ops_;
  std::vector<std::vector<std::byte>> storage_;
  std::vector<PagedKvLayer> kv_;
};

std::unique_ptr<Model> make(const DeepseekV4Config& c, const dsv4::ModelWeights& w,
                            ThreadPool& pool) {
  WorkspaceLimits lim;
  lim.max_num_tokens = 1200;
  lim.max_seq_len = 512;
  lim.max_logit_rows = 256;
  auto m = make_deepseek_v4_model(c, w, DType::kF32, lim, &pool);
  EXPECT_TRUE(m.ok()) << m.status().to_string();
  return std::move(m).value();
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

TEST(DeepseekV4Model, KvSpecOfEachLayerKind) {
  const DeepseekV4Config c = tiny_config(72);  // nope 64: the fp8 layout applies
  const KvSpec k = deepseek_v4_kv_spec(c);
  ASSERT_TRUE(k.hybrid() && k.has_state());
  EXPECT_EQ(k.block_size_multiple, 128);  // an HCA layer
  // F32: window-only 0; CSA 32 rows of 72 + 32 indexer keys of 16; HCA 1 row of 72.
  EXPECT_EQ(k.layer_block_bytes(0, 128, DType::kF32), 0);
  EXPECT_EQ(k.layer_block_bytes(1, 128, DType::kF32), 32 * 72 * 4 + 32 * 16 * 4);
  EXPECT_EQ(k.layer_block_bytes(2, 128, DType::kF32), 72 * 4);
  EXPECT_EQ(k.layer_block_bytes(1, 256, DType::kBF16), 64 * 72 * 2 + 64 * 16 * 2);
  // FP8: the published layout's block (data 64 + 2*8 = 80, scales 1 + 1 = 2 per row, padded to
  // a multiple of 80) and e4m3 indexer keys with one f32 scale (16 + 4).
  auto l = dsv4::fp8_kv_block_layout(72, 8, 32);
  ASSERT_TRUE(l.ok());
  EXPECT_EQ(k.layer_block_bytes(1, 128, DType::kF8E4M3), l->block_bytes() + 32 * 20);
  // The state: ring of 8 rows + pending rows, grows with nothing else.
  EXPECT_GT(k.state_bytes_per_slot(DType::kF32), 3 * 8 * 72 * 4);
  // The real configs: 584 B rows, 132 B indexer keys, blocks of 256 as the report runs them.
  STRATA_REQUIRE_SHARED("configs/deepseek-v4-flash/config.json");
  auto j = read_json_file(testing::shared_data_path("configs/deepseek-v4-flash/config.json"));
  ASSERT_TRUE(j.ok());
  auto flash = dsv4::parse_deepseek_v4_config(*j);
  ASSERT_TRUE(flash.ok());
  const KvSpec f = deepseek_v4_kv_spec(*flash);
  EXPECT_EQ(f.block_size_multiple, 128);
  EXPECT_EQ(f.layer_block_bytes(0, 256, DType::kF8E4M3), 0);  // window-only
  auto l64 = dsv4::fp8_kv_block_layout(512, 64, 64);
  auto l2 = dsv4::fp8_kv_block_layout(512, 64, 2);
  EXPECT_EQ(f.layer_block_bytes(2, 256, DType::kF8E4M3), l64->block_bytes() + 64 * 132);
  EXPECT_EQ(f.layer_block_bytes(3, 256, DType::kF8E4M3), l2->block_bytes());
  const std::string d = f.describe(DType::kF8E4M3, 256, 65536);
  EXPECT_NE(d.find("584 B per window/c4/c128 row"), std::string::npos) << d;
  EXPECT_NE(d.find("132 B per indexer key"), std::string::npos) << d;
  // What one decode token reads at 64k: exactly what dsv4::kv_bytes says the layout reads (the
  // window, the top-k CSA rows and every indexer key, every HCA row), far less than it holds.
  auto kb = dsv4::kv_bytes(*flash, 65536);
  ASSERT_TRUE(kb.ok());
  ASSERT_TRUE(static_cast<bool>(f.decode_read_bytes));
  EXPECT_EQ(f.decode_read_bytes(DType::kF8E4M3, 65536), kb->decode_read);
  EXPECT_LT(f.decode_read_bytes(DType::kF8E4M3, 65536), kb->c4 + kb->c128 + kb->indexer);
}

TEST(DeepseekV4Model, LogitsMatchTheFloat64Reference) {
  const DeepseekV4Config c = tiny_config();
  const dsv4::ModelWeights w = dsv4::random_model_weights(c, 7);
  ThreadPool pool(2);
  auto m = make(c, w, pool);
  Harness h(*m, DType::kF32, pool);
  const int64_t t = 140;  // 35 CSA rows (top-3 chosen), 1 HCA row, window 8
  const std::vector<int32_t> tokens = prompt(t, 1);
  std::vector<double> want(t * c.vocab_size);
  dsv4::model_forward_ref(c, w, tokens.data(), t, want.data());
  // In chunks of 70 (the logits-row limit), so the second chunk also reads the state.
  std::vector<float> got =
      h.step({Harness::Part{0, 0, {tokens.begin(), tokens.begin() + 70}, 0}}, true);
  std::vector<float> b =
      h.step({Harness::Part{0, 0, {tokens.begin() + 70, tokens.end()}, 70}}, true);
  got.insert(got.end(), b.begin(), b.end());
  // compute_logits() of rows of the last step = forward()'s; hidden_states() are the hc_head
  // collapse, finite and of the model's width.
  {
    const std::vector<int32_t> rows = {69, 3};
    std::vector<float> again(2 * c.vocab_size), hidden(2 * c.hidden_size);
    const KernelOps& ops = kernel_ops(default_kernel_variant());
    ASSERT_TRUE(m->compute_logits(rows, ops, again.data()).ok());
    for (int64_t v = 0; v < c.vocab_size; ++v) {
      ASSERT_EQ(again[v], b[69 * c.vocab_size + v]);
      ASSERT_EQ(again[c.vocab_size + v], b[3 * c.vocab_size + v]);
    }
    ASSERT_TRUE(m->hidden_states(rows, true, ops, hidden.data()).ok());
    for (float x : hidden) ASSERT_TRUE(std::isfinite(x));
    EXPECT_FALSE(m->compute_logits(std::vector<int32_t>{70}, ops, again.data()).ok());
  }
  double worst = 0;
  int same = 0;
  for (int64_t p = 0; p < t; ++p) {
    const double e = rel_err(&got[p * c.vocab_size], &want[p * c.vocab_size], c.vocab_size);
    worst = std::max(worst, e);
    const int64_t ref_arg =
        std::max_element(&want[p * c.vocab_size], &want[(p + 1) * c.vocab_size]) -
        &want[p * c.vocab_size];
    same += Harness::argmax(&got[p * c.vocab_size], c.vocab_size) == ref_arg;
  }
  // float32 (packed F32 matmuls, float accumulation) against float64: 1e-4 of the largest logit.
  EXPECT_LT(worst, 1e-4);
  EXPECT_EQ(same, t);
}

TEST(DeepseekV4Model, ChunkingAndBatchingDoNotChangeTheResult) {
  const DeepseekV4Config c = tiny_config();
  const dsv4::ModelWeights w = dsv4::random_model_weights(c, 8);
  ThreadPool pool(2);
  auto m = make(c, w, pool);
  Harness h(*m, DType::kF32, pool);
  const std::vector<int32_t> tokens = prompt(137, 2);
  std::vector<float> la, lb, lc;
  const auto whole = h.generate(0, 0, tokens, 0, 8, &la);
  const auto chunked = h.generate(1, 1, tokens, 4, 8, &lb);
  const auto single = h.generate(2, 2, tokens, 1, 8, &lc);
  EXPECT_EQ(whole, chunked);
  EXPECT_EQ(whole, single);
  EXPECT_EQ(la, lb);  // bitwise
  EXPECT_EQ(la, lc);

  // Eight sequences of different lengths alone, then all in one batch (prefill together, then
  // decode together).
  const int kSeqs = 8, kGen = 6;
  std::vector<std::vector<int32_t>> prompts, alone;
  for (int s = 0; s < kSeqs; ++s) {
    prompts.push_back(prompt(135 - 13 * s, 10 + s));
    alone.push_back(h.generate(s, s, prompts.back(), 0, kGen));
  }
  std::vector<Harness::Part> parts;
  for (int s = 0; s < kSeqs; ++s) parts.push_back({s, s, prompts[s], 0});
  std::vector<float> logits = h.step(parts);
  std::vector<std::vector<int32_t>> batched(kSeqs);
  for (int g = 0; g < kGen; ++g) {
    parts.clear();
    for (int s = 0; s < kSeqs; ++s) {
      const int32_t next = Harness::argmax(&logits[s * h.vocab()], h.vocab());
      batched[s].push_back(next);
      parts.push_back({s, s, {next}, static_cast<int64_t>(prompts[s].size()) + g});
    }
    logits = h.step(parts);
  }
  for (int s = 0; s < kSeqs; ++s) EXPECT_EQ(alone[s], batched[s]) << "sequence " << s;
}

TEST(DeepseekV4Model, SnapshotAtABlockBoundaryRestoresExactly) {
  const DeepseekV4Config c = tiny_config();
  const dsv4::ModelWeights w = dsv4::random_model_weights(c, 9);
  ThreadPool pool(2);
  auto m = make(c, w, pool);
  Harness h(*m, DType::kF32, pool);
  const std::vector<int32_t> tokens = prompt(150, 3);
  // Sequence 0 (slot 0): 136 tokens, snapshot of its state at 128 into slot 9.
  h.step({Harness::Part{0, 0, {tokens.begin(), tokens.begin() + 136}, 0}}, false, {},
         {ForwardBatch::StateSnapshot{0, 128, 9}});
  // ... then it goes on uninterrupted.
  std::vector<float> a = h.step({Harness::Part{0, 0, {tokens.begin() + 136, tokens.end()}, 136}});
  // Sequence 1 (slot 1, its slot full of another sequence's state first) shares block 0 (the
  // cached prefix) and resumes at 128 from the snapshot.
  h.generate(1, 1, prompt(40, 4), 0, 2);
  Harness::Part p{1, 1, {tokens.begin() + 128, tokens.end()}, 128};
  p.table = {Harness::physical(0, 0), Harness::physical(1, 1), Harness::physical(1, 2),
             Harness::physical(1, 3)};
  std::vector<float> b = h.step({p}, false, {ForwardBatch::StateCopy{9, 1}});
  EXPECT_EQ(a, b);  // bitwise
  // And one more decode step each.
  const int32_t next = Harness::argmax(a.data(), h.vocab());
  a = h.step({Harness::Part{0, 0, {next}, 150}});
  p.tokens = {next};
  p.start = 150;
  b = h.step({p});
  EXPECT_EQ(a, b);
}

TEST(DeepseekV4Model, Fp8KvStaysCloseToF32) {
  const DeepseekV4Config c = tiny_config(72);
  const dsv4::ModelWeights w = dsv4::random_model_weights(c, 10);
  ThreadPool pool(2);
  auto m32 = make(c, w, pool);
  auto m8 = make(c, w, pool);
  Harness h32(*m32, DType::kF32, pool), h8(*m8, DType::kF8E4M3, pool);
  const std::vector<int32_t> tokens = prompt(140, 5);
  std::vector<float> a = h32.step({Harness::Part{0, 0, tokens, 0}}, true);
  std::vector<float> b = h8.step({Harness::Part{0, 0, tokens, 0}}, true);
  // Per position, max |fp8 - f32| / max |f32| of its logits. e4m3 rows (3 mantissa bits, a
  // power-of-two scale per 64 values), bf16 rope values and e4m3 indexer keys put a single
  // token's logits ~2.5 % off; over 140 tokens and three layers the routing (top-2 of 8 experts)
  // and the indexer's top-3 flip now and then, which moves a position's logits by up to ~0.7
  // of the largest: so the bound is on the median and on the greedy choices.
  const int64_t V = c.vocab_size;
  std::vector<double> errs;
  int same = 0;
  for (int64_t p = 0; p < 140; ++p) {
    double num = 0, den = 0;
    for (int64_t v = 0; v < V; ++v) {
      num = std::max<double>(num, std::abs(a[p * V + v] - b[p * V + v]));
      den = std::max<double>(den, std::abs(a[p * V + v]));
    }
    errs.push_back(num / den);
    same += Harness::argmax(&a[p * V], V) == Harness::argmax(&b[p * V], V);
  }
  EXPECT_GT(errs[0], 0.0);  // it did go through fp8
  EXPECT_LT(errs[0], 0.05);
  // Measured on this config: median 0.06, greedy choices equal at 121 of 140 positions.
  std::sort(errs.begin(), errs.end());
  EXPECT_LT(errs[70], 0.1) << "median";
  EXPECT_GE(same, 112) << "greedy choices equal at " << same << " of 140 positions";
  // Chunked fp8 prefill equals the whole (the ring holds the same bytes the step used).
  auto mc = make(c, w, pool);
  Harness hc(*mc, DType::kF8E4M3, pool);
  const auto whole = h8.generate(1, 1, tokens, 0, 4);
  const auto chunked = hc.generate(1, 1, tokens, 4, 4);
  EXPECT_EQ(whole, chunked);
}

TEST(DeepseekV4Model, ScaledFlashDummyLoadsAndItsEstimateMatches) {
  STRATA_REQUIRE_SHARED("configs/deepseek-v4-flash/config.json");
  ThreadPool pool(2);
  LoadOptions o;
  o.model = testing::shared_data_path("configs/deepseek-v4-flash");
  o.load_format = "dummy";
  o.hf_overrides =
      R"({"num_hidden_layers": 4, "hidden_size": 256, "num_attention_heads": 4,
          "q_lora_rank": 64, "o_lora_rank": 32, "o_groups": 2, "n_routed_experts": 8,
          "moe_intermediate_size": 64, "vocab_size": 512, "index_n_heads": 4,
          "index_topk": 16})";
  o.seed = 3;
  o.pool = &pool;
  o.limits = {64, 1024, 8};
  auto loaded = load_model(o);
  ASSERT_TRUE(loaded.ok()) << loaded.status().to_string();
  auto est = estimate_model_memory(o, pool.size());
  ASSERT_TRUE(est.ok()) << est.status().to_string();
  const Model& mm = *loaded->model;
  EXPECT_EQ(est->weights.total(), mm.weight_bytes_total());
  EXPECT_EQ(est->workspace_bytes, mm.workspace_bytes());
  EXPECT_EQ(est->kv_spec.block_size_multiple, mm.kv_spec().block_size_multiple);
  for (int64_t l = 0; l < 4; ++l)
    EXPECT_EQ(est->kv_spec.layer_block_bytes(l, 256, DType::kF8E4M3),
              mm.kv_spec().layer_block_bytes(l, 256, DType::kF8E4M3));
  // Pipeline parallelism is refused clearly; a tensor-parallel rank's estimate holds its share
  // (tests/dist/dist_v4_test.cpp runs the ranks).
  o.parallel.pp_size = 2;
  auto pp = load_model(o);
  ASSERT_FALSE(pp.ok());
  EXPECT_NE(pp.status().message().find("--pipeline-parallel-size 1"), std::string::npos)
      << pp.status().message();
  o.parallel.pp_size = 1;
  o.parallel.tp_size = 2;
  auto half = estimate_model_memory(o, pool.size());
  ASSERT_TRUE(half.ok()) << half.status().to_string();
  EXPECT_EQ(half->weights.routed_experts * 2, est->weights.routed_experts);
  EXPECT_LT(half->weights.total(), est->weights.total());
}

}  // namespace
}  // namespace strata
